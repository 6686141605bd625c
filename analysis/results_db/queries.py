"""Reading the results database: results joined with their provenance, and the reference tables.

No torch and no streamlit; pandas is imported only when a frame is built.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Engine, func, select

from analysis.results_db.engine import get_engine, session
from analysis.results_db.schema import Metric, Model, Result, Source, Task
from analysis.results_db.seeding import ensure_seeded
from core.errors import InvalidResult

#: Appended to the citation of a source a user typed, so a user's row never reads as a published one.
USER_MARK = " (added by a user)"


def results_frame(engine: Engine | None = None, *, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                  splits: Sequence[str] | None = None, settings: Sequence[str] | None = None,
                  sources: Sequence[str] | None = None, variants: bool = True):
    """Results joined with their model, task, metric and source, as a pandas DataFrame (one row per number).

    Filters are lists of names/keys (None: all). ``variants=False`` keeps only each model's main
    result (no ablation variants). Columns: id, model, variant, family, parameters, catalog_id, task,
    benchmark, metric, metric_name, higher_is_better, split, setting, value, source, citation,
    arxiv, table, slides, snapshot, note, origin.
    """
    import pandas as pd

    engine = engine or get_engine()
    ensure_seeded(engine)
    stmt = (select(Result.id, Model.name.label("model"), Result.variant, Model.family, Model.parameters, Model.catalog_id,
                   Task.key.label("task"), Task.benchmark, Metric.key.label("metric"), Metric.name.label("metric_name"),
                   Metric.higher_is_better, Result.split, Result.setting, Result.value, Source.key.label("source"),
                   Source.title, Source.authors, Source.year, Source.arxiv, Source.origin.label("source_origin"),
                   Result.source_table.label("table"), Result.slides,
                   Result.snapshot, Result.note, Result.origin)
            .join(Model, Result.model_id == Model.id).join(Metric, Result.metric_id == Metric.id)
            .join(Task, Metric.task_id == Task.id).join(Source, Result.source_id == Source.id))
    for column, wanted, what in ((Model.name, models, "models"), (Task.key, tasks, "tasks"), (Result.split, splits, "splits"),
                                 (Result.setting, settings, "settings"), (Source.key, sources, "sources")):
        if wanted is not None:
            stmt = stmt.where(column.in_(_names(wanted, what)))
    if not variants:
        stmt = stmt.where(Result.variant == "")
    with session(engine) as s:
        rows = s.execute(stmt.order_by(Result.id)).all()
    df = pd.DataFrame(rows, columns=["id", "model", "variant", "family", "parameters", "catalog_id", "task", "benchmark", "metric",
                                     "metric_name", "higher_is_better", "split", "setting", "value", "source", "title", "authors",
                                     "year", "arxiv", "source_origin", "table", "slides", "snapshot", "note", "origin"])
    df["citation"] = [citation(a, y, t) + (USER_MARK if o == "user" else "")
                      for a, y, t, o in zip(df["authors"], df["year"], df["title"], df.pop("source_origin"), strict=True)]
    return df


def data_version(engine: Engine | None = None) -> tuple[int, ...]:
    """A cheap fingerprint of what users can change (results and sources: count and largest id).

    Pages key their cached frames by it, so a result added or deleted by another process — another
    replica behind the same load balancer, sharing one PostgreSQL — shows on the next rerun here.
    """
    engine = engine or get_engine()
    ensure_seeded(engine)
    with session(engine) as s:
        r = s.execute(select(func.count(Result.id), func.coalesce(func.max(Result.id), 0))).one()
        src = s.execute(select(func.count(Source.id), func.coalesce(func.max(Source.id), 0))).one()
    return int(r[0]), int(r[1]), int(src[0]), int(src[1])


def _names(wanted: Any, what: str) -> list[str]:
    """A filter as a list of names; one name alone is accepted. Raises InvalidResult for anything else."""
    if isinstance(wanted, str):
        return [wanted]
    if isinstance(wanted, Sequence | set | frozenset) and all(isinstance(w, str) for w in wanted):
        return list(wanted)
    raise InvalidResult(f"The {what} filter must be a list of names, not {type(wanted).__name__}.", "Pass e.g. [\"BERT-base\"].")


def citation(authors: str | None, year: Any, title: str) -> str:
    """'Liu et al. 2019' from the authors list and year; the title when there are no authors."""
    names = [a.strip() for a in (authors or "").split(",") if a.strip()]
    if not names:
        return str(title)
    lead = names[0] + (" et al." if len(names) > 2 else f" and {names[1]}" if len(names) == 2 else "")
    return f"{lead} {int(year)}" if year == year and year is not None else lead


def catalog_frame(kind: str, engine: Engine | None = None):
    """The reference tables as DataFrames: ``kind`` is ``sources``, ``models``, ``tasks`` or ``metrics``."""
    import pandas as pd

    engine = engine or get_engine()
    ensure_seeded(engine)
    cls = {"sources": Source, "models": Model, "tasks": Task, "metrics": Metric}[kind]
    with session(engine) as s:
        if cls is Metric:
            rows = s.execute(select(Task.key, Metric.key, Metric.name, Metric.lower, Metric.upper, Metric.higher_is_better, Metric.note)
                             .join(Task, Metric.task_id == Task.id).order_by(Task.id, Metric.id)).all()
            return pd.DataFrame(rows, columns=["task", "metric", "name", "lower", "upper", "higher_is_better", "note"])
        objs = s.scalars(select(cls).order_by(cls.id)).all()
        cols = [c.key for c in cls.__table__.columns if c.key != "id"]
        df = pd.DataFrame([{c: getattr(o, c) for c in cols} for o in objs], columns=cols)
    if cls is Source:
        from core.registry import arxiv_year

        # Two years, both labelled: publication (the citation's) and first arXiv version (the catalog's convention).
        df = df.rename(columns={"year": "year published"})
        df.insert(df.columns.get_loc("year published") + 1, "first arXiv", [arxiv_year(a) for a in df["arxiv"]])
    return df
