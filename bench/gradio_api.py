"""Gradio API overhead and concurrency (bundled MiniLM for attention; tiny models for the rest).

    python bench/gradio_api.py

Per endpoint: median latency through gradio_client against calling the same library function in
this process (target overhead ≤ 50 ms); then 20 concurrent clients: all answered, total time, and
the server's resident memory before and after.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import timed  # noqa: E402


def http_call(url: str, name: str, args: tuple) -> dict:
    """Gradio's documented REST route, without gradio_client: POST the inputs, read the result event."""
    import json

    req = urllib.request.Request(f"{url}gradio_api/call{name}", data=json.dumps({"data": list(args)}).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        event = json.loads(r.read())["event_id"]
    with urllib.request.urlopen(f"{url}gradio_api/call{name}/{event}") as r:
        body = r.read().decode()
    data = [line[6:] for line in body.splitlines() if line.startswith("data: ")]
    return json.loads(data[-1])


def main() -> None:
    import psutil
    from gradio_client import Client

    from app import gradio_app
    from tests.helpers.servers import free_port as _free_port
    from tests.helpers.tiny import build_all

    models = tempfile.mkdtemp()
    build_all(models)
    os.environ.update(BFE_MODEL_DIR=models, HF_HUB_OFFLINE="1")
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "app.gradio_app", "--port", str(port)], cwd=ROOT, env=dict(os.environ),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    t0 = time.perf_counter()
    while True:
        try:
            urllib.request.urlopen(url, timeout=1)
            break
        except OSError:
            time.sleep(0.3)
    print(f"server up in {time.perf_counter() - t0:.1f} s")
    try:
        client = Client(url, verbose=False)
        calls = {
            "/fill_mask": ("the cat sat on the [MASK] .", "bert-base-uncased", 5, "independent"),
            "/attention": ("sentence-transformers/all-MiniLM-L6-v2", "The cat sat on the mat because it was tired.", "", 2, 3),
            "/pseudo_perplexity": ("bert-base-uncased", "the cat sat on the mat ."),
            "/permutation_masks": ("New York is a city", "random:1", 2),
            "/calculator": ("bert-base-uncased", "pretraining", "mixed", "adamw", 8, 128, 0, 1, "V100 16 GB"),
        }
        direct = {"/fill_mask": gradio_app.fill_mask, "/attention": gradio_app.attention, "/pseudo_perplexity": gradio_app.pseudo_perplexity,
                  "/permutation_masks": gradio_app.permutation_masks, "/calculator": gradio_app.calculator}
        print(f"{'endpoint':20s} {'direct ms':>10s} {'HTTP ms':>8s} {'overhead':>9s} {'client ms':>10s} {'overhead':>9s}")
        for name, args in calls.items():
            t_direct = timed(lambda f=direct[name], a=args: f(*a))
            t_http = timed(lambda n=name, a=args: http_call(url, n, a))
            t_client = timed(lambda n=name, a=args: client.predict(*a, api_name=n))
            print(f"{name:20s} {1000 * t_direct:>10.1f} {1000 * t_http:>8.1f} {1000 * (t_http - t_direct):>9.1f}"
                  f" {1000 * t_client:>10.1f} {1000 * (t_client - t_direct):>9.1f}")
        server = psutil.Process(proc.pid)
        before = server.memory_info().rss / 2**20
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=20) as pool:
            results = list(pool.map(lambda i: Client(url, verbose=False).predict(
                "bert-base-uncased", f"the cat sat on the mat {i} .", api_name="/pseudo_perplexity"), range(20)))
        took = time.perf_counter() - t0
        after = server.memory_info().rss / 2**20
        print(f"20 concurrent clients (each its own Client): {sum(1 for r in results if r['pppl'] > 0)}/20 answered in {took:.1f} s;"
              f" server RSS {before:.0f} → {after:.0f} MB")
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    main()
