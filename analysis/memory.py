"""Training and inference memory, the largest batch that fits a GPU, FLOPs, time and cost.

Everything is in bytes and FLOPs. Model states (weights, gradients, optimizer states) are exact
for a given parameter list; activations follow Korthikanti et al. 2022 and are an estimate: real
frameworks keep a little more (workspace, allocator fragmentation), which ``reserve`` stands for.
Each constant names its source in :data:`SOURCES`.

    >>> training_memory(10**9).total / 2**30   # the slides' "going bigger" example
    14.901161193847656
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from analysis.params import MAX_PARAMETERS, Arch, Breakdown, parameter_breakdown
from core.errors import InvalidConfig

GiB = 2**30

SOURCES: dict[str, str] = {
    "slides": "Lecture slides 002 ('Going bigger — the challenge'): 10^9 × (2 + 2 + 12) B = 14.90 GB (that is GiB, 2^30 B).",
    "zero": "Rajbhandari et al. 2020, ZeRO (arXiv 1910.02054), §5 and Figure 1: (2 + 2 + K)Ψ with K = 12 for mixed-precision Adam;"
            " P_os: 4Ψ + KΨ/N_d; P_os+g: 2Ψ + (2 + K)Ψ/N_d; P_os+g+p: (2 + 2 + K)Ψ/N_d.",
    "korthikanti": "Korthikanti et al. 2022, Reducing Activation Recomputation in Large Transformer Models (arXiv 2205.05198),"
                   " §4: per layer s·b·h·(34 + 5·a·s/h) bytes in 16-bit; with tensor parallelism t: s·b·h·(10 + 24/t + 5·a·s/(h·t));"
                   " with sequence parallelism everything / t; selective recomputation drops the 5·a·s²·b term;"
                   " full recomputation keeps the layer input (2·s·b·h).",
    "flash": "Dao et al. 2022, FlashAttention (arXiv 2205.14135): the s×s scores are never stored (only O and the softmax statistics).",
    "megatron": "Shoeybi et al. 2019, Megatron-LM (arXiv 1909.08053) §3: tensor (model) parallelism splits attention heads and the MLP over t GPUs.",
    "adam8bit": "Dettmers et al. 2022, 8-bit Optimizers via Block-wise Quantization (arXiv 2110.02861): two 1-byte states per parameter.",
    "adafactor": "Shazeer & Stern 2018, Adafactor (arXiv 1804.04235): factored second moment, r + c values per r×c matrix, no first moment.",
    "lion": "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion, arXiv 2302.06675): one momentum state per parameter.",
    "kaplan": "Kaplan et al. 2020, Scaling Laws for Neural Language Models (arXiv 2001.08361), Table 1:"
              " C_forward ≈ 2N + 2·n_layer·n_ctx·d_attn per token; training ≈ 3× forward, C ≈ 6·N·D.",
    "torch": "torch.optim.Adam/AdamW/Adafactor keep a float32 'step' tensor per parameter tensor.",
    "kv": "Decoder KV cache: 2 (K and V) × layers × batch × tokens × hidden values.",
    "gpus": "NVIDIA data sheets (dense tensor-core peak, no sparsity; memory as sold).",
    "bert_cost": "Slides 001 ('Pre-Training Cost (with Google/AWS)'): BERT base $500, large $7000; BERT paper (arXiv 1810.04805) App. A.2:"
                 " base on 4 Cloud TPUs (16 chips), large on 16 Cloud TPUs (64 chips), 4 days each; 1M steps × 256 sequences.",
}

#: Bytes per value by precision name.
DTYPE_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "int8": 1}

PRECISIONS: dict[str, str] = {
    "fp32": "fp32 (weights, gradients, states in fp32)",
    "mixed": "mixed fp16/bf16 (16-bit weights and gradients, fp32 master weights and states)",
    "bf16": "pure bf16 (everything in bf16, no fp32 master copy)",
}


@dataclass(frozen=True)
class Optimizer:
    label: str
    states: int  # full-size states per parameter (momentum, second moment ...)
    state_bytes: int | None  # bytes of one state value; None: the precision's optimizer dtype
    factored: bool = False  # Adafactor: r + c per matrix instead of r × c
    step_tensor: bool = False  # torch keeps a float32 step count per parameter tensor
    source: str = ""


OPTIMIZERS: dict[str, Optimizer] = {
    "sgd": Optimizer("SGD", 0, None, source="no state"),
    "momentum": Optimizer("SGD with momentum", 1, None, source="one momentum buffer"),
    "adamw": Optimizer("Adam / AdamW", 2, None, step_tensor=True, source="zero"),
    "adam8bit": Optimizer("8-bit Adam", 2, 1, source="adam8bit"),
    "adafactor": Optimizer("Adafactor", 1, None, factored=True, step_tensor=True, source="adafactor"),
    "lion": Optimizer("Lion", 1, None, source="lion"),
}


@dataclass(frozen=True)
class TrainingSetup:
    """How a model is trained: precision, optimizer, and how it is spread over GPUs."""

    precision: str = "mixed"  # fp32 | mixed | bf16
    optimizer: str = "adamw"
    zero_stage: int = 0  # 0–3 (ZeRO-1 shards optimizer states, -2 also gradients, -3 also weights)
    data_parallel: int = 1  # N_d
    tensor_parallel: int = 1  # t (Megatron)
    sequence_parallel: bool = False
    recompute: str = "none"  # none | selective | full
    flash_attention: bool = False

    def validate(self) -> TrainingSetup:
        if self.precision not in PRECISIONS:
            raise InvalidConfig(f"Unknown precision {self.precision!r}.", "Pick one of: " + ", ".join(PRECISIONS) + ".")
        if self.optimizer not in OPTIMIZERS:
            raise InvalidConfig(f"Unknown optimizer {self.optimizer!r}.", "Pick one of: " + ", ".join(OPTIMIZERS) + ".")
        if self.zero_stage not in (0, 1, 2, 3):
            raise InvalidConfig(f"ZeRO stage must be 0, 1, 2 or 3, not {self.zero_stage!r}.")
        if self.recompute not in ("none", "selective", "full"):
            raise InvalidConfig(f"Recomputation must be none, selective or full, not {self.recompute!r}.")
        for name in ("data_parallel", "tensor_parallel"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= 1_000_000:
                raise InvalidConfig(f"{name.replace('_', ' ')} degree must be a whole number from 1 to 10^6, not {v!r}.")
        if self.sequence_parallel and self.tensor_parallel == 1:
            raise InvalidConfig("Sequence parallelism needs tensor parallelism (t > 1).")
        return self


@dataclass(frozen=True)
class MemoryEstimate:
    """Bytes per GPU by component. ``exact`` names the components that are exact, not estimated."""

    components: dict[str, int]
    exact: frozenset[str]
    notes: tuple[str, ...] = field(default=())

    @property
    def total(self) -> int:
        return sum(self.components.values())

    def gib(self) -> dict[str, float]:
        return {k: v / GiB for k, v in self.components.items()}

    def rows(self) -> list[dict[str, Any]]:
        return [{"component": k, "bytes": v, "GiB": v / GiB, "exact": k in self.exact} for k, v in self.components.items()]


def _whole(name: str, value: Any, low: int = 1, high: int = 10**9) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidConfig(f"{name} must be a whole number, not {value!r}.")
    if not low <= value <= high:
        raise InvalidConfig(f"{name} must be between {low:,} and {high:,}, not {value:,}.")
    return int(value)


def _model(model: Any) -> tuple[int, Breakdown | None]:
    """(parameters, breakdown or None) from a parameter count, a Breakdown, or a config (base model).

    For a model with a head, pass ``parameter_breakdown(config, head)``.
    """
    if isinstance(model, Breakdown):
        return model.total, model
    if isinstance(model, (int, float)) and not isinstance(model, bool):
        return _whole("parameters", model, 1, MAX_PARAMETERS), None
    b = parameter_breakdown(model)
    return b.total, b


def _check_seq(arch: Arch, seq_len: int) -> None:
    if arch.positions and seq_len > arch.positions:
        raise InvalidConfig(f"A sequence of {seq_len} tokens is longer than the model's {arch.positions} positions.",
                            f"Use at most {arch.positions} tokens (BERT and RoBERTa: 512).")


def model_state_bytes(model: Any, setup: TrainingSetup = TrainingSetup()) -> MemoryEstimate:
    """Weights, gradients, fp32 master weights and optimizer states per GPU (ZeRO and tensor parallelism applied).

    Exact for the model's own tensors; tensor parallelism divides everything by t (layer norms and a
    few biases are in fact replicated, a small error noted in the result).
    """
    setup = setup.validate()
    n, bd = _model(model)
    opt = OPTIMIZERS[setup.optimizer]
    w = 4 if setup.precision == "fp32" else 2
    g = w
    master = 4 if setup.precision == "mixed" else 0
    state_bytes = opt.state_bytes or (2 if setup.precision == "bf16" else 4)
    notes: list[str] = []
    if opt.factored:
        if bd is None:
            per_param_states = 0
            notes.append("Adafactor's factored state needs the tensor shapes; give a configuration, not a count (counted as 0).")
        else:
            per_param_states = sum((t.shape[0] + math.prod(t.shape[1:])) * t.copies if len(t.shape) >= 2 else t.numel for t in bd.tensors)
        states = per_param_states * state_bytes
    else:
        states = n * opt.states * state_bytes
    steps = 4 * bd.tensor_count if (opt.step_tensor and bd is not None) else 0
    nd, t, z = setup.data_parallel, setup.tensor_parallel, setup.zero_stage
    comp = {
        "weights": n * w / (nd if z >= 3 else 1),
        "gradients": n * g / (nd if z >= 2 else 1),
        "master weights (fp32)": n * master / (nd if z >= 1 else 1),
        "optimizer states": states / (nd if z >= 1 else 1),
        "optimizer step counters": steps / (nd if z >= 1 else 1),
    }
    comp = {k: math.ceil(v / t) for k, v in comp.items() if v}
    # Exact when nothing is approximated: no tensor parallelism, no 8-bit block scales, shapes known for
    # Adafactor, no ZeRO partitioning (which pads its shards to an alignment).
    approximate = t > 1 or opt.state_bytes == 1 or (opt.factored and bd is None) or (z > 0 and nd > 1)
    if t > 1:
        notes.append("Tensor parallelism: model states divided by t; layer norms and some biases are really replicated (small).")
    if opt.state_bytes == 1:
        notes.append("8-bit Adam also keeps one fp32 scale per block of 2048 values (about 0.4% more), not counted.")
    return MemoryEstimate(comp, frozenset(() if approximate else comp), tuple(notes))


def activation_bytes_per_layer(seq_len: int, batch: int, hidden: int, heads: int, ffn: int | None = None,
                               setup: TrainingSetup = TrainingSetup()) -> int:
    """Activations one transformer layer keeps for the backward pass, per GPU (Korthikanti et al. 2022, §4).

    With ``ffn = 4·hidden`` this is exactly s·b·h·(34 + 5·a·s/h) in 16-bit; a general FFN size f
    gives s·b·(18·h + 4·f) + 5·a·s²·b. fp32 training doubles the 2-byte values (masks stay 1 byte).
    """
    s, b, h, a = seq_len, batch, hidden, heads
    f = 4 * h if ffn is None else ffn
    t = setup.tensor_parallel
    sp = setup.sequence_parallel
    scale = 2 if setup.precision == "fp32" else 1
    if setup.recompute == "full":
        return math.ceil(2 * s * b * h * scale / (t if sp else 1))
    # 16-bit values: replicated across tensor-parallel ranks (LN inputs, QKV and FFN inputs) and split ones.
    replicated_2byte = (4 + 2 + 2) * s * b * h  # two LN inputs, QKV input, MLP input
    masks_replicated = 2 * s * b * h  # attention-output and MLP dropout masks (1 byte each)
    split_2byte = 8 * s * b * h + 4 * s * b * f  # Q, K, V, out-proj input; GeLU input, fc2 input
    scores = 5 * a * s * s * b  # softmax output (2), its dropout mask (1), dropout output (2)
    if setup.recompute == "selective" or setup.flash_attention:
        scores = 0
    rep = replicated_2byte * scale + masks_replicated
    split = split_2byte * scale + (scores // 5 * (4 * scale + 1) if scores else 0)
    if sp:
        return math.ceil((rep + split) / t)
    return math.ceil(rep + split / t)


def training_memory(model: Any, batch_size: int = 0, seq_len: int = 0, setup: TrainingSetup = TrainingSetup(),
                    head_logits: bool = True) -> MemoryEstimate:
    """Memory per GPU for one training step of ``model`` at ``batch_size`` × ``seq_len`` tokens.

    ``model`` is a parameter count (then only model states: the slides' case), a :class:`Breakdown`,
    or a config. ``batch_size`` is per GPU (per data-parallel rank). With ``head_logits``, the
    vocabulary logits kept in fp32 for the loss (4·s·b·V bytes) are added.
    """
    setup = setup.validate()
    states = model_state_bytes(model, setup)
    comp = dict(states.components)
    notes = list(states.notes)
    _, bd = _model(model)
    if batch_size or seq_len:
        b = _whole("batch size", batch_size, 1, 10**7)
        s = _whole("sequence length", seq_len, 1, 10**7)
        if bd is None:
            raise InvalidConfig("Activations need the model's shape.", "Give a configuration (or a preset), not only a parameter count.")
        a = bd.arch
        _check_seq(a, s)
        per_layer = activation_bytes_per_layer(s, b, a.hidden, a.heads, a.ffn, setup)
        comp["activations"] = per_layer * a.layers
        if head_logits and bd.head != "base":
            comp["logits (fp32, for the loss)"] = math.ceil(4 * s * b * a.vocab / setup.tensor_parallel)
        if setup.flash_attention:
            notes.append("FlashAttention: the s² attention scores are not stored.")
        if setup.recompute != "none":
            notes.append(f"{setup.recompute.capitalize()} recomputation: the backward pass recomputes what is not stored.")
    return MemoryEstimate(comp, states.exact, tuple(notes))


def inference_memory(model: Any, batch_size: int = 1, seq_len: int = 128, dtype: str = "fp32",
                     kv_cache: bool | None = None) -> MemoryEstimate:
    """Memory for a forward pass (no gradients): weights, the peak working set of one layer, logits, KV cache.

    The working set (an estimate) is what one layer holds at once: input and output hidden states,
    Q/K/V, the attention scores and probabilities, and the FFN intermediate. ``kv_cache`` defaults to
    True for decoders (GPT-2): 2 × layers × batch × tokens × hidden values kept for generation.
    """
    if dtype not in DTYPE_BYTES or dtype == "int8":
        raise InvalidConfig(f"Unknown inference dtype {dtype!r}.", "Pick fp32, fp16 or bf16.")
    n, bd = _model(model)
    if bd is None:
        raise InvalidConfig("Inference memory needs the model's shape.", "Give a configuration (or a preset), not only a parameter count.")
    a = bd.arch
    b = _whole("batch size", batch_size, 1, 10**7)
    s = _whole("sequence length", seq_len, 1, 10**7)
    _check_seq(a, s)
    e = DTYPE_BYTES[dtype]
    comp = {"weights": n * e,
            "activations (one layer's peak)": e * b * (5 * s * a.hidden + 2 * a.heads * s * s + 2 * s * a.ffn)}
    if bd.head != "base":
        comp["logits"] = e * b * s * a.vocab
    if kv_cache if kv_cache is not None else a.is_decoder:
        comp["KV cache"] = 2 * a.layers * b * s * a.hidden * e
    return MemoryEstimate(comp, frozenset({"weights", "KV cache"}), ())


# ---------------------------------------------------------------------------------------------- GPUs


@dataclass(frozen=True)
class GPU:
    name: str
    memory_bytes: int
    peak_16bit: float  # dense tensor-core FLOP/s, fp16/bf16 inputs with fp32 accumulation
    peak_fp32: float  # FLOP/s without tensor cores (TF32 not assumed)
    year: int


GPUS: dict[str, GPU] = {g.name: g for g in (
    GPU("T4 16 GB", 16 * GiB, 65e12, 8.1e12, 2018),
    GPU("V100 16 GB", 16 * GiB, 125e12, 15.7e12, 2017),
    GPU("V100 32 GB", 32 * GiB, 125e12, 15.7e12, 2018),
    GPU("RTX 3090 24 GB", 24 * GiB, 71e12, 35.6e12, 2020),
    GPU("RTX 4090 24 GB", 24 * GiB, 165.2e12, 82.6e12, 2022),
    GPU("A100 40 GB", 40 * GiB, 312e12, 19.5e12, 2020),
    GPU("A100 80 GB", 80 * GiB, 312e12, 19.5e12, 2021),
    GPU("H100 80 GB", 80 * GiB, 989e12, 67e12, 2022),
    GPU("H200 141 GB", 141 * 10**9, 989e12, 67e12, 2024),
)}


def custom_gpu(memory_gib: float, peak_tflops_16bit: float = 100.0, peak_tflops_fp32: float = 20.0) -> GPU:
    """A GPU the catalog lacks (the slides' 12 GB card, say)."""
    if not (isinstance(memory_gib, (int, float)) and 0 < memory_gib <= 10_000):
        raise InvalidConfig(f"GPU memory must be between 0 and 10,000 GiB, not {memory_gib!r}.")
    if not (0 < peak_tflops_16bit <= 1e6 and 0 < peak_tflops_fp32 <= 1e6):
        raise InvalidConfig("GPU peak throughput must be a positive number of TFLOP/s.")
    return GPU(f"custom {memory_gib:g} GiB", int(memory_gib * GiB), peak_tflops_16bit * 1e12, peak_tflops_fp32 * 1e12, 0)


def _gpu(gpu: GPU | str) -> GPU:
    if isinstance(gpu, GPU):
        return gpu
    if gpu not in GPUS:
        raise InvalidConfig(f"Unknown GPU {gpu!r}.", "Pick one of: " + ", ".join(GPUS) + ", or make one with custom_gpu().")
    return GPUS[gpu]


@dataclass(frozen=True)
class BatchFit:
    gpu: str
    seq_len: int
    max_batch: int  # 0: not even one sequence fits
    fixed_bytes: int  # model states (independent of batch)
    per_sample_bytes: int  # activations (+ logits) of one sequence
    capacity_bytes: int  # GPU memory minus the reserve


def max_batch_size(model: Any, gpu: GPU | str, seq_len: int, setup: TrainingSetup = TrainingSetup(),
                   reserve_bytes: int = GiB) -> BatchFit:
    """The largest per-GPU training batch of ``seq_len`` tokens that fits ``gpu``.

    Memory is linear in the batch: fixed model states plus a per-sequence activation cost. ``reserve``
    (default 1 GiB) stands for the CUDA context, kernels' workspace and allocator fragmentation.
    """
    g = _gpu(gpu)
    bd = model if isinstance(model, Breakdown) else parameter_breakdown(model)
    fixed = training_memory(bd, setup=setup).total
    per_sample = training_memory(bd, 1, seq_len, setup).total - fixed
    cap = g.memory_bytes - reserve_bytes
    best = max(0, (cap - fixed) // per_sample) if per_sample else 0
    return BatchFit(g.name, seq_len, int(best), fixed, per_sample, cap)


# ------------------------------------------------------------------------------------- FLOPs and cost


def training_flops(parameters: float, tokens: float) -> float:
    """C ≈ 6·N·D FLOPs (Kaplan et al. 2020): 2N per token forward, twice that backward."""
    if not (parameters > 0 and tokens > 0):
        raise InvalidConfig("Parameters and tokens must be positive.")
    return 6.0 * parameters * tokens


def forward_flops_per_token(breakdown: Breakdown, n_ctx: int) -> float:
    """Kaplan et al. 2020, Table 1: 2·N + 2·n_layer·n_ctx·d_attn (N non-embedding)."""
    a = breakdown.arch
    return 2.0 * breakdown.non_embedding + 2.0 * a.layers * n_ctx * a.hidden


def pf_days(flops: float) -> float:
    """FLOPs in petaflop/s-days (10^15 FLOP/s for a day), the unit of Kaplan et al. and GPT-3."""
    return flops / (1e15 * 86400)


def training_time(flops: float, gpu: GPU | str, n_gpus: int = 1, utilisation: float = 0.4, precision: str = "mixed") -> float:
    """Seconds to do ``flops`` on ``n_gpus`` at ``utilisation`` of peak (model FLOPs utilisation, MFU)."""
    g = _gpu(gpu)
    n = _whole("number of GPUs", n_gpus, 1, 10**6)
    if not (isinstance(utilisation, (int, float)) and 0 < utilisation <= 1):
        raise InvalidConfig(f"Utilisation must be a fraction between 0 and 1, not {utilisation!r}.",
                            "Typical model-FLOPs utilisation is 0.3–0.5.")
    peak = g.peak_fp32 if precision == "fp32" else g.peak_16bit
    return flops / (n * peak * utilisation)


def training_cost(seconds: float, n_gpus: int, price_per_gpu_hour: float) -> float:
    """Dollars: GPU-hours × price."""
    if not (price_per_gpu_hour >= 0):
        raise InvalidConfig("The price per GPU-hour must be zero or more.")
    return seconds / 3600 * n_gpus * price_per_gpu_hour


def _bert_cost_example() -> tuple[dict[str, Any], ...]:
    from analysis.reference import fact

    return (
        {"model": "BERT-base", "parameters": 110e6, "tokens": 1e6 * 256 * 512, "devices": "4 Cloud TPUs (16 chips)",
         "device_hours": 4 * 96, "slides_usd": int(fact("bert_base_pretraining_usd").value)},
        {"model": "BERT-large", "parameters": 340e6, "tokens": 1e6 * 256 * 512, "devices": "16 Cloud TPUs (64 chips)",
         "device_hours": 16 * 96, "slides_usd": int(fact("bert_large_pretraining_usd").value)},
    )


#: The slides' BERT cost figures (``data/reference/facts.csv``), and the TPU time the BERT paper reports (the worked example).
BERT_COST_EXAMPLE = _bert_cost_example()


def with_setup(setup: TrainingSetup, **changes: Any) -> TrainingSetup:
    return replace(setup, **changes).validate()
