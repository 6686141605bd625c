"""What a lab preset's claims and budgets are made of: :class:`Claim` (a paper's claim; each kind of claim says how
it is read off an experiment's runs: :mod:`services.lab.claim_entries`, the μTransfer and tuned presets' own files),
:class:`Budget` (seeds, steps and the downstream suite a budget spends), each claim's :class:`Precondition`, and what
each preset × budget took and decided here (:data:`MEASURED_FILE`, data). Each preset's own claims and budgets are in
its file under :mod:`services.lab.presets`. Types and data, no torch: the lab's page reads them without a model."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

from models.pretrain.config import TrainConfig

DOWNSTREAM_LABELS = {"supersense": "supersense accuracy ({classes} classes)", "wic": "WiC accuracy (2 classes)",
                     "average": "average accuracy over the suite's tasks"}
INTRINSIC_LABELS = {"sop_accuracy": "SOP accuracy (held-out pairs)", "nsp_accuracy": "NSP accuracy (held-out pairs)",
                    "held_out_loss": "Held-out loss", "scaling": "Scaling exponent", "isoflop": "Compute-optimal size",
                    "mutransfer": "Best learning rate across widths (held-out loss)"}
CHANCE = {"sop_accuracy": 0.5, "nsp_accuracy": 0.5, "probe:pos": 0.25}
DATA_LIMITED_TOKENS_PER_PARAMETER = 20  # Hoffmann et al. 2022 (Chinchilla): about 20 tokens per parameter is compute-optimal


@dataclass(frozen=True)
class Reading:
    """What a claim is decided from: an experiment's finished runs (rows of :func:`services.lab.experiments.report`,
    with the diverged runs of a preset whose grid expects them), its state (no verdict before ``complete``), its
    downstream suite, and the size of the preset's exploratory family (Bonferroni)."""

    finished: list[dict[str, Any]]
    state: str
    suite: dict[str, Any] | None = None
    family: int = 1


class Entry(NamedTuple):
    """One report entry of a claim (``entry``: the dict the page draws and the database stores) and, for a primary
    adjusted with the preset's others (Holm, :func:`services.lab.experiments.report`), how to decide it again at a
    family of k; None for a claim that is not adjusted."""

    entry: dict[str, Any]
    redecide: Callable[[int], dict[str, Any]] | None = None


@dataclass(frozen=True)
class Claim:
    """One claim of a paper: arm ``a`` ``op`` arm ``b`` on ``measure``, with its source. A kind of claim (a subclass)
    says how it is read off the runs (:meth:`entries`), which measures it spends (:meth:`measures`), and which chart
    draws it (``figure``). Stored with each verdict as ``dataclasses.asdict`` (``figure`` is not a field)."""

    key: str
    measure: str
    statement: str
    source: str
    a: str = ""
    b: str = ""
    op: str = ">"
    margin: float = 0.0

    #: The chart that draws this kind's entries (the lab page's table of figures): arms, trend, ratio or transfer.
    figure: ClassVar[str] = "arms"

    def measures(self, suite: dict[str, Any] | None) -> list[tuple[str, bool]]:
        """The measures this claim is decided on, each with whether it is the claim's primary one."""
        return [(self.measure, True)]

    def entries(self, reading: Reading) -> list[Entry]:
        """This claim's report entries from an experiment's runs."""
        raise NotImplementedError(f"{type(self).__name__} does not say how it is decided")


@dataclass(frozen=True)
class Precondition:
    """What a claim asks of its arms before any verdict (services.lab.claim_entries.precondition): each arm it applies
    to must beat ``floor`` on the measure measurably (its paired 95% interval over seeds above 0) and materially (by
    at least ``min_gain`` on average). ``floor``: ``counts`` (a loss: the corpus's token counts at the [MASK] inputs,
    where only context tells the word), ``control`` (a downstream or probe score: the same architecture from random
    initialisation), ``chance`` (an intrinsic accuracy: :data:`CHANCE`)."""

    floor: str
    min_gain: float
    why: str


