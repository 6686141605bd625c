"""A run from request to result: :func:`finetune` checks the request, builds the model, reads it out frozen
(:func:`~models.finetune.frozen.read_out`) or trains every weight (:func:`train_all_weights`), scores the test split
once, and measures what changed."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from analysis.tasks import Task
from core.errors import InvalidData
from models.finetune.config import FineTuneConfig, FineTuneResult, default_lr
from models.finetune.data import Encoded, collate, encode_splits, load_config_task
from models.finetune.evaluate import CKA_SENTENCES, hidden_states, layer_change, predict, score, weight_snapshot
from models.finetune.frozen import read_out
from models.finetune.model import build, encoder_of
from models.finetune.save import save_run

if TYPE_CHECKING:
    import torch


def finetune(config: FineTuneConfig, on_progress: Callable[[int, float, float], None] | None = None,
             on_epoch: Callable[[dict[str, float]], None] | None = None, should_stop: Callable[[], bool] | None = None,
             save: bool = True) -> FineTuneResult:
    """Fine-tune (or freeze, or train from scratch) ``config.model`` on ``config.task``, score it on the test split
    once, at the end, and measure the per-layer change. ``on_progress(step, loss, seconds)`` and ``on_epoch({epoch,
    train_loss, validation_accuracy})`` report as it goes (accuracy on the validation split, NaN where the task has
    none: the test split is never looked at before the end); ``should_stop()`` cancels between steps (the result says
    so, no checkpoint).

    Raises:
        InvalidConfig, InvalidData, InvalidTaskFile, UnknownTask (the request, checked before any work);
        ModelUnavailable, UnsupportedArchitecture (the model); TrainingFailed (a save that cannot be written).
    """
    import torch

    config.validate()
    task = load_config_task(config)
    if len(task.train) < 2 or len(task.test) < 1:
        raise InvalidData(f"{task.name} has {len(task.train)} training and {len(task.test)} test examples after the limits.")
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    model, tok = build(config, task)
    enc = encode_splits(tok, task, config.max_len)
    result = FineTuneResult(config, majority_baseline=task.majority_baseline(), train_examples=len(task.train),
                            test_examples=len(task.test), labels=task.labels)
    cka_idx = list(range(min(CKA_SENTENCES, len(task.test))))
    before_states = hidden_states(model, enc.test, cka_idx, enc.pad_id)
    before_weights = weight_snapshot(model)
    start = time.perf_counter()
    if config.mode == "frozen":
        pred = read_out(config, model, task, enc, result)
    else:
        model, pred = train_all_weights(config, model, task, enc, result, start, on_progress, on_epoch, should_stop)
    result.seconds = time.perf_counter() - start
    score(result, task, pred, config.seed)
    result.layer_change = layer_change(model, before_states, before_weights, enc.test, cka_idx, enc.pad_id)
    if save and config.mode != "frozen" and not result.stopped:
        result.checkpoint = save_run(config, model, tok, result)
    return result


def train_all_weights(config: FineTuneConfig, model: torch.nn.Module, task: Task, enc: Encoded, result: FineTuneResult, start: float,
                      on_progress: Callable[[int, float, float], None] | None = None,
                      on_epoch: Callable[[dict[str, float]], None] | None = None,
                      should_stop: Callable[[], bool] | None = None) -> tuple[Any, Any]:
    """The ``finetune`` and ``random`` modes: train every weight for ``config.epochs`` on shuffled batches (AdamW,
    linear warm-up and decay, through :mod:`models.training`), scoring the validation split after each epoch; a
    cancel or a non-finite loss stops the run (``result.stopped`` says which). Fills ``result``'s curve, epochs,
    tokens and trainable parameters; returns (the model, unwrapped from accelerate and in eval mode, the test split's
    predictions as a numpy array). ``start``: the run's ``perf_counter`` start, for ``on_progress``'s seconds."""
    import numpy as np

    from models import training

    accelerator = training.make_accelerator()
    params = [p for p in model.parameters() if p.requires_grad]
    result.trainable_parameters = sum(p.numel() for p in params)
    lr = config.lr or default_lr(sum(p.numel() for p in encoder_of(model).parameters()))
    steps_per_epoch = math.ceil(len(task.train) / config.batch)
    optimizer, scheduler = training.optimizer_and_schedule(params, lr, steps_per_epoch * config.epochs, config.warmup)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    y_val = np.array([e.label for e in task.validation])
    rng = random.Random(config.seed)
    n = 0
    for epoch in range(1, config.epochs + 1):
        model.train()
        order = list(range(len(task.train)))
        rng.shuffle(order)
        losses = []
        for s in range(0, len(order), config.batch):
            if should_stop is not None and should_stop():
                result.stopped = f"cancelled at step {n}"
                break
            batch = collate(enc.train, order[s: s + config.batch], enc.pad_id, enc.token_task)
            b = {k: v.to(accelerator.device) for k, v in batch.items()}
            loss = model(**b).loss
            value = float(loss.detach())
            if not math.isfinite(value):
                result.stopped = f"the loss became {value} at step {n + 1}"
                break
            training.step(accelerator, loss, params, optimizer, scheduler)
            n += 1
            losses.append(value)
            result.curve.append((n, value))
            result.tokens += int(b["attention_mask"].sum())
            if on_progress is not None:
                on_progress(n, value, time.perf_counter() - start)
        if result.stopped:
            break
        model.eval()
        acc = float((np.array(predict(model, enc.validation, enc.pad_id, enc.token_task)) == y_val).mean()) \
            if enc.validation is not None else float("nan")
        row = {"epoch": epoch, "train_loss": float(np.mean(losses)) if losses else float("nan"), "validation_accuracy": acc}
        result.epochs.append(row)
        if on_epoch is not None:
            on_epoch(row)
    model = accelerator.unwrap_model(model)
    model.eval()
    return model, np.array(predict(model, enc.test, enc.pad_id, enc.token_task))
