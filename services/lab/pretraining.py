"""The pre-training lab as one use case: what the form holds in, the run plan out (:func:`preview`: runs, tokens,
FLOPs, time, the memory verdict), then :func:`start` to queue exactly that plan.

A preset that decides claims spends a named budget (classroom, thorough, gpu: :mod:`services.lab.claims`) or the user's
own steps, batch and length (custom); which applies, how many seeds, and whether the runs are queued as an ablation
with its downstream suite or as plain runs is decided here, so every front end decides it the same way.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, replace
from typing import Any

from core.errors import InvalidConfig, InvalidData
from models.pretrain.config import TrainConfig
from models.pretrain.shipped import DESCRIPTIONS
from services.lab.claims import CLASSROOM_SUITE, Budget, apply_budget, record_of
from services.lab.experiments import submit as submit_experiment
from services.lab.presets import BUDGETS, CLAIMS, budget_of, plan_runs
from services.lab.presets.base import CUSTOM, MAX_SEEDS, MAX_STEPS
from services.lab.reports import flops_per_second, server_pace
from services.lab.run_queue import MAX_QUEUED, submit
from services.lab.sizing import Size, exceeds_budget, memory_budget_mb, size

#: The form's run before anyone changes it: the lab's default shape, 1,200 steps of 64 texts.
FORM_CONFIG = TrainConfig(batch=64, steps=1200)
#: What the page's form accepts per field of the run (inclusive bounds). Within the library's own
#: (:data:`models.pretrain.config.LIMITS`: 24 layers × 1,024, 512 tokens, batch 512), narrower where a run started from
#: a page must stay within a lesson on a 2-core CPU and a classroom server's memory: 12 layers × 512 (BERT-base's depth at
#: two thirds of its width), 256 tokens, batch 128, 20,000 steps. The full ranges are for a shell
#: (``python -m models.pretrain``).
FORM_LIMITS: dict[str, tuple[float, float]] = {
    "layers": (1, 12), "hidden": (16, 512), "heads": (1, 16), "ffn": (16, 2048), "seq_len": (16, 256), "batch": (1, 128),
    "steps": (1, MAX_STEPS), "lr": (1e-6, 0.5), "seed": (0, 10**6), "seeds": (1, MAX_SEEDS)}


@dataclass(frozen=True)
class LabRequest:
    """What the pre-training lab's form holds: the preset, the run the inputs describe, and how it is spent.

    ``config`` carries the inputs as the run they describe (objective, masking, shape, length, batch, steps, rate,
    seed, vocabulary, corpus); a preset sets its arms' own objectives and options from it, and a named budget its
    steps, batch and length. ``config.corpus`` is ``"wordnet"`` or an uploaded file's stored path, and ``""`` where
    the uploaded file is unusable (the plan then cannot start).
    """

    preset: str = "albert"
    config: TrainConfig = FORM_CONFIG
    name: str = ""  # the experiment's name; empty: the preset and the time
    budget: str = CUSTOM  # classroom, thorough, gpu (where offered) or custom, for a preset that decides claims
    seeds: int = 1  # per arm, with a custom budget


@dataclass(frozen=True)
class PlannedRun:
    """One run of a plan, priced by the calculator."""

    name: str
    config: TrainConfig
    cost: Size

    @property
    def memory_mb(self) -> int:
        return round(self.cost.memory_bytes / 2**20)

    @property
    def tokens(self) -> int:
        """Real tokens over the run: the texts' mean length × batch × steps."""
        return round(self.cost.tokens_per_step * self.config.steps)

    @property
    def training_flops(self) -> float:
        """Training FLOPs as the loop performs them over the run (models.pretrain.flops)."""
        return self.cost.flops_per_step * self.config.steps

    @property
    def kaplan_flops(self) -> float:
        """Kaplan et al. 2020's 6N (+ attention) per real token over the run, for reference."""
        return self.cost.kaplan_flops_per_token * self.cost.tokens_per_step * self.config.steps


@dataclass(frozen=True)
class RunPlan:
    """What the lab would start, shown before Start: the runs with their cost, the time at this server's pace, and
    whether the plan may start (memory and corpus)."""

    preset: str
    group: str  # the experiment's name: its runs are <group>-<arm>[-s<seed>]
    base: TrainConfig  # the form's configuration, the budget's steps, batch and length applied
    seeds: int  # per arm
    budget: Budget | None  # the named budget spent; None: the form's own steps, batch and length
    runs: tuple[PlannedRun, ...]
    memory_budget_mb: int  # this server's limit per run (BFE_LAB_MEMORY_MB)
    pace: float | None  # training FLOP/s of this server's newest finished run; None before any
    has_corpus: bool  # False: an upload was chosen and no usable file is there

    @property
    def total_flops(self) -> float:
        return sum(run.training_flops for run in self.runs)

    @property
    def training_seconds(self) -> float | None:
        """The runs' training time one after another at this server's pace (None without a pace)."""
        return self.total_flops / self.pace if self.pace else None

    @property
    def too_big(self) -> tuple[str, ...]:
        """The runs this server's memory limit refuses."""
        return tuple(run.name for run in self.runs if exceeds_budget(run.cost.memory_bytes, self.memory_budget_mb))

    @property
    def can_start(self) -> bool:
        return self.has_corpus and not self.too_big

    @property
    def shipped_note(self) -> str:
        """What the page says where runs start from a checkpoint the project ships (DistilBERT's teacher); "" else."""
        names = sorted({run.config.init for run in self.runs if run.config.init})
        if not names:
            return ""
        return ("Runs of 0 steps start from a checkpoint this project ships, trained before the experiment as DistilBERT's "
                "teacher (bert-base-uncased) was, and evaluated as they are on each seed's downstream fine-tune: "
                + "; ".join(f"`{name}`, {DESCRIPTIONS[name]}" for name in names) + ". Another size, a longer sequence "
                "or an uploaded corpus trains a teacher per seed instead.")


