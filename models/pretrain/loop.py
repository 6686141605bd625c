"""The pre-training loop (accelerate; one device here, several processes or GPUs under torchrun / accelerate
launch) and the atomic save of its checkpoint. :func:`train` is :func:`setup`, :func:`train_step` per step and
:func:`finish`; what one objective or parametrisation needs lives beside it (the loss per objective:
:mod:`.loss`; μP's multipliers and rate groups: :mod:`.mup`; the phases' rates and accumulation: :mod:`.phases`)."""

from __future__ import annotations

import itertools
import json
import math
import random
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig, TrainResult, trained_dir
from models.pretrain.corpus import read_corpus, tokenizer
from models.pretrain.data import Batches
from models.pretrain.evaluate import evaluate, over_training, unigram_log_probs
from models.pretrain.loss import loss_of
from models.pretrain.model import build_model, main_model, parameter_count
from models.pretrain.phases import update_plan
from models.training import (
    atomic_save,
    make_accelerator,
    optimizer_and_schedule,
    optimizer_state_bytes,
    step,
    step_accumulated,
)


@dataclass
class Run:
    """One run in progress (:func:`setup` builds it; :func:`train_step` advances it; :func:`finish` evaluates and
    saves it). ``parts``: the prepared models (ELECTRA's generator and discriminator, one model otherwise); ``bare``:
    the same unwrapped; ``accumulate``: per micro-batch, how many micro-batches its update averages, with the
    micro-batches that end one (phases that grow the batch), or None: one update per step."""

    config: TrainConfig
    accelerator: Any
    tok: Any
    held_out: list[str]
    parts: tuple[Any, ...]
    bare: tuple[Any, ...]
    params: list[Any]
    optimizer: Any
    scheduler: Any
    batches: Batches
    result: TrainResult
    accumulate: tuple[list[int], set[int]] | None = None
    keep: list[int] = field(default_factory=list)  # the steps whose weights are kept as snapshots
    snapshots: dict[int, dict[str, Any]] = field(default_factory=dict)
    good: dict[str, Any] | None = None  # the last weights known good (before a NaN loss)
    good_step: int = 0
    updates: int = 0
    save: bool = True  # evaluate and save on the main process at the end (False: a bench's or a test's bare loop)

    @property
    def model(self) -> Any:
        return self.parts if len(self.parts) > 1 else self.parts[0]

    @property
    def world(self) -> int:
        return self.accelerator.num_processes


def train(config: TrainConfig, on_progress: Callable[[int, float, float], None] | None = None,
          should_stop: Callable[[], bool] | None = None, save: bool = True) -> TrainResult:
    """Train, evaluate and save one run. ``on_progress(step, loss, seconds)`` is called as it goes;
    ``should_stop()`` cancels between steps. A NaN or infinite loss stops the run (the last good state is saved).

    Under ``accelerate launch`` with several processes, each trains on its slice of the global batch;
    only the main process evaluates and saves (the others return the same curve, no checkpoint).

    Raises:
        InvalidConfig, InvalidData, TrainingFailed (a save that cannot be written; nothing half-written is left).
    """
    run = setup(config, save)
    start = time.perf_counter()
    for n in range(1, config.steps + 1):
        if should_stop is not None and should_stop():
            run.result.stopped = f"cancelled at step {n - 1}"
            break
        value = train_step(run, n)
        if not math.isfinite(value):
            run.result.stopped = f"the loss became {value} at step {n}; the last good state (step {n - 1}) is kept"
            break
        if on_progress is not None:
            on_progress(n, value, time.perf_counter() - start)
    run.result.seconds = time.perf_counter() - start
    return finish(run)


