"""The labs' queue across replicas: one queue in the database, claimed once by any replica with a free slot; a
running run's lease, renewed by its worker, taken away when it goes stale (a killed replica, a hung worker).

"Replicas" here are processes with their own ``BFE_LAB_HOST`` and model folder sharing one database, as two machines
behind nginx would (tests/deploy/test_scaleout.py starts whole servers behind nginx; this file tests the queue itself).
"""

from __future__ import annotations

import datetime as dt
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path

import pytest

from models.pretrain import TrainConfig
from tests.helpers import ROOT
from tests.helpers.postgres import fresh_pg
from tests.helpers.servers import wait_for

#: The lease of the tests that kill or stop a worker: longer than a worker needs between two lease renewals on a loaded
#: 2-core machine (it renews as it starts, after importing torch, then at each progress write; importing torch alone
#: takes 3.4 s idle; CI runs saw a 6 s and then, on a machine twice as slow, a 15 s lease expire before a fresh
#: worker's first write, when it renewed only at its first step), short enough to wait for.
LEASE_S = 20
TINY = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)

CLAIMER = """
    import sys, time
    from analysis.results_db import runs
    start = float(sys.argv[1])
    time.sleep(max(0.0, start - time.time()))  # every process claims at the same moment
    print(" ".join(str(runs.claim_next(100)) for _ in range(5)), flush=True)
"""

REPLICA = """
    import time
    from services import lab
    while True:  # a replica's lab supervisor, every second
        lab.dispatch()
        time.sleep(1)
"""


def _env(url: str, host: str, model_dir: Path, **extra: str) -> dict[str, str]:
    return {**os.environ, "DATABASE_URL": url, "BFE_LAB_HOST": host, "BFE_MODEL_DIR": str(model_dir), **extra}


def _queue(n: int, prefix: str) -> list[int]:
    from analysis.results_db import runs

    return [runs.create_run(f"{prefix}-{i}", "mlm", {"steps": 1}) for i in range(n)]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.slow), "sqlite"])
def test_three_replicas_claiming_five_each_at_once_take_every_run_exactly_once(backend: str, tmp_path: Path,
                                                                               monkeypatch, request) -> None:

    url = fresh_pg(request.getfixturevalue("pg_url")) if backend == "postgres" else f"sqlite:///{tmp_path / 'q.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    queued = _queue(15, "claim")
    start = f"{time.time() + 4:.3f}"
    procs = [subprocess.Popen([sys.executable, "-c", textwrap.dedent(CLAIMER), start], cwd=ROOT, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(url, f"replica-{i}", tmp_path / f"m{i}"))
             for i in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1][-2000:] for o in outs]
    claimed = [int(x) for out, _ in outs for x in out.split() if x != "None"]
    assert sorted(claimed) == queued  # every run once: none twice, none left
    hosts = set(_hosts())
    assert hosts <= {"replica-0", "replica-1", "replica-2"} and len(hosts) >= 2  # more than one replica took part


@pytest.mark.slow
def test_a_claim_in_progress_holds_only_the_row_it_takes(pg_url: str, monkeypatch) -> None:
    """While one replica's claim is between its scan and its commit, another replica claims the next run: the scan
    must not lock every queued row (a CI run under load saw a replica find all 15 locked and claim none)."""
    import threading

    from analysis.results_db import runs

    monkeypatch.setenv("DATABASE_URL", fresh_pg(pg_url))
    first, second = _queue(2, "paused")
    inside, release = threading.Event(), threading.Event()
    state = runs._teacher_state

    def paused(s, run, host):  # the first claim stops here, its transaction open, until the second has claimed
        if not inside.is_set():
            inside.set()
            assert release.wait(30)
        return state(s, run, host)

    monkeypatch.setattr(runs, "_teacher_state", paused)
    took: list[int | None] = []
    slow = threading.Thread(target=lambda: took.append(runs.claim_next(5)))
    slow.start()
    assert inside.wait(30)
    try:
        assert runs.claim_next(5) == second  # the row the paused claim holds is skipped, the next one is free
    finally:
        release.set()
        slow.join(30)
    assert took == [first]


