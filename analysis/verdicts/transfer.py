"""The μTransfer verdict: does the best learning rate stay put across widths under μP and move under the standard
parametrisation (Yang et al. 2022, Tensor Programs V, Figure 1 and Figure 3)?

The runs are a grid: parametrisation × width × learning rate × seed, each with its held-out loss. The rule, per
parametrisation, compares the narrowest width with the widest:

- the **best rate** of a width is the grid rate with the lowest held-out loss (a run that diverged counts as an
  infinite loss); its **shift** is the widest width's best rate minus the narrowest's, in grid steps;
- the claim holds on a seed when μP's shift is at most one grid step and SP's is at least two;
- **agrees**: it holds on the seed-mean losses *and* on every seed; **disagrees**: on the seed-mean losses *and* on
  every seed, μP's shift is two steps or more, or SP's is at most one (the reverse of the claim, on one side at
  least); **cannot tell at this budget** otherwise: the seeds do not agree with each other, or the deciding shift
  is at most one step and one of its best rates lies at an edge of the grid (the true optimum may lie beyond the
  edge, so the shift is not known; a shift of two steps or more only grows, so an edge does not matter to it);
  **no verdict** with fewer than two seeds that ran the whole grid.

Per-seed agreement rather than a bootstrap: a best rate is a discrete argmin, and with 2–3 seeds a bootstrap over
seeds has a handful of distinct resamples; asking every seed to agree is the stricter, simpler rule.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from analysis.verdicts.labels import AGREES, CANNOT_TELL, DISAGREES, MIN_SEEDS, NO_VERDICT
from core.errors import InvalidData

PARAMETRISATIONS = ("sp", "mup")


@dataclass(frozen=True)
class TransferVerdict:
    """The μTransfer claim decided from a grid of runs."""

    label: str
    widths: tuple[int, int]  # the narrowest and widest width compared
    rates: tuple[float, ...]  # the learning-rate grid
    best: dict[str, dict[int, float]]  # parametrisation -> width -> best rate on the seed-mean losses
    shift: dict[str, int]  # parametrisation -> widest's best minus narrowest's, in grid steps (seed means)
    seed_shifts: dict[str, list[int]] = field(default_factory=dict)  # parametrisation -> one shift per seed
    edges: tuple[str, ...] = ()  # parametrisations whose deciding best rate lies at an edge of the grid
    seeds: int = 0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def sentence(self) -> str:
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        lo, hi = self.widths

        def said(p: str) -> str:
            b = self.best[p]
            return (f"{'μP' if p == 'mup' else 'SP'}: best rate 2^{math.log2(b[lo]):.0f} at width {lo}, "
                    f"2^{math.log2(b[hi]):.0f} at {hi} ({self.shift[p]:+d} grid steps; per seed "
                    f"{', '.join(f'{s:+d}' for s in self.seed_shifts.get(p, []))})")

        line = f"{self.label.capitalize()}: {said('mup')}; {said('sp')}"
        return line + (f". {self.reason[0].upper()}{self.reason[1:]}" if self.reason else "")


def _best(losses: dict[float, float], rates: Sequence[float]) -> int:
    """The index of the rate with the lowest loss (ties: the smaller rate)."""
    return min(range(len(rates)), key=lambda i: (losses.get(rates[i], math.inf), i))


def transfer_verdict(points: Sequence[Sequence[Any]]) -> TransferVerdict:
    """Decide the μTransfer claim (module docstring) from ``(parametrisation, seed, width, rate, held-out loss)``
    points; a loss that is None or not finite is a diverged run.

    Raises:
        InvalidData: a point of the wrong shape, an unknown parametrisation, fewer than two widths or three rates.
    """
    grid: dict[tuple[str, int], dict[int, dict[float, float]]] = {}
    for p in points:
        if len(p) != 5 or p[0] not in PARAMETRISATIONS:
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

    def complete(g: dict[int, dict[float, float]]) -> bool:
        return sum(len(v) for v in g.values()) == full

    seeds = {p: sorted(s for (q, s), g in grid.items() if q == p and complete(g)) for p in PARAMETRISATIONS}
    both = sorted(set(seeds["sp"]) & set(seeds["mup"]))
    seed_shifts = {p: [_best(grid[p, s][hi], rates) - _best(grid[p, s][lo], rates) for s in both] for p in PARAMETRISATIONS}
    best: dict[str, dict[int, float]] = {}
    shift: dict[str, int] = {}
    edges: list[str] = []
    for p in PARAMETRISATIONS:
        mean = {w: {r: _mean([grid[p, s][w][r] for s in both]) for r in rates} for w in widths} if both else {}
        idx = {w: _best(mean[w], rates) for w in mean}
        best[p] = {w: rates[i] for w, i in idx.items()}
        shift[p] = idx[hi] - idx[lo] if idx else 0
        # An optimum at an edge of the grid may lie beyond it, away from the grid: a shift of two steps or more only
        # grows, but a shift of at most one is not known.
        if any(idx.get(w) in (0, len(rates) - 1) for w in (lo, hi)) and abs(shift[p]) <= 1:
            edges.append(p)
    if len(both) < MIN_SEEDS:
        return TransferVerdict(NO_VERDICT, (lo, hi), rates, best, shift, seed_shifts, tuple(edges), len(both),
                               f"a verdict needs at least {MIN_SEEDS} seeds that ran the whole grid under both "
                               f"parametrisations ({len(both)} did).")

    def holds(mup: int, sp: int) -> bool:
        return abs(mup) <= 1 and abs(sp) >= 2

    def reversed_(mup: int, sp: int) -> bool:
        return abs(mup) >= 2 or abs(sp) <= 1

    pairs = list(zip(seed_shifts["mup"], seed_shifts["sp"], strict=True))
    reason = ""
    if holds(shift["mup"], shift["sp"]) and all(holds(m, s) for m, s in pairs):
        label = AGREES
    elif reversed_(shift["mup"], shift["sp"]) and all(reversed_(m, s) for m, s in pairs):
        label = DISAGREES
    else:
        label, reason = CANNOT_TELL, "the seeds do not all agree with the seed-mean curves"
    side = ("μP" if label == AGREES and "mup" in edges else
            "SP" if label == DISAGREES and abs(shift["mup"]) <= 1 and "sp" in edges else "")
    if side:
        label = CANNOT_TELL
        reason = (f"under {side} a best rate lies at an edge of the "
                  "learning-rate grid, so the optimum may lie outside it and the shift is not known; widen the grid")
    return TransferVerdict(label, (lo, hi), rates, best, shift, seed_shifts, tuple(edges), len(both), reason)


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else math.inf
