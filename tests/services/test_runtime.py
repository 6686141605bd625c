"""The model process: the pages' model calls run there, errors come back as themselves, a process that dies
is restarted and the call runs once more, Home is drawn while the model side is slow or absent, the web process of
`python -m app.serve` has not imported torch when Home is drawn, and stopping the server leaves no process behind."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Client
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

from core.errors import ModelProcessFailed, UnknownModel
from services import routing, runtime
from tests.helpers import ENTRY
from tests.helpers.servers import free_port, home_and_calculator_draw, open_page, start_server, wait_for

TINY_BERT = "bert-base-uncased"  # a tiny checkpoint under that name (tests/helpers/tiny.py)


@pytest.fixture
def model_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[runtime.Runtime]:
    """The pages' model calls go to a fresh model process (warm-up off: it loads on first use)."""
    monkeypatch.setenv("BFE_MODEL_PROCESS", "1")
    rt = runtime.Runtime(warm=False)
    monkeypatch.setattr(runtime, "_default", rt)
    yield rt
    rt.stop()


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"  # a zombie has exited (its parent reaps it)


def test_a_call_runs_in_the_model_process_and_returns_what_the_library_returns(model_process: runtime.Runtime) -> None:
    from models.attention import extract_attention

    here = extract_attention(TINY_BERT, "The cat sat on the mat.")
    there = model_process.call(extract_attention, TINY_BERT, "The cat sat on the mat.")
    assert there.tokens == here.tokens and np.allclose(there.weights, here.weights, atol=1e-6)
    assert model_process.proc is not None and model_process.ask_status().models_loaded == 1
    assert wait_for(lambda: model_process.status().models_loaded == 1, timeout=5)  # the poller's copy, for pages
    # the library's own errors come back as themselves, with their attributes
    with pytest.raises(UnknownModel) as err:
        model_process.call(extract_attention, "bert-base-uncasd", "x")
    assert err.value.model_id == "bert-base-uncasd" and err.value.hint
    # only public functions of models.*: not a page's helper, not a private function, not the standard library
    for fn in (os.getcwd, routing._resolve, lambda: 1):
        assert not runtime.routable(fn)
        with pytest.raises(ModelProcessFailed):
            model_process.call(fn)
    for module, name in (("os", "system"), ("models.training", "atomic_save"), ("models.fetch", "main"),
                         ("models.attention", "__builtins__")):
        with pytest.raises(ModelProcessFailed):
            routing._resolve(module, name)
    # a client without the key is refused, and the process keeps serving
    with pytest.raises(Exception):  # noqa: B017 (multiprocessing's AuthenticationError or a closed pipe)
        Client(model_process.address, family="AF_UNIX", authkey=b"wrong").send(("status",))
    assert model_process.ask_status().state in ("idle", "ready")
    assert oct(Path(model_process.address).parent.stat().st_mode)[-3:] == "700"


FAKE_SERVER = """
import sys
from multiprocessing.connection import Listener, answer_challenge, deliver_challenge
from services.runtime import KEY_ENV, pack_error
import os
key = bytes.fromhex(os.environ[KEY_ENV])
listener = Listener(sys.argv[1], family="AF_UNIX")
while True:
    conn = listener.accept()
    deliver_challenge(conn, key); answer_challenge(conn, key)
    conn.recv()
    conn.send(("error", pack_error(FileNotFoundError(2, "No such file: corpus.gz"))))
"""


def test_an_os_error_raised_by_the_function_is_not_taken_for_a_dead_process() -> None:
    from models.attention import extract_attention

    rt = runtime.Runtime(warm=False, command=[sys.executable, "-c", FAKE_SERVER])
    try:
        rt.start()
        pid = rt.proc.pid
        with pytest.raises(FileNotFoundError, match=r"corpus\.gz"):
            rt.call(extract_attention, TINY_BERT, "x")
        assert rt.restarts == 0 and rt.alive() and rt.proc.pid == pid
    finally:
        rt.stop()
    assert not Path(rt.address).parent.exists()  # its socket's folder is removed with it


def test_a_process_that_dies_during_a_call_is_restarted_and_the_call_runs_again(model_process: runtime.Runtime) -> None:
    from models.attention import extract_attention

    model_process.start()
    first = model_process.proc.pid
    killer = threading.Timer(0.3, os.kill, (first, signal.SIGKILL))  # while it still imports torch for the call
    killer.start()
    codes: list[int | None] = []
    out = model_process.call(extract_attention, TINY_BERT, "A boy plays.", on_restart=codes.append)
    assert out.tokens[0] == "[CLS]" and codes == [-signal.SIGKILL] and model_process.restarts == 1
    assert model_process.proc.pid != first

    # dying again on the retry: a clear error, not a hang
    def kill_each_new_process() -> None:
        seen = {model_process.proc.pid}
        model_process.stop()
        end = time.monotonic() + 30
        while time.monotonic() < end and len(seen) < 3:
            p = model_process.proc
            if p is not None and p.pid not in seen and p.poll() is None:
                time.sleep(0.2)
                with contextlib.suppress(ProcessLookupError):  # it may have died on its own meanwhile: dead either way
                    os.kill(p.pid, signal.SIGKILL)
                seen.add(p.pid)
            time.sleep(0.01)

    t = threading.Thread(target=kill_each_new_process)
    t.start()
    time.sleep(0.1)
    with pytest.raises(ModelProcessFailed, match="stopped twice"):
        model_process.call(extract_attention, TINY_BERT, "A boy plays.")
    t.join()


