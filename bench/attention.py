"""Attention extraction cost, offline bertviz HTML size, and page render time (bundled MiniLM).

    python bench/attention.py

Targets: extraction ≤ 1.2 × a bare eager forward pass of the same model on the same input, at
16, 64, 128 and 512 tokens (medians of interleaved runs, so both see the same machine load);
bertviz HTML ≤ 3 MB at 128 tokens (bertviz's own: about 54 MB).
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import interleaved  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("BFE_MODEL_DIR", tempfile.mkdtemp())

MINILM = "sentence-transformers/all-MiniLM-L6-v2"



def extraction() -> None:
    import torch

    from models.attention import extract_attention
    from models.attention_html import bertviz_html
    from models.loader import load

    lm = load(MINILM, attentions=True)
    print(f"{'tokens':>6s} {'forward ms':>11s} {'extract ms':>11s} {'ratio':>6s} {'head HTML MB':>13s} {'model HTML MB':>14s}"
          f" {'one layer MB':>13s}")
    for n in (16, 64, 128, 512):
        text = " ".join(["word"] * (n - 2))
        r = extract_attention(lm, text)
        assert len(r.tokens) == n, len(r.tokens)
        enc = lm.tokenizer(text, return_tensors="pt")

        def bare(enc=enc) -> None:
            with torch.inference_mode():
                lm.model(**enc)

        t_bare, t_ext = interleaved(bare, lambda text=text: extract_attention(lm, text))
        head = len(bertviz_html(r, "head").encode()) / 2**20
        model = len(bertviz_html(r, "model").encode()) / 2**20
        one = len(bertviz_html(r, "head", layer=0, only_layers=[0]).encode()) / 2**20  # what the page sends above 128 tokens
        print(f"{n:>6d} {1000 * t_bare:>11.1f} {1000 * t_ext:>11.1f} {t_ext / t_bare:>6.2f} {head:>13.2f} {model:>14.2f} {one:>13.2f}")


def page_render() -> None:
    from playwright.sync_api import sync_playwright

    from tests.helpers.servers import CHROMIUM, CHROMIUM_ARGS, start_server
    from tests.helpers.servers import free_port as _free_port

    port = _free_port()
    proc = start_server({**os.environ}, port)
    try:
        with sync_playwright() as p:
            b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for view, probe in (("heatmap", ".js-plotly-plot .heatmaplayer"), ("head", None)):
                times = []
                for _ in range(3):
                    page = b.new_page(viewport={"width": 1400, "height": 1600})
                    t0 = time.perf_counter()
                    page.goto(f"http://127.0.0.1:{port}/attention?at_view={view}")
                    if probe:
                        page.locator(probe).first.wait_for(timeout=120_000)
                    else:
                        page.frame_locator("iframe").first.locator("svg text").first.wait_for(timeout=120_000)
                    times.append(time.perf_counter() - t0)
                    page.close()
                print(f"page /attention view={view}: drawn in {min(times):.2f} s (best of 3; first {times[0]:.2f} s incl. model load)")
            b.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    extraction()
    page_render()
