"""One run of the chosen objective: no arms to compare, no claim, no budget."""

from __future__ import annotations

from models.pretrain.config import TrainConfig
from services.lab.presets.base import Preset


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """The base run, named after its objective."""
    return [(base.objective.replace("+", "-"), base)]


PRESET = Preset("single", "One run of the chosen objective", "", "", runs, single_run=True)
