"""Adversarial probes of model loading: path and id tricks, pickles, remote code, corrupt and hostile
checkpoints, absurd configs, and a Hub that never answers. Each asserts the specific error, that no
server path or object address leaks into the message, and a time bound a hang would break."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from core import registry
from core.errors import (
    ExplorerError,
    InvalidCheckpoint,
    InvalidModelId,
    ModelTooLarge,
    UnknownModel,
    UnsafeCheckpoint,
)
from models.inspection import inspect
from models.loader import check_checkpoint, load, locate, preflight
from tests.helpers import ENTRY, ROOT


def _no_leak(err: BaseException, *paths: Path) -> None:
    text = str(err)
    for p in paths:
        assert str(p) not in text, text
    assert " at 0x" not in text and "Traceback" not in text, text


@pytest.fixture
def copy_of(tiny_dir: Path, empty_model_dir: Path):
    """Copy a tiny checkpoint into the (empty) model directory under a new name, for tampering."""
    def make(name: str, arch: str = "bert-base-uncased") -> Path:
        dst = empty_model_dir / name
        shutil.copytree(tiny_dir / arch, dst)
        return dst
    return make


@pytest.mark.parametrize("bad", ["../etc", "/etc/passwd", "a/../../b", "..", "a/b/c", "x" * 300, "bert\x00base", "~root",
                                 "C:\\Windows", "name with space", "%2e%2e/x", "", "   "])
def test_hostile_ids_are_refused_fast(bad: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises((InvalidModelId, UnknownModel)) as info:
        load(bad)
    assert time.perf_counter() - t0 < 1
    _no_leak(info.value)


@pytest.mark.parametrize("bad", [None, 123, ["bert-base-uncased"], {"id": 1}, b"bert-base-uncased", 1.5])
def test_ids_that_are_not_text_are_refused_everywhere(bad) -> None:
    for call in (registry.get, registry.find, load, locate):
        with pytest.raises(InvalidModelId, match="must be text"):
            call(bad)


def test_a_pickle_only_checkpoint_is_never_loaded(copy_of) -> None:
    folder = copy_of("pickled")
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    with pytest.raises(UnsafeCheckpoint, match="pickle") as info:
        load("pickled")
    _no_leak(info.value, folder.parent)


def test_remote_code_configs_are_refused_by_name(copy_of) -> None:
    folder = copy_of("remote")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="evil", auto_map={"AutoModel": "modeling_evil.EvilModel"})
    (folder / "config.json").write_text(json.dumps(cfg))
    (folder / "modeling_evil.py").write_text("raise SystemExit('remote code ran')\n")
    with pytest.raises(UnsafeCheckpoint, match="custom model code") as info:
        load("remote")
    _no_leak(info.value, folder.parent)
    cfg.update(model_type="bert")  # a supported architecture asking for its own code is refused too
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(UnsafeCheckpoint, match="trust_remote_code stays off"):
        load("remote")
    del cfg["auto_map"]
    cfg["model_type"] = "evil"
    (folder / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(InvalidCheckpoint, match="'evil' is not supported"):
        load("remote")


@pytest.mark.parametrize("damage", ["truncate", "garbage", "huge-header", "empty"])
def test_corrupt_or_truncated_weights_are_an_invalid_checkpoint(copy_of, damage: str) -> None:
    folder = copy_of(f"corrupt-{damage}")
    weights = folder / "model.safetensors"
    raw = weights.read_bytes()
    weights.write_bytes({"truncate": raw[: len(raw) // 2], "garbage": os.urandom(4096),
                         "huge-header": (10**15).to_bytes(8, "little") + raw[8:], "empty": b""}[damage])
    t0 = time.perf_counter()
    with pytest.raises(InvalidCheckpoint, match="corrupt or truncated") as info:
        load(f"corrupt-{damage}")
    assert time.perf_counter() - t0 < 2
    _no_leak(info.value, folder.parent)


@pytest.mark.parametrize(("content", "message"), [
    ("[" * 200_000 + "]" * 200_000, "nested too deeply|corrupt"),
    ('{"model_type": "bert", "x": "' + "a" * 1_100_000 + '"}', "a few kB"),
    ("\xff\xfe not json", "corrupt"),
    ("[1, 2, 3]", "not a JSON object"),
])
def test_hostile_config_files_are_refused_by_name(copy_of, content: str, message: str) -> None:
    folder = copy_of("badconfig")
    (folder / "config.json").write_text(content, encoding="latin-1" if content.startswith("\xff") else "utf-8")
    t0 = time.perf_counter()
    with pytest.raises(InvalidCheckpoint, match=message) as info:
        check_checkpoint(folder)
    assert time.perf_counter() - t0 < 2
    _no_leak(info.value, folder.parent)


@pytest.mark.parametrize("change", [{"num_hidden_layers": 10**7}, {"hidden_size": 10**9, "num_attention_heads": 1},
                                    {"vocab_size": -5}, {"num_hidden_layers": 1e400}, {"num_hidden_layers": True}])
def test_absurd_configs_are_refused_before_any_weight_moves(copy_of, change) -> None:
    folder = copy_of("absurd")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, **change}))
    t0 = time.perf_counter()
    with pytest.raises(InvalidCheckpoint, match=r"does not describe|declares at least") as info:
        load("absurd")
    assert time.perf_counter() - t0 < 1
    _no_leak(info.value, folder.parent)


def test_a_vocabulary_of_a_billion_is_refused_by_the_size_budget_without_allocating(copy_of) -> None:
    """The refusal comes from arithmetic on config.json: the process does not grow by the model's size."""
    import resource

    folder = copy_of("vocab-billion")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "vocab_size": 10**9}))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kB, the peak so far
    with pytest.raises(ModelTooLarge, match=r"declares at least 32,000,000,000 parameters.*BFE_MAX_PARAMS"):
        load("vocab-billion")
    with pytest.raises(ModelTooLarge):
        inspect("vocab-billion")
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grown_mb < 50, f"the peak memory grew by {grown_mb:.0f} MB for a refused model of 128 GB"


