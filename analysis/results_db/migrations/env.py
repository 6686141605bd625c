"""Alembic's environment for the results database.

The app runs the migrations itself (``migrate.upgrade_schema``, called by ``seeding.ensure_seeded``) and passes
the connection whose write transaction it holds as ``config.attributes["connection"]``; everything then
happens in that transaction. Run by hand (``alembic upgrade head`` with the repository's ``alembic.ini``),
it opens the ``DATABASE_URL`` database itself under the same lock. ``render_as_batch`` makes
``alembic revision --autogenerate`` write ``batch_alter_table`` blocks, which SQLite needs to change a
table and which are plain ``ALTER TABLE`` statements on PostgreSQL.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context

from analysis.results_db.migrate import VERSION_TABLE, take_schema_lock
from analysis.results_db.schema import Base

config = context.config


def _options(dialect_name: str) -> dict:
    return dict(target_metadata=Base.metadata, version_table=VERSION_TABLE, render_as_batch=dialect_name == "sqlite")


def _run_offline() -> None:
    from analysis.results_db.engine import _normalise_url, default_url

    url = _normalise_url(config.get_main_option("sqlalchemy.url") or default_url())
    context.configure(url=url, literal_binds=True, **_options(url.get_backend_name()))
    with context.begin_transaction():
        context.run_migrations()


def _run_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:  # the app's: its transaction is already open and locked
        context.configure(connection=connection, **_options(connection.dialect.name))
        with context.begin_transaction():
            context.run_migrations()
        return
    from analysis.results_db.engine import get_engine

    engine = get_engine(config.get_main_option("sqlalchemy.url") or None)
    with engine.connect() as conn, conn.execution_options(bfe_write=True).begin():  # BEGIN IMMEDIATE on SQLite
        take_schema_lock(conn)
        context.configure(connection=conn, **_options(conn.dialect.name))
        with context.begin_transaction():
            context.run_migrations()


if config.config_file_name is not None and config.get_section("loggers") is not None:
    fileConfig(config.config_file_name)
if context.is_offline_mode():
    _run_offline()
else:
    _run_online()
