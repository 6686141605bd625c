"""Soak: an hour of class. Does the app stay flat while a class uses it for a long time?

    python bench/soak.py [--minutes 20] [--students 30] [--replicas 1] [--window 5]

Starts the app as the README does (``python -m app.serve``: offline, the bundled model, a fresh SQLite database;
with ``--replicas 2``: two replicas behind nginx sharing one PostgreSQL, see bench/scaleout.py), waits for the
warm-up, then for ``--minutes`` keeps ``--students`` sessions (bench/st_client.py, no browser) acting in a loop,
each at its own pace (a random pause of 1–4 s between actions, the same seed every run):

    the classroom bench's actions (Attention with their own sentence, layer, head, calculator, GPU, results,
    filter), then open the presentation pack of the latest saved link;

while beside them a pre-training lab run (a tiny model, a few hundred steps) is queued every ``--lab-every``
seconds (150: two in every 5-minute window, so each window carries the same training load) for the server's
supervisor to run, and a presentation pack is saved every minute (its link is what the students open).

Every 10 s it samples the servers (each replica with its children: the model process; the lab workers, whose
memory comes and goes with each run, are counted apart): RSS, open file descriptors, threads, child processes,
database connections (PostgreSQL: ``pg_stat_activity``; SQLite: descriptors open on the database files), and
the size of ``BFE_MODEL_DIR`` and of the database.

Per window of ``--window`` minutes it prints p50/p95 of each action, errors, and the samples' last values, then
the targets: 0 errors; RSS in the last window ≤ 1.1 × the second window; descriptors, threads and connections
flat (last window ≤ second + a small slack); p95 of each action in the last window ≤ 1.2 × the second. The first
window is the warm-up of caches and indexes and is not a reference. Beside the targets (not targets themselves) it
prints what tells growth from load: the share of each window's samples in which a lab run was training (on 2 cores a
run takes a core from the servers), each action's p95 over the moments when none was, and the descriptors' window
means. Traffic goes to 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import contextlib
import os
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.classroom import ACTIONS, p95, student  # noqa: E402
from bench.scaleout import cluster, warm_server  # noqa: E402
from bench.st_client import StreamlitSession  # noqa: E402

SAMPLE_S = 10.0
#: Growth allowed between the second and the last window before a resource is called "growing".
SLACK = {"fds": 8, "threads": 4, "children": 1, "connections": 2}


@dataclass
class Log:
    """What happened, stamped with seconds since the start."""

    t0: float = field(default_factory=time.monotonic)
    actions: list[tuple[float, str, float, bool]] = field(default_factory=list)  # (t, action, seconds, ok)
    errors: list[tuple[float, str]] = field(default_factory=list)
    samples: list[tuple[float, dict[str, float]]] = field(default_factory=list)
    packs: list[str] = field(default_factory=list)
    lab: list[tuple[float, str]] = field(default_factory=list)  # (t, run name or error)
    lab_states: dict[str, int] = field(default_factory=dict)  # the queued runs' states at the end

    def now(self) -> float:
        return time.monotonic() - self.t0


def folder_mb(path: Path) -> float:
    total = 0
    for p in path.rglob("*"):
        with contextlib.suppress(OSError):
            if p.is_file():
                total += p.stat().st_size
    return total / 2**20


def sample(pids: list[int], model_dir: Path, db_files: list[Path], pg_url: str | None) -> dict[str, float]:
    """The servers' resources now: each server with its descendants (the model process), lab workers apart."""
    rss = worker_rss = workers = fds = threads = children = sqlite_conns = 0
    names = {str(f) for f in db_files}
    per_replica: list[int] = []  # descriptors of each replica with its model process: which one grows
    for pid in pids:
        before = fds
        with contextlib.suppress(psutil.NoSuchProcess):
            top = psutil.Process(pid)
            kids = top.children(recursive=True)
            for p in [top, *kids]:
                with contextlib.suppress(psutil.NoSuchProcess, psutil.AccessDenied):
                    if "services.worker" in " ".join(p.cmdline()):  # a lab run: its memory comes and goes with the run
                        workers += 1
                        worker_rss += p.memory_info().rss
                        continue
                    children += p.pid != top.pid
                    rss += p.memory_info().rss
                    fds += p.num_fds()
                    threads += p.num_threads()
                    sqlite_conns += sum(1 for f in p.open_files() if f.path in names)
        per_replica.append(fds - before)
    connections = float(sqlite_conns)
    db_mb = sum(f.stat().st_size for f in db_files if f.exists()) / 2**20
    if pg_url:
        import sqlalchemy as sa

        engine = sa.create_engine(pg_url, poolclass=sa.pool.NullPool)
        with engine.connect() as c:
            connections = float(c.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                                                  "AND pid <> pg_backend_pid()")).scalar() or 0)
            db_mb = float(c.execute(sa.text("SELECT pg_database_size(current_database())")).scalar() or 0) / 2**20
        engine.dispose()
    return {"rss_mb": rss / 2**20, "workers": workers, "worker_rss_mb": worker_rss / 2**20, "fds": fds, "threads": threads,
            "children": children, "connections": connections,
            "model_dir_mb": folder_mb(model_dir), "db_mb": db_mb, "fds_by": "+".join(map(str, per_replica))}


