"""What an experiment's report is (:class:`Report`, one :class:`ClaimEntry` per claim decided; the page, the API and
``bench/verdicts.py`` read these), and the two steps every claim's entry shares: no verdict while the experiment is
incomplete, and a decision whose refusal is the entry's reason."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any

from analysis.verdicts.labels import Label
from core.errors import ExplorerError


class ExperimentState(StrEnum):
    """Where an experiment stands (its report's ``state``): no runs (``empty``), runs still queued or training
    (``running``), every run ended but some not finished (``partial``: no verdict), every run finished
    (``complete``: decided), or its runs deleted after its verdict was stored (``gone``: the stored verdict is shown)."""

    EMPTY = "empty"
    RUNNING = "running"
    PARTIAL = "partial"
    COMPLETE = "complete"
    GONE = "gone"


def undecided(out: dict[str, Any], state: str) -> bool:
    """Whether ``state`` (the experiment's) gives no verdict yet; if so ``out["why_none"]`` says why."""
    if state == ExperimentState.COMPLETE:
        return False
    out["why_none"] = ("the experiment is still running" if state == ExperimentState.RUNNING else
                       "some runs did not finish (partial results, no verdict)")
    return True


def decided(out: dict[str, Any], decide: Callable[[], Any]) -> Any | None:
    """``decide()``'s verdict put in ``out`` (``verdict`` as a dict, ``sentence``) and returned; where the library
    refuses to decide (too few seeds or points: an ExplorerError), None with ``out["why_none"]`` its message."""
    try:
        v = decide()
    except ExplorerError as err:
        out["why_none"] = str(err)
        return None
    out["verdict"] = v.to_dict()
    out["sentence"] = v.sentence
    return v


#: The chart of an entry stored before entries named theirs (``figure``: the claim's kind), by its measure.
_FIGURE_OF_MEASURE = {"mutransfer": "transfer", "retention": "ratio", "speedup": "ratio", "scaling": "trend", "isoflop": "trend"}


def _stored(name: str, doc: str, default: str = "") -> property:
    """A text field of a stored claim (``default`` where it is missing or empty)."""
    return property(lambda self: str(self.fields.get(name) or default), doc=doc)


@dataclass(frozen=True)
class StoredClaim:
    """The claim an entry was decided on, as stored with it (``dataclasses.asdict`` of a
    :class:`services.lab.claims.Claim`), read through typed attributes. ``fields`` is the stored dict itself, written
    back unchanged (a kind's own fields, such as a ratio claim's ``band``, stay in it); an entry stored without a
    claim reads as empty strings."""

    fields: Mapping[str, Any] = field(default_factory=dict)

    statement = _stored("statement", "What the paper says, in a sentence.")
    source = _stored("source", "Paper, table and split.")
    measure = _stored("measure", "The measure the claim is decided on.")
    a = _stored("a", "The arm the claim is about (``a op b``).")
    b = _stored("b", "The arm it is compared with.")
    op = _stored("op", "``>`` (beats) or ``>=`` (at most ``margin`` worse).", ">")

    @property
    def margin(self) -> float | None:
        m = self.fields.get("margin")
        return None if m is None else float(m)


def _typed(cls: type) -> set[str]:
    return {f.name for f in fields(cls)} - {"detail", "given", "nulls"}


@dataclass
class ClaimEntry:
    """One claim's entry in a report: the claim as decided (``claim``: :class:`StoredClaim`, its statement, source,
    arms, operator and margin), the measure, the verdict and the sentence that says it, or ``why_none``.

    The fields every kind of claim fills are typed here; what a kind measured for its chart (an arm claim's per-seed
    ``scores`` and random-init ``controls``, a trend's or a ratio's ``points``, its ``run_ids``, ...) is ``detail``.
    ``figure`` names the chart (the claim's kind: ``arms``, ``trend``, ``ratio``, ``transfer``); ``primary``: the
    paper's own measure (else exploratory, Bonferroni over ``family``); ``holm``: where several primaries of one
    preset were adjusted together; ``label``: the measure's name as the page heads it (the verdict's label is
    :attr:`verdict_label`). Stored as :meth:`to_dict` (the verdicts table's payload), read with :meth:`from_dict`, which
    also reads entries stored before ``figure`` existed; a payload read and written again keeps its keys and values."""

    key: str
    claim: StoredClaim = field(default_factory=StoredClaim)
    measure: str = ""
    figure: str = "arms"
    label: str = ""
    primary: bool = True
    family: int = 1
    verdict: dict[str, Any] | None = None
    sentence: str = ""
    why_none: str = ""
    holm: dict[str, int] | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    #: The typed keys the dict it was read from had, and those of them that were null (written back as they were).
    given: frozenset[str] = field(default=frozenset(), repr=False, compare=False)
    nulls: frozenset[str] = field(default=frozenset(), repr=False, compare=False)

    @property
    def verdict_label(self) -> Label | None:
        """The verdict's label, None before a verdict (or for a label this version does not know)."""
        label = self.verdict.get("label") if self.verdict else None
        return Label(label) if label in Label._value2member_map_ else None

    @classmethod
    def from_dict(cls, payload: dict[str, Any]) -> ClaimEntry:
        """An entry from its dict (built by a claim, or stored): the typed fields by name, the rest as ``detail``."""
        typed = _typed(cls)
        values = {k: v for k, v in payload.items() if k in typed and (v is not None or k == "verdict")}
        if "claim" in values:
            values["claim"] = StoredClaim(values["claim"] if isinstance(values["claim"], Mapping) else {})
        out = cls(**values,
                  detail={k: v for k, v in payload.items() if k not in typed}, given=frozenset(typed & set(payload)),
                  nulls=frozenset(k for k in typed & set(payload) if payload[k] is None))
        if not payload.get("figure"):
            out.figure = _FIGURE_OF_MEASURE.get(out.measure, "arms")
        return out

    def to_dict(self) -> dict[str, Any]:
        """The entry as one flat JSON-able dict (what is stored, what the API answers, what the charts read)."""
        defaults = {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(self)
                    if f.default is not MISSING or f.default_factory is not MISSING}
        flat = {k: None if k in self.nulls and getattr(self, k) == defaults.get(k) else getattr(self, k)
                for k in _typed(type(self)) if k in self.given or k == "key" or getattr(self, k) != defaults.get(k)}
        if isinstance(flat.get("claim"), StoredClaim):
            flat["claim"] = dict(flat["claim"].fields)
        return {**flat, **self.detail}


@dataclass
class ArmSpend:
    """What one arm's runs spent: how many, their training FLOPs and their seconds pre-training and fine-tuning."""

    runs: int = 0
    flops: float = 0.0
    pretrain_seconds: float = 0.0
    downstream_seconds: float = 0.0


@dataclass
class Report:
    """One experiment (:func:`services.lab.experiments.report`): where it stands, its runs (rows of the runs table,
    each with its ``arm``, ``flops`` and size), what each arm spent, and one :class:`ClaimEntry` per claim decided.

    ``preset`` and its ``title``/``paper``/``finding``; ``seeds`` per arm and ``budget`` (its name; ``custom``: the form's
    own steps; empty in a report with no runs); ``suite``: the
    downstream suite its runs were scored on (None: none); ``missing``: runs that ended unfinished; ``waiting``: runs
    still queued or training; ``family``: the exploratory comparisons adjusted together; ``note``: why a stored
    verdict is shown instead of one computed from the runs; ``plan_note``: where its runs follow none of the preset's
    budgets as they are now, a sentence saying so (:func:`services.lab.experiments.budget_plan`)."""

    group: str
    state: ExperimentState
    preset: str = ""
    title: str = ""
    paper: str = ""
    finding: str = ""
    seeds: int = 0
    budget: str = ""
    suite: dict[str, Any] | None = None
    runs: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    waiting: int = 0
    arms: dict[str, ArmSpend] = field(default_factory=dict)
    claims: list[ClaimEntry] = field(default_factory=list)
    family: int = 0
    note: str = ""
    plan_note: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able dicts (the API's answer; the runs' rows as they are, not copied): entries flat, as
        stored. A report with no runs (``empty``, ``gone``) says only what it has: no seeds, budget or spend."""
        out: dict[str, Any] = {"group": self.group, "state": str(self.state)}
        if self.state in (ExperimentState.EMPTY, ExperimentState.GONE):
            out.update({"preset": self.preset} if self.preset else {})
        else:
            out.update(preset=self.preset, seeds=self.seeds, budget=self.budget, suite=self.suite, waiting=self.waiting)
            if self.title:
                out.update(title=self.title, paper=self.paper, finding=self.finding)
            out.update(arms={arm: asdict(a) for arm, a in self.arms.items()}, family=self.family)
        out.update(claims=[c.to_dict() for c in self.claims], runs=self.runs, missing=self.missing)
        if self.note:
            out["note"] = self.note
        if self.plan_note:
            out["plan_note"] = self.plan_note
        return out
