"""Chinchilla's approach 2 in miniature (IsoFLOP profiles): for each compute budget, each width trained for the steps
that budget buys it; the compute-optimal size's growth fitted over seeds."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, ClassVar

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import TrendClaim
from services.lab.presets.base import MAX_STEPS, Preset, at_widths, width_budgets
from services.lab.sizing import size

WIDTHS = (32, 64, 128, 256)
COMPUTE = (0.5, 1.0, 2.0)  # the budgets, × the base run's compute at the middle width


def runs(base: TrainConfig, widths: tuple[int, ...] = WIDTHS) -> list[tuple[str, TrainConfig]]:
    """For each compute budget, the widths, each trained for the steps that budget buys it (so small models see more
    tokens). The budgets are priced from the middle width of those tried, at the base run's steps, so the optimum can
    fall inside the grid."""
    sized = at_widths(base, widths)
    compute = size(sized[len(sized) // 2][1]).flops_per_step * base.steps
    out = []
    for scale in COMPUTE:
        for name, cfg in sized:
            steps = round(scale * compute / size(cfg).flops_per_step)
            out.append((f"c{scale:g}-{name}", replace(cfg, steps=max(1, min(steps, MAX_STEPS)))))
    return out


def arm_budget(arm: str) -> str | None:
    """The compute budget an arm of :func:`runs` names (``c0.5`` of ``c0.5-h64``: half the base run's); None for an
    arm it did not name."""
    head, dash, _ = arm.partition("-")
    return head if dash and head.startswith("c") else None


def _cells(points: list[tuple[int, float, int, float]]) -> list[tuple[int, float, int, float]]:
    """Each run's compute rounded to its budget: the runs of one budget differ by up to one step's FLOPs."""
    budgets = sorted({c for _, c, _, _ in points})
    groups: list[list[float]] = []
    for c in budgets:
        if groups and c <= groups[-1][0] * 1.3:
            groups[-1].append(c)
        else:
            groups.append([c])
    label = {c: g[0] for g in groups for c in g}
    return [(s, label[c], n, loss) for s, c, n, loss in points]


@dataclass(frozen=True)
class IsoFLOPClaim(TrendClaim):
    """Chinchilla's a, N_opt ∝ C^a: a point per run (seed, compute, N, loss), a parabola per budget and seed. The grid
    trains the large sizes of each budget on few tokens by design (that is where the parabola turns up); leaving them
    out would leave fewer than 3 sizes per budget, so they are named, not refitted."""

    data_limited_why: ClassVar[str] = "In an IsoFLOP grid the large sizes of a budget see few tokens by design; they stay in the fit."
    refit_without_data_limited: ClassVar[bool] = False

    def point(self, run: dict[str, Any], n: int, loss: float) -> tuple:
        return (run["replicate"], round(run["flops_per_token"] * run["tokens"], -6), n, loss)

    def decide(self, points: list[tuple]) -> Any:
        from analysis import verdicts

        return verdicts.isoflop_verdict(_cells(points))


PRESET = Preset(
    "isoflop", "IsoFLOP: 3 budgets × 4 sizes", "Hoffmann et al. 2022, Chinchilla, approach 2 (IsoFLOP profiles, Figure 3)",
    "For a fixed compute budget the loss is lowest at a middle size; the best size grows with the budget.",
    runs,
    claims=(IsoFLOPClaim("isoflop", "isoflop", "The compute-optimal size grows with the compute budget: N_opt ∝ C^0.5.",
                         "Hoffmann et al. 2022, Chinchilla, Table 2 (approach 2: a = 0.49)"),),
    # Thorough at 2 seeds: 3 took 46.9 min on 2026-12-06 and about twice that on a day the machine ran at half the pace
    # (width 16's many small steps run far below the default size's FLOP/s); 2 take about an hour on the slower day.
    budgets=width_budgets("isoflop", (200, 900, 1500), WIDTHS, thorough_seeds=2),
    widths=WIDTHS, least_widths=3, arm_budget=arm_budget)
