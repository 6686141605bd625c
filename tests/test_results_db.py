"""The results database: seed integrity against the slides, recomputed scores, seeding, constraints,
validation, import/export, concurrency, read-only and locked files, on SQLite and on a real PostgreSQL."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import func, insert, select
from sqlalchemy.exc import IntegrityError

from analysis import glue
from analysis import results_db as db
from core.errors import DatabaseUnavailable, DuplicateResult, InvalidResult
from tests.support import count_results as count

ROOT = Path(__file__).resolve().parent.parent
SEEDS = ROOT.parent / "shared" / "seeds"


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path):
    """A fresh, seeded database on each backend."""
    db.dispose_engines()
    if request.param == "sqlite":
        eng = db.get_engine(f"sqlite:///{tmp_path / 'r.db'}")
    else:
        eng = db.get_engine(request.getfixturevalue("pg_url"))
        db.drop_tables(eng)
    db.ensure_seeded(eng)
    yield eng
    db.dispose_engines()


def value(df: pd.DataFrame, **where) -> float:
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, (where, rows[["model", "variant", "task", "metric", "split", "source", "table"]])
    return float(rows["value"].iloc[0])


# ------------------------------------------------------------------------------- seed integrity
EXPECTED_PER_SOURCE = {"devlin2019": 74, "radford2018": 30, "liu2019": 149, "yang2019": 99, "lan2020": 384, "sanh2019": 37,
                       "sanh2019blog": 41, "sun2020": 93, "shoeybi2019": 73, "you2020": 9, "rosset2020": 6, "peters2019": 33,
                       "gao2020": 15}


def test_seed_counts_per_source(engine) -> None:
    df = db.results_frame(engine)
    assert df.groupby("source").size().to_dict() == EXPECTED_PER_SOURCE
    assert len(df) == sum(EXPECTED_PER_SOURCE.values()) == count(engine)
    # every file in the manifest is loaded, every row once
    manifest = json.loads((db.DATA_DIR / "manifest.json").read_text())
    csv_rows = sum(len((db.DATA_DIR / f).read_text(encoding="utf-8").strip().splitlines()) - 1 for f in manifest["results"])
    assert csv_rows == len(df)
    assert set(df["origin"]) == {"seed"}
    assert db.meta(engine) == {"schema_version": str(db.SCHEMA_VERSION), "seed_version": db.seed_version()}


def test_reference_tables_are_complete(engine) -> None:
    tasks = db.catalog_frame("tasks", engine).set_index("key")
    # the nine GLUE tasks with their metrics, AX, SQuAD 1.1/2.0, RACE
    for key, metrics in {"CoLA": "Matthews corr.", "STS-B": "Pearson/Spearman corr.", "MRPC": "acc./F1", "QQP": "acc./F1",
                         "MNLI": "matched acc./mismatched acc.", "SST-2": "acc.", "QNLI": "acc.", "RTE": "acc.", "WNLI": "acc.",
                         "AX": "Matthews corr.", "SQuAD 1.1": "EM/F1", "SQuAD 2.0": "EM/F1"}.items():
        assert tasks.loc[key, "metrics"] == metrics
    assert "RACE" in tasks.index
    # the GLUE task table of the slides (001): train/test sizes and domain
    assert tuple(tasks.loc["QQP", ["train_size", "test_size", "domain"]]) == ("364k", "391k", "social QA questions")
    assert tuple(tasks.loc["WNLI", ["train_size", "test_size", "domain"]]) == ("634", "146", "fiction books")
    metrics = db.catalog_frame("metrics", engine)
    assert {("MNLI", "acc_m"), ("MNLI", "acc_mm"), ("STS-B", "pearson"), ("STS-B", "spearman"), ("CoLA", "mcc"),
            ("SQuAD 2.0", "em"), ("SQuAD 2.0", "f1")} <= set(zip(metrics["task"], metrics["metric"], strict=True))
    sources = db.catalog_frame("sources", engine).set_index("key")
    assert sources.loc["liu2019", "arxiv"] == "1907.11692" and sources.loc["lan2020", "year published"] == 2020
    # both years, labelled: ALBERT was posted to arXiv in 2019 and published (ICLR) in 2020
    assert sources.loc["lan2020", "first arXiv"] == 2019
    arxiv = sources[sources["first arXiv"].notna()]
    late = arxiv[arxiv["first arXiv"] > arxiv["year published"]]
    assert list(late.index) == ["gao2020"] and "31 December 2020" in late.loc["gao2020", "note"]  # an id of the next month's listing


def test_catalog_links_exist() -> None:
    catalog = {m["id"] for m in json.loads((ROOT / "data" / "catalog.json").read_text())["models"]}
    models = pd.read_csv(db.DATA_DIR / "models.csv", dtype=str, keep_default_na=False)
    linked = [c for c in models["catalog_id"] if c]
    assert len(linked) >= 15 and set(linked) <= catalog


def test_every_paper_number_carries_its_source(engine) -> None:
    df = db.results_frame(engine)
    assert df["source"].str.len().gt(0).all() and df["table"].str.len().gt(0).all() and df["slides"].str.len().gt(0).all()
    assert df["split"].isin(db.SPLITS).all() and df["setting"].isin(db.SETTINGS).all()
    # leaderboard snapshots where the slides give one
    snap = df[(df["source"] == "liu2019") & (df["split"] == "test")]
    assert {str(d) for d in snap["snapshot"]} == {"2019-07-25"}
    assert {str(d) for d in df[(df["source"] == "lan2020") & (df["table"] == "Table 9") & (df["split"] == "test")]["snapshot"]} == {"2019-09-16"}


# The slides' own lines (tabs as in ../shared/seeds), parsed independently of the transcription.
SLIDE_TABLES = [
    dict(file="002", source="devlin2019", table="Table 1", split="test", setting="single", skip=1,
         cols=[("MNLI", "acc_m/acc_mm"), ("QQP", "f1"), ("QNLI", "acc"), ("SST-2", "acc"), ("CoLA", "mcc"), ("STS-B", "spearman"),
               ("MRPC", "f1"), ("RTE", "acc"), ("GLUE", "average")],
         rows={"OpenAI GPT\t82.1/81.4\t70.3\t87.4\t91.3\t45.4\t80.0\t82.3\t56.0\t75.1": "OpenAI GPT",
               "BERT _{BASE}\t84.6/83.4\t71.2\t90.5\t93.5\t52.1\t85.8\t88.9\t66.4\t79.6": "BERT-base",
               "BERT _{LARGE}\t86.7/85.9\t72.1\t92.7\t94.9\t60.5\t86.5\t89.3\t70.1\t82.1": "BERT-large"}),
    dict(file="002", source="liu2019", table="Table 5", split="test", setting="ensemble", skip=1,
         cols=[("MNLI", "acc_m/acc_mm"), ("QNLI", "acc"), ("QQP", "acc"), ("RTE", "acc"), ("SST-2", "acc"), ("MRPC", "f1"),
               ("CoLA", "mcc"), ("STS-B", "pearson"), ("WNLI", "acc"), ("GLUE", "score")],
         rows={"XLNet\t90.2/89.8\t98.6\t90.3\t86.3\t96.8\t93.0\t67.8\t91.6\t90.4\t88.4": "XLNet-large",
               "RoBERTa\t90.8/90.2\t98.9\t90.2\t88.2\t96.7\t92.3\t67.8\t92.2\t89.0\t88.5": "RoBERTa-large"}),
    dict(file="004", source="lan2020", table="Table 2", split="dev", setting="single", skip=3,
         cols=[("SQuAD 1.1", "f1/em"), ("SQuAD 2.0", "f1/em"), ("MNLI", "acc_m"), ("SST-2", "acc"), ("RACE", "acc"), ("ALBERT-avg", "avg")],
         rows={"BERT\tbase\t108M\t90.4/83.2\t80.4/77.6\t84.5\t92.8\t68.2\t82.3\t4.7x": "BERT-base",
               "\txxlarge\t235M\t94.1/88.3\t88.1/85.1\t88.0\t95.2\t82.3\t88.7\t0.3x": "ALBERT-xxlarge"}),
    dict(file="003", source="sanh2019blog", table="GLUE dev macro-score table", split="dev", setting="single", skip=1,
         cols=[("GLUE", "macro"), ("CoLA", "mcc"), ("MNLI", "acc_m"), ("MNLI", "acc_mm"), ("MRPC", "acc"), ("MRPC", "f1"), ("QNLI", "acc"),
               ("QQP", "acc"), ("QQP", "f1"), ("RTE", "acc"), ("SST-2", "acc"), ("STS-B", "pearson"), ("STS-B", "spearman"), ("WNLI", "acc")],
         rows={"BERT base\t78.0\t55.8\t83.7\t84.1\t86.3\t90.5\t91.1\t90.9\t87.7\t68.6\t92.1\t89.0\t88.6\t43.7": "BERT-base",
               "DistilBERT\t75.2\t42.5\t81.6\t81.1\t82.4\t88.3\t85.5\t90.6\t87.7\t60.0\t92.7\t84.5\t85.0\t55.6": "DistilBERT"}),
    dict(file="002", source="shoeybi2019", table="Table 5", split="dev", setting="single", skip=2,
         cols=[("MNLI", "acc_m/acc_mm"), ("QQP", "acc"), ("SQuAD 1.1", "f1/em"), ("SQuAD 2.0", "f1/em")],
         rows={"Megatron-3.9B\t1\t91.4 / 91.4\t92.7\t95.5 / 90.0\t91.2 / 88.5": "Megatron-3.9B",
               "Megatron-1.3B\t1\t90.9 / 91.0\t92.6\t94.9 / 89.1\t90.2 / 87.1": "Megatron-1.3B"}),
]


@pytest.mark.parametrize("spec", SLIDE_TABLES, ids=lambda s: f"{s['source']}-{s['table']}")
def test_cells_match_the_slides(spec: dict, lite) -> None:
    df = db.results_frame(lite, sources=[spec["source"]])
    df = df[(df["table"] == spec["table"]) & (df["split"] == spec["split"]) & (df["setting"] == spec["setting"]) & (df["variant"] == "")]
    seeds = sorted(SEEDS.glob(f"{spec['file']}_*.txt"))
    checked = 0
    for line, model in spec["rows"].items():
        if seeds:  # the excerpt is verbatim in the slides (../shared beside the repository, as in CI)
            assert line.replace("\t", "").replace(" ", "") in seeds[0].read_text().replace("\t", "").replace(" ", "")
        cells = line.split("\t")[spec["skip"]:]
        for (task, metrics), cell in zip(spec["cols"], cells, strict=False):
            for metric, part in zip(metrics.split("/"), cell.split("/"), strict=True):
                assert value(df, model=model, task=task, metric=metric) == float(part), (model, task, metric)
                checked += 1
    assert checked >= 10


def test_ernie_table_matches_the_slides(lite) -> None:
    """ERNIE 2.0's Table 6 has tasks as rows and (size, split, model) as columns."""
    lines = {"MRPC (Accuracy/F1)\t84.8/88.9\t86.1/89.9\t88.0/-\t89.2/-\t89.7/-\t85.4/89.3\t87.4/90.2": ("MRPC", "acc/f1"),
             "MNLI-m/mm (Accuracy)\t84.6/83.4\t86.1/85.5\t86.6/-\t89.8/-\t89.1/-\t86.7/85.9\t88.7/88.8": ("MNLI", "acc_m/acc_mm"),
             "AX(Matthew Corr.)\t34.2\t37.4\t-\t-\t-\t39.6\t48.0": ("AX", "mcc"),
             "Score\t78.3\t80.6\t-\t-\t-\t80.5\t83.6": ("GLUE", "score")}
    columns = [("BERT-base", "test"), ("ERNIE 2.0-base", "test"), ("BERT-large", "dev"), ("XLNet-large", "dev"),
               ("ERNIE 2.0-large", "dev"), ("BERT-large", "test"), ("ERNIE 2.0-large", "test")]
    df = db.results_frame(lite, sources=["sun2020"])
    df = df[df["table"] == "Table 6"]
    text = (sorted(SEEDS.glob("002_*.txt")) or [None])[0]
    checked = 0
    for line, (task, metrics) in lines.items():
        if text:
            assert line in text.read_text()
        for (model, split), cell in zip(columns, line.split("\t")[1:], strict=True):
            for metric, part in zip(metrics.split("/"), cell.split("/"), strict=False):
                if part != "-":
                    assert value(df, model=model, split=split, task=task, metric=metric) == float(part), (model, task, metric)
                    checked += 1
    assert checked == 30


