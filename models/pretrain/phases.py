"""Smith, Kindermans, Ying & Le 2017 (ICLR 2018), "Don't Decay the Learning Rate, Increase the Batch Size", as a plan
of parameter updates: the run's micro-batches (``TrainConfig.steps`` of ``TrainConfig.batch`` sequences, the same
tokens in both arms) in ``phase_count`` phases; at each new phase the "decay" arm divides the learning rate by
``phase_factor`` and the "grow" arm instead multiplies the batch by it (``phase_factor``^p micro-batches accumulated
into one update), so "grow" sees the same tokens in fewer updates.

Torch-free: the planner, the tests and the loop read the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass

from models.pretrain.config import TrainConfig


@dataclass(frozen=True)
class Update:
    """One parameter update: the micro-batches accumulated into it, its phase and its learning-rate multiplier."""

    micro_batches: int
    phase: int
    lr_factor: float


def phase_lengths(config: TrainConfig) -> list[int]:
    """Micro-batches per phase, the same for both arms: phase p ≥ 1 gets ``steps / phase_count`` rounded down to a
    multiple of ``phase_factor``^p (so the grow arm's batches fill it exactly); phase 0 (one micro-batch per update in
    both arms) takes the rest, so the phases add up to ``steps`` exactly."""
    k, count = config.phase_factor, config.phase_count
    later = [(config.steps // count) // k**p * k**p for p in range(1, count)]
    return [config.steps - sum(later), *later]


def update_plan(config: TrainConfig) -> list[Update]:
    """Every parameter update of a run with phases (``config.phases`` "decay" or "grow"), in order.

    The warm-up is transformers' constant-with-warm-up ramp (factor i / warm-up at micro-batch i, from 0) over
    ``warmup`` × ``steps`` micro-batches, read at each update's first micro-batch; then "decay" multiplies by
    ``phase_factor``^−p in phase p, and "grow" keeps the rate.

    Raises:
        InvalidConfig: from :meth:`TrainConfig.validate` (including a run without phases).
    """
    config.validate()
    if not config.phases:
        from core.errors import InvalidConfig

        raise InvalidConfig("This run has no phases (TrainConfig.phases is '').")
    k, warm = config.phase_factor, int(config.warmup * config.steps)
    plan: list[Update] = []
    seen = 0
    for p, length in enumerate(phase_lengths(config)):
        accumulate = k**p if config.phases == "grow" else 1
        for _ in range(length // accumulate):
            ramp = seen / max(1, warm) if seen < warm else 1.0
            plan.append(Update(accumulate, p, ramp * (k**-p if config.phases == "decay" else 1.0)))
            seen += accumulate
    return plan


def updates_of(config: TrainConfig) -> int:
    """Parameter updates a run makes: its steps, or with phases the updates of :func:`update_plan`."""
    return len(update_plan(config)) if config.phases else config.steps
