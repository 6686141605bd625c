"""The README's pictures: every page of the app, offline on the bundled model, as a visitor first sees it.

    python scripts/screenshots.py [--only attention,lab] [--out docs/images]

Starts the app as the README does (``python -m app.serve``) with a fresh model folder and database in a temporary
folder, so nothing of yours shows; queues one tiny pre-training run on the lab's own queue and waits for the server
to train it once the first page is drawn (a real run, so the Lab picture shows a real curve); then opens each page in headless Chromium
(Debian's, ``/usr/bin/chromium``) at 1280×800, waits until the page has finished drawing, scrolls to its main result
when that is below the first screen, and writes
``docs/images/<page>.png``, plus ``present-attention.png`` in presentation mode. Each PNG is reduced to a 256-colour
palette (Pillow), and halved in size if still over :data:`MAX_BYTES`. Regenerate them when a page changes visibly;
``tests/test_docs.py`` checks that every page has one and that each is small enough.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: (file name, url path, query string, the line the README shows under it). One per page of app/streamlit_app.py.
SHOTS: tuple[tuple[str, str, str, str], ...] = (
    ("home", "", "", "Family tree: the family by size and year, with a card per model"),
    ("attention", "attention", "", "Attention explorer: every head of a real model, bertviz views, head statistics"),
    ("representations", "representations", "", "Representations: word senses separating layer by layer; CKA; attributions"),
    ("objectives", "objectives", "", "Pre-training objectives: fill-mask side by side, masking, NSP/SOP, ELECTRA"),
    ("permutation", "permutation", "", "Permutation LM: XLNet's factorisation orders and two-stream masks"),
    ("calculator", "calculator", "", "Size, memory & compute: exact parameter counts, training memory, cost"),
    ("lab", "lab", "", "Pre-training lab: train small family members here; every ablation ends in a verdict"),
    ("finetune", "finetune", "", "Fine-tuning lab: fine-tuned against frozen against random initialisation"),
    ("scaling", "scaling", "", "Scaling laws: fit a law to points with an error bar on its exponent"),
    ("results", "results", "", "GLUE results database: every number with its paper, table and split"),
    ("models", "models", "", "Models & availability: what is on this machine, and any checkpoint"),
    ("pack", "pack", "", "Presentation pack: collected charts and tables, to slides"),
    ("present-attention", "attention", "present=1", "Presentation mode at 1280×720: the result on the first screen"),
)
MAX_BYTES = 200 * 1024
VIEWPORT = {"width": 1280, "height": 800}


def compress(png: bytes, limit: int = MAX_BYTES) -> bytes:
    """A 256-colour palette PNG (and half the size, then a quarter, while it is over ``limit``)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    for scale in (1.0, 0.75, 0.5):
        shown = image if scale == 1.0 else image.resize((int(image.width * scale), int(image.height * scale)), Image.LANCZOS)
        out = io.BytesIO()
        shown.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
        if out.tell() <= limit:
            return out.getvalue()
    return out.getvalue()


def train_one_run(timeout: float = 300) -> None:
    """Queue a tiny real pre-training run for the server's supervisor and wait until it has finished."""
    from analysis.results_db import runs as R
    from models.pretrain.config import TrainConfig
    from services import lab

    cfg = TrainConfig(layers=2, hidden=64, heads=2, ffn=128, seq_len=32, batch=16, steps=150, lr=3e-3, corpus_lines=2000)
    (rid,) = lab.submit("single", cfg, "mlm-demo", start=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        status = R.get_run(rid)["status"]
        if status == "finished":
            return
        if status in ("failed", "cancelled", "interrupted"):
            raise RuntimeError(f"the demo run ended {status}: {R.get_run(rid)['message']}")
        time.sleep(1)
    raise RuntimeError("the demo run did not finish in time")


def shoot(page, url: str, path: Path) -> None:
    page.goto(url)
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=90_000)
    time.sleep(1.5)
    page.wait_for_function("""() => !document.querySelector('[data-testid="stStatusWidget"]')
                                     && !document.querySelector('[data-testid="stSkeleton"]')""", timeout=120_000)
    time.sleep(2.5)  # charts lay out after the script has finished
    # Outside presentation mode a page's inputs come first: show its main result, with what is just above it, as a
    # visitor sees it after scrolling to it (presentation mode has it on the first screen already).
    page.evaluate("""() => { const m = document.querySelector('.st-key-main-result');
                             if (m && m.getBoundingClientRect().bottom > window.innerHeight) m.scrollIntoView({block: 'end'}); }""")
    time.sleep(0.5)
    path.write_bytes(compress(page.screenshot()))


def main() -> None:
    from playwright.sync_api import sync_playwright

    from bench.scaleout import free_port, start_replica, wait_healthy

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated file names (default: all)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "images")
    args = parser.parse_args()
    wanted = [s for s in SHOTS if not args.only or s[0] in args.only.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="bfe-shots-"))
    (tmp / "models").mkdir()
    env = {"HF_HUB_OFFLINE": "1", "BFE_MODEL_DIR": str(tmp / "models"), "DATABASE_URL": f"sqlite:///{tmp / 'results.db'}"}
    os.environ.update(env)
    port = free_port()
    proc = start_replica(port, {**os.environ, **env}, tmp / "server.log")
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            first = browser.new_page(viewport=VIEWPORT)
            # the first page drawn to its end starts the model process and the lab's queue
            shoot(first, f"http://127.0.0.1:{port}/", tmp / "first.png")
            first.close()
            if any(s[0] == "lab" for s in wanted):
                train_one_run()
            for name, path, query, _ in wanted:
                viewport = {"width": 1280, "height": 720} if "present=1" in query else VIEWPORT
                page = browser.new_page(viewport=viewport)
                target = args.out / f"{name}.png"
                shoot(page, f"http://127.0.0.1:{port}/{path}" + (f"?{query}" if query else ""), target)
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: {target.stat().st_size / 1024:.0f} KB",
                      flush=True)
                page.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


if __name__ == "__main__":
    main()
