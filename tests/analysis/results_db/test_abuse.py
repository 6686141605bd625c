"""Adversarial probes of the results database: concurrent writer *processes*, kill -9 mid-import,
hostile names and values, and exports that would attack their readers.

Each probe asserts the specific error or the intact data, under a time bound that a hang would break.
The multi-process probes take several seconds and are marked ``slow`` (CI runs them; ``-m "not slow"``
skips them locally).
"""

from __future__ import annotations

import csv
import io
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import func, select

from analysis import glue, glue_plots
from analysis import results_db as db
from analysis.safe_text import csv_bytes, markdown_text, neutralise_cell, restore_cell
from core.errors import DuplicateResult, InvalidResult
from tests.helpers import ROOT, db_stress
from tests.helpers.postgres import fresh_pg as _fresh_pg
from tests.helpers.results import count_results as _count

GOOD = dict(task="CoLA", metric="mcc", split="dev", value=40.0, source="Doe et al. 2026, class project")


def _assert_all_stored(report: db_stress.StressReport, url: str) -> None:
    assert not report.errors, report.errors[:3]
    assert report.refused == {}, report.refused
    assert report.stored == report.attempted == report.processes * report.rounds, report.summary()
    db.dispose_engines()
    eng = db.get_engine(url)
    with db.session(eng) as s:
        stored = s.scalar(select(func.count()).select_from(db.Result).join(db.Model, db.Result.model_id == db.Model.id)
                          .where(db.Model.name.like("Writer %")))
        sources = s.scalar(select(func.count()).select_from(db.Source).where(db.Source.title.like("Concurrent round %")))
    assert stored == report.processes * report.rounds
    assert sources == report.rounds  # one shared source per round, reused by every process, never duplicated


