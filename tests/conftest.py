"""Fixtures shared by the whole suite. Everything runs offline, on tiny models built here."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

# Before anything imports huggingface_hub (it reads these once): never touch the network, and
# never see the developer's own Hugging Face cache.
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["HF_HOME"] = tempfile.mkdtemp(prefix="bfe-hf-home-")
os.environ.pop("BFE_ONLINE", None)
os.environ.pop("BFE_DEVICE", None)
# Never the developer's own results database: each test gets its own (see results_db_url below).
os.environ["DATABASE_URL"] = "sqlite:///" + os.path.join(tempfile.mkdtemp(prefix="bfe-db-"), "results.db")

import pytest

from tests.helpers.tiny import build_all


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory holding a tiny checkpoint of every loadable architecture."""
    root = tmp_path_factory.mktemp("models")
    build_all(root)
    return root


@pytest.fixture(autouse=True)
def model_env(tiny_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """Point the app at the tiny models, with a fresh process-wide model cache for each test."""
    from models import cache, gate, locate, warmup

    monkeypatch.setenv("BFE_MODEL_DIR", str(tiny_dir))
    monkeypatch.setattr(cache, "_default_cache", None)
    monkeypatch.setattr(locate, "_probe", None)
    monkeypatch.setattr(locate, "_hub_failed_at", None)
    # No background warm-up racing the tests' own loads (tests/models/test_gate.py turns it on where it is tested).
    monkeypatch.setenv("BFE_WARMUP", "0")
    # AppTests run the pages' model calls in the test process (tests/services/test_runtime.py covers the model process, and
    # the browser tests' servers run with it, as the README starts them).
    monkeypatch.setenv("BFE_MODEL_PROCESS", "0")
    monkeypatch.setattr(gate, "_instances", {})
    warmup.reset()
    # Pages cache what they read (model availability for 30 s, inspections, results): a page test must not see
    # what an earlier test's model directory held.
    import streamlit as st

    st.cache_data.clear()
    yield tiny_dir
    # A page run with the warm-up on starts the lab's supervisor thread, which dispatches against whatever database the
    # environment names at each tick: it must not outlive its test and claim a later test's runs.
    from services import lab

    lab.stop_supervisor()


@pytest.fixture(autouse=True)
def results_db_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A fresh SQLite results database per test (the page and the library read DATABASE_URL)."""
    from analysis import results_db

    url = f"sqlite:///{tmp_path / 'results.db'}"
    monkeypatch.setenv("DATABASE_URL", url)
    yield url
    results_db.dispose_engines()


@pytest.fixture
def lite(tmp_path: Path):
    """A fresh, seeded SQLite results database of its own (for the tests about files and writers)."""
    from analysis import results_db as db

    db.dispose_engines()
    eng = db.get_engine(f"sqlite:///{tmp_path / 'r.db'}")
    db.ensure_seeded(eng)
    yield eng
    db.dispose_engines()


@pytest.fixture(scope="session")
def pg_url():
    """A throwaway PostgreSQL server for the whole run (see tests/helpers/postgres.py)."""
    from tests.helpers.postgres import postgres_server

    with postgres_server() as url:
        yield url


@pytest.fixture
def empty_model_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model directory with nothing in it (only the bundled model is available)."""
    root = tmp_path / "models"
    root.mkdir()
    monkeypatch.setenv("BFE_MODEL_DIR", str(root))
    return root


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    from tests.helpers.servers import CHROMIUM, CHROMIUM_ARGS

    assert Path(CHROMIUM).exists(), f"Chromium not found at {CHROMIUM}: apt-get install -y chromium"
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


@pytest.fixture
def lab_env(empty_model_dir: Path):
    """An empty model dir and results database; at the end, no worker of this test is left running."""
    yield empty_model_dir
    from analysis.results_db import runs
    from services import lab
    from tests.helpers.lab import run_status as status
    from tests.helpers.servers import wait_for

    for r in runs.list_runs().itertuples():
        if r.status in ("queued", "running"):
            lab.cancel(r.id)
    for r in runs.list_runs().itertuples():
        if r.status == "running":
            wait_for(lambda rid=r.id: status(rid) != "running", timeout=60)


def pytest_terminal_summary(terminalreporter) -> None:
    """What the crawl and the fuzzers tried (tests.helpers.SUMMARY), after the results."""
    from tests.helpers import SUMMARY

    if SUMMARY:
        terminalreporter.section("states and cases tried")
        for line in SUMMARY:
            terminalreporter.write_line(line)
