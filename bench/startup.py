"""Cold start as a class meets it: from the command to Home drawn, and the first model page (prints a table with ratios).

    python bench/startup.py [--runs 3] [--transfer]

Each run starts fresh servers the way the README does and draws pages in headless Chromium
(empty model folder, offline, the bundled model only). Runs are interleaved so every measure
sees the same machine load; medians are reported.

- floor: a bare Streamlit page with one small plotly scatter (bench/floor/floor_app.py), started
  with `streamlit run`: from the command to /_stcore/health answering, and to its chart's points on
  screen;
- the app, started with `python -m app.serve` (the README's command and the container's entry):
  from the command to health (target: the floor's health + 0.5 s) and to Home drawn (target:
  <= 1.3 x the floor from the command); Home after health (target <= 1.2 x the floor's);
- the Attention page opened 3 s after Home is drawn (a teacher's pace) against a warm visit after
  it in a new tab (target <= 1.5 x warm), and opened right at health (no time to warm: reported);
- RSS of the server with its model process: idle after Home once warm, and with the model used.

`--transfer`: an attention result at 16-512 tokens computed in this process against the same call
through the model process (the cost of moving it between processes).
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

from tests.helpers.servers import CHROMIUM, CHROMIUM_ARGS, free_port  # noqa: E402

FLOOR = ROOT / "bench" / "floor" / "floor_app.py"
POINTS = ".js-plotly-plot .scatterlayer .point"
IDLE = "() => !document.querySelector('[data-testid=\"stStatusWidget\"]')"


def rss_mb(pid: int) -> float:
    proc = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20


def start(argv: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, int, float]:
    """Start a server; return it, its port and the seconds from the command to health answering."""
    port = free_port()
    log = tempfile.TemporaryFile()  # noqa: SIM115 (lives as long as the server; closed with it)
    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *argv, "--server.port", str(port), "--server.address", "127.0.0.1",
                             "--server.headless", "true"], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/_stcore/health", timeout=1):
                return proc, port, time.perf_counter() - t0
        except OSError:
            time.sleep(0.02)
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
    heat = ".js-plotly-plot .heatmaplayer"
    proc, port, out["floor_health"] = start(["-m", "streamlit", "run", str(FLOOR)], env)
    try:
        out["floor"] = draw(browser, f"http://127.0.0.1:{port}/")
        out["floor_cmd"] = out["floor_health"] + out["floor"]
    finally:
        stop(proc)
    proc, port, out["health"] = start(["-m", "app.serve"], env)
    try:
        out["home"] = draw(browser, f"http://127.0.0.1:{port}/")
        out["home_cmd"] = out["health"] + out["home"]
        time.sleep(3.0)  # a teacher's pace
        out["att_3s"] = draw(browser, f"http://127.0.0.1:{port}/attention", heat)
        out["att_warm"] = draw(browser, f"http://127.0.0.1:{port}/attention", heat)
        out["model_rss"] = rss_mb(proc.pid)
    finally:
        stop(proc)
    proc, port, _ = start(["-m", "app.serve"], env)
    try:
        out["att_at_once"] = draw(browser, f"http://127.0.0.1:{port}/attention", heat)
    finally:
        stop(proc)
    proc, port, _ = start(["-m", "app.serve"], env)
    try:
        draw(browser, f"http://127.0.0.1:{port}/")
        wait_warm(proc)
        time.sleep(0.5)
        out["idle_rss"] = rss_mb(proc.pid)
    finally:
        stop(proc)
    return out


def transfer(repeats: int = 5) -> None:
    """extract_attention here against the same call through the model process, interleaved, medians."""
    from core import registry
    from models.attention import extract_attention
    from services.runtime import Runtime

    bundled = registry.bundled_id()
    rt = Runtime(warm=True)
    rt.start()
    try:
        for n in (16, 128, 512):
            text = " ".join(["word"] * (n - 2))
            extract_attention(bundled, text)
            r = rt.call(extract_attention, bundled, text)
            here, there = [], []
            for _ in range(repeats):
                t = time.perf_counter()
                extract_attention(bundled, text)
                here.append(time.perf_counter() - t)
                t = time.perf_counter()
                rt.call(extract_attention, bundled, text)
                there.append(time.perf_counter() - t)
            a, b = statistics.median(here), statistics.median(there)
            print(f"attention at {len(r.tokens):3d} tokens ({r.weights.nbytes / 2**20:5.1f} MB): in this process "
                  f"{a:.3f} s, through the model process {b:.3f} s, ratio {b / a:.2f} (moving it: {b - a:+.3f} s)")
    finally:
        rt.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--transfer", action="store_true", help="only the cost of moving results between processes")
    args = parser.parse_args()
    if args.transfer:
        transfer()
        return
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory() as models:
        env = {**os.environ, "BFE_MODEL_DIR": models, "HF_HUB_OFFLINE": "1"}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            runs = [one_run(browser, env) for _ in range(args.runs)]
            browser.close()
    med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"{args.runs} runs, medians (min-max) on {os.cpu_count()} cores")
    rows = [("floor: command to health (s)", "floor_health", None),
            ("floor: health to its chart drawn (s)", "floor", None),
            ("floor: command to its chart drawn (s)", "floor_cmd", None),
            ("app: command to health (s)", "health", ("floor_health", "+0.5")),
            ("app: health to Home drawn (s)", "home", ("floor", 1.2)),
            ("app: command to Home drawn (s)", "home_cmd", ("floor_cmd", 1.3)),
            ("Attention, opened 3 s after Home (s)", "att_3s", ("att_warm", 1.5)),
            ("Attention, warm visit (s)", "att_warm", None),
            ("Attention, opened right at health (s)", "att_at_once", ("att_warm", None)),
            ("idle RSS after Home, warm (MB, with model process)", "idle_rss", None),
            ("RSS after the Attention page (MB, with model process)", "model_rss", None)]
    for label, key, ratio in rows:
        vals = [r[key] for r in runs]
        text = f"{label:54s} {med[key]:8.2f} ({min(vals):.2f}-{max(vals):.2f})"
        if ratio and ratio[1] == "+0.5":
            text += f"   {med[key] - med[ratio[0]]:+.2f} s vs {ratio[0]} (target <= +0.5)"
        elif ratio:
            ref, target = ratio
            text += f"   ratio {med[key] / med[ref]:.2f} x {ref}" + (f" (target <= {target})" if target else "")
        print(text)


if __name__ == "__main__":
    main()
