"""The lab's verdicts and what a classroom budget buys.

    python bench/verdicts.py presets albert electra [--budget classroom]   # run presets through the real queue
    python bench/verdicts.py estimate                                      # every preset × budget: runs, FLOPs, time
    python bench/verdicts.py pace scaling isoflop --budget gpu [--steps 60] # each run shape timed: a budget's minutes here
    python bench/verdicts.py mfu [--steps 60] [--repeats 3]                # the lab's model FLOP/s against the matmul peak
    python bench/verdicts.py report GROUP                                  # an experiment's verdicts again, from the database
    python bench/verdicts.py coverage [--draws 1000]                       # the intervals' coverage on simulated arms

``coverage`` simulates arms whose seed and test-item noise are known (``tests/helpers/verdicts.py``, the simulator the verdict tests use)
and prints how often the seeds-only t and the two-level interval cover the true effect, and how often a planted
null gives "cannot tell". ``presets`` queues each preset at the budget through :func:`services.lab.experiments.submit` (the same path as the page:
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
from services import lab
from services.lab import claim_entries, experiments
from services.lab.presets import BUDGETS, budget_of
from services.lab.presets.base import BUDGET_NAMES, Tuning

DEFAULT = TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=1200, lr=1e-3)


def run_presets(presets: list[str], budget: str, first_seed: int = 0, worker: int = 0) -> None:
    """``worker``: queue only (``BFE_LAB_CONCURRENCY=0``, as web replicas on a CPU do) and train every run in a
    headless worker process with that many slots (``python -m services.lab worker``), as on a GPU machine."""
    import subprocess
    from dataclasses import replace

    from analysis.results_db import runs
    from analysis.run_status import ACTIVE

    proc = None
    if worker:
        os.environ["BFE_LAB_CONCURRENCY"] = "0"
        proc = subprocess.Popen([sys.executable, "-m", "services.lab", "worker", "--slots", str(worker), "--interval", "1"],
                                cwd=Path(__file__).resolve().parent.parent)
    try:
        for preset in presets:
            group = f"bench-{preset}-{budget}-{int(time.time())}"
            start = time.perf_counter()
            ids = experiments.submit(preset, replace(DEFAULT, seed=first_seed), group, budget)
            while True:
                statuses = [runs.get_run(i)["status"] for i in ids]
                if all(status not in ACTIVE for status in statuses):
                    break
                time.sleep(2)
            wall = time.perf_counter() - start
            experiments.settle(group)  # as the worker does when the last run ends: the verdicts are stored
            print_report(group, f"{len(ids)} runs, seeds {first_seed}–{first_seed + budget_of(preset, budget).seeds - 1}, "
                                f"{wall / 60:.1f} min from the submit" + (f", trained by a headless worker with {worker} slots"
                                                                           if worker else ""))
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(30)


def print_report(group: str, header: str = "") -> None:
    """An experiment's arms, per-seed scores, verdicts (primary and exploratory) and effects over random init."""
    rep = experiments.report(group)
    print(f"\n== {group} ({rep.preset or None}, {rep.budget if rep.runs else None} budget): " + (f"{header}, " if header else "")
          + f"state {rep.state} ==")
    for arm, a in rep.arms.items():
        print(f"  {arm:>16}: {a.runs} runs, {a.flops:.2e} FLOPs, pre-training {a.pretrain_seconds:.0f} s, "
              f"downstream {a.downstream_seconds:.0f} s")
    for c in rep.claims:
        print(f"  [{c.label or None}] {c.claim.statement}")
        for arm, pts in c.detail.get("scores", {}).items():
            print(f"      {arm:>16}: " + ", ".join(f"{v:.3f}" for _, v in pts))
        for name, pts in c.detail.get("controls", {}).items():
            print(f"      {name:>16}: " + ", ".join(f"{v:.3f}" for _, v in pts))
        for arm, t in (c.detail.get("tuning") or {}).items():  # a tuned claim: what its validation seeds saw
            means = sorted(t["validation_loss"].items(), key=lambda kv: Tuning.rate(kv[0]))
            print(f"      {arm:>16}: mean validation loss (seeds 0–{t['seeds'] - 1}) "
                  + ", ".join(f"{Tuning.power(k)} {v:.3f}" for k, v in means) + f"; chosen {Tuning.power(t['chosen'])}")
        print("    → " + (c.sentence or f"no verdict: {c.why_none or None}"))
        v = c.verdict or {}
        if v.get("item_share") is not None:
            print(f"      share of the effect's variance from the shared test items: {v['item_share']:.0%}")
        old_rule = seeds_only(c)
        if old_rule:
            print(f"      seeds-only 95% rule (before the item term and the family correction): {old_rule}")
        for arm, e in c.detail.get("control_effects", {}).items():
            print(f"    over random init, {arm}: {e['effect']:+.3f} [{e['low']:+.3f}, {e['high']:+.3f}] (descriptive)")
    for r in rep.runs:
        if r["message"]:
            print(f"  {r['name']}: {r['message']}")


