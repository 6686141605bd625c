"""The μTransfer verdict: does the best learning rate stay put across widths under μP and move under the standard
parametrisation (Yang et al. 2022, Tensor Programs V, Figure 1 and Figure 3)?

The runs are a grid: parametrisation × width × learning rate × seed, each with its held-out loss. The rule, per
parametrisation, compares the narrowest width with the widest, on the seed-mean losses, with an interval on the shift:

- **A set of best rates, not one.** The rates whose seed-mean loss is within δ of the lowest are all "best": losses
  nearer than the noise cannot be ordered. δ = t(0.975, df) · σ̂ · √(2/S), the 95% half-width of a difference of two
  seed-mean losses, where σ̂ is one run's noise, estimated from the seeds (each cell's per-seed losses about the cell
  mean and the seed's own level: seeds hold out different text) and floored at :data:`MIN_DELTA`. A set that
  reaches an edge of the grid is open on that side (the optimum may lie beyond it).
- **The shift's interval** is every difference between a best rate at the widest width and one at the narrowest, in
  grid steps: [min H − max L, max H − min L].
- **agrees** when μP's interval lies within ±1 step and SP's lies wholly 2 or more steps away (the paper's claim);
  **disagrees** only when an interval lies wholly on the wrong side (μP's wholly 2+ steps away, or SP's wholly
  within ±1); **cannot tell at this budget** otherwise: near-ties, open edges and overlapping sets.
- **A precondition**: every width's best run under both parametrisations must have learnt something beyond the
  corpus's token counts (its loss at the [MASK] inputs at least :data:`MIN_GAIN` nats below the counts' on every
  seed). Flat curves at the token counts have a best rate chosen by noise. Where it fails: cannot tell, with the gains.
- **No verdict** with fewer than two seeds that ran the whole grid, or widths spanning less than :data:`MIN_SPAN` ×:
  under SP the best rate moves about as 1/width, so an 8× span expects a 3-step shift (grid steps of 2×); at 4× the
  expected shift equals the 2-step threshold and even a noiseless run would miss it about half the time.

Checked on planted curves (``tests/analysis/test_transfer_rule.py``): flat curves give *cannot tell* ≥ 95% of the
time, a planted 3-step SP shift with μP still gives *agrees* ≥ 80%.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
from scipy import stats

from analysis.verdicts.labels import AGREES, CANNOT_TELL, DISAGREES, MIN_SEEDS, NO_VERDICT
from core.errors import InvalidData

#: The two parametrisations the verdict compares (models.pretrain.config.PARAMETRISATIONS says what each is).
COMPARED = ("sp", "mup")
#: The widest width over the narrowest before any verdict (module docstring).
MIN_SPAN = 8
#: The smallest δ, in nats: two held-out losses closer than this are a tie whatever the seeds say.
MIN_DELTA = 0.01
#: What "learnt something" asks of a width's best run: this many nats below the token counts at the [MASK] inputs.
MIN_GAIN = 0.05


@dataclass(frozen=True)
class TransferVerdict:
    """The μTransfer claim decided from a grid of runs."""

    label: str
    widths: tuple[int, int]  # the narrowest and widest width compared
    rates: tuple[float, ...]  # the learning-rate grid
    best: dict[str, dict[int, float]]  # parametrisation -> width -> best rate on the seed-mean losses
    shift: dict[str, int]  # parametrisation -> widest's best minus narrowest's, in grid steps (seed means)
    seed_shifts: dict[str, list[int]] = field(default_factory=dict)  # parametrisation -> one argmin shift per seed
    edges: tuple[str, ...] = ()  # parametrisations whose set of best rates reaches an edge of the grid
    seeds: int = 0
    reason: str = ""
    #: parametrisation -> width -> the set of best rates (grid indices within δ of the lowest seed-mean loss)
    best_sets: dict[str, dict[int, list[int]]] = field(default_factory=dict)
    #: parametrisation -> [low, high] of the shift in grid steps (±inf where a set is open at an edge)
    shift_interval: dict[str, list[float]] = field(default_factory=dict)
    delta: float | None = None  # δ, nats
    noise: float | None = None  # σ̂, one run's noise, nats
    gains: dict[str, dict[int, float]] = field(default_factory=dict)  # parametrisation -> width -> least gain over counts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sentence(self) -> str:
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        lo, hi = self.widths

        def said(p: str) -> str:
            b = self.best[p]
            sets = self.best_sets.get(p, {})
            lo_s = ", ".join(f"2^{math.log2(self.rates[i]):.0f}" for i in sets.get(lo, []))
            hi_s = ", ".join(f"2^{math.log2(self.rates[i]):.0f}" for i in sets.get(hi, []))
            low, high = self.shift_interval.get(p, [self.shift[p], self.shift[p]])
            span = "; ".join(x for x in (f"{'μP' if p == 'mup' else 'SP'}: best rate 2^{math.log2(b[lo]):.0f} at width {lo}, "
                                         f"2^{math.log2(b[hi]):.0f} at {hi} ({self.shift[p]:+d} grid steps",) if x)
            return (span + (f"; within δ: {{{lo_s}}} and {{{hi_s}}}, a shift of {_step(low)} to {_step(high)}" if sets else "")
                    + f"; per seed {', '.join(f'{s:+d}' for s in self.seed_shifts.get(p, []))})")

        line = f"{self.label.capitalize()}: {said('mup')}; {said('sp')}"
        if self.delta is not None:
            line += f". δ = {self.delta:.3f} nats (one run's noise {self.noise:.3f})"
        return line + (f". {self.reason[0].upper()}{self.reason[1:]}" if self.reason else "")


def _step(x: float) -> str:
    return "−∞" if x == -math.inf else "+∞" if x == math.inf else f"{x:+.0f}"


def _best(losses: dict[float, float], rates: Sequence[float]) -> int:
    """The index of the rate with the lowest loss (ties: the smaller rate)."""
    return min(range(len(rates)), key=lambda i: (losses.get(rates[i], math.inf), i))


def _noise(grid: dict[tuple[str, int], dict[int, dict[float, float]]], seeds: list[int]) -> tuple[float, int]:
    """One run's loss noise σ̂ and its df, from the cells every seed ran with a finite loss: each seed's loss about
    the cell's mean and the seed's own level under that parametrisation and width (seeds hold out different text)."""
    residuals: list[float] = []
    df = 0
    for p in COMPARED:
        widths = set.intersection(*[set(grid[p, s]) for s in seeds]) if seeds else set()
        for w in widths:
            rates = sorted(set.intersection(*[set(grid[p, s][w]) for s in seeds]))
            m = np.array([[grid[p, s][w][r] for r in rates] for s in seeds], dtype=float)  # seeds × rates
            m = m[:, np.isfinite(m).all(axis=0)]
            if m.shape[1] < 2:
                continue
            r = m - m.mean(axis=0, keepdims=True) - m.mean(axis=1, keepdims=True) + m.mean()
            residuals.extend(r.ravel().tolist())
            df += (m.shape[0] - 1) * (m.shape[1] - 1)
    if df < 1:
        return math.nan, 0
    return math.sqrt(float(np.sum(np.square(residuals))) / df), df


def transfer_verdict(points: Sequence[Sequence[Any]], gains: Sequence[Sequence[Any]] | None = None) -> TransferVerdict:
    """Decide the μTransfer claim (module docstring) from ``(parametrisation, seed, width, rate, held-out loss)``
    points; a loss that is None or not finite is a diverged run. ``gains``: ``(parametrisation, seed, width, rate,
    nats below the token counts at [MASK])`` per run, for the precondition; None skips it (and says so).

    Raises:
        InvalidData: a point of the wrong shape, an unknown parametrisation, fewer than two widths or three rates.
    """
    grid: dict[tuple[str, int], dict[int, dict[float, float]]] = {}
    for p in points:
        if len(p) != 5 or p[0] not in COMPARED:
            raise InvalidData(f"Each point must be (sp|mup, seed, width, rate, loss), not {p!r}.")
        try:
            seed, width, rate = int(p[1]), int(p[2]), float(p[3])
        except (TypeError, ValueError):
            raise InvalidData(f"Each point must be (sp|mup, seed, width, rate, loss), not {p!r}.") from None
        loss = float(p[4]) if isinstance(p[4], int | float) and math.isfinite(p[4]) else math.inf
        grid.setdefault((p[0], seed), {}).setdefault(width, {})[rate] = loss
    widths = sorted({w for g in grid.values() for w in g})
    rates = tuple(sorted({r for g in grid.values() for by in g.values() for r in by}))
    if len(widths) < 2 or len(rates) < 3:
        raise InvalidData(f"A μTransfer verdict needs at least 2 widths and 3 learning rates ({len(widths)} and "
                          f"{len(rates)} ran).")
    lo, hi = widths[0], widths[-1]
    full = len(widths) * len(rates)
    seeds = {p: sorted(s for (q, s), g in grid.items() if q == p and sum(len(v) for v in g.values()) == full)
             for p in COMPARED}
    both = sorted(set(seeds["sp"]) & set(seeds["mup"]))
    seed_shifts = {p: [_best(grid[p, s][hi], rates) - _best(grid[p, s][lo], rates) for s in both] for p in COMPARED}
    best: dict[str, dict[int, float]] = {}
    shift: dict[str, int] = {}
    mean: dict[str, dict[int, dict[float, float]]] = {}
    for p in COMPARED:
        mean[p] = {w: {r: _mean([grid[p, s][w][r] for s in both]) for r in rates} for w in widths} if both else {}
        idx = {w: _best(mean[p][w], rates) for w in mean[p]}
        best[p] = {w: rates[i] for w, i in idx.items()}
        shift[p] = idx[hi] - idx[lo] if idx else 0
    base = {"widths": (lo, hi), "rates": rates, "best": best, "shift": shift, "seed_shifts": seed_shifts, "seeds": len(both)}
    if len(both) < MIN_SEEDS:
        return TransferVerdict(NO_VERDICT, **base, reason=f"a verdict needs at least {MIN_SEEDS} seeds that ran the whole "
                               f"grid under both parametrisations ({len(both)} did).")
    if hi < MIN_SPAN * lo:
        return TransferVerdict(NO_VERDICT, **base, reason=f"the widths span {hi / lo:g}× ({lo} to {hi}); a verdict needs "
                               f"at least {MIN_SPAN}×: under SP the best rate moves about as 1/width, so {hi / lo:g}× expects "
                               f"a shift of {math.log2(hi / lo):g} grid steps, {'at' if hi / lo >= 4 else 'below'} the "
                               "2-step threshold, which noise alone decides.")
    sigma, df = _noise(grid, both)
    delta = max(MIN_DELTA, float(stats.t.ppf(0.975, df)) * sigma * math.sqrt(2 / len(both))) if df else MIN_DELTA
    sets: dict[str, dict[int, list[int]]] = {}
    interval: dict[str, list[float]] = {}
    edges: list[str] = []
    for p in COMPARED:
        sets[p] = {}
        for w in (lo, hi):
            low = min(mean[p][w].values())
            sets[p][w] = [i for i, r in enumerate(rates) if mean[p][w][r] <= low + delta]
        ends = {w: (-math.inf if sets[p][w][0] == 0 else sets[p][w][0],
                    math.inf if sets[p][w][-1] == len(rates) - 1 else sets[p][w][-1]) for w in (lo, hi)}
        if any(math.isinf(x) for e in ends.values() for x in e):
            edges.append(p)
        interval[p] = [ends[hi][0] - ends[lo][1], ends[hi][1] - ends[lo][0]]
    least = _gains(gains, both, mean, rates, (lo, hi)) if gains is not None else {}

    def within_one(p: str) -> bool:
        return interval[p][0] >= -1 and interval[p][1] <= 1

    def moved(p: str) -> bool:
        return interval[p][0] >= 2 or interval[p][1] <= -2

    extra = {"best_sets": sets, "shift_interval": interval, "delta": delta, "noise": sigma if df else None,
             "gains": least, "edges": tuple(edges)}
    failing = [f"{'μP' if p == 'mup' else 'SP'} at width {w}: {g:+.3f}" for p, by in least.items() for w, g in by.items()
               if not g >= MIN_GAIN]
    if failing:
        return TransferVerdict(CANNOT_TELL, **base, **extra, reason=(
            "a best run has not learnt enough beyond the corpus's token counts (nats below them at the [MASK] inputs, "
            f"least over seeds; at least {MIN_GAIN} needed): " + "; ".join(failing) + ". Curves at the token counts have "
            "a best rate chosen by noise; a larger budget per run may tell"))
    if within_one("mup") and moved("sp"):
        label, reason = AGREES, ""
    elif moved("mup") or within_one("sp"):
        label, reason = DISAGREES, ""
    else:
        label = CANNOT_TELL
        reason = ("the shifts' intervals reach both sides of the claim: rates within δ of the best cannot be told apart"
                  + (f", and under {' and '.join('μP' if p == 'mup' else 'SP' for p in edges)} the best rates reach an "
                     "edge of the grid (the optimum may lie beyond it; widen the grid)" if edges else ""))
    if gains is None:
        reason = (reason + "; " if reason else "") + "no loss at the [MASK] inputs was recorded, so whether the runs learnt " \
                                                     "beyond the token counts is not checked"
    return TransferVerdict(label, **base, **extra, reason=reason)


def _gains(gains: Sequence[Sequence[Any]], seeds: list[int], mean: dict[str, dict[int, dict[float, float]]],
           rates: tuple[float, ...], widths: tuple[int, int]) -> dict[str, dict[int, float]]:
    """Per parametrisation and compared width: the least, over seeds, of the best rate's run's gain over the counts."""
    by = {(str(p), int(s), int(w), float(r)): g for p, s, w, r, g in gains}
    out: dict[str, dict[int, float]] = {}
    for p in COMPARED:
        out[p] = {}
        for w in widths:
            r = rates[_best(mean[p][w], rates)]
            values = [by.get((p, s, w, r)) for s in seeds]
            out[p][w] = min((float(v) if isinstance(v, int | float) and math.isfinite(v) else -math.inf) for v in values)
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.inf
