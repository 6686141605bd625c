"""Verdicts on a fitted exponent: Kaplan et al.'s α_N of L(N) and Chinchilla's IsoFLOP exponent a, each fitted per
seed with a t interval over the seeds; the paper's sign decides, and its value is shown beside (inside the interval
or not)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import stats

from analysis.verdicts.labels import AGREES, AGREES_ON_DIRECTION, CANNOT_TELL, LEVEL, MIN_SEEDS, NO_VERDICT, label_for
from core.errors import InvalidData


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
    edges: tuple[float, ...] = ()  # IsoFLOP budgets whose optimum lies at the edge of the widths tried
    level: float = LEVEL  # the interval's confidence (below 95% for a claim adjusted with others: Holm)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sentence(self) -> str:
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        where = "the interval is inside the band around it" if self.reference_inside else "the interval is not inside the band around it"
        line = (f"{self.label.capitalize()}: {self.quantity} = {self.estimate:.3f} ({(self.level or LEVEL) * 100:.4g}% interval {self.low:.3f} to "
                f"{self.high:.3f}); the paper's {self.reference:g}: {where}")
        return line + (f". {self.reason[0].upper()}{self.reason[1:]}" if self.reason else "")


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


#: How close to the paper's value "agrees" asks (relative half-width of the band around it): the whole interval must lie
#: inside the band (an equivalence test), so a noisier estimate cannot agree where a tighter one would not. Kaplan's α_N
#: is read off a log-log slope whose value moves with the fit's range (0.05–0.10 across the paper's own fits): ±50%;
#: Chinchilla's a is 0.46–0.54 across its three approaches: ±25%.
BANDS = {"scaling": 0.5, "isoflop": 0.25}


def in_band(low: float, high: float, reference: float, band: float) -> bool:
    """Whether [low, high] lies wholly inside reference × (1 ± band)."""
    lo, hi = sorted((reference * (1 - band), reference * (1 + band)))
    return lo <= low and high <= hi


def band_reason(low: float, high: float, reference: float, band: float) -> str:
    lo, hi = sorted((reference * (1 - band), reference * (1 + band)))
    return (f"the sign is the paper's; the value is matched only when the whole interval ({low:.3g} to {high:.3g}) lies "
            f"within ±{band:.0%} of the paper's {reference:.3g} ({lo:.3g} to {hi:.3g}), and it does not")


def _trend(quantity: str, estimate: float, low: float, high: float, reference: float, source: str, points: int,
           seeds: int, method: str, edges: tuple[float, ...] = (), band: float = 0.0) -> TrendVerdict:
    if seeds < MIN_SEEDS or not (math.isfinite(low) and math.isfinite(high)):
        return TrendVerdict(NO_VERDICT, quantity, estimate, low, high, reference, source, False, points, method,
                            f"a verdict needs at least {MIN_SEEDS} seeds that ran every size ({seeds} did).")
    inside = in_band(low, high, reference, band) if band else low <= reference <= high
    label, reason = label_for(">", 0.0, low, high), ""
    if high - low <= 1e-9 * max(1.0, abs(estimate)):  # no spread (to rounding)
        label, reason = CANNOT_TELL, "no measurable spread: every seed fitted the same value, so the interval has no width"
    if label == AGREES and not inside:
        label = AGREES_ON_DIRECTION
        reason = band_reason(low, high, reference, band) if band else \
            f"the sign is the paper's, the value is not: {reference:g} lies outside the interval"
    if edges:
        # A clipped optimum is a bound, not an estimate: it can only lower confidence, and it is said whatever the label.
        edge = (f"the best width of {len(edges)} budget(s) ({', '.join(f'{c:.2g}' for c in edges)} FLOPs) lies at the edge "
                "of the widths tried, so its optimum is clipped: add a narrower or a wider size")
        if label in (AGREES, AGREES_ON_DIRECTION):
            label = CANNOT_TELL
        reason = f"{reason}; {edge}" if reason else edge
    return TrendVerdict(label, quantity, estimate, low, high, reference, source, inside, points, method, reason, tuple(edges))


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
                  "least squares per seed; t over seeds", band=BANDS["scaling"])


def _neg_slope(means: dict[Any, float]) -> float:
    x = np.log([k[0] for k in means])
    y = np.log(list(means.values()))
    return float(-np.polyfit(x, y, 1)[0])


def isoflop_optimum(means: dict[tuple[float, float], float]) -> dict[float, float]:
    """Chinchilla's approach 2: for each compute budget C, the N at the minimum of a parabola fitted to the loss
    against log N (kept within the sizes tried). ``means``: (C, N) -> loss. Returns C -> N_opt."""
    return {c: n for c, (n, _) in isoflop_optima(means).items()}


def isoflop_optima(means: dict[tuple[float, float], float]) -> dict[float, tuple[float, bool]]:
    """:func:`isoflop_optimum` with, per budget, whether its optimum lies at the edge of the sizes tried (the
    parabola opens downward, or its minimum falls outside them and is clipped): such an optimum is a bound, not an
    estimate."""
    out = {}
    for c in sorted({k[0] for k in means}):
        row = sorted((n, loss) for (cc, n), loss in means.items() if cc == c)
        x, y = np.log([n for n, _ in row]), np.array([loss for _, loss in row])
        if len(row) < 3:
            continue
        a2, a1, _ = np.polyfit(x, y, 2)
        vertex = -a1 / (2 * a2) if a2 > 0 else x[int(np.argmin(y))]
        clipped = float(np.clip(vertex, x.min(), x.max()))
        out[c] = (float(np.exp(clipped)), bool(clipped in (x.min(), x.max())))
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
    by_cell: dict[tuple[float, float], list[float]] = {}
    for p in points:
        by_cell.setdefault((float(p[1]), float(p[2])), []).append(float(p[3]))
    edges = tuple(c for c, (_, edge) in isoflop_optima({k: float(np.mean(v)) for k, v in by_cell.items()}).items() if edge)
    return _trend("a in N_opt ∝ C^a", est, lo, hi, 0.5, "Hoffmann et al. 2022, Chinchilla, Table 2 (approach 2: a = 0.49)",
                  total, seeds, "parabola per budget, per seed; t over seeds", edges, band=BANDS["isoflop"])
