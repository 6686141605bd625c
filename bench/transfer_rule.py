"""The μTransfer rule on planted curves and on the GPU budget's grid, old rule beside new.

    python bench/transfer_rule.py [--draws 1000]

Planted curves (tests/analysis/test_transfer_rule.py's: 6 rates a factor 2 apart, widths 32 and 256, 2 seeds, a run's
loss ±0.03 nats about a parabola of 0.15 nats per step²): how often each rule says each label for flat curves, flat
curves at the token counts, a true 3-step SP shift with μP still, and both parametrisations moving. Then the GPU
budget's grid (named thorough when it ran, before the hour-sized thorough budget) of
``bench/results/lab-thorough-h100-2026-11-28.json`` (36 runs) decided by both rules. The old rule is the one of commit
77a2ee0 (a bare argmin per seed), loaded from git.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types
from collections import Counter
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.verdicts.transfer import transfer_verdict  # noqa: E402
from services.lab.presets.mutransfer import gains, points  # noqa: E402
from tests.helpers.verdicts import planted, shifted  # noqa: E402


def old_rule():
    source = subprocess.run(["git", "show", "77a2ee0:analysis/verdicts/transfer.py"], cwd=ROOT, capture_output=True,
                            text=True, check=True).stdout
    module = types.ModuleType("old_transfer")
    sys.modules["old_transfer"] = module  # dataclasses look their module up
    exec(compile(source, "old_transfer.py", "exec"), module.__dict__)
    return module.transfer_verdict


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--draws", type=int, default=1000)
    args = ap.parse_args()
    old = old_rule()
    cases = {"flat curves (learnt, no optimum)": dict(curvature=0.0),
             "flat curves at the token counts": dict(curvature=0.0, gain=0.0),
             "true 3-step SP shift, μP still": {},
             "true 3-step SP shift, noise 0.05": dict(noise=0.05)}
    print(f"planted curves, {args.draws} draws each: label counts (old rule | new rule)")
    for name, kw in {**cases, "both move 3 steps": None}.items():
        rng = np.random.default_rng(0)
        o, n = Counter(), Counter()
        for _ in range(args.draws):
            if kw is None:
                pts, g = planted(rng, {("mup", 32): 3.3, ("mup", 256): 0.3, ("sp", 32): 3.3, ("sp", 256): 0.3})
            else:
                pts, g = planted(rng, shifted(), **kw)
            o[old(pts).label] += 1
            n[transfer_verdict(pts, g).label] += 1
        print(f"  {name:38s} old {dict(o)} | new {dict(n)}")
    d = json.loads((ROOT / "bench/results/lab-thorough-h100-2026-11-28.json").read_text())
    runs = [dict(r, replicate=r["config"]["replicate"]) for r in d["presets"]["mutransfer"] if r["status"] == "finished"]
    print(f"\nGPU budget grid ({len(runs)} runs; {d.get('note', '')}):")
    print("  old rule:", old(points(runs)).sentence)
    print("  new rule:", transfer_verdict(points(runs), gains(runs)).sentence)


if __name__ == "__main__":
    main()
