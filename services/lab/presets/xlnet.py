"""XLNet's permutation LM against BERT's masked LM, same data and size (Yang et al. 2019)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, standard_budgets


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """A permutation LM and a masked LM of the base's size and steps."""
    return [("plm", replace(base, objective="plm")), ("mlm", replace(base, objective="mlm"))]


PRESET = Preset(
    "xlnet", "XLNet vs BERT", "Yang et al. 2019, XLNet, Table 1 (fair comparison with BERT: same data and size) ",
    "The permutation LM predicts each token from any subset of the others without [MASK] tokens; compare the downstream "
    "probe (the losses are different tasks).",
    runs,
    claims=(ArmClaim("downstream", "downstream", "With the same data and size, the permutation LM beats BERT's masked LM "
                     "downstream.", "Yang et al. 2019, XLNet, Table 1 (fair comparison with BERT, dev)", "plm", "mlm"),),
    budgets=standard_budgets("xlnet", downstream=True, thorough={"seeds": 2, "steps": 600}))  # the PLM arm costs 12×
