"""The lab's verdicts and what a classroom budget buys.

    python bench/verdicts.py presets albert electra [--budget classroom]   # run presets through the real queue
    python bench/verdicts.py estimate                                      # every preset × budget: runs, FLOPs, time
    python bench/verdicts.py mfu [--steps 60] [--repeats 3]                # the lab's model FLOP/s against the matmul peak
    python bench/verdicts.py report GROUP                                  # an experiment's verdicts again, from the database

``presets`` queues each preset at the budget through :func:`services.ablations.submit` (the same path as the page:
worker processes, the downstream suite, the random-init control), waits, and prints its wall time from the submit,
each claim's verdict with its interval, and the effect over random initialisation. ``estimate`` prices every
budget from the calculator's FLOPs at this machine's pace (measured here with a short default-size run).
Run with HF_HUB_OFFLINE=1; it uses a temporary BFE_MODEL_DIR and database unless they are set.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
if "BFE_MODEL_DIR" not in os.environ:
    _tmp = tempfile.mkdtemp(prefix="bfe-verdicts-")
    os.environ["BFE_MODEL_DIR"] = _tmp
    os.environ.setdefault("DATABASE_URL", f"sqlite:///{_tmp}/results.db")

from models.pretrain import TrainConfig
from services import ablations, lab

DEFAULT = TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=1200, lr=1e-3)


def run_presets(presets: list[str], budget: str, first_seed: int = 0) -> None:
    from dataclasses import replace

    from analysis.results_db import runs as R

    for preset in presets:
        group = f"bench-{preset}-{budget}-{int(time.time())}"
        start = time.perf_counter()
        ids = ablations.submit(preset, replace(DEFAULT, seed=first_seed), group, budget)
        while True:
            statuses = [R.get_run(i)["status"] for i in ids]
            if all(s not in ("queued", "running") for s in statuses):
                break
            time.sleep(2)
        wall = time.perf_counter() - start
        ablations.settle(group)  # as the worker does when the last run ends: the verdicts are stored
        print_report(group, f"{len(ids)} runs, seeds {first_seed}–{first_seed + ablations.budget_of(preset, budget).seeds - 1}, "
                            f"{wall / 60:.1f} min from the submit")


def print_report(group: str, header: str = "") -> None:
    """An experiment's arms, per-seed scores, verdicts (primary and exploratory) and effects over random init."""
    rep = ablations.report(group)
    print(f"\n== {group} ({rep.get('preset')}, {rep.get('budget')} budget): " + (f"{header}, " if header else "")
          + f"state {rep['state']} ==")
    for arm, a in rep["arms"].items():
        print(f"  {arm:>16}: {a['runs']} runs, {a['flops']:.2e} FLOPs, pre-training {a['pretrain_seconds']:.0f} s, "
              f"downstream {a['downstream_seconds']:.0f} s")
    for c in rep["claims"]:
        print(f"  [{c.get('label')}] {c['claim']['statement']}")
        for arm, pts in c.get("scores", {}).items():
            print(f"      {arm:>16}: " + ", ".join(f"{v:.3f}" for _, v in pts))
        for name, pts in c.get("controls", {}).items():
            print(f"      {name:>16}: " + ", ".join(f"{v:.3f}" for _, v in pts))
        print("    → " + (c.get("sentence") or f"no verdict: {c.get('why_none')}"))
        for arm, e in c.get("control_effects", {}).items():
            print(f"    over random init, {arm}: {e['effect']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] {e['label']}")
    for r in rep["runs"]:
        if r["message"]:
            print(f"  {r['name']}: {r['message']}")


def pace(steps: int = 40) -> float:
    """Training FLOP/s (the calculator's count) of a short default-size run on this machine."""
    from dataclasses import replace

    from models.pretrain import train

    cfg = replace(DEFAULT, steps=steps, run="bench-pace")
    r = train(cfg, save=False)
    return lab.size(cfg).flops_per_token * r.tokens / r.seconds


def estimate() -> None:
    flops_per_s = pace()
    print(f"pace: {flops_per_s:.3g} FLOP/s (the calculator's count, default size)")
    for preset in ablations.BUDGETS:
        for budget in ("classroom", "thorough"):
            n, flops = ablations.planned_flops(preset, DEFAULT, budget)
            b = ablations.budget_of(preset, budget)
            print(f"  {preset:>8} {budget:>9}: {n:3d} runs, {flops:.2e} FLOPs, ≈ {flops / flops_per_s / 60:6.1f} min of "
                  f"pre-training" + (" + the downstream suite" if b.downstream else ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["presets", "estimate", "mfu", "report"])
    ap.add_argument("presets", nargs="*", default=["albert", "electra"])
    ap.add_argument("--budget", default="classroom", choices=["classroom", "thorough"])
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (a re-run with new seeds starts past the old ones)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    if args.what == "presets":
        run_presets(args.presets, args.budget, args.first_seed)
    elif args.what == "report":
        for group in args.presets:
            print_report(group)
    elif args.what == "estimate":
        estimate()
    else:
        try:
            from bench import mfu
        except ImportError:
            print("bench/mfu.py is not in this checkout.", file=sys.stderr)
            return 2
        mfu.main(["--steps", str(args.steps), "--repeats", str(args.repeats)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
