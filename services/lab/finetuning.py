"""The fine-tuning lab as one use case: the task's summary, the run plan (:func:`preview`: every model × mode ×
seed, named, with its size and the memory verdict), then :func:`start` to queue exactly that plan."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import InvalidConfig
from models.finetune.config import LAYERS, TRAINING_MODES
from services.lab.run_queue import submit_finetune
from services.lab.sizing import FineTuneSize, exceeds_budget, finetune_size, memory_budget_mb
from services.lab.uploads import save_task_file

__all__ = ["FORM_LIMITS", "FORM_RATES", "LAYERS", "TRAINING_MODES", "UPLOAD", "FineTunePlan", "FineTuneRequest", "FineTuneRun",
           "UploadedTask", "preview", "start", "task_summary", "upload_task"]
UPLOAD = "upload"  # the form's task choice for the user's own CSV


#: What the page's form accepts per field of a request (inclusive bounds): within the library's
#: (:data:`models.finetune.config.LIMITS`: 20 epochs, batch 256, 512 tokens, 100,000 training examples), narrower where a
#: run started from a page must stay within a lesson on a 2-core CPU (the full ranges: ``python -m models.finetune``).
FORM_LIMITS: dict[str, tuple[int, int]] = {"seeds": (1, 5), "epochs": (1, 10), "batch": (1, 128), "max_train": (10, 20_000),
                                           "max_test": (10, 5000), "max_len": (16, 256)}
#: The learning rates the form offers; 0 is the recipe's rate for the model's size (models.finetune.default_lr).
FORM_RATES = (0.0, 2e-5, 3e-5, 5e-5, 1e-4, 3e-4, 1e-3)


@dataclass(frozen=True)
class FineTuneRequest:
    """What the fine-tuning lab's form holds."""

    models: tuple[str, ...]  # catalog ids, trained/<run>, Hub ids or folders
    task: str = "wic"  # a built-in task, or "upload"
    task_file: str = ""  # with "upload": the stored CSV (:func:`upload_task`); "" while none is there
    modes: tuple[str, ...] = ("finetune", "frozen")
    seeds: int = 1
    epochs: int = 3
    batch: int = 16
    lr: float = 0.0  # 0: the recipe's rate for the model's size (models.finetune.default_lr)
    max_train: int = 2000
    max_test: int = 500
    max_len: int = 64
    layer: str = "last4"  # what a frozen run reads out
    name: str = ""  # the experiment's name; empty: ft-<task>


@dataclass(frozen=True)
class UploadedTask:
    """A user's task CSV, checked whole and stored."""

    path: str  # for FineTuneRequest.task_file
    summary: dict[str, Any]  # analysis.tasks.Task.summary()


@dataclass(frozen=True)
class FineTuneRun:
    """One run of a plan with its size."""

    config: Any  # models.finetune.FineTuneConfig
    cost: FineTuneSize

    @property
    def memory_mb(self) -> int:
        return round(self.cost.memory_bytes / 2**20)


@dataclass(frozen=True)
class FineTunePlan:
    """What the fine-tuning lab would start: the runs with their sizes, and whether the plan may start."""

    group: str  # the experiment's name
    runs: tuple[FineTuneRun, ...]  # empty until a task, a model and a mode are there
    memory_budget_mb: int  # this server's limit per run (BFE_LAB_MEMORY_MB)
    nothing_picked: bool  # no model or no mode chosen

    @property
    def too_big(self) -> bool:
        """Whether this server's memory limit refuses any run of the plan."""
        return any(exceeds_budget(run.cost.memory_bytes, self.memory_budget_mb) for run in self.runs)


def task_summary(name: str, max_train: int, max_test: int) -> dict[str, Any]:
    """A built-in task's sizes, labels and majority baseline at these sizes (:meth:`analysis.tasks.Task.summary`)."""
    from analysis.tasks import load_task

    return load_task(name, max_train=max_train, max_test=max_test).summary()


def upload_task(raw: bytes) -> UploadedTask:
    """Check a user's task CSV whole, store it (content-addressed) and summarise it.

    Raises:
        InvalidTaskFile: what is wrong with the file, by line.
    """
    from analysis.tasks import parse_task_csv

    path = save_task_file(raw)
    return UploadedTask(path, parse_task_csv(raw).summary())


def preview(request: FineTuneRequest, summary: dict[str, Any] | None) -> FineTunePlan:
    """Every run ``request`` would start (each model × mode × seed, named ``<group>-<model>-<mode>-s<seed>``), sized
    for the task ``summary`` describes (:func:`task_summary`, or an upload's); no runs without a task.

    Raises:
        ModelUnavailable, UnsupportedArchitecture, InvalidCheckpoint: a model that cannot be sized.
    """
    from models.finetune import FineTuneConfig, run_label

    group = request.name or f"ft-{request.task}"
    path = request.task_file if request.task == UPLOAD else request.task
    configs = [FineTuneConfig(model=model, task=path, mode=mode, seed=seed, epochs=request.epochs, batch=request.batch,
                              lr=request.lr or None, max_train=request.max_train, max_test=request.max_test,
                              max_len=request.max_len, layer=request.layer, run=run_label(group, model, mode, seed))
               for model in request.models for mode in request.modes for seed in range(request.seeds)] if path else []
    runs = (tuple(FineTuneRun(cfg, finetune_size(cfg, len(summary["labels"]), summary["kind"])) for cfg in configs)
            if configs and summary else ())
    return FineTunePlan(group, runs, memory_budget_mb(), not request.modes or not request.models)


def start(plan: FineTunePlan, engine: Any = None) -> list[int]:
    """Queue the runs of a plan from :func:`preview` (all or none, each validated whole again) and start what the
    slots allow; return their ids.

    Raises:
        InvalidConfig: nothing to start, or a run over the memory limit; QueueFull, DuplicateRun: from the queue.
    """
    if plan.too_big:
        raise InvalidConfig(f"Too large for this server (limit {plan.memory_budget_mb:,} MB).",
                            "Use a smaller batch, fewer tokens or a smaller model.")
    return submit_finetune([run.config for run in plan.runs], plan.group, engine)