def setup(config: TrainConfig, save: bool = True) -> Run:
    """A run ready to train: the config checked, seeds set, the corpus read, the model built (with μP's multipliers
    and per-layer rates where the config asks), the optimizer and schedule (with the phases' rate factors), all
    prepared by accelerate, and the steps whose weights are kept (``save``: on the main process only)."""
    config.validate()
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    accelerator = make_accelerator()
    world = accelerator.num_processes
    if world > 1 and (config.batch % world or config.objective == "electra"):
        raise InvalidConfig(f"With {world} processes the batch ({config.batch}) must divide evenly, and ELECTRA's two "
                            "models train in one process only.", "Pick a batch that is a multiple of the process count.")
    tok = tokenizer(config.vocab)
    train_texts, held_out = read_corpus(config)
    if config.init:  # held out from what the shipped checkpoint trained on, not only from this run's texts
        from models.pretrain.shipped import shipped_config

        _, held_out = read_corpus(replace(config, seed=shipped_config(config.init)["seed"]))
    model = build_model(config, len(tok), tok)
    if config.init:
        start_from_shipped(model, tok, config.init)
    parts = model if isinstance(model, tuple) else (model,)
    trainable = _trainable(config, parts)
    plan = update_plan(config) if config.phases else None
    optimizer, scheduler = optimizer_and_schedule(trainable, config.lr, config.steps, config.warmup, config.schedule,
                                                  config.weight_decay, config.optimizer,
                                                  [u.lr_factor for u in plan] if plan else None)
    prepared = accelerator.prepare(*parts, optimizer, scheduler)
    parts, optimizer, scheduler = tuple(prepared[: len(parts)]), prepared[-2], prepared[-1]
    batches = Batches(config, train_texts, tok)
    batches.rank, batches.world = accelerator.process_index, world
    bare = tuple(accelerator.unwrap_model(m) for m in parts)
    result = TrainResult(config, parameters=parameter_count(bare if len(bare) > 1 else bare[0]), processes=world,
                         rank=accelerator.process_index)
    accumulate = ([u.micro_batches for u in plan for _ in range(u.micro_batches)],
                  set(itertools.accumulate(u.micro_batches for u in plan))) if plan else None
    run = Run(config, accelerator, tok, held_out, parts, bare, _parameters(parts), optimizer, scheduler, batches, result,
              accumulate, keep=step_plan(config.steps, parameter_count(main_model(bare))) if accelerator.is_main_process and save else [],
              save=save)
    if 0 in run.keep:
        run.snapshots[0] = cpu_state(main_model(bare))
    for m in parts:
        m.train()
    return run


def start_from_shipped(model: torch.nn.Module, tok: Any, name: str) -> None:
    """Load a shipped checkpoint's weights (:mod:`models.pretrain.shipped`) into the model a run built, every tensor.

    Raises:
        InvalidConfig: its vocabulary is not the run's, or its weights do not match the model (a damaged folder).
    """
    from safetensors import SafetensorError
    from safetensors.torch import load_file
    from transformers import AutoTokenizer

    from models.pretrain.shipped import folder

    where = folder(name)
    hint = "Restore data/lab/teachers/ from the repository, or rebuild it: python bench/ship_teacher.py."
    try:
        vocab = AutoTokenizer.from_pretrained(where).get_vocab()
    except (OSError, ValueError) as err:
        raise InvalidConfig(f"The shipped checkpoint {name}'s tokenizer does not load: {str(err)[:200]}", hint) from err
    if vocab != tok.get_vocab():
        raise InvalidConfig(f"The shipped checkpoint {name} has another vocabulary than this run's.", hint)
    try:
        missing, unexpected = model.load_state_dict(load_file(where / "model.safetensors"), strict=False)
    except (OSError, RuntimeError, SafetensorError) as err:  # a missing or cut file, or other shapes
        raise InvalidConfig(f"The shipped checkpoint {name} does not load into this run's model: {str(err)[:200]}", hint) from err
    # save_pretrained leaves out a tied tensor (the MLM decoder is the word embeddings): missing is fine only for those
    loaded = {t.data_ptr() for k, t in model.state_dict().items() if k not in missing}
    untied = [k for k in missing if model.state_dict()[k].data_ptr() not in loaded]
    if untied or unexpected:
        raise InvalidConfig(f"The shipped checkpoint {name} does not match this run's model (missing {untied[:3]}, "
                            f"unexpected {unexpected[:3]}).", hint)


