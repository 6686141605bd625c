"""Startup, memory and model-load numbers for the foundation (prints a table).

    python bench/startup.py [--runs 3]

Measures, as a fresh user would meet them (empty model folder, offline, the bundled model only):
- seconds from `streamlit run` to a healthy server (/_stcore/health), and to the Home page fully
  drawn in headless Chromium (its chart points on screen);  target: Home <= 3 s after healthy;
- resident memory (RSS) of the idle server after drawing Home, and after loading the bundled
  MiniLM from the Models page; target: idle <= 350 MB;
- the bundled model's load time: cold (a new process: imports + weights) and cached (a second call).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.test_browser import CHROMIUM, CHROMIUM_ARGS, _free_port, start_server  # noqa: E402


def rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def one_run(browser, env: dict[str, str]) -> dict[str, float]:
    port = _free_port()
    t0 = time.perf_counter()
    proc = start_server(env, port)
    healthy = time.perf_counter() - t0
    try:
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        t1 = time.perf_counter()
        page.goto(f"http://127.0.0.1:{port}/")
        page.locator(".js-plotly-plot .scatterlayer .point").first.wait_for(timeout=60_000)
        page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
        home = time.perf_counter() - t1
        time.sleep(1)
        idle = rss_mb(proc.pid)
        page.goto(f"http://127.0.0.1:{port}/models")
        page.get_by_role("button", name="Load it").click()
        page.get_by_text("attention weights checked").wait_for(timeout=120_000)
        loaded = rss_mb(proc.pid)
        page.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    return {"healthy_s": healthy, "home_drawn_s": home, "idle_rss_mb": idle, "minilm_rss_mb": loaded}


LOAD_SNIPPET = """
import time; t0 = time.perf_counter()
from models.loader import load
lm = load("sentence-transformers/all-MiniLM-L6-v2", attentions=True)
t1 = time.perf_counter()
load("sentence-transformers/all-MiniLM-L6-v2", attentions=True)
t2 = time.perf_counter()
print(t1 - t0, lm.load_seconds, t2 - t1)
"""


def load_times(env: dict[str, str]) -> tuple[float, float, float]:
    out = subprocess.run([sys.executable, "-c", LOAD_SNIPPET], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True).stdout.split()
    return float(out[0]), float(out[1]), float(out[2])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as models:
        env = {**os.environ, "BFE_MODEL_DIR": models, "HF_HUB_OFFLINE": "1"}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            runs = [one_run(browser, env) for _ in range(args.runs)]
            browser.close()
        loads = [load_times(env) for _ in range(args.runs)]
    print(f"{'measure':42s} {'median':>9s} {'min':>9s} {'max':>9s}")
    for key, label in [("healthy_s", "streamlit run -> healthy (s)"),
                       ("home_drawn_s", "Home fully drawn in Chromium (s)"),
                       ("idle_rss_mb", "idle server RSS after Home (MB)"),
                       ("minilm_rss_mb", "server RSS with MiniLM loaded (MB)")]:
        vals = [r[key] for r in runs]
        print(f"{label:42s} {statistics.median(vals):9.2f} {min(vals):9.2f} {max(vals):9.2f}")
    for i, label in enumerate(["MiniLM cold: imports + load (s)", "MiniLM cold: load only (s)", "MiniLM cached (s)"]):
        vals = [x[i] for x in loads]
        print(f"{label:42s} {statistics.median(vals):9.4f} {min(vals):9.4f} {max(vals):9.4f}")


if __name__ == "__main__":
    main()
