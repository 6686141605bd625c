"""The results database's Alembic migrations, on SQLite and on a real PostgreSQL.

Every older schema (1 to 6) is written two ways: by the migrations up to its revision, and the way
the app wrote it before Alembic (``create_all`` of that version's tables, its version in ``bfe_meta``,
no version table). Rows written at that version must survive :func:`ensure_seeded`, which must leave
exactly the tables of :mod:`analysis.results_db.schema`. The old tables are frozen here from the
app's history, independently of the revisions, so the two can check each other.
"""

from __future__ import annotations

import datetime as dt
import threading
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    Column,
    DateTime,
    Float,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    insert,
    inspect,
    select,
)

from analysis import results_db as db
from analysis.results_db import migrate, runs
from analysis.results_db.schema import StoredVerdict
from core.errors import DatabaseUnavailable
from tests.helpers.postgres import fresh_pg
from tests.helpers.results import count_results

OLD_VERSIONS = (1, 2, 3, 4, 5, 6)
CLASS_TABLES = ("bfe_classes", "bfe_class_members", "bfe_class_questions", "bfe_class_answers")
V1_TABLES = ("bfe_meta", "bfe_sources", "bfe_models", "bfe_tasks", "bfe_metrics", "bfe_results")
NOW = dt.datetime(2026, 1, 2, 3, 4, 5)
TOKEN = "abcdefghijklmnopqrstuv"


def _packs_v2(md: MetaData) -> Table:
    """bfe_packs as schemas 2 to 4 declared it (before its size, saver and last opening)."""
    return Table("bfe_packs", md,
                 Column("token", String(32), primary_key=True),
                 Column("title", String(200), nullable=False),
                 Column("items", Integer, nullable=False),
                 Column("data", LargeBinary, nullable=False),
                 Column("created_at", DateTime, nullable=False, index=True))


def _runs_v3(md: MetaData) -> Table:
    """bfe_runs as schemas 3 to 5 declared it (before the lease)."""
    return Table("bfe_runs", md,
                 Column("id", Integer, primary_key=True),
                 Column("name", String(100), nullable=False, unique=True),
                 Column("objective", String(20), nullable=False),
                 Column("status", String(12), nullable=False),
                 Column("config", Text, nullable=False),
                 Column("curve", Text, nullable=False),
                 Column("evaluation", Text, nullable=False),
                 Column("checkpoint", String(200), nullable=False),
                 Column("message", Text, nullable=False),
                 Column("run_group", String(100), nullable=False, index=True),
                 Column("cancel", Boolean, nullable=False),
                 Column("host", String(100), nullable=False),
                 Column("pid", Integer),
                 Column("started_at", DateTime),
                 Column("seconds", Float),
                 Column("tokens", BigInteger),
                 Column("parameters", BigInteger),
                 Column("created_at", DateTime, nullable=False),
                 Column("finished_at", DateTime),
                 CheckConstraint("status IN ('queued', 'running', 'finished', 'failed', 'cancelled', 'interrupted')", name="ck_run_status"))


def old_metadata(version: int) -> MetaData:
    """The tables as the app declared them at schema ``version`` (what its ``create_all`` made)."""
    md = MetaData()
    current = db.Base.metadata.tables
    for name in V1_TABLES:
        current[name].to_metadata(md)
    if version >= 2:
        _packs_v2(md) if version < 5 else current["bfe_packs"].to_metadata(md)
    if version >= 3:
        _runs_v3(md) if version < 6 else current["bfe_runs"].to_metadata(md)
    if version >= 4:
        current["bfe_verdicts"].to_metadata(md)
    if version >= 7:
        for name in CLASS_TABLES:
            current[name].to_metadata(md)
    return md


@pytest.fixture(params=["sqlite", "postgresql"])
def empty(request, tmp_path: Path):
    """An engine on an empty database, on each backend."""
    db.dispose_engines()
    url = f"sqlite:///{tmp_path / 'old.db'}" if request.param == "sqlite" else fresh_pg(request.getfixturevalue("pg_url"))
    yield db.get_engine(url)
    db.dispose_engines()


def build_old_way(engine, version: int) -> MetaData:
    """A database as the app at ``version`` left it before Alembic: create_all of its tables, its version in bfe_meta."""
    md = old_metadata(version)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(insert(md.tables["bfe_meta"]), [{"key": "schema_version", "value": str(version)}])
    return md


def build_by_migrations(engine, version: int) -> MetaData:
    """A database migrated to revision ``version``, with that version in bfe_meta (as the app then would write it)."""
    with engine.connect() as conn, conn.begin():
        command.upgrade(migrate.alembic_config(conn), migrate.revision(version))
        conn.execute(insert(db.Meta.__table__), [{"key": "schema_version", "value": str(version)}])
    return old_metadata(version)


