"""The labs' queue on this server: submit a preset's runs or fine-tuning runs (all or none, each checked first),
dispatch queued runs to worker processes on the free slots, cancel, and delete an ended run with its checkpoint.

The queue itself is the results database's (:mod:`analysis.results_db.runs`, shared by every replica); this module
decides what may enter it and starts the processes that train on this host.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from analysis.run_status import ACTIVE, RunStatus
from core.errors import ExplorerError, InvalidConfig
from models.pretrain.config import TrainConfig, hf_config, trained_dir
from models.run_config import check_run_name
from services.lab.checkpoints import lab_folder
from services.lab.presets import plan_runs
from services.lab.presets.base import CUSTOM
from services.lab.sizing import check_fits, exceeds_budget, finetune_size, memory_budget_mb

logger = logging.getLogger("bert_family_explorer")
FINETUNE = "finetune"  # the objective column of a fine-tuning run in bfe_runs
MAX_QUEUED = 40  # queued runs per host; a class of 30 each starting one fits, a script looping does not
ROOT = Path(__file__).resolve().parents[2]  # the project, the worker processes' working folder
WORKER_THREADS = max(1, (os.cpu_count() or 2) - 1)  # leave a core to the web server


class QueueFull(ExplorerError, RuntimeError):
    """Too many runs are waiting on this server."""


def _lock_path() -> Path:
    return lab_folder() / ".queue.lock"


def _waiting(engine: Any) -> int:
    from analysis.results_db import runs

    return int((runs.list_runs(engine)["status"] == RunStatus.QUEUED).sum())


@dataclass(frozen=True)
class LabRun:
    """What the lab stores beside a run's :class:`TrainConfig` in its stored config: the preset and ``arm`` it is
    part of, its seed index (``replicate``), the experiment's ``seeds`` per arm and ``budget``, the ``downstream``
    suite its checkpoint is scored on (None: none), whether it also trains its kind's random-init ``control``, and the
    runs it waits for and decides from as it starts (``after``: a tuned preset's verdict run reads its arm's rate from
    its tuning runs; the queue's claim passes it over while one of them is queued or running)."""

    preset: str = "single"
    arm: str = ""
    replicate: int = 0
    seeds: int = 1
    budget: str = CUSTOM
    downstream: dict[str, Any] | None = None
    control: bool = False
    after: tuple[str, ...] = ()

    def stored(self, config: TrainConfig) -> dict[str, Any]:
        """The config a run is stored with: the TrainConfig's fields and these."""
        return {**asdict(config), **asdict(self)}

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any], name: str = "") -> LabRun:
        """The lab's part of a stored config (a run queued outside the lab, or before a key existed, reads as the
        defaults; its ``arm`` as its run ``name``; a budget stored as "" as :data:`CUSTOM`)."""
        after = stored.get("after")
        return cls(preset=str(stored.get("preset") or "single"), arm=str(stored.get("arm") or name),
                   replicate=int(stored.get("replicate") or 0), seeds=int(stored.get("seeds") or 1),
                   budget=str(stored.get("budget") or CUSTOM), downstream=stored.get("downstream"),
                   control=bool(stored.get("control")),
                   after=tuple(n for n in after if isinstance(n, str)) if isinstance(after, list | tuple) else ())


def submit(preset: str, base: TrainConfig, group: str, engine: Any = None, start: bool = True, seeds: int = 1,
           downstream: dict[str, Any] | None = None, widths: tuple[int, ...] | None = None, budget: str = CUSTOM) -> list[int]:
    """Check every run of a preset (memory, names), queue them all (or none) and start what the slots allow.

    ``seeds`` replicates every arm; ``downstream`` (:func:`models.finetune.check_downstream`) makes each run, once
    pre-trained, fine-tune its checkpoint on those tasks, and the first run of each architecture per seed also the
    same architecture from random initialisation (the control every arm shares). ``budget`` names the budget used.

    Raises:
        InvalidConfig: a configuration that cannot run or needs more memory than the lab's limit.
        QueueFull: more than :data:`MAX_QUEUED` runs would wait on this server.
        DuplicateRun: a run of that name exists already.
    """
    from analysis.results_db import runs
    from models.finetune import check_downstream

    planned = plan_runs(preset, base, group, seeds, widths)
    spec = check_downstream(downstream) if downstream is not None else None
    for p in planned:
        check_fits(p.config)
    waiting = _waiting(engine)
    if waiting + len(planned) > MAX_QUEUED:
        raise QueueFull(f"{waiting} runs are already waiting on this server; the queue holds {MAX_QUEUED}; this experiment "
                        f"needs {len(planned)}.", "Wait for some to finish, cancel some of yours, or use fewer seeds.")
    controlled: set[tuple[int, str]] = set()
    ids = []
    try:
        for p in planned:
            kind = hf_config(p.config)[0]["model_type"]
            control = spec is not None and (p.replicate, kind) not in controlled
            controlled.add((p.replicate, kind))
            stored = LabRun(preset, p.arm, p.replicate, seeds, budget, spec, control, p.after).stored(p.config)
            ids.append(runs.create_run(p.name, p.config.objective, stored, engine, group=group))
    except ExplorerError:
        for rid in ids:  # all of a preset or none: an ablation with a missing arm is not an ablation
            runs.delete_run(rid, engine)
        raise
    if start:
        dispatch(engine)
    return ids


