"""What a lab preset is (:class:`Preset`: its runs, its paper's claims, its budgets, how its runs are read), the
bounds every preset's plan keeps, and the pieces several presets' runs share (a set of widths, the budgets most
presets spend). Each preset is one file beside this one; :mod:`services.lab.presets` registers them."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from models.pretrain.config import TrainConfig
from models.run_config import RUN_NAME
from services.lab.claims import CLASSROOM_SUITE, THOROUGH_SUITE, Budget, Claim, minutes

MAX_STEPS = 20_000  # per run from the page (the library allows more, from a shell)
MAX_SEEDS = 10
NAME = RUN_NAME  # what a run or experiment name may be: a folder name under trained/

Runs = Callable[..., list[tuple[str, TrainConfig]]]
#: A tuning arm's name: the arm it tunes, then its rate's code (``lion-lr2e-12``: Lion at 2^-12).
RATE_MARK = "-lr"


@dataclass(frozen=True)
class Tuning:
    """A preset whose arms are each tuned over a rate sweep before they are compared (Lion against AdamW, "each at its
    own tuned rate"). Its runs function names each arm once (``lion``: the verdict's run) and once per rate of the sweep
    (``lion-lr2e-12``); replicates below ``replicates`` (the validation seeds) train the sweep, the others (fresh
    seeds) train each arm once, at the rate the validation seeds chose, decided when the run starts
    (:func:`services.lab.training.work`): rates never chosen are never trained on a fresh seed.

    The rule (:meth:`choose`): the rate of the lowest mean held-out loss over the validation replicates (of equal
    means, the lowest rate); a rate with a diverged, failed or missing validation run is never chosen."""

    replicates: int = 2
    #: the sweep, as log2 rates (its ends are flagged when chosen: the best rate may lie beyond them)
    log2_rates: tuple[int, ...] = ()

    @property
    def codes(self) -> tuple[str, ...]:
        """The sweep's rates as the codes in its tuning arms' names (``2e-12``), lowest first."""
        return tuple(f"2e{k}" for k in sorted(self.log2_rates))

    @property
    def ends(self) -> tuple[str, ...]:
        """The codes of the sweep's lowest and highest rates (a rate chosen there may have its best beyond it)."""
        return (self.codes[0], self.codes[-1]) if self.codes else ()

    @staticmethod
    def split(arm: str) -> tuple[str, str]:
        """(the arm tuned, the rate's code) of a tuning arm's name; (arm, "") for a verdict arm."""
        name, mark, code = arm.partition(RATE_MARK)
        return (name, code) if mark and code else (arm, "")

    def trains(self, replicate: int, arm: str) -> bool:
        """Whether a replicate trains this arm: the sweep on the validation seeds, each arm once on the others."""
        return bool(self.split(arm)[1]) == (replicate < self.replicates)

    def choose(self, arm: str, finished: list[dict]) -> tuple[str | None, dict[str, float]]:
        """(the chosen rate's code or None, the mean validation loss per rate: infinite where a run diverged, failed
        or is missing) for ``arm``, from its validation replicates' finished runs (``finished``: rows with ``arm``,
        ``replicate`` and ``evaluation``; only finished ones: a run the loop stopped on a NaN loss is evaluated at its
        last good weights, a finite loss that must not choose its rate)."""
        seen: dict[str, list[float]] = {}
        for r in sorted(finished, key=lambda r: r["replicate"]):  # the same sum whatever order the rows come in
            name, code = self.split(str(r["arm"]))
            if name == arm and code and r["replicate"] < self.replicates:
                loss = (r.get("evaluation") or {}).get("held_out_loss")
                ok = isinstance(loss, int | float) and not isinstance(loss, bool) and math.isfinite(loss)
                seen.setdefault(code, []).append(float(loss) if ok else math.inf)
        means = {code: (math.fsum(v) / len(v) if len(v) == self.replicates else math.inf) for code, v in seen.items()}
        for code in self.codes:
            means.setdefault(code, math.inf)  # a rate none of whose runs finished
        finite = {k: v for k, v in means.items() if math.isfinite(v)}
        return (min(finite, key=lambda c: (finite[c], self.rate(c))) if finite else None), means

    def ran(self, finished: list[dict]) -> Tuning:
        """The sweep an experiment's runs (``finished``: rows with ``arm`` and ``replicate``) trained: this one, or
        for an experiment queued before the two stages (a tuning arm trained on a fresh seed: every rate on every
        seed, over the sweep of its day) the rates its runs name, so that its missing rates and its sweep's ends are
        its own."""
        codes = [(self.split(str(r["arm"]))[1], r["replicate"]) for r in finished]
        if not any(code and replicate >= self.replicates for code, replicate in codes):
            return self
        return replace(self, log2_rates=tuple(sorted({round(math.log2(self.rate(code))) for code, _ in codes if code})))

    def seeds_use(self, seeds: int | None) -> str:
        """How an experiment of ``seeds`` seeds spends them, as the page says it."""
        rest = f"the other {max(0, seeds - self.replicates)}" if seeds else "the others"
        return f"the first {self.replicates} tune each rate, {rest} decide"

    @staticmethod
    def rate(code: str) -> float:
        """A rate from its code (``2e-11`` → 2^-11)."""
        return 2.0 ** float(code.split("e", 1)[1])

    @staticmethod
    def power(code: str | None) -> str:
        """A code as the page writes its rate (``2e-11`` → ``2^-11``; ``2^?`` for none)."""
        return f"2^{code.split('e', 1)[1]}" if code else "2^?"


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
    experiment alone, with nothing to compare and so no seeds to keep apart. ``tuning``: its arms are tuned over a
    rate sweep on validation seeds and compared on fresh ones (:class:`Tuning`)."""

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
    tuning: Tuning | None = None

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
                  thorough_widths: tuple[int, ...] = (16, 32, 64, 128), thorough_seeds: int = 3) -> dict[str, Budget]:
    """The budgets of a preset over several widths (scaling, IsoFLOP), decided on held-out loss: classroom 2 seeds ×
    ``steps[0]`` steps of 32 at widths 16–64; thorough ``thorough_seeds`` × ``steps[1]`` steps of 64 at
    ``thorough_widths`` (an hour on a 2-core CPU); gpu 3 seeds × ``steps[2]`` steps of 64 at ``widths``."""
    shape = {"batch": 64, "seq_len": 64, "downstream": None}
    return budgets(preset, {"seeds": 2, "steps": steps[0], "batch": 32, "seq_len": 64, "downstream": None, "widths": (16, 32, 64)},
                   {"seeds": thorough_seeds, "steps": steps[1], **shape, "widths": thorough_widths},
                   {"seeds": 3, "steps": steps[2], **shape, "widths": widths})


#: The budgets of the presets that compare arms at one size: 3 seeds × 300 steps of 32 in a lesson, 5 × 3,000 of 64
#: when there is time; with the downstream suite where their claims are downstream scores.
CLASSROOM = {"seeds": 3, "steps": 300, "batch": 32, "seq_len": 64}
THOROUGH = {"seeds": 5, "steps": 3000, "batch": 64, "seq_len": 64}


def standard_budgets(preset: str, downstream: bool, thorough: dict | None = None, classroom: dict | None = None,
                     suite: dict | None = None) -> dict[str, Budget]:
    """:data:`CLASSROOM` and :data:`THOROUGH`, with the classroom and thorough downstream suites or none. A preset
    whose :data:`THOROUGH` takes well over an hour on a 2-core CPU passes the ``thorough`` that fits (seeds, steps);
    :data:`THOROUGH` is then its *gpu* budget. ``classroom``: what a preset's lesson changes of :data:`CLASSROOM`
    (DistilBERT's seeds). ``suite``: the thorough and GPU budgets' downstream suite where a preset's is not
    :data:`THOROUGH_SUITE` (DistilBERT's, without the task its teacher cannot do)."""
    suite = (suite or THOROUGH_SUITE) if downstream else None
    lesson = {**CLASSROOM, **(classroom or {}), "downstream": CLASSROOM_SUITE if downstream else None}
    if thorough is None:
        return budgets(preset, lesson, {**THOROUGH, "downstream": suite})
    return budgets(preset, lesson, {**THOROUGH, **thorough, "downstream": suite}, {**THOROUGH, "downstream": suite})
