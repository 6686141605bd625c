"""The database itself: writers in several processes, read-only and locked files, URLs, SQLite's settings, light
imports, charts from the results (analysis/results_db/engine.py, queries.py)."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pytest

from analysis import glue
from analysis import results_db as db
from core.errors import DatabaseUnavailable
from tests.helpers import ROOT
from tests.helpers.results import ROWS, csv_of
from tests.helpers.results import count_results as count

SEEDS = ROOT.parent / "shared" / "seeds"


# --------------------------------------------------------------------- concurrency, files, URLs
def test_eight_writers_at_once(engine) -> None:
    before = count(engine)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(t: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                db.add_result(db.NewResult(model=f"writer-{t}", variant=f"run {i}", task="SST-2", metric="acc", split="dev",
                              value=80 + i / 10, source="Liu et al. 2019, class re-run"), engine)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]
    df = db.results_frame(engine, tasks=["SST-2"])
    mine = df[df["model"].str.startswith("writer-")]
    assert len(mine) == 400 == count(engine) - before
    assert Counter(mine["model"]) == {f"writer-{t}": 50 for t in range(8)}
    assert not mine.duplicated(["model", "variant"]).any()


def test_a_read_only_database_says_so_and_keeps_its_data(lite, tmp_path) -> None:
    path = tmp_path / "r.db"
    before = count(lite)
    db.dispose_engines()
    ro = db.get_engine(f"sqlite:///file:{path}?mode=ro&uri=true")
    assert len(db.results_frame(ro)) == before  # reading works
    with pytest.raises(DatabaseUnavailable, match="read-only"):
        db.add_result(db.NewResult(model="Tiny", task="CoLA", metric="mcc", split="dev", value=40.0, source="Liu et al. 2019, class re-run"), ro)
    db.dispose_engines()
    assert count(db.get_engine(f"sqlite:///{path}")) == before


def test_a_locked_database_says_so_and_writes_nothing(lite, tmp_path, monkeypatch) -> None:
    path = tmp_path / "r.db"
    before = count(lite)
    db.dispose_engines()
    monkeypatch.setattr(db.engine, "SQLITE_BUSY_TIMEOUT_S", 0.3)
    eng = db.get_engine(f"sqlite:///{path}")
    db.ensure_seeded(eng)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(DatabaseUnavailable, match="locked"):
            db.import_csv(csv_of(ROWS), eng)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert count(eng) == before


@pytest.mark.parametrize("url", ["not a url", "nosuchdb://x/y"])
def test_a_bad_database_url_is_explained(url: str) -> None:
    with pytest.raises(DatabaseUnavailable):
        db.results_frame(db.get_engine(url))


def test_default_database_lives_outside_the_repository(monkeypatch) -> None:
    monkeypatch.delenv("DATABASE_URL")
    url = db.default_url()
    from analysis.results_db.engine import _normalise_url

    path = Path(_normalise_url(url).database)
    assert url.startswith("sqlite:///") and path.parts[-4:] == (".local", "share", "bert-family-explorer", "results.db")
    assert path.is_absolute() and ROOT not in path.parents


def test_sqlite_uses_wal_and_a_busy_timeout(lite) -> None:
    with lite.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar() == int(db.SQLITE_BUSY_TIMEOUT_S * 1000)
        assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1


def test_the_library_imports_neither_torch_nor_streamlit() -> None:
    code = ("import sys; import analysis.results_db, analysis.glue, analysis.glue_plots; "
            "print([m for m in ('torch', 'transformers', 'streamlit', 'gradio') if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "[]"


def test_charts_have_a_trace_per_model(lite) -> None:
    from analysis import glue_plots

    df = db.results_frame(lite, models=["BERT-base", "BERT-large", "RoBERTa-large", "DistilBERT"], tasks=["MNLI", "SST-2", "CoLA"],
                          splits=["dev"], variants=False)
    comp = glue.compare(df[df["metric"].isin(["acc_m", "acc", "mcc"])])
    assert len(glue_plots.grouped_bars(comp).data) == 4
    overlaid, each = glue_plots.radar(comp), glue_plots.radar(comp, separate=True)
    assert len(overlaid.data) == 4 and {t.subplot for t in overlaid.data} == {"polar"}
    assert len({t.subplot for t in each.data}) == 4  # one radar per model
    heat = glue_plots.delta_heatmap(glue.deltas(comp, "BERT-base"), "BERT-base")
    base_row = list(comp.values.index).index("BERT-base")
    assert all(v == 0 or v != v for v in heat.data[0].z[base_row])
    pts = glue.size_points(comp, "MNLI m")
    assert pts["label"].iloc[0] == "DistilBERT" and pts["parameters"].is_monotonic_increasing