def write_rows(engine, md: MetaData, version: int, pack_data: bytes) -> None:
    """One row in each table the version has, written through that version's tables."""
    t = md.tables
    with engine.begin() as conn:
        conn.execute(insert(t["bfe_sources"]), [dict(id=9001, key="Me et al. 2026, a class project", title="Me et al. 2026, a class project",
                                                     authors="", venue="", url="", note="", origin="user")])
        conn.execute(insert(t["bfe_models"]), [dict(id=9001, name="My BERT", family="bert", parameters=110_000_000, note="", origin="user")])
        conn.execute(insert(t["bfe_tasks"]), [dict(id=9001, key="MYTASK", name="My task", benchmark="mine", kind="", description="",
                                                   train_size="", test_size="", domain="", metrics="acc.", source="", origin="user")])
        conn.execute(insert(t["bfe_metrics"]), [dict(id=9001, task_id=9001, key="acc", name="accuracy", lower=0.0, upper=100.0,
                                                     higher_is_better=True, note="", origin="user")])
        conn.execute(insert(t["bfe_results"]), [dict(model_id=9001, variant="", metric_id=9001, split="dev", setting="single", value=61.25,
                                                     source_id=9001, source_table="", slides="", note="kept", origin="user", added_at=NOW)])
        if version >= 2:
            pack = dict(token=TOKEN, title="kept", items=0, data=pack_data, created_at=NOW)
            conn.execute(insert(t["bfe_packs"]), [pack if version < 5 else dict(pack, nbytes=len(pack_data), saver="me")])
        if version >= 3:
            conn.execute(insert(t["bfe_runs"]), [dict(name="before-the-upgrade", objective="mlm", status="queued", config='{"steps": 3}',
                                                      curve="[]", evaluation="{}", checkpoint="", message="", run_group="g", cancel=False,
                                                      host="", created_at=NOW)])
        if version >= 4:
            conn.execute(insert(t["bfe_verdicts"]), [dict(run_group="g", preset="p", claim_key="c", label="supported", payload="{}",
                                                          created_at=NOW)])


def schema_differences(engine, metadata: MetaData = db.Base.metadata) -> list:
    """What Alembic's autogenerate would change to make the database's tables those of ``metadata`` (empty: equal)."""
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"version_table": migrate.VERSION_TABLE})
        return compare_metadata(context, metadata)


def revision_in(engine) -> str | None:
    with engine.connect() as conn:
        return migrate.current_revision(conn)


def check_upgraded(engine, version: int, pack_data: bytes) -> None:
    assert db.meta(engine)["schema_version"] == str(db.SCHEMA_VERSION)
    assert revision_in(engine) == migrate.HEAD
    assert schema_differences(engine) == []
    frame = db.results_frame(engine)
    mine = frame[frame["model"] == "My BERT"]
    assert list(mine["value"]) == [61.25] and list(mine["origin"]) == ["user"] and list(mine["note"]) == ["kept"]
    assert count_results(engine, origin="seed") > 1000  # the seed data loaded beside it
    if version >= 2:
        assert db.load_pack(TOKEN, engine) == ("kept", [])
        with db.session(engine) as s:
            pack = s.get(db.SavedPack, TOKEN)
            assert pack.nbytes == len(pack_data) > 0  # filled from the data when the column came
            assert pack.saver == ("me" if version >= 5 else "")
    if version >= 3:
        rid = runs.list_runs(engine).set_index("name").loc["before-the-upgrade", "id"]
        assert runs.claim_next(1, engine) == rid  # the queue works on the upgraded table: it writes the lease
        with db.session(engine) as s:
            assert s.get(db.TrainingRun, int(rid)).lease_at is not None
    if version >= 4:
        with db.session(engine) as s:
            assert s.scalar(select(StoredVerdict.label)) == "supported"


def _pack_data() -> bytes:
    from analysis.export import pack_to_bytes

    return pack_to_bytes([], "kept")


# ------------------------------------------------------------------------------- the revisions
def test_one_revision_per_schema_version_in_a_line() -> None:
    script = ScriptDirectory.from_config(migrate.alembic_config())
    assert script.get_heads() == [migrate.HEAD] == [f"{db.SCHEMA_VERSION:04d}"]
    chain = [r.revision for r in script.walk_revisions("base", "heads")][::-1]
    assert chain == [migrate.revision(v) for v in range(1, db.SCHEMA_VERSION + 1)]