def test_published_values_win_over_the_arxiv_v1_copy(lite) -> None:
    """001 holds BERT's arXiv v1 Table 1 (old QNLI); the published numbers are kept and the note says so."""
    df = db.results_frame(lite, sources=["devlin2019"])
    row = df[(df["model"] == "BERT-large") & (df["task"] == "QNLI")].iloc[0]
    assert row["value"] == 92.7 and "91.1" in row["note"]
    albert = db.results_frame(lite, sources=["lan2020"], models=["ALBERT-xxlarge"])
    avg = albert[(albert["task"] == "ALBERT-avg") & (albert["table"] == "Table 2")].iloc[0]
    assert avg["value"] == 88.7 and "garbled" in avg["note"] and "1.2x" in avg["note"]
    assert value(db.results_frame(lite, models=["BERT-xlarge"]), task="ALBERT-avg") == 76.7


# ------------------------------------------------------------------------------ recomputed scores
def test_recomputed_averages_match_the_papers(lite) -> None:
    chk = glue.score_check(db.results_frame(lite)).set_index(["citation", "table", "model", "setting"]).sort_index()
    bert = chk.loc[("Devlin et al. 2019", "Table 1")]
    # BERT's Table 1: WNLI excluded, MNLI-m and -mm separate: exact for BERT and GPT; ELMo's 71.0 is v1's (old QNLI)
    assert list(bert.loc[["BERT-base", "BERT-large", "OpenAI GPT", "Pre-OpenAI SOTA"], "status"]) == ["match"] * 4
    assert bert.loc[("BiLSTM+ELMo+Attn", "single"), "status"] == "within rounding"
    assert bert.loc[("BERT-large", "single"), "recomputed"] == pytest.approx(738.7 / 9)
    # DistilBERT's macro scores (first announcement): mean of nine task scores, two-metric tasks averaged first
    blog = chk.loc[("Sanh 2019", "GLUE dev macro-score table")]
    assert set(blog["status"]) == {"match"}
    assert blog.loc[("DistilBERT", "single"), "recomputed"] == pytest.approx(676.9 / 9)
    # the paper's Table 1: its BERT-base row averages to 79.7, not the printed 79.5
    paper = chk.loc[("Sanh et al. 2019", "Table 1")]
    assert paper.loc[("BERT-base", "single"), "status"] == "differs"
    assert paper.loc[("DistilBERT", "single"), "status"] == "match"
    # ERNIE 2.0's GLUE scores follow the official formula (WNLI in, MNLI m/mm averaged)
    assert set(chk.loc[("Sun et al. 2020", "Table 6"), "status"]) == {"match"}
    # leaderboard rows print one metric per task: not recomputable, and the page says what is missing
    lb = chk.loc[("Liu et al. 2019", "Table 5", "RoBERTa-large", "ensemble")]
    assert lb["status"] == "cannot recompute" and "QQP F1" in lb["missing"]