STUBBORN = ("import signal, sys, time, pathlib; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
            "pathlib.Path(sys.argv[1] + '.ready').touch(); time.sleep(60)")


def test_a_process_started_while_another_thread_stops_the_old_one_keeps_its_socket_folder() -> None:
    """stop() waits for the old process outside its lock; a call on another thread may start a new one meanwhile,
    and the folder its socket binds in must not be removed under it (CI saw the new process fail to bind)."""
    rt = runtime.Runtime(warm=False, command=[sys.executable, "-c", STUBBORN])
    rt.start()
    ready = Path(rt.address + ".ready")
    end = time.monotonic() + 30
    while not ready.exists() and time.monotonic() < end:
        time.sleep(0.02)
    assert ready.exists()  # it ignores SIGTERM now, so stop() waits for it for its whole timeout
    stopper = threading.Thread(target=rt.stop, kwargs={"timeout": 1.5})
    stopper.start()
    time.sleep(0.3)
    try:
        rt.start()  # another thread's call starts a fresh process while stop() still waits
        stopper.join()
        assert rt.alive() and Path(rt.address).parent.exists()
    finally:
        rt.stop(timeout=0.5)
    assert not Path(rt.address).parent.exists()


def test_a_page_says_when_its_model_process_was_restarted(model_process: runtime.Runtime) -> None:
    model_process.start()
    pid = model_process.proc.pid
    threading.Timer(0.3, os.kill, (pid, signal.SIGKILL)).start()
    at = AppTest.from_file(ENTRY, default_timeout=120)
    at.session_state["at_model"] = TINY_BERT
    at.switch_page("views/attention.py").run()
    assert not at.exception and not at.error
    assert len(at.get("plotly_chart")) == 1
    assert any("restarted" in w.value for w in at.warning)
    assert model_process.restarts == 1


def test_home_is_drawn_while_the_model_process_is_absent_and_the_sidebar_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model process that never answers (stuck before its socket) holds up neither Home nor the calculator."""
    monkeypatch.setenv("BFE_MODEL_PROCESS", "1")
    monkeypatch.setenv("BFE_WARMUP", "1")
    stuck = runtime.Runtime(command=[sys.executable, "-c", "import time; time.sleep(60)"])
    monkeypatch.setattr(runtime, "_default", stuck)
    stuck.start()
    try:
        at = home_and_calculator_draw(ENTRY, within=20)
        assert any("model process starting" in c.value for c in at.sidebar.caption)
    finally:
        stuck.stop()


def test_the_attention_page_waits_for_the_warming_model_process_then_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    from core import registry

    monkeypatch.setenv("BFE_MODEL_PROCESS", "1")
    monkeypatch.setenv("BFE_WARMUP", "1")
    rt = runtime.Runtime(warm=True)
    monkeypatch.setattr(runtime, "_default", rt)
    rt.start()
    try:
        at = AppTest.from_file(ENTRY, default_timeout=120)
        at.switch_page("views/attention.py").run()
        assert not at.exception and not at.error
        assert len(at.get("plotly_chart")) == 1
        # the page's own call let the warm-up load the model without waiting for a first page to be drawn
        status = wait_for(lambda: (s := rt.status()).state == "ready" and s, timeout=60)
        assert status.model_id == registry.bundled_id() and status.models_loaded == 1
    finally:
        rt.stop()


def _libtorch(pid: int) -> bool:
    return "libtorch" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_the_server_serves_home_without_torch_and_stops_without_leaving_a_process(tiny_dir: Path, browser) -> None:
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "BFE_WARMUP": "1"}
    env.pop("BFE_MODEL_PROCESS", None)
    for stop in (signal.SIGTERM, signal.SIGKILL):
        port = free_port()
        proc = start_server(env, port)
        try:
            page, _ = open_page(browser, f"http://127.0.0.1:{port}/", "Longer, bigger, smaller, smarter")
            page.locator(".js-plotly-plot .scatterlayer .point").first.wait_for(timeout=30_000)
            page.close()
            assert not _libtorch(proc.pid)  # Home drawn: the web process has not imported torch
            import psutil

            children = psutil.Process(proc.pid).children()
            assert len(children) == 1 and "services.runtime" in " ".join(children[0].cmdline())
            child = children[0].pid
            wait_for(lambda c=child: _libtorch(c), timeout=60)  # the model process warms meanwhile
            page, _ = open_page(browser, f"http://127.0.0.1:{port}/attention", "what each head of a real model looks at")
            page.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=60_000)
            page.close()
            assert not _libtorch(proc.pid)  # the page's model call ran in the model process
        finally:
            proc.send_signal(stop)
            proc.wait(timeout=20)
        wait_for(lambda c=child: _gone(c), timeout=5)  # no orphan: a container stop (SIGTERM) or a crash (SIGKILL)