def submit_finetune(configs: list[Any], group: str, engine: Any = None, start: bool = True) -> list[int]:
    """Queue fine-tuning runs (all or none): each config validated whole (model, task, sizes, name) and its memory
    checked against ``BFE_LAB_MEMORY_MB`` before any is stored.

    Raises:
        InvalidConfig, QueueFull, DuplicateRun, and what loading the task or inspecting the model raises.
    """
    from analysis.results_db import runs
    from models.finetune import load_config_task

    check_run_name(group)
    if not configs:
        raise InvalidConfig("Pick at least one model and one mode.")
    budget = memory_budget_mb()
    for cfg in configs:
        cfg.validate()
        task = load_config_task(cfg)
        need = finetune_size(cfg, len(task.labels), task.kind).memory_bytes
        if exceeds_budget(need, budget):
            raise InvalidConfig(f"{cfg.run_name} would need about {need / 2**20:,.0f} MB; the lab's limit on this server is "
                                f"{budget:,} MB (BFE_LAB_MEMORY_MB).", "Use a smaller batch or sequence length, or a smaller model.")
    waiting = _waiting(engine)
    if waiting + len(configs) > MAX_QUEUED:
        raise QueueFull(f"{waiting} runs are already waiting on this server; the queue holds {MAX_QUEUED}.",
                        "Wait for some to finish, or cancel some of yours.")
    ids = []
    try:
        for cfg in configs:
            ids.append(runs.create_run(cfg.run_name, FINETUNE, {"kind": FINETUNE, **asdict(cfg)}, engine, group=group))
    except ExplorerError:
        for rid in ids:
            runs.delete_run(rid, engine)
        raise
    if start:
        dispatch(engine)
    return ids


def _reap(proc: subprocess.Popen) -> None:
    threading.Thread(target=proc.wait, daemon=True, name=f"lab-reaper-{proc.pid}").start()


def dispatch(engine: Any = None, slots: int | None = None) -> list[int]:
    """Mark dead runs interrupted, then start a worker for each queued run a free slot allows (``slots``, default
    ``BFE_LAB_CONCURRENCY``, per host); return their ids.

    Holds a file lock beside the checkpoints, so two servers' or workers' dispatches on one host never both
    see the same free slot.
    """
    from analysis.results_db import runs
    from core.settings import get_settings

    limit = get_settings().lab_concurrency if slots is None else slots
    started = []
    with open(_lock_path(), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for rid, host, pid in runs.mark_interrupted(engine):
            if host == runs.host_name() and pid:
                _stop_hung_worker(rid, pid)
        while (rid := runs.claim_next(limit, engine)) is not None:
            log_path = _lock_path().parent / ".logs" / f"{rid}.log"
            log_path.parent.mkdir(exist_ok=True)
            with open(log_path, "ab") as out:
                proc = subprocess.Popen([sys.executable, "-m", "services.worker", str(rid)], stdout=out, stderr=out,
                                        stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT,
                                        env={**os.environ, "OMP_NUM_THREADS": str(WORKER_THREADS)})
            runs.set_pid(rid, proc.pid, engine)
            _reap(proc)
            started.append(rid)
    return started


def _stop_hung_worker(run_id: int, pid: int) -> None:
    """SIGKILL the worker of a run whose lease ran out while its process lives (it hangs): its slot is given to the
    next run, so the process must not keep the CPU and memory. Only a ``services.worker`` process for that run."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return  # gone already (or no /proc)
    if b"services.worker" in argv and str(run_id).encode() in argv:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
            logger.warning("lab: run %s made no progress for its lease; its worker %s was stopped", run_id, pid)


def cancel(run_id: int, engine: Any = None) -> str:
    """Cancel a queued run, or ask a running one to stop (it keeps what it trained). Returns the new status."""
    from analysis.results_db import runs

    return runs.request_cancel(run_id, engine)


def delete(run_id: int, engine: Any = None) -> str:
    """Delete an ended run and its checkpoint folder (``trained/<run>``); returns the run's name.

    Raises:
        InvalidConfig: the run is queued or running (cancel it first).
    """
    from analysis.results_db import runs

    run = runs.get_run(run_id, engine)
    if run["status"] in ACTIVE:
        raise InvalidConfig(f"Run {run['name']!r} is {run['status']}.", "Cancel it first, then delete it.")
    runs.delete_run(run_id, engine)
    checkpoint = run.get("checkpoint") or ""
    if checkpoint.startswith("trained/"):
        folder = (trained_dir() / checkpoint.split("/", 1)[1]).resolve()
        if folder.parent == trained_dir().resolve():  # never outside the lab's folder, whatever the row says
            shutil.rmtree(folder, ignore_errors=True)
    return str(run["name"])