def offers_budgets(preset: str) -> bool:
    """Whether a preset decides claims, and so offers named budgets and a seed count."""
    return bool(CLAIMS.get(preset))


#: How a budget's name reads in a sentence.
BUDGET_TITLES = {"gpu": "GPU"}


def budget_names(preset: str) -> list[str]:
    """The budgets the form offers for a preset, smallest first: its named ones (classroom, thorough, and gpu where
    its thorough had to shrink to fit an hour on a CPU) and custom; [] for a preset without claims."""
    return [*BUDGETS[preset], CUSTOM] if offers_budgets(preset) else []


def bigger_budget(preset: str, budget: str) -> str | None:
    """The next named budget a preset offers above ``budget`` (custom counts as classroom), or None at the top."""
    names = list(BUDGETS.get(preset, {}))
    at = 0 if budget == CUSTOM else names.index(budget) + 1 if budget in names else len(names)
    later = names[max(at, 1):]
    return later[0] if later else None


def budget_for(preset: str, budget: str) -> Budget | None:
    """The named budget a preset spends, or None where the form's steps, batch and length apply (custom, or a
    preset without claims).

    Raises:
        InvalidConfig: a budget the preset does not have.
    """
    if not offers_budgets(preset) or budget == CUSTOM:
        return None
    return budget_of(preset, budget)


def record_for(preset: str, budget: str) -> tuple[str, str] | None:
    """What the page says before Start about a named budget: (kind, text), kind ``decides``, ``does not decide`` or
    ``untried``, the text with its bench file and, for a budget known not to decide, the one that does; None for
    custom budgets and presets without claims."""
    if budget_for(preset, budget) is None:
        return None
    rec = record_of(preset, budget)
    kind = "decides" if rec.decides else "does not decide" if rec.decides is False else "untried"
    text = f"Here: {rec.said}" + (f" (`{rec.file}`)" if rec.file else "") + "."
    if rec.detectable:
        text += f" Smallest effect its seeds detect (80% power, from the spread measured here): {rec.detectable}."
    if rec.decides is False:
        better = [b for b in BUDGETS.get(preset, {}) if b != budget and record_of(preset, b).decides]
        text += (f" The {BUDGET_TITLES.get(better[0], better[0])} budget decided it." if better else
                 " No budget offered here has decided it on this project's machines yet.")
    return kind, text


def preview(request: LabRequest, history: Any = None, now: dt.datetime | None = None) -> RunPlan:
    """Plan and price every run ``request`` would start, validated whole, without storing anything.

    ``history``: the lab's runs as already read (:func:`analysis.results_db.runs.list_runs`, pre-training only), for
    this server's pace; None reads them.

    Raises:
        InvalidConfig: an unknown preset or budget, sizes or seeds out of bounds, more runs than the queue holds, a
        name that cannot be a folder;
        InvalidData: a corpus that cannot be read.
    """
    spend = budget_for(request.preset, request.budget)
    base = replace(request.config, masking=request.config.masking or "dynamic", corpus=request.config.corpus or "wordnet")
    if spend:
        base = apply_budget(base, spend)
    seeds = spend.seeds if spend else (request.seeds if offers_budgets(request.preset) else 1)
    group = request.name or f"{request.preset}-{now or dt.datetime.now():%m%d-%H%M%S}"
    planned = plan_runs(request.preset, base, group, seeds, spend.widths if spend else None)
    if len(planned) > MAX_QUEUED:  # the queue would refuse it at Start: say so with the plan, and what fits
        per_seed = max(1, len(planned) // seeds)
        raise InvalidConfig(f"This experiment is {len(planned)} runs ({per_seed} per seed × {seeds} seeds); the "
                            f"server's queue holds {MAX_QUEUED}.",
                            f"Use at most {max(1, MAX_QUEUED // per_seed)} seed(s), or a named budget.")
    runs = tuple(PlannedRun(p.name, p.config, size(p.config)) for p in planned)
    pace = flops_per_second(history) if history is not None else server_pace()
    return RunPlan(request.preset, group, base, seeds, spend, runs, memory_budget_mb(), pace, bool(request.config.corpus))


def start(plan: RunPlan, engine: Any = None) -> list[int]:
    """Queue the runs of a plan from :func:`preview` (all or none) and start what the slots allow; return their ids.

    A named budget queues the preset as an ablation (its seeds and downstream suite, :func:`services.lab.experiments.submit`);
    a custom one queues the form's runs, with the classroom downstream suite where the preset's claims are decided
    downstream.

    Raises:
        InvalidData: no usable corpus; InvalidConfig: a run over the memory limit, or what the queue refuses;
        QueueFull, DuplicateRun: from the queue.
    """
    if not plan.has_corpus:
        raise InvalidData("No usable text file was uploaded.", "Upload a usable text file, or pick the WordNet corpus.")
    if plan.too_big:
        raise InvalidConfig(f"Too large for this server: {', '.join(plan.too_big)} would need more than "
                            f"{plan.memory_budget_mb:,} MB.", "Make the model, the batch or the sequence smaller.")
    if plan.budget:
        return submit_experiment(plan.preset, plan.base, plan.group, plan.budget.name, engine=engine)
    decided = CLAIMS.get(plan.preset, ())
    suite = CLASSROOM_SUITE if any(claim.measure == "downstream" for claim in decided) else None
    return submit(plan.preset, plan.base, plan.group, engine, seeds=plan.seeds, downstream=suite, budget=CUSTOM)
