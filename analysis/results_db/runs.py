"""Pre-training runs in the results database (``bfe_runs``): created, started, updated, finished, listed, deleted.

The same ``DATABASE_URL`` as the results (SQLite or PostgreSQL). A run's state moves
queued → running → finished | failed | cancelled; a run whose process died while ``running`` (the
server restarted) becomes ``interrupted`` the next time :func:`mark_interrupted` looks, so it is
never shown as finished. No torch here.

The queue is the database's, shared by every replica: :func:`claim_next` gives the oldest queued run to any replica
with a free slot (on PostgreSQL ``SELECT … FOR UPDATE SKIP LOCKED``, so replicas claiming at once take different
rows and none waits on another's; on SQLite one writer at a time). A running run holds a lease: its worker's
progress writes (:func:`record_curve`, :func:`renew_lease`) renew it, and when it is older than ``BFE_LAB_LEASE_S``
any replica marks the run interrupted (never re-queued: a worker that was only slow must not run beside a second
one). A worker whose run is no longer running stops at its next write, and its end does not overwrite that.
Leases are stamped and judged by the database's clock (:func:`_lease_clock`), so replicas on machines whose clocks
disagree neither take a live run nor keep a dead one.
Why not a queue library: the maintained ones (Celery, RQ, Dramatiq, procrastinate) need a broker or run on
PostgreSQL only, while the lab must run on the SQLite file a laptop has; the row lock is the whole mechanism.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import socket
from typing import Any

from sqlalchemy import Engine, func, select, text
from sqlalchemy.exc import IntegrityError

from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import TrainingRun
from analysis.results_db.seeding import ensure_seeded
from analysis.run_status import ACTIVE, CLOSED_BY_WORKER, RunStatus
from core.errors import ExplorerError

MAX_CURVE_POINTS = 5_000


class RunNotFound(ExplorerError, LookupError):
    """No run has this id (deleted, or never created)."""


class DuplicateRun(ExplorerError, ValueError):
    """A run of this name exists already."""


def _engine(engine: Engine | None) -> Engine:
    engine = engine or get_engine()
    ensure_seeded(engine)
    return engine


def host_name() -> str:
    """This replica's name in the queue: ``BFE_LAB_HOST``, or the machine's hostname."""
    from core.settings import get_settings

    return (get_settings().lab_host or socket.gethostname())[:100]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _lease_clock(s: Any) -> dt.datetime:
    """Now in UTC by the clock every replica shares: PostgreSQL's (``clock_timestamp()``) where the queue is on a
    server; this machine's on SQLite, whose file only one host writes."""
    if s.get_bind().dialect.name == "postgresql":
        return s.scalar(text("SELECT timezone('UTC', clock_timestamp())"))
    return _now()


def create_run(name: str, objective: str, config: dict[str, Any], engine: Engine | None = None, group: str = "") -> int:
    """Store a queued run (on this host, in ``group``); return its id. Raises DuplicateRun for a name in use."""
    engine = _engine(engine)

    def add(s) -> int:
        run = TrainingRun(name=name[:100], objective=objective[:20], status=RunStatus.QUEUED, config=json.dumps(config, default=str),
                          group=group[:100], host=host_name())
        s.add(run)
        s.flush()
        return run.id

    try:
        return write(engine, add, attempts=1)
    except IntegrityError:
        raise DuplicateRun(f"A run named {name[:100]!r} exists already.", "Pick another name, or delete the old run.") from None


def _update(run_id: int, engine: Engine | None, **fields: Any) -> None:
    engine = _engine(engine)

    def change(s) -> None:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.")
        for k, v in fields.items():
            setattr(run, k, v)

    write(engine, change)


def start_run(run_id: int, engine: Engine | None = None) -> None:
    """Mark a run running, by this process on this host (so a dead process can be told apart)."""
    engine = _engine(engine)
    host = host_name()

    def change(s) -> None:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.")
        run.status, run.pid, run.host, run.started_at, run.lease_at = RunStatus.RUNNING, os.getpid(), host, _now(), _lease_clock(s)

    write(engine, change)


def _ours(run: TrainingRun) -> bool:
    """Whether this process trains ``run``: it is running, and its pid and host are this process's (set by
    :func:`start_run`, :func:`claim_next` or :func:`set_pid`). A second worker of the same run, or one whose lease was
    taken, is not its owner: what it writes is dropped, and it is told to stop."""
    return run.status == RunStatus.RUNNING and run.pid == os.getpid() and run.host == host_name()


