"""Which parts matter, measured: what head importance costs, whether importance-ordered pruning beats random orders,
and when a lab model's predictions form.

    python bench/interventions.py cost [--repeats 5] [--items 128]       # importance against ablating each head in turn
    python bench/interventions.py verdict [--seeds 3] [--orders 5]       # pruning a fine-tuned MiniLM: the verdict
    python bench/interventions.py lens [--steps 1200]                    # the logit lens over a lab run's training

``cost`` times, interleaved in one process on the bundled MiniLM with a supersense probe as the target: a bare forward
pass over the items (the reference), Michel et al.'s importance (one forward and one backward pass per batch), and
the importance measured by ablation (every head removed in turn, one forward pass per head per batch). It prints the
medians, their ratios, and the rank correlation (Spearman) of the two importances.

``verdict`` fine-tunes the bundled MiniLM on supersense as the Fine-tuning lab does (its defaults, one run per seed),
draws each run's pruning curve on 256 scored test items (its own task's, ranked on 256 others) against random orders,
and decides at 50% of the heads removed whether importance order keeps more accuracy, paired by seed with the shared
test items' noise (lemma clusters) in the interval: :func:`models.interventions.pruning_verdict`.

``lens`` trains the lab's default model (2 layers × 128, 1,200 steps) keeping its log-spaced checkpoints, then reads
the lab's fill-mask probes through the logit lens at every kept step: for each probe, the final model's answer and,
per step, the first layer at which that answer is among the top 5.

Run with HF_HUB_OFFLINE=1; it uses a temporary BFE_MODEL_DIR unless one is set. Outputs: bench/results/interventions-*.txt.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "BFE_MODEL_DIR" not in os.environ:
    _tmp = tempfile.mkdtemp(prefix="bfe-interventions-")
    os.environ["BFE_MODEL_DIR"] = _tmp
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{_tmp}/results.db")

import numpy as np
import torch

from core import registry
from models import interventions


def cost(repeats: int, items: int) -> None:
    from scipy import stats

    target = interventions.make_target(registry.bundled_id(), "probe", task="supersense", items=items)
    chunks = target.chunks(slice(None), 0)
    net = target.lm.model
    layers, heads = interventions.head_shape(net)
    print(f"model {target.lm.model_id}: {layers} layers × {heads} heads; target {target.measure}, {target.items} items, "
          f"{len(chunks)} batches of ≤{interventions.BATCH}; torch threads {torch.get_num_threads()}")

    def forward() -> None:
        target.score(chunks)

    def importance() -> interventions.Importance:
        return interventions.importance_of(target, chunks)

    def ablation() -> np.ndarray:
        base, _ = target.score(chunks)
        out = np.zeros((layers, heads))
        for layer in range(layers):
            for head in range(heads):
                mask = torch.ones(layers, heads)
                mask[layer, head] = 0
                out[layer, head] = target.score(chunks, mask)[0] - base
        return out

    times: dict[str, list[float]] = {"forward": [], "importance": [], "ablation": []}
    grad = ablate = None
    for r in range(repeats):
        for name, fn in (("forward", forward), ("importance", importance), ("ablation", ablation)):
            t = time.perf_counter()
            value = fn()
            times[name].append(time.perf_counter() - t)
            if name == "importance":
                grad = value
            elif name == "ablation":
                ablate = value
        print(f"  repeat {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()), flush=True)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"medians over {repeats} interleaved repeats: forward {med['forward']:.3f} s, importance {med['importance']:.3f} s, "
          f"ablation {med['ablation']:.3f} s")
    print(f"importance / bare forward pass: {med['importance'] / med['forward']:.2f}× "
          f"(one forward + one backward per batch; a backward costs about two forwards)")
    print(f"ablating each head / importance: {med['ablation'] / med['importance']:.1f}× "
          f"({layers * heads + 1} forward passes per batch against one forward and one backward)")
    n = layers * heads
    michel = stats.spearmanr(grad.raw.ravel(), np.abs(ablate).ravel())
    normalised = stats.spearmanr(grad.scores.ravel(), np.abs(ablate).ravel())
    taylor = stats.spearmanr(-grad.gradient.ravel(), ablate.ravel())
    print(f"rank agreement over {n} heads (Spearman ρ):")
    print(f"  Michel's importance (Σ over batches of |∂L_b/∂ξ|) against |loss change when ablated|: {michel.statistic:.3f} "
          f"(p = {michel.pvalue:.2g}); per-layer normalised: {normalised.statistic:.3f}")
    print(f"  first-order estimate −∂L/∂ξ (mean loss, signed) against the loss change when ablated: {taylor.statistic:.3f} "
          f"(p = {taylor.pvalue:.2g}); Pearson r = {np.corrcoef(-grad.gradient.ravel(), ablate.ravel())[0, 1]:.3f}")
    top = max(1, n // 10)
    g_top = set(np.argsort(grad.gradient.ravel())[:top].tolist())  # most negative gradient: removal costs the most
    a_top = set(np.argsort(-ablate.ravel())[:top].tolist())
    print(f"  the {top} heads whose removal costs the most, by −∂L/∂ξ and by ablation, share {len(g_top & a_top)} of {top}")
    print(f"ablation: loss change from {ablate.min():+.4f} to {ablate.max():+.4f} (base loss {target.score(chunks)[0]:.3f}); "
          f"{int((ablate < 0).sum())} of {n} heads lower the loss when removed")


def verdict(seeds: int, orders: int, steps: int) -> None:
    from models.finetune import FineTuneConfig, finetune

    bundled = registry.bundled_id()
    curves = []
    for seed in range(seeds):
        t = time.perf_counter()
        cfg = FineTuneConfig(model=bundled, task="supersense", mode="finetune", seed=seed, run=f"bench-prune-s{seed}")
        run = finetune(cfg)
        print(f"seed {seed}: fine-tuned {run.checkpoint} in {time.perf_counter() - t:.0f} s: test accuracy "
              f"{run.accuracy:.3f} [{run.accuracy_interval[0]:.3f}, {run.accuracy_interval[1]:.3f}] on {run.test_examples} "
              f"items (majority {run.majority_baseline:.3f})", flush=True)
        t = time.perf_counter()
        curve = interventions.pruning_curve(run.checkpoint, steps=steps, seeds=orders, target="classifier", items=interventions.MAX_ITEMS, seed=seed,
                                max_passes=10**6)
        curves.append(curve)
        print(f"  pruning curve in {time.perf_counter() - t:.0f} s ({curve.scored} scored items, {orders} random orders):")
        print("  heads removed  by importance  random (mean, 95% t over orders)")
        for k, a, m, lo, hi in zip(curve.removed, curve.by_importance, curve.random_mean, curve.random_low, curve.random_high,
                                   strict=True):
            print(f"  {k:>4}/{curve.total} ({100 * k / curve.total:4.0f}%)  {a:.3f}         {m:.3f} [{lo:.3f}, {hi:.3f}]")
    v = interventions.pruning_verdict(curves)  # each curve names its scored items and their lemmas
    print(f"\nclaim: {interventions.PRUNING_CLAIM[0]}\nsource: {interventions.PRUNING_CLAIM[1]}")
    print(f"primary measure: supersense accuracy at 50% of the heads removed, importance order − random orders, paired by "
          f"fine-tuning seed ({seeds} seeds × {orders} random orders)")
    print(f"verdict: {v.label}; effect {v.effect:+.3f}, 95% interval [{v.low:+.3f}, {v.high:+.3f}] ({v.method}; "
          f"importance order {v.mean_a:.3f}, random {v.mean_b:.3f}; item share of the variance {v.item_share:.2f})")
    if v.seeds_needed or v.items_needed:
        print(f"to resolve it: about {v.seeds_needed or '—'} seeds, or {v.items_needed or '—'} scored items per seed")
    per_seed = [c.by_importance[c.removed.index(min(c.removed, key=lambda k: abs(k / c.total - 0.5)))] for c in curves]
    print("per seed at 50% removed (importance order): " + ", ".join(f"{a:.3f}" for a in per_seed))


def lens(steps: int) -> None:
    from models.locate import run_steps
    from models.pretrain import TrainConfig, train
    from models.pretrain.config import PROBES

    cfg = TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=steps, lr=1e-3, run="bench-lens")
    t = time.perf_counter()
    r = train(cfg)
    kept = run_steps(r.checkpoint)
    print(f"trained {r.checkpoint} ({cfg.layers} × {cfg.hidden}, {steps} steps) in {time.perf_counter() - t:.0f} s; "
          f"held-out loss {r.evaluation['held_out_loss']:.2f}; kept steps {kept}")
    final = {p: interventions.logit_lens(r.checkpoint, p, 5) for p in PROBES}
    print("\nper probe: the final answer, and at each kept step the first layer (0 = embeddings) where it is in the top 5")
    print("probe".ljust(46) + "answer".ljust(12) + "".join(f"{s:>7}" for s in kept))
    first_step: dict[str, int | None] = {}
    for p in PROBES:
        answer = final[p].answers[0]
        cells = []
        first_step[p] = None
        for s in kept:
            at = interventions.logit_lens(r.checkpoint if s == kept[-1] else f"{r.checkpoint}@{s}", p, 5)
            layer = next((i for i, row in enumerate(at.rows[0]) if answer in [tok for tok, _ in row.top]), None)
            cells.append("—" if layer is None else str(layer))
            if layer is not None and first_step[p] is None:
                first_step[p] = s
        print(p.ljust(46) + answer.ljust(12) + "".join(f"{c:>7}" for c in cells))
    reached = [s for s in first_step.values() if s is not None]
    print(f"\n{len(reached)} of {len(PROBES)} answers reach the top 5 at some layer of a kept checkpoint before or at the "
          f"end; first steps: {sorted(reached)}")
    for p in PROBES:
        rows = final[p].rows[0]
        print(f"final model, '{p}': P(answer) by layer " + ", ".join(f"{row.final_probability:.3f}" for row in rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("cost")
    c.add_argument("--repeats", type=int, default=5)
    c.add_argument("--items", type=int, default=128)
    v = sub.add_parser("verdict")
    v.add_argument("--seeds", type=int, default=3)
    v.add_argument("--orders", type=int, default=5)
    v.add_argument("--steps", type=int, default=10)
    l_ = sub.add_parser("lens")
    l_.add_argument("--steps", type=int, default=1200)
    args = parser.parse_args(argv)
    if args.command == "cost":
        cost(args.repeats, args.items)
    elif args.command == "verdict":
        verdict(args.seeds, args.orders, args.steps)
    else:
        lens(args.steps)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
