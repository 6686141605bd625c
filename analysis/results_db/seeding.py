"""The published results in ``data/results/``: loading them on first start, upgrading them when they change.

:func:`ensure_seeded` is idempotent and safe to call on every page run and from many processes at
once: the usual case is one read (the schema revision and seed version are current); otherwise the
tables are created or migrated (:mod:`.migrate`, Alembic) and the data loaded in a single write
transaction that other processes wait for (SQLite's write lock, taken up front; a PostgreSQL advisory
lock), so a fresh database opened by several workers at the same moment is set up once and every
worker succeeds.
"""

from __future__ import annotations

import csv
import datetime as dt
import functools
import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, delete, insert, select, text
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from analysis.results_db.engine import SEEDED, explain, get_engine, is_missing_table, session, write
from analysis.results_db.migrate import HEAD, VERSION_TABLE, refuse_newer, take_schema_lock, upgrade_schema
from analysis.results_db.schema import SCHEMA_VERSION, Meta, Metric, Model, Result, Source, Task

DATA_DIR = Path(__file__).resolve().parent.parent.parent / "data" / "results"


@functools.cache
def _manifest() -> dict[str, Any]:
    return json.loads((DATA_DIR / "manifest.json").read_text(encoding="utf-8"))


def seed_version() -> str:
    """The version of the seed data in ``data/results/manifest.json``."""
    return _manifest()["version"]


