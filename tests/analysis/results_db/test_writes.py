"""Users' results: constraints and validation, CSV import and export, deletion (analysis/results_db/writes.py,
validation.py, csvio.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError

from analysis import glue, glue_plots
from analysis import results_db as db
from core.errors import DuplicateResult, InvalidResult
from tests.helpers import ROOT
from tests.helpers.results import ROWS, csv_of, value
from tests.helpers.results import count_results as count

SEEDS = ROOT.parent / "shared" / "seeds"


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
    db.add_result(db.NewResult(**args), engine)
    with pytest.raises(DuplicateResult, match="already stored"):
        db.add_result(db.NewResult(**dict(args, value=71.0)), engine)


def test_a_fraction_on_a_percent_scale_is_stored_as_typed_with_a_warning(engine) -> None:
    """0.85 on accuracy is stored as 0.85 (%), and the writer says so; a value above 1, or on a scale without a top
    (perplexity), or a services call, draws no such warning."""
    from services import results

    def stored(result_id: int) -> float:
        with db.session(engine) as s:
            return s.scalar(select(db.Result.value).where(db.Result.id == result_id))

    args = dict(model="My BERT", task="RTE", split="dev", source="My run, 2026", table="t")
    fraction = db.add_result(db.NewResult(**args, metric="acc", value=0.85), engine)
    assert "0.85 means 0.85%, not 85%" in fraction.warning
    assert stored(fraction.id) == pytest.approx(0.85)
    assert db.add_result(db.NewResult(**dict(args, table="t2"), metric="acc", value=85), engine).warning == ""
    assert db.add_result(db.NewResult(**dict(args, task="WikiText-103"), metric="ppl", value=1.0), engine).warning == ""
    via_service = results.add(engine.url.render_as_string(hide_password=False), results.NewResult(**dict(args, table="t3"), metric="acc", value=1))
    assert via_service.warning and stored(via_service.id) == pytest.approx(1.0)

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
        db.add_result(db.NewResult(**dict(good, **change)), lite)
    assert count(lite) == before
    db.add_result(db.NewResult(**good), lite)
    assert count(lite) == before + 1


def test_text_is_data_not_sql_and_is_escaped_when_shown(engine) -> None:
    evil = "x'); DROP TABLE bfe_results; -- <script>alert(1)</script>"
    db.add_result(db.NewResult(model=evil, task="SST-2", metric="acc", split="dev", value=90.0, source="Liu et al. 2019, rerun",
                                       note="<img src=x onerror=alert(1)>"), engine)
    df = db.results_frame(engine, models=[evil])
    assert len(df) == 1 and count(engine) > 1000
    comp = glue.compare(df)
    page = glue_plots.to_html(comp)
    assert "<script>" not in page and "&lt;script&gt;" in page and "<img" not in page
    assert r"\textless{}script\textgreater{}" in glue_plots.to_latex(comp)


def test_import_export_round_trip(engine, tmp_path) -> None:
    report = db.import_csv(csv_of(ROWS), engine)
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
    md = glue_plots.to_markdown(comp)
    assert md.startswith("| model | MNLI m | MNLI mm |") and "**" in md and "Doe et al. 2026" in md
    tex = glue_plots.to_latex(comp, caption="MNLI dev 100% & more")
    assert r"\begin{tabular}{lrr}" in tex and r"100\% \& more" in tex and r"\textbf{" in tex


def test_import_is_all_or_nothing_with_errors_by_line(engine) -> None:
    rows = [*ROWS, dict(ROWS[0], value="180"), dict(ROWS[0], task="Nope"), dict(ROWS[1])]
    before = count(engine)
    with pytest.raises(InvalidResult) as err:
        db.import_csv(csv_of(rows), engine)
    assert [line for line, _ in err.value.errors] == [5, 6, 7]
    assert "outside the range" in err.value.errors[0][1] and "unknown task" in err.value.errors[1][1]
    assert "same result as line 3" in err.value.errors[2][1]
    assert "Nothing imported" in err.value.message and count(engine) == before
    db.import_csv(csv_of(ROWS), engine)
    with pytest.raises(InvalidResult) as err:  # the same rows again: duplicates of stored results, by line
        db.import_csv(csv_of(ROWS), engine)
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
        db.import_csv(csv_of(ROWS), lite)
    monkeypatch.setattr(db.csvio, "MAX_IMPORT_BYTES", 100)
    with pytest.raises(InvalidResult, match="limited to"):
        db.import_csv(csv_of(ROWS), lite)


def test_only_user_rows_can_be_deleted(lite) -> None:
    new = db.add_result(db.NewResult(model="Tiny", task="CoLA", metric="mcc", split="dev", value=40.0, source="Liu et al. 2019, class re-run"), lite).id
    seed_id = int(db.results_frame(lite).iloc[0]["id"])
    with pytest.raises(InvalidResult, match="cannot be deleted"):
        db.delete_result(seed_id, lite)
    db.delete_result(new, lite)
    assert count(lite, id=new) == 0


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