def test_glue_conventions_on_known_numbers() -> None:
    cells = {("CoLA", "mcc"): 60.0, ("SST-2", "acc"): 90.0, ("MRPC", "acc"): 80.0, ("MRPC", "f1"): 90.0,
             ("STS-B", "pearson"): 88.0, ("STS-B", "spearman"): 86.0, ("QQP", "acc"): 90.0, ("QQP", "f1"): 70.0,
             ("MNLI", "acc_m"): 84.0, ("MNLI", "acc_mm"): 82.0, ("QNLI", "acc"): 91.0, ("RTE", "acc"): 70.0, ("WNLI", "acc"): 65.0}
    official, missing = glue.recompute(cells, "glue")
    assert missing == [] and official == pytest.approx((60 + 90 + 85 + 87 + 80 + 83 + 91 + 70 + 65) / 9)
    assert glue.recompute(cells, "glue_no_wnli")[0] == pytest.approx((60 + 90 + 85 + 87 + 80 + 83 + 91 + 70) / 8)
    assert glue.recompute(cells, "bert")[0] == pytest.approx((84 + 82 + 70 + 91 + 90 + 60 + 86 + 90 + 70) / 9)
    cells.pop(("WNLI", "acc"))
    assert glue.recompute(cells, "glue") == (None, ["WNLI acc"])
    assert glue.status(79.6, 79.6444) == "match" and glue.status(71.0, 70.944) == "within rounding"
    assert glue.status(79.5, 79.72) == "differs" and glue.status(88.5, None) == "cannot recompute"


