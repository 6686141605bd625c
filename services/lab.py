"""The lab's job service: presets that re-run the papers' ablations in miniature, sizes and memory from the
calculator before anything starts, a per-server queue, training in background processes, and what the pages
do to runs (submit, cancel, delete with the checkpoint, save an uploaded corpus).

This is a service layer above ``models/`` (which trains) and ``analysis/`` (which stores): pages call these
functions and only draw. A run never trains inside a Streamlit rerun. :func:`submit` checks each configuration
(the memory calculator's prediction against ``BFE_LAB_MEMORY_MB``), stores the runs as queued in the results
database and calls :func:`dispatch`, which starts a worker process (``python -m services.worker <id>``) for each
free slot
(``BFE_LAB_CONCURRENCY``, per host). The worker trains with :func:`models.pretrain.train`, writes its curve to
the database about once a second (and reads the cancel flag in the same write), stores the evaluation, then
dispatches the next queued run. Closing the tab or another student's click changes nothing; a server that
restarts leaves its runs ``interrupted`` (:func:`analysis.results_db.runs.mark_interrupted`), never finished;
:func:`supervise` (started once per server process with the warm-up) dispatches every few seconds, so queued runs
resume after a restart and a dead worker's slot is freed without anyone opening the page.

Torch is imported by the worker only; the page that lists and starts runs does not pay for it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from core.errors import ExplorerError, InvalidConfig, InvalidData
from models.pretrain.config import MAX_USER_CORPUS_BYTES, TrainConfig, hf_config, trained_dir
from models.run_config import RUN_NAME, check_run_name

log = logging.getLogger("bert_family_explorer")
MAX_QUEUED = 40  # queued runs per host; a class of 30 each starting one fits, a script looping does not
MAX_STEPS = 20_000  # per run from the page (the library allows more, from a shell)
NAME = RUN_NAME
ROOT = Path(__file__).resolve().parent.parent
WORKER_THREADS = max(1, (os.cpu_count() or 2) - 1)  # leave a core to the web server


class QueueFull(ExplorerError, RuntimeError):
    """Too many runs are waiting on this server."""


# ------------------------------------------------------------------------------------------ sizes


@dataclass(frozen=True)
class Size:
    """What the calculator says about a run before it starts."""

    parameters: int  # every trained tensor (ELECTRA: generator + discriminator, shared embeddings once)
    non_embedding: int  # Kaplan et al. (2020)'s N: 2·d·L·(2·d_attn + d_ff), what scaling laws count
    memory_bytes: int  # one training step, fp32 AdamW (analysis.memory.training_memory)
    flops_per_token: float  # training FLOPs per real token as the loop performs them (models.pretrain.flops)
    kaplan_flops_per_token: float  # Kaplan et al. 2020's 6N + attention per token, for reference
    tokens_per_step: float  # real tokens in a batch: its texts' mean length × batch (the padded batch × length is more)

    @property
    def flops_per_step(self) -> float:
        return self.flops_per_token * self.tokens_per_step


def size(config: TrainConfig) -> Size:
    """Exact parameters, predicted memory, and the training FLOPs and real tokens of a step of ``config`` (its corpus
    read once, with its tokenizer, for the texts' lengths).

    Raises:
        InvalidConfig: a configuration the calculator cannot build; InvalidData: a corpus that cannot be read.
    """
    from analysis.memory import TrainingSetup, training_memory
    from analysis.params import parameter_breakdown
    from models.pretrain import flops

    config.validate()
    setup = TrainingSetup(precision="fp32", optimizer="adamw")
    cfg, head = hf_config(config)
    main = parameter_breakdown(cfg, head)
    params = main.total
    memory = training_memory(main, config.batch, config.seq_len, setup).total
    non_embedding = 2 * config.hidden * config.layers * (2 * config.hidden + config.ffn)
    if config.objective == "electra":
        gcfg, ghead = hf_config(config, "generator")
        gen = parameter_breakdown(gcfg, ghead)
        shared = sum(t.numel for t in gen.tensors if t.group == "embeddings" and t.part != "embedding projection")
        params += gen.total - shared
        memory += training_memory(gen, config.batch, config.seq_len, setup).total - 16 * shared
        g = flops.shapes(config)["generator"]
        non_embedding += 2 * g.hidden * g.layers * (2 * g.hidden + g.ffn)
    stats = flops.length_stats(config)
    return Size(params, non_embedding, memory, flops.per_token(config, stats), flops.kaplan_per_token(config),
                stats.tokens_per_sequence * config.batch)


def check_fits(config: TrainConfig, budget_mb: int | None = None) -> Size:
    """:func:`size`, refusing a run the memory calculator says needs more than ``BFE_LAB_MEMORY_MB``."""
    from core.settings import get_settings

    budget_mb = budget_mb or get_settings().lab_memory_mb
    s = size(config)
    if s.memory_bytes > budget_mb * 2**20:
        raise InvalidConfig(f"This run would need about {s.memory_bytes / 2**20:,.0f} MB to train "
                            f"({s.parameters:,} parameters, batch {config.batch} × {config.seq_len} tokens); "
                            f"the lab's limit on this server is {budget_mb:,} MB (BFE_LAB_MEMORY_MB).",
                            "Make the model, the batch or the sequence smaller.")
    return s


# ------------------------------------------------------------------------------------------ presets


@dataclass(frozen=True)
class Preset:
    """An ablation in miniature: the runs it starts from a base configuration, and what the paper found."""

    title: str
    paper: str  # the source of the finding
    finding: str
    runs: Callable[[TrainConfig], list[tuple[str, TrainConfig]]]


def _equal_compute(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """ELECTRA and a masked LM of the same width, the MLM given as many steps as ELECTRA's FLOPs buy it (FLOPs as the
    loop performs them: :mod:`models.pretrain.flops`)."""
    electra = replace(base, objective="electra")
    mlm = replace(base, objective="mlm")
    steps = max(1, round(base.steps * size(electra).flops_per_step / size(mlm).flops_per_step))
    return [("electra", electra), ("mlm", replace(mlm, steps=min(steps, MAX_STEPS)))]


SCALING_WIDTHS = (32, 64, 128, 256)
ISOFLOP_BUDGETS = (0.5, 1.0, 2.0)  # × the base run's compute


def _scaling(base: TrainConfig, widths: tuple[int, ...] = SCALING_WIDTHS) -> list[tuple[str, TrainConfig]]:
    """Four widths (the FFN 4× and the heads kept), one token budget: the base run's steps × batch × length."""
    return [(f"h{h}", replace(base, objective=base.objective if base.objective not in ("electra", "plm", "clm") else "mlm",
                              hidden=h, ffn=4 * h, heads=min(base.heads, h // 16) or 1)) for h in widths]


def _isoflop(base: TrainConfig, widths: tuple[int, ...] = SCALING_WIDTHS) -> list[tuple[str, TrainConfig]]:
    """Chinchilla's approach 2 in miniature: for each compute budget, the widths, each trained for the steps that
    budget buys it (so small models see more tokens). The budgets are priced from the middle width of those tried,
    at the base run's steps, so the optimum can fall inside the grid."""
    runs = _scaling(base, widths)
    budget = size(runs[len(runs) // 2][1]).flops_per_step * base.steps
    out = []
    for scale in ISOFLOP_BUDGETS:
        for name, cfg in runs:
            steps = round(scale * budget / size(cfg).flops_per_step)
            out.append((f"c{scale:g}-{name}", replace(cfg, steps=max(1, min(steps, MAX_STEPS)))))
    return out


PRESETS: dict[str, Preset] = {
    "single": Preset("One run of the chosen objective", "", "", lambda b: [(b.objective.replace("+", "-"), b)]),
    "roberta": Preset(
        "RoBERTa: static vs dynamic masking, and dropping NSP",
        "Liu et al. 2019, RoBERTa, Table 1 (masking) and Table 2 (NSP), SQuAD/MNLI-m/SST-2 dev",
        "Dynamic masking is as good as or slightly better than static; removing NSP matches or improves downstream "
        "results.",
        lambda b: [("bert-static-nsp", replace(b, objective="mlm+nsp", masking="static")),
                   ("static", replace(b, objective="mlm", masking="static")),
                   ("dynamic", replace(b, objective="mlm", masking="dynamic"))]),
    "albert": Preset(
        "ALBERT: NSP vs SOP",
        "Lan et al. 2019, ALBERT, Table 5 (intrinsic NSP/SOP accuracy and downstream dev)",
        "A model trained with NSP does not solve SOP (about chance); a model trained with SOP solves NSP well.",
        lambda b: [("nsp", replace(b, objective="mlm+nsp")), ("sop", replace(b, objective="mlm+sop"))]),
    "electra": Preset(
        "ELECTRA vs MLM at equal compute",
        "Clark et al. 2020, ELECTRA, Figure 3 and Table 1 (GLUE dev at equal pre-training FLOPs)",
        "Replaced-token detection learns from every token, so at the same compute ELECTRA beats masked LM; here "
        "compare the downstream probe (the losses are different tasks).",
        _equal_compute),
    "xlnet": Preset(
        "XLNet vs BERT",
        "Yang et al. 2019, XLNet, Table 1 (fair comparison with BERT: same data and size) ",
        "The permutation LM predicts each token from any subset of the others without [MASK] tokens; compare the "
        "downstream probe (the losses are different tasks).",
        lambda b: [("plm", replace(b, objective="plm")), ("mlm", replace(b, objective="mlm"))]),
    "scaling": Preset(
        "Scaling: 4 sizes, one budget",
        "Kaplan et al. 2020, Scaling Laws for Neural Language Models, Figure 1 (L(N) = (N_c/N)^α_N, α_N ≈ 0.076)",
        "With data and steps the same, loss falls as a power of the non-embedding parameter count; fit α on the "
        "scaling-laws page.",
        _scaling),
    "isoflop": Preset(
        "IsoFLOP: 3 budgets × 4 sizes",
        "Hoffmann et al. 2022, Chinchilla, approach 2 (IsoFLOP profiles, Figure 3)",
        "For a fixed compute budget the loss is lowest at a middle size; the best size grows with the budget.",
        _isoflop),
}


@dataclass(frozen=True)
class Planned:
    """One run of a preset: its name, the arm it belongs to, its replicate (0, 1, … for the seeds) and its config."""

    name: str
    arm: str
    replicate: int
    config: TrainConfig


MAX_SEEDS = 10


def plan_runs(preset: str, base: TrainConfig, group: str, seeds: int = 1,
              widths: tuple[int, ...] | None = None) -> list[Planned]:
    """Every run a preset would start: each arm × ``seeds`` replicates (seed ``base.seed + i``), validated and named
    ``<group>-<arm>`` (one seed) or ``<group>-<arm>-s<i>``. ``widths`` replaces the scaling presets' sizes.

    Raises:
        InvalidConfig: an unknown preset, a seed count out of 1–10, steps out of bounds, a name that cannot be a folder.
    """
    if preset not in PRESETS:
        raise InvalidConfig(f"Unknown preset {preset!r}.", "Use one of: " + ", ".join(PRESETS) + ".")
    check_run_name(group)
    if not (type(seeds) is int and 1 <= seeds <= MAX_SEEDS):  # not isinstance: True is an int
        raise InvalidConfig(f"Seeds must be from 1 to {MAX_SEEDS}, not {seeds!r}.")
    if not 1 <= base.steps <= MAX_STEPS:
        raise InvalidConfig(f"Steps must be from 1 to {MAX_STEPS:,} here, not {base.steps:,}.",
                            "Longer runs: python -m models.pretrain from a shell.")
    base.validate()
    if widths is not None and preset in ("scaling", "isoflop"):
        if not (3 <= len(widths) <= 6 and all(isinstance(w, int) and 16 <= w <= 1024 for w in widths)):
            raise InvalidConfig("A scaling preset needs 3 to 6 widths from 16 to 1,024.")
        arms = (_scaling(base, widths) if preset == "scaling" else _isoflop(base, widths))
    else:
        arms = PRESETS[preset].runs(base)
    out = []
    for i in range(seeds):
        for label, cfg in arms:
            name = (group if preset == "single" else f"{group}-{label}") + (f"-s{i}" if seeds > 1 else "")
            out.append(Planned(name, label, i, replace(cfg, run=name, seed=base.seed + i).validate()))
    return out


def plan(preset: str, base: TrainConfig, group: str, seeds: int = 1) -> list[tuple[str, TrainConfig]]:
    """The (run name, config) pairs a preset would start (:func:`plan_runs`)."""
    return [(p.name, p.config) for p in plan_runs(preset, base, group, seeds)]


# ------------------------------------------------------------------------------------------ the queue


def _lock_path() -> Path:
    folder = trained_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(13, "not writable")
    except OSError as err:
        raise ExplorerError(f"The lab cannot write to {folder} ({err.strerror or type(err).__name__}).",
                            "Point BFE_MODEL_DIR at a writable folder: trained models and the queue's lock live there.") from None
    return folder / ".queue.lock"


def submit(preset: str, base: TrainConfig, group: str, engine: Any = None, start: bool = True, seeds: int = 1,
           downstream: dict[str, Any] | None = None, widths: tuple[int, ...] | None = None, budget: str = "") -> list[int]:
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
    waiting = int((runs.list_runs(engine)["status"] == "queued").sum())
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
            stored = {**asdict(p.config), "preset": preset, "arm": p.arm, "replicate": p.replicate, "seeds": seeds,
                      "budget": budget, "downstream": spec, "control": control}
            ids.append(runs.create_run(p.name, p.config.objective, stored, engine, group=group))
    except ExplorerError:
        for rid in ids:  # all of a preset or none: an ablation with a missing arm is not an ablation
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
            log.warning("lab: run %s made no progress for its lease; its worker %s was stopped", run_id, pid)


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
    if run["status"] in ("queued", "running"):
        raise InvalidConfig(f"Run {run['name']!r} is {run['status']}.", "Cancel it first, then delete it.")
    runs.delete_run(run_id, engine)
    checkpoint = run.get("checkpoint") or ""
    if checkpoint.startswith("trained/"):
        folder = (trained_dir() / checkpoint.split("/", 1)[1]).resolve()
        if folder.parent == trained_dir().resolve():  # never outside the lab's folder, whatever the row says
            shutil.rmtree(folder, ignore_errors=True)
    return str(run["name"])


def save_corpus(raw: bytes) -> str:
    """Store an uploaded text file beside the checkpoints (content-addressed, written atomically) and return its
    path, for ``TrainConfig(corpus=...)``. Check it with :func:`models.pretrain.read_corpus` before use.

    Raises:
        InvalidData: larger than :data:`models.pretrain.MAX_USER_CORPUS_BYTES`.
    """
    if len(raw) > MAX_USER_CORPUS_BYTES:
        raise InvalidData(f"The file is {len(raw) / 2**20:.0f} MB; the lab takes at most {MAX_USER_CORPUS_BYTES // 2**20} MB.")
    return _store_upload(raw, ".corpora", ".txt")


def save_task_file(raw: bytes) -> str:
    """Check a user's task CSV whole (:func:`analysis.tasks.parse_task_csv`), then store it beside the checkpoints
    (content-addressed, written atomically) and return its path, for ``FineTuneConfig(task=...)``.

    Raises:
        InvalidTaskFile: what is wrong with the file, by line.
    """
    from analysis.tasks import parse_task_csv

    parse_task_csv(raw)
    return _store_upload(raw, ".tasks", ".csv")


def _store_upload(raw: bytes, folder_name: str, suffix: str) -> str:
    """Write ``raw`` under the lab's folder, named by its hash (the same file is stored once; no user-given name
    reaches the disk), through a temporary file and a rename, so a reader never sees half of it."""
    folder = _lock_path().parent / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(raw).hexdigest()[:20]}{suffix}"
    if not path.exists():
        tmp = path.with_suffix(f".partial-{os.getpid()}")
        tmp.write_bytes(raw)
        tmp.replace(path)
    return str(path)


_supervisor: threading.Thread | None = None


def supervise(interval: float = 5.0) -> bool:
    """Start, once per process, a daemon thread that calls :func:`dispatch` every ``interval`` seconds: queued runs
    start after a server restart and a dead worker's run is marked interrupted, whether or not a page is open.
    Returns True when this call started it."""
    global _supervisor
    if _supervisor is not None and _supervisor.is_alive():
        return False

    def loop() -> None:
        while True:
            # Sleep first: the supervisor starts right after a server's first page run, while the browser is still
            # painting it; its first look at the database (which may seed it) waits until that is done.
            time.sleep(interval)
            try:
                dispatch()
            except Exception as err:  # a database or disk outage must not end the supervisor; it tries again
                log.warning("lab supervisor: %s", err)

    _supervisor = threading.Thread(target=loop, daemon=True, name="lab-supervisor")
    _supervisor.start()
    return True


def work(run_id: int, engine: Any = None) -> str:
    """Train one claimed run (in the worker process): curve and cancel flag through the database about once a
    second, evaluation and checkpoint at the end, then start the next queued run. Returns the final status."""
    from analysis.results_db import runs

    run = runs.get_run(run_id, engine)
    if run["objective"] == FINETUNE:
        return _work_finetune(run, engine)
    config = TrainConfig.from_stored(run["config"])
    runs.set_pid(run_id, os.getpid(), engine)
    curve: list[tuple[int, float]] = []
    state = {"last": 0.0, "cancel": False}

    def progress(step: int, loss: float, seconds: float) -> None:
        curve.append((step, loss))
        if time.monotonic() - state["last"] >= 1.0 or step == config.steps:
            state["last"] = time.monotonic()
            state["cancel"] = runs.record_curve(run_id, curve, engine, seconds=seconds)

    stored = run["config"]

    def still_wanted() -> bool:
        """Between downstream steps: renew the lease every few seconds (that phase writes no curve); False to stop."""
        if time.monotonic() - state["last"] >= 5.0:
            state["last"] = time.monotonic()
            state["cancel"] = runs.renew_lease(run_id, engine)
        return state["cancel"]

    def fit() -> Any:
        from models.pretrain import train  # torch: in the worker only, and inside the run's try

        result = train(config, on_progress=progress, should_stop=lambda: state["cancel"])
        if stored.get("downstream") and result.checkpoint and not result.stopped:
            from models.finetune import downstream

            def phase(text: str) -> None:
                state["cancel"] = runs.record_curve(run_id, curve, engine, evaluation={**result.evaluation, "phase": text})

            result.evaluation["downstream"] = downstream(result.checkpoint, stored["downstream"], config.seed,
                                                         bool(stored.get("control")), still_wanted, phase)
            if state["cancel"]:
                result.stopped = "cancelled during the downstream evaluation"
        return result

    return _run_and_close(run_id, engine, curve, fit, "; what it learned so far is saved.",
                          lambda status, r: {"evaluation": r.evaluation if r else {}, "parameters": r.parameters if r else None})


def _run_and_close(run_id: int, engine: Any, curve: list[tuple[int, float]], fit: Callable[[], Any], cancelled_note: str,
                   outcome: Callable[[str, Any], dict[str, Any]]) -> str:
    """Run ``fit()`` in the worker and close the run whatever happens: finished, cancelled (``cancelled_note`` said),
    failed with the reason, the curve and ``outcome(status, result)`` (evaluation, parameters) stored, and the next
    queued run dispatched. Returns the final status."""
    from analysis.results_db import runs

    status, message, result = "failed", "", None
    try:
        import torch

        torch.set_num_threads(WORKER_THREADS)
        result = fit()
        if result.stopped.startswith("cancelled"):
            status, message = "cancelled", result.stopped.capitalize() + cancelled_note
        elif result.stopped:
            status, message = "failed", result.stopped.capitalize() + "."
        else:
            status = "finished"
    except ExplorerError as err:
        message = str(err)
    except Exception as err:  # a worker must close its run whatever happened; the log keeps the trace
        import traceback

        traceback.print_exc()
        message = f"Training stopped with an internal error ({type(err).__name__}); the server log has the details."
    finally:
        if curve:
            runs.record_curve(run_id, curve, engine, seconds=result.seconds if result else None)
        runs.finish_run(run_id, status, message=message, checkpoint=result.checkpoint if result else "",
                        seconds=result.seconds if result else None, tokens=result.tokens if result else None, engine=engine,
                        **outcome(status, result))
        dispatch(engine)
    return status


# ------------------------------------------------------------------------------------------ fine-tuning runs

FINETUNE = "finetune"  # the objective column of a fine-tuning run in bfe_runs


@dataclass(frozen=True)
class FineTuneSize:
    """What a fine-tuning run will train and need, before it starts."""

    parameters: int  # the whole classifier (encoder + head)
    trainable: int  # what the mode trains: everything, or only the linear classifier on frozen features
    memory_bytes: int  # one training step, fp32 AdamW (frozen: the encoder's forward only)


def finetune_size(config: Any, labels: int, kind: str = "single") -> FineTuneSize:
    """Exact parameters (``analysis.params`` on the checkpoint's config) and predicted memory of a fine-tuning run.

    Raises:
        ModelUnavailable, UnsupportedArchitecture, InvalidCheckpoint: from :func:`models.inspection.inspect`.
    """
    from analysis.memory import TrainingSetup, inference_memory, training_memory
    from analysis.params import parameter_breakdown
    from models.inspection import inspect

    info = inspect(config.model, network=False)
    body = parameter_breakdown(info.config, "base")
    a = body.arch
    head = a.hidden * labels + labels
    if config.mode == "frozen":
        width = a.hidden * (min(4, a.layers + 1) if config.layer == "last4" else 1)  # the embeddings count as a layer
        width *= 4 if kind == "pair" else 1  # a pair's two marked words as [u, v, u⊙v, |u−v|] (models.finetune.features)
        trainable = width * (labels if labels > 2 else 1) + (labels if labels > 2 else 1)
        memory = inference_memory(body, config.batch, config.max_len).total
    else:
        trainable = body.total + head
        memory = training_memory(body, config.batch, config.max_len, TrainingSetup(precision="fp32", optimizer="adamw")).total + 16 * head
    return FineTuneSize(body.total + head, trainable, int(memory))


def submit_finetune(configs: list[Any], group: str, engine: Any = None, start: bool = True) -> list[int]:
    """Queue fine-tuning runs (all or none): each config validated whole (model, task, sizes, name) and its memory
    checked against ``BFE_LAB_MEMORY_MB`` before any is stored.

    Raises:
        InvalidConfig, QueueFull, DuplicateRun, and what loading the task or inspecting the model raises.
    """
    from analysis.results_db import runs
    from core.settings import get_settings
    from models.finetune import load_config_task

    check_run_name(group)
    if not configs:
        raise InvalidConfig("Pick at least one model and one mode.")
    budget = get_settings().lab_memory_mb
    for cfg in configs:
        cfg.validate()
        task = load_config_task(cfg)
        need = finetune_size(cfg, len(task.labels), task.kind).memory_bytes
        if need > budget * 2**20:
            raise InvalidConfig(f"{cfg.run_name} would need about {need / 2**20:,.0f} MB; the lab's limit on this server is "
                                f"{budget:,} MB (BFE_LAB_MEMORY_MB).", "Use a smaller batch or sequence length, or a smaller model.")
    waiting = int((runs.list_runs(engine)["status"] == "queued").sum())
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


def _work_finetune(run: dict[str, Any], engine: Any) -> str:
    """The worker's side of a fine-tuning run: curve and epochs through the database about once a second."""
    from analysis.results_db import runs
    from models.finetune import FineTuneConfig

    run_id = run["id"]
    config = FineTuneConfig.from_stored(run["config"])
    runs.set_pid(run_id, os.getpid(), engine)
    curve: list[tuple[int, float]] = []
    epochs: list[dict[str, float]] = []
    state = {"last": 0.0, "cancel": False}

    def progress(step: int, loss: float, seconds: float) -> None:
        curve.append((step, loss))
        if time.monotonic() - state["last"] >= 1.0:
            state["last"] = time.monotonic()
            state["cancel"] = runs.record_curve(run_id, curve, engine, seconds=seconds, evaluation={"epochs": epochs})

    def epoch(row: dict[str, float]) -> None:
        epochs.append(row)
        state["cancel"] = runs.record_curve(run_id, curve, engine, evaluation={"epochs": epochs})

    def fit() -> Any:
        from models.finetune import finetune

        return finetune(config, on_progress=progress, on_epoch=epoch, should_stop=lambda: state["cancel"])

    def outcome(status: str, r: Any) -> dict[str, Any]:
        if r is None or status != "finished":
            return {"evaluation": {"epochs": epochs}, "parameters": r.trainable_parameters if r else None}
        return {"evaluation": {**r.summary(), "correct": r.correct}, "parameters": r.trainable_parameters}

    return _run_and_close(run_id, engine, curve, fit, "; no score is reported for a cancelled run.", outcome)


#: Config keys that do not make two fine-tuning runs different treatments: the seed is the replicate, the rest names it.
_NOT_A_SETTING = ("seed", "run", "kind")


def _settings(config: dict[str, Any], without: tuple[str, ...] = ()) -> str:
    """A fine-tuning run's treatment as a short, stable text: every config value but the seed and the names (and
    ``without``); the layer read out only where it is read (frozen mode)."""
    skip = set(_NOT_A_SETTING) | set(without) | ({"layer"} if config.get("mode") != "frozen" else set())
    short = {"max_train": "train", "max_test": "test", "max_len": "length", "lr": "lr"}
    return " · ".join(f"{short.get(k, k)} {'auto' if v is None else v}" for k, v in sorted(config.items())
                      if k not in skip and k not in ("model", "task", "mode"))


def finetune_table(frame: Any) -> Any:
    """Finished fine-tuning runs in the shape of Peters et al.'s table, comparing like with like: one row per
    experiment × model × mode × task × the rest of the config (epochs, rate, sizes, layer), so that only the seeds of
    one treatment are averaged; per row the mean accuracy over seeds, its spread, the seeds, and Student's t interval
    for the mean (one seed: its bootstrap interval over test items, said so)."""
    import pandas as pd
    from scipy import stats

    from analysis.stats import seed_summary

    done = frame[(frame["objective"] == FINETUNE) & (frame["status"] == "finished")]
    rows = []
    for r in done.itertuples():
        ev, cfg = r.evaluation or {}, dict(r.config or {})
        rows.append({"experiment": r.group or "", "model": cfg.get("model"), "mode": cfg.get("mode"),
                     "task": ev.get("task") or cfg.get("task"), "settings": _settings(cfg),
                     "pair": _settings(cfg, ("mode", "layer")), "layer": cfg.get("layer") if cfg.get("mode") == "frozen" else "",
                     "accuracy": ev.get("accuracy"), "interval": ev.get("accuracy_interval"), "macro_f1": ev.get("macro_f1"),
                     "majority": ev.get("majority_baseline")})
    cols = ["experiment", "model", "mode", "task", "settings", "accuracy (mean)", "spread (sd)", "seeds",
            "95% interval (mean over seeds)", "macro-F1", "majority baseline"]
    if not rows:
        return pd.DataFrame(columns=cols)
    long = pd.DataFrame(rows)
    out = []
    for (experiment, model, mode, task, settings), g in long.groupby(["experiment", "model", "mode", "task", "settings"], sort=False):
        s = seed_summary(g["accuracy"].astype(float).tolist())
        if s["n"] >= 2:
            half = float(stats.t.ppf(0.975, s["n"] - 1)) * s["std"] / s["n"] ** 0.5
            interval = f"[{s['mean'] - half:.3f}, {s['mean'] + half:.3f}] (t, {s['n']} seeds)"
        else:
            lo_hi = g["interval"].iloc[0] or [float("nan")] * 2
            interval = f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}] (1 seed: over test items)"
        out.append({"experiment": experiment, "model": model, "mode": mode, "task": task, "settings": settings,
                    "accuracy (mean)": s["mean"], "spread (sd)": s["std"], "seeds": s["n"],
                    "95% interval (mean over seeds)": interval, "macro-F1": float(g["macro_f1"].astype(float).mean()),
                    "majority baseline": float(g["majority"].astype(float).mean()),
                    "_pair": g["pair"].iloc[0], "_layer": g["layer"].iloc[0]})
    table = pd.DataFrame(out)
    shown = table[cols].copy()
    shown.attrs["pairs"] = table[["experiment", "model", "task", "_pair", "mode", "_layer", "accuracy (mean)"]].to_dict("records")
    return shown


def finetune_delta(table: Any) -> Any:
    """Δ = fine-tuned − frozen (mean accuracy) between rows of :func:`finetune_table` that differ in mode alone
    (the same experiment, model, task, epochs, rate and sizes; a frozen row per layer read out)."""
    import pandas as pd

    cols = ["experiment", "model", "task", "frozen layer", "frozen", "fine-tuned", "Δ (fine-tuned − frozen)"]
    pairs = table.attrs.get("pairs") or []
    out = []
    for f in (p for p in pairs if p["mode"] == "frozen"):
        for t in (p for p in pairs if p["mode"] == "finetune"):
            if all(f[k] == t[k] for k in ("experiment", "model", "task", "_pair")):
                out.append({"experiment": f["experiment"], "model": f["model"], "task": f["task"], "frozen layer": f["_layer"],
                            "frozen": f["accuracy (mean)"], "fine-tuned": t["accuracy (mean)"],
                            "Δ (fine-tuned − frozen)": t["accuracy (mean)"] - f["accuracy (mean)"]})
    return pd.DataFrame(out, columns=cols)


# ------------------------------------------------------------------------------------------ views of the runs


def progress_of(run: dict[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
    """Step, share done, and seconds left (from the pace so far) of a run row from :mod:`analysis.results_db.runs`."""
    steps = int(run["config"].get("steps") or 1)
    step = run["curve"][-1][0] if run["curve"] else 0
    done = step / steps
    left = None
    if run["status"] == "running" and step and run["seconds"]:
        left = run["seconds"] / step * (steps - step)
    return {"step": step, "steps": steps, "done": min(1.0, done), "seconds_left": left}


def queue_positions(frame: Any) -> dict[int, int]:
    """run id -> place in the queue (1 = next), for the queued runs of a :func:`runs.list_runs` frame."""
    queued = frame[frame["status"] == "queued"].sort_values("id")
    return {int(rid): i + 1 for i, rid in enumerate(queued["id"])}


def curves_frame(frame: Any) -> Any:
    """Long table (run, group, objective, step, loss) of the runs' curves, for one chart."""
    import pandas as pd

    rows = [{"run": r.name, "group": r.group, "objective": r.objective, "step": s, "loss": loss}
            for r in frame.itertuples() for s, loss in r.curve]
    return pd.DataFrame(rows, columns=["run", "group", "objective", "step", "loss"])


def scaling_table(frame: Any) -> Any:
    """Finished runs as a scaling-law data set: non-embedding parameters N, tokens D, compute C = 6·N·D, held-out
    loss, and the training FLOPs the lab counted. Feeds the scaling-laws page (fit α with its error bar)."""
    import pandas as pd

    rows = []
    for r in frame[frame["status"] == "finished"].itertuples():
        cfg = TrainConfig.from_stored(r.config)
        loss = (r.evaluation or {}).get("held_out_loss")
        if loss is None or not r.tokens:
            continue
        s = size(cfg)
        rows.append({"run": r.name, "objective": r.objective, "hidden": cfg.hidden, "N (non-embedding)": s.non_embedding,
                     "parameters": s.parameters, "D (tokens)": int(r.tokens), "C = 6ND": 6.0 * s.non_embedding * r.tokens,
                     "training FLOPs": s.flops_per_token * r.tokens, "held-out loss": float(loss),
                     "source": f"Trained on this server: BERT Family Explorer pre-training lab, experiment {r.group or r.name}"})
    return pd.DataFrame(rows, columns=["run", "objective", "hidden", "N (non-embedding)", "parameters", "D (tokens)", "C = 6ND",
                                       "training FLOPs", "held-out loss", "source"])


def flops_per_second(frame: Any) -> float | None:
    """Training FLOP/s of the newest finished run of a :func:`runs.list_runs` frame (this server's pace), or None."""
    for r in frame[frame["status"] == "finished"].sort_values("id", ascending=False).itertuples():
        if r.seconds and r.tokens:
            try:
                return size(TrainConfig.from_stored(r.config)).flops_per_token * r.tokens / r.seconds
            except ExplorerError:
                continue
    return None


def trained_models(task: str | None = None) -> list[str]:
    """``trained/<run>`` ids of the checkpoints trained here (complete folders only), newest first; with ``task``,
    only those whose tensors hold that head (:func:`models.inspection.inspect`)."""
    root = trained_dir()
    if not root.is_dir():
        return []
    folders = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "bfe_run.json").is_file()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    out = []
    for p in folders[:200]:
        mid = f"trained/{p.name}"
        if task is not None:
            try:
                from models.inspection import inspect

                if task not in inspect(mid).heads:
                    continue
            except ExplorerError:
                continue
        out.append(mid)
    return out


def over_training(checkpoint: str, evaluation: dict[str, Any] | None) -> Any:
    """A lab run's word measures at each step it kept, its last included (from its end-of-run evaluation): a frame
    with ``step``, ``POS probe`` and, for a masked-LM objective, one column per fill-mask probe holding its top 5.
    Empty for a run that kept no steps (trained before the lab kept them)."""
    import pandas as pd

    from models.locate import run_steps

    evaluation = evaluation or {}
    rows = [r for r in evaluation.get("over_training") or [] if isinstance(r, dict) and isinstance(r.get("step"), int)]
    steps = run_steps(checkpoint) if checkpoint.startswith("trained/") else []
    if not rows or not steps:
        return pd.DataFrame(columns=["step", "POS probe"])
    rows = [*rows, {"step": steps[-1], "pos_probe_accuracy": evaluation.get("pos_probe_accuracy"),
                    "probes": evaluation.get("probes") or []}]
    table = []
    for r in sorted(rows, key=lambda r: r["step"]):
        row = {"step": r["step"], "POS probe": r.get("pos_probe_accuracy")}
        for p in r.get("probes") or []:
            row[p["probe"]] = ", ".join(p["top"])
        table.append(row)
    return pd.DataFrame(table)


def run_info(model_id: str) -> dict[str, Any]:
    """What ``trained/<run>/bfe_run.json`` says about a checkpoint trained here (config, evaluation), or {}."""
    if not model_id.startswith("trained/"):
        return {}
    path = trained_dir() / model_id.split("/", 1)[1] / "bfe_run.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


# ------------------------------------------------------------------------------------------ the headless worker


def serve_worker(slots: int, interval: float = 5.0, once: bool = False) -> int:
    """A training machine with no web server: claim queued runs from the shared database into ``slots`` local
    worker processes, every ``interval`` seconds, until SIGTERM or SIGINT (``once``: a single dispatch). The web
    replicas can then run with ``BFE_LAB_CONCURRENCY=0`` and every run trains here, on this machine's device; its
    checkpoints go to this machine's ``BFE_MODEL_DIR`` (a backend on the same machine serves them to the pages).
    Returns the number of runs it started."""
    if not (type(slots) is int and 1 <= slots <= 64):
        raise InvalidConfig(f"--slots must be a whole number from 1 to 64, not {slots!r}.")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    started = 0
    log.info("lab worker: %d slot(s) on %s", slots, os.uname().nodename)
    while True:
        try:
            started += len(dispatch(slots=slots))
        except ExplorerError as err:
            raise SystemExit(f"lab worker: {err}") from None
        except Exception as err:  # a database outage: try again, as the web supervisor does
            log.warning("lab worker: %s", err)
        if once or stop.wait(interval):
            return started


def main(argv: list[str] | None = None) -> int:
    """``python -m services.lab worker --slots N``: see :func:`serve_worker`."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m services.lab", description="The labs' headless training worker.")
    sub = ap.add_subparsers(dest="command", required=True)
    w = sub.add_parser("worker", help="claim queued runs from the shared database and train them on this machine")
    w.add_argument("--slots", type=int, default=1, help="runs trained at once on this machine (1-64)")
    w.add_argument("--interval", type=float, default=5.0, help="seconds between looks at the queue")
    w.add_argument("--once", action="store_true", help="dispatch once and exit (the started runs go on)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        n = serve_worker(args.slots, max(0.5, min(args.interval, 3600.0)), args.once)
    except InvalidConfig as err:
        print(err, file=sys.stderr)
        return 2
    print(f"lab worker: started {n} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
