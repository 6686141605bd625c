"""What a lab run costs before it starts: exact parameters, the memory calculator's prediction, training FLOPs and
real tokens; and the lab's one memory rule, which every check, preview and submit applies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig, hf_config


def memory_budget_mb() -> int:
    """This server's memory limit per lab run, in MB (``BFE_LAB_MEMORY_MB``)."""
    from core.settings import get_settings

    return get_settings().lab_memory_mb


def exceeds_budget(memory_bytes: float, budget_mb: int) -> bool:
    """The lab's memory rule: a run whose predicted training step needs more than ``budget_mb`` MB does not start
    (the calculator's prediction, so a run that would swap or be killed by the host is refused before it queues)."""
    return memory_bytes > budget_mb * 2**20


@dataclass(frozen=True)
class Size:
    """What the calculator says about a pre-training run before it starts."""

    parameters: int  # every trained tensor (ELECTRA: generator + discriminator, shared embeddings once)
    non_embedding: int  # Kaplan et al. (2020)'s N: 2·d·L·(2·d_attn + d_ff), what scaling laws count
    memory_bytes: int  # one training step, fp32, the run's optimizer (analysis.memory.training_memory)
    flops_per_token: float  # training FLOPs per real token as the loop performs them (models.pretrain.flops)
    kaplan_flops_per_token: float  # Kaplan et al. 2020's 6N + attention per token, for reference
    tokens_per_step: float  # real tokens in a batch: its texts' mean length × batch (the padded batch × length is more)

    @property
    def flops_per_step(self) -> float:
        return self.flops_per_token * self.tokens_per_step


def size(config: TrainConfig) -> Size:
    """Exact parameters, predicted memory, and the training FLOPs and real tokens of a step of ``config`` (its corpus
    read once, with its tokenizer, for the texts' lengths).

    Raises:
        InvalidConfig: a configuration the calculator cannot build; InvalidData: a corpus that cannot be read.
    """
    from analysis.memory import OPTIMIZERS, TrainingSetup, training_memory
    from analysis.params import parameter_breakdown
    from models.pretrain import flops

    config.validate()
    setup = TrainingSetup(precision="fp32", optimizer=config.optimizer)  # Lion keeps one state per parameter, AdamW two
    per_parameter = 4 + 4 + 4 * OPTIMIZERS[config.optimizer].states  # fp32 weight, gradient, states
    cfg, head = hf_config(config)
    main = parameter_breakdown(cfg, head)
    params = main.total
    memory = training_memory(main, config.batch, config.seq_len, setup).total
    non_embedding = 2 * config.hidden * config.layers * (2 * config.hidden + config.ffn)
    if config.objective == "electra":
        gcfg, ghead = hf_config(config, "generator")
        gen = parameter_breakdown(gcfg, ghead)
        shared = sum(t.numel for t in gen.tensors if t.group == "embeddings" and t.part != "embedding projection")
        params += gen.total - shared
        memory += training_memory(gen, config.batch, config.seq_len, setup).total - per_parameter * shared
        g = flops.shapes(config)["generator"]
        non_embedding += 2 * g.hidden * g.layers * (2 * g.hidden + g.ffn)
    if config.objective == "distil":  # the teacher runs beside the student: its weights and one forward's activations
        from dataclasses import replace

        from analysis.memory import inference_memory

        tcfg, thead = hf_config(replace(config, objective="mlm", teacher="", layers=flops.teacher_shape(config).layers))
        memory += inference_memory(parameter_breakdown(tcfg, thead), config.batch, config.seq_len).total
    stats = flops.length_stats(config)
    return Size(params, non_embedding, memory, flops.per_token(config, stats), flops.kaplan_per_token(config),
                stats.tokens_per_sequence * config.batch)


def check_fits(config: TrainConfig, budget_mb: int | None = None) -> Size:
    """:func:`size`, refusing a run the memory calculator says needs more than ``BFE_LAB_MEMORY_MB``."""
    budget_mb = budget_mb or memory_budget_mb()
    cost = size(config)
    if exceeds_budget(cost.memory_bytes, budget_mb):
        raise InvalidConfig(f"This run would need about {cost.memory_bytes / 2**20:,.0f} MB to train "
                            f"({cost.parameters:,} parameters, batch {config.batch} × {config.seq_len} tokens); "
                            f"the lab's limit on this server is {budget_mb:,} MB (BFE_LAB_MEMORY_MB).",
                            "Make the model, the batch or the sequence smaller.")
    return cost


@dataclass(frozen=True)
class FineTuneSize:
    """What a fine-tuning run will train and need, before it starts."""

    parameters: int  # the whole classifier (encoder + head)
    trainable: int  # what the mode trains: everything, or only the linear classifier on frozen features
    memory_bytes: int  # one training step, fp32 AdamW (frozen: the encoder's forward only)


def finetune_size(config: Any, labels: int, kind: str = "single") -> FineTuneSize:
    """Exact parameters (``analysis.params`` on the checkpoint's config) and predicted memory of a fine-tuning run.

    Raises:
        ModelUnavailable, UnsupportedArchitecture, InvalidCheckpoint: from :func:`models.inspection.inspect`.
    """
    from analysis.memory import TrainingSetup, inference_memory, training_memory
    from analysis.params import parameter_breakdown
    from models.inspection import inspect

    info = inspect(config.model, network=False)
    body = parameter_breakdown(info.config, "base")
    arch = body.arch
    head = arch.hidden * labels + labels
    if config.mode == "frozen":
        width = arch.hidden * (min(4, arch.layers + 1) if config.layer == "last4" else 1)  # the embeddings count as a layer
        width *= 4 if kind == "pair" else 1  # a pair's two marked words as [u, v, u⊙v, |u−v|] (models.finetune.features)
        trainable = width * (labels if labels > 2 else 1) + (labels if labels > 2 else 1)
        memory = inference_memory(body, config.batch, config.max_len).total
    else:
        trainable = body.total + head
        memory = training_memory(body, config.batch, config.max_len, TrainingSetup(precision="fp32", optimizer="adamw")).total + 16 * head
    return FineTuneSize(body.total + head, trainable, int(memory))