def record_curve(run_id: int, curve: list[tuple[int, float]], engine: Engine | None = None, seconds: float | None = None,
                 evaluation: dict[str, Any] | None = None) -> bool:
    """Store the loss curve so far (thinned to :data:`MAX_CURVE_POINTS`, the last point kept), the seconds trained and,
    where given, the evaluation so far (a fine-tune's epochs); return whether the worker should stop: the run was asked
    to (:func:`request_cancel`), or this process no longer owns it (:func:`_ours`; nothing is written then)."""
    if len(curve) > MAX_CURVE_POINTS:
        step = len(curve) / MAX_CURVE_POINTS
        curve = [curve[int(i * step)] for i in range(MAX_CURVE_POINTS - 1)] + [curve[-1]]
    engine = _engine(engine)

    def change(s) -> bool:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.")
        if not _ours(run):
            return True  # its lease was taken, it ended, or another worker trains it: stop, and overwrite nothing
        run.curve = json.dumps(curve)
        if seconds is not None:
            run.seconds = seconds
        if evaluation is not None:
            run.evaluation = json.dumps(evaluation, default=str)
        run.lease_at = _lease_clock(s)
        return bool(run.cancel)

    return write(engine, change)


def renew_lease(run_id: int, engine: Engine | None = None) -> bool:
    """Renew a running run's lease without storing anything else (a phase that reports no curve, e.g. the
    downstream fine-tunes); return whether the worker should stop (asked to, or the run is no longer running)."""
    engine = _engine(engine)

    def change(s) -> bool:
        run = s.get(TrainingRun, run_id)
        if run is None or not _ours(run):
            return True
        run.lease_at = _lease_clock(s)
        return bool(run.cancel)

    return write(engine, change)


def request_cancel(run_id: int, engine: Engine | None = None) -> str:
    """Stop a run: a queued one is cancelled at once, a running one is flagged (its worker stops within a
    second, keeping what it trained). Returns the run's status after the call; a finished run is left alone."""
    engine = _engine(engine)

    def change(s) -> str:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.", "It may have been deleted.")
        if run.status == RunStatus.QUEUED:
            run.status, run.finished_at, run.message = RunStatus.CANCELLED, _now(), "Cancelled before it started."
        elif run.status == RunStatus.RUNNING:
            run.cancel = True
        return run.status

    return write(engine, change)


def claim_next(limit: int, engine: Engine | None = None) -> int | None:
    """The oldest queued run of any replica, marked running here, when fewer than ``limit`` run on this host (its
    slots); else None. A run whose teacher run (:func:`_teacher_state`), or one of the runs its config's ``after``
    names (:func:`_waits_for_others`: a tuned verdict run's sweep), is still queued or training is passed over, and
    one whose teacher ended without finishing is failed with the reason.

    The claim is a compare-and-set: on PostgreSQL the row is locked with ``FOR UPDATE SKIP LOCKED`` (a replica
    claiming at the same moment skips it and takes the next), on SQLite writers take turns; either way a run is
    claimed once. Callers serialise it per host (:func:`services.lab.dispatch` holds a file lock), so two claims on
    one host never both see a free slot.
    """
    engine = _engine(engine)
    host = host_name()

    def claim(s) -> int | None:
        running = s.scalar(select(func.count()).select_from(TrainingRun).where(TrainingRun.status == RunStatus.RUNNING,
                                                                                TrainingRun.host == host))
        if running >= limit:
            return None
        # The scan reads ids unlocked and locks one row at a time: locking the whole scan (FOR UPDATE ... LIMIT 200)
        # would hold every queued row, and a replica claiming at the same moment would skip them all and find none.
        queued = s.scalars(select(TrainingRun.id).where(TrainingRun.status == RunStatus.QUEUED).order_by(TrainingRun.id)
                           .limit(CLAIM_SCAN)).all()
        for run_id in queued:
            run = s.scalars(select(TrainingRun).where(TrainingRun.id == run_id, TrainingRun.status == RunStatus.QUEUED)
                            .with_for_update(skip_locked=True)).first()
            if run is None:
                continue  # another replica holds or took it
            state, why = _teacher_state(s, run, host)
            if state == "wait" or _waits_for_others(s, run):
                continue  # its teacher, or a run it waits for, is queued or training: the next run may start meanwhile
            if state == "failed":
                run.status, run.message, run.finished_at = RunStatus.FAILED, why, _now()
                continue
            run.status, run.started_at, run.lease_at, run.host = RunStatus.RUNNING, _now(), _lease_clock(s), host
            run.pid = os.getpid()  # the claimer's, until set_pid
            return run.id
        return None

    return write(engine, claim)


