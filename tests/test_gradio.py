"""The Gradio app on a local port, called through gradio_client on tiny models: same results as the library."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from tests.support import free_port

pytestmark = pytest.mark.slow  # each test starts a server or a browser: seconds, not milliseconds

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def client(tiny_dir: Path):
    from gradio_client import Client

    port = free_port()
    env = {**os.environ, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
           "BFE_GRADIO_CONCURRENCY": "2"}
    proc = subprocess.Popen([sys.executable, "-m", "app.gradio_app", "--port", str(port)], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                break
        except OSError:
            assert proc.poll() is None, proc.stdout.read().decode(errors="replace")
            time.sleep(0.5)
    else:
        proc.kill()
        raise RuntimeError("the Gradio app did not start in 120 s")
    try:
        yield Client(url, verbose=False)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        assert proc.returncode is not None


def test_every_endpoint_is_documented(client) -> None:
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert set(api) == {"/fill_mask", "/attention", "/pseudo_perplexity", "/permutation_masks", "/calculator"}


def test_fill_mask_equals_the_library(client) -> None:
    from dataclasses import asdict

    from models.objectives import fill_mask

    got = client.predict("the cat sat on the [MASK] .", "bert-base-uncased, roberta-base, gpt2", 3, "independent", api_name="/fill_mask")
    for mid in ("bert-base-uncased", "roberta-base"):
        expected = [[asdict(p) for p in row] for row in fill_mask(mid, "the cat sat on the [MASK] .", 3)]
        assert [[p["id"] for p in row] for row in got["models"][mid]] == [[p["id"] for p in row] for row in expected]
        assert np.allclose([[p["probability"] for p in row] for row in got["models"][mid]],
                           [[p["probability"] for p in row] for row in expected], atol=1e-6)
    assert "masked-lm" in got["errors"]["gpt2"]


def test_attention_equals_the_library(client) -> None:
    from models.attention import extract_attention

    got = client.predict("bert-base-uncased", "a boy plays in the snow .", "a boy is outside .", 1, 2, api_name="/attention")
    r = extract_attention("bert-base-uncased", "a boy plays in the snow .", "a boy is outside .")
    assert got["tokens"] == list(r.tokens) and got["segments"] == list(r.segments)
    assert np.allclose(got["weights"], r.weights[1, 2], atol=1e-5)


def test_pseudo_perplexity_permutation_and_calculator_equal_the_library(client) -> None:
    from analysis.params import count_parameters
    from core import registry
    from models import permutation as P
    from models.objectives import pseudo_log_likelihood

    got = client.predict("bert-base-uncased", "the cat sat on the mat .", api_name="/pseudo_perplexity")
    assert got["pppl"] == pytest.approx(pseudo_log_likelihood("bert-base-uncased", "the cat sat on the mat .").pppl, rel=1e-5)
    masks = client.predict("new york is a city", "2,0,4,1,3", 2, api_name="/permutation_masks")
    inputs = P.permutation_inputs([2, 0, 4, 1, 3], 2, specials=[5, 6])
    assert masks["query_mask"] == P.query_mask(inputs).astype(int).tolist() and masks["targets"] == [1, 3]
    calc = client.predict("albert-base-v2", "pretraining", "fp32", "adamw", 4, 128, 0, 1, "T4 16 GB", api_name="/calculator")
    assert calc["parameters"] == count_parameters(registry.get("albert-base-v2").config, "pretraining")
    assert calc["memory_bytes"]["optimizer states"] == 8 * calc["parameters"]


@pytest.mark.parametrize(("args", "endpoint", "words"), [
    (("no mask here", "bert-base-uncased", 3, "independent"), "/fill_mask", "no [MASK]"),
    (("x [MASK]", "", 3, "independent"), "/fill_mask", "at least one model"),
    (("sentence-transformers/all-MiniLM-L6-v2", "   ", "", 0, 0), "/attention", "empty"),
    (("bert-base-uncased", "the cat", "", 9, 0), "/attention", "layers 0–1"),
    (("roberta-large", "the cat sat"), "/pseudo_perplexity", "models.fetch roberta-large"),
    (("a b c", "0,0,1", 1), "/permutation_masks", "not a permutation"),
    (("a b c", "random:x", 1), "/permutation_masks", "random:SEED"),
    (("gpt2", "base", "mixed", "adamw", 8, 4096, 0, 1, "T4 16 GB"), "/calculator", "longer than the model's 1024 positions"),
    (("elmo", "base", "mixed", "adamw", 8, 128, 0, 1, "T4 16 GB"), "/calculator", "catalog-only"),
    (("../../etc", "base", "mixed", "adamw", 8, 128, 0, 1, "T4 16 GB"), "/calculator", "not a valid model id"),
    (("someone/not-here", "the cat", "", 0, 0), "/attention", "models.fetch someone/not-here"),
    (("gpt2", "base", "mixed", "adamw", 10**12, 128, 0, 1, "T4 16 GB"), "/calculator", "between 1 and 100,000"),
    (("gpt2", "base", "mixed", "adamw", 8, 128, 0, 10**9, "T4 16 GB"), "/calculator", "between 1 and 100,000"),
    (("a b c", "9" * 5000, 1), "/permutation_masks", "characters long"),
])
def test_bad_inputs_are_messages_and_the_server_survives(client, args, endpoint: str, words: str) -> None:
    from gradio_client.exceptions import AppError

    with pytest.raises(AppError) as info:
        client.predict(*args, api_name=endpoint)
    assert words in str(info.value) and "Traceback" not in str(info.value)
    assert client.predict("gpt2", "base", "mixed", "adamw", 1, 16, 0, 1, "T4 16 GB", api_name="/calculator")["parameters"] > 0


def test_twenty_concurrent_clients_are_all_answered(client) -> None:
    def call(i: int) -> float:
        return client.predict("bert-base-uncased", f"the cat sat on the mat {i} .", api_name="/pseudo_perplexity")["pppl"]

    with ThreadPoolExecutor(max_workers=20) as pool:
        results = list(pool.map(call, range(20)))
    assert len(results) == 20 and all(r > 0 for r in results)


def _post(url: str, body: bytes) -> tuple[int, str]:
    req = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def _status_of_oversized_post(base: str, path: str, body: bytes) -> int:
    """POST ``body`` over a raw socket; the server may answer 413 and close before the body is sent, so a
    broken pipe while sending is expected and the status line is read from what came back."""
    import contextlib
    import select
    import socket

    host, port = base.split("//")[1].split(":")
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode())
        # The limit is applied from Content-Length: the answer usually comes before any of the body is sent.
        if not select.select([sock], [], [], 3)[0]:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                sock.sendall(body)
        reply = b""
        with contextlib.suppress(ConnectionResetError):
            while chunk := sock.recv(65536):
                reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_an_unknown_endpoint_is_a_404_and_an_oversized_body_a_413(client) -> None:
    from app.gradio_app import MAX_BODY_BYTES

    base = client.src.rstrip("/")
    for path in ("/gradio_api/call/nope", "/gradio_api/run/nope", "/gradio_api/call/v2/nope"):
        code, text = _post(base + path, b'{"data": []}')
        assert code == 404 and "No endpoint /nope" in text
    big = json.dumps({"data": ["a " * MAX_BODY_BYTES, "left-to-right", 0]}).encode()
    assert _status_of_oversized_post(base, "/gradio_api/call/permutation_masks", big) == 413
    assert client.predict("a b c", "left-to-right", 1, api_name="/permutation_masks")["targets"] == [2]


def test_a_thirty_thousand_position_order_is_refused_quickly_and_others_are_not_slowed(client) -> None:
    from gradio_client.exceptions import AppError

    order = ",".join(str(i) for i in range(30_000))
    t0 = time.perf_counter()
    with pytest.raises(AppError, match="characters long"):
        client.predict("a b c", order, 1, api_name="/permutation_masks")
    assert time.perf_counter() - t0 < 5
    t0 = time.perf_counter()
    assert client.predict("gpt2", "base", "mixed", "adamw", 1, 16, 0, 1, "T4 16 GB", api_name="/calculator")["parameters"] > 0
    assert time.perf_counter() - t0 < 5


def test_every_endpoint_is_behind_the_queue() -> None:
    from app.gradio_app import API_NAMES, build

    demo = build()
    fns = {f.api_name: f for f in demo.fns.values() if f.api_name in API_NAMES}
    assert set(fns) == API_NAMES
    assert all(f.queue for f in fns.values()), [n for n, f in fns.items() if not f.queue]


def test_the_attention_tab_offers_its_heatmap_as_png_and_svg(monkeypatch: pytest.MonkeyPatch) -> None:
    from xml.etree import ElementTree

    from analysis import export
    from app import gradio_app

    result = gradio_app.attention("sentence-transformers/all-MiniLM-L6-v2", "The cat sat on the mat.", "", 1, 2)
    png, svg = gradio_app._heatmap_files(result)
    assert png.endswith("attention-layer1-head2.png") and Path(png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "layer 1, head 2" in " ".join(ElementTree.parse(svg).getroot().itertext())
    warned = []
    monkeypatch.setattr(export, "chromium_path", lambda: None)
    monkeypatch.setattr("gradio.Warning", lambda message: warned.append(message))
    other = gradio_app.attention("sentence-transformers/all-MiniLM-L6-v2", "The cat sat on the mat.", "", 2, 3)  # not cached
    assert gradio_app._heatmap_files(other) is None and "Chromium" in warned[0]


def test_any_checkpoint_through_the_api(client, tiny_dir) -> None:
    """A folder of one's own (typed into the dropdowns, or named in the API) works like a catalog model."""
    import json
    import shutil

    from analysis.params import count_parameters

    folder = tiny_dir / "students" / "gradio-bert"
    if not folder.exists():
        shutil.copytree(tiny_dir / "bert-base-uncased", folder)
    config = json.loads((folder / "config.json").read_text())
    calc = client.predict("students/gradio-bert", "masked-lm", "fp32", "adamw", 2, 32, 0, 1, "T4 16 GB", api_name="/calculator")
    assert calc["parameters"] == count_parameters(config, "masked-lm")
    att = client.predict("students/gradio-bert", "the cat sat", "", 1, 0, api_name="/attention")
    assert att["model"] == "students/gradio-bert" and len(att["weights"]) == len(att["tokens"])
