"""Where the test suite's time goes: a JUnit XML report of a whole run (``pytest --junitxml``), summed per file and
per marker, with its slowest tests, beside the wall time of each ``.ci/run`` step.

    python bench/suite_durations.py JUNIT.xml [--steps STEPS.log] [--top 40] [--title TEXT]

``STEPS.log`` is what ``.ci/run`` printed: its ``step <name>: <seconds> s`` lines are the steps' wall times. Markers
are read from the suite itself (``pytest --collect-only -m slow`` and ``-m machine``), so a test is counted under the
marker it carries today. A test's time is its setup, call and teardown, as JUnit XML records it; under pytest-xdist the
sum over tests is CPU-side work spread over the workers, and the wall time is the ``pytest`` step's.

Output: ``bench/results/suite-durations.txt`` keeps the runs before and after the suite was made to fit the machine;
``--weights tests/durations.json`` refreshes the times the suite's scheduler reads (``tests/helpers/parallel.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def tests_of(junit: Path) -> dict[str, float]:
    """nodeid (``tests/x/test_y.py::test_z[p]``) -> seconds, from a JUnit XML report."""
    out: dict[str, float] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        cls, name = case.get("classname", ""), case.get("name", "")
        # classname is the module's dotted path, with a class appended where the test sits in one
        parts = cls.split(".")
        for cut in range(len(parts), 0, -1):
            path = ROOT / Path(*parts[:cut]).with_suffix(".py")
            if path.is_file():
                nodeid = "/".join(parts[:cut]) + ".py::" + "::".join([*parts[cut:], name])
                break
        else:
            nodeid = f"{cls}::{name}"
        out[nodeid] = out.get(nodeid, 0.0) + float(case.get("time", 0) or 0)
    return out


def marked(marker: str) -> set[str]:
    """The nodeids the suite marks with ``marker`` today (xdist's group suffix dropped)."""
    import importlib.util

    workers = ["-n", "0"] if importlib.util.find_spec("xdist") else []
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", *workers, "-m", marker],
                          cwd=ROOT, capture_output=True, text=True)
    return {line.split("@")[0] for line in proc.stdout.splitlines() if "::" in line}


def steps_of(log: Path) -> list[tuple[str, float]]:
    return [(m[1], float(m[2])) for m in re.finditer(r"^step (\S+): ([\d.]+) s", log.read_text(), re.M)]


def report(junit: Path, steps: Path | None, top: int, title: str) -> str:
    times = tests_of(junit)
    slow, machine = marked("slow"), marked("machine")
    lines = [f"# {title}" if title else "#", f"tests: {len(times)}, sum of their times: {sum(times.values()):.0f} s", ""]
    if steps:
        lines += ["## .ci/run steps (wall time)"]
        lines += [f"{name:>10}: {sec:7.0f} s ({sec / 60:.1f} min)" for name, sec in steps_of(steps)]
        lines.append("")
    per_file: dict[str, list[float]] = defaultdict(list)
    for nodeid, sec in times.items():
        per_file[nodeid.split("::")[0]].append(sec)
    lines += ["## per file (sum of test times)", f"{'seconds':>8} {'tests':>6}  file"]
    for path, secs in sorted(per_file.items(), key=lambda kv: -sum(kv[1])):
        lines.append(f"{sum(secs):8.0f} {len(secs):6d}  {path}")
    lines += ["", "## per marker (sum of test times)", f"{'seconds':>8} {'tests':>6}  marker"]
    groups = {"slow": [s for n, s in times.items() if n in slow], "machine": [s for n, s in times.items() if n in machine],
              "not slow": [s for n, s in times.items() if n not in slow]}
    for name, secs in groups.items():
        lines.append(f"{sum(secs):8.0f} {len(secs):6d}  {name}")
    lines += ["", f"## the {top} slowest tests", f"{'seconds':>8}  test"]
    lines += [f"{sec:8.1f}  {nodeid}" for nodeid, sec in sorted(times.items(), key=lambda kv: -kv[1])[:top]]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("junit", type=Path)
    ap.add_argument("--steps", type=Path, help="what .ci/run printed (its 'step <name>: <s> s' lines)")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--title", default="")
    ap.add_argument("--weights", type=Path, help="also write the tests of 1 s or more, with their seconds, to this JSON "
                                                  "file (tests/durations.json: conftest.py hands out the longest first)")
    args = ap.parse_args()
    print(report(args.junit, args.steps, args.top, args.title), end="")
    if args.weights:
        times = {n: round(s) for n, s in sorted(tests_of(args.junit).items(), key=lambda kv: -kv[1]) if s >= 1}
        args.weights.write_text(json.dumps(times, indent=0) + "\n")


if __name__ == "__main__":
    main()
