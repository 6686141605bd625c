"""The results database's read use case: which published results match a filter. The GLUE page's comparison views and
the Gradio ``/results`` endpoint filter through :func:`select`, so a model, task or split means the same on both.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from core.errors import InvalidData
from services import requests as req
from services.calls import jsonable

if TYPE_CHECKING:
    from analysis.results_db import StoredResult

#: The most rows one API answer carries.
MAX_ROWS = 5_000
SPLIT_FILTERS = ("dev", "test", "both")
SETTING_FILTERS = ("single", "ensemble", "both")
COLUMNS = ["model", "variant", "family", "parameters", "task", "benchmark", "metric", "metric_name", "higher_is_better", "split",
           "setting", "value", "citation", "source", "table", "slides", "arxiv", "snapshot", "note", "origin"]


def _named(frame: Any, column: str, names: list[str]) -> list[Any]:
    """``names`` as the values of ``column`` (any case); :class:`InvalidData` with close matches for one that is not."""
    known = {str(v).lower(): v for v in frame[column].dropna().unique()}
    unknown = [w for w in names if w.lower() not in known]
    if unknown:
        close = difflib.get_close_matches(unknown[0].lower(), list(known), n=3, cutoff=0.5)
        raise InvalidData(f"No {column} {unknown[0][:60]!r} in the results database.",
                          ("Did you mean: " + ", ".join(known[c] for c in close) + "?") if close else
                          f"Known {column}s include: " + ", ".join(sorted(map(str, known.values()))[:12]) + ".")
    return [known[w.lower()] for w in names]


def select(frame: Any, *, models: list[str] | None = None, tasks: list[str] | None = None, split: str = "both",
           setting: str = "both", variants: bool = True) -> Any:
    """The rows of ``frame`` (``results_frame()``) for ``models`` and ``tasks`` (None: all; names in any case), one
    ``split`` and ``setting`` (or both), with or without the papers' ablation variants."""
    split, setting = req.choice("split", split, SPLIT_FILTERS), req.choice("setting", setting, SETTING_FILTERS)
    view = frame
    if split != "both":
        view = view[view["split"] == split]
    if setting != "both":
        view = view[view["setting"] == setting]
    if not variants:
        view = view[view["variant"] == ""]
    for column, names in (("model", models), ("task", tasks)):
        if names is not None:
            view = view[view[column].isin(_named(frame, column, names))]
    return view


def query(models: str = "", tasks: str = "", splits: str = "", main_only: bool = True) -> dict:
    """The published results as JSON rows with their sources (comma-separated names; empty: all)."""
    from analysis.results_db.queries import results_frame

    wanted_splits = req.names(splits)
    frame = results_frame(variants=not req.flag("main_only", main_only))
    view = select(frame, models=req.names(models), tasks=req.names(tasks), variants=not main_only)
    if wanted_splits is not None:
        view = view[view["split"].isin(_named(frame, "split", wanted_splits))]
    return jsonable({"rows": view[COLUMNS].head(MAX_ROWS), "count": len(view), "truncated": len(view) > MAX_ROWS})


# ------------------------------------------------------------------------------------ the GLUE page's database and views
# The page's comparison views are ``analysis.glue``'s (no database in them), decided here for the page; their tables as
# HTML, Markdown and LaTeX are drawing (``analysis.glue_plots``). The database is reached through the functions below,
# each opening the engine of the URL the page read once (``DATABASE_URL`` or the SQLite default).

from analysis import glue  # noqa: E402
from analysis.glue import CONVENTIONS, Comparison  # noqa: E402
from analysis.results_db import (  # noqa: E402
    IMPORT_COLUMNS,
    MAX_IMPORT_BYTES,
    MAX_IMPORT_ROWS,
    OPTIONAL_COLUMNS,
    RESULT_SETTINGS,
    RESULT_SPLITS,
    NewResult,
)
from analysis.results_db.validation import TEXT_LIMITS  # noqa: E402


def compare(rows: Any, collapse: bool = True, order: list[tuple[str, str]] | None = None) -> Comparison:
    """The page's comparison of ``rows`` (a :func:`frame` selection): a model × (task, metric) table, the best value
    per column, each cell's source; ``collapse``: one row per model (its main entry); ``order``: the columns chosen."""
    return glue.compare(rows, collapse=req.flag("collapse", collapse), order=order)


