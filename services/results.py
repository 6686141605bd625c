"""The results database's read use case: which published results match a filter. The GLUE page's comparison views and
the Gradio ``/results`` endpoint filter through :func:`select`, so a model, task or split means the same on both.
"""

from __future__ import annotations

import difflib
from typing import Any

from core.errors import InvalidData
from services import requests as req
from services.calls import jsonable

#: The most rows one API answer carries.
MAX_ROWS = 5_000
SPLITS = ("dev", "test", "both")
SETTINGS = ("single", "ensemble", "both")
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
    split, setting = req.choice("split", split, SPLITS), req.choice("setting", setting, SETTINGS)
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
