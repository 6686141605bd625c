"""The labs' runs in the database: round trip, leases, cancellation (analysis/results_db/runs.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from sqlalchemy.exc import IntegrityError

from analysis import results_db as db
from tests.helpers import ROOT

SEEDS = ROOT.parent / "shared" / "seeds"


# ------------------------------------------------------------------------------------ pre-training runs
def test_runs_round_trip_and_a_dead_process_is_interrupted(engine) -> None:

    from analysis.results_db import runs

    rid = runs.create_run("mlm-demo", "mlm", {"layers": 2, "hidden": 128, "run": "=cmd|' /C calc'!A0"}, engine)
    with pytest.raises(runs.DuplicateRun):
        runs.create_run("mlm-demo", "mlm", {}, engine)
    runs.start_run(rid, engine)
    runs.record_curve(rid, [(i, 10.0 - i / 100) for i in range(1, 12_001)], engine)
    got = runs.get_run(rid, engine)
    assert got["status"] == "running" and len(got["curve"]) == runs.MAX_CURVE_POINTS and got["curve"][-1] == (12000, 10.0 - 120.0)
    assert runs.mark_interrupted(engine) == []  # this process is alive
    runs.finish_run(rid, "finished", evaluation={"held_out_loss": 7.5, "probes": [{"top": ["a"]}]}, checkpoint="trained/mlm-demo",
                    seconds=12.5, tokens=1000, parameters=4_000_000, engine=engine)
    df = runs.list_runs(engine)
    assert list(df["name"]) == ["mlm-demo"] and df["evaluation"][0]["held_out_loss"] == 7.5
    csv = runs.runs_csv(engine).decode()
    assert "eval.held_out_loss" in csv and "'=cmd" in csv  # formulas neutralised
    # a run whose process died (a server restart) is marked interrupted, never finished
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True).stdout.strip()
    rid2 = runs.create_run("killed", "electra", {}, engine)
    runs.start_run(rid2, engine)
    with db.session(engine, write=True) as s:
        s.get(db.TrainingRun, rid2).pid = int(dead)
    assert [r[0] for r in runs.mark_interrupted(engine)] == [rid2]
    assert runs.get_run(rid2, engine)["status"] == "interrupted"
    runs.delete_run(rid, engine)
    with pytest.raises(runs.RunNotFound):
        runs.get_run(rid, engine)
    with pytest.raises(IntegrityError), db.session(engine, write=True) as s:  # the database itself refuses an unknown state
        s.get(db.TrainingRun, rid2).status = "done"
    # the lab's queue: oldest queued first, no more than the limit running on this host, cancel flags
    q1, q2 = (runs.create_run(n, "mlm", {"steps": 10}, engine, group="abl") for n in ("abl-a", "abl-b"))
    assert runs.claim_next(1, engine) == q1 and runs.claim_next(1, engine) is None  # one slot, taken
    assert runs.get_run(q1, engine)["started_at"] is not None and runs.get_run(q1, engine)["group"] == "abl"
    assert runs.request_cancel(q2, engine) == "cancelled"  # queued: at once
    assert runs.request_cancel(q1, engine) == "running" and runs.record_curve(q1, [(1, 9.0)], engine, seconds=0.5) is True
    assert runs.claim_next(2, engine) is None  # nothing left queued
