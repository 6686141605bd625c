"""The lab's model FLOP utilisation (MFU): the FLOPs a default pre-training run does per second, against this
machine's fp32 matrix-multiply peak measured in the same run.

    python bench/mfu.py [--steps N] [--repeats R] [--threads T] [--candidates] [--compile]

The default size: BERT masked LM, 2 layers × hidden 128 (2 heads, FFN 512), sequence 64, batch 64, the 8,192-token
``wordnet-8k`` vocabulary, dynamic masking, the output layer scored on the masked positions only.

Counted FLOPs (forward + backward = 3 × the forward's matrix-multiply FLOPs, 2 per multiply-add):

- **model FLOPs**, the MFU numerator: every linear layer of the encoder on each real (not padding) token,
  attention scores and their weighted sum over each text's own length, and the output layer (transform + 8,192-way
  decoder) on the masked positions only: what :func:`models.pretrain.loss.loss_of` needs, not the Kaplan
  convention (6 × parameters per token, the output layer on every position). The lab's presets and page count
  the same way (:mod:`models.pretrain.flops`).
- **padded FLOPs**: what a forward over the padded (B, W) batch computes (transformers' ``BertModel``: every
  position, attention W × W). A batch is padded to its longest text; WordNet's glosses are short, so most of
  the positions are padding. :mod:`models.pretrain.unpadded` runs the linear layers on the real tokens only.

Peak: ``torch.mm`` on 2048³ fp32, and on the run's own matrix shapes (forward and both backward products of each
linear layer, at the mean real-token and masked counts). Each repeat measures the peak, then runs the lab's loop
(``models.pretrain.train``, whose tokens/s counts the real tokens) and the loop as it was before (transformers'
padded forward, AdamW's per-parameter loop, batches through ``tokenizer.pad``) in a rotating order, so that all
see the same load on a shared machine: medians over repeats, ratios taken within a repeat. ``--candidates`` adds
each change alone and the other things tried; ``--compile`` prices ``torch.compile`` (its compile seconds against
a classroom run).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from models.pretrain.config import VOCAB_SIZES, TrainConfig  # no torch: --help stays quick

DEFAULT = TrainConfig(objective="mlm", layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, vocab="wordnet-8k",
                      steps=120, run="bench-mfu")


@dataclass(frozen=True)
class StepFlops:
    """One training step's counts: real tokens, padded positions (B·W), masked positions, and FLOPs."""

    tokens: int
    positions: int
    masked: int
    model: float  # FLOPs on the real tokens (the MFU numerator)
    padded: float  # FLOPs of a forward over the padded batch


def step_flops(config: TrainConfig, input_ids: Any, attention_mask: Any, labels: Any) -> StepFlops:
    """FLOPs of one masked-LM training step on a padded batch (B, W): on its real tokens (the lab's convention,
    :func:`models.pretrain.flops.step_flops`) and over the padded positions."""
    from models.pretrain import flops

    lengths = [int(n) for n in attention_mask.sum(dim=1)]
    batch, width = attention_mask.shape
    masked = int((labels != -100).sum())
    model = flops.step_flops(config, sum(lengths), sum(n * n for n in lengths), masked, batch)
    padded = flops.step_flops(config, batch * width, batch * width * width, masked, batch)
    return StepFlops(sum(lengths), batch * width, masked, model, padded)


def lab_shapes(config: TrainConfig, rows: int, masked: int) -> list[tuple[int, int, int]]:
    """(m, k, n) of each matrix product of one step's linear layers: forward, input gradient, weight gradient."""
    h, f, vocab = config.hidden, config.ffn, VOCAB_SIZES[config.vocab]
    layers = [(rows, h, h)] * 4 + [(rows, h, f), (rows, f, h)]
    layers = layers * config.layers + [(masked, h, h), (masked, h, vocab)]
    return [s for m, k, n in layers for s in ((m, k, n), (m, n, k), (n, m, k))]


def matmul_gflops(shapes: list[tuple[int, int, int]], min_seconds: float = 0.4) -> float:
    """fp32 ``torch.mm`` GFLOP/s over ``shapes`` (their total FLOPs / total time), repeated for ``min_seconds``."""
    import torch

    pairs = [(torch.randn(m, k), torch.randn(k, n)) for m, k, n in shapes]
    flops = sum(2 * m * k * n for m, k, n in shapes)
    for a, b in pairs:
        torch.mm(a, b)
    rounds, t0 = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - t0) < min_seconds or rounds < 2:
        for a, b in pairs:
            torch.mm(a, b)
        rounds += 1
    return flops * rounds / elapsed / 1e9


