"""ELECTRA's replaced-token detection against a masked LM at equal pre-training compute (Clark et al. 2020)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import MAX_STEPS, Preset, standard_budgets
from services.lab.sizing import size


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """ELECTRA and a masked LM of the same width, the MLM given as many steps as ELECTRA's FLOPs buy it (FLOPs as the
    loop performs them: :mod:`models.pretrain.flops`)."""
    electra = replace(base, objective="electra")
    mlm = replace(base, objective="mlm")
    steps = max(1, round(base.steps * size(electra).flops_per_step / size(mlm).flops_per_step))
    return [("electra", electra), ("mlm", replace(mlm, steps=min(steps, MAX_STEPS)))]


PRESET = Preset(
    "electra", "ELECTRA vs MLM at equal compute",
    "Clark et al. 2020, ELECTRA, Figure 3 and Table 1 (GLUE dev at equal pre-training FLOPs)",
    "Replaced-token detection learns from every token, so at the same compute ELECTRA beats masked LM; here compare the "
    "downstream probe (the losses are different tasks).",
    runs,
    claims=(ArmClaim("downstream", "downstream", "At equal pre-training compute, ELECTRA beats masked-LM pre-training downstream.",
                     "Clark et al. 2020, ELECTRA, Figure 3 and Table 1 (GLUE dev at equal FLOPs)", "electra", "mlm"),),
    budgets=standard_budgets("electra", downstream=True))