def test_a_stale_lease_is_taken_by_any_replica_and_the_slow_worker_stops_without_overwriting(monkeypatch, tmp_path) -> None:
    from analysis.results_db import engine as E
    from analysis.results_db import runs
    from analysis.results_db.schema import TrainingRun

    monkeypatch.setenv("BFE_LAB_HOST", "replica-a")
    rid = _queue(1, "lease")[0]
    assert runs.claim_next(1) == rid and runs.record_curve(rid, [(1, 9.0)]) is False  # ours, and renewed
    monkeypatch.setenv("BFE_LAB_HOST", "replica-b")
    assert runs.mark_interrupted(lease_s=60) == []  # fresh: nobody takes it
    with E.session(E.get_engine(), write=True) as s:
        s.get(TrainingRun, rid).lease_at = dt.datetime.now(dt.UTC).replace(tzinfo=None) - dt.timedelta(seconds=61)
    assert runs.mark_interrupted(lease_s=60) == [(rid, "replica-a", os.getpid())]
    run = runs.get_run(rid)
    assert run["status"] == "interrupted" and "No progress for 60 s" in run["message"]
    monkeypatch.setenv("BFE_LAB_HOST", "replica-a")
    assert runs.record_curve(rid, [(1, 9.0), (2, 8.5)]) is True  # the slow worker learns it must stop
    assert runs.renew_lease(rid) is True
    assert runs.finish_run(rid, "finished", evaluation={"loss": 1.0}) is False  # and cannot overwrite the verdict
    assert runs.get_run(rid)["status"] == "interrupted" and runs.claim_next(1) is None  # never re-queued


def test_a_second_worker_of_the_same_run_writes_nothing_and_is_told_to_stop() -> None:
    """Two workers on one run (a run dispatched while another process trained it): only the one whose pid the run holds
    writes; the other's curve, lease and end are dropped, so it cannot overwrite the owner's evaluation."""
    from analysis.results_db import runs

    rid = _queue(1, "twice")[0]
    assert runs.claim_next(1) == rid and runs.record_curve(rid, [(1, 9.0)], evaluation={"phase": "mine"}) is False
    runs.set_pid(rid, os.getpid() + 1)  # another worker took it over
    assert runs.record_curve(rid, [(1, 9.0), (2, 1.0)], evaluation={"phase": "late"}) is True
    assert runs.renew_lease(rid) is True
    assert runs.finish_run(rid, "failed", message="late") is False
    run = runs.get_run(rid)
    assert run["status"] == "running" and run["curve"] == [(1, 9.0)] and run["evaluation"] == {"phase": "mine"}


@pytest.mark.slow
def test_leases_follow_the_database_clock_so_replicas_with_skewed_clocks_agree(pg_url: str, monkeypatch) -> None:
    """On PostgreSQL a replica whose own clock runs 10 minutes ahead (or behind) neither takes a live run nor keeps
    one whose lease the database's clock says is stale."""
    from analysis.results_db import engine as E
    from analysis.results_db import runs
    from analysis.results_db.schema import TrainingRun

    monkeypatch.setenv("DATABASE_URL", fresh_pg(pg_url))
    monkeypatch.setenv("BFE_LAB_HOST", "replica-a")
    rid = _queue(1, "clock")[0]
    real_now = runs._now
    monkeypatch.setattr(runs, "_now", lambda: real_now() - dt.timedelta(minutes=10))  # A is 10 minutes behind
    assert runs.claim_next(1) == rid and runs.record_curve(rid, [(1, 9.0)]) is False
    monkeypatch.setattr(runs, "_now", lambda: real_now() + dt.timedelta(minutes=10))  # B is 10 minutes ahead
    monkeypatch.setenv("BFE_LAB_HOST", "replica-b")
    assert runs.mark_interrupted(lease_s=60) == []  # the lease A just renewed is fresh by the database's clock
    with E.session(E.get_engine(), write=True) as s:
        db_now = s.scalar(runs.text("SELECT timezone('UTC', clock_timestamp())"))
        s.get(TrainingRun, rid).lease_at = db_now - dt.timedelta(seconds=61)
    monkeypatch.setattr(runs, "_now", lambda: real_now() - dt.timedelta(minutes=10))  # a replica behind still sees it
    assert runs.mark_interrupted(lease_s=60) == [(rid, "replica-a", os.getpid())]
    assert runs.get_run(rid)["status"] == "interrupted"