#: Queued runs a claim looks through for one whose teacher is ready (the lab queues at most 40 per host).
CLAIM_SCAN = 200


def _teacher_state(s: Any, run: TrainingRun, host: str) -> tuple[str, str]:
    """Whether a queued run may start on ``host`` as far as its teacher goes: ``ready`` (it names none, or a lab run
    that finished on this host, or a checkpoint that is no run of this queue: the loader says whether it exists),
    ``wait`` (its teacher run is queued or running, or finished on another host: the checkpoint is in that host's model
    folder, so that host claims the student), ``failed`` with why (its teacher run ended without finishing: a distilled student needs the
    teacher's checkpoint before its first step). A knowledge-distillation run's config names its teacher
    (``teacher: trained/<run>``)."""
    teacher = str(json.loads(run.config or "{}").get("teacher") or "")
    if not teacher.startswith("trained/"):
        return "ready", ""
    name = teacher.split("/", 1)[1].split("@", 1)[0]
    row = s.execute(select(TrainingRun.status, TrainingRun.host).where(TrainingRun.name == name)).first()
    if row is None:
        return "ready", ""
    status, where = row
    if status == RunStatus.FINISHED:
        return ("ready", "") if not where or where == host else ("wait", "")
    if status in ACTIVE:
        return "wait", ""
    return "failed", (f"Its teacher run {name!r} ended {status} without a finished checkpoint; a student distilled from "
                      "it cannot start. Start the experiment again.")


def _waits_for_others(s: Any, run: TrainingRun) -> bool:
    """Whether a queued run names runs in its config's ``after`` (what it decides from as it starts: a tuned preset's
    verdict run reads the rate its tuning runs chose) of which one, in its own group, is still queued or running. Runs
    that ended any way, or are no run of this queue or group, hold nothing up: what the run makes of them is its own to
    say."""
    after = json.loads(run.config or "{}").get("after") or []
    if not isinstance(after, list) or not after:
        return False
    names = [str(n) for n in after]
    return bool(s.scalar(select(func.count()).select_from(TrainingRun).where(TrainingRun.name.in_(names), TrainingRun.group == run.group,
                                                                           TrainingRun.status.in_(list(ACTIVE)))))


def set_config(run_id: int, config: dict[str, Any], engine: Engine | None = None) -> None:
    """Replace a run's stored config: what a run decided as it started (a tuned run's rate) before its first step, so
    that every reader of the run sees what it trained with."""
    _update(run_id, engine, config=json.dumps(config, default=str))


def set_pid(run_id: int, pid: int, engine: Engine | None = None) -> None:
    """Record the worker process that trains a run (so a dead one can be told apart)."""
    _update(run_id, engine, pid=pid, host=host_name())


def finish_run(run_id: int, status: str, *, evaluation: dict[str, Any] | None = None, checkpoint: str = "", message: str = "",
               seconds: float | None = None, tokens: int | None = None, parameters: int | None = None,
               engine: Engine | None = None) -> bool:
    """Close a run as ``finished``, ``failed`` or ``cancelled``, with what it measured; returns whether it did. A run
    that is no longer ``running`` (another replica marked it interrupted when its lease ran out), or that another process
    trains (:func:`_ours`), is left as it is."""
    if status not in CLOSED_BY_WORKER:
        raise ValueError(f"a run finishes as finished, failed or cancelled, not {status!r}")
    fields = {"status": status, "evaluation": json.dumps(evaluation or {}, default=str), "checkpoint": checkpoint[:200],
              "message": message[:2000], "seconds": seconds, "tokens": tokens, "parameters": parameters, "finished_at": _now()}

    def change(s) -> bool:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.")
        if run.status not in ACTIVE or (run.status == RunStatus.RUNNING and not _ours(run)):
            return False
        for k, v in fields.items():
            setattr(run, k, v)
        return True

    return write(_engine(engine), change)


