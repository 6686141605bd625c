"""Checking one result a user reports against the database's tasks, metrics and sources.

:func:`validate` turns raw fields (from the add form or one CSV line) into a :class:`Row` or raises
``ValueError`` with the reason. Names are normalised and refused as :mod:`analysis.safe_text`
says (NFKC; no line breaks, control, invisible or bidirectional characters), values must be finite
real numbers in the metric's range (``True`` is not a number), and a user's result cites its own
source: a citation with a year, never one of the published sources' keys, so a user's row cannot
pass for a published one.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from analysis.results_db.schema import RESULT_SETTINGS, RESULT_SPLITS, Metric, Model, Source, Task
from analysis.safe_text import clean_name, clean_note

TEXT_LIMITS = {"model": 100, "variant": 200, "table": 100, "note": 1000, "family": 40, "source": 300}
_YEAR = re.compile(r"\b(19|20)\d\d\b")
MAX_PARAMETERS = 10**14


def clean(value: Any, name: str, required: bool = False) -> str:
    """One text field, normalised and checked (:func:`analysis.safe_text.clean_name`; notes may span lines)."""
    limit = TEXT_LIMITS.get(name, 200)
    if name == "note":
        return clean_note(value, name, limit)
    return clean_name(value, name, limit, required)


@dataclass(frozen=True)
class Lookup:
    """Everything validation needs, read once per add or import.

    ``seed_sources`` maps published source keys (lower case) to ids; ``user_sources`` maps the
    citations users typed (lower case) to ids.
    """

    metrics: dict[tuple[str, str], tuple[int, float | None, float | None, str]]
    tasks: dict[str, list[str]]
    task_names: dict[str, str]
    seed_sources: dict[str, int]
    user_sources: dict[str, int]
    models: dict[str, int]

    @classmethod
    def read(cls, s: Session) -> Lookup:
        metrics, tasks = {}, {}
        for m, t in s.execute(select(Metric, Task).join(Task, Metric.task_id == Task.id)):
            metrics[(t.key.lower(), m.key.lower())] = (m.id, m.lower, m.upper, m.name)
            tasks.setdefault(t.key.lower(), []).append(m.key)
        task_names = {t.key.lower(): t.key for t in s.scalars(select(Task))}
        seed_sources, user_sources = {}, {}
        for i, k, title, origin in s.execute(select(Source.id, Source.key, Source.title, Source.origin)):
            if origin == "user":  # a user's source is cited by its text
                user_sources[title.lower()] = i
            else:
                seed_sources[k.lower()] = i
        models = {n.lower(): i for i, n in s.execute(select(Model.id, Model.name))}
        return cls(metrics, tasks, task_names, seed_sources, user_sources, models)


@dataclass
class Row:
    """A validated result, ready to store."""

    model: str
    variant: str
    metric_id: int
    split: str
    setting: str
    value: float
    source: str
    table: str
    snapshot: dt.date | None
    note: str
    parameters: int | None
    family: str
    label: str
    #: set when the value looks like a fraction typed on a percent scale (0.85 there is 0.85 %, not 85 %)
    warning: str = ""

    def key(self) -> tuple:
        """The natural key a duplicate shares (names compared case-insensitively)."""
        return (self.model.lower(), self.variant, self.metric_id, self.split, self.setting, self.source.lower(), self.table)


def _number(raw_value: Any) -> float:
    if isinstance(raw_value, bool):
        raise ValueError(f"value {raw_value!r} is not a number")
    try:
        value = float(raw_value) if isinstance(raw_value, int | float) else float(str(raw_value).strip().rstrip("%"))
    except OverflowError:
        raise ValueError("value is too large to be a score") from None
    except (ValueError, TypeError):
        raise ValueError(f"value {str(raw_value)[:40]!r} is not a number") from None
    if not math.isfinite(value):
        raise ValueError("value must be a finite number")
    return value


def _parameters(text: str) -> int | None:
    if not text:
        return None
    try:
        number = float(text)
        parameters = int(number)
    except (ValueError, OverflowError):
        raise ValueError(f"parameters {text[:40]!r} is not a number") from None
    if not 0 < parameters < MAX_PARAMETERS or number != parameters:
        raise ValueError("parameters must be a positive count (a whole number below 10^14, e.g. 110000000)")
    return parameters


def validate(raw: dict[str, Any], look: Lookup) -> Row:
    """One result checked against the database's tasks, metrics and sources. Raises ValueError with the reason."""
    model = clean(raw.get("model"), "model", required=True)
    if "," in model:
        raise ValueError("model names cannot contain commas (the page's links list models separated by commas)")
    variant = clean(raw.get("variant"), "variant")
    task = clean(raw.get("task"), "task", required=True)
    metric = clean(raw.get("metric"), "metric", required=True)
    if task.lower() not in look.tasks:
        close = [look.task_names[k] for k in look.task_names if k.startswith(task.lower()[:3])][:4]
        raise ValueError(f"unknown task {task[:40]!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if (task.lower(), metric.lower()) not in look.metrics:
        raise ValueError(f"unknown metric {metric[:40]!r} for {look.task_names[task.lower()]} "
                         f"(known: {', '.join(sorted(look.tasks[task.lower()]))})")
    metric_id, lower, upper, metric_name = look.metrics[(task.lower(), metric.lower())]
    split = clean(raw.get("split"), "split", required=True).lower()
    if split not in RESULT_SPLITS:
        raise ValueError(f"split must be one of {', '.join(RESULT_SPLITS)}, not {split[:40]!r}")
    setting = (clean(raw.get("setting"), "setting") or "single").lower()
    if setting not in RESULT_SETTINGS:
        raise ValueError(f"setting must be single or ensemble, not {setting[:40]!r}")
    value = _number(raw.get("value"))
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        rng = f"{'' if lower is None else f'{lower:g}'} to {'∞' if upper is None else f'{upper:g}'}"
        raise ValueError(f"{value:g} is outside the range of {metric_name} ({rng}); scores are in percent, e.g. 84.6 not 0.846")
    source = clean(raw.get("source"), "source", required=True)
    if source.lower() in look.seed_sources:
        raise ValueError(f"source {source!r} is one of the published sources of the built-in data; a result you add cites "
                         "where it comes from in words (e.g. 'Smith et al. 2023, arXiv 2301.00001' or 'My run, 2026')")
    if source.lower() not in look.user_sources and not (_YEAR.search(source) and len(source) >= 10):
        raise ValueError(f"source {source[:60]!r} is neither a source already cited nor a citation with a year "
                         "(e.g. 'Smith et al. 2023, arXiv 2301.00001')")
    snapshot_text = clean(raw.get("snapshot"), "snapshot")
    try:
        snapshot = dt.date.fromisoformat(snapshot_text) if snapshot_text else None
    except ValueError:
        raise ValueError(f"snapshot {snapshot_text[:40]!r} is not a date (YYYY-MM-DD)") from None
    parameters = _parameters(clean(raw.get("parameters"), "parameters"))
    warning = ""
    if upper == 100 and 0 < abs(value) <= 1:  # stored as typed: a score of 0.85 % is possible, if unlikely
        warning = (f"Scores here are in percent: {value:g} means {value:g}%, not {value * 100:g}%. If you meant the "
                   "latter, delete this result and add it again.")
    return Row(model, variant, metric_id, split, setting, value, source, clean(raw.get("table"), "table"), snapshot,
               clean(raw.get("note"), "note"), parameters, clean(raw.get("family"), "family") or "user",
               f"{model}{f' [{variant}]' if variant else ''} · {look.task_names[task.lower()]} {metric} · {split}", warning)