def test_a_model_over_the_size_budget_is_refused_from_its_config(copy_of, monkeypatch) -> None:
    folder = copy_of("big")
    cfg = json.loads((folder / "config.json").read_text())
    # BERT-large's shape: 335M parameters declared; the tiny weights never get read.
    (folder / "config.json").write_text(json.dumps({**cfg, "hidden_size": 1024, "num_hidden_layers": 24, "num_attention_heads": 16,
                                                    "intermediate_size": 4096}))
    monkeypatch.setenv("BFE_MAX_PARAMS", "100000000")
    t0 = time.perf_counter()
    with pytest.raises(ModelTooLarge, match="up to 100,000,000") as info:
        load("big")
    assert time.perf_counter() - t0 < 1
    _no_leak(info.value, folder.parent)


def test_the_budget_applies_to_the_tensor_headers_too(copy_of, monkeypatch) -> None:
    folder = copy_of("headers")
    stored = preflight(folder).stored
    monkeypatch.setenv("BFE_MAX_PARAMS", str(stored - 1))
    with pytest.raises(ModelTooLarge):
        load("headers")


def test_weights_that_do_not_cover_the_architecture_are_refused(copy_of) -> None:
    folder = copy_of("shallow")
    cfg = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps({**cfg, "num_hidden_layers": cfg["num_hidden_layers"] + 6}))
    with pytest.raises(InvalidCheckpoint, match="would be random") as info:
        load("shallow")
    _no_leak(info.value, folder.parent)


def test_a_base_model_missing_tensors_is_an_invalid_checkpoint(copy_of) -> None:
    from safetensors.torch import load_file, save_file

    folder = copy_of("holes")
    tensors = load_file(folder / "model.safetensors")
    victim = next(k for k in tensors if "layer.0.attention.self.query.weight" in k)
    tensors["padding.extra"] = tensors.pop(victim).clone()  # same size, wrong name: the header count still matches
    save_file(tensors, folder / "model.safetensors", metadata={"format": "pt"})
    with pytest.raises(InvalidCheckpoint, match="lacks 1 of the base model's tensors"):
        load("holes")