def test_a_fresh_database_is_built_by_the_migrations_and_equals_the_models(empty) -> None:
    assert db.ensure_seeded(empty).inserted > 1000
    assert revision_in(empty) == migrate.HEAD
    assert schema_differences(empty) == []
    assert db.meta(empty) == {"schema_version": str(db.SCHEMA_VERSION), "seed_version": db.seed_version()}


def test_compare_metadata_sees_a_difference_when_there_is_one(empty) -> None:
    """The oracle of the tests below can fail: the column that revision 0006 adds is missing at 0005, and so are the
    tables that 0007 adds."""
    build_by_migrations(empty, 5)
    diffs = schema_differences(empty)
    assert [(d[0], d[2], d[3].name) for d in diffs if d[0] == "add_column"] == [("add_column", "bfe_runs", "lease_at")]
    assert sorted(d[1].name for d in diffs if d[0] == "add_table") == sorted(CLASS_TABLES)
    assert {d[0] for d in diffs} <= {"add_column", "add_table", "add_index"}


@pytest.mark.parametrize("version", [*OLD_VERSIONS, db.SCHEMA_VERSION])
def test_each_revision_makes_the_tables_the_app_declared_at_that_version(empty, version: int) -> None:
    build_by_migrations(empty, version)
    assert schema_differences(empty, old_metadata(version)) == []


def test_downgrading_to_the_first_revision_and_back_keeps_the_results(empty) -> None:
    db.ensure_seeded(empty)
    before = count_results(empty)
    with empty.connect() as conn, conn.begin():
        command.downgrade(migrate.alembic_config(conn), "0001")
    assert set(inspect(empty).get_table_names()) == {*V1_TABLES, migrate.VERSION_TABLE}
    with empty.connect() as conn, conn.begin():
        command.upgrade(migrate.alembic_config(conn), "head")
    assert schema_differences(empty) == [] and count_results(empty) == before


# --------------------------------------------------------------------------- older databases
@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_a_database_written_before_alembic_is_stamped_and_upgraded(empty, version: int) -> None:
    md = build_old_way(empty, version)
    assert revision_in(empty) is None and schema_differences(empty, md) == []
    data = _pack_data()
    write_rows(empty, md, version, data)
    db.ensure_seeded(empty)
    check_upgraded(empty, version, data)


@pytest.mark.parametrize("version", OLD_VERSIONS)
def test_a_database_migrated_to_an_older_revision_is_upgraded(empty, version: int) -> None:
    md = build_by_migrations(empty, version)
    assert revision_in(empty) == migrate.revision(version)
    data = _pack_data()
    write_rows(empty, md, version, data)
    db.ensure_seeded(empty)
    check_upgraded(empty, version, data)


def test_a_current_database_from_before_alembic_is_stamped_without_change(empty) -> None:
    md = build_old_way(empty, db.SCHEMA_VERSION)
    data = _pack_data()
    write_rows(empty, md, db.SCHEMA_VERSION, data)
    db.ensure_seeded(empty)
    check_upgraded(empty, db.SCHEMA_VERSION, data)


def test_an_unknown_revision_is_refused_as_newer_and_nothing_changes(empty) -> None:
    db.ensure_seeded(empty)
    with empty.begin() as conn:
        conn.exec_driver_sql(f"UPDATE {migrate.VERSION_TABLE} SET version_num = '0999'")
    db.engine.SEEDED.clear()
    with pytest.raises(DatabaseUnavailable, match="newer version"):
        db.ensure_seeded(empty, force=True)
    assert revision_in(empty) == "0999" and schema_differences(empty) == []


def test_threads_opening_an_old_database_at_once_upgrade_it_once(empty) -> None:
    md = build_old_way(empty, 2)
    data = _pack_data()
    write_rows(empty, md, 2, data)
    errors: list[BaseException] = []
    barrier = threading.Barrier(6)

    def opener() -> None:
        try:
            barrier.wait()
            db.ensure_seeded(empty)
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=opener) for _ in range(6)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:3]
    check_upgraded(empty, 2, data)


@pytest.mark.slow
def test_processes_opening_an_old_database_at_once_all_start(empty) -> None:
    from tests.helpers import db_stress

    md = build_old_way(empty, 3)
    data = _pack_data()
    write_rows(empty, md, 3, data)
    url = empty.url.render_as_string(hide_password=False)
    report = db_stress.run(url, processes=4, rounds=1)
    assert not report.errors, report.errors[:3]
    assert len(report.setup_seconds) == 4 and report.stored == 4
    check_upgraded(empty, 3, data)