def seeds_only(entry: experiments.ClaimEntry) -> str:
    """The verdict the rule before the item term gave (a paired t over seeds at 95%, no family correction), so a
    changed label can be told apart from changed data."""
    from analysis import verdicts

    scores, spec = entry.detail.get("scores") or {}, entry.claim
    a, b = dict(scores.get(spec.a, [])), dict(scores.get(spec.b, []))
    if entry.figure == "trend" or len(a) < 2 or len(b) < 2:
        return ""
    common = sorted(set(a) & set(b))
    paired = len(common) == len(a) == len(b)
    sign = -1.0 if entry.measure in claim_entries.LOWER_IS_BETTER else 1.0  # decided on negated losses, as the report
    v = verdicts.verdict([sign * a[k] for k in sorted(a)], [sign * b[k] for k in sorted(b)], spec.op, spec.margin or 0.0,
                         paired=paired)
    return f"{v.label}, {v.effect:+.3f} [{v.low:+.3f}, {v.high:+.3f}]"


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
    for preset in BUDGETS:
        for budget in BUDGETS[preset]:
            n, flops = experiments.planned_flops(preset, DEFAULT, budget)
            b = budget_of(preset, budget)
            print(f"  {preset:>8} {budget:>9}: {n:3d} runs, {flops:.2e} FLOPs, ≈ {flops / flops_per_s / 60:6.1f} min of "
                  f"pre-training" + (" + the downstream suite" if b.downstream else ""))