def _parameters(parts: tuple[Any, ...]) -> list[Any]:
    """Every parameter once (ELECTRA's generator and discriminator share their embeddings)."""
    return list({id(p): p for m in parts for p in m.parameters()}.values())


def _trainable(config: TrainConfig, parts: tuple[Any, ...]) -> list[Any]:
    """What the optimizer updates: the parameters, or under μP (Tensor Programs V, Table 3; validate() allows it for
    BERT's masked-LM objectives only) the model with its multipliers applied and per-layer rate groups."""
    if config.parametrisation != "mup":
        return _parameters(parts)
    from models.pretrain.mup import apply_mup, param_groups

    for m in parts:
        apply_mup(m, config)
    return param_groups(parts, config, config.weight_decay)  # the run's λ, × m on hidden weights


def train_step(run: Run, n: int) -> float:
    """Step ``n`` (from 1, one after another: accumulation, snapshots and the last good weights go by it): one batch's
    loss and, unless it is NaN or infinite (returned, nothing updated), its update (or its share of an accumulated one),
    the curve, the last good weights and a snapshot where one is kept."""
    config, accelerator, result = run.config, run.accelerator, run.result
    batch = {k: v.to(accelerator.device) for k, v in run.batches.sample().items()}
    loss = loss_of(config, run.model, batch)
    value = float(accelerator.reduce(loss.detach(), reduction="mean")) if run.world > 1 else float(loss.detach())
    if not math.isfinite(value):
        return value
    if run.accumulate is None:
        step(accelerator, loss, run.params, run.optimizer, run.scheduler)
        run.updates += 1
    else:  # gradient accumulation: the grow arm's larger batch in the memory of one micro-batch
        groups, ends = run.accumulate
        accelerator.backward(loss / groups[n - 1])
        if n in ends:
            step_accumulated(accelerator, run.params, run.optimizer, run.scheduler)
            run.updates += 1
    result.curve.append((n, value))
    result.tokens += (int(batch["attention_mask"].sum()) if "attention_mask" in batch else int(batch["input_ids"].numel())) * run.world
    if n % max(1, config.steps // 20) == 0 or n == config.steps:
        run.good = {k: v.detach().clone() for k, v in main_model(run.bare).state_dict().items()}
        run.good_step = n
    if n in run.keep:
        run.snapshots[n] = cpu_state(main_model(run.bare))
    return value


def finish(run: Run) -> TrainResult:
    """The run's end: the last good weights back where a NaN loss stopped it, then on the main process the
    evaluation (held-out loss, probes, what the optimizer presets compare: updates made, optimizer state) and the
    atomic save with its snapshots."""
    config, result, bare = run.config, run.result, run.bare
    last_step = result.curve[-1][0] if result.curve else 0
    if run.good is not None and result.stopped.startswith("the loss"):
        main_model(bare).load_state_dict(run.good)
        last_step = run.good_step
        result.stopped = result.stopped.split(";")[0] + f"; the last good state (step {run.good_step}) is kept"
    for m in bare:
        m.eval()
    if run.accelerator.is_main_process:
        tok = run.tok
        unigram = unigram_log_probs(run.batches.examples, len(tok), tok.all_special_ids) if config.objective == "mlm" else None
        result.evaluation = evaluate(config, bare if len(bare) > 1 else bare[0], tok, run.held_out, unigram)
        result.evaluation["parameter_updates"] = run.updates
        result.evaluation["optimizer_state_bytes"] = optimizer_state_bytes(run.optimizer)
        if kept := {s: w for s, w in run.snapshots.items() if s < last_step}:
            result.evaluation["over_training"] = over_training(config, main_model(bare), tok, kept)
        if run.save and (result.curve or (config.init and not config.steps)):  # 0 steps from a shipped checkpoint: those weights
            result.checkpoint = save_run(config, main_model(bare), tok, result, kept, last_step)
    run.accelerator.wait_for_everyone()
    return result


#: Checkpoints a run keeps over its training besides its last (step 0, the initialisation, among them), and the
#: memory and disk they may take together: a lab model of 4 M parameters keeps all of them (16 MB each); one of
#: 100 M keeps one or none.
STEP_CHECKPOINTS = 5
STEP_BUDGET_MB = 400


def step_plan(steps: int, parameters: int, count: int = STEP_CHECKPOINTS, budget_mb: int = STEP_BUDGET_MB) -> list[int]:
    """The steps before the last at which a run keeps a checkpoint: step 0 and log-spaced steps (MultiBERTs and
    Pythia keep checkpoints log-spaced early, where the model changes fastest), as many as fit ``budget_mb`` at 4
    bytes per parameter, at most ``count``."""
    fit = min(count, int(budget_mb * 2**20 // max(1, 4 * parameters)))
    if fit <= 0 or steps < 2:
        return []
    inner = {round(steps ** (i / fit)) for i in range(1, fit)} - {steps}
    return sorted({0, *inner})[:fit]


def cpu_state(model: torch.nn.Module) -> dict[str, Any]:
    """A copy of the model's weights in CPU memory (a snapshot the final save writes out)."""
    return {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}


def save_run(config: TrainConfig, model: torch.nn.Module, tok: Any, result: TrainResult,
             snapshots: dict[int, dict[str, Any]] | None = None, last_step: int | None = None) -> str:
    """Save as safetensors with its tokenizer under ``BFE_MODEL_DIR/trained/<run>``, atomically: written in a
    temporary folder and renamed, so a full disk or a killed process never leaves a half-written checkpoint
    that a model picker would offer. Returns the model id (``trained/<run>``).

    ``snapshots`` (step → weights) go in the same folder, under ``steps/<step>/``, each a complete checkpoint that
    loads as ``trained/<run>@<step>`` (:func:`models.locate.locate`); they are written in the same atomic save, so
    a run has all of them or none. ``last_step``: the step of the weights saved as the run (by default its curve's
    last; a run stopped by a NaN loss keeps an earlier state).

    Raises:
        TrainingFailed: the folder cannot be written (disk full, read-only); nothing is left behind.
    """
    from models.locate import validate_model_id

    name = f"trained/{config.run_name}"
    validate_model_id(name)

    losses = dict(result.curve)
    last = last_step if last_step is not None else (result.curve[-1][0] if result.curve else 0)
    kept = sorted(s for s in (snapshots or {}) if s < last)

    def save_model(where: Path) -> None:  # μP's multipliers folded into the weights: it reloads as it computes
        from models.pretrain.mup import portable_state

        model.save_pretrained(where, safe_serialization=True, state_dict=portable_state(model))

    def write(folder: Path) -> None:
        if kept:
            final = cpu_state(model)
            try:
                for s in kept:
                    model.load_state_dict(snapshots[s])
                    where = folder / "steps" / str(s)
                    save_model(where)
                    tok.save_pretrained(where)
                    (where / "bfe_step.json").write_text(json.dumps({"run": config.run_name, "step": s, "loss": losses.get(s)}))
            finally:  # a failed save leaves the model as trained, not at an old step
                model.load_state_dict(final)
        save_model(folder)
        tok.save_pretrained(folder)
        (folder / "bfe_run.json").write_text(json.dumps({"config": asdict(config), "evaluation": result.evaluation,
                                                         "curve": result.curve[-2000:], "seconds": result.seconds,
                                                         "steps_kept": [*kept, last]}, default=str))

    atomic_save(trained_dir() / config.run_name, write)
    return name
