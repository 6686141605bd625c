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
                       level: float = 0.95, seed: int = 0, n_labels: int | None = None,
                       clusters: Sequence[str] | None = None) -> tuple[float, float]:
    """The ``level`` percentile-bootstrap interval of ``metric`` over the test items (each resample draws items with
    replacement, truth and prediction together). With ``clusters`` (one name per item, e.g. its lemma), whole
    clusters are drawn instead: items of one cluster are not independent (WiC's 894 test pairs come from 270 lemmas).

    Raises:
        InvalidData: lengths that differ, or an unknown metric.
    """
    from scipy import stats

    t, p = np.asarray(y_true), np.asarray(y_pred)
    if len(t) != len(p) or (clusters is not None and len(clusters) != len(t)):
        raise InvalidData(f"{len(t)} labels but {len(p)} predictions" + (f" and {len(clusters)} clusters." if clusters is not None else "."))
    if metric not in METRICS:
        raise InvalidData(f"Unknown metric {metric!r}.", "Use accuracy or macro_f1.")
    if len(t) < 2:
        return (float("nan"), float("nan"))
    k = n_labels or int(max(t.max(), p.max())) + 1
    if clusters is not None:
        return _cluster_bootstrap(t, p, clusters, metric, k, n_resamples, level, seed)

    def statistic(a: np.ndarray, b: np.ndarray, axis: int = -1) -> np.ndarray:
        return (a == b).mean(axis) if metric == "accuracy" else _macro_f1(a, b, k, axis)

    res = stats.bootstrap((t, p), statistic, paired=True, vectorized=True, n_resamples=n_resamples, confidence_level=level,
                          method="percentile", rng=np.random.default_rng(seed))
    return (float(res.confidence_interval.low), float(res.confidence_interval.high))


def _cluster_bootstrap(t: np.ndarray, p: np.ndarray, clusters: Sequence[str], metric: str, k: int, n: int, level: float,
                       seed: int) -> tuple[float, float]:
    """Percentile interval of ``metric`` when whole clusters are resampled. Written here because scipy's
    ``stats.bootstrap`` resamples observations, not groups of them; accuracy is a ratio of sums over the drawn
    clusters (their sizes differ), macro-F1 is recomputed on the drawn items."""
    names, index = np.unique(np.asarray(clusters, dtype=str), return_inverse=True)
    members = [np.flatnonzero(index == c) for c in range(len(names))]
    if len(members) < 2:
        return (float("nan"), float("nan"))
    right = np.array([(t[m] == p[m]).sum() for m in members], dtype=float)
    size = np.array([len(m) for m in members], dtype=float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, len(members), (n, len(members)))
    if metric == "accuracy":
        values = right[draws].sum(1) / size[draws].sum(1)
    else:
        values = np.array([_macro_f1(t[idx], p[idx], k) for idx in (np.concatenate([members[c] for c in d]) for d in draws)])
    lo, hi = np.percentile(values, [(1 - level) / 2 * 100, (1 + level) / 2 * 100])
    return (float(lo), float(hi))


def seed_summary(scores: Sequence[float]) -> dict[str, float]:
    """Mean, sample standard deviation (ddof 1; NaN for one seed) and count of per-seed scores."""
    x = np.asarray([s for s in scores if s == s], dtype=float)
    return {"mean": float(x.mean()) if len(x) else float("nan"), "std": float(x.std(ddof=1)) if len(x) > 1 else float("nan"),
            "n": len(x)}
