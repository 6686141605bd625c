"""Kaplan et al.'s L(N) in miniature: four widths, one token budget, the exponent fitted over seeds."""

from __future__ import annotations

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import TrendClaim
from services.lab.presets.base import Preset, at_widths, width_budgets

WIDTHS = (32, 64, 128, 256)


def runs(base: TrainConfig, widths: tuple[int, ...] = WIDTHS) -> list[tuple[str, TrainConfig]]:
    """The widths (the FFN 4× and the heads kept), one token budget: the base run's steps × batch × length."""
    return at_widths(base, widths)


PRESET = Preset(
    "scaling", "Scaling: 4 sizes, one budget",
    "Kaplan et al. 2020, Scaling Laws for Neural Language Models, Figure 1 (L(N) = (N_c/N)^α_N, α_N ≈ 0.076)",
    "With data and steps the same, loss falls as a power of the non-embedding parameter count; fit α on the scaling-laws page.",
    runs,
    claims=(TrendClaim("scaling", "scaling", "Held-out loss falls as a power of the non-embedding parameters: L ∝ N^−0.076.",
                       "Kaplan et al. 2020, Figure 1 (α_N ≈ 0.076)"),),
    budgets=width_budgets("scaling", (600, 3000, 4000), WIDTHS),
    widths=WIDTHS, least_widths=3)
