"""Verdicts: does a measured ablation agree with the paper's claim, at this budget?

The papers decide a claim the same way: a downstream score, over several seeds, compared between arms. This
module makes that decision from numbers alone (no torch), so that the lab's presets, the page, the database and
the tests share one rule:

- :func:`verdict` compares two arms' per-seed scores against a claim ``">"`` (a beats b) or ``">="`` (a is at
  least as good as b, within ``margin``) and returns one of three labels, computed, never written by hand:
  **agrees** (the 95% interval of the effect excludes the paper's "no" side), **cannot tell at this budget** (the
  interval straddles it; :attr:`Verdict.seeds_needed` says how many seeds the observed spread would need), or
  **disagrees** (the interval lies wholly on the other side). With fewer than 2 seeds on an arm there is no
  verdict, by design: one seed measures the seed, not the method.
- :func:`trend_verdict` does the same for a fitted exponent (the scaling preset's α, the IsoFLOP optimum's
  exponent): the direction is the claim, the reference value (Kaplan's α_N ≈ 0.076, Chinchilla's 0.5) is shown
  beside the interval.

The interval. Seeds are the independent replicates: the same seed gives both arms the same data order and the
same test items (the downstream subset is drawn from the seed), so by default each seed's difference of scores
is one paired observation, and the interval is Student's t over those differences (``paired t over seeds``).
That interval is exact for normal differences whatever mixes the seed's and the test items' noise, which a
bootstrap over 3 seeds is not (it has only 10 distinct resamples and underestimates the spread by (k−1)/k); with
3 seeds it is wide, which is the honest answer. Arms with unequal seeds (a failed run) fall back to Welch's t.
With per-item correctness a hierarchical bootstrap over seeds × test items is available (``method="bootstrap"``)
for those who want the items' noise shown; it is not the default for the reason above.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from core.errors import InvalidData

CLAIMS = {">": "beats", ">=": "is at least as good as"}
AGREES, CANNOT_TELL, DISAGREES, NO_VERDICT = "agrees", "cannot tell at this budget", "disagrees", "no verdict"
LABELS = (AGREES, CANNOT_TELL, DISAGREES, NO_VERDICT)
MIN_SEEDS = 2
MAX_SEEDS = 1000
MAX_ITEMS = 100_000
LEVEL = 0.95


@dataclass(frozen=True)
class Verdict:
    """The decision on one claim: the label, the effect (mean of a − mean of b) and its interval, and why."""

    label: str
    claim: str
    margin: float
    effect: float
    low: float
    high: float
    method: str
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    seeds_a: int
    seeds_b: int
    seeds_needed: int | None = None  # when it cannot tell: seeds per arm the observed spread would need
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Verdict:
        return cls(**{k: raw.get(k) for k in cls.__dataclass_fields__})

    @property
    def sentence(self) -> str:
        """One line for the page: the label, the effect and its interval."""
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        line = f"{self.label.capitalize()}: effect {self.effect:+.3f} (95% interval {self.low:+.3f} to {self.high:+.3f}; {self.method})"
        if self.label == CANNOT_TELL and self.seeds_needed:
            line += f". About {self.seeds_needed} seeds per arm would resolve an effect this size"
        elif self.label == CANNOT_TELL:
            line += ". " + self.reason
        return line


def _scores(name: str, values: Sequence[float]) -> np.ndarray:
    try:
        x = np.asarray(list(values), dtype=float)
    except (TypeError, ValueError):
        raise InvalidData(f"{name} must be numbers, one per seed.") from None
    if x.ndim != 1 or len(x) > MAX_SEEDS:
        raise InvalidData(f"{name} must be a flat list of at most {MAX_SEEDS:,} per-seed scores.")
    if not np.all(np.isfinite(x)):
        raise InvalidData(f"{name} holds a missing or infinite score.", "Drop the seeds that failed before deciding.")
    return x


def _items(name: str, rows: Sequence[Sequence[float]] | None, seeds: int) -> np.ndarray | None:
    if rows is None:
        return None
    try:
        x = np.asarray([list(r) for r in rows], dtype=float)
    except (TypeError, ValueError):
        raise InvalidData(f"{name} must be one list of per-item scores per seed, all the same length.") from None
    if x.ndim != 2 or x.shape[0] != seeds or not 1 <= x.shape[1] <= MAX_ITEMS or not np.all(np.isfinite(x)):
        raise InvalidData(f"{name} must hold {seeds} rows (one per seed) of 1 to {MAX_ITEMS:,} finite item scores each.")
    return x


def _label(claim: str, margin: float, low: float, high: float) -> str:
    floor = 0.0 if claim == ">" else -margin  # the paper's "no" side begins here
    if low > floor:
        return AGREES
    if high < floor:
        return DISAGREES
    return CANNOT_TELL


def seeds_needed(spread: float, target: float, paired: bool = True, start: int = MIN_SEEDS) -> int | None:
    """Seeds per arm at which a t interval's half-width drops below ``target``, for the observed ``spread``
    (the standard deviation of the paired differences, or of one arm's scores for two independent arms); None when
    no count up to :data:`MAX_SEEDS` does (a zero effect is never resolved by seeds)."""
    if not (target > 0 and math.isfinite(spread)):
        return None
    if spread == 0:
        return max(start, MIN_SEEDS)
    for n in range(max(start, MIN_SEEDS), MAX_SEEDS + 1):
        se = spread / math.sqrt(n) if paired else spread * math.sqrt(2 / n)
        if stats.t.ppf(0.5 + LEVEL / 2, (n - 1) if paired else 2 * (n - 1)) * se < target:
            return n
    return None


def verdict(scores_a: Sequence[float], scores_b: Sequence[float], claim: str = ">", margin: float = 0.0, *,
            items_a: Sequence[Sequence[float]] | None = None, items_b: Sequence[Sequence[float]] | None = None,
            method: str = "t", paired: bool | None = None, n_resamples: int = 4000, seed: int = 0) -> Verdict:
    """Decide ``claim`` (``">"``: a beats b; ``">="``: a is at least as good as b within ``margin``) from per-seed
    scores. ``scores_a[i]`` and ``scores_b[i]`` are paired by seed when both arms have the same number of seeds
    (``paired=None``); ``items_*`` (per seed, per test item: 1 = right) allow ``method="bootstrap"``.

    Returns a :class:`Verdict`; fewer than :data:`MIN_SEEDS` seeds on an arm give ``no verdict``.

    Raises:
        InvalidData: an unknown claim or method, a negative margin, missing or non-finite scores, items that do
            not match the seeds.
    """
    if claim not in CLAIMS:
        raise InvalidData(f"Unknown claim {claim!r}.", "Use '>' (a beats b) or '>=' (a at least as good as b, within a margin).")
    if method not in ("t", "bootstrap"):
        raise InvalidData(f"Unknown method {method!r}.", "Use 't' or 'bootstrap'.")
    if not (isinstance(margin, int | float) and math.isfinite(margin) and 0 <= margin < 1e6):
        raise InvalidData(f"The margin must be a finite number ≥ 0, not {margin!r}.")
    if not 100 <= n_resamples <= 100_000:
        raise InvalidData("n_resamples must be from 100 to 100,000.")
    a, b = _scores("scores_a", scores_a), _scores("scores_b", scores_b)
    ia, ib = _items("items_a", items_a, len(a)), _items("items_b", items_b, len(b))
    if method == "bootstrap" and (ia is None or ib is None):
        raise InvalidData("The bootstrap over seeds × items needs per-item scores for both arms.")
    paired = (len(a) == len(b)) if paired is None else paired
    if paired and len(a) != len(b):
        raise InvalidData(f"Paired seeds need the same count on both arms ({len(a)} vs {len(b)}).")
    effect = float(a.mean() - b.mean()) if len(a) and len(b) else float("nan")
    base = {"claim": claim, "margin": float(margin), "effect": effect, "mean_a": float(a.mean()) if len(a) else float("nan"),
            "mean_b": float(b.mean()) if len(b) else float("nan"), "std_a": float(a.std(ddof=1)) if len(a) > 1 else float("nan"),
            "std_b": float(b.std(ddof=1)) if len(b) > 1 else float("nan"), "seeds_a": len(a), "seeds_b": len(b)}
    if min(len(a), len(b)) < MIN_SEEDS:
        return Verdict(NO_VERDICT, low=float("nan"), high=float("nan"), method="", **base,
                       reason=f"a verdict needs at least {MIN_SEEDS} seeds per arm (this has {len(a)} and {len(b)}); "
                              "one seed measures the seed, not the method.")
    target = abs(effect) if claim == ">" else effect + margin
    if method == "bootstrap":
        low, high, name = (*_bootstrap(ia, ib, paired, n_resamples, seed), "bootstrap over seeds × test items")
        half = (high - low) / 2
        need = math.ceil(len(a) * (half / target) ** 2) if target > 0 and half > 0 else None
    elif paired:
        d = a - b
        with warnings.catch_warnings():  # scipy warns on near-identical differences; the interval is still right
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = stats.ttest_1samp(d, 0.0).confidence_interval(LEVEL)
        low, high, name = float(ci.low), float(ci.high), "paired t over seeds"
        if float(d.std(ddof=1)) == 0:
            low = high = float(d.mean())
        need = seeds_needed(float(d.std(ddof=1)), target, True, len(a) + 1)
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            ci = stats.ttest_ind(a, b, equal_var=False).confidence_interval(LEVEL)
        low, high, name = float(ci.low), float(ci.high), "Welch t over seeds"
        if base["std_a"] == 0 and base["std_b"] == 0:
            low = high = effect
        need = seeds_needed(math.sqrt((base["std_a"] ** 2 + base["std_b"] ** 2) / 2), target, False, max(len(a), len(b)) + 1)
    label = _label(claim, float(margin), low, high)
    reason = ""
    if label == CANNOT_TELL:
        need = need if need is not None and need > max(len(a), len(b)) else None
        reason = ("" if need else "the observed effect is too close to the claim's boundary for more seeds alone to "
                  "resolve it; a larger budget per run (longer pre-training, more fine-tuning data) may")
    else:
        need = None
    return Verdict(label, low=low, high=high, method=name, seeds_needed=need, reason=reason, **base)


def _bootstrap(ia: np.ndarray, ib: np.ndarray, paired: bool, n: int, seed: int) -> tuple[float, float]:
    """Percentile interval of mean(a) − mean(b), resampling seeds (together when paired) and test items (the same
    items for both arms when they share them)."""
    rng = np.random.default_rng(seed)
    same_items = paired and ia.shape == ib.shape
    diffs = np.empty(n)
    for r in range(n):
        sa = rng.integers(0, ia.shape[0], ia.shape[0])
        sb = sa if paired else rng.integers(0, ib.shape[0], ib.shape[0])
        items_a = rng.integers(0, ia.shape[1], ia.shape[1])
        items_b = items_a if same_items else rng.integers(0, ib.shape[1], ib.shape[1])
        diffs[r] = ia[np.ix_(sa, items_a)].mean() - ib[np.ix_(sb, items_b)].mean()
    lo, hi = np.percentile(diffs, [(1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100])
    return float(lo), float(hi)


# ------------------------------------------------------------------------------ fitted exponents


@dataclass(frozen=True)
class TrendVerdict:
    """A fitted exponent against the paper's direction, with the paper's value beside it."""

    label: str
    quantity: str  # what was fitted, e.g. "α_N in L(N) ∝ N^−α"
    estimate: float
    low: float
    high: float
    reference: float
    reference_source: str
    reference_inside: bool
    points: int
    method: str
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sentence(self) -> str:
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        where = "inside" if self.reference_inside else "outside"
        return (f"{self.label.capitalize()}: {self.quantity} = {self.estimate:.3f} (95% interval {self.low:.3f} to "
                f"{self.high:.3f}); the paper's {self.reference:g} is {where} it")


def _per_seed(points: Sequence[Sequence[float]], key_len: int, statistic: Any) -> tuple[float, float, float, int, int]:
    """The statistic on each seed's own grid (each seed replicates every size or cell), then a t interval over the
    seeds, as :func:`verdict` does for arms. Returns (estimate on the seed means, low, high, seeds, points)."""
    grids: dict[float, dict[tuple[float, ...], float]] = {}
    cells: dict[tuple[float, ...], list[float]] = {}
    for p in points:
        try:
            row = [float(v) for v in p]
        except (TypeError, ValueError):
            raise InvalidData(f"Each point must be numbers, not {p!r}.") from None
        if len(row) != key_len + 2 or not all(math.isfinite(v) for v in row) or not all(v > 0 for v in row[1:]):
            raise InvalidData(f"Each point must be (seed, {key_len + 1} positive numbers), not {p!r}.")
        grids.setdefault(row[0], {})[tuple(row[1:-1])] = row[-1]
        cells.setdefault(tuple(row[1:-1]), []).append(row[-1])
    estimate = statistic({k: float(np.mean(v)) for k, v in cells.items()})
    per_seed = np.array([statistic(g) for g in grids.values() if len(g) == len(cells)])
    per_seed = per_seed[np.isfinite(per_seed)]
    if len(per_seed) < MIN_SEEDS:
        return estimate, float("nan"), float("nan"), len(per_seed), len(points)
    if float(per_seed.std(ddof=1)) == 0:
        return estimate, float(per_seed[0]), float(per_seed[0]), len(per_seed), len(points)
    ci = stats.ttest_1samp(per_seed, 0.0).confidence_interval(LEVEL)
    return estimate, float(ci.low), float(ci.high), len(per_seed), len(points)


def _trend(quantity: str, estimate: float, low: float, high: float, reference: float, source: str, points: int,
           seeds: int, method: str) -> TrendVerdict:
    if seeds < MIN_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return TrendVerdict(NO_VERDICT, quantity, estimate, low, high, reference, source, False, points, method,
                            f"a verdict needs at least {MIN_SEEDS} seeds that ran every size ({seeds} did).")
    label = _label(">", 0.0, low, high)
    return TrendVerdict(label, quantity, estimate, low, high, reference, source, low <= reference <= high, points, method)


def scaling_verdict(points: Sequence[tuple[float, float, float]]) -> TrendVerdict:
    """Kaplan et al.'s L(N) ∝ N^−α_N from (seed, non-embedding parameters N, held-out loss) points: α is the slope
    of −log L on log N, fitted on each seed's sizes; the interval is Student's t over the seeds (each seed
    replicates every size). The claim is the direction (α > 0: loss falls as N grows); α_N ≈ 0.076 (Kaplan et al.
    2020, Figure 1) is shown beside it.

    Raises:
        InvalidData: fewer than 3 sizes, or malformed points.
    """
    sizes = {float(p[1]) for p in points if len(p) == 3}
    if len(sizes) < 3:
        raise InvalidData(f"A scaling fit needs at least 3 sizes, not {len(sizes)}.")
    est, lo, hi, seeds, total = _per_seed(points, 1, _neg_slope)
    return _trend("α_N in L(N) ∝ N^−α", est, lo, hi, 0.076, "Kaplan et al. 2020, Figure 1 (α_N ≈ 0.076)", total, seeds,
                  "least squares per seed; t over seeds")


def _neg_slope(means: dict[Any, float]) -> float:
    x = np.log([k[0] for k in means])
    y = np.log(list(means.values()))
    return float(-np.polyfit(x, y, 1)[0])


def isoflop_optimum(means: dict[tuple[float, float], float]) -> dict[float, float]:
    """Chinchilla's approach 2: for each compute budget C, the N at the minimum of a parabola fitted to the loss
    against log N (kept within the sizes tried). ``means``: (C, N) -> loss. Returns C -> N_opt."""
    out = {}
    for c in sorted({k[0] for k in means}):
        row = sorted((n, loss) for (cc, n), loss in means.items() if cc == c)
        x, y = np.log([n for n, _ in row]), np.array([loss for _, loss in row])
        if len(row) < 3:
            continue
        a2, a1, _ = np.polyfit(x, y, 2)
        vertex = -a1 / (2 * a2) if a2 > 0 else x[int(np.argmin(y))]
        out[c] = float(np.exp(np.clip(vertex, x.min(), x.max())))
    return out


def _optimum_slope(means: dict[tuple[float, float], float]) -> float:
    opt = isoflop_optimum(means)
    if len(opt) < 2:
        return float("nan")
    return float(np.polyfit(np.log(list(opt)), np.log(list(opt.values())), 1)[0])


def isoflop_verdict(points: Sequence[tuple[float, float, float, float]]) -> TrendVerdict:
    """Hoffmann et al.'s N_opt ∝ C^a from (seed, compute C, parameters N, loss) points: each seed's optimum per
    budget (:func:`isoflop_optimum`), the slope of log N_opt on log C per seed, and Student's t over the seeds.
    The claim is the direction (a > 0: the best size grows with the budget); Chinchilla's a ≈ 0.5 is shown beside it.

    Raises:
        InvalidData: fewer than 2 budgets with 3 sizes each, or malformed points.
    """
    cells = {(float(p[1]), float(p[2])) for p in points if len(p) == 4}
    budgets = {c for c, _ in cells}
    if len(budgets) < 2 or any(sum(1 for cc, _ in cells if cc == c) < 3 for c in budgets):
        raise InvalidData("An IsoFLOP fit needs at least 2 compute budgets with 3 sizes each.")
    est, lo, hi, seeds, total = _per_seed(points, 2, _optimum_slope)
    return _trend("a in N_opt ∝ C^a", est, lo, hi, 0.5, "Hoffmann et al. 2022, Chinchilla, Table 2 (approach 2: a = 0.49)",
                  total, seeds, "parabola per budget, per seed; t over seeds")
