"""The scaling-law lab's use cases: fit a law to a table's columns (the Scaling page) or to posted numbers (the Gradio
``/scaling_fit`` endpoint), with the same bound on the work one fit may cost, and read the fit at a point beyond the data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from analysis import scaling
from analysis.scaling import DATASETS, LAWS, MAX_CSV_BYTES, MAX_CSV_ROWS, REFERENCE_LAWS, Allocation, Fit
from core.errors import InvalidData
from services import requests as req

__all__ = ["BOUNDS", "DATASETS", "LAWS", "MAX_CSV_BYTES", "MAX_CSV_ROWS", "REFERENCE_LAWS", "TRANSFORMS", "Allocation", "Fit", "TableFit",
           "allocations", "dataset", "fit", "fit_numbers", "fit_table", "numeric_columns", "read_at", "reference_value", "upload"]

#: Bootstrap resamples one fit may ask for (the page offers up to this many; it starts at 200).
MAX_BOOTSTRAP = 1_000
#: The bounds (inclusive) of each number a request takes, by field; the page's widgets, its links and the Gradio tab use
#: the same. "extrapolate" is the x a fit is read at (0: ten times the largest), "compute" a budget in FLOPs.
BOUNDS: dict[str, tuple[float, float]] = {"bootstrap": (0, MAX_BOOTSTRAP), "seed": (0, 10**6), "extrapolate": (0.0, 1e30),
                                          "compute": (1.0, 1e30)}
#: Points × fits (1 + bootstrap) one fit may cost; what that is in time for L(N, D) on 2 cores: bench/results/README.md.
MAX_FIT_WORK = 500_000
#: How the y column is read: as it is, or as an error 100 − y (an accuracy falls like a loss that way).
TRANSFORMS = ("as is", "100 − y (error)")


def fit(law: str, x: Any, y: Any, bootstrap: int = 200, seed: int = 0) -> scaling.Fit:
    """``law`` fitted to the points (x: one value per point, or [N, D] pairs for a two-variable law), with ``bootstrap``
    resamples for its intervals; refused when points × fits exceed :data:`MAX_FIT_WORK`."""
    law = req.choice("law", law, scaling.LAWS)
    bootstrap, seed = req.bounded("bootstrap", bootstrap, BOUNDS), req.bounded("seed", seed, BOUNDS)
    points = len(y)
    if points * (bootstrap + 1) > MAX_FIT_WORK:
        raise InvalidData(f"{points:,} points × {bootstrap + 1:,} fits is more than {MAX_FIT_WORK:,} point-fits.",
                          f"Use fewer bootstrap resamples (at most {max(0, MAX_FIT_WORK // max(1, points) - 1):,} for "
                          f"{points:,} points), or average the points first.")
    return scaling.fit(law, x, y, bootstrap=bootstrap, seed=seed)


def fit_numbers(law: str, x: Any, y: Any, n: Any = "", bootstrap: int = 200, seed: int = 0) -> scaling.Fit:
    """:func:`fit` on numbers as a client posts them (comma-separated text or lists); for a two-variable law ``x`` is D
    (tokens) and ``n`` is N (parameters)."""
    law = req.choice("law", law, scaling.LAWS)
    xs, ys = req.numbers("x", x), req.numbers("y", y)
    if scaling.LAWS[law].variables == 2:
        ns = req.numbers("n", n)
        if len(ns) != len(xs):
            raise InvalidData(f"{law} needs as many N as D values ({len(ns)} and {len(xs)}).")
        xs = [[a, b] for a, b in zip(ns, xs, strict=True)]  # type: ignore[misc]
    return fit(law, xs, ys, bootstrap, seed)


@dataclass(frozen=True)
class TableFit:
    """A fit of a table's columns and what its axes and points are called."""

    fit: scaling.Fit
    x_label: str
    y_label: str
    labels: list[str] | None

    @property
    def few_points(self) -> bool:
        """Whether there are at most two points more than the law has parameters: the error bars, not the digits."""
        return len(self.fit.y) <= len(scaling.LAWS[self.fit.law].params) + 2


