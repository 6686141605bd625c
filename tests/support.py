"""What several test modules share: the app started as the README starts it, headless Chromium, free ports, and
waiting on the labs' background runs. (Test helpers live here, not in one test module that others import.)"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = os.environ.get("BFE_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("BFE_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict[str, str], port: int) -> subprocess.Popen:
    """Start the app as the README does and wait until /_stcore/health answers (60 s at most)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.serve", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("streamlit did not become healthy in 60 s: " + proc.stdout.read().decode(errors="replace"))


@contextmanager
def running_app(tiny_dir: Path) -> Iterator[str]:
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1"}
    env.pop("BFE_MODEL_PROCESS", None)  # as the README starts it: the pages' model calls in the model process
    port = free_port()
    proc = start_server(env, port)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def open_page(browser, url: str, expect: str):
    """Open ``url`` with outside traffic blocked; wait until ``expect`` shows and the app is idle."""
    page = browser.new_page(viewport={"width": 1400, "height": 2200})
    outside: list[str] = []

    def guard(route):
        host = route.request.url.split("/")[2].split(":")[0] if "://" in route.request.url else ""
        if host in ("127.0.0.1", "localhost") or route.request.url.startswith("data:"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", guard)
    page.goto(url)
    page.get_by_text(expect).first.wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    return page, outside


def wait_for(predicate, timeout: float = 90.0, every: float = 0.3):
    """Poll until ``predicate()`` returns something truthy; return it (fails the test past ``timeout``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if out := predicate():
            return out
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {predicate.__doc__ or predicate}")


def run_status(rid: int) -> str:
    from analysis.results_db import runs

    return runs.get_run(rid)["status"]


def home_and_calculator_draw(entry: str, within: float) -> Any:
    """Draw Home, then the calculator, in one AppTest session; both without an exception, Home with its chart, all
    within ``within`` seconds. Returns the AppTest (its sidebar says what the model side is doing)."""
    from streamlit.testing.v1 import AppTest

    t0 = time.perf_counter()
    at = AppTest.from_file(entry, default_timeout=30)
    at.run()
    assert not at.exception and at.title[0].value == "BERT Family Explorer"
    assert len(at.get("plotly_chart")) == 1
    at.switch_page("views/calculator.py").run()
    assert not at.exception
    assert time.perf_counter() - t0 < within
    return at
