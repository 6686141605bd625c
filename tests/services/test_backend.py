"""The model backend (``python -m app.backend``; the front end's ``BFE_BACKEND``): what travels (JSON with ``.npy``
arrays, never pickle), that a call through it returns what the library returns in this process, that concurrent
attention requests are batched, its faults (down, killed, slow, wrong token, another version), its bounds and
allow-list, a lab checkpoint of the backend's model folder opened from a front end without one, and a page drawn
through it.

One backend process serves the module (on a copy of the tiny models with a lab checkpoint added); the fault test
starts and kills one of its own."""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import io
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.errors import (
    BackendMismatch,
    BackendRefused,
    BackendTimeout,
    BackendUnavailable,
    ExplorerError,
    InvalidConfig,
    InvalidModelId,
    InvalidText,
    ModelProcessFailed,
)
from models.attention import AttentionResult, extract_attention, extract_attention_batch
from services.backend import client as backend_client
from services.backend import handlers, wire
from services.backend.client import Backend
from services.routing import BACKEND_ONLY, ROUTED
from tests.helpers import ENTRY, ROOT
from tests.helpers.servers import free_port

TOKEN = "bfe-test-token-" + os.urandom(8).hex()
RUN = "bt-run"  # the lab checkpoint in the backend's model folder: trained/bt-run
TEXT = "the cat sat on the mat because it was tired ."
PAIR = "a boy is outside ."


# --- helpers ---------------------------------------------------------------------------------------------------


SLOW = "slowmarker"  # a request holding this word takes SLOW_S longer on a backend started with slow=True
SLOW_S = 3.0
#: app.backend's command line (its main()), with a wrapper around the served functions (build's ``gpu`` hook, what
#: ZeroGPU's spaces.GPU uses) that makes the requests holding SLOW slow: a call in flight, to time out or to kill.
SLOW_LAUNCHER = f"""
import sys, time
import app.backend as server

def slow(fn):
    def wrapped(arg):
        if any({SLOW!r} in text for text in (arg if isinstance(arg, list | tuple) else [arg])):
            time.sleep({SLOW_S})
        return fn(arg)
    return wrapped

build = server.build
server.build = lambda gpu=None, concurrency=1: build(gpu=slow, concurrency=concurrency)
sys.exit(server.main(sys.argv[1:]))
"""


