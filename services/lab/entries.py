"""The two steps every claim's report entry shares (:func:`services.lab.experiments.report`, the μTransfer claim): no
verdict while the experiment is incomplete, and a decision whose refusal is the entry's reason."""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any

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
