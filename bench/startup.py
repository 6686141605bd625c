"""First paint and first model page, as a class meets them (prints a table with ratios).

    python bench/startup.py [--runs 5]

Each run starts fresh servers the way the README does and draws pages in headless Chromium
(empty model folder, offline, the bundled model only). Runs are interleaved so every measure
sees the same machine load; medians are reported.

- floor: a bare Streamlit page with one small plotly scatter (bench/floor/floor_app.py), from the
  server answering /_stcore/health to its chart's points on screen;
- Home, the same way, on a server started with BFE_WARMUP=0 (the page's own cost) and on one
  started normally (`python -m app.serve`: the background warm-up runs meanwhile);
  target: Home <= 1.2 x the floor;
- the Attention page: its first visit once the server is up (the warm-up has had the time a
  teacher's start-up gives it: until it reports ready), and a warm visit after it in a new tab;
  target: first <= 1.5 x warm. Also the first visit straight after healthy (no time to warm);
- the server's RSS: idle after Home, and with the model loaded.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _free_port  # noqa: E402

FLOOR = ROOT / "bench" / "floor" / "floor_app.py"
POINTS = ".js-plotly-plot .scatterlayer .point"
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


def rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int]:
    port = _free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server; closed with it)
    proc = subprocess.Popen([sys.executable, *argv, "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--server.headless", "true"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return proc, port
        except OSError:
            time.sleep(0.05)
    proc.kill()
    raise RuntimeError("server did not become healthy in 60 s")


def wait_warm(proc: subprocess.Popen, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        proc.log.seek(0)  # type: ignore[attr-defined]
        if b"warm-up ready" in proc.log.read():  # type: ignore[attr-defined]
            return
        time.sleep(0.1)
    raise RuntimeError("the warm-up did not finish")


def stop(proc: subprocess.Popen) -> None:
    proc.terminate()
    proc.wait(timeout=10)
    proc.log.close()  # type: ignore[attr-defined]


def draw(browser, url: str, probe: str = POINTS) -> float:
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    t0 = time.perf_counter()
    page.goto(url)
    page.locator(probe).first.wait_for(timeout=120_000)
    page.wait_for_function(IDLE, timeout=120_000)
    took = time.perf_counter() - t0
    page.close()
    return took


def one_run(browser, env: dict[str, str]) -> dict[str, float]:
    out: dict[str, float] = {}
    proc, port = start(["-m", "streamlit", "run", str(FLOOR)], env)
    try:
        out["floor"] = draw(browser, f"http://127.0.0.1:{port}/")
    finally:
        stop(proc)
    proc, port = start(["-m", "app.serve"], {**env, "BFE_WARMUP": "0"})
    try:
        out["home"] = draw(browser, f"http://127.0.0.1:{port}/")
    finally:
        stop(proc)
    proc, port = start(["-m", "app.serve"], env)
    try:
        out["home_warming"] = draw(browser, f"http://127.0.0.1:{port}/")
        wait_warm(proc)
        time.sleep(0.5)
        out["idle_rss"] = rss_mb(proc.pid)
        heat = ".js-plotly-plot .heatmaplayer"
        out["att_first"] = draw(browser, f"http://127.0.0.1:{port}/attention", heat)
        out["att_warm"] = draw(browser, f"http://127.0.0.1:{port}/attention", heat)
        out["model_rss"] = rss_mb(proc.pid)
    finally:
        stop(proc)
    proc, port = start(["-m", "app.serve"], env)
    try:
        out["att_at_once"] = draw(browser, f"http://127.0.0.1:{port}/attention", ".js-plotly-plot .heatmaplayer")
    finally:
        stop(proc)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as models:
        env = {**os.environ, "BFE_MODEL_DIR": models, "HF_HUB_OFFLINE": "1"}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            runs = [one_run(browser, env) for _ in range(args.runs)]
            browser.close()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{args.runs} runs, medians (min-max) on {os.cpu_count()} cores")
    rows = [("floor: bare page + one scatter (s)", "floor", None),
            ("Home, no warm-up running (s)", "home", ("floor", 1.2)),
            ("Home while the warm-up runs (s)", "home_warming", ("floor", 1.2)),
            ("Attention, first visit after warm-up (s)", "att_first", ("att_warm", 1.5)),
            ("Attention, warm visit (s)", "att_warm", None),
            ("Attention, first visit right at start (s)", "att_at_once", ("att_warm", 1.5)),
            ("idle server RSS after warm-up (MB)", "idle_rss", None),
            ("server RSS after the Attention page (MB)", "model_rss", None)]
    for label, key, ratio in rows:
        vals = [r[key] for r in runs]
        text = f"{label:44s} {med[key]:8.2f} ({min(vals):.2f}-{max(vals):.2f})"
        if ratio:
            ref, target = ratio
            text += f"   ratio {med[key] / med[ref]:.2f} x {ref} (target <= {target})"
        print(text)


if __name__ == "__main__":
    main()