def _alive(pid: int | None) -> bool:
    """Whether a process runs with this pid (a zombie, dead but not yet reaped by its parent, does not)."""
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (macOS): kill(0) is all there is


def mark_interrupted(engine: Engine | None = None, lease_s: float | None = None) -> list[tuple[int, str, int | None]]:
    """Runs ``running`` on this host whose process is gone, and runs of any replica whose lease is older than
    ``lease_s`` (default ``BFE_LAB_LEASE_S``), become ``interrupted``; returns (id, host, pid) of each, so that the
    caller can stop a hung worker of its own host."""
    from core.settings import get_settings

    engine = _engine(engine)
    host = host_name()
    lease = float(lease_s if lease_s is not None else get_settings().lab_lease_s)

    def sweep(s) -> list[tuple[int, str, int | None]]:
        now = _now()
        stale_before = _lease_clock(s) - dt.timedelta(seconds=lease)
        out = []
        for r in s.scalars(select(TrainingRun).where(TrainingRun.status == RunStatus.RUNNING).with_for_update(skip_locked=True)):
            held = r.lease_at or r.started_at or r.created_at
            if r.host == host and not _alive(r.pid):
                why = "The server stopped while this run was training."
            elif held < stale_before:
                why = (f"No progress for {lease:.0f} s (BFE_LAB_LEASE_S): its server or worker ({r.host}) stopped or "
                       "hung, so it was marked interrupted and its slot freed; start it again to retrain it.")
            else:
                continue
            r.status, r.finished_at = RunStatus.INTERRUPTED, now
            r.message = (r.message + " " if r.message else "") + why
            out.append((r.id, r.host, r.pid))
        return out

    return write(engine, sweep)


def get_run(run_id: int, engine: Engine | None = None) -> dict[str, Any]:
    engine = _engine(engine)
    with session(engine) as s:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.", "It may have been deleted.")
        return _row(run)


def _row(run: TrainingRun) -> dict[str, Any]:
    return {"id": run.id, "name": run.name, "objective": run.objective, "status": run.status, "config": json.loads(run.config),
            "curve": [tuple(p) for p in json.loads(run.curve)], "evaluation": json.loads(run.evaluation), "checkpoint": run.checkpoint,
            "message": run.message, "seconds": run.seconds, "tokens": run.tokens, "parameters": run.parameters,
            "group": run.group, "cancel": bool(run.cancel), "started_at": run.started_at,
            "created_at": run.created_at, "finished_at": run.finished_at}


def list_runs(engine: Engine | None = None, group: str | None = None):
    """Every run (or one experiment's: ``group``, or a lone run of that name), newest first, as a DataFrame
    (config, curve and evaluation as Python objects)."""
    import pandas as pd

    engine = _engine(engine)
    query = select(TrainingRun).order_by(TrainingRun.id.desc())
    if group is not None:
        query = query.where((TrainingRun.group == group) | (TrainingRun.name == group))
    with session(engine) as s:
        rows = [_row(r) for r in s.scalars(query)]
    return pd.DataFrame(rows, columns=["id", "name", "objective", "status", "config", "curve", "evaluation", "checkpoint", "message",
                                       "seconds", "tokens", "parameters", "group", "cancel", "started_at", "created_at",
                                       "finished_at"])


def delete_run(run_id: int, engine: Engine | None = None) -> None:
    engine = _engine(engine)

    def remove(s) -> None:
        run = s.get(TrainingRun, run_id)
        if run is None:
            raise RunNotFound(f"No run {run_id}.")
        s.delete(run)

    write(engine, remove)


def runs_csv(engine: Engine | None = None) -> bytes:
    """One row per run (config and evaluation flattened), formula-safe, for a spreadsheet."""
    import pandas as pd

    from analysis.safe_text import csv_bytes

    df = list_runs(engine)
    flat = [{"id": r.id, "name": r.name, "group": r.group, "objective": r.objective, "status": r.status, "seconds": r.seconds, "tokens": r.tokens,
             "parameters": r.parameters, "final_loss": r.curve[-1][1] if r.curve else None,
             **{f"config.{k}": v for k, v in r.config.items()},
             **{f"eval.{k}": v for k, v in r.evaluation.items() if not isinstance(v, (list, dict))}} for r in df.itertuples()]
    return csv_bytes(pd.DataFrame(flat))

