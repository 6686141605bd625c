"""Fixtures shared by the whole suite. Everything runs offline, on tiny models built here."""

from __future__ import annotations

import os
import shutil
import sys
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
# Modules are compiled to bytecode the first time a test (or a server it starts) imports them, and kept: the README
# installs with `pip install --no-compile`, as compiling all 20,000 modules of the environment took 110 of pip's 165 s
# here and the suite imports a fraction of them. So bytecode is written even where PYTHONDONTWRITEBYTECODE is set (this
# machine class sets it), else every process would compile what it imports again (torch, transformers, Streamlit and
# Gradio: 41 s to import instead of 19). Set before the workers and servers start, which inherit it (and for this
# process, below the imports).
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One torch (OpenMP) thread per worker, and per server a test starts: n workers on n cores, not 2n threads
    # fighting over them. Read by torch when it is first imported, which is after this.
    os.environ["OMP_NUM_THREADS"] = "1"

import pytest

from tests.helpers import parallel
from tests.helpers.tiny import build_all

sys.dont_write_bytecode = False


def pytest_configure(config: pytest.Config) -> None:
    import uuid

    from tests.helpers import apptest

    if getattr(config.option, "numprocesses", None) and not getattr(config.option, "testrunuid", None):
        # named here, not by xdist, so that the controller's scheduler finds what the workers write down
        config.option.testrunuid = uuid.uuid4().hex
    config.addinivalue_line("markers", f"{parallel.MACHINE}: needs the whole machine (replicas, a "
                                       "classroom-sized load, a time measured against the machine): runs with no other test "
                                       "beside it (tests/helpers/parallel.py)")
    config.addinivalue_line("markers", f"{parallel.EARLY}: its slow part starts at collection (the container build, "
                                       "tests/helpers/container.py); handed out later in the run (tests/helpers/parallel.py)")
    apptest.install()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    parallel.order(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Under xdist, the container build starts now if the run has its test (after -m and -k chose): the build mostly
    waits on downloads, so the other tests use the cores meanwhile (tests/helpers/container.py)."""
    from tests.helpers import container

    where = parallel._lock_dir()
    if where is not None and any(i.get_closest_marker(parallel.EARLY) for i in session.items):
        container.start_early(where / "container")


def pytest_sessionfinish(session: pytest.Session) -> None:
    """In the xdist controller, once every worker is done: stop a container build nobody took, remove its image."""
    from tests.helpers import container

    run = getattr(session.config.option, "testrunuid", None)
    if run and not os.environ.get("PYTEST_XDIST_WORKER"):
        container.clean_early(parallel.run_dir(run) / "container")


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    return parallel.scheduler(config, log)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    """Every test holds the machine, shared or, for a ``machine`` test, alone (tests/helpers/parallel.py)."""
    with parallel.hold(item.get_closest_marker(parallel.MACHINE) is not None):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """The summary lines this test added travel with its report (from an xdist worker to the controller)."""
    from tests.helpers import SUMMARY

    report = yield
    if SUMMARY:
        report.user_properties = [*report.user_properties, *((parallel.SUMMARY_KEY, line) for line in SUMMARY)]
        SUMMARY.clear()
    return report


_summary: list[str] = []


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _summary.extend(value for key, value in report.user_properties if key == parallel.SUMMARY_KEY)


@pytest.fixture(scope="session")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model directory holding a tiny checkpoint of every loadable architecture."""
    root = tmp_path_factory.mktemp("models")
    build_all(root)
    # The corpus search's indexes (models/representations.py keeps them in the model folder's .index) are caches, not
    # state: every copy of this folder a test makes (copied with symlinks=True) shares one, so the bundled MiniLM's
    # 40 MB index per layer is built once per test process and not copied into every crawl's worlds (6 GB of copies
    # per suite run once filled CI's disk). The crawl's "was the world written" check does not follow the link.
    (root / ".index").symlink_to(tmp_path_factory.mktemp("corpus-index"), target_is_directory=True)
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


@pytest.fixture(scope="session")
def seeded_world(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A world as the labs leave it, built once per test process (tests/helpers/lab.py's ``seed_lab``: finished
    experiments with verdicts, checkpoints trained for real): a folder with ``results.db`` and ``models/`` (the tiny
    models and the trained ones). Never pointed at by a test: :func:`seeded_world_copy` gives each test a copy."""
    import streamlit as st

    from analysis import results_db
    from models import cache
    from tests.helpers.lab import seed_lab

    root = tmp_path_factory.mktemp("seeded-world")
    shutil.copytree(tiny_dir, root / "models", symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        for name, value in {"DATABASE_URL": f"sqlite:///{root / 'results.db'}", "BFE_MODEL_DIR": str(root / "models"),
                            "BFE_LAB_CONCURRENCY": "0", "BFE_WARMUP": "0", "BFE_MODEL_PROCESS": "0"}.items():
            mp.setenv(name, value)
        mp.setattr(cache, "_default_cache", None)
        results_db.dispose_engines()
        seed_lab()
        results_db.dispose_engines()  # every connection closed: the file holds everything
    st.cache_data.clear()
    st.cache_resource.clear()
    return root


@pytest.fixture
def seeded_world_copy(seeded_world: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """This test's own copy of :func:`seeded_world`, which ``DATABASE_URL`` and ``BFE_MODEL_DIR`` now name."""
    from analysis import results_db

    here = tmp_path / "seeded"
    shutil.copytree(seeded_world, here, symlinks=True)
    results_db.dispose_engines()
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{here / 'results.db'}")
    monkeypatch.setenv("BFE_MODEL_DIR", str(here / "models"))
    return here


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
    """What the crawl and the fuzzers tried (tests.helpers.SUMMARY, gathered from every worker), after the results."""
    if _summary:
        terminalreporter.section("states and cases tried")
        for line in _summary:
            terminalreporter.write_line(line)
