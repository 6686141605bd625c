"""The published results the database is seeded with: every number against the slides and its source, recomputed
averages, idempotent seeding and upgrades of older schemas (analysis/results_db/seeding.py, migrate.py)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from analysis import glue
from analysis import results_db as db
from core.errors import DatabaseUnavailable
from tests.helpers import ROOT
from tests.helpers.results import count_results as count
from tests.helpers.results import value

#: Schema 7's tables, children first.
CLASS_TABLES = ("bfe_class_answers", "bfe_class_questions", "bfe_class_members", "bfe_classes")

SEEDS = ROOT.parent / "shared" / "seeds"


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
    assert df["split"].isin(db.RESULT_SPLITS).all() and df["setting"].isin(db.RESULT_SETTINGS).all()
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
    mine = db.add_result(db.NewResult(model="My BERT", task="CoLA", metric="mcc", split="dev", value=61.2, source="Me et al. 2026, a class project",
                         parameters="110000000"), engine).id
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


# ----------------------------------------------------------------------------- older schemas
def test_a_schema_4_database_gains_the_packs_budget_columns(lite) -> None:
    from sqlalchemy import text

    from analysis.results_db import seeding

    with db.session(lite, write=True) as s:  # as the app before Alembic left it: no version table, schema 4 in bfe_meta
        s.execute(text("DROP TABLE bfe_packs"))
        s.execute(text("CREATE TABLE bfe_packs (token VARCHAR(32) PRIMARY KEY, title VARCHAR(200), items INTEGER, "
                       "data BLOB, created_at DATETIME)"))
        s.execute(text("ALTER TABLE bfe_runs DROP COLUMN lease_at"))
        for table in CLASS_TABLES:  # schema 7's: an older database has none
            s.execute(text(f"DROP TABLE {table}"))
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
        for table in CLASS_TABLES:  # schema 7's: an older database has none
            s.execute(text(f"DROP TABLE {table}"))
        s.execute(text("DROP TABLE bfe_alembic_version"))
        s.get(db.Meta, "schema_version").value = "5"
    seeding.SEEDED.clear()
    db.dispose_engines()
    db.ensure_seeded(lite)
    assert db.meta(lite)["schema_version"] == str(db.SCHEMA_VERSION)
    with db.session(lite) as s:
        assert "lease_at" in {c["name"] for c in inspect(s.connection()).get_columns("bfe_runs")}
    assert runs.get_run(rid, lite)["name"] == "before-the-lease"
    assert runs.claim_next(1, lite) == rid  # the queue works on the upgraded table


def test_a_schema_1_database_gains_the_packs_table(lite) -> None:
    from sqlalchemy import text

    from analysis.results_db import seeding

    with db.session(lite, write=True) as s:
        for table in (*CLASS_TABLES, "bfe_packs", "bfe_runs", "bfe_verdicts", "bfe_alembic_version"):
            s.execute(text(f"DROP TABLE {table}"))
        s.get(db.Meta, "schema_version").value = "1"
    before = count(lite)
    seeding.SEEDED.clear()
    db.ensure_seeded(lite)
    assert db.meta(lite)["schema_version"] == str(db.SCHEMA_VERSION) == "7" and count(lite) == before
    assert db.load_pack(db.save_pack([], "empty", lite), lite) == ("empty", [])