def start_backend(model_dir: Path, port: int, token: str | None = TOKEN, preload: tuple[str, ...] = (),
                  slow: bool = False) -> subprocess.Popen:
    """``python -m app.backend`` on ``port`` over ``model_dir`` (``slow``: with requests holding SLOW made slow);
    returned once it answers (90 s at most). Its log goes to a temporary file (a pipe nobody reads would fill up), kept
    on the process as ``log``."""
    env = {**os.environ, "BFE_MODEL_DIR": str(model_dir), "HF_HUB_OFFLINE": "1", "GRADIO_ANALYTICS_ENABLED": "False",
           "BFE_WARMUP": "0"}
    env.pop("BFE_BACKEND", None)
    env.pop(handlers.TOKEN_ENV, None)
    if token:
        env[handlers.TOKEN_ENV] = token
    log = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop_backend
    command = ["-c", SLOW_LAUNCHER] if slow else ["-m", "app.backend"]
    proc = subprocess.Popen([sys.executable, *command, "--port", str(port), "--preload", *preload],
                            cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
    proc.log = log  # type: ignore[attr-defined]
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            log.seek(0)
            raise AssertionError(f"the backend exited ({proc.returncode}):\n" + log.read().decode(errors="replace")[-5000:])
        try:
            if httpx.get(f"http://127.0.0.1:{port}/config", headers={"X-BFE-Token": token or ""}, timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise AssertionError("the backend did not answer in 90 s")


def stop_backend(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    proc.log.close()  # type: ignore[attr-defined]


def make_lab_checkpoint(model_dir: Path, source: Path) -> str:
    """``trained/<RUN>`` in ``model_dir`` as the pre-training lab leaves one (models.pretrain.loop.save_run: safetensors,
    tokenizer, bfe_run.json), from the tiny BERT's weights instead of a training run (seconds saved, same files)."""
    from transformers import AutoTokenizer, BertForMaskedLM

    from models.pretrain import TrainConfig
    from models.pretrain.config import TrainResult
    from models.pretrain.loop import save_run

    config = TrainConfig(layers=2, hidden=32, heads=4, ffn=64, seq_len=32, batch=8, steps=2, lr=3e-3, corpus_lines=200,
                         run=RUN)
    model = BertForMaskedLM.from_pretrained(source / "bert-base-uncased")
    tok = AutoTokenizer.from_pretrained(source / "bert-base-uncased")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BFE_MODEL_DIR", str(model_dir))
        return save_run(config, model, tok, TrainResult(config, curve=[(1, 9.0), (2, 8.5)],
                                                        evaluation={"held_out_loss": 8.5}))


def request(module: str, name: str, *args: Any, v: Any = None) -> str:
    """A request's JSON text as a front end sends it (``v``: another version than ours)."""
    text = Backend("http://127.0.0.1:1").request_text(module, name, args)
    if v is None:
        return text
    raw = json.loads(text)
    raw["v"] = v
    return json.dumps(raw)


def handler_error(answer: tuple[str, bytes]) -> BaseException:
    """The exception an error envelope of the handlers carries, rebuilt as the client rebuilds it."""
    from services.runtime import unpack_error

    text, blob = answer
    assert blob == b""  # an error carries no arrays
    envelope = json.loads(text)
    assert set(envelope) == {"error"}, text[:300]
    return unpack_error(tuple(wire.decode(envelope["error"])))


def same_attention(a: AttentionResult, b: AttentionResult) -> None:
    assert type(a) is type(b) is AttentionResult
    for f in dataclasses.fields(AttentionResult):
        if f.name != "weights":
            assert getattr(a, f.name) == getattr(b, f.name), f.name
    assert a.weights.dtype == b.weights.dtype and a.weights.shape == b.weights.shape
    assert np.allclose(a.weights, b.weights, atol=1e-5)


def same(a: Any, b: Any, where: str = "") -> None:
    """Equal values, arrays within 1e-5, dataclasses field by field (of the same class)."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), where
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape, where
        assert np.allclose(a, b, atol=1e-5, equal_nan=True), where
    elif isinstance(a, list | tuple):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            same(x, y, f"{where}[{i}]")
    elif isinstance(a, dict):
        assert type(b) is dict and a.keys() == b.keys(), where
        for k in a:
            same(a[k], b[k], f"{where}[{k!r}]")
    elif isinstance(a, float):
        assert isinstance(b, float) and (math.isclose(a, b, rel_tol=1e-5, abs_tol=1e-6) or (a != a and b != b)), where
    else:
        assert a == b and type(a) is type(b), where


def calls_on(backend: SimpleNamespace) -> dict[str, int]:
    return Backend(backend.url, TOKEN).info(fresh=True).calls


# --- fixtures --------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def backend_dir(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The backend's model folder: the tiny models and a lab checkpoint (the folder a GPU machine's lab worker writes)."""
    root = tmp_path_factory.mktemp("backend-models")
    shutil.copytree(tiny_dir, root, dirs_exist_ok=True, symlinks=True)
    assert make_lab_checkpoint(root, tiny_dir) == f"trained/{RUN}"
    return root


@pytest.fixture(scope="module")
def backend(backend_dir: Path) -> Iterator[SimpleNamespace]:
    """One backend for the module, with a token, the tiny BERT preloaded."""
    port = free_port()
    proc = start_backend(backend_dir, port, preload=("bert-base-uncased",))
    try:
        yield SimpleNamespace(url=f"http://127.0.0.1:{port}", proc=proc, dir=backend_dir)
    finally:
        stop_backend(proc)


@pytest.fixture(autouse=True)
def fresh_default_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test makes its own default Backend (BFE_BACKEND), and no test leaves one for the next."""
    monkeypatch.setattr(backend_client, "_default", None)
    monkeypatch.delenv("BFE_BACKEND", raising=False)
    monkeypatch.delenv("BFE_BACKEND_TOKEN", raising=False)


def use_backend(monkeypatch: pytest.MonkeyPatch, url: str, empty: Path) -> None:
    """This process as a front end of ``url`` with no model of its own (``empty``: its model folder)."""
    empty.mkdir(exist_ok=True)
    monkeypatch.setenv("BFE_MODEL_DIR", str(empty))
    monkeypatch.setenv("BFE_BACKEND", url)
    monkeypatch.setenv("BFE_BACKEND_TOKEN", TOKEN)


# --- 1. the wire ----------------------------------------------------------------------------------------------


def _attention_like() -> AttentionResult:
    rng = np.random.default_rng(0)
    return AttentionResult(model_id="bert-base-uncased", tokens=("[CLS]", "the", "cat", "[SEP]"),
                           raw_tokens=("[CLS]", "the", "cat", "[SEP]"), segments=(0, 0, 0, 0),
                           special=(True, False, False, True), words=(None, 0, 1, None), word_texts=("the", "cat"),
                           weights=rng.random((2, 4, 4, 4), dtype=np.float32), truncated=True, input_tokens=9,
                           max_tokens=4, notices=("truncated",), cls_like=(0,), sep_like=(3,))


def test_the_wire_round_trips_results_arrays_containers_and_frames() -> None:
    from analysis.run_status import RunStatus
    from models.objectives import Prediction

    r = wire.loads(wire.dumps(_attention_like()))
    same_attention(r, _attention_like())
    preds = [[Prediction("sat", "sat", 7, 0.25, "the cat sat", 1)]]
    assert wire.loads(wire.dumps(preds)) == preds and type(wire.loads(wire.dumps(preds))[0][0]) is Prediction
    assert wire.loads(wire.dumps(RunStatus.FINISHED)) is RunStatus.FINISHED

    arrays = [np.arange(6, dtype=np.int64).reshape(2, 3), np.array([1.5, -2], np.float16), np.array([True, False]),
              np.arange(12, dtype=np.uint8).reshape(3, 4).T,  # not contiguous
              np.asfortranarray(np.ones((3, 2), np.float64)), np.array(3.25, np.float32), np.array([1 + 2j], np.complex64),
              np.array(["ab", "cde"]), np.array(["2024-01-02"], dtype="datetime64[D]"), np.zeros((0, 3), np.float32),
              np.array([np.nan, np.inf, -np.inf])]
    for a in arrays:
        b = wire.loads(wire.dumps(a))
        assert isinstance(b, np.ndarray) and b.dtype == a.dtype and b.shape == a.shape, a
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")

    value = {1: ("a", 2.5), (2, "x"): [1, None, True], "s": {3, 4}, "fs": frozenset({"a"}),
             "nums": (math.nan, math.inf, -math.inf, 0.1), "np": np.float32(0.5), "i": np.int64(7)}
    text = wire.dumps(value)
    json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON text"))  # strict JSON: no NaN tokens
    back = wire.loads(text)
    assert back[1] == ("a", 2.5) and back[(2, "x")] == [1, None, True] and back["s"] == {3, 4}
    assert type(back["fs"]) is frozenset and back["fs"] == {"a"}
    nan, inf, minus, tenth = back["nums"]
    assert math.isnan(nan) and inf == math.inf and minus == -math.inf and tenth == 0.1
    assert back["np"] == 0.5 and back["i"] == 7 and type(back["i"]) is int

    frame = pd.DataFrame({"word": ["a", "b", "c"], "p": [0.1, math.nan, 2.0], 3: [1, 2, 3], "ok": [True, False, True],
                          "top": [["x", "y"], ["z", "q"], ["r", "s"]]}, index=["i", "j", "k"])
    got = wire.loads(wire.dumps(frame))
    assert list(got.columns) == list(frame.columns) and list(got.index) == ["i", "j", "k"]
    pd.testing.assert_frame_equal(got, frame, check_dtype=False, check_index_type=False)
    assert got["top"].iloc[1] == ["z", "q"]


def test_large_arrays_travel_as_raw_bytes_beside_the_text_and_hostile_references_are_refused(tmp_path) -> None:
    big = np.random.default_rng(1).random((2, 3, 128, 64), dtype=np.float32)  # 196 KB (98 KB as bf16): over BLOB_MIN_BYTES
    bf16 = (big.view(np.uint32) & 0xFFFF0000).view(np.float32)  # bfloat16 values: travel as their upper halves
    value = {"big": big, "bf": bf16, "small": np.arange(4), "r": _attention_like()}
    text, blob = wire.dumps_split(value)
    assert len(text) < 2_000 and len(blob) > big.nbytes + bf16.nbytes // 2  # the arrays are not in the text
    assert '"$nd":[' in text and '"$bf":[' in text and "small" in text
    back = wire.decode(json.loads(text), blob)
    assert np.array_equal(back["big"], big) and np.array_equal(back["bf"], bf16) and back["bf"].dtype == np.float32
    assert np.array_equal(back["small"], np.arange(4))
    same_attention(back["r"], _attention_like())
    assert wire.dumps_split({"n": 1}) == (wire.dumps({"n": 1}), b"")  # no large arrays: no blob
    hostile = [[0, len(blob) + 1], [len(blob), 1], [-1, 10], [0.5, 10], [True, 10], [0], [0, 1, 2], "abc", [0, 10]]
    for ref in hostile:
        with pytest.raises(BackendRefused):
            wire.decode({"$nd": ref}, blob)
    with pytest.raises(BackendRefused):  # a reference in a message without a blob
        wire.decode(json.loads(text))

    from app.backend import BLOB_FOLDER, BLOB_SWEEP_S, BLOB_TTL_S, blob_file, build

    assert blob_file(tmp_path, b"") is None
    first, second = blob_file(tmp_path, blob), blob_file(tmp_path, b"x")
    assert Path(first).read_bytes() == blob and first.endswith(".npyblob") and first != second
    assert sorted(os.listdir(tmp_path / BLOB_FOLDER)) == sorted(os.path.basename(p) for p in (first, second))
    assert build().delete_cache == (BLOB_SWEEP_S, BLOB_TTL_S)  # Gradio removes the answers' files after 5 minutes


def test_object_arrays_travel_item_by_item_never_as_pickle() -> None:
    one = np.array(["a", 1, None, (2, 3)], dtype=object)
    text = wire.dumps(one)
    assert '"$nd"' not in text and "pickle" not in text
    back = wire.loads(text)
    assert back.dtype == object and back.tolist() == ["a", 1, None, (2, 3)]
    two = np.array([["a", "b"], ["c", "d"]], dtype=object)  # a 2-D object array keeps its shape
    back = wire.loads(wire.dumps(two))
    assert back.shape == (2, 2) and back.tolist() == [["a", "b"], ["c", "d"]]
    lists = np.empty(2, dtype=object)
    lists[0], lists[1] = [1, 2], [3, 4]
    back = wire.loads(wire.dumps(lists))
    assert back.shape == (2,) and back[1] == [3, 4]
    # an object array saved with pickle, sent as .npy: refused, never unpickled
    buf = io.BytesIO()
    np.save(buf, one, allow_pickle=True)
    with pytest.raises(BackendRefused, match="does not read"):
        wire.loads(json.dumps({"$nd": base64.b64encode(buf.getvalue()).decode()}))


@pytest.mark.parametrize("name", ["os:system", "builtins:eval", "subprocess:Popen", "core.errors:ExplorerError",
                                  "models.loader:load", "models.attention:re.RegexFlag",
                                  "models.attention:AttentionResult.__init__", "models.attention:np.ndarray", "no colon",
                                  "models.attention:AttentionResult:x"])
def test_a_message_naming_a_class_outside_the_results_is_refused(name: str) -> None:
    for message in ({"$dc": name, "f": {}}, {"$e": name, "v": 1}):
        with pytest.raises(BackendRefused):
            wire.loads(json.dumps(message))


def test_malformed_deep_and_long_messages_are_refused() -> None:
    npy = io.BytesIO()
    np.lib.format.write_array_header_1_0(npy, {"descr": "<f8", "fortran_order": False, "shape": (10**13,)})
    bad = ['{"$nd": "!!!not base64"}', json.dumps({"$nd": base64.b64encode(b"not an npy file").decode()}),
           json.dumps({"$nd": base64.b64encode(npy.getvalue()).decode()}),  # a header claiming 80 TB, no data
           '{"$nd": 5}', '{"$d": 5}', '{"$t": 5}', '{"$l": 5}', '{"$d": [[1]]}', '{"$df": {}}', '{"$f": "1e999"}',
           '{"$d": [[{"$d": []}, 1]]}', '{"$s": [{"$d": []}]}', '{"$l": [1, 2], "shape": [3]}',
           '{"$dc": "models.attention:AttentionResult", "f": {}}', '{"$dc": "models.attention:AttentionResult", "f": 3}',
           '{"$e": "analysis.run_status:RunStatus", "v": "no such status"}', '{"x": 1}', '{"$t": [], "a": 1, "b": 2}',
           '{"$s": [{"$nd": "' + base64.b64encode(b"x").decode() + '"}]}', "not json", "[" * 100_000]
    for text in bad:
        with pytest.raises(BackendRefused):
            wire.loads(text)
    deep: Any = 1
    for _ in range(wire.MAX_DEPTH + 5):
        deep = [deep]
    with pytest.raises(BackendRefused, match="nested too deeply"):
        wire.loads(json.dumps(deep))
    with pytest.raises(TypeError, match="nested too deeply"):
        wire.dumps(deep)
    with pytest.raises(TypeError, match="cannot be sent"):
        wire.dumps(object())
    with pytest.raises(BackendRefused, match="over the limit"):
        wire.loads(json.dumps(list(range(100))), max_chars=50)
    assert wire.loads(json.dumps(list(range(5))), max_chars=50) == list(range(5))
    with pytest.raises(BackendRefused, match="not text"):
        wire.loads(b"[1]")


# --- 2. the same results ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["bert-base-uncased", "roberta-base", "gpt2", "xlnet-base-cased"])
def test_a_batch_of_attention_equals_one_at_a_time(model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    import models.attention as attention

    padded: list[int] = []
    real = attention._forward_padded
    monkeypatch.setattr(attention, "_forward_padded", lambda lm, items: padded.append(len(items)) or real(lm, items))
    items = [(TEXT, None, None), ("a boy plays in the snow .", PAIR, None), ("", None, None),
             ("the man went to the store to buy a gallon of milk . " * 3, None, None), ("penguins", None, None),
             ("new york is a city . paris is a city too .", "chickens cackle", 6), ("  \t ", "x", None)]
    got = extract_attention_batch(model, items)
    assert len(got) == len(items)
    # BERT and RoBERTa in padded passes of several inputs; GPT-2 and XLNet (positions that depend on the length) alone
    assert (max(padded, default=0) > 1) == (model in ("bert-base-uncased", "roberta-base")), padded
    for item, result in zip(items, got, strict=True):
        if not item[0].strip():
            assert isinstance(result, InvalidText)
            with pytest.raises(InvalidText):
                extract_attention(model, *item)
        else:
            assert isinstance(result, AttentionResult), result
            same_attention(result, extract_attention(model, *item))
    assert got[5].truncated and got[5].weights.shape[-1] == 6


def test_calls_through_the_backend_equal_the_library_here(backend: SimpleNamespace) -> None:
    from models.objectives import fill_mask
    from models.representations import hidden_states

    remote = Backend(backend.url, TOKEN)
    before = remote.info(fresh=True).calls.get("extract_attention", 0)
    for args in ((TEXT,), (TEXT, PAIR), (TEXT, None, 5)):
        here = extract_attention("bert-base-uncased", *args)
        same_attention(remote.call(extract_attention, "bert-base-uncased", *args), here)
        same_attention(remote.call(extract_attention, "bert-base-uncased", *args, batched=False), here)
    assert remote.info(fresh=True).calls["extract_attention"] == before + 6  # they ran there, not here
    same_attention(remote.call(extract_attention, "gpt2", TEXT), extract_attention("gpt2", TEXT))
    same(remote.call(fill_mask, "bert-base-uncased", "the cat [MASK] on the mat .", 3),
         fill_mask("bert-base-uncased", "the cat [MASK] on the mat .", 3))
    texts = ["the cat sat .", "a boy plays in the snow ."]
    same(remote.call(hidden_states, "roberta-base", texts), hidden_states("roberta-base", texts))
    assert remote.sent_chars > 0 and remote.received_chars > remote.sent_chars
    long_text = "the cat sat on the mat , and a boy plays in the snow . " * 8  # its weights: over BLOB_MIN_BYTES
    for batched in (True, False):
        blob_before = remote.received_blob_bytes
        same_attention(remote.call(extract_attention, "bert-base-uncased", long_text, batched=batched),
                       extract_attention("bert-base-uncased", long_text))
        assert remote.received_blob_bytes - blob_before > wire.BLOB_MIN_BYTES  # the weights came as the answer's file
    # an error of the library comes back as itself, with its hint
    with pytest.raises(InvalidText) as err:
        remote.call(extract_attention, "bert-base-uncased", "   ")
    assert err.value.hint


# --- 3. batching -----------------------------------------------------------------------------------------------


def test_concurrent_attention_requests_are_batched(backend: SimpleNamespace) -> None:
    remote = Backend(backend.url, TOKEN)
    before = remote.info(fresh=True).batch_sizes
    n = 24
    start = threading.Barrier(n)
    results: list[Any] = [None] * n

    def ask(i: int) -> None:
        start.wait()
        try:
            results[i] = remote.call(extract_attention, "bert-base-uncased", f"the cat sat on mat number {i} .")
        except Exception as err:  # reported below
            results[i] = err

    threads = [threading.Thread(target=ask, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert all(isinstance(r, AttentionResult) for r in results), [r for r in results if not isinstance(r, AttentionResult)]
    assert all(str(i) in r.word_texts for i, r in enumerate(results))  # each caller got its own sentence back
    after = remote.info(fresh=True).batch_sizes
    new = {int(k): after.get(k, 0) - before.get(k, 0) for k in after if after.get(k, 0) > before.get(k, 0)}
    assert sum(size * count for size, count in new.items()) >= n, new
    assert max(new) > 1, new


# --- 4. faults -------------------------------------------------------------------------------------------------


def test_long_texts_go_alone_and_short_ones_to_the_batch(backend: SimpleNamespace) -> None:
    """By default only short texts are batched (on a CPU a batch of long sentences is no faster than one at a time
    and makes every request wait for the whole batch)."""
    from services.backend.client import BATCH_MAX_CHARS

    remote = Backend(backend.url, TOKEN)
    before = remote.info(fresh=True)
    long_text = ("the cat sat on the mat . " * 40)[: BATCH_MAX_CHARS + 20]
    remote.call(extract_attention, "bert-base-uncased", long_text)
    middle = remote.info(fresh=True)
    assert middle.batch_sizes == before.batch_sizes  # went alone
    assert middle.calls.get("extract_attention", 0) == before.calls.get("extract_attention", 0) + 1
    remote.call(extract_attention, "bert-base-uncased", "the cat sat .")
    after = remote.info(fresh=True)
    assert sum(after.batch_sizes.values()) == sum(middle.batch_sizes.values()) + 1  # through the batching endpoint


@pytest.mark.slow  # starts, kills and restarts a backend server: about 20 s
def test_a_backend_down_then_up_then_killed_then_restarted(backend_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    port = free_port()
    remote = Backend(f"http://127.0.0.1:{port}", TOKEN)
    with pytest.raises(BackendUnavailable) as err:
        remote.call(extract_attention, "bert-base-uncased", TEXT)
    text = str(err.value)
    assert f"127.0.0.1:{port}" in err.value.message and "does not answer" in err.value.message and err.value.hint
    assert "Traceback" not in text and "File \"" not in text
    proc = start_backend(backend_dir, port, slow=True)
    try:
        assert remote.call(extract_attention, "bert-base-uncased", TEXT).tokens[1] == "the"  # the same object recovers
        # a call longer than the connection's timeouts is answered (the event stream may stay silent while it runs)
        with monkeypatch.context() as m:
            m.setattr(backend_client, "CONNECT_TIMEOUT_S", 1.0)
            fresh = Backend(remote.url, TOKEN)
            t0 = time.monotonic()
            assert fresh.call(extract_attention, "bert-base-uncased", f"the {SLOW} cat", batched=False).tokens[0] == "[CLS]"
            assert time.monotonic() - t0 >= SLOW_S
        # killed during a call: that call fails at once, clearly
        failed: list[BaseException] = []
        started = time.monotonic()

        def ask() -> None:
            try:
                remote.call(extract_attention, "bert-base-uncased", f"the {SLOW} cat")
            except BaseException as e:  # checked below
                failed.append(e)

        caller = threading.Thread(target=ask)
        caller.start()
        time.sleep(1.0)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        caller.join(timeout=30)
        assert not caller.is_alive() and time.monotonic() - started < 15
        assert len(failed) == 1 and isinstance(failed[0], BackendUnavailable), failed
        assert failed[0].message.split(": ", 1)[1].strip() and "Traceback" not in str(failed[0]) and failed[0].hint
        with pytest.raises(BackendUnavailable) as err:  # still down: the next call fails the same way, quickly
            remote.call(extract_attention, "bert-base-uncased", PAIR, batched=False)
        assert "Traceback" not in str(err.value) and err.value.hint
    finally:
        stop_backend(proc)
    proc = start_backend(backend_dir, port, slow=True)
    try:
        assert remote.call(extract_attention, "bert-base-uncased", TEXT).tokens[1] == "the"
        assert remote.call(extract_attention, "bert-base-uncased", TEXT, batched=False).tokens[1] == "the"
    finally:
        stop_backend(proc)


def test_a_slow_call_times_out_and_the_backend_still_serves(backend: SimpleNamespace) -> None:
    impatient = Backend(backend.url, TOKEN, timeouts={"extract_attention": 0.001})
    impatient.info()  # connected: what times out is the call itself
    for batched in (True, False):
        with pytest.raises(BackendTimeout) as err:
            impatient.call(extract_attention, "bert-base-uncased", TEXT, batched=batched)
        assert err.value.hint
    from models.objectives import fill_mask

    assert impatient.call(fill_mask, "bert-base-uncased", "the [MASK] sat .", 2)  # other kinds keep their limits
    assert Backend(backend.url, TOKEN).call(extract_attention, "bert-base-uncased", TEXT).tokens[1] == "the"


def test_a_wrong_or_missing_token_is_refused(backend: SimpleNamespace) -> None:
    for token in ("wrong", "", TOKEN + "x"):
        with pytest.raises(BackendRefused) as err:
            Backend(backend.url, token).call(extract_attention, "bert-base-uncased", TEXT)
        assert "token" in err.value.message and "BFE_BACKEND_TOKEN" in err.value.hint
    for path in ("/gradio_api/info", "/config", "/", "/gradio_api/queue/join", "/gradio_api/call/call"):
        r = httpx.get(backend.url + path, timeout=10)
        assert r.status_code == 401, path
        assert httpx.get(backend.url + path, headers={"X-BFE-Token": "nope"}, timeout=10).status_code == 401
    assert httpx.post(backend.url + "/gradio_api/queue/join", json={"data": ["{}"], "fn_index": 0}, timeout=10).status_code == 401
    assert httpx.get(backend.url + "/config", headers={"X-BFE-Token": TOKEN}, timeout=10).status_code == 200


def test_another_version_is_a_mismatch(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    from core.version import app_version

    # the front end runs another version: it reads the backend's info first and stops there
    before = calls_on(backend)
    monkeypatch.setattr(backend_client, "app_version", lambda: "9.9.9")
    with pytest.raises(BackendMismatch) as err:
        Backend(backend.url, TOKEN).call(extract_attention, "bert-base-uncased", TEXT)
    assert "9.9.9" in err.value.message and app_version() in err.value.message
    monkeypatch.undo()
    assert calls_on(backend) == before
    # a request of another version reaching the handler: refused by version, before its arguments are read (another wire
    # version may use markers this one does not know)
    for v in (["9.9.9", wire.WIRE_VERSION], [app_version(), wire.WIRE_VERSION + 1], "x", None):
        raw = json.loads(request("models.attention", "extract_attention", "bert-base-uncased", TEXT))
        raw["v"], raw["args"] = v, [{"$new-marker": 1}]
        assert isinstance(handler_error(handlers.call(json.dumps(raw))), BackendMismatch), v
        assert isinstance(handler_error(handlers.attention_batch([json.dumps(raw)])[0]), BackendMismatch), v


def test_a_public_backend_without_a_token_does_not_start() -> None:
    port = free_port()
    env = {k: v for k, v in os.environ.items() if k != handlers.TOKEN_ENV}
    done = subprocess.run([sys.executable, "-m", "app.backend", "--host", "0.0.0.0", "--port", str(port)], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "without a token" in done.stdout and handlers.TOKEN_ENV in done.stdout
    assert "Traceback" not in done.stdout + done.stderr and "model backend on" not in done.stdout
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/config", timeout=2)
    from app.backend import launch

    with pytest.raises(InvalidConfig, match="without a token"):  # the library's own guard, for other launchers
        launch(None, "0.0.0.0", port, None)


# --- 5. security and bounds ------------------------------------------------------------------------------------


def test_functions_outside_the_allow_list_are_refused_by_the_handler_and_by_the_client(backend: SimpleNamespace) -> None:
    from models.loader import load

    for module, name in (("os", "system"), ("models.loader", "load"), ("builtins", "eval"), ("models.training", "atomic_save"),
                         ("services.lab.checkpoints", "lab_folder"), ("models.attention", "__builtins__"),
                         ("models.attention", "_forward_padded")):
        text = request(module, name, "echo hacked")
        assert isinstance(handler_error(handlers.call(text)), BackendRefused), (module, name)
        assert isinstance(handler_error(handlers.attention_batch([text])[0]), BackendRefused), (module, name)
    for bad in ("not json", "[]", "{}", json.dumps({"v": [], "module": "os", "name": "system", "args": [], "x": 1})):
        assert isinstance(handler_error(handlers.call(bad)), BackendRefused)
    remote = Backend(backend.url, TOKEN)
    before = calls_on(backend)
    for fn in (os.system, load, eval, lambda: 1):
        with pytest.raises(ModelProcessFailed, match="not a function the model backend serves"):
            remote.call(fn, "echo hacked")
    assert remote.sent_chars == 0 and calls_on(backend) == before


def test_a_model_id_with_a_path_trick_is_refused_before_any_work(backend: SimpleNamespace) -> None:
    from models.loader import default_cache
    from models.objectives import fill_mask

    for mid in ("../../etc", "/etc/passwd", "bert-base-uncased/../../x", "..", "a/b/c", "~/x"):
        before = dict(handlers._calls)
        for text in (request("models.attention", "extract_attention", mid, TEXT),
                     request("models.objectives", "fill_mask", mid, "the [MASK] .")):
            assert isinstance(handler_error(handlers.call(text)), InvalidModelId), mid
        assert isinstance(handler_error(handlers.attention_batch([request("models.attention", "extract_attention", mid,
                                                                          TEXT)])[0]), InvalidModelId)
        assert dict(handlers._calls) == before and not default_cache().info().entries
    remote = Backend(backend.url, TOKEN)
    loaded, before = remote.info(fresh=True).models_loaded, calls_on(backend)
    for mid in ("../../etc", "/etc/passwd"):
        for batched in (True, False):
            with pytest.raises(InvalidModelId):
                remote.call(extract_attention, mid, TEXT, batched=batched)
        with pytest.raises(InvalidModelId):
            remote.call(fill_mask, mid, "the [MASK] .")
    after = remote.info(fresh=True)
    assert after.calls == before and after.models_loaded == loaded


FUZZ_MODELS = ["bert-base-uncased", "gpt2", "xlnet-base-cased", "google/electra-small-discriminator", "random:bert-base-uncased",
               "../../etc/passwd", "", "nope/nope", "trained/../x", None, 3, ["bert-base-uncased"], {"a": 1}]
FUZZ_TEXT = st.one_of(st.sampled_from(["the cat sat", "", " ", "[MASK]", "the [MASK] sat .", "a" * 3000, "<b>x</b>", "\u202e\x00",
                                       "=HYPERLINK(1)", "東京 🤖"]), st.text(max_size=40))
FUZZ_NUMBER = st.one_of(st.integers(-10**6, 10**6), st.sampled_from([0, -1, 2**63, 10**300, 0.5, -0.0]),
                        st.floats(allow_nan=False, allow_infinity=False))
FUZZ_VALUE = st.one_of(FUZZ_TEXT, FUZZ_NUMBER, st.none(), st.booleans(), st.lists(st.one_of(FUZZ_TEXT, st.integers(-5, 50)), max_size=4),
                       st.lists(st.lists(st.integers(-2, 40), max_size=3), max_size=3),
                       st.dictionaries(st.text(max_size=3), st.integers(), max_size=2))


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(fn=st.sampled_from(sorted((m, n) for table in (ROUTED, BACKEND_ONLY) for m, names in table.items() for n in names)),
       model=st.sampled_from(FUZZ_MODELS), rest=st.lists(FUZZ_VALUE, max_size=5))
def test_every_served_function_answers_a_result_or_a_named_refusal_to_any_arguments(model_env: Path, fn: tuple[str, str],
                                                                                    model: str, rest: list[Any]) -> None:
    """The handler under fuzzing, both endpoints: each function the backend serves, called with a model id (real,
    hostile, unknown or not text) and up to five arguments of any type. Every answer is a result or an error of the project's own (a named refusal,
    as the Gradio API's fuzzer requires of its endpoints), never a TypeError from inside a function that was sent
    arguments it does not take: those are refused, by name, before the function runs."""
    text = request(fn[0], fn[1], model, *rest)
    for answer, _ in (handlers.call(text), *handlers.attention_batch([text])):  # both endpoints take any call
        parsed = json.loads(answer)
        assert set(parsed) in ({"ok"}, {"error"})
        if "error" in parsed:
            err = handler_error((answer, b""))
            assert isinstance(err, ExplorerError), (fn, model, rest, err)
            assert "Traceback" not in str(err)


def test_arguments_a_function_does_not_take_are_refused_by_name_before_it_runs(model_env: Path) -> None:
    from models.loader import default_cache

    for args, says in ((["bert-base-uncased"], "extract_attention takes 2 to 4 arguments; the request sent 1"),
                       (["bert-base-uncased", 3], "extract_attention: text is not of the type str"),
                       (["bert-base-uncased", "the cat", "b", "ten"], "extract_attention: max_tokens is not"),
                       (["bert-base-uncased", "the cat", None, None, None], "takes 2 to 4 arguments; the request sent 5")):
        err = handler_error(handlers.call(request("models.attention", "extract_attention", *args)))
        assert isinstance(err, BackendRefused) and says in err.message, (args, err)
    assert not default_cache().info().entries  # refused before any model loaded
    assert handlers._check_arguments(extract_attention, ("bert-base-uncased", "the cat", None, 16)) is None


def test_a_request_over_the_bounds_is_refused_before_it_is_sent_and_by_the_handler(backend: SimpleNamespace) -> None:
    remote = Backend(backend.url, TOKEN)
    before = calls_on(backend)
    huge = "word " * (handlers.MAX_REQUEST_CHARS // 5 + 10)
    for batched in (True, False):
        with pytest.raises(BackendRefused, match="at most"):
            remote.call(extract_attention, "bert-base-uncased", huge, batched=batched)
    assert remote.sent_chars == 0 and calls_on(backend) == before
    assert backend_client.MAX_REQUEST_CHARS == handlers.MAX_REQUEST_CHARS
    over = request("models.attention", "extract_attention", "bert-base-uncased", "x")[:-1] + " " * handlers.MAX_REQUEST_CHARS + "}"
    assert isinstance(handler_error(handlers.call(over)), BackendRefused)
    assert isinstance(handler_error(handlers.attention_batch([over])[0]), BackendRefused)
    assert isinstance(handler_error(handlers.call(request("models.attention", "extract_attention", "bert-base-uncased",
                                                          *["x"] * 13))), BackendRefused)  # too many arguments
    # the HTTP body is bounded too (Gradio's max_body_size), before any JSON is parsed
    body = b'{"data": ["' + b"x" * (handlers.MAX_REQUEST_CHARS * 3) + b'"], "fn_index": 0, "session_hash": "s"}'
    r = httpx.post(backend.url + "/gradio_api/queue/join", content=body, timeout=30,
                   headers={"X-BFE-Token": TOKEN, "content-type": "application/json"})
    assert r.status_code == 413, r.status_code



def test_an_answer_over_the_bound_is_refused_as_it_arrives(backend: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    """A backend that sends without end (or a bigger answer than any page asks for) is refused once the bytes pass
    MAX_ANSWER_BYTES, for the event stream and for the array file alike; the next call within the bound works."""
    lines = list(backend_client._lines([b"event: comp", b"lete\r\ndata: [\"\xc3", b"\xa9\"]\n\n", b"tail"]))
    assert lines == ["event: complete", 'data: ["\u00e9"]', "", "tail"]  # a line and a character split over chunks
    with pytest.raises(BackendRefused, match="over 10 bytes"):
        monkeypatch.setattr(backend_client, "MAX_ANSWER_BYTES", 10)
        list(backend_client._bounded(iter([b"x" * 6, b"x" * 6]), 10))
    remote = Backend(backend.url, TOKEN)
    long_text = "the cat sat on the mat , and a boy plays in the snow . " * 8  # its weights: a file over BLOB_MIN_BYTES
    monkeypatch.setattr(backend_client, "MAX_ANSWER_BYTES", 200)  # under the event stream's text
    with pytest.raises(BackendRefused, match="over 200 bytes"):
        remote.call(extract_attention, "bert-base-uncased", TEXT, batched=False)
    monkeypatch.setattr(backend_client, "MAX_ANSWER_BYTES", 2 * wire.BLOB_MIN_BYTES)  # the text passes, the file not
    for batched in (True, False):
        with pytest.raises(BackendRefused, match="bytes: not read"):
            remote.call(extract_attention, "bert-base-uncased", long_text, batched=batched)
    monkeypatch.setattr(backend_client, "MAX_ANSWER_BYTES", 1 << 30)
    same_attention(remote.call(extract_attention, "bert-base-uncased", long_text),
                   extract_attention("bert-base-uncased", long_text))

def test_an_error_travels_back_as_itself_even_with_attributes_that_cannot(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.errors import ModelUnavailable, UnknownModel

    err = ModelUnavailable("gone", "fetch it")
    err.paths = [Path("/tmp")]  # type: ignore[attr-defined] - not sendable: left out, not a failure of the handler
    back = handler_error(handlers._failure(err))
    assert type(back) is ModelUnavailable and back.message == "gone" and back.hint == "fetch it"
    assert not hasattr(back, "paths")
    back = handler_error(handlers.call(request("models.attention", "extract_attention", "bert-base-uncasd", TEXT)))
    assert type(back) is UnknownModel and back.model_id == "bert-base-uncasd" and "bert-base-uncased" in back.suggestions


def _asgi(app: Any, scope: dict) -> list[dict]:
    sent: list[dict] = []

    async def receive() -> dict:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return sent


def test_the_token_check_compares_in_constant_time_and_refuses_others(monkeypatch: pytest.MonkeyPatch) -> None:
    import hmac

    import app.backend as server

    reached: list[str] = []

    async def inner(scope: dict, receive: Any, send: Any) -> None:
        reached.append(scope["type"])
        await send({"type": "http.response.start", "status": 200, "headers": []})

    compared: list[tuple[bytes, bytes]] = []
    real = hmac.compare_digest

    def spy(a: bytes, b: bytes) -> bool:
        compared.append((a, b))
        return real(a, b)

    monkeypatch.setattr(server.hmac, "compare_digest", spy)
    check = server.TokenCheck(inner, "s3cret")

    def http(headers: list[tuple[bytes, bytes]], path: str = "/config") -> list[dict]:
        return _asgi(check, {"type": "http", "path": path, "headers": headers})

    assert http([(b"x-bfe-token", b"s3cret")])[0]["status"] == 200 and reached == ["http"]
    assert compared == [(b"s3cret", b"s3cret")]
    for headers in ([(b"x-bfe-token", b"s3cre")], [(b"x-bfe-token", b"")], [], [(b"authorization", b"s3cret")],
                    [(b"x-bfe-token", b"S3CRET")]):
        sent = http(headers)
        assert sent[0]["status"] == 401 and b"token" in sent[1]["body"], headers
    assert reached == ["http"] and len(compared) == 6
    sent = _asgi(check, {"type": "websocket", "path": "/queue", "headers": [(b"x-bfe-token", b"wrong")]})
    assert sent == [{"type": "websocket.close", "code": 1008}] and reached == ["http"]
    _asgi(check, {"type": "websocket", "path": "/queue", "headers": [(b"x-bfe-token", b"s3cret")]})
    _asgi(check, {"type": "lifespan"})  # the server's own start and stop, no token
    assert reached == ["http", "websocket", "lifespan"]


# --- 6. a lab checkpoint of the backend's model folder ----------------------------------------------------------


def test_the_backends_lab_checkpoints_open_from_a_front_end_without_them(backend: SimpleNamespace, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from services import models
    from services.lab import checkpoints

    mid = f"trained/{RUN}"
    monkeypatch.setenv("BFE_MODEL_DIR", str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    assert checkpoints.trained_models() == [] and checkpoints.run_info(mid) == {}  # not on this machine
    use_backend(monkeypatch, backend.url, tmp_path / "empty")
    assert checkpoints.trained_models() == [mid]
    info = checkpoints.run_info(mid)
    assert info["config"]["run"] == RUN and info["evaluation"] == {"held_out_loss": 8.5} and info["steps_kept"] == [2]
    assert checkpoints.run_info("trained/no-such-run") == {}
    assert models.steps(mid) == [2]
    assert models.availability()["bert-base-uncased"][0] == "ready"  # the backend's folder, not this one's
    from models.loader import can_locate
    from services.executor import executor

    assert executor().on_model_folder(can_locate, mid) and not executor().on_model_folder(can_locate, "trained/nope")
    assert not can_locate(mid)  # asked here, the answer differs
    assert models.inspect(mid).config["hidden_size"] == 32
    there = backend_client.default().call(extract_attention, mid, TEXT)
    assert there.model_id == mid and there.layers == 2 and there.heads == 4
    # the same checkpoint opened here (as the worker's machine would) gives the same weights
    monkeypatch.delenv("BFE_BACKEND")
    monkeypatch.setenv("BFE_MODEL_DIR", str(backend.dir))
    same_attention(there, extract_attention(mid, TEXT))
    # a backend that does not answer: no checkpoint to offer, no exception
    use_backend(monkeypatch, f"http://127.0.0.1:{free_port()}", tmp_path / "empty")
    assert checkpoints.trained_models() == [] and checkpoints.run_info(mid) == {}


# --- 7. a page through the backend ------------------------------------------------------------------------------


def _attention_page() -> Any:
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.query_params["at_model"] = "bert-base-uncased"
    at.query_params["at_text"] = TEXT
    at.run()
    at.switch_page("views/attention.py").run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def _sidebar_text(at: Any) -> str:
    return "\n".join(c.value for c in at.sidebar.caption) + "\n".join(m.value for m in at.sidebar.markdown)


def test_the_attention_page_draws_through_the_backend(backend: SimpleNamespace, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    use_backend(monkeypatch, backend.url, tmp_path / "empty")
    before = calls_on(backend).get("extract_attention", 0)
    at = _attention_page()
    assert not at.error, [e.value for e in at.error]
    assert len(at.get("plotly_chart")) >= 1
    assert any("**bert-base-uncased** · " in m.value and "2 layers × 4 heads" in m.value for m in at.markdown)
    assert "Model backend" in _sidebar_text(at) and backend.url in _sidebar_text(at)
    assert calls_on(backend)["extract_attention"] > before  # computed there: this process has no model


def test_the_attention_page_says_when_the_backend_is_down(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.ui import calls

    monkeypatch.setattr(calls, "BACKEND_WAIT_S", 2.0)
    monkeypatch.setattr(calls, "_gave_up", [])
    use_backend(monkeypatch, f"http://127.0.0.1:{free_port()}", tmp_path / "empty")
    t0 = time.monotonic()
    at = _attention_page()
    errors = [e.value for e in at.error]
    assert any("backend" in e.lower() and "did not answer within 2 s" in e for e in errors), errors
    assert time.monotonic() - t0 >= 2.0  # it waited for the backend, as for a warm-up, before saying so
    assert not any("Traceback" in e for e in errors) and not at.get("plotly_chart")
    assert any("python -m app.backend" in e and "rerun the page" in e for e in errors), errors  # what to do about it


@pytest.mark.slow  # starts a backend server while the page waits for it: about 30 s
def test_a_page_opened_while_the_backend_starts_waits_for_it(backend_dir: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The backend not listening yet when the page opens: the page waits (a spinner, its slot lent) and draws once it
    answers, instead of telling the user to rerun."""
    from app.ui import calls

    monkeypatch.setattr(calls, "_gave_up", [])
    port = free_port()
    use_backend(monkeypatch, f"http://127.0.0.1:{port}", tmp_path / "empty")
    started: list[subprocess.Popen] = []
    starter = threading.Thread(target=lambda: started.append(start_backend(backend_dir, port)))
    starter.start()
    try:
        at = _attention_page()
        assert not at.error, [e.value for e in at.error]
        assert len(at.get("plotly_chart")) >= 1
    finally:
        starter.join(timeout=120)
        for proc in started:
            stop_backend(proc)


def test_status_asks_at_once_send_one_probe_and_a_slow_failure_does_not_hide_a_newer_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Thirty sidebars asking a backend that takes its connect timeout to fail: one probe, the others wait for it and
    read its failure. And a failing ask that started before an answer came does not replace that answer."""
    client = Backend("http://127.0.0.1:1")
    asks: list[float] = []

    def slow_failure() -> Any:
        asks.append(time.monotonic())
        time.sleep(0.3)
        raise BackendUnavailable("The model backend does not answer (ConnectTimeout).")

    monkeypatch.setattr(client, "_ask_info", slow_failure)
    outcomes: list[BaseException] = []

    def sidebar() -> None:
        try:
            client.info(status=True)
        except BackendUnavailable as err:
            outcomes.append(err)

    threads = [threading.Thread(target=sidebar) for _ in range(30)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert len(asks) == 1 and len(outcomes) == 30
    assert client._info_failed[1].__traceback__ is None  # what is kept holds no page's frames

    answer = SimpleNamespace(app="x")
    started = threading.Event()

    def slow_then_fail() -> Any:
        started.set()
        time.sleep(0.3)
        raise BackendUnavailable("late")

    monkeypatch.setattr(client, "_ask_info", slow_then_fail)
    client._info_failed = None
    late = threading.Thread(target=sidebar)  # a status ask that will fail after the answer below came
    late.start()
    started.wait(5)
    monkeypatch.setattr(client, "_ask_info", lambda: answer)
    assert client.info() is answer  # a call's check, answered while the slow status ask is still out
    late.join(timeout=10)
    assert len(outcomes) == 31  # the late ask did fail
    assert client._info_failed is None and client.info(status=True) is answer


def test_the_sidebar_lends_the_page_slot_while_it_asks_the_backend(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every page run's sidebar asks the backend how it is: a wait on another machine, so the page's slot goes to the
    next page run meanwhile (a backend that does not answer would otherwise stop the class for its connect timeout)."""
    import contextlib

    from services import models
    from services.executor import Backend

    use_backend(monkeypatch, f"http://127.0.0.1:{free_port()}", tmp_path / "empty")
    lent: list[bool] = []
    real = Backend.status

    @contextlib.contextmanager
    def lending(take_back: bool = True, cancelled: Any = None) -> Iterator[None]:
        lent.append(True)
        yield
        lent.append(False)

    def status(self: Backend) -> Any:
        assert lent and lent[-1], "the backend was asked while the page held its slot"
        return real(self)

    monkeypatch.setattr(models, "page_slot_lent", lending)
    monkeypatch.setattr(Backend, "status", status)
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(ENTRY, default_timeout=60).run()  # Home: drawn whole, its sidebar too
    assert not at.exception, [e.value for e in at.exception]
    assert lent == [True, False] and "Model backend not answering." in _sidebar_text(at)


def test_a_backend_that_does_not_answer_is_asked_once_per_ttl_not_once_per_page_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """The sidebar asks for the backend's info on every page run of every student: a failed ask is reused for
    INFO_TTL_S by the status line, so a dead backend costs one connect timeout per few seconds, not one per student; a
    call's version check asks again (the backend may be back)."""
    client = Backend(f"http://127.0.0.1:{free_port()}")
    asks: list[float] = []
    real = client._ask_info

    def counted() -> Any:
        asks.append(time.monotonic())
        return real()

    monkeypatch.setattr(client, "_ask_info", counted)
    def depth(tb: Any) -> int:
        return 0 if tb is None else 1 + depth(tb.tb_next)

    raised = []
    for _ in range(20):
        with pytest.raises(BackendUnavailable) as err:
            client.info(status=True)
        raised.append(err.value)
    assert len(asks) == 1 and len({e.message for e in raised}) == 1 and "does not answer" in raised[0].message
    assert depth(raised[1].__traceback__) == depth(raised[-1].__traceback__)  # a copy each time: no traceback grows
    with pytest.raises(BackendUnavailable):
        client.info(status=True, fresh=True)  # fresh: asks again
    with pytest.raises(BackendUnavailable):
        client.info()  # a call's version check: asks again
    assert len(asks) == 3
    monkeypatch.setattr(backend_client, "INFO_TTL_S", 0.0)
    with pytest.raises(BackendUnavailable):
        client.info(status=True)  # past the TTL: asks again
    assert len(asks) == 4


def test_bfloat16_values_travel_exactly_in_half_the_bytes() -> None:
    """A GPU's attention is bfloat16 cast to float32: the wire sends the upper halves and gets the same values back;
    any other float32 array travels whole."""
    import torch

    from services.backend import wire

    exact = torch.rand(4, 8, 40, 40).bfloat16().float().numpy()
    text = wire.dumps(exact)
    assert '"$bf"' in text and len(text) < 0.6 * len(wire.dumps(np.random.rand(*exact.shape).astype(np.float32)))
    back = wire.loads(text)
    assert back.dtype == np.float32 and back.shape == exact.shape and np.array_equal(back, exact)
    full = np.random.rand(64, 64).astype(np.float32)
    assert '"$bf"' not in wire.dumps(full) and np.array_equal(wire.loads(wire.dumps(full)), full)
    forged = json.dumps({"$bf": json.loads(wire.dumps(np.arange(2000, dtype=np.int64)))["$nd"]})
    with pytest.raises(BackendRefused):
        wire.loads(forged)