def fit_table(table: Any, x: str, y: str, law: str, transform: str = "as is", x2: str = "", bootstrap: int = 200) -> TableFit:
    """``law`` fitted to ``table``'s column ``y`` (read as ``transform`` says) against ``x`` (and ``x2``, D, for a
    two-variable law)."""
    import pandas as pd

    law, transform = req.choice("law", law, scaling.LAWS), req.choice("y as", transform, TRANSFORMS)
    columns = [x, x2] if scaling.LAWS[law].variables == 2 else [x]
    for name in [*columns, y]:
        if name not in table.columns:
            raise InvalidData(f"The table has no column {str(name)[:60]!r}.")
    raw = pd.to_numeric(table[y], errors="coerce")
    values = list(100 - raw if transform != "as is" else raw)
    xs = table[columns].apply(pd.to_numeric, errors="coerce").to_numpy()
    result = fit(law, [list(r) for r in xs] if len(columns) == 2 else list(xs[:, 0]), values, bootstrap)
    first = table.columns[0]
    labels = [str(v) for v in table[first]] if first not in scaling.numeric_columns(table) and len(table) <= 30 else None
    return TableFit(result, x, y if transform == "as is" else f"100 − {y}", labels)


def read_at(result: scaling.Fit, extrapolate: float = 0.0) -> tuple[float, tuple[float, float, float] | None]:
    """Where to read a fit beyond its data: ``extrapolate`` when it lies beyond the largest x, else ten times that x;
    and for a one-variable law its value there with the 95% band (low, high). Cheap: the fit is not redone."""
    x_max = float(np.max(result.x if result.x.ndim == 1 else result.x[:, 0]))
    extrapolate = req.number("extrapolate", extrapolate, *BOUNDS["extrapolate"])
    x_to = extrapolate if extrapolate > x_max else 10 * x_max
    if result.x.ndim != 1:
        return x_to, None
    lo, hi = result.band(np.array([x_to]))
    return x_to, (float(result.predict(np.array([x_to]))[0]), float(lo[0]), float(hi[0]))


def lab_experiments() -> tuple[Any, list[str]]:
    """The labs' finished runs (a table) and their experiment groups, newest first: each group's final losses are a data
    set to fit. Reads the results database (only this source does: the page's others stay free of SQLAlchemy)."""
    from analysis.results_db import runs
    from analysis.run_status import RunStatus

    frame = runs.list_runs()
    frame = frame[frame["status"] == RunStatus.FINISHED]
    return frame, list(dict.fromkeys(g for g in frame["group"] if g))


def lab_table(frame: Any, group: str) -> Any:
    """One experiment's finished runs as a table to fit: N (non-embedding parameters), D (tokens), held-out loss."""
    from services import lab

    return lab.scaling_table(frame[frame["group"] == group])


def gpt2_sizes() -> list[dict[str, Any]]:
    """GPT-2's four sizes (layers, width, reported parameters) with their source."""
    from analysis import reference

    return reference.gpt2_sizes()


def fact(key: str) -> Any:
    """A published number with its source (``analysis.reference.Fact``)."""
    from analysis import reference

    return reference.fact(key)


# ------------------------------------------------------------------------------------------ the page's tables


def dataset(key: str) -> Any:
    """A built-in data set (one of :data:`DATASETS`) as a table, a ``source`` on every row."""
    return scaling.load_dataset(req.choice("data set", key, DATASETS))


def upload(raw: bytes) -> Any:
    """A user's CSV as a table, within :data:`MAX_CSV_BYTES` and :data:`MAX_CSV_ROWS`; :class:`InvalidData` otherwise."""
    return scaling.read_csv(raw)


def numeric_columns(table: Any) -> list[str]:
    """The columns of ``table`` that are a number on every row: what x and y may be."""
    return scaling.numeric_columns(table)


def allocations(compute: float, fitted: dict[str, float] | None = None) -> list[Allocation]:
    """The compute-optimal N and D at ``compute`` FLOPs (positive, at most 10^30) under Chinchilla, its replication and
    Kaplan, and under ``fitted`` (an L(N, D) fitted here) where given."""
    return scaling.allocations(req.number("compute", compute, *BOUNDS["compute"]), fitted)


def reference_value(key: str, *x: float) -> float:
    """A published law (one of :data:`REFERENCE_LAWS`) at a point: one argument, or N and D for a two-variable law."""
    return scaling.reference_value(req.choice("law", key, REFERENCE_LAWS), *x)
