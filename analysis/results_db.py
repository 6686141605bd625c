"""The results database: published GLUE/SQuAD/RACE results with provenance, in SQL through SQLAlchemy 2.0.

Tables (typed ORM mappings): :class:`Source` (paper, authors, year, arXiv id), :class:`Model` (name,
family, parameter count, link to ``data/catalog.json``), :class:`Task` and its :class:`Metric` (with
the metric's valid range), :class:`Result` (one number with split, single/ensemble, source table,
leaderboard snapshot date and a note) and :class:`Meta` (schema and seed-data versions).

- :func:`get_engine` builds one engine per URL from the ``DATABASE_URL`` setting: by default a
  SQLite file in the user data folder, opened with WAL journaling, a busy timeout and foreign keys;
  any SQLAlchemy URL works (``postgresql://`` uses psycopg 3).
- :func:`ensure_seeded` loads ``data/results/`` on first start and whenever its version changes.
  It is idempotent, never duplicates, and never touches rows a user added.
- :func:`add_result`, :func:`import_csv` (all-or-nothing, errors by line) and :func:`delete_result`
  validate everything (known task and metric, value in range, a source); only bound parameters
  reach SQL. :func:`results_frame` returns a pandas DataFrame for the page and the exports.

No torch and no streamlit here.
"""

from __future__ import annotations

import contextlib
import csv
import datetime as dt
import functools
import io
import json
import re
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Date,
    DateTime,
    Engine,
    Float,
    ForeignKey,
    Index,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    insert,
    select,
    text,
)
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, relationship
from sqlalchemy.pool import StaticPool

from models.errors import DatabaseUnavailable, DuplicateResult, InvalidResult

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "results"
SCHEMA_VERSION = 1
SPLITS = ("dev", "test", "unspecified")
SETTINGS = ("single", "ensemble")
SQLITE_BUSY_TIMEOUT_S = 15.0
MAX_IMPORT_BYTES = 1_000_000
MAX_IMPORT_ROWS = 5_000
IMPORT_COLUMNS = ("model", "task", "metric", "split", "value", "source")
OPTIONAL_COLUMNS = ("variant", "setting", "table", "snapshot", "note", "parameters", "family")
EXPORT_COLUMNS = ("model", "variant", "task", "metric", "split", "setting", "value", "source", "table", "slides", "snapshot", "note",
                  "parameters", "family")
_TEXT_LIMITS = {"model": 100, "variant": 200, "table": 100, "note": 1000, "family": 40, "source": 300}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


# ------------------------------------------------------------------------------------------ schema
class Base(DeclarativeBase):
    pass


class Meta(Base):
    """Key/value facts about the database itself: ``schema_version``, ``seed_version``."""

    __tablename__ = "bfe_meta"
    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(String(200))


class Source(Base):
    """Where a number comes from: a paper, a blog post or a leaderboard."""

    __tablename__ = "bfe_sources"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(64), unique=True)
    title: Mapped[str] = mapped_column(String(300))
    authors: Mapped[str] = mapped_column(String(500), default="")
    year: Mapped[int | None]
    arxiv: Mapped[str | None] = mapped_column(String(20))
    venue: Mapped[str] = mapped_column(String(200), default="")
    url: Mapped[str] = mapped_column(String(300), default="")
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")


class Model(Base):
    """A model (or system) results are reported for; ``catalog_id`` links to ``data/catalog.json``."""

    __tablename__ = "bfe_models"
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(100), unique=True)
    family: Mapped[str] = mapped_column(String(40), default="other")
    parameters: Mapped[int | None] = mapped_column(BigInteger)
    catalog_id: Mapped[str | None] = mapped_column(String(100))
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")


