"""How long a classroom-size teacher must train before it scores measurably above its random initialisation on the
classroom downstream suite: the question behind issue 54's suggestion of a DistilBERT teacher "trained once and reused
by every student run, shipped with the project if it is small".

    python bench/distil_teacher.py [--steps 12000] [--seeds 4]

One masked LM of the lab's default size (bench/verdicts.py's DEFAULT: 2 layers of 128, the teacher of DistilBERT's
classroom runs) trains for ``--steps`` steps of 64 sequences, keeping its log-spaced checkpoints
(``trained/<run>@<step>``). Each kept checkpoint from 300 steps on, and the final one, is then fine-tuned on the
classroom suite (:data:`services.lab.claims.CLASSROOM_SUITE`: supersense, 2,000 examples, 3 epochs) with ``--seeds``
fine-tuning seeds, beside the same architecture from random initialisation with the same seeds: one teacher, several
fine-tunes, as a shipped teacher would be used. Printed: each checkpoint's accuracy per seed and its effect over random
initialisation with the lab's descriptive interval (:func:`analysis.verdicts.effect_interval`, paired over seeds).
An intermediate checkpoint is mid-schedule (its rate not yet decayed), so it understates a run of that length.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("BFE_MODEL_DIR", tempfile.mkdtemp(prefix="bfe-teacher-"))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12_000)
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--from-step", type=int, default=300, help="the first kept checkpoint evaluated")
    args = ap.parse_args()

    import torch

    from analysis.verdicts import effect_interval
    from bench.verdicts import DEFAULT
    from models.finetune import downstream
    from models.locate import run_steps
    from models.pretrain import train
    from services.lab.claims import CLASSROOM_SUITE
    from services.lab.run_queue import WORKER_THREADS

    torch.set_num_threads(WORKER_THREADS)
    cfg = replace(DEFAULT, steps=args.steps, batch=64, run="teacher-long")
    start = time.perf_counter()
    result = train(cfg)
    print(f"teacher: {cfg.layers} layers of {cfg.hidden}, {cfg.steps:,} steps of {cfg.batch} × {cfg.seq_len} tokens, "
          f"lr {cfg.lr:g}, {result.seconds / 60:.1f} min of training ({WORKER_THREADS} thread)", flush=True)
    kept = [s for s in run_steps(result.checkpoint) if s >= args.from_step]
    random_acc: dict[int, float] = {}
    for step in kept:
        mid = result.checkpoint if step == cfg.steps else f"{result.checkpoint}@{step}"
        acc = {}
        t0 = time.perf_counter()
        for seed in range(args.seeds):
            row = downstream(mid, CLASSROOM_SUITE, seed, control=seed not in random_acc)["supersense"]
            acc[seed] = row["accuracy"]
            random_acc.setdefault(seed, row.get("random_accuracy"))
        e = effect_interval([acc[s] for s in sorted(acc)], [random_acc[s] for s in sorted(acc)], paired=True)
        print(f"  step {step:6,d}: supersense " + ", ".join(f"{acc[s]:.3f}" for s in sorted(acc))
              + f"; over random init {e['effect']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] "
              f"({time.perf_counter() - t0:.0f} s of fine-tunes)", flush=True)
    print("  random init: " + ", ".join(f"{random_acc[s]:.3f}" for s in sorted(random_acc)))
    print(f"{(time.perf_counter() - start) / 60:.1f} min in all")
    return 0


if __name__ == "__main__":
    sys.exit(main())
