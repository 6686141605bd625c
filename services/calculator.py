"""The size, memory and compute calculator's use cases: a model's configuration (catalog id, Hub id or folder), its
exact parameter count, its training memory (what fits a GPU, ZeRO's stages), the largest batch per GPU, and what
training costs.

The Calculator page and the Gradio ``/calculator`` endpoint both read configurations with :func:`config_of` and count
with ``analysis.params`` and ``analysis.memory`` (no torch); the form that edits a configuration is
:mod:`services.calculator_form`. The page's decisions (what fits, how many GPUs ZeRO is compared on, which head a
reference row is counted with) are made here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from analysis import memory, params, reference
from analysis.calculator import human_seconds
from analysis.memory import BERT_COST_EXAMPLE, GPUS, OPTIMIZERS, PRECISIONS, SOURCES, GiB, TrainingSetup
from analysis.params import ARCH_HEADS, DEFAULTS, HEADS, LIMITS, MAX_PARAMETERS, Breakdown
from core.errors import ExplorerError
from services import requests as req

__all__ = ["ARCHITECTURES", "ARCH_HEADS", "BERT_COST_EXAMPLE", "BOUNDS", "GPUS", "HEADS", "LIMITS", "OPTIMIZERS", "PRECISIONS", "SOURCES",
           "Breakdown", "Cost", "Estimate", "GiB", "MemoryPlan", "TrainingSetup", "albert_saving", "bert_cost_rows", "breakdown", "config_of", "cost",
           "estimate", "fact", "gpu_fit", "memory_plan", "readme_batches", "reference_tables", "reshaped", "setup", "slides_example_gib"]
#: The bounds (inclusive) of each number of a training setup, a GPU fit and a cost, by field (a model's own sizes are
#: analysis.params.LIMITS); the page's widgets, its links and the Gradio tab use the same.
BOUNDS: dict[str, tuple[float, float]] = {
    "batch_size": (1, 100_000), "seq_len": (1, 1_000_000), "zero_stage": (0, 3), "data_parallel": (1, 100_000),
    "tensor_parallel": (1, 1024), "custom_gib": (0.5, 10_000.0), "reserve": (0.0, 64.0), "tokens": (0.001, 1e6),
    "gpus": (1, 100_000), "utilisation": (0.01, 1.0), "price": (0.0, 1000.0)}
#: The architectures (model types) the calculator counts, in the order the page offers them.
ARCHITECTURES: tuple[str, ...] = tuple(DEFAULTS)
#: ZeRO shards over the data-parallel GPUs: with one GPU every stage is the same, so the stages are compared on this many.
ZERO_COMPARISON_GPUS = 8
#: What a GPU keeps for the CUDA context and fragmentation when the calculator says "fits".
RESERVE_BYTES = GiB
#: The sequence lengths the memory curve draws (those the model's positions allow).
CURVE_SEQUENCES = (128, 256, 512)


def config_of(model: str) -> dict[str, Any]:
    """``model``'s configuration: the catalog's for a catalog id, else its ``config.json`` alone (a folder here, or a Hub
    id when online) — no weights load and no size budget applies, since nothing runs."""
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


def breakdown(config: dict[str, Any], head: str = "base") -> Breakdown:
    """Every parameter tensor of the model ``config`` describes with ``head`` (the count the page and the API show).

    Raises:
        UnsupportedArchitecture: unknown ``model_type``, or a head that architecture has no class for.
        InvalidConfig: sizes that are not positive whole numbers, heads not dividing the hidden size, or more than
            MAX_PARAMETERS parameters.
    """
    return params.parameter_breakdown(config, head)


def reshaped(config: dict[str, Any], reference: dict[str, Any]) -> bool:
    """Whether ``config`` describes another shape than ``reference`` (a catalog model's: the page says "edited")."""
    return params.arch_of(config) != params.arch_of(reference)


def albert_saving(config: dict[str, Any]) -> dict[str, int]:
    """What ALBERT's factorised embedding and shared layers each save against the same shape without them
    (``bert_like``, ``factorized``, ``shared``, ``albert``: parameters).

    Raises:
        UnsupportedArchitecture: ``config`` is not an ALBERT configuration.
    """
    return params.albert_saving(config)


def estimate(model: str, head: str = "base", precision: str = "mixed", optimizer: str = "adamw", batch_size: int = 8,
             seq_len: int = 128, zero_stage: int = 0, data_parallel: int = 1, gpu: str = "V100 16 GB") -> Estimate:
    """Parameters and training memory of ``model`` with ``head``, and the largest batch that fits ``gpu``."""
    head = req.text("head", head, 40, empty_ok=True) or "base"
    precision, optimizer = req.text("precision", precision, 40), req.text("optimizer", optimizer, 40)
    gpu = req.text("gpu", gpu, 100)
    batch_size, seq_len = req.bounded("batch_size", batch_size, BOUNDS), req.bounded("seq_len", seq_len, BOUNDS)
    zero_stage, data_parallel = req.bounded("zero_stage", zero_stage, BOUNDS), req.bounded("data_parallel", data_parallel, BOUNDS)
    setup = memory.TrainingSetup(precision, optimizer, zero_stage, data_parallel).validate()
    breakdown = params.parameter_breakdown(config_of(model), head)
    return Estimate(breakdown, memory.training_memory(breakdown, batch_size, seq_len, setup),
                    memory.max_batch_size(breakdown, gpu, seq_len, setup))


def setup(precision: str = "mixed", optimizer: str = "adamw", zero_stage: int = 0, data_parallel: int = 1,
          tensor_parallel: int = 1, sequence_parallel: bool = False, recompute: str = "none",
          flash: bool = False) -> TrainingSetup:
    """A training setup, checked (sequence parallelism only means something with tensor parallelism)."""
    zero_stage, data_parallel = req.bounded("zero_stage", zero_stage, BOUNDS), req.bounded("data_parallel", data_parallel, BOUNDS)
    tensor_parallel = req.bounded("tensor_parallel", tensor_parallel, BOUNDS)
    return TrainingSetup(precision, optimizer, zero_stage, data_parallel, tensor_parallel, sequence_parallel and tensor_parallel > 1,
                         recompute, flash).validate()


@dataclass(frozen=True)
class MemoryPlan:
    """Training memory per GPU, whether it fits ``gpu`` (keeping :data:`RESERVE_BYTES`), the same run under ZeRO's
    stages on ``zero_gpus`` GPUs, and the sequence lengths the memory curve draws."""

    estimate: Any  # analysis.memory.MemoryEstimate
    gpu: Any  # analysis.memory.GPU
    fits: bool
    zero_gpus: int
    stages: dict[str, Any]
    curve_sequences: list[int]

    @property
    def capacity_gib(self) -> float:
        return self.gpu.memory_bytes / GiB


def memory_plan(breakdown: Any, batch: int, seq_len: int, training: TrainingSetup, gpu: str) -> MemoryPlan:
    """What training ``breakdown``'s model at ``batch`` × ``seq_len`` takes per GPU, and whether it fits ``gpu``."""
    from analysis.calculator import zero_stages

    gpu_spec = memory.GPUS[req.choice("GPU", gpu, memory.GPUS)]
    batch, seq_len = req.bounded("batch_size", batch, BOUNDS), req.bounded("seq_len", seq_len, BOUNDS)
    estimate = memory.training_memory(breakdown, batch, seq_len, training)
    zero_gpus = training.data_parallel if training.data_parallel > 1 else ZERO_COMPARISON_GPUS
    stages = zero_stages(breakdown, batch, seq_len, memory.with_setup(training, data_parallel=zero_gpus))
    positions = breakdown.arch.positions
    curve = [x for x in CURVE_SEQUENCES if not positions or x <= positions] or [min(seq_len, positions)]
    return MemoryPlan(estimate, gpu_spec, estimate.total <= gpu_spec.memory_bytes - RESERVE_BYTES, zero_gpus, stages, curve)


def gpu_fit(breakdown: Any, seq_lens: list[int], training: TrainingSetup, gpus: list[str], custom_gib: float,
            reserve_gib: float) -> Any | None:
    """The largest per-GPU batch (rows: sequence lengths the model takes; columns: the GPUs and a custom one of
    ``custom_gib``), or None when no chosen length fits the model's positions."""
    from analysis.calculator import gpu_fit_frame

    positions = breakdown.arch.positions
    usable = sorted(x for x in seq_lens if not positions or x <= positions)
    if not usable:
        return None
    cards = [memory.GPUS[req.choice("GPU", g, memory.GPUS)] for g in gpus] + [memory.custom_gpu(req.number("custom_gib", custom_gib, *BOUNDS["custom_gib"]))]
    return gpu_fit_frame(breakdown, usable, training, cards, int(req.number("reserve", reserve_gib, *BOUNDS["reserve"]) * GiB))


def readme_batches() -> list[dict[str, Any]]:
    """The slides' largest-batch tables (BERT's and XLNet's READMEs) beside ours under the same assumptions (fp32 Adam,
    1 GiB reserve), each model counted with its pre-training head."""
    from core import registry

    rows = []
    for row in reference.max_batch():
        card = registry.get(row["catalog_id"])
        head = next(h for h in ("pretraining", "xlnet-lm", "masked-lm") if h in ARCH_HEADS[card.config["model_type"]])
        bd = params.parameter_breakdown(card.config, head)
        ours = memory.max_batch_size(bd, memory.custom_gpu(row["gpu_gib"]), row["seq_len"], TrainingSetup(precision="fp32")).max_batch
        rows.append({"model": row["model"], "sequence length": row["seq_len"], "README (fp32)": row["max_batch"],
                     "framework, GPU": f"{row['framework']}, {row['gpu_gib']:g} GB", "ours (fp32 Adam, 1 GiB reserve)": ours,
                     "source": row["source"]})
    return rows


@dataclass(frozen=True)
class Cost:
    """Training compute (6·N·D), its time on the GPUs at a utilisation, its price, and the forward FLOPs per token."""

    flops: float
    pf_days: float
    seconds: float
    dollars: float
    forward_per_token: float


def cost(breakdown: Any, tokens_billions: float, gpu: str, n_gpus: int, utilisation: float, price: float, precision: str,
         seq_len: int) -> Cost:
    """What training ``breakdown``'s model on ``tokens_billions`` × 10⁹ tokens costs on ``n_gpus`` × ``gpu``."""
    flops = memory.training_flops(breakdown.total, req.number("tokens", tokens_billions, *BOUNDS["tokens"]) * 1e9)
    n_gpus, utilisation = req.bounded("gpus", n_gpus, BOUNDS), req.number("utilisation", utilisation, *BOUNDS["utilisation"])
    price = req.number("price", price, *BOUNDS["price"])
    seconds = memory.training_time(flops, gpu, n_gpus, utilisation, precision)
    context = min(seq_len, breakdown.arch.positions or seq_len)
    return Cost(flops, memory.pf_days(flops), seconds, memory.training_cost(seconds, n_gpus, price),
                memory.forward_flops_per_token(breakdown, context))


def bert_cost_rows(gpu: str, n_gpus: int, utilisation: float, price: float, precision: str) -> list[dict[str, Any]]:
    """The slides' "what BERT cost" example, with the time and price on the user's GPUs beside it."""
    rows = []
    for ex in BERT_COST_EXAMPLE:
        flops = memory.training_flops(ex["parameters"], ex["tokens"])
        seconds = memory.training_time(flops, gpu, n_gpus, utilisation, precision)
        rows.append({"model": ex["model"], "6·N·D FLOPs": f"{flops:.2e}", "PF-days": round(memory.pf_days(flops), 2),
                     "paper: hardware, 4 days": ex["devices"], "slides: cost": f"${ex['slides_usd']:,}",
                     "implied $ per Cloud-TPU-hour": round(ex["slides_usd"] / ex["device_hours"], 2),
                     f"on {n_gpus}× {gpu} (your settings)": human_seconds(seconds),
                     "cost at your price": f"${memory.training_cost(seconds, n_gpus, price):,.0f}"})
    return rows


def fact(key: str) -> Any:
    """A published number with its source (``analysis.reference.Fact``)."""
    return reference.fact(key)


def reference_tables() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """What one pre-training run cost (per model), and BERT-large's training time on more and more GPUs."""
    return reference.pretraining_costs(), list(reference.bert_training_times())


def slides_example_gib() -> float:
    """The slides' "going bigger" example by this calculator: 10⁹ parameters' model states with mixed-precision Adam."""
    return memory.training_memory(10**9).total / GiB
