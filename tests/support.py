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

#: Lines a test wants in the run's summary (how many states a crawl tried, how many cases a fuzzer ran): printed by
#: conftest.py's ``pytest_terminal_summary``.
SUMMARY: list[str] = []


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(env: dict[str, str], port: int) -> subprocess.Popen:
    """Start the app as the README does and wait until /_stcore/health answers (60 s at most).

    Its log goes to an unlinked temporary file, not a pipe: a pipe that nobody reads fills up and blocks the server."""
    import tempfile

    log = tempfile.TemporaryFile()  # noqa: SIM115 - handed to the child, closed here right after
    proc = subprocess.Popen(
        [sys.executable, "-m", "app.serve", "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true"],
        cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    log.close()  # the child holds its own descriptor
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


def seed_lab(tag: str = "seeded") -> dict[str, str]:
    """Finished runs in the labs' queue, as workers would leave them, without training: an ALBERT ablation (two arms ×
    3 seeds, with curves, SOP accuracy, a downstream score per item and its random-init control, the POS probe), a
    scaling experiment (3 widths × 2 seeds, held-out losses on a power law) and a fine-tuning experiment (the bundled
    MiniLM, fine-tuned and frozen, 2 seeds each). Their verdicts are settled. Returns the experiments' names."""
    import math

    from analysis.results_db import runs
    from core import registry
    from models.finetune import FineTuneConfig, run_label
    from models.pretrain import TrainConfig
    from services import ablations, lab

    tiny = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)
    suite = {"tasks": ["supersense"], "epochs": 1, "max_train": 40, "max_test": 30, "max_len": 32}
    names = {"albert": f"{tag}-albert", "scaling": f"{tag}-scaling", "finetune": f"{tag}-ft"}

    def close(rid: int, evaluation: dict, tokens: int = 7680) -> None:
        runs.start_run(rid)
        runs.record_curve(rid, [(s, 9.0 - 2.0 * math.log1p(s) / math.log1p(30)) for s in range(1, 31)], seconds=3.0)
        runs.finish_run(rid, "finished", evaluation=evaluation, tokens=tokens, seconds=3.0, parameters=10_000)

    for rid in lab.submit("albert", tiny, names["albert"], seeds=3, downstream=suite, start=False):
        run = runs.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        score = (0.80 if arm == "sop" else 0.50) + 0.01 * rep
        downstream = {"accuracy": 0.30 + 0.01 * rep, "correct": [1, 0, 1] * 10}
        if run["config"].get("control"):
            downstream |= {"random_accuracy": 0.10 + 0.01 * rep, "random_correct": [0, 0, 1] * 10}
        close(rid, {"sop_accuracy": score, "downstream": {"supersense": downstream}, "held_out_loss": 6.0,
                    "pos_probe_accuracy": 0.6 + 0.01 * rep, "pos_probe_random_init": 0.3,
                    "probes": [{"probe": "the [MASK] of a plant", "top": ["part", "seed", "root", "leaf", "stem"]}]})
    ablations.settle(names["albert"])
    for rid in lab.submit("scaling", tiny, names["scaling"], seeds=2, widths=(16, 32, 64), start=False):
        run = runs.get_run(rid)
        n = lab.size(TrainConfig.from_stored(run["config"])).non_embedding
        close(rid, {"held_out_loss": 40.0 * n ** -0.08 * (1 + 0.002 * run["config"]["replicate"])}, tokens=10**6)
    ablations.settle(names["scaling"])
    bundled = registry.bundled_id()
    configs = [FineTuneConfig(model=bundled, task="wic", mode=mode, seed=seed, epochs=1, max_train=40, max_test=30,
                              run=run_label(names["finetune"], bundled, mode, seed))
               for mode in ("finetune", "frozen") for seed in (0, 1)]
    for cfg, rid in zip(configs, lab.submit_finetune(configs, names["finetune"], start=False), strict=True):
        acc = (0.62 if cfg.mode == "finetune" else 0.55) + 0.01 * cfg.seed
        close(rid, {"model": bundled, "task": "wic", "mode": cfg.mode, "seed": cfg.seed, "accuracy": acc,
                    "accuracy_interval": [acc - 0.1, acc + 0.1], "macro_f1": acc - 0.02, "macro_f1_interval": [acc - 0.12, acc + 0.08],
                    "majority_baseline": 0.5, "train_examples": 40, "test_examples": 30, "trainable_parameters": 1000,
                    "epochs": [{"epoch": 1, "train_loss": 0.69, "validation_accuracy": acc}],
                    "layer_change": [{"layer": "embeddings", "weight_change": 0.001, "cka": 0.99},
                                     {"layer": "layer 0", "weight_change": 0.01, "cka": 0.9}],
                    "correct": [1, 0] * 15})
    names["watch"] = seed_trained(tag)
    return names


def seed_trained(tag: str = "seeded") -> str:
    """Checkpoints trained for real in the model folder, as the labs leave them: a tiny masked LM that kept its steps
    (the pre-training lab's run ``<tag>-watch``, finished in the queue, with its probes over training) and a tiny BERT
    fine-tuned on supersense (a classifier for the heads view). A few seconds. Returns the pre-training run's group."""
    from analysis.results_db import runs
    from models.finetune import FineTuneConfig, finetune
    from models.pretrain import TrainConfig, train
    from services import lab

    tiny = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200,
                       run=f"{tag}-watch")
    r = train(tiny)
    (rid,) = lab.submit("single", tiny, f"{tag}-watch", start=False)
    runs.start_run(rid)
    runs.record_curve(rid, r.curve, seconds=r.seconds)
    runs.finish_run(rid, "finished", evaluation=r.evaluation, checkpoint=r.checkpoint, tokens=r.tokens, seconds=r.seconds,
                    parameters=r.parameters)
    finetune(FineTuneConfig(model="bert-base-uncased", task="supersense", epochs=1, max_train=32, max_test=16, max_len=32,
                            run=f"{tag}-classifier"))
    return f"{tag}-watch"


def count_results(engine, **where) -> int:
    """How many results ``engine``'s database holds, optionally only those whose columns equal ``where``."""
    from sqlalchemy import func, select

    from analysis import results_db as db

    with db.session(engine) as s:
        stmt = select(func.count()).select_from(db.Result)
        for k, v in where.items():
            stmt = stmt.where(getattr(db.Result, k) == v)
        return s.scalar(stmt)


# url path -> text the page must show once drawn
PAGES = {"": "Longer, bigger, smaller, smarter", "models": "Get models for an offline classroom",
         "calculator": "where the bytes go", "scaling": "read its exponent with an error bar",
         "attention": "what each head of a real model looks at", "permutation": "never its own target",
         "objectives": "What each family member was trained to do", "results": "each with its paper, table and split",
         "pack": "ready for slides", "representations": "which words drive a prediction",
         "lab": "re-run the papers' ablations in miniature", "finetune": "BERT's second half",
         "parts": "What each layer would predict"}
