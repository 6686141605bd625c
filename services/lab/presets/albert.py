"""ALBERT's sentence-order prediction against BERT's next-sentence prediction (Lan et al. 2019)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, standard_budgets


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """A masked LM with NSP and one with SOP; both are scored on held-out NSP and SOP pairs."""
    return [("nsp", replace(base, objective="mlm+nsp")), ("sop", replace(base, objective="mlm+sop"))]


PRESET = Preset(
    "albert", "ALBERT: NSP vs SOP", "Lan et al. 2019, ALBERT, Table 5 (intrinsic NSP/SOP accuracy and downstream dev)",
    "A model trained with NSP does not solve SOP (about chance); a model trained with SOP solves NSP well.",
    runs,
    claims=(
        ArmClaim("sop", "sop_accuracy", "A model trained with SOP solves SOP; one trained with NSP does not (86.5 vs 52.0).",
                 "Lan et al. 2019, ALBERT, Table 5 (intrinsic SOP accuracy, ALBERT-base)", "sop", "nsp"),
        ArmClaim("downstream", "downstream", "SOP pre-training helps downstream more than NSP (average 80.1 vs 79.2).",
                 "Lan et al. 2019, ALBERT, Table 5 (downstream average of SQuAD1.1/2.0, MNLI, SST-2, RACE, dev)", "sop", "nsp"),
    ),
    budgets=standard_budgets("albert", downstream=True))
