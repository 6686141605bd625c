"""The fine-tuning lab's numbers, on the bundled MiniLM (real weights) and on a lab-trained BERT.

    python bench/finetune.py throughput          # models.finetune's loop against a plain PyTorch loop (target ≥ 0.9)
    python bench/finetune.py classroom           # MiniLM on WiC at the page's defaults: accuracy, interval, minutes
    python bench/finetune.py table               # frozen vs fine-tuned, MiniLM, both tasks, with intervals
    python bench/finetune.py lab [--steps 1200]  # a lab-pre-trained BERT against its random-initialisation control
    python bench/finetune.py lr                  # the default rate, chosen on the validation split (test shown, not used)

Each prints its numbers; ratios are medians of interleaved runs in this process, so both sides see the same load.
Run with HF_HUB_OFFLINE=1 and a BFE_MODEL_DIR you can write to (checkpoints of the lab runs go there).
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from core import registry
from models import finetune

MINILM = registry.bundled_id()


def fmt(r: finetune.FineTuneResult) -> str:
    lo, hi = r.accuracy_interval
    return (f"accuracy {r.accuracy:.3f} [{lo:.3f}, {hi:.3f}]  macro-F1 {r.macro_f1:.3f}  majority {r.majority_baseline:.3f}  "
            f"train {r.train_examples}  test {r.test_examples}  {r.seconds:.0f} s")


def plain_loop(cfg: finetune.FineTuneConfig, steps: int) -> float:
    """Tokens per second of the textbook loop on the same model, batches and optimizer (no accelerate, no callbacks)."""
    import random

    import torch
    import transformers

    task = finetune.load_config_task(cfg)
    model, tok = finetune.build(cfg, task)
    enc = finetune.encode(tok, task, task.train, cfg.max_len)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-5, weight_decay=0.01)
    sched = transformers.get_linear_schedule_with_warmup(opt, int(0.1 * steps), steps)
    rng = random.Random(cfg.seed)
    order = list(range(len(task.train)))
    rng.shuffle(order)
    model.train()
    tokens, t0 = 0, time.perf_counter()
    for s in range(steps):
        idx = order[(s * cfg.batch) % len(order):][: cfg.batch]
        b = finetune.collate(enc, idx, tok.pad_token_id, task.kind == "token")
        loss = model(**b).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        tokens += int(b["attention_mask"].sum())
    return tokens / (time.perf_counter() - t0)


def ours(cfg: finetune.FineTuneConfig) -> float:
    """Tokens per second of models.finetune's training steps (timed by its own progress callback, evaluation excluded)."""
    seen: list[float] = []
    r = finetune.finetune(cfg, on_progress=lambda step, loss, seconds: seen.append(seconds), save=False)
    return r.tokens / seen[-1]


def throughput(repeats: int) -> None:
    import torch

    torch.set_num_threads(max(1, (os.cpu_count() or 2)))
    cfg = finetune.FineTuneConfig(model=MINILM, task="wic", epochs=1, batch=32, max_train=320, max_test=10, max_len=64)
    steps = math.ceil(cfg.max_train / cfg.batch)
    mine, ref = [], []
    for _ in range(repeats):  # interleaved
        ref.append(plain_loop(cfg, steps))
        mine.append(ours(cfg))
    m, r = statistics.median(mine), statistics.median(ref)
    print(f"MiniLM, WiC, batch {cfg.batch}, {steps} steps, {repeats} interleaved runs (medians):")
    print(f"  plain PyTorch loop:      {r:9,.0f} tokens/s")
    print(f"  models.finetune:         {m:9,.0f} tokens/s   ratio {m / r:.2f} (target ≥ 0.9)")


def classroom() -> None:
    t0 = time.perf_counter()
    cfg = finetune.FineTuneConfig(model=MINILM, task="wic", mode="finetune", max_len=64, run="bench-wic")
    r = finetune.finetune(cfg, save=False)
    print(f"MiniLM fine-tuned on WiC at the page's defaults ({cfg.epochs} epochs, batch {cfg.batch}, lr {finetune.default_lr(22_000_000):g}, "
          f"{cfg.max_train:,} train / {cfg.max_test:,} test, {cfg.max_len} tokens):")
    print(f"  {fmt(r)}")
    print(f"  from the call: {time.perf_counter() - t0:.0f} s (target ≤ 300 s); the interval "
          f"{'excludes' if r.accuracy_interval[0] > r.majority_baseline else 'does not exclude'} the majority baseline")
    for row in r.layer_change:
        print(f"    {row['layer']:>11}: weight change {row['weight_change']:.4f}  CKA before/after {row['cka']:.3f}")


def table(max_train: int, max_test: int) -> None:
    for task in ("wic", "supersense"):
        for mode in ("frozen", "finetune"):
            cfg = finetune.FineTuneConfig(model=MINILM, task=task, mode=mode, layer="last4", max_train=max_train, max_test=max_test, max_len=64)
            print(f"MiniLM  {task:10} {mode:8}  {fmt(finetune.finetune(cfg, save=False))}", flush=True)


def lab(steps: int, max_train: int, max_test: int) -> None:
    from models.pretrain import TrainConfig, train

    run = f"bench-lab-bert-{steps}"
    pre = train(TrainConfig(objective="mlm", steps=steps, batch=64, lr=1e-3, run=run))
    print(f"lab BERT (2 × 128, mlm, {steps} steps): held-out loss {pre.evaluation['held_out_loss']:.2f}, {pre.seconds:.0f} s")
    for task in ("wic", "supersense"):
        for mode in ("finetune", "random", "frozen"):
            cfg = finetune.FineTuneConfig(model=pre.checkpoint, task=task, mode=mode, lr=1e-4, max_train=max_train, max_test=max_test,
                                   max_len=64, layer="last4")
            print(f"lab BERT  {task:10} {mode:8}  {fmt(finetune.finetune(replace(cfg), save=False))}", flush=True)


def learning_rates(max_train: int, rates: tuple[float, ...] = (5e-5, 1e-4, 2e-4)) -> None:
    """MiniLM's rate chosen as a user should: on the validation split's accuracy after the last epoch (the test split
    is printed beside it, and not used to choose)."""
    for task in ("wic", "supersense"):
        best = None
        for lr in rates:
            cfg = finetune.FineTuneConfig(model=MINILM, task=task, lr=lr, max_train=max_train, max_len=64)
            r = finetune.finetune(cfg, save=False)
            val = r.epochs[-1]["validation_accuracy"]
            print(f"MiniLM  {task:10} lr {lr:g}: validation {val:.3f} (epochs: "
                  + ", ".join(f"{e['validation_accuracy']:.3f}" for e in r.epochs) + f")   test {r.accuracy:.3f}  {r.seconds:.0f} s",
                  flush=True)
            best = max(best or (val, lr), (val, lr))
        print(f"  → chosen on validation for {task}: lr {best[1]:g} (the default for a 22M model: {finetune.default_lr(22_000_000):g})")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("what", choices=["throughput", "classroom", "table", "lab", "lr"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--steps", type=int, default=1200)
    p.add_argument("--max-train", type=int, default=2000)
    p.add_argument("--max-test", type=int, default=500)
    a = p.parse_args()
    if a.what == "throughput":
        throughput(a.repeats)
    elif a.what == "classroom":
        classroom()
    elif a.what == "lr":
        learning_rates(a.max_train)
    elif a.what == "table":
        table(a.max_train, a.max_test)
    else:
        lab(a.steps, a.max_train, a.max_test)


if __name__ == "__main__":
    main()
