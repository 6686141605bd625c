"""The README's pictures: every page of the app, offline on the bundled model, as a visitor first sees it.

    python scripts/screenshots.py [--only attention,lab] [--out docs/images]

Starts the app as the README does (``python -m app.serve``) with a fresh model folder and database in a temporary
folder, so nothing of yours shows; queues one tiny pre-training run on the lab's own queue and waits for the server
to train it once the first page is drawn, and three tiny fine-tuning runs (real runs, so the labs' pictures show
real curves and a real table). Then opens each page in
headless Chromium (Debian's, ``/usr/bin/chromium``) at 1280×800, waits until its script has finished and its charts
are drawn, scrolls to its main result when that is below the first screen, and writes ``docs/images/<page>.png``,
plus ``present-attention.png`` in presentation mode at 1280×720. The pack is shot after adding Home's and the
Attention explorer's charts to it (:data:`PREPARE`). Each PNG is reduced to a 256-colour palette (Pillow), and
shrunk if still over :data:`MAX_BYTES`. Regenerate them when a page changes visibly; ``tests/repo/test_docs.py`` checks
that every page has one and that each is small enough; the temporary folder is removed unless the script fails.
"""

from __future__ import annotations

import argparse
import io
import os
import shutil
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
    ("parts", "parts", "", "Which parts matter: the logit lens, head importance and pruning, causal tracing"),
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
    """A 256-colour palette PNG (at 3/4, then 1/2 the width while it is over ``limit``)."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("RGB")
    for scale in (1.0, 0.75, 0.5):
        shown = image if scale == 1.0 else image.resize((int(image.width * scale), int(image.height * scale)), Image.LANCZOS)
        out = io.BytesIO()
        shown.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(out, "PNG", optimize=True)
        if out.tell() <= limit:
            return out.getvalue()
    return out.getvalue()


def train_demo_runs(labs: set[str], timeout: float = 600) -> None:
    """Queue tiny real runs for the server's supervisor (one pre-training run for the Lab; a fine-tuned, a frozen and
    a random-init run of the bundled model on WiC for the Fine-tuning lab) and wait until they have finished."""
    from analysis.results_db import runs
    from analysis.run_status import RunStatus
    from models.finetune import FineTuneConfig
    from models.pretrain.config import TrainConfig
    from services import lab

    ids: list[int] = []
    if labs & {"lab", "parts"}:  # the Which-parts-matter page reads this run's checkpoint (the only masked LM offline)
        cfg = TrainConfig(layers=2, hidden=64, heads=2, ffn=128, seq_len=32, batch=16, steps=150, lr=3e-3, corpus_lines=2000)
        ids += lab.submit("single", cfg, "mlm-demo", start=False)
    if "finetune" in labs:
        ids += lab.submit_finetune([FineTuneConfig(mode=mode, epochs=2, max_len=32, max_train=300, max_test=200,
                                                   run=f"wic-{mode}") for mode in ("finetune", "frozen", "random")],
                                   "wic-demo", start=False)
    deadline = time.monotonic() + timeout
    while ids and time.monotonic() < deadline:
        for rid in list(ids):
            run = runs.get_run(rid)
            if run["status"] == RunStatus.FINISHED:
                ids.remove(rid)
            elif run["status"] in (RunStatus.FAILED, RunStatus.CANCELLED, RunStatus.INTERRUPTED):
                raise RuntimeError(f"the demo run {run['name']} ended {run['status']}: {run['message']}")
        time.sleep(1)
    if ids:
        raise RuntimeError(f"the demo runs {ids} did not finish in {timeout:.0f} s")


def settle(page) -> None:
    """Wait until the page's script has finished and every chart on it is drawn."""
    page.wait_for_selector('[data-testid="stMain"] h1', timeout=90_000)
    time.sleep(1.5)
    page.wait_for_function("""() => !document.querySelector('[data-testid="stStatusWidget"]')
                                     && !document.querySelector('[data-testid="stSkeleton"]')
                                     && [...document.querySelectorAll('[data-testid="stPlotlyChart"]')]
                                          .every(c => c.querySelector('.main-svg'))""", timeout=120_000)
    time.sleep(2.5)  # charts lay out (and bertviz's frames draw) after the script has finished


def fill_the_pack(page, base: str) -> None:
    """The pack is empty in a new session: add Home's and the Attention explorer's charts, then open the pack by the
    sidebar (the same session; a new URL would start an empty one), as a presenter does."""
    page.goto(base + "/")
    for step in ("Attention explorer", "Presentation pack"):
        settle(page)
        page.get_by_role("button", name="Add to pack").first.click()
        page.get_by_text("Added to the presentation pack").first.wait_for(timeout=30_000)
        page.get_by_role("link", name=step).click()
    page.get_by_text("2 item(s) of at most").wait_for(timeout=60_000)


#: Pages whose picture needs a few clicks first, in place of opening their URL: name -> f(page, base URL).
PREPARE = {"pack": fill_the_pack}


def shoot(page, url: str | None, path: Path) -> None:
    if url:
        page.goto(url)
    settle(page)
    # Outside presentation mode a page's inputs come first: show its main result, with what is just above it, as a
    # visitor sees it after scrolling to it (presentation mode has it on the first screen already).
    page.evaluate("""() => { window.scrollTo(0, 0);  // a page reached by the sidebar keeps the last page's scroll
                             document.querySelectorAll('[data-testid="stMain"], [data-testid="stAppViewContainer"]')
                                     .forEach(e => { e.scrollTop = 0; });
                             const m = document.querySelector('.st-key-main-result');
                             if (m && m.getBoundingClientRect().bottom > window.innerHeight) m.scrollIntoView({block: 'end'}); }""")
    page.mouse.move(VIEWPORT["width"] - 1, VIEWPORT["height"] // 2)  # no hover effect (the sidebar's collapse button)
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
    ok = False
    try:
        wait_healthy(f"http://127.0.0.1:{port}/_stcore/health")
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox", "--disable-gpu"])
            first = browser.new_page(viewport=VIEWPORT)
            # the first page drawn to its end starts the model process and the lab's queue
            shoot(first, f"http://127.0.0.1:{port}/", tmp / "first.png")
            first.close()
            t0 = time.monotonic()
            train_demo_runs({name for name, *_ in wanted} & {"lab", "finetune", "parts"})
            print(f"demo runs trained in {time.monotonic() - t0:.0f} s", flush=True)
            base = f"http://127.0.0.1:{port}"
            for name, path, query, _ in wanted:
                viewport = {"width": 1280, "height": 720} if "present=1" in query else VIEWPORT
                page = browser.new_page(viewport=viewport)
                target = args.out / f"{name}.png"
                if name in PREPARE:
                    PREPARE[name](page, base)
                shoot(page, None if name in PREPARE else f"{base}/{path}" + (f"?{query}" if query else ""), target)
                print(f"{target.relative_to(ROOT) if target.is_relative_to(ROOT) else target}: {target.stat().st_size / 1024:.0f} KB",
                      flush=True)
                page.close()
            browser.close()
        ok = True
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        if ok:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"failed; the server's log and data are kept in {tmp}", file=sys.stderr)


if __name__ == "__main__":
    main()
