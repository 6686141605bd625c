"""The results database's tests: a fresh, seeded database on each engine (SQLite and PostgreSQL)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis import results_db as db


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path: Path):
    """A fresh, seeded database on each backend."""
    db.dispose_engines()
    if request.param == "sqlite":
        eng = db.get_engine(f"sqlite:///{tmp_path / 'r.db'}")
    else:
        eng = db.get_engine(request.getfixturevalue("pg_url"))
        db.drop_tables(eng)
    db.ensure_seeded(eng)
    yield eng
    db.dispose_engines()


