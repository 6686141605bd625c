"""The lab's presets, the papers' ablations in miniature, registered in one table (:data:`PRESETS`), and the runs a
preset plans from a base configuration: each arm × the seeds, validated and named before anything is stored.

A preset is one file beside this one, holding everything that is its own: its runs, its paper's claims (each of a
kind that says how it is decided: :mod:`services.lab.claim_entries`, or the preset's own kind), its budgets, its
constants; :class:`~services.lab.presets.base.Preset` is what it is. Adding one is its file, a line below, and its
tests; what it took and decided here is data (``data/lab/budgets-measured.json``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig
from models.run_config import check_run_name
from services.lab.claims import Budget, Claim
from services.lab.presets import (
    albert,
    bigbird,
    distil,
    electra,
    grow_batch,
    isoflop,
    lion,
    lion_tuned,
    mutransfer,
    roberta,
    scaling,
    single,
    xlnet,
)
from services.lab.presets.base import MAX_SEEDS, MAX_STEPS, NAME, Preset

__all__ = ["BUDGETS", "CLAIMS", "MAX_SEEDS", "MAX_STEPS", "NAME", "PRESETS", "Planned", "Preset", "budget_of", "plan", "plan_runs"]

#: Every preset by name, in the order the page offers them.
PRESETS: dict[str, Preset] = {p.name: p for p in (single.PRESET, roberta.PRESET, albert.PRESET, electra.PRESET, xlnet.PRESET,
                                                  scaling.PRESET, isoflop.PRESET, lion.PRESET, lion_tuned.PRESET,
                                                  grow_batch.PRESET, bigbird.PRESET, distil.PRESET, mutransfer.PRESET)}
#: Each preset's claims and budgets, read off the registry (the presets that have any).
CLAIMS: dict[str, tuple[Claim, ...]] = {name: p.claims for name, p in PRESETS.items() if p.claims}
BUDGETS: dict[str, dict[str, Budget]] = {name: p.budgets for name, p in PRESETS.items() if p.budgets}


def budget_of(preset: str, name: str) -> Budget:
    """The named budget of a preset. Raises InvalidConfig for an unknown preset or budget."""
    if preset not in BUDGETS or name not in BUDGETS[preset]:
        offered = ", ".join(BUDGETS[preset]) if preset in BUDGETS else "none (it decides no claim)"
        raise InvalidConfig(f"No {name!r} budget for the {preset!r} preset.", f"Its budgets: {offered}.")
    return BUDGETS[preset][name]


@dataclass(frozen=True)
class Planned:
    """One run of a preset: its name, the arm it belongs to, its replicate (0, 1, … for the seeds), its config, and the
    runs it waits for and decides from as it starts (a tuned preset's verdict run: its arm's tuning runs)."""

    name: str
    arm: str
    replicate: int
    config: TrainConfig
    after: tuple[str, ...] = ()


def plan_runs(preset: str, base: TrainConfig, group: str, seeds: int = 1,
              widths: tuple[int, ...] | None = None) -> list[Planned]:
    """Every run a preset would start: each arm × ``seeds`` replicates (seed ``base.seed + i``), validated and named
    ``<group>-<arm>`` (one seed) or ``<group>-<arm>-s<i>``. ``widths`` replaces the scaling presets' sizes. A tuned
    preset (:class:`~services.lab.presets.base.Tuning`) trains its rate sweep on the validation replicates and each arm
    once on the others, after its sweep's runs.

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
    chosen = PRESETS[preset]
    if chosen.widths:  # its sizes: the preset's own, or the budget's or user's in their place
        least = chosen.least_widths
        if widths is not None and not (least <= len(widths) <= 6 and all(isinstance(w, int) and 16 <= w <= 1024 for w in widths)
                                       and len(set(widths)) == len(widths)):
            raise InvalidConfig(f"This preset needs {least} to 6 different widths from 16 to 1,024.")
        arms = chosen.runs(base, chosen.widths if widths is None else widths)
    else:
        arms = chosen.runs(base)
    tuning = chosen.tuning
    if tuning and seeds < tuning.replicates + 2:  # a verdict's interval needs two fresh seeds per arm
        raise InvalidConfig(f"This preset chooses each rate on its first {tuning.replicates} seeds and decides on the others, "
                            f"which need two at least: {tuning.replicates + 2} seeds or more, not {seeds}.")
    out: list[Planned] = []
    labels = {label for label, _ in arms}
    for i in range(seeds):
        names = {label: (group if chosen.single_run else f"{group}-{label}") + (f"-s{i}" if seeds > 1 else "")
                 for label, _ in arms}
        for label, cfg in arms:
            if tuning and not tuning.trains(i, label):
                continue
            arm_teacher = cfg.teacher.removeprefix("trained/") if cfg.teacher.startswith("trained/") else ""
            if arm_teacher in labels:  # a preset's student learns from its teacher arm's run of the same seed
                cfg = replace(cfg, teacher=f"trained/{names[arm_teacher]}")
            after = () if not tuning else tuple(p.name for p in out if tuning.split(p.arm)[0] == label and tuning.split(p.arm)[1])
            out.append(Planned(names[label], label, i, replace(cfg, run=names[label], seed=base.seed + i).validate(), after))
    return out


def plan(preset: str, base: TrainConfig, group: str, seeds: int = 1) -> list[tuple[str, TrainConfig]]:
    """The (run name, config) pairs a preset would start (:func:`plan_runs`)."""
    return [(p.name, p.config) for p in plan_runs(preset, base, group, seeds)]
