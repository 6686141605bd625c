"""The size, memory and compute calculator's use cases: a model's configuration (catalog id, Hub id or folder), its
exact parameter count, and its training memory and largest batch on a GPU.

The Calculator page reads configurations with :func:`config_of`; the Gradio ``/calculator`` endpoint calls
:func:`estimate`, which the page's numbers come from as well (``analysis.params`` and ``analysis.memory``: no torch).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis.memory import GPUS, OPTIMIZERS, PRECISIONS
from analysis.params import HEADS
from core.errors import ExplorerError
from services import requests as req

__all__ = ["GPUS", "HEADS", "OPTIMIZERS", "PRECISIONS", "Estimate", "config_of", "estimate"]


def config_of(model: str) -> dict[str, Any]:
    """``model``'s configuration: the catalog's for a catalog id, else its ``config.json`` alone (a folder here, or a Hub
    id when online) — no weights load and no size budget applies, since nothing runs."""
    from analysis.params import MAX_PARAMETERS
    from core import registry

    model = req.model_id(model)
    card = registry.find(model)
    if card is not None and not card.config:
        raise ExplorerError(f"{card.id} has no configuration in the catalog (it is catalog-only).", "Pick a downloadable model.")
    if card is not None:
        return card.config
    from models.inspection import inspect

    return inspect(model, max_params=MAX_PARAMETERS).config


@dataclass(frozen=True)
class Estimate:
    """Parameters by part, training memory by component, and the largest batch that fits ``gpu``."""

    breakdown: Any  # analysis.params.Breakdown
    memory: Any  # analysis.memory.MemoryEstimate
    fit: Any  # analysis.memory.BatchFit

    def to_json(self) -> dict:
        bd, est, fit = self.breakdown, self.memory, self.fit
        return {"parameters": bd.total, "non_embedding": bd.non_embedding, "parts": bd.by_part(), "memory_bytes": est.components,
                "memory_total_bytes": est.total, "max_batch": {"gpu": fit.gpu, "seq_len": fit.seq_len, "batch": fit.max_batch}}


def estimate(model: str, head: str = "base", precision: str = "mixed", optimizer: str = "adamw", batch_size: int = 8,
             seq_len: int = 128, zero_stage: int = 0, data_parallel: int = 1, gpu: str = "V100 16 GB") -> Estimate:
    """Parameters and training memory of ``model`` with ``head``, and the largest batch that fits ``gpu``."""
    from analysis import memory
    from analysis.params import parameter_breakdown

    head = req.text("head", head, 40, empty_ok=True) or "base"
    precision, optimizer = req.text("precision", precision, 40), req.text("optimizer", optimizer, 40)
    gpu = req.text("gpu", gpu, 100)
    batch_size, seq_len = req.whole("batch_size", batch_size, 1, 100_000), req.whole("seq_len", seq_len, 1, 1_000_000)
    zero_stage, data_parallel = req.whole("zero_stage", zero_stage, 0, 3), req.whole("data_parallel", data_parallel, 1, 100_000)
    setup = memory.TrainingSetup(precision, optimizer, zero_stage, data_parallel).validate()
    breakdown = parameter_breakdown(config_of(model), head)
    return Estimate(breakdown, memory.training_memory(breakdown, batch_size, seq_len, setup),
                    memory.max_batch_size(breakdown, gpu, seq_len, setup))
