"""A class at once: N students using the app at the same moment, over Streamlit's websocket protocol.

    python bench/classroom.py [--sizes 1 10 30] [--replicas 1] [--repeats 1]

Starts the app as the README does (``python -m app.serve``; offline, the bundled model, a fresh
SQLite database; with ``--replicas 2``: two replicas behind nginx sharing one PostgreSQL), waits
for the background warm-up, then for each N opens N sessions (no browser: bench/st_client.py) and
has them all do, in lockstep, what a student does:

    open the Attention page with their own sentence, change the layer, change the head,
    open the calculator, change the GPU, open the results database, filter its tasks.

Every session sends each action at the same moment. Per N it prints p50 and p95 of the time from
sending the rerun to ``script_finished``, errors, sessions that completed every action, and the
server's peak RSS. Targets (2 cores, N = 30): no errors, every session completes, p95 within
1.5 x the physical floor N * t1 / cores (t1 = the N = 1 median of that action), peak RSS within
1.5 x the idle server (warmed up, no session yet) + one loaded model. Traffic goes to 127.0.0.1
only; the script stops itself.

One Python process runs one thread at a time: page scripts are mostly Python, so one server
finishes N light reruns no sooner than N * t1 (one core), twice the two-core floor. Run one
replica per core (``--replicas 2``: nginx in front, see docs/deploy.md) to use them all.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.scaleout import cluster, warm_server  # noqa: E402
from bench.st_client import StreamlitSession  # noqa: E402

NOUNS = ["bank", "bat", "light", "spring", "match", "seal", "crane", "pitcher", "bark", "date"]
PLACES = ["river", "park", "market", "station", "school", "harbour"]
#: The calculator's tab with the GPU and batch (only the open tab is drawn), opened as a link to it opens it.
MEMORY_TAB = "Training memory"
ACTIONS = ["attention", "layer", "head", "calculator", "gpu", "results", "filter"]


def sentence(i: int) -> str:
    """A different sentence per student (their own words, their own forward pass)."""
    return f"Student {i} saw the {NOUNS[i % len(NOUNS)]} near the {PLACES[(i // 10) % len(PLACES)]} on day {i // 60 + 1}."


async def student(s: StreamlitSession, i: int, step: int, first: int = 0) -> tuple[float, bool, list[str]]:
    """Run action ``step`` of student ``i``; (seconds, ok, errors)."""
    action = ACTIONS[step]
    if action == "attention":
        r = await s.run(page="attention", query={"at_text": sentence(first + i)})  # a repeat: new students' words
    elif action == "layer":
        r = await s.run(widgets={"at_layer": 1 + i % 5})
    elif action == "head":
        r = await s.run(widgets={"at_head": 1 + i % 11})
    elif action == "calculator":
        r = await s.run(page="calculator", query={"sz_tab": MEMORY_TAB})  # a link to its Training memory tab
    elif action == "gpu":
        gpus = s.options("sz_gpu")
        r = await s.run(widgets={"sz_gpu": gpus[1 + i % (len(gpus) - 1)]})
    elif action == "results":
        r = await s.run(page="results")
    else:
        tasks = s.options("gl_tasks")
        r = await s.run(widgets={"gl_tasks": tasks[: 2 + i % 4]})
    errors = list(r.errors) + ([] if r.status == "FINISHED_SUCCESSFULLY" else [r.status])
    if action == "layer" and f"at_layer={1 + i % 5}" not in s.query_string:
        errors.append(f"layer change not applied (query {s.query_string!r})")
    return r.seconds, not errors, errors


class RssMonitor:
    """Peak RSS of the server processes (and their children), sampled every 0.2 s."""

    def __init__(self, pids: list[int]) -> None:
        self.procs = [psutil.Process(p) for p in pids]
        self.peak = 0.0
        self._task: asyncio.Task | None = None

    def now(self) -> float:
        total = 0
        for p in self.procs:
            for q in [p, *p.children(recursive=True)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    total += q.memory_info().rss
        return total / 2**20

    async def _loop(self) -> None:
        while True:
            self.peak = max(self.peak, self.now())
            await asyncio.sleep(0.2)

    def __enter__(self) -> RssMonitor:
        self.peak = self.now()
        self._task = asyncio.get_running_loop().create_task(self._loop())
        return self

    def __exit__(self, *exc: object) -> None:
        if self._task:
            self._task.cancel()
        self.peak = max(self.peak, self.now())


async def one_class(url: str, n: int, pids: list[int], first: int = 0) -> dict:
    sessions = [StreamlitSession(url) for _ in range(n)]
    await asyncio.gather(*(s.open() for s in sessions))
    times: dict[str, list[float]] = {a: [] for a in ACTIONS}
    errors: list[str] = []
    complete = [True] * n
    cpu: dict[str, float] = {}
    servers = [psutil.Process(p) for p in pids]

    def server_cpu() -> float:
        return sum(t.user + t.system for t in (p.cpu_times() for p in servers))

    with RssMonitor(pids) as rss:
        for step, action in enumerate(ACTIONS):
            c0 = server_cpu()
            results = await asyncio.gather(*(student(s, i, step, first) for i, s in enumerate(sessions)), return_exceptions=True)
            cpu[action] = server_cpu() - c0
            for i, res in enumerate(results):
                if isinstance(res, BaseException):
                    complete[i] = False
                    errors.append(f"{action}: {type(res).__name__}: {res}")
                    continue
                seconds, ok, errs = res
                times[action].append(seconds)
                if not ok:
                    complete[i] = False
                    errors.extend(f"{action}: {e}" for e in errs)
    await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)
    return {"times": times, "errors": errors, "complete": sum(complete), "peak_rss": rss.peak, "cpu": cpu}


def p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1] if len(values) > 1 else values[0]


def report(results: dict[int, list[dict]], cores: int, idle_rss: float, model_mb: float) -> None:
    """Per N and action: p50 over every run of every repeat, p95 as the median of the repeats' p95s, the floor from
    t1 = the median over repeats of the smallest N's median, and the server's CPU (median over repeats)."""
    smallest = results[min(results)]
    t1 = {a: statistics.median(statistics.median(r["times"][a]) for r in smallest if r["times"][a]) for a in ACTIONS}
    rss_target = 1.5 * idle_rss + model_mb
    repeats = len(smallest)
    print(f"\n{cores} cores; {repeats} repeat(s), each N after the other; t1 = the N = {min(results)} median of each "
          f"action (median over repeats); floor = N * t1 / cores; p95 = the median of the repeats' p95; "
          f"RSS target = 1.5 x idle {idle_rss:.0f} MB + model {model_mb:.0f} MB = {rss_target:.0f} MB")
    print("server CPU: CPU seconds the server spent on the action, all sessions together (per run in brackets)")
    print("p95/serial: p95 against 0.95 * N * the CPU per run, what one core running the N runs one after the other"
          " reaches for its 95th percentile (the page scripts of one process share one GIL); about 1 means the server "
          "wasted nothing, and p95/floor is then 0.95 * cores * (CPU per run / t1)")
    print(f"{'N':>3s} {'action':>11s} {'p50 s':>7s} {'p95 s':>7s} {'floor s':>8s} {'p95/floor':>9s} {'server CPU s':>16s}"
          f" {'p95/serial':>10s}")
    for n, runs in results.items():
        worst = 0.0
        per_repeat = [0.0] * len(runs)
        for a in ACTIONS:
            kept = [r for r in runs if r["times"][a]]
            if not kept:
                print(f"{n:>3d} {a:>11s}   (no completed runs)")
                continue
            floor = n * t1[a] / cores
            high = statistics.median(p95(r["times"][a]) for r in kept)
            cpu = statistics.median(r["cpu"][a] for r in kept)
            worst = max(worst, high / floor)
            for k, r in enumerate(runs):
                if r["times"][a]:
                    per_repeat[k] = max(per_repeat[k], p95(r["times"][a]) / floor)
            every = [t for r in kept for t in r["times"][a]]
            serial = 0.95 * cpu if n > 1 else cpu  # N runs of cpu / N each, one after the other: the 95th percentile
            print(f"{n:>3d} {a:>11s} {statistics.median(every):7.2f} {high:7.2f} {floor:8.2f} {high / floor:9.2f}"
                  f" {cpu:7.2f} ({cpu / n:.3f}) {high / serial if serial else float('nan'):10.2f}")
        errors = [e for r in runs for e in r["errors"]]
        print(f"{n:>3d} {'summary':>11s} worst p95/floor {worst:.2f} (per repeat: "
              f"{', '.join(f'{w:.2f}' for w in per_repeat)}); errors {len(errors)}; sessions complete "
              f"{min(r['complete'] for r in runs)}/{n}; peak RSS {max(r['peak_rss'] for r in runs):.0f} MB "
              f"({max(r['peak_rss'] for r in runs) / rss_target:.2f} x target)")
        for e in errors[:5]:
            print(f"      {e}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 10, 30])
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="the class again, every N each time (the floor's t1 "
                        "and each p95 are the medians over repeats: one N = 1 run is one noisy sample)")
    args = parser.parse_args()
    sizes = sorted(set(args.sizes))
    tmp = Path(tempfile.mkdtemp(prefix="bfe-class-"))
    (tmp / "models").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BFE_MODEL_DIR": str(tmp / "models"),
           "DATABASE_URL": f"sqlite:///{tmp / 'results.db'}"}
    from core import registry

    # one more loaded model: the bundled MiniLM in float32 (the sidebar's model-memory figure)
    model_mb = registry.find(registry.bundled_id()).parameters * 4 / 2**20
    results: dict[int, list[dict]] = {n: [] for n in sizes}
    if args.replicas == 1:
        with warm_server(env, tmp / "server.log") as (url, proc):
            time.sleep(1)
            idle = RssMonitor([proc.pid]).now()  # warmed and at rest: imports and the bundled model loaded
            for rep in range(args.repeats):
                for n in sizes:
                    results[n].append(asyncio.run(one_class(url, n, [proc.pid], first=1000 * rep + n)))
                    print(f"N = {n}: done (repeat {rep + 1})", flush=True)
    else:
        from tests.helpers.postgres import postgres_server

        with postgres_server() as pg, cluster(args.replicas, {**env, "DATABASE_URL": pg}) as c:
            time.sleep(15)  # each replica's warm-up
            idle = RssMonitor([p.pid for p in c.replicas]).now()
            for rep in range(args.repeats):
                for n in sizes:
                    results[n].append(asyncio.run(one_class(c.url, n, [p.pid for p in c.replicas], first=1000 * rep + n)))
                    print(f"N = {n}: done (repeat {rep + 1}), sessions per replica at the end "
                          f"{c.sessions_per_replica()}", flush=True)
        model_mb *= args.replicas
    report(results, os.cpu_count() or 1, idle, model_mb)


if __name__ == "__main__":
    main()
