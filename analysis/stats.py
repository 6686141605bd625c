"""Scores with their uncertainty, without torch: accuracy and macro-F1 on a test set, a bootstrap 95% interval
over its items (scipy's ``stats.bootstrap``, percentile method, items resampled in pairs), and the mean and spread
of several seeds.

A test set of n items scored at accuracy p has a standard error of about √(p(1−p)/n): at 200 items and 60%,
±3.5 points, so a 95% interval is about ±7 points; these intervals say how much of a difference is noise.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from core.errors import InvalidData

METRICS = ("accuracy", "macro_f1")


def accuracy(y_true: Sequence[int], y_pred: Sequence[int]) -> float:
    """Share of items predicted right."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    return float((t == p).mean()) if len(t) else float("nan")


def _macro_f1(t: np.ndarray, p: np.ndarray, n_labels: int, axis: int = -1) -> np.ndarray:
    """Macro-F1 along ``axis`` (vectorised over resamples): the mean over the classes present in ``t`` or ``p`` of
    2·TP / (2·TP + FP + FN), as scikit-learn's ``f1_score(average="macro")`` computes it (tested against it)."""
    scores, present = [], []
    for c in range(n_labels):
        tc, pc = t == c, p == c
        tp = (tc & pc).sum(axis)
        denom = tc.sum(axis) + pc.sum(axis)
        scores.append(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0))
        present.append(denom > 0)
    s, m = np.stack(scores), np.stack(present)
    return (s * m).sum(0) / np.maximum(m.sum(0), 1)


def macro_f1(y_true: Sequence[int], y_pred: Sequence[int], n_labels: int | None = None) -> float:
    """Macro-averaged F1 over the classes that occur in ``y_true`` or ``y_pred``."""
    t, p = np.asarray(y_true), np.asarray(y_pred)
    if not len(t):
        return float("nan")
    return float(_macro_f1(t, p, n_labels or int(max(t.max(), p.max())) + 1))


def bootstrap_interval(y_true: Sequence[int], y_pred: Sequence[int], metric: str = "accuracy", *, n_resamples: int = 2000,
                       level: float = 0.95, seed: int = 0, n_labels: int | None = None) -> tuple[float, float]:
    """The ``level`` percentile-bootstrap interval of ``metric`` over the test items (each resample draws items with
    replacement, truth and prediction together).

    Raises:
        InvalidData: lengths that differ, or an unknown metric.
    """
    from scipy import stats

    t, p = np.asarray(y_true), np.asarray(y_pred)
    if len(t) != len(p):
        raise InvalidData(f"{len(t)} labels but {len(p)} predictions.")
    if metric not in METRICS:
        raise InvalidData(f"Unknown metric {metric!r}.", "Use accuracy or macro_f1.")
    if len(t) < 2:
        return (float("nan"), float("nan"))
    k = n_labels or int(max(t.max(), p.max())) + 1

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return (a == b).mean(axis) if metric == "accuracy" else _macro_f1(a, b, k, axis)

    res = stats.bootstrap((t, p), statistic, paired=True, vectorized=True, n_resamples=n_resamples, confidence_level=level,
                          method="percentile", rng=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def seed_summary(scores: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1; NaN for one seed) and count of per-seed scores."""
    x = np.asarray([s for s in scores if s == s], dtype=float)
    return {"mean": float(x.mean()) if len(x) else float("nan"), "std": float(x.std(ddof=1)) if len(x) > 1 else float("nan"),
            "n": len(x)}