class Task(Base):
    """A benchmark task (CoLA, SQuAD 2.0, RACE...) or an aggregate (GLUE's score, ALBERT's Avg)."""

    __tablename__ = "bfe_tasks"
    id: Mapped[int] = mapped_column(primary_key=True)
    key: Mapped[str] = mapped_column(String(40), unique=True)
    name: Mapped[str] = mapped_column(String(100))
    benchmark: Mapped[str] = mapped_column(String(20))
    kind: Mapped[str] = mapped_column(String(40), default="")
    description: Mapped[str] = mapped_column(String(300), default="")
    train_size: Mapped[str] = mapped_column(String(20), default="")
    test_size: Mapped[str] = mapped_column(String(20), default="")
    domain: Mapped[str] = mapped_column(String(60), default="")
    metrics: Mapped[str] = mapped_column(String(60), default="")
    source: Mapped[str] = mapped_column(String(200), default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    metric_list: Mapped[list[Metric]] = relationship(back_populates="task")


class Metric(Base):
    """A metric of a task with its valid range; ``higher_is_better`` picks the best value in a column."""

    __tablename__ = "bfe_metrics"
    __table_args__ = (UniqueConstraint("task_id", "key", name="uq_metric_task_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    task_id: Mapped[int] = mapped_column(ForeignKey("bfe_tasks.id"))
    key: Mapped[str] = mapped_column(String(20))
    name: Mapped[str] = mapped_column(String(80))
    lower: Mapped[float | None] = mapped_column(Float)
    upper: Mapped[float | None] = mapped_column(Float)
    higher_is_better: Mapped[bool] = mapped_column(Boolean, default=True)
    note: Mapped[str] = mapped_column(String(300), default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    task: Mapped[Task] = relationship(back_populates="metric_list")


class Result(Base):
    """One reported number. The unique constraint stops the same result being stored twice."""

    __tablename__ = "bfe_results"
    __table_args__ = (
        UniqueConstraint("model_id", "variant", "metric_id", "split", "setting", "source_id", "source_table", name="uq_result"),
        CheckConstraint("split IN ('dev', 'test', 'unspecified')", name="ck_result_split"),
        CheckConstraint("setting IN ('single', 'ensemble')", name="ck_result_setting"),
        CheckConstraint("origin IN ('seed', 'user')", name="ck_result_origin"),
        Index("ix_result_metric_split", "metric_id", "split"),
        Index("ix_result_model", "model_id"),
        Index("ix_result_source", "source_id"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    model_id: Mapped[int] = mapped_column(ForeignKey("bfe_models.id"))
    variant: Mapped[str] = mapped_column(String(200), default="")
    metric_id: Mapped[int] = mapped_column(ForeignKey("bfe_metrics.id"))
    split: Mapped[str] = mapped_column(String(12))
    setting: Mapped[str] = mapped_column(String(10), default="single")
    value: Mapped[float] = mapped_column(Float)
    source_id: Mapped[int] = mapped_column(ForeignKey("bfe_sources.id"))
    source_table: Mapped[str] = mapped_column(String(100), default="")
    slides: Mapped[str] = mapped_column(String(100), default="")
    snapshot: Mapped[dt.date | None] = mapped_column(Date)
    note: Mapped[str] = mapped_column(Text, default="")
    origin: Mapped[str] = mapped_column(String(8), default="seed")
    added_at: Mapped[dt.datetime] = mapped_column(DateTime, default=lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))


# ------------------------------------------------------------------------------------------ engine
_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()
_SEEDED: set[str] = set()


def default_url() -> str:
    """The ``DATABASE_URL`` setting (a SQLite file in the user data folder unless set)."""
    from models.settings import get_settings

    return get_settings().database_url


def _normalise_url(url: str):
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUnavailable(f"DATABASE_URL={url!r} is not a database URL.",
                                  "Use e.g. sqlite:///path/to/results.db or postgresql://user@host/db.") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        path = Path(parsed.database).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DatabaseUnavailable(f"Cannot create the folder for the results database {path.parent} ({err.strerror}).",
                                      "Set DATABASE_URL to a writable place.") from None
        parsed = parsed.set(database=str(path))
    return parsed


def get_engine(url: str | None = None) -> Engine:
    """The engine for ``url`` (default: the ``DATABASE_URL`` setting), built once per URL and shared.

    SQLite: WAL journaling, ``busy_timeout`` of :data:`SQLITE_BUSY_TIMEOUT_S`, foreign keys on, and
    writes that start with ``BEGIN IMMEDIATE`` so concurrent writers wait instead of failing.

    Raises:
        DatabaseUnavailable: a malformed URL, a driver that is not installed, a folder that cannot be made.
    """
    url = url or default_url()
    with _ENGINES_LOCK:
        if url in _ENGINES:
            return _ENGINES[url]
        parsed = _normalise_url(url)
        kwargs: dict[str, Any] = {}
        sqlite = parsed.get_backend_name() == "sqlite"
        if sqlite:
            kwargs["connect_args"] = {"timeout": SQLITE_BUSY_TIMEOUT_S, "check_same_thread": False}
            if parsed.database in (None, "", ":memory:"):
                kwargs["poolclass"] = StaticPool
        else:
            kwargs["pool_pre_ping"] = True
        try:
            engine = create_engine(parsed, **kwargs)
        except (NoSuchModuleError, ModuleNotFoundError):
            raise DatabaseUnavailable(f"DATABASE_URL names a database this installation has no driver for ({parsed.drivername!r}).",
                                      "Use sqlite:///path/to/results.db, or postgresql://user@host/db (pip install 'psycopg[binary]').") from None
        if sqlite:
            _sqlite_events(engine)
        _ENGINES[url] = engine
        return engine


def _sqlite_events(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        dbapi_connection.isolation_level = None  # SQLAlchemy's "begin" event below emits BEGIN itself
        cursor = dbapi_connection.cursor()
        cursor.execute(f"PRAGMA busy_timeout = {int(SQLITE_BUSY_TIMEOUT_S * 1000)}")
        cursor.execute("PRAGMA foreign_keys = ON")
        # A read-only file keeps its journal mode; writes then fail with a clear message.
        with contextlib.suppress(Exception):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("bfe_write") else "BEGIN")


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before deleting a database file)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()
        _SEEDED.clear()


def _explain(err: Exception) -> DatabaseUnavailable:
    text_ = str(getattr(err, "orig", err)).strip()
    msg = text_.splitlines()[0] if text_ else type(err).__name__
    low = msg.lower()
    if "readonly" in low or "read-only" in low or "permission denied" in low:
        return DatabaseUnavailable("The results database is read-only, so nothing was saved.",
                                   "Make the file writable, or point DATABASE_URL at a writable database.")
    if "locked" in low or "busy" in low:
        return DatabaseUnavailable(f"The results database stayed locked by another program for {SQLITE_BUSY_TIMEOUT_S:.0f} s; nothing was saved.",
                                   "Close the other program using it, then try again.")
    if "unable to open" in low or "could not connect" in low or "connection" in low:
        return DatabaseUnavailable(f"Cannot open the results database ({msg}).", "Check DATABASE_URL and that the server is running.")
    return DatabaseUnavailable(f"The results database failed: {msg}.", "Nothing was saved; check DATABASE_URL.")


@contextmanager
def _session(engine: Engine, write: bool = False) -> Iterator[Session]:
    """One transaction; committed on success, rolled back on any error. Database failures become DatabaseUnavailable."""
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(bfe_write=write)
            with conn.begin(), Session(bind=conn, expire_on_commit=False) as session:
                yield session
                session.flush()
    except IntegrityError:
        raise
    except (OperationalError, DBAPIError) as err:
        raise _explain(err) from None


# ----------------------------------------------------------------------------------------- seeding
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


def _schema_check(session: Session) -> None:
    row = session.get(Meta, "schema_version")
    if row is None:
        session.add(Meta(key="schema_version", value=str(SCHEMA_VERSION)))
    elif int(row.value) > SCHEMA_VERSION:
        raise DatabaseUnavailable(f"The results database was written by a newer version (schema {row.value}; this is {SCHEMA_VERSION}).",
                                  "Upgrade BERT Family Explorer, or point DATABASE_URL at another database.")
    elif int(row.value) < SCHEMA_VERSION:
        for version in range(int(row.value) + 1, SCHEMA_VERSION + 1):
            MIGRATIONS[version](session)
        row.value = str(SCHEMA_VERSION)


# version -> function that upgrades a database from version - 1. Empty while the schema is at 1.
MIGRATIONS: dict[int, Any] = {}


def ensure_seeded(engine: Engine | None = None, force: bool = False) -> SeedReport:
    """Create the tables and load (or upgrade) the seed data. Idempotent and safe to call on every page run.

    Seed rows are matched by their natural keys, so re-running never duplicates; seed rows that left
    the data are deleted, changed ones updated; rows a user added (``origin='user'``) are never
    touched, and a seed row that collides with a user's row is skipped (the user's row wins).

    Raises:
        DatabaseUnavailable: the database cannot be created or written, or is from a newer version.
    """
    engine = engine or get_engine()
    cache_key = str(engine.url)
    if not force and cache_key in _SEEDED:
        return SeedReport(seed_version(), skipped=True)
    version = seed_version()
    try:
        Base.metadata.create_all(engine)
    except IntegrityError:  # two processes creating the tables at once (PostgreSQL): the other one won
        pass
    except (OperationalError, DBAPIError) as err:
        if "already exists" not in str(err):
            raise _explain(err) from None
    report = SeedReport(version)
    if not force:  # the usual case, read-only: already seeded with this version (no write lock taken)
        with _session(engine) as s:
            schema, seeded = s.get(Meta, "schema_version"), s.get(Meta, "seed_version")
            if schema is not None and int(schema.value) == SCHEMA_VERSION and seeded is not None and seeded.value == version:
                _SEEDED.add(cache_key)
                report.skipped = True
                return report
    with _session(engine, write=True) as s:
        if engine.dialect.name == "postgresql":
            s.execute(text("SELECT pg_advisory_xact_lock(7262001)"))
        _schema_check(s)
        current = s.get(Meta, "seed_version")
        if current is not None and current.value == version and not force:
            report.skipped = True
        else:
            _apply_seed(s, seed_rows(), report)
            if current is None:
                s.add(Meta(key="seed_version", value=version))
            else:
                current.value = version
    _SEEDED.add(cache_key)
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


# -------------------------------------------------------------------------------------- validation
def _clean(value: Any, name: str, required: bool = False) -> str:
    s = "" if value is None else str(value)
    if _CONTROL.search(s):
        raise ValueError(f"{name} contains control characters")
    s = s.strip()
    if required and not s:
        raise ValueError(f"{name} is required")
    if len(s) > _TEXT_LIMITS.get(name, 200):
        raise ValueError(f"{name} is longer than {_TEXT_LIMITS.get(name, 200)} characters")
    return s


@dataclass(frozen=True)
class _Lookup:
    """Everything validation needs, read once per add or import."""

    metrics: dict[tuple[str, str], tuple[int, float | None, float | None, str]]
    tasks: dict[str, list[str]]
    task_names: dict[str, str]
    sources: dict[str, int]
    models: dict[str, int]

    @classmethod
    def read(cls, s: Session) -> _Lookup:
        metrics, tasks = {}, {}
        for m, t in s.execute(select(Metric, Task).join(Task, Metric.task_id == Task.id)):
            metrics[(t.key.lower(), m.key.lower())] = (m.id, m.lower, m.upper, m.name)
            tasks.setdefault(t.key.lower(), []).append(m.key)
        task_names = {t.key.lower(): t.key for t in s.scalars(select(Task))}
        sources = {}
        for i, k, title, origin in s.execute(select(Source.id, Source.key, Source.title, Source.origin)):
            sources[k.lower()] = i
            if origin == "user":  # a user's source is cited by its text
                sources[title.lower()] = i
        models = {n.lower(): i for i, n in s.execute(select(Model.id, Model.name))}
        return cls(metrics, tasks, task_names, sources, models)


@dataclass
class _Row:
    model: str
    variant: str
    metric_id: int
    split: str
    setting: str
    value: float
    source: str
    table: str
    snapshot: dt.date | None
    note: str
    parameters: int | None
    family: str
    label: str


_YEAR = re.compile(r"\b(19|20)\d\d\b")


def _validate(raw: dict[str, Any], look: _Lookup) -> _Row:
    """One result checked against the database's tasks, metrics and sources. Raises ValueError with the reason."""
    model = _clean(raw.get("model"), "model", required=True)
    if "," in model:
        raise ValueError("model names cannot contain commas (the page's links list models separated by commas)")
    variant = _clean(raw.get("variant"), "variant")
    task = _clean(raw.get("task"), "task", required=True)
    metric = _clean(raw.get("metric"), "metric", required=True)
    if task.lower() not in look.tasks:
        close = [look.task_names[k] for k in look.task_names if k.startswith(task.lower()[:3])][:4]
        raise ValueError(f"unknown task {task!r}" + (f" (did you mean {', '.join(close)}?)" if close else ""))
    if (task.lower(), metric.lower()) not in look.metrics:
        raise ValueError(f"unknown metric {metric!r} for {look.task_names[task.lower()]} "
                         f"(known: {', '.join(sorted(look.tasks[task.lower()]))})")
    metric_id, lower, upper, metric_name = look.metrics[(task.lower(), metric.lower())]
    split = _clean(raw.get("split"), "split", required=True).lower()
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, not {split!r}")
    setting = (_clean(raw.get("setting"), "setting") or "single").lower()
    if setting not in SETTINGS:
        raise ValueError(f"setting must be single or ensemble, not {setting!r}")
    raw_value = raw.get("value")
    try:
        value = float(str(raw_value).strip().rstrip("%")) if not isinstance(raw_value, int | float) else float(raw_value)
    except ValueError:
        raise ValueError(f"value {raw_value!r} is not a number") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError("value must be a finite number")
    if (lower is not None and value < lower) or (upper is not None and value > upper):
        rng = f"{'' if lower is None else f'{lower:g}'} to {'∞' if upper is None else f'{upper:g}'}"
        raise ValueError(f"{value:g} is outside the range of {metric_name} ({rng}); scores are in percent, e.g. 84.6 not 0.846")
    source = _clean(raw.get("source"), "source", required=True)
    if source.lower() not in look.sources and not (_YEAR.search(source) and len(source) >= 10):
        raise ValueError(f"source {source!r} is neither a known source key nor a citation with a year "
                         "(e.g. 'Smith et al. 2023, arXiv 2301.00001')")
    snapshot_text = _clean(raw.get("snapshot"), "snapshot")
    try:
        snapshot = dt.date.fromisoformat(snapshot_text) if snapshot_text else None
    except ValueError:
        raise ValueError(f"snapshot {snapshot_text!r} is not a date (YYYY-MM-DD)") from None
    params_text = _clean(raw.get("parameters"), "parameters")
    try:
        parameters = int(float(params_text)) if params_text else None
    except ValueError:
        raise ValueError(f"parameters {params_text!r} is not a number") from None
    if parameters is not None and not 0 < parameters < 10**14:
        raise ValueError("parameters must be a positive count (e.g. 110000000)")
    return _Row(model, variant, metric_id, split, setting, value, source, _clean(raw.get("table"), "table"), snapshot,
                _clean(raw.get("note"), "note"), parameters, _clean(raw.get("family"), "family") or "user",
                f"{model}{f' [{variant}]' if variant else ''} · {look.task_names[task.lower()]} {metric} · {split}")


def _source_id(s: Session, look: _Lookup, source: str) -> int:
    if source.lower() in look.sources:
        return look.sources[source.lower()]
    key = "user:" + re.sub(r"[^a-z0-9]+", "-", source.lower()).strip("-")[:50]
    found = s.scalar(select(Source.id).where(Source.key == key))
    if found is None:
        year = _YEAR.search(source)
        obj = Source(key=key, title=source, year=int(year.group(0)) if year else None, origin="user")
        s.add(obj)
        s.flush()
        found = obj.id
    look.sources[source.lower()] = found
    return found


def _model_id(s: Session, look: _Lookup, row: _Row) -> int:
    if row.model.lower() in look.models:
        return look.models[row.model.lower()]
    obj = Model(name=row.model, family=row.family, parameters=row.parameters, origin="user")
    s.add(obj)
    s.flush()
    look.models[row.model.lower()] = obj.id
    return obj.id


def _store(s: Session, look: _Lookup, row: _Row) -> Result:
    obj = Result(model_id=_model_id(s, look, row), variant=row.variant, metric_id=row.metric_id, split=row.split,
                 setting=row.setting, value=row.value, source_id=_source_id(s, look, row.source), source_table=row.table,
                 snapshot=row.snapshot, note=row.note, origin="user")
    s.add(obj)
    return obj


def _stored_value(s: Session, look: _Lookup, row: _Row) -> float | None:
    """The value already stored under ``row``'s natural key, or None (a new model or source has nothing stored)."""
    model_id, source_id = look.models.get(row.model.lower()), look.sources.get(row.source.lower())
    if model_id is None or source_id is None:
        return None
    return s.scalar(select(Result.value).where(
        Result.model_id == model_id, Result.variant == row.variant, Result.metric_id == row.metric_id, Result.split == row.split,
        Result.setting == row.setting, Result.source_id == source_id, Result.source_table == row.table))


def _duplicate_message(row: _Row, stored: float) -> str:
    return f"{row.label} from {row.source} {row.table}".strip() + f" is already stored (value {stored:g})"


# -------------------------------------------------------------------------------------- user edits
def add_result(engine: Engine | None = None, **fields: Any) -> int:
    """Validate and store one result a user reports; returns its id.

    Fields: ``model``, ``task``, ``metric``, ``split``, ``value``, ``source`` (required); ``variant``,
    ``setting`` (single/ensemble), ``table``, ``snapshot`` (YYYY-MM-DD), ``note``, ``parameters``, ``family``.
    A new model name creates a model; a source that is not a known key must be a citation with a year.

    Raises:
        InvalidResult: unknown task or metric, value out of range, no source, malformed field.
        DuplicateResult: the same result is already stored.
        DatabaseUnavailable: the database is read-only, locked or unreachable (nothing is saved).
    """
    engine = engine or get_engine()
    ensure_seeded(engine)
    try:
        with _session(engine, write=True) as s:
            look = _Lookup.read(s)
            try:
                row = _validate(fields, look)
            except ValueError as err:
                raise InvalidResult(f"Not saved: {err}.", "Fix the field and try again.", [(None, str(err))]) from None
            stored = _stored_value(s, look, row)
            if stored is not None:
                raise DuplicateResult(f"Not saved: {_duplicate_message(row, stored)}.",
                                      "Change the variant, split or table if this is a different result.")
            obj = _store(s, look, row)
            s.flush()
            return obj.id
    except IntegrityError:  # a concurrent writer stored the same result between the check and the insert
        raise DuplicateResult("Not saved: this result was stored by someone else a moment ago.", "Reload to see it.") from None


@dataclass
class ImportReport:
    """What :func:`import_csv` stored."""

    rows: int
    ids: list[int]


def parse_csv(raw: bytes) -> list[dict[str, str]]:
    """An import file as rows, after the size, encoding and header checks. Raises :class:`InvalidResult`."""
    if len(raw) > MAX_IMPORT_BYTES:
        raise InvalidResult(f"The file is {len(raw) / 1e6:.1f} MB; imports are limited to {MAX_IMPORT_BYTES / 1e6:.0f} MB.",
                            "Split it into smaller files.")
    if not raw.strip():
        raise InvalidResult("The file is empty.", "Export a CSV from the page to see the expected columns.")
    try:
        decoded = raw.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidResult(f"The file is not UTF-8 text (byte {err.start} cannot be read).",
                            "Save it as CSV UTF-8 (in Excel: File → Save As → CSV UTF-8).") from None
    if "\x00" in decoded:
        raise InvalidResult("The file contains NUL bytes; it is not a text CSV.", "Save it as CSV UTF-8.")
    try:
        reader = csv.DictReader(io.StringIO(decoded, newline=""))
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
        rows = []
        for i, row in enumerate(reader):
            if i >= MAX_IMPORT_ROWS:
                raise InvalidResult(f"The file has more than {MAX_IMPORT_ROWS:,} rows.", "Split it into smaller files.")
            rows.append(row)
    except csv.Error as err:
        raise InvalidResult(f"The file is not a well-formed CSV ({err}).", "Save it as comma-separated values with a header row.") from None
    missing = [c for c in IMPORT_COLUMNS if c not in header]
    if missing:
        raise InvalidResult(f"Missing column(s): {', '.join(missing)}. The header reads: {', '.join(header) or '(nothing)'}.",
                            f"Required: {', '.join(IMPORT_COLUMNS)}; optional: {', '.join(OPTIONAL_COLUMNS)}.")
    unknown = [c for c in header if c not in IMPORT_COLUMNS + OPTIONAL_COLUMNS + ("slides",)]
    if unknown:
        raise InvalidResult(f"Unknown column(s): {', '.join(unknown)}.",
                            f"Required: {', '.join(IMPORT_COLUMNS)}; optional: {', '.join(OPTIONAL_COLUMNS)}.")
    if not rows:
        raise InvalidResult("The file has a header but no rows.", "Add one row per result.")
    out = []
    for row in rows:
        if None in row:  # more cells than header columns
            out.append({"__extra__": "1"})
            continue
        out.append({k.strip().lower(): (v or "") for k, v in row.items() if k is not None})
    return out


def import_csv(raw: bytes, engine: Engine | None = None) -> ImportReport:
    """Import results from CSV bytes: every row is validated first and all are stored in one transaction, or none.

    Raises:
        InvalidResult: with ``errors`` = [(line, message), ...] (line 1 is the header) when any row fails;
            also for an empty, oversized, non-UTF-8 or malformed file, or wrong columns.
        DatabaseUnavailable: the database is read-only, locked or unreachable (nothing is saved).
    """
    engine = engine or get_engine()
    rows = parse_csv(raw)
    ensure_seeded(engine)
    errors: list[tuple[int | None, str]] = []
    try:
        with _session(engine, write=True) as s:
            look = _Lookup.read(s)
            checked: list[_Row] = []
            seen: dict[tuple, int] = {}
            for line, raw_row in enumerate(rows, start=2):
                if "__extra__" in raw_row:
                    errors.append((line, "more cells than columns (a comma inside a value needs quotes)"))
                    continue
                try:
                    row = _validate(raw_row, look)
                except ValueError as err:
                    errors.append((line, str(err)))
                    continue
                key = (row.model.lower(), row.variant, row.metric_id, row.split, row.setting, row.source.lower(), row.table)
                if key in seen:
                    errors.append((line, f"the same result as line {seen[key]}"))
                elif (stored := _stored_value(s, look, row)) is not None:
                    errors.append((line, _duplicate_message(row, stored)))
                seen.setdefault(key, line)
                checked.append(row)
            if errors:
                raise InvalidResult(f"Nothing imported: {len(errors)} of {len(rows)} row(s) have problems.",
                                    "Fix the lines listed and import the file again.", errors)
            stored = [_store(s, look, row) for row in checked]
            s.flush()
            return ImportReport(len(stored), [o.id for o in stored])
    except IntegrityError:
        raise DuplicateResult("Nothing imported: some of these results were stored by someone else meanwhile.",
                              "Reload and import again; the duplicates will be listed by line.") from None


def delete_result(result_id: int, engine: Engine | None = None) -> None:
    """Delete a result a user added. Seed results cannot be deleted (they come back with the data).

    Raises:
        InvalidResult: no such result, or a seed result.
    """
    engine = engine or get_engine()
    with _session(engine, write=True) as s:
        obj = s.get(Result, int(result_id))
        if obj is None:
            raise InvalidResult(f"There is no result with id {result_id}.", "Reload the table.")
        if obj.origin != "user":
            raise InvalidResult("Published results from the slides cannot be deleted.", "Only results you added can be.")
        s.delete(obj)


# ----------------------------------------------------------------------------------------- queries
def results_frame(engine: Engine | None = None, *, models: Sequence[str] | None = None, tasks: Sequence[str] | None = None,
                  splits: Sequence[str] | None = None, settings: Sequence[str] | None = None,
                  sources: Sequence[str] | None = None, variants: bool = True):
    """Results joined with their model, task, metric and source, as a pandas DataFrame (one row per number).

    Filters are lists of names/keys (None: all). ``variants=False`` keeps only each model's main
    result (no ablation variants). Columns: id, model, variant, family, parameters, catalog_id, task,
    benchmark, metric, metric_name, higher_is_better, split, setting, value, source, citation,
    arxiv, table, slides, snapshot, note, origin.
    """
    import pandas as pd

    engine = engine or get_engine()
    ensure_seeded(engine)
    stmt = (select(Result.id, Model.name.label("model"), Result.variant, Model.family, Model.parameters, Model.catalog_id,
                   Task.key.label("task"), Task.benchmark, Metric.key.label("metric"), Metric.name.label("metric_name"),
                   Metric.higher_is_better, Result.split, Result.setting, Result.value, Source.key.label("source"),
                   Source.title, Source.authors, Source.year, Source.arxiv, Result.source_table.label("table"), Result.slides,
                   Result.snapshot, Result.note, Result.origin)
            .join(Model, Result.model_id == Model.id).join(Metric, Result.metric_id == Metric.id)
            .join(Task, Metric.task_id == Task.id).join(Source, Result.source_id == Source.id))
    if models is not None:
        stmt = stmt.where(Model.name.in_(list(models)))
    if tasks is not None:
        stmt = stmt.where(Task.key.in_(list(tasks)))
    if splits is not None:
        stmt = stmt.where(Result.split.in_(list(splits)))
    if settings is not None:
        stmt = stmt.where(Result.setting.in_(list(settings)))
    if sources is not None:
        stmt = stmt.where(Source.key.in_(list(sources)))
    if not variants:
        stmt = stmt.where(Result.variant == "")
    with _session(engine) as s:
        rows = s.execute(stmt.order_by(Result.id)).all()
    df = pd.DataFrame(rows, columns=["id", "model", "variant", "family", "parameters", "catalog_id", "task", "benchmark", "metric",
                                     "metric_name", "higher_is_better", "split", "setting", "value", "source", "title", "authors",
                                     "year", "arxiv", "table", "slides", "snapshot", "note", "origin"])
    df["citation"] = [citation(a, y, t) for a, y, t in zip(df["authors"], df["year"], df["title"], strict=True)]
    return df


def citation(authors: str | None, year: Any, title: str) -> str:
    """'Liu et al. 2019' from the authors list and year; the title when there are no authors."""
    names = [a.strip() for a in (authors or "").split(",") if a.strip()]
    if not names:
        return str(title)
    lead = names[0] + (" et al." if len(names) > 2 else f" and {names[1]}" if len(names) == 2 else "")
    return f"{lead} {int(year)}" if year == year and year is not None else lead


def catalog_frame(kind: str, engine: Engine | None = None):
    """The reference tables as DataFrames: ``kind`` is ``sources``, ``models``, ``tasks`` or ``metrics``."""
    import pandas as pd

    engine = engine or get_engine()
    ensure_seeded(engine)
    cls = {"sources": Source, "models": Model, "tasks": Task, "metrics": Metric}[kind]
    with _session(engine) as s:
        if cls is Metric:
            rows = s.execute(select(Task.key, Metric.key, Metric.name, Metric.lower, Metric.upper, Metric.higher_is_better, Metric.note)
                             .join(Task, Metric.task_id == Task.id).order_by(Task.id, Metric.id)).all()
            return pd.DataFrame(rows, columns=["task", "metric", "name", "lower", "upper", "higher_is_better", "note"])
        objs = s.scalars(select(cls).order_by(cls.id)).all()
        cols = [c.key for c in cls.__table__.columns if c.key != "id"]
        return pd.DataFrame([{c: getattr(o, c) for c in cols} for o in objs], columns=cols)


def meta(engine: Engine | None = None) -> dict[str, str]:
    """The ``bfe_meta`` table as a dict (schema_version, seed_version)."""
    engine = engine or get_engine()
    ensure_seeded(engine)
    with _session(engine) as s:
        return {m.key: m.value for m in s.scalars(select(Meta))}


def export_rows(df) -> bytes:
    """Results in the import format (UTF-8 CSV): exporting and importing again round-trips."""
    out = df.assign(snapshot=df["snapshot"].map(lambda d: d.isoformat() if hasattr(d, "isoformat") else ""),
                    source=[t if k.startswith("user:") else k for k, t in zip(df["source"], df["title"], strict=True)],
                    parameters=[str(int(p)) if p == p and p is not None else "" for p in df["parameters"]])
    return out.loc[:, list(EXPORT_COLUMNS)].to_csv(index=False).encode("utf-8")