# ------------------------------------------------------------------------------------- seeding
def test_seeding_is_idempotent(engine) -> None:
    before = count(engine)
    again = db.ensure_seeded(engine, force=True)
    assert (again.inserted, again.updated, again.deleted) == (0, 0, 0)
    assert count(engine) == before
    assert db.ensure_seeded(engine).skipped


def test_user_rows_survive_an_upgrade_of_the_seed_data(engine, monkeypatch) -> None:
    mine = db.add_result(engine, model="My BERT", task="CoLA", metric="mcc", split="dev", value=61.2, source="Me et al. 2026, a class project",
                         parameters="110000000")
    data = db.seed_rows()
    first, second = data["results"][0], data["results"][1]
    data["results"] = data["results"][1:]                   # a row leaves the seed data
    data["results"][0] = dict(second, value="99.9")          # a row changes
    data["results"].append(dict(second, variant="new row"))  # a row is added
    data["results"].append(dict(model="My BERT", variant="", task="CoLA", metric="mcc", split="dev", setting="single", value="1.0",
                                source="liu2019", table="", slides="", snapshot="", note=""))
    monkeypatch.setattr(db.seeding, "seed_rows", lambda: data)
    monkeypatch.setattr(db.seeding, "seed_version", lambda: "next")
    before = count(engine)
    report = db.ensure_seeded(engine, force=True)
    assert (report.inserted, report.updated, report.deleted) == (2, 1, 1)
    assert count(engine) == before + 1
    assert count(engine, id=mine, origin="user") == 1
    df = db.results_frame(engine)
    assert value(df[df["origin"] == "user"], model="My BERT") == 61.2
    assert value(df, model=second["model"], variant="new row", task=second["task"], metric=second["metric"], source=second["source"],
                 split=second["split"]) == float(second["value"])
    assert db.meta(engine)["seed_version"] == "next"
    assert not ((df["model"] == first["model"]) & (df["task"] == first["task"]) & (df["metric"] == first["metric"])
                & (df["source"] == first["source"]) & (df["table"] == first["table"]) & (df["variant"] == "")).any()


def test_a_newer_schema_is_refused(lite) -> None:
    with db.session(lite, write=True) as s:
        s.get(db.Meta, "schema_version").value = str(db.SCHEMA_VERSION + 1)
    with pytest.raises(DatabaseUnavailable, match="newer version"):
        db.ensure_seeded(lite, force=True)


# ------------------------------------------------------------------------- constraints, validation
def test_constraints_stop_a_result_stored_twice(engine) -> None:
    with db.session(engine) as s:
        row = s.scalars(select(db.Result).limit(1)).one()
        dup = {c: getattr(row, c) for c in ("model_id", "variant", "metric_id", "split", "setting", "value", "source_id", "source_table")}
    with pytest.raises(IntegrityError), db.session(engine, write=True) as s:
        s.execute(insert(db.Result), [dict(dup, origin="user")])
    with pytest.raises(IntegrityError), db.session(engine, write=True) as s:
        s.execute(insert(db.Result), [dict(dup, split="validation", variant="x", origin="user")])
    args = dict(model="BERT-base", task="RTE", metric="acc", split="dev", value=70.0, source="Devlin et al. 2019, re-run", table="mine")
    db.add_result(engine, **args)
    with pytest.raises(DuplicateResult, match="already stored"):
        db.add_result(engine, **dict(args, value=71.0))


BAD = [
    (dict(value=101), "outside the range"),
    (dict(value=-101), "outside the range"),
    (dict(value="0.846x"), "not a number"),
    (dict(value="nan"), "finite"),
    (dict(task="GLUEE"), "unknown task"),
    (dict(metric="f1"), "unknown metric"),
    (dict(source=""), "source is required"),
    (dict(source="a blog"), "neither a source already cited"),
    (dict(source="liu2019"), "published sources of the built-in data"),
    (dict(split="train"), "split must be"),
    (dict(setting="both"), "single or ensemble"),
    (dict(snapshot="25/07/2019"), "not a date"),
    (dict(model="bad\x00name"), "control character"),
    (dict(model="x" * 101), "longer than 100"),
    (dict(model="BERT, large"), "cannot contain commas"),
    (dict(parameters="-3"), "positive count"),
]