#: Per measure (``downstream:*`` by its prefix). Applies to both arms of a "≥" claim (two models at their floor
#: "match" whatever their method) and to arm ``a`` of a ">" claim (a beats b only if a learnt something).
#: Gains: 0.05 nats is a 5% lower perplexity than the counts'; 0.01 is one point of accuracy.
PRECONDITIONS = {
    "held_out_loss": Precondition("counts", 0.05, "below the corpus's token counts at the [MASK] inputs"),
    "downstream": Precondition("control", 0.01, "above the same architecture from random initialisation"),
    "probe:pos": Precondition("control", 0.01, "above the same architecture from random initialisation"),
    "sop_accuracy": Precondition("chance", 0.01, "above chance (0.5)"),
    "nsp_accuracy": Precondition("chance", 0.01, "above chance (0.5)"),
}


def precondition_of(measure: str) -> Precondition | None:
    """The precondition of a measure (:data:`PRECONDITIONS`); None for one without a floor (a timing)."""
    return PRECONDITIONS.get("downstream" if measure.startswith("downstream:") else measure)


#: A ratio claim's measure → (what the ratio is, the paper's value shown beside it); the floor the claim is decided
#: against is the claim's ``margin``. Retention: the student's over the teacher's downstream average (floor and value
#: the paper's 97%); speed-up: the teacher's over the student's inference time per batch (floor 1: faster at all;
#: value the paper's 668 s / 410 s = 1.63).
RATIO_MEASURES = {"retention": ("student / teacher downstream average", 0.97),
                  "speedup": ("inference speed-up, teacher time / student time per batch", 668 / 410)}


@dataclass(frozen=True)
class Budget:
    """How much a preset spends: seeds, pre-training steps × batch × length, the downstream suite, and (for the
    scaling presets) the widths. ``minutes`` is what it took on the reference machine (measured, or estimated
    from the lab's pace where it says so)."""

    name: str
    seeds: int
    steps: int
    batch: int
    seq_len: int
    downstream: dict[str, Any] | None
    widths: tuple[int, ...] | None = None
    minutes: str = ""


CLASSROOM_SUITE = {"tasks": ["supersense"], "epochs": 3, "max_train": 2000, "max_test": 500}
THOROUGH_SUITE = {"tasks": ["supersense", "wic"], "epochs": 3, "max_train": 6000, "max_test": 1500}
#: What each preset at each budget took and decided here: data, not code (data/lab/budgets-measured.json, which
#: says how each figure was found; the bench outputs it names are committed under bench/results/).
MEASURED_FILE = Path(__file__).resolve().parents[2] / "data" / "lab" / "budgets-measured.json"
_MEASURED: dict[tuple[str, str], dict[str, Any]] = {(e["preset"], e["budget"]): e for e in
                                                     json.loads(MEASURED_FILE.read_text(encoding="utf-8"))["budgets"]}


def minutes(preset: str, budget: str) -> str:
    """What a preset's budget took on the reference machine, in words (:data:`MEASURED_FILE`); "" where never run."""
    return _MEASURED.get((preset, budget), {}).get("minutes", "")


@dataclass(frozen=True)
class Record:
    """What a preset at a budget has decided on this project's machines, from a committed bench output: whether it
    decides its claim, the verdicts (under the current rules), the hardware, and the bench file. Read before Start."""

    decides: bool | None  # True: it reached a decisive label; False: known not to; None: not run to the end here
    said: str
    file: str = ""
    #: The smallest effect the budget's seeds detect with 80% power at a 95% level, from the spread its committed run
    #: measured ((t₀.₉₇₅ + t₀.₈₀) × the effect's standard error, df = seeds − 1): for a "≥" claim, the distance from
    #: the margin it can resolve.
    detectable: str = ""


#: Per (preset, budget), from :data:`MEASURED_FILE` (labels under the rules of issue 54).
DECIDED_HERE: dict[tuple[str, str], Record] = {key: Record(e["decides"], e["said"], e.get("file", ""), e.get("detectable", ""))
                                               for key, e in _MEASURED.items() if "said" in e}


def record_of(preset: str, budget: str) -> Record:
    """What a budget has decided here (:data:`DECIDED_HERE`); a budget never run here says so."""
    return DECIDED_HERE.get((preset, budget), Record(None, "not run to the end on this project's machines yet"))


def apply_budget(base: TrainConfig, budget: Budget) -> TrainConfig:
    """``base`` with the budget's steps, batch and sequence length."""
    return replace(base, steps=budget.steps, batch=budget.batch, seq_len=budget.seq_len)