def deltas(comp: Comparison, baseline: str) -> Any:
    """Each model's values minus ``baseline``'s, column by column; :class:`InvalidData` when ``baseline`` is not one of
    the comparison's models."""
    if baseline not in comp.values.index:
        raise InvalidData(f"{str(baseline)[:60]!r} is not a model of this comparison.", "Pick one of its rows as the baseline.")
    return glue.deltas(comp, baseline)


def score_check(rows: Any) -> Any:
    """Every reported aggregate in ``rows`` beside its recomputation from the same table's cells, with a status."""
    return glue.score_check(rows)


def size_points(comp: Comparison, column: str) -> Any:
    """The comparison's models with a parameter count and a value in ``column``: the score-against-size view."""
    return glue.size_points(comp, column)


def column_options(rows: Any) -> dict[str, tuple[str, str]]:
    """Every (task, metric) in ``rows`` under the label the page shows."""
    return glue.column_options(rows)


def default_columns(rows: Any) -> list[tuple[str, str]]:
    """The columns the page starts with: per task its most reported metric, no efficiency figures."""
    return glue.default_columns(rows)


def default_url() -> str:
    """The database the page reads: the ``DATABASE_URL`` setting, or the SQLite file in the user data folder."""
    from analysis.results_db import default_url as url

    return url()


def export_rows(rows: Any) -> bytes:
    """``rows`` as a CSV in the import format (formulas neutralised): exported and imported again, they round-trip."""
    from analysis.results_db import export_rows as export

    return export(rows)


def seed_version() -> str:
    """The version of the built-in results (``data/results/manifest.json``)."""
    from analysis.results_db import seed_version as version

    return version()


__all__ = ["COLUMNS", "CONVENTIONS", "IMPORT_COLUMNS", "MAX_IMPORT_BYTES", "MAX_IMPORT_ROWS", "MAX_ROWS", "OPTIONAL_COLUMNS", "RESULT_SETTINGS",
           "RESULT_SPLITS", "TEXT_LIMITS", "Comparison", "NewResult", "add", "catalog", "column_options", "compare", "default_columns", "default_url",
           "delete", "deltas", "describe", "export_rows", "frame", "import_rows", "query", "score_check", "seed_version", "select", "size_points",
           "version"]


def frame(url: str) -> Any:
    """Every result of the database at ``url`` with its source (``results_frame``), its text columns as Python strings.

    Why not pandas' Arrow-backed strings: every filter of the page then calls into pyarrow once per column, and each
    call gives up the GIL; with a class of 30 rerunning at once, each thread then waits its turn to get it back, call
    after call (a "convoy"), and a tasks filter cheap alone grew many times dearer per student (``bench/classroom.py``,
    bench/results/README.md).
    A thousand rows of Python strings filter in NumPy without leaving the interpreter."""
    import pandas as pd

    from analysis.results_db import get_engine, results_frame

    df = results_frame(get_engine(url))
    text = [c for c in df.columns if isinstance(df[c].dtype, pd.StringDtype)]
    return df.astype(dict.fromkeys(text, object)) if text else df


def catalog(url: str, kind: str) -> Any:
    """The database's models, tasks, metrics or sources as a table."""
    from analysis.results_db import catalog_frame, get_engine

    return catalog_frame(kind, get_engine(url))


def version(url: str) -> tuple:
    """What changes when any process adds or deletes a result: the key of a cache of :func:`frame`."""
    from analysis.results_db import data_version, get_engine

    return data_version(get_engine(url))


def describe(url: str, paths: bool) -> str:
    """The database in words (its kind; its file path only for a viewer on this machine)."""
    from analysis.results_db import describe_database, get_engine

    return describe_database(get_engine(url), paths=paths)


def add(url: str, new: NewResult) -> StoredResult:
    """Add one result (checked like an imported row): its id and, when a value in (0, 1] of a metric scored in percent
    was stored as typed, a warning (``analysis.results_db.StoredResult``)."""
    from analysis.results_db import add_result, get_engine

    return add_result(new, get_engine(url))


def import_rows(url: str, raw: bytes) -> Any:
    """Import a CSV of results, every row checked before any is written (``ImportReport``)."""
    from analysis.results_db import get_engine, import_csv

    return import_csv(raw, get_engine(url))


def delete(url: str, result_id: int) -> None:
    """Delete a result a user added (the published ones stay)."""
    from analysis.results_db import delete_result, get_engine

    delete_result(result_id, get_engine(url))
