"""The labs' job service: presets that re-run the papers' ablations in miniature, sizes and memory from the
calculator before anything starts, a per-server queue, training in background processes, and what the pages
do to runs (submit, cancel, delete with the checkpoint, save an uploaded corpus).

This is a service layer above ``models/`` (which trains) and ``analysis/`` (which stores): pages call the two use
cases and only draw. A run never trains inside a Streamlit rerun. :func:`submit` checks each configuration (the
memory calculator's prediction against ``BFE_LAB_MEMORY_MB``), stores the runs as queued in the results database
and calls :func:`dispatch`, which starts a worker process (``python -m services.worker <id>``) for each free slot
(``BFE_LAB_CONCURRENCY``, per host). The worker trains with :func:`models.pretrain.train`, writes its curve to the
database about once a second (and reads the cancel flag in the same write), stores the evaluation, then dispatches
the next queued run. Closing the tab or another student's click changes nothing; a server that restarts leaves its
runs ``interrupted`` (:func:`analysis.results_db.runs.mark_interrupted`), never finished; :func:`supervise` (started
once per server process with the warm-up) dispatches every few seconds, so queued runs resume after a restart and a
dead worker's slot is freed without anyone opening the page.

One job per module:

- :mod:`.pretraining`: the pre-training lab's use case: :func:`preview` (the run plan the page shows) and
  :func:`start`;
- :mod:`.finetuning`: the fine-tuning lab's use case: ``finetuning.preview`` and ``finetuning.start``;
- :mod:`.sizing`: parameters, memory, FLOPs and tokens before a run starts, and the one memory rule;
- :mod:`.presets`: the papers' ablations, one file each (runs, claims, budgets), registered in one table, and
  the runs a preset plans;
- :mod:`.claims`, :mod:`.claim_entries`: what a claim and a budget are, and how the common kinds of claim are decided
  from the runs;
- :mod:`.experiments`: an experiment's report, its verdicts stored once it is complete, the results so far (was
  ``services.ablations``, outside the package it depends on);
- :mod:`.run_queue`: submit, dispatch, cancel, delete;
- :mod:`.uploads`: a user's corpus or task file, stored by its hash;
- :mod:`.training`: what a worker process does with its run;
- :mod:`.supervisor`: the web server's supervisor thread and the headless worker (``python -m services.lab worker``);
- :mod:`.reports`: the views of runs the pages draw;
- :mod:`.checkpoints`: the lab's folder and the checkpoints trained in it.

Torch is imported by the worker only; the pages that list and start runs do not pay for it. The names below are
this package's public API: ``from services import lab; lab.submit(...)``.
"""

from analysis.run_status import ACTIVE, RunStatus
from analysis.tasks import MAX_TASK_BYTES
from models.pretrain.config import MAX_USER_CORPUS_BYTES, OBJECTIVES, VOCABS, TrainConfig
from models.run_config import MAX_NAME_CHARS
from services.lab import finetuning
from services.lab.checkpoints import lab_folder, run_info, trained_models
from services.lab.presets import MAX_SEEDS, MAX_STEPS, NAME, PRESETS, Planned, Preset, plan, plan_runs
from services.lab.presets.base import BUDGET_NAMES, CUSTOM
from services.lab.pretraining import (
    BUDGET_TITLES,
    FORM_CONFIG,
    FORM_LIMITS,
    LabRequest,
    PlannedRun,
    RunPlan,
    bigger_budget,
    budget_for,
    budget_names,
    offers_budgets,
    preview,
    record_for,
    start,
)
from services.lab.reports import (
    ScalingRuns,
    curves_frame,
    finetune_delta,
    finetune_table,
    finished_runs,
    flops_per_second,
    over_training,
    peters_published,
    progress_of,
    queue_positions,
    runs_csv,
    runs_table,
    scaling_runs,
    scaling_table,
    server_pace,
    waiting_runs,
)
from services.lab.run_queue import FINETUNE, MAX_QUEUED, ROOT, WORKER_THREADS, LabRun, QueueFull, cancel, delete, dispatch, submit, submit_finetune
from services.lab.sizing import FineTuneSize, Size, check_fits, exceeds_budget, finetune_size, memory_budget_mb, size
from services.lab.supervisor import serve_worker, stop_supervisor, supervise
from services.lab.training import work
from services.lab.uploads import check_corpus, save_corpus, save_task_file

#: What the form's single run may train: distillation needs a teacher run first, which the DistilBERT preset trains
#: and names itself (from a shell: ``python -m models.pretrain --objective distil --teacher trained/<run>``).
SINGLE_RUN_OBJECTIVES = {k: v for k, v in OBJECTIVES.items() if k != "distil"}

__all__ = [
    "ACTIVE",
    "BUDGET_NAMES",
    "BUDGET_TITLES",
    "CUSTOM",
    "FINETUNE",
    "FORM_CONFIG",
    "FORM_LIMITS",
    "MAX_NAME_CHARS",
    "MAX_QUEUED",
    "MAX_SEEDS",
    "MAX_STEPS",
    "MAX_TASK_BYTES",
    "MAX_USER_CORPUS_BYTES",
    "NAME",
    "OBJECTIVES",
    "PRESETS",
    "ROOT",
    "SINGLE_RUN_OBJECTIVES",
    "VOCABS",
    "WORKER_THREADS",
    "FineTuneSize",
    "LabRequest",
    "LabRun",
    "Planned",
    "PlannedRun",
    "Preset",
    "QueueFull",
    "RunPlan",
    "RunStatus",
    "ScalingRuns",
    "Size",
    "TrainConfig",
    "bigger_budget",
    "budget_for",
    "budget_names",
    "cancel",
    "check_corpus",
    "check_fits",
    "curves_frame",
    "delete",
    "dispatch",
    "exceeds_budget",
    "finetune_delta",
    "finetune_size",
    "finetune_table",
    "finetuning",
    "finished_runs",
    "flops_per_second",
    "lab_folder",
    "memory_budget_mb",
    "offers_budgets",
    "over_training",
    "peters_published",
    "plan",
    "plan_runs",
    "preview",
    "progress_of",
    "queue_positions",
    "record_for",
    "run_info",
    "runs_csv",
    "runs_table",
    "save_corpus",
    "save_task_file",
    "scaling_runs",
    "scaling_table",
    "serve_worker",
    "server_pace",
    "size",
    "start",
    "stop_supervisor",
    "submit",
    "submit_finetune",
    "supervise",
    "trained_models",
    "waiting_runs",
    "work",
]