@pytest.mark.parametrize(("change", "message"), BAD, ids=[m for _, m in BAD])
def test_bad_results_are_refused_and_nothing_is_written(lite, change, message) -> None:
    good = dict(model="Tiny", task="CoLA", metric="mcc", split="dev", value=40.0, source="Liu et al. 2019, class re-run")
    before = count(lite)
    with pytest.raises(InvalidResult, match=message):
        db.add_result(lite, **dict(good, **change))
    assert count(lite) == before
    db.add_result(lite, **good)
    assert count(lite) == before + 1


def test_text_is_data_not_sql_and_is_escaped_when_shown(engine) -> None:
    evil = "x'); DROP TABLE bfe_results; -- <script>alert(1)</script>"
    db.add_result(engine, model=evil, task="SST-2", metric="acc", split="dev", value=90.0, source="Liu et al. 2019, rerun", note="<img src=x onerror=alert(1)>")
    df = db.results_frame(engine, models=[evil])
    assert len(df) == 1 and count(engine) > 1000
    comp = glue.compare(df)
    page = glue.to_html(comp)
    assert "<script>" not in page and "&lt;script&gt;" in page and "<img" not in page
    assert r"\textless{}script\textgreater{}" in glue.to_latex(comp)


# ----------------------------------------------------------------------------- import and export
def _csv(rows: list[dict], header: list[str] | None = None) -> bytes:
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=header or list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue().encode()


ROWS = [dict(model="Student BERT", task="MNLI", metric="acc_m", split="dev", value="80.1", source="Doe et al. 2026, course report",
             variant="", setting="single", table="Table 1", note="3 epochs", parameters="110000000"),
        dict(model="Student BERT", task="MNLI", metric="acc_mm", split="dev", value="80.9", source="Doe et al. 2026, course report",
             variant="", setting="single", table="Table 1", note="", parameters=""),
        dict(model="RoBERTa-large", task="RTE", metric="acc", split="test", value="88.2", source="Liu et al. 2019, class re-run", variant="re-run",
             setting="ensemble", table="Table 5", note="", parameters="")]


def test_import_export_round_trip(engine, tmp_path) -> None:
    report = db.import_csv(_csv(ROWS), engine)
    assert report.rows == 3
    mine = db.results_frame(engine)
    mine = mine[mine["origin"] == "user"]
    exported = db.export_rows(mine)
    other = db.get_engine(f"sqlite:///{tmp_path / 'other.db'}")
    assert db.import_csv(exported, other).rows == 3
    again = db.results_frame(other)
    again = again[again["origin"] == "user"]
    cols = ["model", "variant", "task", "metric", "split", "setting", "value", "table", "note", "citation"]
    assert mine[cols].reset_index(drop=True).equals(again[cols].reset_index(drop=True))
    assert value(again, model="Student BERT", metric="acc_m") == 80.1
    assert db.results_frame(other, models=["Student BERT"])["parameters"].iloc[0] == 110_000_000
    # exports for slides
    rows = db.results_frame(engine, models=["Student BERT", "BERT-base"], tasks=["MNLI"], splits=["dev"], variants=False)
    comp = glue.compare(rows[rows["metric"].isin(["acc_m", "acc_mm"])])
    assert "arXiv nan" not in " ".join(comp.sources.stack())
    md = glue.to_markdown(comp)
    assert md.startswith("| model | MNLI m | MNLI mm |") and "**" in md and "Doe et al. 2026" in md
    tex = glue.to_latex(comp, caption="MNLI dev 100% & more")
    assert r"\begin{tabular}{lrr}" in tex and r"100\% \& more" in tex and r"\textbf{" in tex


def test_import_is_all_or_nothing_with_errors_by_line(engine) -> None:
    rows = [*ROWS, dict(ROWS[0], value="180"), dict(ROWS[0], task="Nope"), dict(ROWS[1])]
    before = count(engine)
    with pytest.raises(InvalidResult) as err:
        db.import_csv(_csv(rows), engine)
    assert [line for line, _ in err.value.errors] == [5, 6, 7]
    assert "outside the range" in err.value.errors[0][1] and "unknown task" in err.value.errors[1][1]
    assert "same result as line 3" in err.value.errors[2][1]
    assert "Nothing imported" in err.value.message and count(engine) == before
    db.import_csv(_csv(ROWS), engine)
    with pytest.raises(InvalidResult) as err:  # the same rows again: duplicates of stored results, by line
        db.import_csv(_csv(ROWS), engine)
    assert [line for line, _ in err.value.errors] == [2, 3, 4] and "already stored" in err.value.errors[0][1]


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "empty"),
    (b"model,task\nA,CoLA\n", "Missing column"),
    (b"model,task,metric,split,value,source,colour\n", "Unknown column"),
    (b"model,task,metric,split,value,source\n", "no rows"),
    ("model,task,metric,split,value,source\nCafé,CoLA,mcc,dev,50,liu2019\n".encode("latin-1"), "not UTF-8"),
    (b"model,task,metric,split,value,source\nA,CoLA,mcc,dev,50,liu2019,extra\n", "more cells than columns"),
    (b"model,task,metric,split,value,source\nA,CoLA,mcc,dev,fifty,liu2019\n", "not a number"),
    (b"\x89PNG\r\n\x1a\n\x00\x00", "not"),
])
def test_malformed_files_are_refused(lite, raw: bytes, message: str) -> None:
    before = count(lite)
    with pytest.raises(InvalidResult) as err:
        db.import_csv(raw, lite)
    assert message in str(err.value) + " ".join(m for _, m in err.value.errors)
    assert count(lite) == before


