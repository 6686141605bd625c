"""RoBERTa's two ablations in miniature: static against dynamic masking, and BERT's NSP dropped (Liu et al. 2019)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, standard_budgets


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """BERT's recipe (static masking and NSP), static masking without NSP, dynamic masking without NSP."""
    return [("bert-static-nsp", replace(base, objective="mlm+nsp", masking="static")),
            ("static", replace(base, objective="mlm", masking="static")),
            ("dynamic", replace(base, objective="mlm", masking="dynamic"))]


PRESET = Preset(
    "roberta", "RoBERTa: static vs dynamic masking, and dropping NSP",
    "Liu et al. 2019, RoBERTa, Table 1 (masking) and Table 2 (NSP), SQuAD/MNLI-m/SST-2 dev",
    "Dynamic masking is as good as or slightly better than static; removing NSP matches or improves downstream results.",
    runs,
    claims=(
        ArmClaim("dynamic", "downstream", "Dynamic masking is as good as or slightly better than static (SQuAD 2.0 78.7 vs "
                 "78.3, MNLI-m 84.0 vs 84.3, SST-2 92.9 vs 92.5).", "Liu et al. 2019, RoBERTa, Table 1 (dev)", "dynamic",
                 "static", ">=", 0.01),
        ArmClaim("no-nsp", "downstream", "Removing NSP matches or improves downstream results.",
                 "Liu et al. 2019, RoBERTa, Table 2 (dev)", "static", "bert-static-nsp", ">=", 0.01),
    ),
    # thorough: half the steps and 3 seeds, about an hour on 2 cores (what it took: data/lab/budgets-measured.json)
    budgets=standard_budgets("roberta", downstream=True, thorough={"steps": 1500, "seeds": 3}))
