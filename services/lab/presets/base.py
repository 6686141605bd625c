"""What a lab preset is (:class:`Preset`: its runs, its paper's claims, its budgets, how its runs are read), the
bounds every preset's plan keeps, and the pieces several presets' runs share (a set of widths, the budgets most
presets spend). Each preset is one file beside this one; :mod:`services.lab.presets` registers them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

from models.pretrain.config import TrainConfig
from models.run_config import RUN_NAME
from services.lab.claims import CLASSROOM_SUITE, THOROUGH_SUITE, Budget, Claim, minutes

MAX_STEPS = 20_000  # per run from the page (the library allows more, from a shell)
MAX_SEEDS = 10
NAME = RUN_NAME  # what a run or experiment name may be: a folder name under trained/

Runs = Callable[..., list[tuple[str, TrainConfig]]]


@dataclass(frozen=True)
class Preset:
    """An ablation in miniature, whole: the runs it starts from a base configuration (``runs(base)``, or
    ``runs(base, widths)`` for a preset with ``widths``), what its paper found, the claims its runs decide (each
    claim's kind says how: :class:`services.lab.claims.Claim`) and the budgets it offers (by name).

    ``widths``: the model widths its runs take by default, for a preset whose sizes a budget or the user may replace
    (at least ``least_widths`` of them); empty for the others. ``divergence_is_a_result``: its grid reaches rates at
    which a run diverges by design (the top of μTransfer's rate grid under SP), so a run the loop stopped on a NaN or
    infinite loss is a result there (an infinite held-out loss), not a missing run. ``arm_budget``: where each arm
    names the compute budget it spends (IsoFLOP's ``c0.5-h64``), that part of an arm's name (None: not one).
    ``single_run``: one run of the form's own objective and masking (the page offers them), named after the
    experiment alone, with nothing to compare and so no seeds to keep apart."""

    name: str
    title: str
    paper: str  # the source of the finding
    finding: str
    runs: Runs
    claims: tuple[Claim, ...] = ()
    budgets: dict[str, Budget] = field(default_factory=dict)
    widths: tuple[int, ...] = ()
    least_widths: int = 0
    divergence_is_a_result: bool = False
    arm_budget: Callable[[str], str | None] | None = None
    single_run: bool = False

    @property
    def charts_sizes(self) -> bool:
        """Its runs are the points of a size chart: it decides a trend over its widths (scaling, IsoFLOP)."""
        return any(c.figure == "trend" for c in self.claims)


def at_widths(base: TrainConfig, widths: tuple[int, ...]) -> list[tuple[str, TrainConfig]]:
    """The base run at each width (``h<width>``; the FFN 4×, the heads kept where the width allows), as a masked LM
    where the base's objective is not one the width presets compare (ELECTRA, permutation or causal LM)."""
    return [(f"h{h}", replace(base, objective=base.objective if base.objective not in ("electra", "plm", "clm") else "mlm",
                              hidden=h, ffn=4 * h, heads=min(base.heads, h // 16) or 1)) for h in widths]


#: The named budgets, smallest first: *classroom* fits a lesson on a 2-core CPU (minutes), *thorough* about an hour
#: on one, *gpu* the paper-sized budget of the presets whose thorough had to shrink to fit that hour (hours on a CPU,
#: minutes on a GPU through the headless worker: docs/deploy.md).
BUDGET_NAMES = ("classroom", "thorough", "gpu")
#: The budget of runs that spend the form's own steps, batch and length: a preset's custom budget, and every run of a
#: preset without claims (stored as "" before this name; :class:`services.lab.run_queue.LabRun` reads that as this).
CUSTOM = "custom"


def budgets(preset: str, classroom: dict, thorough: dict, gpu: dict | None = None) -> dict[str, Budget]:
    """A preset's classroom, thorough and (where it has one) GPU budgets from their settings
    (:class:`services.lab.claims.Budget`'s fields but the name), each with its measured minutes
    (:func:`services.lab.claims.minutes`)."""
    return {name: Budget(name, **settings, minutes=minutes(preset, name))
            for name, settings in zip(BUDGET_NAMES, (classroom, thorough, gpu), strict=True) if settings is not None}


def width_budgets(preset: str, steps: tuple[int, int, int], widths: tuple[int, ...],
                  thorough_widths: tuple[int, ...] = (16, 32, 64, 128)) -> dict[str, Budget]:
    """The budgets of a preset over several widths (scaling, IsoFLOP), decided on held-out loss: classroom 2 seeds ×
    ``steps[0]`` steps of 32 at widths 16–64; thorough 3 seeds × ``steps[1]`` steps of 64 at ``thorough_widths`` (an
    hour on a 2-core CPU); gpu 3 seeds × ``steps[2]`` steps of 64 at ``widths``."""
    shape = {"batch": 64, "seq_len": 64, "downstream": None}
    return budgets(preset, {"seeds": 2, "steps": steps[0], "batch": 32, "seq_len": 64, "downstream": None, "widths": (16, 32, 64)},
                   {"seeds": 3, "steps": steps[1], **shape, "widths": thorough_widths},
                   {"seeds": 3, "steps": steps[2], **shape, "widths": widths})


#: The budgets of the presets that compare arms at one size: 3 seeds × 300 steps of 32 in a lesson, 5 × 3,000 of 64
#: when there is time; with the downstream suite where their claims are downstream scores.
CLASSROOM = {"seeds": 3, "steps": 300, "batch": 32, "seq_len": 64}
THOROUGH = {"seeds": 5, "steps": 3000, "batch": 64, "seq_len": 64}


def standard_budgets(preset: str, downstream: bool, thorough: dict | None = None) -> dict[str, Budget]:
    """:data:`CLASSROOM` and :data:`THOROUGH`, with the classroom and thorough downstream suites or none. A preset
    whose :data:`THOROUGH` takes well over an hour on a 2-core CPU passes the ``thorough`` that fits (seeds, steps);
    :data:`THOROUGH` is then its *gpu* budget."""
    suite = THOROUGH_SUITE if downstream else None
    if thorough is None:
        return budgets(preset, {**CLASSROOM, "downstream": CLASSROOM_SUITE if downstream else None}, {**THOROUGH, "downstream": suite})
    return budgets(preset, {**CLASSROOM, "downstream": CLASSROOM_SUITE if downstream else None},
                   {**THOROUGH, **thorough, "downstream": suite}, {**THOROUGH, "downstream": suite})