def _read(name: str) -> list[dict[str, str]]:
    with open(DATA_DIR / name, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def seed_rows() -> dict[str, list[dict[str, str]]]:
    """The seed CSVs as lists of dicts: ``sources``, ``tasks``, ``metrics``, ``models``, ``results``."""
    manifest = _manifest()
    out = {name.removesuffix(".csv"): _read(name) for name in manifest["reference"]}
    out["results"] = [row for name in manifest["results"] for row in _read(name)]
    return out


@functools.cache
def seed_source_keys() -> frozenset[str]:
    """The keys of the published sources (lower case): a user's result may not cite one of them."""
    return frozenset(r["key"].lower() for r in seed_rows()["sources"])


@dataclass
class SeedReport:
    """What :func:`ensure_seeded` did."""

    version: str
    inserted: int = 0
    updated: int = 0
    deleted: int = 0
    kept_user: list[str] = field(default_factory=list)
    skipped: bool = False


def _float(text_value: str) -> float | None:
    return float(text_value) if text_value.strip() != "" else None


def _int(text_value: str) -> int | None:
    return int(float(text_value)) if text_value.strip() != "" else None


def _date(text_value: str) -> dt.date | None:
    return dt.date.fromisoformat(text_value) if text_value.strip() else None


def _record_schema_version(s: Session) -> None:
    """Write the schema version to ``bfe_meta`` too: an older app reads it there and refuses a newer schema."""
    row = s.get(Meta, "schema_version")
    if row is None:
        s.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
    else:
        row.value = str(SCHEMA_VERSION)


def _is_current(engine: Engine, version: str) -> bool:
    """Whether the tables exist, migrated to the current revision, with this seed version (one read, no write lock)."""
    try:
        with engine.connect() as conn, conn.begin(), Session(bind=conn) as s:
            schema, seeded = s.get(Meta, "schema_version"), s.get(Meta, "seed_version")
            revision = s.scalar(text(f"SELECT version_num FROM {VERSION_TABLE}"))  # a database from before Alembic has none
    except DBAPIError as err:
        if is_missing_table(err):
            return False
        raise explain(err) from None
    if schema is not None and int(schema.value) > SCHEMA_VERSION:
        refuse_newer(schema.value)
    return (revision == HEAD and schema is not None and int(schema.value) == SCHEMA_VERSION
            and seeded is not None and seeded.value == version)


def ensure_seeded(engine: Engine | None = None, force: bool = False) -> SeedReport:
    """Create or migrate the tables and load (or upgrade) the seed data. Idempotent and safe to call on every page run.

    Seed rows are matched by their natural keys, so re-running never duplicates; seed rows that left
    the data are deleted, changed ones updated; rows a user added (``origin='user'``) are never
    touched, and a seed row that collides with a user's row is skipped (the user's row wins).

    Raises:
        DatabaseUnavailable: the database cannot be created or written, or is from a newer version.
    """
    engine = engine or get_engine()
    cache_key = str(engine.url)
    version = seed_version()
    if not force and cache_key in SEEDED:
        return SeedReport(version, skipped=True)
    if not force and _is_current(engine, version):
        SEEDED.add(cache_key)
        return SeedReport(version, skipped=True)

    def apply(s: Session) -> SeedReport:
        report = SeedReport(version)
        take_schema_lock(s.connection())
        # Inside the write transaction: on SQLite the lock is already held (BEGIN IMMEDIATE), on
        # PostgreSQL the advisory lock; a peer that migrated the tables first is simply seen here.
        # A fresh database is built by the migrations from 0001, not by create_all and a stamp: every
        # database, new or upgraded, then has the same DDL (create_all would leave out the server
        # defaults that 0005 gives the columns it adds to existing rows), and every new install runs
        # the migrations the upgrades rely on.
        upgrade_schema(s.connection())
        _record_schema_version(s)
        current = s.get(Meta, "seed_version")
        if current is not None and current.value == version and not force:
            report.skipped = True
            return report
        _apply_seed(s, seed_rows(), report)
        if current is None:
            s.add(Meta(key="seed_version", value=version))
        else:
            current.value = version
        return report

    report = write(engine, apply)
    SEEDED.add(cache_key)
    return report


def _upsert(s: Session, cls, key_attrs: Sequence[str], rows: Iterable[dict[str, Any]]) -> dict[tuple, Any]:
    existing = {tuple(getattr(o, a) for a in key_attrs): o for o in s.scalars(select(cls))}
    for row in rows:
        key = tuple(row[a] for a in key_attrs)
        obj = existing.get(key)
        if obj is None:
            obj = cls(**row, origin="seed")
            s.add(obj)
            existing[key] = obj
        elif obj.origin == "seed":
            for attr, value in row.items():
                if getattr(obj, attr) != value:
                    setattr(obj, attr, value)
    s.flush()
    return existing


def _apply_seed(s: Session, data: dict[str, list[dict[str, str]]], report: SeedReport) -> None:
    sources = _upsert(s, Source, ["key"], (
        dict(key=r["key"], title=r["title"], authors=r["authors"], year=_int(r["year"]), arxiv=r["arxiv"] or None,
             venue=r["venue"], url=r["url"], note=r["note"]) for r in data["sources"]))
    tasks = _upsert(s, Task, ["key"], (
        dict(key=r["key"], name=r["name"], benchmark=r["benchmark"], kind=r["kind"], description=r["description"],
             train_size=r["train_size"], test_size=r["test_size"], domain=r["domain"], metrics=r["metrics"], source=r["source"])
        for r in data["tasks"]))
    metrics = _upsert(s, Metric, ["task_id", "key"], (
        dict(task_id=tasks[(r["task"],)].id, key=r["key"], name=r["name"], lower=_float(r["lower"]), upper=_float(r["upper"]),
             higher_is_better=r["higher_is_better"] == "1", note=r["note"]) for r in data["metrics"]))
    models = _upsert(s, Model, ["name"], (
        dict(name=r["name"], family=r["family"], parameters=_int(r["parameters"]), catalog_id=r["catalog_id"] or None, note=r["note"])
        for r in data["models"]))
    task_key = {t.id: key[0] for key, t in tasks.items()}
    metric_id = {(task_key[task_id], key): m.id for (task_id, key), m in metrics.items()}
    wanted: dict[tuple, dict[str, Any]] = {}
    for r in data["results"]:
        row = dict(model_id=models[(r["model"],)].id, variant=r["variant"], metric_id=metric_id[(r["task"], r["metric"])],
                   split=r["split"], setting=r["setting"], value=float(r["value"]), source_id=sources[(r["source"],)].id,
                   source_table=r["table"], slides=r["slides"], snapshot=_date(r["snapshot"]), note=r["note"])
        wanted[_result_key(row)] = row
    have = {_result_key(vars(o)): o for o in s.scalars(select(Result))}
    inserts = []
    for key, row in wanted.items():
        obj = have.get(key)
        if obj is None:
            inserts.append(dict(row, origin="seed"))
        elif obj.origin == "user":
            report.kept_user.append(f"{key}")
        elif any(getattr(obj, a) != v for a, v in row.items()):
            for a, v in row.items():
                setattr(obj, a, v)
            report.updated += 1
    stale = [o.id for k, o in have.items() if o.origin == "seed" and k not in wanted]
    if stale:
        s.execute(delete(Result).where(Result.id.in_(stale)))
        report.deleted = len(stale)
    if inserts:
        s.execute(insert(Result), inserts)
        report.inserted = len(inserts)


def _result_key(row: dict[str, Any]) -> tuple:
    return (row["model_id"], row["variant"], row["metric_id"], row["split"], row["setting"], row["source_id"], row["source_table"])


def meta(engine: Engine | None = None) -> dict[str, str]:
    """The ``bfe_meta`` table as a dict (schema_version, seed_version)."""
    engine = engine or get_engine()
    ensure_seeded(engine)
    with session(engine) as s:
        return {m.key: m.value for m in s.scalars(select(Meta))}