async def one_student(url: str, i: int, log: Log, until: float) -> None:
    rng = random.Random(i)
    await asyncio.sleep(rng.uniform(0, 5))  # the class does not click in lockstep
    while log.now() < until:
        s = StreamlitSession(url)
        try:
            await s.open()
            for step, action in enumerate(ACTIONS):
                if log.now() >= until:
                    break
                seconds, ok, errs = await student(s, i, step)
                log.actions.append((log.now(), action, seconds, ok))
                log.errors.extend((log.now(), f"{action}: {e}") for e in errs)
                await asyncio.sleep(rng.uniform(1, 4))
            if log.packs and log.now() < until:
                r = await s.run(page="pack", query={"saved": log.packs[-1]})
                ok = r.status == "FINISHED_SUCCESSFULLY" and not r.errors
                log.actions.append((log.now(), "pack", r.seconds, ok))
                log.errors.extend((log.now(), f"pack: {e}") for e in r.errors)
                await asyncio.sleep(rng.uniform(1, 4))
        except Exception as err:  # a dropped session is an error of the soak, and the student starts again
            log.errors.append((log.now(), f"session: {type(err).__name__}: {err}"))
            await asyncio.sleep(1)
        finally:
            with contextlib.suppress(Exception):
                await s.close()


def save_pack(n: int) -> str:
    """One pack like a teacher's: a chart and a table (the server's database, through the library)."""
    import plotly.graph_objects as go

    from analysis import results_db as db
    from analysis.export import PackItem

    fig = go.Figure(go.Bar(x=["BERT", "RoBERTa", "ALBERT"], y=[84.6, 90.2, 89.4 + n % 3]))
    items = [PackItem(f"MNLI, minute {n}", "Soak", ("Devlin et al. 2019, Table 1",), figure=fig.to_json()),
             PackItem("A table", table=({"model": "BERT-base", "MNLI": 84.6},))]
    return db.save_pack(items, f"Soak pack {n}", saver=f"soak-teacher-{n % 3}")


def queue_lab_run(n: int) -> str:
    """A tiny pre-training run for the servers' supervisor to claim (start=False: the bench spawns nothing)."""
    from models.pretrain.config import TrainConfig
    from services import lab

    cfg = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=300, lr=3e-3, corpus_lines=200)
    name = f"soak-{os.getpid()}-{n}"
    lab.submit("single", cfg, name, start=False)
    return name


async def side_jobs(log: Log, until: float, lab_every: float, pack_every: float, pids: list[int], model_dir: Path,
                    db_files: list[Path], pg_url: str | None) -> None:
    next_sample = next_pack = next_lab = 0.0
    packs = queued = 0
    while log.now() < until:
        t = log.now()
        if t >= next_sample:
            log.samples.append((t, await asyncio.to_thread(sample, pids, model_dir, db_files, pg_url)))
            next_sample = t + SAMPLE_S
        if t >= next_pack:
            try:
                log.packs.append(await asyncio.to_thread(save_pack, packs))
            except Exception as err:
                log.errors.append((t, f"save pack: {type(err).__name__}: {err}"))
            packs, next_pack = packs + 1, t + pack_every
        if t >= next_lab:
            try:
                log.lab.append((t, await asyncio.to_thread(queue_lab_run, queued)))
            except Exception as err:
                log.errors.append((t, f"queue lab run: {type(err).__name__}: {err}"))
            queued, next_lab = queued + 1, t + lab_every
        await asyncio.sleep(0.5)


