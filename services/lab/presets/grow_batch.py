"""A growing batch instead of a decaying learning rate, on the same tokens (Smith, Kindermans, Ying & Le 2017)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, standard_budgets

#: Smith et al. 2017 (ICLR 2018), Section 5.1: the rate divided, or the batch multiplied, by 5 at each step. The
#: lab makes three phases of equal tokens (two steps): the grow arm's last phase accumulates 25 batches per update.
PHASES, FACTOR = 3, 5


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """The same tokens two ways: a step-decaying rate at a constant batch, or a constant rate and a growing batch
    (gradient accumulation: the memory of one batch). ``base.batch`` is the first phase's batch in both."""
    phased = replace(base, schedule="constant", phase_count=PHASES, phase_factor=FACTOR)
    return [("grow", replace(phased, phases="grow")), ("decay", replace(phased, phases="decay"))]


# Decided on held-out loss: no downstream suite. The classroom budget's 300 steps of batch 32 leave the grow arm's three
# phases 100 micro-batches each (updates: 100 + 100/5 + 100/25 = 124, against the decay arm's 300).
PRESET = Preset(
    "grow-batch", "Growing batch instead of a decaying rate",
    "Smith, Kindermans, Ying & Le 2017 (ICLR 2018), Don't Decay the Learning Rate, Increase the Batch Size, abstract and "
    "Section 5.1",
    f"Dividing the rate by {FACTOR} or multiplying the batch by {FACTOR} lowers SGD's noise alike, so both arms see the "
    "same tokens and should reach the same loss; growing the batch does it in fewer parameter updates (the report gives "
    "each arm's), which parallel hardware turns into time.",
    runs,
    claims=(ArmClaim("loss", "held_out_loss", "Growing the batch reaches the decaying rate's loss on the same tokens, in fewer "
                     "parameter updates.", "Smith et al. 2017 (ICLR 2018), Don't Decay the Learning Rate, Increase the "
                     "Batch Size, abstract and Section 5.1 (equivalent test accuracy after the same epochs, fewer updates)",
                     "grow", "decay", ">=", 0.05),),
    budgets=standard_budgets("grow-batch", downstream=False))
