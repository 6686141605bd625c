"""Faults during a class: the database server restarts, the disk fills, processes are killed mid-write.

Each test says what it attempted and what must be kept: no write acknowledged to a user is lost, nothing half
written is visible, and the app answers again without a restart of its own. Lab workers killed or hung are in
tests/services/lab/test_lab.py (the queue's leases).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tests.helpers import ENTRY, ROOT


def _python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A Python process running ``code`` with ``args``, its output piped, in the repository root."""
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, env={**os.environ, **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# --------------------------------------------------------------------------- PostgreSQL restarted during a class

WRITER = """
    import sys, time
    from analysis import results_db as db
    from core.errors import DatabaseUnavailable
    engine = db.get_engine()
    db.ensure_seeded(engine)
    print("ready", flush=True)
    deadline = time.monotonic() + float(sys.argv[1])
    i = 0
    while time.monotonic() < deadline:
        try:
            db.add_result(db.NewResult(model=f"Fault model {i}", task="CoLA", metric="mcc", split="dev", value=50 + i % 40,
                                       source="Fault test 2026, a class project"), engine)
            print("ack", i, flush=True)
            i += 1
        except DatabaseUnavailable as err:
            print("unavailable", i, err.message, flush=True)
        time.sleep(0.05)
"""


def _table(at) -> str:
    """The Results page's table (drawn as HTML)."""
    return "\n".join(h.proto.body for h in at.get("html"))


@pytest.mark.slow
def test_a_postgres_restart_shows_unavailable_then_works_again_and_loses_no_acknowledged_write(monkeypatch) -> None:
    """Attempted: a writer process adds results every 50 ms and the Results page is drawn while PostgreSQL is stopped
    for a few seconds and started again. Kept: every result the writer was told was stored; the page says the
    database is unavailable during the outage (no exception) and shows the results after, in the same process."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from analysis import results_db as db
    from tests.helpers.postgres import postgres_cluster

    with postgres_cluster() as pg:
        monkeypatch.setenv("DATABASE_URL", pg.url)
        db.ensure_seeded(db.get_engine())
        writer = _python(WRITER, "14", env={"DATABASE_URL": pg.url})
        assert writer.stdout.readline().strip() == "ready"
        at = AppTest.from_file(ENTRY, default_timeout=60).run()
        at.switch_page("views/results.py").run()
        assert not at.exception and not at.error and "RoBERTa-large" in _table(at)
        time.sleep(2)
        pg.stop("immediate")  # as if the server crashed
        try:
            time.sleep(1)
            st.cache_data.clear()  # a page drawn during the outage reads the database (nothing served from a cache)
            at.run()
            assert not at.exception, [e.value for e in at.exception]
            assert any("results database" in e.value for e in at.error), [e.value for e in at.error]
            time.sleep(3)
        finally:
            pg.start()
        time.sleep(1)
        st.cache_data.clear()
        at.run()
        assert not at.exception and not at.error and "RoBERTa-large" in _table(at)  # same process, no restart: it answers again
        out, err = writer.communicate(timeout=60)
        assert writer.returncode == 0, err[-2000:]
        acked = {int(line.split()[1]) for line in out.splitlines() if line.startswith("ack ")}
        refused = [line for line in out.splitlines() if line.startswith("unavailable")]
        assert refused, "the outage was not seen by the writer"
        assert all("results database" in line for line in refused)
        stored = db.results_frame(db.get_engine())
        names = set(stored[stored["model"].str.startswith("Fault model ")]["model"])
        assert {f"Fault model {i}" for i in acked} <= names  # no acknowledged write lost
        assert len(acked) > 20 and max(acked) > int(refused[-1].split()[1]) - 1  # it wrote again after the restart


# --------------------------------------------------------------------------- the disk fills

FULL_DISK = """
    import os, resource, signal, sys
    from pathlib import Path
    import numpy as np
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing us
    folder = Path(sys.argv[1])
    from core.errors import TrainingFailed
    from models import representations as M
    from models.training import atomic_save

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (64 * 1024, hard))  # every file stops at 64 KB: the disk is "full"
    try:
        atomic_save(folder / "trained" / "big", lambda f: (f / "model.safetensors").write_bytes(b"x" * 1_000_000))
    except TrainingFailed as err:
        print("checkpoint:", err.message, "|", err.hint)
    index = M.CorpusIndex("tiny", 1, np.ones((4_000, 64), np.float32), np.zeros(4_000, np.int32), np.zeros(4_000, np.int32),
                          ("a",) * 4_000, ("a sentence",))
    M._save(folder / "indexes" / "big.npz", index)
    print("index saved:", (folder / "indexes" / "big.npz").exists())
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))  # space again: the same calls work
    atomic_save(folder / "trained" / "small", lambda f: (f / "model.safetensors").write_bytes(b"x" * 1_000_000))
    M._save(folder / "indexes" / "big.npz", index)
    print("after:", (folder / "trained" / "small" / "model.safetensors").stat().st_size, (folder / "indexes" / "big.npz").exists())