def replay_flops(config: TrainConfig) -> list[StepFlops]:
    """Each step's counts for ``config``'s run: its batches drawn again (the same seed gives the same batches)."""
    from models.pretrain import Batches, read_corpus, tokenizer

    batches = Batches(config, read_corpus(config)[0], tokenizer(config.vocab))
    out = []
    for _ in range(config.steps):
        b = batches.sample()
        out.append(step_flops(config, b["input_ids"], b["attention_mask"], b["labels"]))
    return out


@contextlib.contextmanager
def padded_forward() -> Iterator[None]:
    """The loop as it was: transformers' forward over the padded batch."""
    from models.pretrain import unpadded

    with mock.patch.object(unpadded, "supports", lambda bert: False):
        yield


@contextlib.contextmanager
def adamw(**options: Any) -> Iterator[None]:
    """The loop with ``torch.optim.AdamW(**options)`` (fused, foreach)."""
    import torch

    from models.pretrain import loop
    from models.training import optimizer_and_schedule

    real = torch.optim.AdamW

    def make(params: Any, *args: Any, **kwargs: Any) -> Any:
        with mock.patch.object(torch.optim, "AdamW", lambda p, **kw: real(p, **{**kw, **options})):
            return optimizer_and_schedule(params, *args, **kwargs)

    with mock.patch.object(loop, "optimizer_and_schedule", make):
        yield


@contextlib.contextmanager
def rows_to_the_collator() -> Iterator[None]:
    """Batches prepared as before (dynamic masking): ``{"input_ids": ...}`` rows to the collator, which pads them
    with ``tokenizer.pad``, every key of the rows padded besides. The same batches."""
    from models.pretrain import Batches

    def draw(self: Any) -> dict[str, Any]:
        rows = [self.examples[self.rng.randrange(len(self.examples))] for _ in range(self.c.batch)]
        kept = {k: v for k, v in self._pad(rows).items() if k in ("next_sentence_label", "token_type_ids")}
        return {**self.collator([{"input_ids": r["input_ids"]} for r in rows]), **kept}

    with mock.patch.object(Batches, "_global", draw):
        yield


@contextlib.contextmanager
def before() -> Iterator[None]:
    """The loop before this bench's changes: transformers' padded forward, AdamW's per-parameter loop, the batches
    prepared through ``tokenizer.pad``."""
    with padded_forward(), adamw(fused=False), rows_to_the_collator():
        yield


@contextlib.contextmanager
def bernoulli_draws() -> Iterator[None]:
    """The unpadded loop with dropout drawn by ``bernoulli_`` (the same draws, the slower kernel)."""
    from models.pretrain import unpadded

    with mock.patch.object(unpadded, "_uniform_draws_bernoulli", lambda: False):
        yield


@contextlib.contextmanager
def threads(n: int) -> Iterator[None]:
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _tokens_per_second(config: TrainConfig, setting: Callable[[], Any] = contextlib.nullcontext) -> tuple[float, float, list]:
    """(tokens/s, loop seconds, loss curve) of one ``train`` run (timing only: the evaluation after the loop is skipped)."""
    from models import pretrain
    from models.pretrain import loop

    with setting(), mock.patch.object(loop, "evaluate", lambda *a, **k: {}):
        r = pretrain.train(config, save=False)
    return r.tokens_per_second, r.seconds, r.curve