async def soak(url: str, students: int, minutes: float, lab_every: float, pids: list[int], model_dir: Path,
               db_files: list[Path], pg_url: str | None) -> Log:
    log = Log()
    until = minutes * 60
    await asyncio.gather(side_jobs(log, until, lab_every, 60.0, pids, model_dir, db_files, pg_url),
                         *(one_student(url, i, log, until) for i in range(students)))
    log.samples.append((log.now(), await asyncio.to_thread(sample, pids, model_dir, db_files, pg_url)))
    log.lab_states = await asyncio.to_thread(lab_outcome)  # while the database is still up
    return log


def lab_outcome() -> dict[str, int]:
    from analysis.results_db import runs

    frame = runs.list_runs()
    frame = frame[frame["name"].str.startswith("soak-")]
    return {str(k): int(v) for k, v in frame["status"].value_counts().items()}


def training_at(log: Log, t: float) -> bool:
    """Whether a lab worker was running at the last sample before ``t`` (or the first sample, before any)."""
    if not log.samples:
        return False
    i = bisect.bisect_right(log.samples, t, key=lambda ts: ts[0])  # samples are appended in time order
    return bool(log.samples[max(i - 1, 0)][1]["workers"])


def report(log: Log, window_min: float) -> bool:
    """Per-window table and the targets; True when every target is met."""
    w = window_min * 60
    n_windows = max(1, int(log.samples[-1][0] // w))  # whole windows only: a short tail says little
    names = [*ACTIONS, "pack"]
    print(f"\nper window of {window_min:g} min: p50 / p95 seconds of each action (from sending the rerun to the page "
          f"finished), errors, and the servers' resources at the window's last sample")
    per: list[dict] = []
    for k in range(n_windows):
        lo, hi = k * w, (k + 1) * w
        acts = [a for a in log.actions if lo <= a[0] < hi]
        samples = [s for t, s in log.samples if lo <= t < hi] or [log.samples[-1][1]]
        idle = [a for a in acts if not training_at(log, a[0])]
        row = {"times": {a: [x[2] for x in acts if x[1] == a] for a in names},
               "idle_times": {a: [x[2] for x in idle if x[1] == a] for a in names},
               "errors": sum(1 for t, _ in log.errors if lo <= t < hi), "last": samples[-1],
               "rss_mean": statistics.fmean(s["rss_mb"] for s in samples),
               "fds_mean": statistics.fmean(s["fds"] for s in samples),
               "busy": sum(1 for s in samples if s["workers"]) / len(samples)}
        per.append(row)
        cells = "  ".join(f"{a} {statistics.median(v):.2f}/{p95(v):.2f}" if v else f"{a} -" for a, v in row["times"].items())
        idle_cells = "  ".join(f"{a} {p95(v):.2f}" if len(v) >= 5 else f"{a} -" for a, v in row["idle_times"].items())
        s = row["last"]
        print(f"[{lo / 60:4.1f}-{hi / 60:4.1f} min] {len(acts):5d} actions, {row['errors']} errors | RSS {s['rss_mb']:.0f} MB "
              f"(mean {row['rss_mean']:.0f}; lab workers {s['workers']:.0f}, {s['worker_rss_mb']:.0f} MB), fds {s['fds']:.0f} ({s['fds_by']}), "
              f"threads {s['threads']:.0f}, children {s['children']:.0f}, "
              f"db connections {s['connections']:.0f}, models {s['model_dir_mb']:.1f} MB, db {s['db_mb']:.1f} MB\n      {cells}\n"
              f"      a lab run training in {row['busy']:.0%} of the samples; fds mean {row['fds_mean']:.0f}; "
              f"p95 while no lab run trained: {idle_cells}")
    for t, e in log.errors[:10]:
        print(f"  error at {t / 60:.1f} min: {e[:300]}")
    print(f"lab runs queued: {len(log.lab)}; their states at the end: {log.lab_states}; packs saved: {len(log.packs)}")
    if len(per) < 3:
        print("targets: need at least three windows (the first is warm-up); run longer")
        return False
    second, last = per[1], per[-1]
    checks = [("0 errors", sum(r["errors"] for r in per) == 0, f"{sum(r['errors'] for r in per)}"),
              ("RSS last ≤ 1.1 × second (window means)", last["rss_mean"] <= 1.1 * second["rss_mean"],
               f"{last['rss_mean']:.0f} / {second['rss_mean']:.0f} MB = {last['rss_mean'] / second['rss_mean']:.2f}")]
    for key, slack in SLACK.items():
        a, b = second["last"][key], last["last"][key]
        checks.append((f"{key} flat (last ≤ second + {slack})", b <= a + slack, f"{a:.0f} → {b:.0f}"))
    for a in names:
        v2, vl = second["times"][a], last["times"][a]
        if len(v2) >= 5 and len(vl) >= 5:
            checks.append((f"p95 {a} last ≤ 1.2 × second", p95(vl) <= 1.2 * p95(v2), f"{p95(vl):.2f} / {p95(v2):.2f} s = "
                                                                                  f"{p95(vl) / p95(v2):.2f}"))
    # Not targets: what tells growth from load. On 2 cores a lab run takes a core from the servers, so a window's
    # p95 follows how much of it a run was training; the same action's p95 while no run trained, and the window
    # means of the descriptors (a sample falls on whichever sockets are open at that second), are compared too.
    print("\nwithout the lab's load (not targets; to tell growth from load):")
    print(f"  lab run training: {second['busy']:.0%} of the second window's samples, {last['busy']:.0%} of the last's; "
          f"fds window means {second['fds_mean']:.0f} → {last['fds_mean']:.0f}")
    for a in names:
        v2, vl = second["idle_times"][a], last["idle_times"][a]
        if len(v2) >= 5 and len(vl) >= 5:
            print(f"  p95 {a} while no lab run trained, last / second: {p95(vl):.2f} / {p95(v2):.2f} s = {p95(vl) / p95(v2):.2f}")
    print("\ntargets:")
    for name, ok, detail in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
    return all(ok for _, ok, _ in checks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=20)
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--window", type=float, default=5, help="minutes per reported window")
    parser.add_argument("--lab-every", type=float, default=150,
                        help="seconds between queued lab runs; keep it a divisor of the window, so every window trains "
                             "as many runs (at 120 s some 5-minute windows had 3 runs and others 2, and their p95 "
                             "differed by that, not by growth)")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bfe-soak-"))
    model_dir = tmp / "models"
    model_dir.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BFE_MODEL_DIR": str(model_dir), "DATABASE_URL": f"sqlite:///{tmp / 'results.db'}"}
    os.environ.update(BFE_MODEL_DIR=env["BFE_MODEL_DIR"], HF_HUB_OFFLINE="1")
    print(f"soak: {args.students} students, {args.minutes:g} min, {args.replicas} replica(s); lab run every "
          f"{args.lab_every:g} s, a pack every 60 s; files under {tmp}", flush=True)
    if args.replicas == 1:
        os.environ["DATABASE_URL"] = env["DATABASE_URL"]
        with warm_server(env, tmp / "server.log", stop_s=30) as (url, proc):
            db_files = [tmp / "results.db", tmp / "results.db-wal", tmp / "results.db-shm"]
            log = asyncio.run(soak(url, args.students, args.minutes, args.lab_every, [proc.pid], model_dir, db_files, None))
    else:
        from tests.helpers.postgres import postgres_server

        with postgres_server() as pg, cluster(args.replicas, {**env, "DATABASE_URL": pg}) as c:
            os.environ["DATABASE_URL"] = pg
            time.sleep(15)  # each replica's warm-up
            log = asyncio.run(soak(c.url, args.students, args.minutes, args.lab_every, [p.pid for p in c.replicas],
                                   model_dir, [], pg))
    ok = report(log, args.window)
    print("\nsoak:", "every target met" if ok else "a target missed (see above)")


if __name__ == "__main__":
    main()