def shape_pace(presets: list[str], budget: str, steps: int = 40, repeats: int = 3) -> None:
    """Each distinct run shape of the presets' plans at ``budget`` timed for ``steps`` steps with the worker's threads,
    the shapes interleaved ``repeats`` times (a shared, noisy machine: each sees the same load) and the medians kept,
    then every planned run priced at its own shape's pace: its steps × seconds a step + the fixed cost of a run (setup
    and the held-out evaluation, measured with it). :func:`estimate` prices every run at the default size's FLOP/s,
    which is far off for small widths (IsoFLOP's width 16 trains at a fraction of it) and for objectives that cost
    more than their FLOPs (XLNet, the distilled arm); this prices what the worker would run. The downstream suite is
    not included (it needs a saved, trained checkpoint: take it from the preset's committed thorough run). A preset
    whose runs need another run's checkpoint (DistilBERT's student) cannot be timed this way and is refused."""
    import statistics
    from dataclasses import replace

    import torch

    from models.pretrain import train
    from services.lab.claims import apply_budget
    from services.lab.presets import plan_runs
    from services.lab.run_queue import WORKER_THREADS

    torch.set_num_threads(WORKER_THREADS)
    planned = {}
    for preset in presets:
        b = budget_of(preset, budget)
        planned[preset] = plan_runs(preset, apply_budget(DEFAULT, b), f"pace-{preset}", b.seeds, b.widths)
        if any(p.config.teacher for p in planned[preset]):
            raise SystemExit(f"{preset}: a run of it needs another run's checkpoint (a teacher); time it with 'presets'.")

    def key(cfg: TrainConfig) -> TrainConfig:  # what sets a step's cost: not the seed, the name or the rate (a sweep)
        return replace(cfg, steps=steps, seed=0, run="bench-pace", lr=DEFAULT.lr)

    shapes = list(dict.fromkeys(key(p.config) for runs in planned.values() for p in runs))
    timings: dict[TrainConfig, list[tuple[float, float]]] = {s: [] for s in shapes}
    warm = max(1, steps // 4)  # the first steps (allocation, first batches) are left out of the pace
    for _ in range(repeats):
        for shape in shapes:
            marks: dict[int, float] = {}
            start = time.perf_counter()
            r = train(shape, on_progress=lambda n, _loss, t, marks=marks: marks.__setitem__(n, t), save=False)
            wall = time.perf_counter() - start
            per_step = (marks[steps] - marks[warm]) / (steps - warm)
            timings[shape].append((per_step, wall - r.seconds))
    pace = {s: (statistics.median(t[0] for t in ts), statistics.median(t[1] for t in ts)) for s, ts in timings.items()}
    print(f"{len(shapes)} shapes, {steps} steps each ({warm} left out as warm-up), {repeats} interleaved repeats, "
          f"{WORKER_THREADS} thread(s); medians")
    for preset, runs in planned.items():
        total = 0.0
        print(f"  {preset} at {budget}: {len(runs)} runs")
        seen = set()
        for p in runs:
            per_step, fixed = pace[key(p.config)]
            total += p.config.steps * per_step + fixed
            label = (p.arm, p.config.steps)
            if label not in seen:
                seen.add(label)
                print(f"    {p.arm:>16}: {p.config.steps:6,d} steps × {per_step * 1000:6.1f} ms + {fixed:4.1f} s a run")
        print(f"    ≈ {total / 60:.0f} min of training and held-out evaluation, one run at a time"
              + (" (+ the downstream suite per run)" if budget_of(preset, budget).downstream else ""))


def coverage(draws: int) -> None:
    """Coverage of the seeds-only paired t and of the two-level interval on simulated arms, per kind of test set."""
    import numpy as np

    from analysis import verdicts
    from tests.helpers.verdicts import arms

    cases = {"fixed test set, sure items": dict(shared=True, seed_sd=0.005, sure=True, seeds=5),
             "fixed test set": dict(shared=True, seeds=5),
             "fixed test set, lemmas of 4, 3 seeds": dict(shared=True, cluster=4, seeds=3),
             "half of the items shared, lemmas of 2": dict(shared=0.5, cluster=2, seeds=5),
             "items drawn per seed": dict(shared=False, seeds=5)}
    print(f"simulated arms, 300 items per seed, true effect 0.02, {draws} draws per case (planted null: effect 0)")
    for name, case in cases.items():
        rng = np.random.default_rng(11)
        old = new = null = 0
        for _ in range(draws):
            a, b, ia, ib = arms(rng, 0.02, items=300, **case)
            v0, v1 = verdicts.verdict(a, b, ">"), verdicts.verdict(a, b, ">", items_a=ia, items_b=ib)
            old += v0.low <= 0.02 <= v0.high
            new += v1.low <= 0.02 <= v1.high
            a, b, ia, ib = arms(rng, 0.0, items=300, **case)
            null += verdicts.verdict(a, b, ">", items_a=ia, items_b=ib).label == verdicts.CANNOT_TELL
        print(f"  {name:>40}: seeds-only t covers {old / draws:.3f}, two-level {new / draws:.3f}; "
              f"planted null → cannot tell {null / draws:.3f}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["presets", "estimate", "pace", "mfu", "report", "coverage"])
    ap.add_argument("presets", nargs="*", default=["albert", "electra"])
    ap.add_argument("--budget", default="classroom", choices=BUDGET_NAMES)
    ap.add_argument("--worker", type=int, default=0, help="presets: train in a headless worker with this many slots")
    ap.add_argument("--first-seed", type=int, default=0, help="the first seed (a re-run with new seeds starts past the old ones)")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--draws", type=int, default=1000, help="simulated experiments per case (coverage)")
    args = ap.parse_args()
    if args.what == "pace" and args.steps < 8:
        ap.error(f"pace times steps after a quarter of them as warm-up: give --steps 8 or more, not {args.steps}")
    if args.what in ("presets", "pace"):
        lacking = [p for p in args.presets if args.budget not in BUDGETS.get(p, {})]
        if lacking:  # the whole list is checked before the first run: a preset without the budget used to fail hours in
            ap.error(f"no {args.budget!r} budget for: {', '.join(lacking)} (budgets: "
                     + "; ".join(f"{p}: {', '.join(BUDGETS[p]) or 'none'}" if p in BUDGETS else f"{p}: not a preset" for p in lacking) + ")")
    if args.what == "presets":
        run_presets(args.presets, args.budget, args.first_seed, args.worker)
    elif args.what == "report":
        for group in args.presets:
            print_report(group)
    elif args.what == "estimate":
        estimate()
    elif args.what == "pace":
        shape_pace(args.presets, args.budget, args.steps, args.repeats)
    elif args.what == "coverage":
        coverage(args.draws)
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
