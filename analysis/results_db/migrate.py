"""Bringing a database's tables to the current schema with Alembic, from inside the app.

The migrations live in ``migrations/versions/``, one revision per schema version: revision ``0003``
is schema version 3 (:data:`~analysis.results_db.schema.SCHEMA_VERSION`). :func:`upgrade_schema` runs them
on a connection whose write transaction the caller holds (``seeding.ensure_seeded`` holds SQLite's
write lock or :func:`take_schema_lock`), so many processes opening one database migrate it once and
nobody runs a command by hand. A fresh database is built by the same revisions, from ``0001``.

A database written before Alembic has no version table but records its schema version in
``bfe_meta``; it is stamped at that revision, then upgraded.

The Alembic version table is ``bfe_alembic_version``, not ``alembic_version``: the results tables may
share a PostgreSQL database with another application that has its own Alembic history.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy import Connection, Engine, inspect, select, text

from analysis.results_db.schema import SCHEMA_VERSION, Base, Meta
from core.errors import DatabaseUnavailable

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
VERSION_TABLE = "bfe_alembic_version"
#: PostgreSQL advisory lock that serialises schema changes and seeding across processes.
SCHEMA_LOCK_ID = 7262001
# Alembic's ``op`` and ``context`` are module-level proxies: two threads migrating at once (two databases in
# one process) would swap them under each other. Taken after the database's lock, so never in the other order.
_ALEMBIC_LOCK = threading.Lock()


def revision(version: int) -> str:
    """The Alembic revision id of a schema version (``3`` -> ``"0003"``)."""
    return f"{version:04d}"


HEAD = revision(SCHEMA_VERSION)


def take_schema_lock(connection: Connection) -> None:
    """On PostgreSQL, wait for the advisory lock that one migrating or seeding process holds (released at commit).

    SQLite needs none: its writers start with ``BEGIN IMMEDIATE`` and so already wait for each other.
    """
    if connection.dialect.name == "postgresql":
        connection.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": SCHEMA_LOCK_ID})


def alembic_config(connection: Connection | None = None):
    """An Alembic ``Config`` for the migrations, built in code (no ``alembic.ini``); ``connection`` is the one to migrate."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR).replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def current_revision(connection: Connection) -> str | None:
    """The revision recorded in the version table, or None (a fresh database, or one from before Alembic)."""
    from alembic.migration import MigrationContext

    return MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE}).get_current_revision()


def stored_schema_version(connection: Connection) -> int | None:
    """The schema version ``bfe_meta`` records (every version of the app writes it), or None when there is none."""
    if not inspect(connection).has_table(Meta.__tablename__):
        return None
    value = connection.scalar(select(Meta.value).where(Meta.key == "schema_version"))
    return int(value) if value is not None else None


def refuse_newer(version: int | str) -> None:
    """Raise when the database was written by a newer version of the app (its schema is unknown here)."""
    raise DatabaseUnavailable(f"The results database was written by a newer version (schema {version}; this is {SCHEMA_VERSION}).",
                              "Upgrade BERT Family Explorer, or point DATABASE_URL at another database.")


def upgrade_schema(connection: Connection) -> None:
    """Create or upgrade the tables on ``connection`` to the current schema, inside the caller's transaction.

    Raises:
        DatabaseUnavailable: the database is from a newer version of the app.
    """
    from alembic import command
    from alembic.script import ScriptDirectory

    config = alembic_config(connection)
    stored = stored_schema_version(connection)
    if stored is not None and stored > SCHEMA_VERSION:
        refuse_newer(stored)
    current = current_revision(connection)
    with _ALEMBIC_LOCK:
        if current is None and stored is not None:
            command.stamp(config, revision(stored))  # written before Alembic: its tables are those of schema `stored`
        elif current is not None and current not in {r.revision for r in ScriptDirectory.from_config(config).walk_revisions()}:
            refuse_newer(current)
        command.upgrade(config, "head")


def drop_tables(engine: Engine) -> None:
    """Drop every results table and the version table (tests and benchmarks start over with it)."""
    Base.metadata.drop_all(engine)
    with engine.begin() as conn:
        conn.execute(text(f"DROP TABLE IF EXISTS {VERSION_TABLE}"))
