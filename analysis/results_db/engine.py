"""Engines and transactions: one engine per database URL, SQLite's settings, and writes that survive concurrency.

- :func:`get_engine` builds one engine per URL from the ``DATABASE_URL`` setting: by default a SQLite
  file in the user data folder, opened with WAL journaling, a busy timeout and foreign keys; any
  SQLAlchemy URL works (``postgresql://`` uses psycopg 3).
- :func:`session` is one read transaction; :func:`write` runs a function in one write transaction and
  runs it again when a concurrent writer got in the way (a unique key another process inserted first,
  a PostgreSQL deadlock or serialization failure), so a race costs a retry, never a lost write.
- Database failures become :class:`~core.errors.DatabaseUnavailable` with a message a user can act
  on, never a driver's traceback.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, IntegrityError, NoSuchModuleError, OperationalError
from sqlalchemy.orm import Session
from sqlalchemy.pool import StaticPool

from core.errors import DatabaseUnavailable

SQLITE_BUSY_TIMEOUT_S = 15.0
#: How many times :func:`write` tries a transaction that lost a race before giving up.
WRITE_ATTEMPTS = 6
#: PostgreSQL's "deadlock detected" and "could not serialize access": the transaction may simply be run again.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})

T = TypeVar("T")

_ENGINES: dict[str, Engine] = {}
_ENGINES_LOCK = threading.Lock()
#: URLs whose seed data this process has already checked (see ``seeding.ensure_seeded``).
SEEDED: set[str] = set()


def default_url() -> str:
    """The ``DATABASE_URL`` setting (a SQLite file in the user data folder unless set)."""
    from core.settings import get_settings

    return get_settings().database_url


def _normalise_url(url: str):
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise DatabaseUnavailable("DATABASE_URL is not a database URL.",
                                  "Use e.g. sqlite:///path/to/results.db or postgresql://user@host/db.") from None
    if parsed.drivername in ("postgresql", "postgres"):
        parsed = parsed.set(drivername="postgresql+psycopg")
    # A SQLite URI (``sqlite:///file:...?uri=true``: read-only, shared cache) names its file itself: no folder to make.
    uri = parsed.database and parsed.database.startswith("file:")
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:") and not uri:
        path = Path(parsed.database).expanduser()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise DatabaseUnavailable(f"Cannot create the folder for the results database ({err.strerror}).",
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
        # A read-only file keeps its journal mode; writes then fail with a clear message. WAL is a
        # property of the file: when another process switches it first, this connection follows.
        with contextlib.suppress(Exception):
            cursor.execute("PRAGMA journal_mode = WAL")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        # A deferred transaction that reads and then writes cannot wait for a peer (SQLite answers
        # "locked" at once to avoid a deadlock), so every write transaction takes the lock up front.
        conn.exec_driver_sql("BEGIN IMMEDIATE" if conn.get_execution_options().get("bfe_write") else "BEGIN")


def describe_database(engine: Engine, paths: bool = True) -> str:
    """The database in a few words: the URL without password, or (``paths=False``) just its kind, for public pages."""
    if paths:
        return engine.url.render_as_string(hide_password=True)
    return {"sqlite": "SQLite", "postgresql": "PostgreSQL"}.get(engine.dialect.name, engine.dialect.name)


def dispose_engines() -> None:
    """Close every pooled connection (tests, and before deleting a database file)."""
    with _ENGINES_LOCK:
        for engine in _ENGINES.values():
            engine.dispose()
        _ENGINES.clear()
        SEEDED.clear()


def explain(err: Exception) -> DatabaseUnavailable:
    """A driver error as a :class:`DatabaseUnavailable` a user can act on (no paths, no SQL)."""
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
        return DatabaseUnavailable("Cannot open the results database.", "Check DATABASE_URL and that the server is running.")
    if "malformed" in low or "not a database" in low:
        return DatabaseUnavailable("The results database file is damaged or is not a database; nothing was saved.",
                                   "Restore it from a backup, or point DATABASE_URL at a new file.")
    return DatabaseUnavailable(f"The results database failed ({type(getattr(err, 'orig', err)).__name__}).",
                               "Nothing was saved; check DATABASE_URL and the server log.")


def is_missing_table(err: Exception) -> bool:
    """Whether a driver error says a table does not exist yet (a database never initialised)."""
    low = str(getattr(err, "orig", err)).lower()
    return "no such table" in low or ("relation" in low and "does not exist" in low)


@contextmanager
def session(engine: Engine, write: bool = False) -> Iterator[Session]:
    """One transaction; committed on success, rolled back on any error. Database failures become DatabaseUnavailable.

    An :class:`IntegrityError` passes through unchanged (the caller knows what a clash means); for
    writes that may race with other processes use :func:`write`, which retries them.
    """
    try:
        with engine.connect() as conn:
            conn = conn.execution_options(bfe_write=write)
            with conn.begin(), Session(bind=conn, expire_on_commit=False) as s:
                yield s
                s.flush()
    except IntegrityError:
        raise
    except (OperationalError, DBAPIError) as err:
        raise explain(err) from None


def _retryable(err: DBAPIError) -> bool:
    if isinstance(err, IntegrityError):
        return True
    return getattr(getattr(err, "orig", None), "sqlstate", None) in _RETRY_SQLSTATES


def write(engine: Engine, fn: Callable[[Session], T], attempts: int = WRITE_ATTEMPTS) -> T:
    """Run ``fn(session)`` in one write transaction and return what it returns; all of it is stored or none.

    When the transaction loses a race with another process (a unique key that a concurrent writer
    inserted first, a deadlock or serialization failure on PostgreSQL) it is rolled back and run
    again from the start, so ``fn`` sees what the winner stored (and can then tell a true duplicate
    from a shared new source or model). Errors ``fn`` raises itself are not retried.

    Raises:
        IntegrityError: still clashing after ``attempts`` tries.
        DatabaseUnavailable: the database is read-only, locked past the busy timeout, or unreachable.
    """
    for attempt in range(1, attempts + 1):
        try:
            with engine.connect() as conn:
                conn = conn.execution_options(bfe_write=True)
                with conn.begin(), Session(bind=conn, expire_on_commit=False) as s:
                    out = fn(s)
                    s.flush()
            return out
        except (OperationalError, DBAPIError) as err:
            if attempt < attempts and _retryable(err):
                time.sleep(random.uniform(0.0, 0.02 * attempt))  # de-synchronise the peers that clashed
                continue
            if isinstance(err, IntegrityError):
                raise
            raise explain(err) from None
    raise AssertionError("unreachable")
