"""Lion against AdamW at equal steps, Lion with the paper's rule of thumb for its rate and weight decay (Chen et al.
2023): one untuned rate per arm. The tuned protocol is :mod:`.lion_tuned`."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, standard_budgets

#: Lion's settings against AdamW's (Chen et al. 2023, arXiv 2302.06675, Section 5): "a suitable learning rate for
#: Lion is typically 3-10x smaller than that for AdamW", and λ "3-10x larger ... to maintain a similar strength"
#: (lr·λ). The lab takes the low end, 3 for both: its runs are a few hundred steps, where a 10× smaller rate would
#: leave Lion far from where AdamW gets; lr·λ stays AdamW's.
LR_DIVISOR = 3
WD_FACTOR = 3


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Lion and AdamW at equal steps, Lion with the paper's smaller rate and larger weight decay."""
    return [("lion", replace(base, optimizer="lion", lr=base.lr / LR_DIVISOR, weight_decay=base.weight_decay * WD_FACTOR)),
            ("adamw", replace(base, optimizer="adamw"))]


# Held-out loss is lower-is-better (services.lab.claim_entries.LOWER_IS_BETTER): ">=" with a margin m reads "a's loss is
# at most m above b's". m = 0.05 nats is a 5% higher perplexity (e^0.05 ≈ 1.05): what "matches" allows here. It is a
# statement about the effect, not the noise (the seeds' spread is the budget's record: data/lab/budgets-measured.json).
PRESET = Preset(
    "lion", "Lion vs AdamW: one optimizer state instead of two",
    "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion), arXiv 2302.06675, Program 1 and Section 5 "
    "(hyperparameters)",
    "Lion keeps only a momentum and moves every weight by ±lr (the sign of an interpolated momentum), so it needs one "
    "optimizer state per parameter where AdamW needs two: half the optimizer memory (in fp32 here, 4 bytes per parameter "
    "saved; the report gives each arm's measured state). The paper finds it matches or beats AdamW with a "
    f"{LR_DIVISOR}× smaller rate and a {WD_FACTOR}× larger weight decay, which the lion arm uses.",
    runs,
    claims=(ArmClaim("loss", "held_out_loss", "Lion matches AdamW's loss with one optimizer state instead of two.",
                     "Chen et al. 2023, Lion, arXiv 2302.06675, Section 4 (language modelling: Lion matches or beats AdamW) "
                     "and Program 1 (one state, the momentum)", "lion", "adamw", ">=", 0.05),),
    budgets=standard_budgets("lion", downstream=False))  # decided on held-out loss: no downstream suite
