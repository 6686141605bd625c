"""Stored verdicts (``bfe_verdicts``): one row per claim of a finished lab preset, upserted by (group, claim), listed
newest first. The payload is JSON: the :class:`analysis.verdicts.Verdict` (or ``TrendVerdict``) as a dict, the
per-seed scores per arm, the run ids and the budget. No torch here."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from sqlalchemy import Engine, select

from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import StoredVerdict
from analysis.results_db.seeding import ensure_seeded


def _engine(engine: Engine | None) -> Engine:
    engine = engine or get_engine()
    ensure_seeded(engine)
    return engine


def store(group: str, preset: str, claim_key: str, label: str, payload: dict[str, Any], engine: Engine | None = None) -> None:
    """Insert or replace the verdict of ``claim_key`` for the runs of ``group``."""
    engine = _engine(engine)
    data = json.dumps(payload, default=str, allow_nan=True)

    def upsert(s) -> None:
        row = s.scalars(select(StoredVerdict).where(StoredVerdict.group == group[:100],
                                                    StoredVerdict.claim_key == claim_key[:60])).first()
        if row is None:
            s.add(StoredVerdict(group=group[:100], preset=preset[:40], claim_key=claim_key[:60], label=label[:40], payload=data))
        else:
            row.label, row.payload, row.preset = label[:40], data, preset[:40]
            row.created_at = dt.datetime.now(dt.UTC).replace(tzinfo=None)

    write(engine, upsert)


def store_missing(group: str, preset: str, items: list[tuple[str, str, dict[str, Any]]],
                  engine: Engine | None = None) -> int:
    """Store those of ``items`` (claim key, label, payload) that ``group`` has no verdict for yet, in one transaction,
    and return how many were added. A verdict already stored keeps its date: it was decided then.

    Several processes may settle one experiment at once (the worker of its last run, a page reading it): the unique
    key (group, claim) makes the loser's transaction roll back and run again, and it then finds the winner's rows.
    """
    engine = _engine(engine)

    def add(s) -> int:
        have = set(s.scalars(select(StoredVerdict.claim_key).where(StoredVerdict.group == group[:100])))
        new = [StoredVerdict(group=group[:100], preset=preset[:40], claim_key=key[:60], label=label[:40],
                             payload=json.dumps(payload, default=str, allow_nan=True))
               for key, label, payload in items if key[:60] not in have]
        s.add_all(new)
        return len(new)

    return write(engine, add)


def _row(v: StoredVerdict) -> dict[str, Any]:
    return {"group": v.group, "preset": v.preset, "claim_key": v.claim_key, "label": v.label,
            "payload": json.loads(v.payload), "created_at": v.created_at}


def for_group(group: str, engine: Engine | None = None) -> list[dict[str, Any]]:
    """The stored verdicts of one experiment, in claim order of storage."""
    engine = _engine(engine)
    with session(engine) as s:
        return [_row(v) for v in s.scalars(select(StoredVerdict).where(StoredVerdict.group == group).order_by(StoredVerdict.id))]


def latest(engine: Engine | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Every stored verdict, newest first (at most ``limit``)."""
    engine = _engine(engine)
    with session(engine) as s:
        query = select(StoredVerdict).order_by(StoredVerdict.created_at.desc(), StoredVerdict.id.desc()).limit(limit)
        return [_row(v) for v in s.scalars(query)]


def delete_group(group: str, engine: Engine | None = None) -> int:
    """Remove an experiment's verdicts; returns how many."""
    engine = _engine(engine)

    def remove(s) -> int:
        rows = list(s.scalars(select(StoredVerdict).where(StoredVerdict.group == group)))
        for r in rows:
            s.delete(r)
        return len(rows)

    return write(engine, remove)