def test_the_models_page_explains_a_broken_folder_once(copy_of) -> None:
    from streamlit.testing.v1 import AppTest

    folder = copy_of("bert-base-uncased")
    (folder / "config.json").write_text("[" * 100_000)
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.run()
    at.switch_page("views/models.py").run()
    assert not at.exception
    text = " ".join(str(e.value) for e in [*at.error, *at.markdown, *at.caption, *at.info])
    assert "Something unexpected" not in text
    frame = at.dataframe[0].value
    assert frame.loc[frame["model"] == "bert-base-uncased", "status"].item() == "local copy is broken"


# --------------------------------------------------------------------------------------- a dead Hub
def _silent_server() -> tuple[socket.socket, int]:
    """A TCP server on localhost that accepts connections and never answers (a hung network)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            held.append(conn)

    threading.Thread(target=accept, daemon=True).start()
    return srv, srv.getsockname()[1]


_LOAD_TWICE = """
import json, sys, time
from models.loader import load
from core.errors import ExplorerError
out = []
for _ in range(3):
    t0 = time.perf_counter()
    try:
        load("bert-base-uncased")
        out.append(["loaded", time.perf_counter() - t0, ""])
    except ExplorerError as err:
        out.append([type(err).__name__, time.perf_counter() - t0, str(err)])
print(json.dumps(out))
"""


@pytest.mark.slow
def test_online_without_a_network_fails_once_then_at_once(empty_model_dir: Path, tmp_path: Path) -> None:
    srv, port = _silent_server()
    env = {**os.environ, "BFE_ONLINE": "1", "HF_HUB_OFFLINE": "0", "HF_ENDPOINT": f"http://127.0.0.1:{port}",
           "HF_HUB_ETAG_TIMEOUT": "2", "HF_HUB_DOWNLOAD_TIMEOUT": "2", "HF_HOME": str(tmp_path / "hf"),
           "BFE_MODEL_DIR": str(empty_model_dir)}
    try:
        proc = subprocess.run([sys.executable, "-c", _LOAD_TWICE], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    finally:
        srv.close()
    assert proc.returncode == 0, proc.stderr[-2000:]
    (kind1, t1, _), (kind2, t2, msg2), (kind3, t3, _) = json.loads(proc.stdout.strip().splitlines()[-1])
    assert kind1 == kind2 == kind3 == "ModelUnavailable"
    assert "did not answer" in msg2 and "models.fetch" in msg2
    assert t1 < 30 and t2 < 0.5 and t3 < 0.5, (t1, t2, t3)  # the first waits for one bounded probe, not forever


def test_every_library_error_is_an_explorer_error_with_a_hint(copy_of) -> None:
    folder = copy_of("hinted")
    (folder / "model.safetensors").write_bytes(b"\x00" * 16)
    for call in (lambda: load("hinted"), lambda: load("../x"), lambda: registry.get(None), lambda: load("no-such-model")):
        with pytest.raises(ExplorerError) as info:
            call()
        assert info.value.hint, info.value


def test_text_past_the_character_limit_is_refused_before_tokenizing() -> None:
    from core.errors import MAX_TEXT_CHARS, InvalidText
    from models import objectives as O
    from models import permutation as P
    from models.attention import extract_attention

    huge = "word " * (MAX_TEXT_CHARS // 4)
    calls = [lambda: extract_attention("bert-base-uncased", huge), lambda: O.fill_mask("bert-base-uncased", huge + " [MASK]"),
             lambda: O.pseudo_log_likelihood("bert-base-uncased", huge), lambda: O.sentence_relation("bert-base-uncased", huge, "b"),
             lambda: O.generate("gpt2", huge), lambda: P.segment_recurrence("xlnet-base-cased", huge)]
    for call in calls:
        t0 = time.perf_counter()
        with pytest.raises(InvalidText, match="characters long"):
            call()
        assert time.perf_counter() - t0 < 2