def test_an_oversized_import_is_refused(lite, monkeypatch) -> None:
    monkeypatch.setattr(db.csvio, "MAX_IMPORT_ROWS", 2)
    with pytest.raises(InvalidResult, match="more than 2 rows"):
        db.import_csv(_csv(ROWS), lite)
    monkeypatch.setattr(db.csvio, "MAX_IMPORT_BYTES", 100)
    with pytest.raises(InvalidResult, match="limited to"):
        db.import_csv(_csv(ROWS), lite)


def test_only_user_rows_can_be_deleted(lite) -> None:
    new = db.add_result(lite, model="Tiny", task="CoLA", metric="mcc", split="dev", value=40.0, source="Liu et al. 2019, class re-run")
    seed_id = int(db.results_frame(lite).iloc[0]["id"])
    with pytest.raises(InvalidResult, match="cannot be deleted"):
        db.delete_result(seed_id, lite)
    db.delete_result(new, lite)
    assert count(lite, id=new) == 0


# --------------------------------------------------------------------- concurrency, files, URLs
def test_eight_writers_at_once(engine) -> None:
    before = count(engine)
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(t: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                db.add_result(engine, model=f"writer-{t}", variant=f"run {i}", task="SST-2", metric="acc", split="dev",
                              value=80 + i / 10, source="Liu et al. 2019, class re-run")
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
        db.add_result(ro, model="Tiny", task="CoLA", metric="mcc", split="dev", value=40.0, source="Liu et al. 2019, class re-run")
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
            db.import_csv(_csv(ROWS), eng)
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
    path = Path(db._normalise_url(url).database)
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


def test_scaling_data_sets_agree_with_the_results_data() -> None:
    """The scaling lab's CSVs (data/scaling) repeat five of these tables in wide form: the numbers must be the same."""
    res = pd.concat([pd.read_csv(db.DATA_DIR / f, dtype=str, keep_default_na=False) for f in ("devlin2019.csv", "liu2019.csv",
                                                                                            "lan2020.csv", "shoeybi2019.csv")])
    res["value"] = res["value"].astype(float)
    scaling = ROOT / "data" / "scaling"

    def cell(**where) -> float:
        return value(res, **where)

    checked = 0
    for r in pd.read_csv(scaling / "bert_size_ablation.csv").itertuples():
        variant = f"L={r.layers}, H={r.hidden}, A={r.heads}"
        for col, task, metric in (("lm_ppl", "MLM", "ppl"), ("mnli_m", "MNLI", "acc_m"), ("mrpc", "MRPC", "acc"), ("sst2", "SST-2", "acc")):
            assert cell(source="devlin2019", variant=variant, task=task, metric=metric) == getattr(r, col)
            checked += 1
    for r, variant in zip(pd.read_csv(scaling / "roberta_batch_size.csv").itertuples(),
                          ("batch 256, 1M steps, lr 1e-4", "batch 2K, 125K steps, lr 7e-4", "batch 8K, 31K steps, lr 1e-3"), strict=True):
        for col, task, metric in (("ppl", "MLM", "ppl"), ("mnli_m", "MNLI", "acc_m"), ("sst2", "SST-2", "acc")):
            assert cell(source="liu2019", table="Table 3", variant=variant, task=task, metric=metric) == getattr(r, col)
            checked += 1
    for r in pd.read_csv(scaling / "megatron_bert_results.csv").itertuples():
        for col, task, metric in (("mnli_m", "MNLI", "acc_m"), ("qqp", "QQP", "acc"), ("squad11_f1", "SQuAD 1.1", "f1"),
                                  ("squad20_em", "SQuAD 2.0", "em"), ("race", "RACE", "acc")):
            assert cell(source="shoeybi2019", model=r.model, setting="single", task=task, metric=metric) == getattr(r, col)
            checked += 1
    for r in pd.read_csv(scaling / "albert_configs.csv").itertuples():
        assert cell(source="lan2020", table="Table 2", model=r.model, task="ALBERT-avg", metric="avg") == r.avg
        assert cell(source="lan2020", table="Table 2", model=r.model, task="MNLI", metric="acc_m") == r.mnli
        checked += 2
    assert checked >= 60


# ------------------------------------------------------------------------------- saved packs
def test_packs_saved_as_links(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.export import PackItem
    from analysis.results_db import packs

    items = [PackItem(title="Ünïcode 🙂", caption="c", sources=("s",), table=({"a": 1},), link="/results")]
    token = db.save_pack(items, "Deck", engine)
    assert len(token) >= 22 and db.load_pack(token, engine) == ("Deck", items)
    for bad in ("", "../../etc/passwd", "x" * 500, "'; DROP TABLE bfe_packs; --", token[:-1] + "?"):
        with pytest.raises(db.PackNotFound):
            db.load_pack(bad, engine)
    monkeypatch.setattr(packs, "MAX_SAVED_PACKS", 3)
    tokens = [db.save_pack(items, f"D{i}", engine) for i in range(4)]
    with db.session(engine) as s:
        # the oldest packs nobody opened went; "Deck", opened above, stays though it is the oldest
        assert sorted(s.scalars(select(db.SavedPack.title))) == ["D2", "D3", "Deck"]
    with pytest.raises(db.PackNotFound, match="deleted"):
        db.load_pack(tokens[0], engine)


def _heavy_items(kib: int, seed: int) -> list:
    """A pack that compresses to about ``kib`` KiB (random hex: gzip halves it)."""
    import random

    from analysis.export import PackItem

    rng = random.Random(seed)
    rows = tuple({"x": f"{rng.getrandbits(4096):x}"} for _ in range(kib * 2))  # 1 KiB of hex each
    return [PackItem(title=f"heavy {seed}", table=rows)]


def test_a_flood_of_saves_stays_within_the_byte_budget_and_evicts_itself_first(engine, monkeypatch) -> None:
    from analysis.results_db import packs

    monkeypatch.setenv("BFE_PACK_BUDGET_MB", "16")
    monkeypatch.setattr(packs, "SAVES_PER_MINUTE", 10**6)  # the flood below is one session, as fast as it can
    teacher_old = db.save_pack(_heavy_items(1024, 0), "for next week", engine, saver="teacher")
    teacher = db.save_pack(_heavy_items(1024, 1), "today's lesson", engine, saver="teacher")
    db.load_pack(teacher, engine)  # opened in the last hour
    for i in range(40):  # ~40 MB into a 16 MB budget
        db.save_pack(_heavy_items(1024, 100 + i), f"flood {i}", engine, saver="flood")
    with db.session(engine) as s:
        total = s.scalar(select(func.sum(db.SavedPack.nbytes)))
        sizes = list(s.scalars(select(func.length(db.SavedPack.data))))
        flood_left = s.scalar(select(func.count()).select_from(db.SavedPack).where(db.SavedPack.saver == "flood"))
    assert total <= 16 * 2**20 and total == sum(sizes) and 5 <= flood_left < 40
    assert db.load_pack(teacher, engine)[0] == "today's lesson"
    assert db.load_pack(teacher_old, engine)[0] == "for next week"  # the flood evicted its own oldest first
    # a flood from a new session each time (one pack each): the least recently used go, the opened pack stays
    for i in range(30):
        db.save_pack(_heavy_items(1024, 200 + i), f"spread {i}", engine, saver=f"visitor-{i}")
    with db.session(engine) as s:
        assert s.scalar(select(func.sum(db.SavedPack.nbytes))) <= 16 * 2**20
    assert db.load_pack(teacher, engine)[0] == "today's lesson"


def test_one_session_saves_at_most_a_few_packs_a_minute(engine) -> None:
    from analysis.export import PackItem
    from analysis.results_db import packs

    items = [PackItem(title="t", table=({"a": 1},))]
    for _ in range(packs.SAVES_PER_MINUTE):
        db.save_pack(items, "ok", engine, saver="eager")
    with pytest.raises(db.PackRateLimited, match="last minute"):
        db.save_pack(items, "one too many", engine, saver="eager")
    assert db.load_pack(db.save_pack(items, "another browser", engine, saver="calm"), engine)[0] == "another browser"
    with db.session(engine) as s:
        assert s.scalar(select(func.count()).select_from(db.SavedPack).where(db.SavedPack.saver == "eager")) == 6


def test_a_schema_4_database_gains_the_packs_budget_columns(lite) -> None:
    from sqlalchemy import text

    from analysis.results_db import seeding

    with db.session(lite, write=True) as s:  # as the app before Alembic left it: no version table, schema 4 in bfe_meta
        s.execute(text("DROP TABLE bfe_packs"))
        s.execute(text("CREATE TABLE bfe_packs (token VARCHAR(32) PRIMARY KEY, title VARCHAR(200), items INTEGER, "
                       "data BLOB, created_at DATETIME)"))
        s.execute(text("ALTER TABLE bfe_runs DROP COLUMN lease_at"))
        s.execute(text("DROP TABLE bfe_alembic_version"))
        s.get(db.Meta, "schema_version").value = "4"
    from analysis.export import pack_to_bytes

    data = pack_to_bytes([], "kept")
    with db.session(lite, write=True) as s:
        s.execute(text("INSERT INTO bfe_packs VALUES ('abcdefghijklmnopqrstuv', 'kept', 0, :d, '2026-01-01 00:00:00')"),
                  {"d": data})
    seeding.SEEDED.clear()
    db.ensure_seeded(lite)
    assert db.meta(lite)["schema_version"] == str(db.SCHEMA_VERSION)
    with db.session(lite) as s:
        row = s.get(db.SavedPack, "abcdefghijklmnopqrstuv")
        assert row.nbytes == len(data) and row.saver == "" and row.opened_at is None
    assert db.load_pack("abcdefghijklmnopqrstuv", lite) == ("kept", [])


def test_a_schema_5_database_gains_the_runs_lease_and_keeps_its_runs(lite) -> None:
    from sqlalchemy import inspect, text

    from analysis.results_db import runs, seeding

    rid = runs.create_run("before-the-lease", "mlm", {"steps": 3}, lite)
    with db.session(lite, write=True) as s:
        s.execute(text("ALTER TABLE bfe_runs DROP COLUMN lease_at"))
        s.execute(text("DROP TABLE bfe_alembic_version"))
        s.get(db.Meta, "schema_version").value = "5"
    seeding.SEEDED.clear()
    db.dispose_engines()
    db.ensure_seeded(lite)
    assert db.meta(lite)["schema_version"] == "6"
    with db.session(lite) as s:
        assert "lease_at" in {c["name"] for c in inspect(s.connection()).get_columns("bfe_runs")}
    assert runs.get_run(rid, lite)["name"] == "before-the-lease"
    assert runs.claim_next(1, lite) == rid  # the queue works on the upgraded table


def test_a_schema_1_database_gains_the_packs_table(lite) -> None:
    from sqlalchemy import text

    from analysis.results_db import seeding

    with db.session(lite, write=True) as s:
        for table in ("bfe_packs", "bfe_runs", "bfe_verdicts", "bfe_alembic_version"):
            s.execute(text(f"DROP TABLE {table}"))
        s.get(db.Meta, "schema_version").value = "1"
    before = count(lite)
    seeding.SEEDED.clear()
    db.ensure_seeded(lite)
    assert db.meta(lite)["schema_version"] == str(db.SCHEMA_VERSION) == "6" and count(lite) == before
    assert db.load_pack(db.save_pack([], "empty", lite), lite) == ("empty", [])


# ------------------------------------------------------------------------------------ pre-training runs
def test_runs_round_trip_and_a_dead_process_is_interrupted(engine) -> None:
    import subprocess
    import sys

    from analysis.results_db import runs

    rid = runs.create_run("mlm-demo", "mlm", {"layers": 2, "hidden": 128, "run": "=cmd|' /C calc'!A0"}, engine)
    with pytest.raises(runs.DuplicateRun):
        runs.create_run("mlm-demo", "mlm", {}, engine)
    runs.start_run(rid, engine)
    runs.record_curve(rid, [(i, 10.0 - i / 100) for i in range(1, 12_001)], engine)
    got = runs.get_run(rid, engine)
    assert got["status"] == "running" and len(got["curve"]) == runs.MAX_CURVE_POINTS and got["curve"][-1] == (12000, 10.0 - 120.0)
    assert runs.mark_interrupted(engine) == []  # this process is alive
    runs.finish_run(rid, "finished", evaluation={"held_out_loss": 7.5, "probes": [{"top": ["a"]}]}, checkpoint="trained/mlm-demo",
                    seconds=12.5, tokens=1000, parameters=4_000_000, engine=engine)
    df = runs.list_runs(engine)
    assert list(df["name"]) == ["mlm-demo"] and df["evaluation"][0]["held_out_loss"] == 7.5
    csv = runs.runs_csv(engine).decode()
    assert "eval.held_out_loss" in csv and "'=cmd" in csv  # formulas neutralised
    # a run whose process died (a server restart) is marked interrupted, never finished
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    rid2 = runs.create_run("killed", "electra", {}, engine)
    runs.start_run(rid2, engine)
    with db.session(engine, write=True) as s:
        s.get(db.TrainingRun, rid2).pid = int(dead)
    assert [r[0] for r in runs.mark_interrupted(engine)] == [rid2]
    assert runs.get_run(rid2, engine)["status"] == "interrupted"
    runs.delete_run(rid, engine)
    with pytest.raises(runs.RunNotFound):
        runs.get_run(rid, engine)
    with pytest.raises(IntegrityError), db.session(engine, write=True) as s:  # the database itself refuses an unknown state
        s.get(db.TrainingRun, rid2).status = "done"
    # the lab's queue: oldest queued first, no more than the limit running on this host, cancel flags
    q1, q2 = (runs.create_run(n, "mlm", {"steps": 10}, engine, group="abl") for n in ("abl-a", "abl-b"))
    assert runs.claim_next(1, engine) == q1 and runs.claim_next(1, engine) is None  # one slot, taken
    assert runs.get_run(q1, engine)["started_at"] is not None and runs.get_run(q1, engine)["group"] == "abl"
    assert runs.request_cancel(q2, engine) == "cancelled"  # queued: at once
    assert runs.request_cancel(q1, engine) == "running" and runs.record_curve(q1, [(1, 9.0)], engine, seconds=0.5) is True
    assert runs.claim_next(2, engine) is None  # nothing left queued


def test_random_bytes_are_results_or_an_invalid_result() -> None:
    """Property: an uploaded results CSV of random bytes, text or rows under the import header is imported or refused
    with InvalidResult, nothing else (and a refusal stores nothing)."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    from analysis import results_db as db
    from core.errors import InvalidResult

    engine = db.get_engine()
    db.ensure_seeded(engine)
    before = len(db.results_frame(engine))
    cell = st.one_of(st.text(max_size=10), st.sampled_from(["BERT-base", "MNLI", "acc", "dev", "single", "84.6", "1e999", "-1", ""]))
    rows = st.lists(st.lists(cell, min_size=1, max_size=len(db.IMPORT_COLUMNS) + 1), max_size=20)

    @settings(max_examples=120, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.one_of(st.binary(max_size=2000),
                     rows.map(lambda r: (",".join(db.IMPORT_COLUMNS) + "\n" + "\n".join(",".join(x) for x in r)).encode())))
    def check(raw: bytes) -> None:
        n = len(db.results_frame(engine))
        try:
            report = db.import_csv(raw, engine)
        except InvalidResult:
            assert len(db.results_frame(engine)) == n
            return
        assert len(db.results_frame(engine)) == n + report.rows

    check()
    assert len(db.results_frame(engine)) >= before