"""


def test_a_full_disk_while_a_checkpoint_or_an_index_is_written_leaves_nothing_half_written(tmp_path: Path) -> None:
    """Attempted: a checkpoint (1 MB) and a corpus index (about 0.5 MB) written by a process whose files the kernel
    stops at 64 KB (RLIMIT_FSIZE: the write fails as on a full disk). Kept: no checkpoint folder, no partial file
    anywhere; the checkpoint says what happened and what to do; the search goes on with the index in memory; and
    with space again the same writes succeed."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(FULL_DISK), str(tmp_path)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = dict(line.split(":", 1) for line in proc.stdout.splitlines())
    assert "could not be saved (File too large)" in lines["checkpoint"] and "Free some disk space" in lines["checkpoint"]
    assert lines["index saved"].strip() == "False"
    assert lines["after"].split() == ["1000000", "True"]
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*"))
    assert left == ["indexes", "indexes/big.npz", "trained", "trained/small", "trained/small/model.safetensors"], left
    assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- killed mid-write

PACK_SAVER = """
    import plotly.graph_objects as go
    from analysis import results_db as db
    from analysis.export import PackItem
    engine = db.get_engine()
    db.ensure_seeded(engine)
    print("ready", flush=True)
    fig = go.Figure(go.Scatter(y=list(range(20_000)))).to_json()  # a chart of about half a megabyte
    i = 0
    while True:
        items = [PackItem(f"chart {i}", "caption", ("Devlin et al. 2019, Table 1",), figure=fig),
                 PackItem(f"table {i}", table=tuple({"row": r, "value": r * 1.5} for r in range(200)))]
        print("saved", db.save_pack(items, f"pack {i}", engine), flush=True)
        i += 1
"""


@pytest.mark.parametrize("url_kind", ["sqlite", pytest.param("postgres", marks=pytest.mark.slow)])
def test_a_server_killed_while_saving_packs_leaves_each_pack_whole_or_absent(url_kind: str, tmp_path: Path, monkeypatch) -> None:
    """Attempted: a process saving half-megabyte packs in a loop is killed with SIGKILL at three moments. Kept: every
    pack whose link was handed out opens, whole (both items); no pack in the database is partial."""
    from contextlib import ExitStack

    from analysis import results_db as db
    from analysis.results_db.engine import session
    from analysis.results_db.schema import SavedPack
    from tests.helpers.postgres import postgres_server

    with ExitStack() as stack:
        url = stack.enter_context(postgres_server()) if url_kind == "postgres" else f"sqlite:///{tmp_path / 'packs.db'}"
        monkeypatch.setenv("DATABASE_URL", url)
        handed_out: list[str] = []
        for delay in (0.7, 1.3, 2.1):
            saver = _python(PACK_SAVER, env={"DATABASE_URL": url})
            assert saver.stdout.readline().strip() == "ready"
            time.sleep(delay)
            saver.send_signal(signal.SIGKILL)
            out, _ = saver.communicate(timeout=30)
            # only whole lines: a kill during print can leave "saved " without its token, a link never handed out
            handed_out += [line.split()[1] for line in out.split("\n")[:-1] if line.startswith("saved ") and len(line.split()) == 2]
        db.dispose_engines()
        assert handed_out
        for token in handed_out:
            title, items = db.load_pack(token)
            assert title.startswith("pack ") and [i.title.split()[0] for i in items] == ["chart", "table"]
            assert len(items[1].table) == 200
        with session(db.get_engine()) as s:
            tokens = [p.token for p in s.query(SavedPack).all()]
        assert set(handed_out) <= set(tokens)
        for token in tokens:  # the one being written when the process died is there whole, or not at all
            assert len(db.load_pack(token)[1]) == 2


KILLED_SAVE = """
    import sys, time
    from pathlib import Path
    from models.training import atomic_save
    def write(folder):
        (folder / "model.safetensors").write_bytes(b"x" * 100_000)
        print("writing", flush=True)
        time.sleep(60)  # killed here, half way through the checkpoint
        (folder / "bfe_run.json").write_text("{}")
    atomic_save(Path(sys.argv[1]) / "trained" / "killed", write)
"""


def test_a_checkpoint_save_killed_half_way_is_never_offered_and_its_leftovers_are_swept(tmp_path: Path, monkeypatch) -> None:
    """Attempted: a process killed with SIGKILL while it writes a checkpoint (a server restart during a run's save).
    Kept: no ``trained/killed`` for a model picker to offer; the partial folder is hidden and removed by the next save
    once it is stale (an hour: a live save never takes that long)."""
    from models import training
    from services import lab

    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path))
    proc = _python(KILLED_SAVE, str(tmp_path))
    assert proc.stdout.readline().strip() == "writing"
    proc.kill()
    proc.wait(timeout=30)
    trained = tmp_path / "trained"
    partial = [p.name for p in trained.iterdir()]
    assert len(partial) == 1 and partial[0].startswith(".partial-") and lab.trained_models() == []
    assert training.sweep_partials(trained) == 0  # fresh: it might be a live save
    old = time.time() - training.STALE_PARTIAL_S - 60
    os.utime(trained / partial[0], (old, old))
    training.atomic_save(trained / "next", lambda f: (f / "bfe_run.json").write_text("{}"))
    assert sorted(p.name for p in trained.iterdir()) == ["next"]
    assert lab.trained_models() == ["trained/next"]
