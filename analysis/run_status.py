"""The states a lab run moves through, as stored in ``bfe_runs.status``.

queued → running → finished | failed | cancelled; a run whose process died while running becomes interrupted.
A ``str`` enum, so a member is stored, compared, hashed and written to JSON as its plain value: rows read back
from the database compare equal to the members, and nothing stored changes.
"""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """A lab run's state in the queue."""

    QUEUED = "queued"
    RUNNING = "running"
    FINISHED = "finished"
    FAILED = "failed"
    CANCELLED = "cancelled"
    INTERRUPTED = "interrupted"


#: Runs that still hold a place in the queue or a slot: they cannot be deleted, and a page polls while one exists.
ACTIVE = (RunStatus.QUEUED, RunStatus.RUNNING)
#: What a worker may close its run as (an interrupted run is closed by whoever finds its worker gone).
CLOSED_BY_WORKER = (RunStatus.FINISHED, RunStatus.FAILED, RunStatus.CANCELLED)


def diverged(status: str, message: str | None) -> bool:
    """Whether a run failed because its loss became NaN or infinite (:func:`models.pretrain.loop.train` stops it and
    closes it with that message): a result of a rate sweep that reaches rates too high, not a broken run."""
    return status == RunStatus.FAILED and str(message or "").startswith("The loss became")