# ------------------------------------------------------------------ concurrent writers, by process
@pytest.mark.slow
def test_processes_on_a_fresh_sqlite_file_all_start_and_every_write_is_stored(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    t0 = time.monotonic()
    report = db_stress.run(url, processes=8, rounds=4)
    _assert_all_stored(report, url)
    assert len(report.setup_seconds) == 8  # every process's first start succeeded
    assert time.monotonic() - t0 < 200


@pytest.mark.slow
def test_processes_on_a_seeded_sqlite_file_store_every_write(lite) -> None:
    url = str(lite.url)
    report = db_stress.run(url, processes=8, rounds=4)
    _assert_all_stored(report, url)


@pytest.mark.slow
def test_processes_on_postgresql_store_every_write_citing_one_new_source(pg_url: str) -> None:
    url = _fresh_pg(pg_url)
    report = db_stress.run(url, processes=8, rounds=4)
    _assert_all_stored(report, url)
    assert len(report.setup_seconds) == 8


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_processes_adding_the_same_result_store_it_once(backend: str, tmp_path: Path, request) -> None:
    url = f"sqlite:///{tmp_path / 'same.db'}" if backend == "sqlite" else _fresh_pg(request.getfixturevalue("pg_url"))
    report = db_stress.run(url, processes=6, rounds=2, same=True)
    assert not report.errors, report.errors[:3]
    assert report.stored == 2 and report.attempted == 12, report.summary()
    assert set(report.refused) <= {m for m in report.refused if m.startswith("DuplicateResult")}, report.refused


# ------------------------------------------------------------------------------ kill -9 mid-import
_IMPORTER = """
import sys
from analysis import results_db as db
rows = ["model,variant,task,metric,split,value,source"] + [f"Killed,run {i},SST-2,acc,dev,80,Kill et al. 2026, probe" for i in range(4000)]
raw = "\\n".join(r if i == 0 else r.replace("Kill et al. 2026, probe", '"Kill et al. 2026, probe"') for i, r in enumerate(rows)).encode()
print("go", flush=True)
db.import_csv(raw, db.get_engine(sys.argv[1]))
print("done", flush=True)
"""


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.05, 0.4, 1.2])
def test_kill_9_during_an_import_leaves_all_rows_or_none(lite, tmp_path: Path, delay: float) -> None:
    url, before = str(lite.url), _count(lite)
    db.dispose_engines()
    proc = subprocess.Popen([sys.executable, "-c", _IMPORTER, url], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "go"
    time.sleep(delay)
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    path = url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as con:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    eng = db.get_engine(url)
    after = _count(eng)
    assert after in (before, before + 4000)
    db.add_result(db.NewResult(model="After the kill", **GOOD), eng)  # the database still takes writes
    assert _count(eng) == after + 1


# ------------------------------------------------------------------------------ hostile names, values
@pytest.mark.parametrize(("name", "message"), [
    ("BERT\u202egnp.exe", "U\\+202E"),             # right-to-left override
    ("BE\u200bRT-base", "U\\+200B"),                # zero-width space: would look like BERT-base
    ("\u2066BERT\u2069", "U\\+2066"),              # bidi isolate
    ("two\nlines", "line break"),
    ("tab\there", "U\\+0009"),
    ("bell\x07", "U\\+0007"),
    ("soft\u00adhyphen", "U\\+00AD"),
])
def test_invisible_and_bidi_characters_are_refused_in_names(lite, name: str, message: str) -> None:
    before = _count(lite)
    for field in ("model", "variant", "table", "source"):
        fields = {**GOOD, "model": "Fine", field: name + (" 2026 citation" if field == "source" else "")}
        with pytest.raises(InvalidResult, match=message):
            db.add_result(db.NewResult(**fields), lite)
    assert _count(lite) == before


def test_look_alike_names_are_normalised_to_the_plain_letters(lite) -> None:
    rid = db.add_result(db.NewResult(model="ＢＥＲＴ-base", **GOOD), lite).id  # full-width letters: NFKC makes them BERT-base
    df = db.results_frame(lite)
    assert df.loc[df["id"] == rid, "model"].item() == "BERT-base"
    with pytest.raises(DuplicateResult):
        db.add_result(db.NewResult(model="BERT-base", **GOOD), lite)


def test_a_user_row_cannot_pass_for_a_published_one(lite) -> None:
    for key in db.seed_source_keys():
        with pytest.raises(InvalidResult, match="published sources"):
            db.add_result(db.NewResult(model="Mine", **dict(GOOD, source=key.upper())), lite)
    rid = db.add_result(db.NewResult(model="Mine", **dict(GOOD, source="Devlin et al. 2019")), lite).id
    df = db.results_frame(lite)
    row = df[df["id"] == rid].iloc[0]
    assert row["origin"] == "user" and row["citation"].endswith(db.USER_MARK) and row["source"] not in db.seed_source_keys()


@pytest.mark.parametrize(("value", "message"), [
    (True, "not a number"), (False, "not a number"), (10**400, "too large"), ("1e400", "finite"), ("-1e400", "finite"),
    ("nan", "finite"), ("inf", "finite"), (None, "not a number"), ([1, 2], "not a number"), ("9" * 5000, "finite|not a number"),
])
def test_absurd_values_are_refused_with_a_message(lite, value, message: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(InvalidResult, match=message):
        db.add_result(db.NewResult(model="Mine", **dict(GOOD, value=value)), lite)
    assert time.perf_counter() - t0 < 2


@pytest.mark.parametrize("parameters", ["1e400", "-1", "0", "1.5", "1e15", "NaN", "0x10"])
def test_absurd_parameter_counts_are_refused(lite, parameters: str) -> None:
    with pytest.raises(InvalidResult, match="parameters"):
        db.add_result(db.NewResult(model="Mine", parameters=parameters, **GOOD), lite)


@pytest.mark.parametrize("rid", ["abc", None, True, -1, "1; DROP TABLE bfe_results", 1.5, "9" * 40])
def test_hostile_ids_to_delete_are_refused(lite, rid) -> None:
    before = _count(lite)
    with pytest.raises(InvalidResult):
        db.delete_result(rid, lite)
    assert _count(lite) == before


# ------------------------------------------------------------------------- exports that attack readers
FORMULAS = ["=HYPERLINK(\"http://x\",\"click\")", "+cmd|' /C calc'!A0", "-2+3+cmd|' /C calc'!A0", "@SUM(1+1)*cmd|' /C calc'!A0"]


def test_csv_cells_that_would_run_as_formulas_are_neutralised_and_numbers_stay_numbers() -> None:
    for f in [*FORMULAS, "\tX", "\rX"]:
        assert neutralise_cell(f) == "'" + f and restore_cell(neutralise_cell(f)) == f
    for keep in ["-1.5", "+3", "-2e-3", "12%", "plain", "", "'quoted"]:
        assert neutralise_cell(keep) == keep
    df = pd.DataFrame({"name": FORMULAS, "value": [-1.5, 2.0, -3.0, 4.0], "=col": ["a", "b", "c", "d"]})
    rows = list(csv.reader(io.StringIO(csv_bytes(df).decode())))
    assert rows[0] == ["name", "value", "'=col"]
    assert all(r[0].startswith("'") for r in rows[1:]) and [r[1] for r in rows[1:]] == ["-1.5", "2.0", "-3.0", "4.0"]


def test_exported_formulas_are_inert_and_import_back_unchanged(lite) -> None:
    ids = [db.add_result(db.NewResult(model=f.replace(",", ";"), **dict(GOOD, variant=f"v{i}", note=f)), lite).id for i, f in enumerate(FORMULAS)]
    df = db.results_frame(lite)
    mine = df[df["id"].isin(ids)]
    raw = db.export_rows(mine)
    for row in list(csv.DictReader(io.StringIO(raw.decode())))[:4]:
        assert row["model"].startswith("'") and row["note"].startswith("'")
    for i in ids:
        db.delete_result(i, lite)
    report = db.import_csv(raw, lite)
    back = db.results_frame(lite)
    back = back[back["id"].isin(report.ids)].sort_values("variant")
    assert back["model"].tolist() == [f.replace(",", ";") for f in FORMULAS] and back["note"].tolist() == FORMULAS


def test_markdown_latex_and_html_exports_escape_hostile_names(lite) -> None:
    for i, name in enumerate(["a|b", "<img src=x onerror=alert(1)>", "*bold* _it_ [link](http://x)", "\\textbf{x} & 100% $"]):
        db.add_result(db.NewResult(model=name, **dict(GOOD, variant=f"h{i}")), lite)
    df = db.results_frame(lite, tasks=["CoLA"], splits=["dev"])
    comp = glue.compare(df[df["origin"] == "user"], collapse=False)
    md = glue_plots.to_markdown(comp)
    table = [line for line in md.splitlines() if line.startswith("|")]
    widths = {len([c for c in __import__("re").split(r"(?<!\\)\|", line)]) for line in table}
    assert len(widths) == 1, table  # an escaped pipe never adds a column
    assert "<img" not in md and "&lt;img" in md and "\\*bold\\*" in md and "[link]" not in md
    assert "<img" not in glue_plots.to_html(comp)
    tex = glue_plots.to_latex(comp)
    assert "\\textbackslash{}textbf" in tex and "\\&" in tex and "100\\%" in tex
    assert markdown_text("x\ny|z") == "x y\\|z"