def measure(steps: int = 120, repeats: int = 3, n_threads: int | None = None, candidates: bool = False,
            config: TrainConfig = DEFAULT) -> dict[str, Any]:
    """Peak, the lab's throughput and MFU for ``config`` (the default size), medians of ``repeats`` interleaved runs.

    Keys: ``threads``, ``steps``, ``repeats``; ``peak_gflops`` (2048³) and ``lab_peak_gflops`` (the run's own
    shapes); per step ``tokens``, ``positions`` (B·W), ``masked``, ``model_gflop`` and ``padded_gflop``;
    ``tokens_per_s``, ``model_gflops`` (model FLOP/s / 1e9), ``mfu`` (model FLOP/s / 2048³ peak) and
    ``mfu_lab_shapes``; ``variants``: for ``before`` (the loop before these changes) and, with ``candidates``, each
    change alone and the other things tried: ``tokens_per_s``, ``mfu``, ``ratio`` (its tokens/s / the lab's loop's,
    the median of per-repeat ratios) and ``same_curve`` (within 1e-4).
    """
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    config = replace(config, steps=steps)
    n_threads = n_threads or torch.get_num_threads()
    counts = replay_flops(config)
    per_step = {k: statistics.fmean(getattr(c, k) for c in counts) for k in ("tokens", "positions", "masked")}
    model_flops = sum(c.model for c in counts)
    shapes = lab_shapes(config, round(per_step["tokens"]), round(per_step["masked"]))
    variants: dict[str, Callable[[], Any]] = {"before": before}
    if candidates:
        other = 1 if n_threads > 1 else 2
        variants |= {"padded forward": padded_forward, "bernoulli_ draws": bernoulli_draws, "tokenizer.pad": rows_to_the_collator,
                     "per-parameter AdamW": lambda: adamw(fused=False), "foreach AdamW": lambda: adamw(fused=False, foreach=True),
                     f"{other} thread(s)": lambda: threads(other)}
    runs: dict[str, list[tuple[float, float]]] = {k: [] for k in ("lab", *variants)}
    peak, lab_peak, curves = [], [], {}
    with threads(n_threads):
        _tokens_per_second(replace(config, steps=5))  # imports, first allocations: outside the timings
        for i in range(repeats):
            peak.append(matmul_gflops([(2048, 2048, 2048)]))
            lab_peak.append(matmul_gflops(shapes))
            order = [("lab", contextlib.nullcontext), *variants.items()]
            for name, setting in order[i % len(order):] + order[: i % len(order)]:
                tps, seconds, curves[name] = _tokens_per_second(config, setting)
                runs[name].append((tps, model_flops / seconds / 1e9))
    lab = runs["lab"]
    out: dict[str, Any] = {
        "threads": n_threads, "steps": steps, "repeats": repeats, **per_step,
        "model_gflop": model_flops / steps / 1e9, "padded_gflop": sum(c.padded for c in counts) / steps / 1e9,
        "peak_gflops": statistics.median(peak), "lab_peak_gflops": statistics.median(lab_peak),
        "tokens_per_s": statistics.median(t for t, _ in lab), "model_gflops": statistics.median(g for _, g in lab),
        "mfu": statistics.median(g / p for (_, g), p in zip(lab, peak, strict=True)),
        "mfu_lab_shapes": statistics.median(g / p for (_, g), p in zip(lab, lab_peak, strict=True)),
        "variants": {}}
    for name in variants:
        mine = runs[name]
        out["variants"][name] = {
            "tokens_per_s": statistics.median(t for t, _ in mine),
            "mfu": statistics.median(g / p for (_, g), p in zip(mine, peak, strict=True)),
            "ratio": statistics.median(t / r for (t, _), (r, _) in zip(mine, lab, strict=True)),
            "same_curve": all(abs(a - b) <= 1e-4 * max(1.0, abs(b)) for (_, a), (_, b) in zip(curves[name], curves["lab"], strict=True))}
    return out


def report(m: dict[str, Any]) -> str:
    """``measure``'s result as lines of text."""
    c = DEFAULT
    lines = [
        f"BERT masked LM {c.layers} × {c.hidden} (FFN {c.ffn}), batch {c.batch} × {c.seq_len}, {c.vocab}; "
        f"{m['steps']} steps, {m['threads']} thread(s), medians of {m['repeats']} interleaved repeats",
        f"  per step: {m['tokens']:,.0f} real tokens in {m['positions']:,.0f} padded positions "
        f"({m['tokens'] / m['positions']:.0%}), {m['masked']:,.0f} masked; "
        f"{m['model_gflop']:.2f} GFLOP on the real tokens ({m['padded_gflop']:.2f} over the padded batch)",
        f"  peak fp32 matmul: {m['peak_gflops']:6.1f} GFLOP/s (2048³), {m['lab_peak_gflops']:.1f} at the run's own shapes",
        f"  the lab's loop:   {m['tokens_per_s']:8,.0f} tokens/s  {m['model_gflops']:5.1f} GFLOP/s  "
        f"MFU {m['mfu']:.0%} (of the run's shapes' peak: {m['mfu_lab_shapes']:.0%})"]
    for name, v in m["variants"].items():
        lines.append(f"  {name + ':':17s} {v['tokens_per_s']:8,.0f} tokens/s  MFU {v['mfu']:.0%}  "
                     f"ratio to the lab's loop {v['ratio']:.2f}  same curve: {'yes' if v['same_curve'] else 'NO'}")
    return "\n".join(lines)


