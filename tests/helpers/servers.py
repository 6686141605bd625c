"""The app as a browser or a client meets it: the app started as the README starts it (Streamlit, Gradio), headless
Chromium with outside traffic blocked, free ports, and waiting for something to happen."""

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

from tests.helpers import ROOT

CHROMIUM = os.environ.get("BFE_CHROMIUM", "/usr/bin/chromium")
SHOTS = Path(os.environ.get("BFE_SCREENSHOTS", ROOT / "artifacts" / "screenshots"))
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run", "--disable-quic"]

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict[str, str], port: int, log: Path | None = None) -> subprocess.Popen:
    """Start the app as the README does and wait until /_stcore/health answers (60 s at most).

    Its log goes to ``log`` (read by :func:`running_app` when a test fails) or an unlinked temporary file, not a pipe:
    a pipe that nobody reads fills up and blocks the server."""
    import tempfile

    out = log.open("ab") if log else tempfile.TemporaryFile()  # noqa: SIM115 - handed to the child, closed right after
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.serve", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    out.close()  # the child holds its own descriptor
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1) as r:
                if r.status == 200:
                    return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError(f"streamlit did not become healthy in 60 s (exit code {proc.poll()})")


@contextmanager
def running_app(tiny_dir: Path) -> Iterator[str]:
    """The app started as the README starts it on ``tiny_dir``'s models; when the test fails inside, the server's log
    tail is printed (pytest shows it with the failure: a browser timeout alone says nothing about why)."""
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1"}
    env.pop("BFE_MODEL_PROCESS", None)  # as the README starts it: the pages' model calls in the model process
    port = free_port()
    log = tiny_dir.parent / f"server-{port}.log"
    proc = start_server(env, port, log)
    try:
        yield f"http://127.0.0.1:{port}"
    except BaseException:
        print(f"--- the server's log ({log}), last 6,000 characters ---\n{log.read_text(errors='replace')[-6000:]}",
              file=sys.stderr)
        raise
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


@contextmanager
def gradio_server(env: dict[str, str]) -> Iterator[str]:
    """``python -m app.gradio_app`` on a free port with ``env`` added to this environment; its base URL once it answers
    (120 s at most). Stopped at the end."""
    import tempfile

    port = free_port()
    full = {**os.environ, "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False", **env}
    # Its log goes to a file: a pipe nobody reads fills up (Gradio logs each refused input with its traceback), and the
    # server then blocks on its next write.
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen([sys.executable, "-m", "app.gradio_app", "--port", str(port)], cwd=ROOT, env=full,
                                stdout=log, stderr=subprocess.STDOUT)
        url = f"http://127.0.0.1:{port}/"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(url, timeout=1):
                    break
            except OSError:
                if proc.poll() is not None:
                    log.seek(0)
                    raise AssertionError(log.read().decode(errors="replace")[-5000:]) from None
                time.sleep(0.5)
        else:
            proc.kill()
            raise RuntimeError("the Gradio app did not start in 120 s")
        try:
            yield url
        finally:
            proc.terminate()
            proc.wait(timeout=10)


# url path -> text the page must show once drawn
PAGES = {"": "Longer, bigger, smaller, smarter", "models": "Get models for an offline classroom",
         "calculator": "where the bytes go", "scaling": "read its exponent with an error bar",
         "attention": "what each head of a real model looks at", "permutation": "never its own target",
         "objectives": "What each family member was trained to do", "results": "each with its paper, table and split",
         "pack": "ready for slides", "representations": "which words drive a prediction",
         "lab": "re-run the papers' ablations in miniature", "finetune": "BERT's second half",
         "parts": "What each layer would predict"}


@contextmanager
def told_on_failure(**pages: Any) -> Iterator[dict[str, Any]]:
    """A failure inside says what each browser page showed then (its address and text; a screenshot goes to the
    screenshots folder): a CI log is all a flaky browser test leaves behind. Pages opened inside are added to the
    dict it gives."""
    try:
        yield pages
    except Exception as err:
        SHOTS.mkdir(parents=True, exist_ok=True)
        shown = []
        for name, page in pages.items():
            try:
                page.screenshot(path=str(SHOTS / f"failed-{name}.png"), full_page=True)
                main, side = (page.get_by_test_id(part).first for part in ("stMain", "stSidebar"))
                shown.append(f"--- {name} at {page.url}:\n{main.inner_text(timeout=5000)[:1500]}\n"
                             f"--- its sidebar:\n{side.inner_text(timeout=5000)[-600:]}")
            except Exception as why:  # the page itself may be what failed
                shown.append(f"--- {name}: could not be read ({why})")
        raise AssertionError("\n".join([str(err), *shown])) from err