@pytest.mark.slow
def test_a_run_queued_through_a_stopped_replica_is_run_by_another_and_a_killed_replica_is_detected(pg_url: str, tmp_path: Path,
                                                                                                  monkeypatch) -> None:
    """Replica A queues a run and stops (it never dispatches); replica B trains it. Then B is killed with SIGKILL
    (its supervisor and its worker: the machine died) in the middle of a long run; A's supervisor marks the run
    interrupted within the lease (LEASE_S here) plus a second, and A trains the next queued run."""
    from analysis.results_db import runs
    from services import lab

    lease = LEASE_S
    url = fresh_pg(pg_url)
    monkeypatch.setenv("DATABASE_URL", url)
    monkeypatch.setenv("BFE_LAB_HOST", "replica-a")
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path / "a"))
    (first,) = lab.submit("single", TINY, "queued-on-a", start=False)  # A queues, then is "stopped": it never dispatches
    assert runs.get_run(first)["status"] == "queued"
    b = subprocess.Popen([sys.executable, "-c", textwrap.dedent(REPLICA)], cwd=ROOT, start_new_session=True,
                         env=_env(url, "replica-b", tmp_path / "b", BFE_LAB_LEASE_S=str(lease)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: runs.get_run(first)["status"] == "finished", timeout=180)
        got = runs.get_run(first)
        assert got["checkpoint"] == "trained/queued-on-a" and (tmp_path / "b" / "trained" / "queued-on-a").is_dir()
        (long_run,) = lab.submit("single", replace(TINY, steps=20_000), "killed-with-b", start=False)
        (after,) = lab.submit("single", TINY, "after-the-kill", start=False)
        wait_for(lambda: len(runs.get_run(long_run)["curve"]) > 2, timeout=180)
        assert runs.get_run(long_run)["status"] == "running"
        worker = runs.get_run(long_run)
        os.killpg(b.pid, signal.SIGKILL)  # B's supervisor ...
        os.kill(_pid(long_run), signal.SIGKILL)  # ... and its worker (its own session): B's machine is gone
        killed = time.monotonic()
        monkeypatch.setenv("BFE_LAB_LEASE_S", str(lease))
        wait_for(lambda: (lab.dispatch() or True) and runs.get_run(long_run)["status"] == "interrupted", timeout=60)
        detected = time.monotonic() - killed
        assert detected <= lease + 3, detected
        assert f"No progress for {lease} s" in runs.get_run(long_run)["message"] and worker["curve"]
        wait_for(lambda: (lab.dispatch() or True) and runs.get_run(after)["status"] == "finished", timeout=180)
        assert runs.get_run(after)["status"] == "finished"  # A took the next run once the slot was free
    finally:
        if b.poll() is None:
            os.killpg(b.pid, signal.SIGKILL)
        for r in runs.list_runs().itertuples():
            if r.status in ("queued", "running"):
                lab.cancel(r.id)


@pytest.mark.slow
def test_a_hung_worker_loses_its_lease_is_stopped_and_its_slot_goes_to_the_next_run(lab_env: Path, monkeypatch) -> None:
    from analysis.results_db import runs
    from services import lab

    monkeypatch.setenv("BFE_LAB_LEASE_S", str(LEASE_S))
    (hung,) = lab.submit("single", replace(TINY, steps=20_000), "hangs")
    (nxt,) = lab.submit("single", TINY, "waits-for-the-slot")
    wait_for(lambda: len(runs.get_run(hung)["curve"]) > 2, timeout=180)
    pid = _pid(hung)
    os.kill(pid, signal.SIGSTOP)  # alive, but no progress: as a deadlocked worker
    try:
        wait_for(lambda: (lab.dispatch() or True) and runs.get_run(hung)["status"] == "interrupted", timeout=60)
        wait_for(lambda: not _alive(pid), timeout=10)  # the hung process was stopped, not left holding memory
        wait_for(lambda: (lab.dispatch() or True) and runs.get_run(nxt)["status"] == "finished", timeout=180)
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _hosts() -> list[str]:
    from analysis.results_db import engine as E
    from analysis.results_db.schema import TrainingRun

    with E.session(E.get_engine()) as s:
        return [r.host for r in s.query(TrainingRun).all()]


def _alive(pid: int) -> bool:
    from analysis.results_db.runs import _alive as alive

    return alive(pid)


def _pid(rid: int) -> int:
    from analysis.results_db import engine as E
    from analysis.results_db.schema import TrainingRun

    with E.session(E.get_engine()) as s:
        return s.get(TrainingRun, rid).pid


@pytest.mark.slow  # a worker process trains a run to the end: about 12 s
def test_a_headless_worker_trains_what_a_web_replica_with_no_slots_queued(lab_env: Path, monkeypatch) -> None:
    """``BFE_LAB_CONCURRENCY=0`` on the web side: a submit only queues. ``python -m services.lab worker --slots 1``
    (another process, as on the GPU machine) claims the run and trains it to the end; bad slots are refused by name."""
    from analysis.results_db import runs
    from services import lab

    monkeypatch.setenv("BFE_LAB_CONCURRENCY", "0")
    [rid] = lab.submit("single", replace(TINY, steps=5), "headless")
    assert runs.get_run(rid)["status"] == "queued"
    done = subprocess.run([sys.executable, "-m", "services.lab", "worker", "--slots", "1", "--once"], capture_output=True,
                          text=True, timeout=120, env={**os.environ, "BFE_LAB_CONCURRENCY": "0"})
    assert done.returncode == 0 and "started 1 run(s)" in done.stdout, done.stderr
    wait_for(lambda: runs.get_run(rid)["status"] in ("finished", "failed"), timeout=180)
    run = runs.get_run(rid)
    assert run["status"] == "finished", run["message"]
    assert (lab_env / "trained" / run["name"]).is_dir()
    bad = subprocess.run([sys.executable, "-m", "services.lab", "worker", "--slots", "0"], capture_output=True, text=True,
                         timeout=60)
    assert bad.returncode == 2 and "--slots must be a whole number from 1 to 64" in bad.stderr