def compile_cost(steps: int = 120, n_threads: int | None = None, config: TrainConfig = DEFAULT) -> dict[str, Any]:
    """``torch.compile`` (inductor, dynamic shapes) of the lab's loss, and of transformers' padded forward (the
    loss the loop had before), each against the lab's eager loss on the same batches: seconds of the first three
    compiled steps beyond three eager ones (the compiling; inductor's on-disk cache makes a second process
    faster), forward + backward per step (interleaved, medians), the steps a run needs to win the compile time
    back, and whether the first step's loss is the eager one for the same seed. A failure is reported, not raised.
    """
    import torch
    import transformers

    from models.pretrain import Batches, build_model, loss_of, read_corpus, tokenizer

    transformers.logging.set_verbosity_error()
    tok = tokenizer(config.vocab)
    torch.manual_seed(config.seed)
    model = build_model(config, len(tok), tok).train()
    batches = Batches(config, read_corpus(config)[0], tok)
    data = [batches.sample() for _ in range(max(8, min(steps, 40)))]

    def lab(b: dict[str, Any]) -> Any:
        return loss_of(config, model, b)

    def padded(b: dict[str, Any]) -> Any:
        return model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss

    def step(fn: Callable[[dict[str, Any]], Any], b: dict[str, Any]) -> tuple[float, float]:
        torch.manual_seed(1)
        t0 = time.perf_counter()
        loss = fn(b)
        loss.backward()
        model.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, float(loss.detach())

    out: dict[str, Any] = {}
    with threads(n_threads or torch.get_num_threads()):
        step(lab, data[0])
        eager_first = [step(lab, b) for b in data[:3]]
        for name, fn in (("the lab's loss", lab), ("transformers' padded forward", padded)):
            torch._dynamo.reset()
            compiled = torch.compile(fn, dynamic=True)
            try:
                firsts = [step(compiled, b) for b in data[:3]]
            except Exception as err:  # a missing compiler, an unsupported op: that is the finding
                out[name] = {"error": f"{type(err).__name__}: {str(err)[:200]}"}
                continue
            pairs = [(step(lab, b)[0], step(compiled, b)[0]) for b in data[3:]]
            e, c = statistics.median(p[0] for p in pairs), statistics.median(p[1] for p in pairs)
            compile_s = sum(t for t, _ in firsts) - sum(t for t, _ in eager_first)
            out[name] = {"compile_s": compile_s, "eager_ms": e * 1e3, "compiled_ms": c * 1e3, "speedup": e / c,
                         "break_even_steps": compile_s / (e - c) if e > c else float("inf"),
                         "same_first_loss": abs(firsts[0][1] - eager_first[0][1]) <= 1e-4 * abs(eager_first[0][1])}
    return out


def compile_report(m: dict[str, Any]) -> str:
    lines = ["torch.compile, forward + backward against the lab's eager loss on the same batches:"]
    for name, r in m.items():
        if "error" in r:
            lines.append(f"  {name}: failed ({r['error']})")
            continue
        lines.append(f"  {name}: {r['compile_s']:.0f} s compiling; {r['compiled_ms']:.1f} ms a step against "
                     f"{r['eager_ms']:.1f} ({r['speedup']:.2f}×), won back after {r['break_even_steps']:,.0f} steps; "
                     f"first loss as eager's: {'yes' if r['same_first_loss'] else 'no'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=120)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's, one per core)")
    parser.add_argument("--candidates", action="store_true", help="also each change alone, foreach AdamW, threads")
    parser.add_argument("--compile", action="store_true", help="also torch.compile: compile seconds and step time")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(report(measure(args.steps, args.repeats, args.threads, args.candidates)))
    if args.compile:
        print(compile_report(compile_cost(steps=args.steps, n_threads=args.threads)))


if __name__ == "__main__":
    main()
