"""models.loader: every architecture through the real loading path, sources, safety, cache."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest
import torch

from core.errors import (
    AttentionUnavailable,
    InvalidCheckpoint,
    InvalidModelId,
    InvalidSetting,
    ModelUnavailable,
    UnknownModel,
    UnsafeCheckpoint,
    UnsupportedTask,
)
from models import capture, loader
from models.loader import ModelCache, load, locate
from tests.helpers.tiny import TINY_MODELS

MINILM = "sentence-transformers/all-MiniLM-L6-v2"

# (catalog id, task, transformers class, tokenizer model kind)
CASES = [
    ("bert-base-uncased", "masked-lm", "BertForMaskedLM", "WordPiece"),
    ("bert-base-uncased", "pretraining", "BertForPreTraining", "WordPiece"),
    ("roberta-base", "masked-lm", "RobertaForMaskedLM", "BPE"),
    ("distilbert-base-uncased", "masked-lm", "DistilBertForMaskedLM", "WordPiece"),
    ("albert-base-v2", "pretraining", "AlbertForPreTraining", "Unigram"),
    ("albert-base-v2", "masked-lm", "AlbertForMaskedLM", "Unigram"),
    ("xlnet-base-cased", "xlnet-lm", "XLNetLMHeadModel", "Unigram"),
    ("google/electra-small-generator", "masked-lm", "ElectraForMaskedLM", "WordPiece"),
    ("google/electra-small-discriminator", "pretraining", "ElectraForPreTraining", "WordPiece"),
    ("gpt2", "causal-lm", "GPT2LMHeadModel", "BPE"),
]


@pytest.mark.parametrize(("model_id", "task", "cls", "tok_kind"), CASES, ids=[f"{c[0]}:{c[1]}" for c in CASES])
def test_every_architecture_loads_with_its_head(model_id, task, cls, tok_kind, tiny_dir: Path) -> None:
    lm = load(model_id, task)
    assert type(lm.model).__name__ == cls
    assert type(lm.tokenizer.backend_tokenizer.model).__name__ == tok_kind
    assert lm.source.kind == "local" and Path(lm.source.location) == (tiny_dir / model_id).resolve()
    assert lm.missing_weights == ()
    assert lm.device.type == "cpu" and lm.dtype == torch.float32
    assert not lm.model.training
    model, tokenizer, device = lm  # unpacks as the (model, tokenizer, device)
    assert model is lm.model and tokenizer is lm.tokenizer and device == lm.device
    assert lm.nbytes == sum(p.numel() * 4 for p in model.parameters()) + sum(
        b.numel() * b.element_size() for b in model.buffers())


@pytest.mark.parametrize("model_id", list(TINY_MODELS))
def test_eager_attention_for_every_architecture(model_id: str) -> None:
    lm = load(model_id, attentions=True)
    # BERT-like attention writes its weights straight into one array (models.capture): same arithmetic.
    expected = "eager_capture" if lm.model.config.model_type in capture.CAPTURE_TYPES else "eager"
    assert lm.attn_implementation == expected == lm.model.config._attn_implementation
    enc = lm.tokenizer("the cat sat on the mat", return_tensors="pt")
    with torch.inference_mode():
        att = lm.model(**enc, output_attentions=True).attentions
    t = enc["input_ids"].shape[1]
    assert len(att) == lm.model.config.num_hidden_layers and all(a.shape == (1, 4, t, t) for a in att)
    for a in att:
        torch.testing.assert_close(a.sum(-1), torch.ones(1, 4, t), atol=1e-5, rtol=0)
    if model_id == "gpt2":  # causal: nothing above the diagonal
        assert torch.all(torch.triu(att[0][0], diagonal=1) == 0)


def test_sdpa_model_without_attentions_is_caught() -> None:
    lm = load("bert-base-uncased")
    assert lm.attn_implementation == "sdpa"
    with pytest.raises(AttentionUnavailable, match="attention"):
        loader._check_attentions(lm.model, lm.tokenizer, lm.device, lm.model_id)


def test_bundled_minilm_is_real_and_offline(empty_model_dir: Path) -> None:
    lm = load(MINILM, attentions=True)
    assert lm.source.kind == "bundled"
    enc = lm.tokenizer(["The cat sat on the mat.", "A cat was sitting on a rug.", "Stock markets fell sharply today."],
                       padding=True, return_tensors="pt")
    with torch.inference_mode():
        out = lm.model(**enc, output_attentions=True)
    t = enc["input_ids"].shape[1]
    assert len(out.attentions) == 6 and out.attentions[0].shape == (3, 12, t, t)
    for a in out.attentions:
        torch.testing.assert_close(a.sum(-1), torch.ones(3, 12, t), atol=1e-4, rtol=0)
    # Trained weights, not random ones: a paraphrase is closer than an unrelated sentence.
    mask = enc["attention_mask"].unsqueeze(-1)
    emb = torch.nn.functional.normalize((out.last_hidden_state * mask).sum(1) / mask.sum(1), dim=-1)
    assert emb[0] @ emb[1] > emb[0] @ emb[2] + 0.3


def test_catalog_card_refuses_a_head_it_has_not() -> None:
    with pytest.raises(UnsupportedTask, match="masked-lm"):
        load(MINILM, "masked-lm")
    with pytest.raises(UnsupportedTask, match="Its checkpoint has: base, causal-lm"):
        load("gpt2", "masked-lm")
    with pytest.raises(UnsupportedTask, match="Unknown task"):
        load("gpt2", "translation")


def test_untrained_head_is_refused_unless_asked(empty_model_dir: Path) -> None:
    from transformers import BertModel

    from tests.helpers.tiny import tiny_config, wordpiece_tokenizer

    tok = wordpiece_tokenizer()
    BertModel(tiny_config("bert", tok)).save_pretrained(empty_model_dir / "my-bert")
    tok.save_pretrained(empty_model_dir / "my-bert")
    assert load("my-bert").source.kind == "local"  # a folder that is not in the catalog loads too
    with pytest.raises(UnsupportedTask, match="no trained weights for the masked-lm head"):
        load("my-bert", "masked-lm")
    lm = load("my-bert", "masked-lm", allow_untrained_head=True)
    assert any(k.startswith("cls.") for k in lm.missing_weights)


def test_unknown_id_suggests() -> None:
    with pytest.raises(UnknownModel, match="roberta-base"):
        load("roberta-bse")


@pytest.mark.parametrize("bad", ["../etc", "/etc/passwd", "a/../../b", "a/b/c", "", "   ", "bert base", "x" * 300,
                                 "..", "~root"])
def test_malformed_or_escaping_ids_are_refused(bad: str) -> None:
    with pytest.raises(InvalidModelId):
        load(bad)


def test_symlink_out_of_the_model_dir_is_refused(empty_model_dir: Path, tiny_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    shutil.copytree(tiny_dir / "bert-base-uncased", outside)
    (empty_model_dir / "sneaky").symlink_to(outside)
    with pytest.raises(InvalidModelId, match="outside the model directory"):
        load("sneaky")


def test_missing_model_offline_fails_fast_with_instructions(empty_model_dir: Path) -> None:
    start = time.perf_counter()
    with pytest.raises(ModelUnavailable) as err:
        load("roberta-large", "masked-lm")
    assert time.perf_counter() - start < 5
    assert "python -m models.fetch roberta-large" in err.value.hint
    with pytest.raises(ModelUnavailable, match=r"catalog-only|no weights"):
        load("gpt-3")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_auto_online_probe_is_bounded(empty_model_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With HF_HUB_OFFLINE unset, `auto` probes the Hub once; an unreachable Hub means offline, fast."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    start = time.perf_counter()
    assert loader.is_online() is False
    with pytest.raises(ModelUnavailable):
        locate("roberta-large")
    assert time.perf_counter() - start < 5
    monkeypatch.setenv("BFE_ONLINE", "0")
    assert loader.is_online() is False
    monkeypatch.setenv("BFE_ONLINE", "1")
    assert loader.is_online() is True


def _broken_copy(tiny_dir: Path, root: Path, name: str) -> Path:
    folder = root / name
    shutil.copytree(tiny_dir / "bert-base-uncased", folder)
    return folder


def test_folder_without_weights(empty_model_dir: Path, tiny_dir: Path) -> None:
    folder = _broken_copy(tiny_dir, empty_model_dir, "bert-base-uncased")
    (folder / "model.safetensors").unlink()
    with pytest.raises(InvalidCheckpoint, match="no weights"):
        load("bert-base-uncased")


def test_pickle_only_folder_is_never_loaded(empty_model_dir: Path, tiny_dir: Path) -> None:
    folder = _broken_copy(tiny_dir, empty_model_dir, "bert-base-uncased")
    from safetensors.torch import load_file

    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    with pytest.raises(UnsafeCheckpoint, match="pickle"):
        load("bert-base-uncased")
    assert loader.availability(__import__("core.registry").registry.get("bert-base-uncased")).status == "broken"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"model_type": "t5"}', ""])
def test_corrupt_or_foreign_config(empty_model_dir: Path, tiny_dir: Path, content: str) -> None:
    folder = _broken_copy(tiny_dir, empty_model_dir, "bert-base-uncased")
    (folder / "config.json").write_text(content)
    with pytest.raises(InvalidCheckpoint):
        load("bert-base-uncased")


def test_folder_without_tokenizer(empty_model_dir: Path, tiny_dir: Path) -> None:
    folder = _broken_copy(tiny_dir, empty_model_dir, "bert-base-uncased")
    (folder / "tokenizer.json").unlink()
    with pytest.raises(InvalidCheckpoint, match="tokenizer"):
        load("bert-base-uncased")


def test_local_folder_comes_before_the_bundled_model(empty_model_dir: Path, tiny_dir: Path) -> None:
    shutil.copytree(tiny_dir / "bert-base-uncased", empty_model_dir / MINILM)
    assert locate(MINILM).kind == "local"


def test_hugging_face_cache_is_used_when_no_local_folder(empty_model_dir: Path, tiny_dir: Path) -> None:
    from huggingface_hub import constants

    repo = Path(constants.HF_HUB_CACHE) / "models--google--electra-base-discriminator"
    shutil.copytree(tiny_dir / "google/electra-small-discriminator", repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123")
    try:
        lm = load("google/electra-base-discriminator", "pretraining")
        assert lm.source.kind == "cache"
        assert type(lm.model).__name__ == "ElectraForPreTraining"
    finally:
        shutil.rmtree(repo)


def test_device_choice(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.device import inference_dtype, resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: False)
    assert resolve_device("auto").type == "cpu"
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
    assert resolve_device("auto").type == "mps"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto").type == "cuda"
    assert resolve_device("cpu").type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert inference_dtype(torch.device("cuda")) == torch.bfloat16
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert inference_dtype(torch.device("cuda")) == torch.float16
    assert inference_dtype(torch.device("cpu")) == torch.float32


def test_a_gpu_attached_only_during_calls_still_describes_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    """A ZeroGPU Space's process between calls: torch says CUDA is there, but asking the card fails. The backend's
    info (the front end's sidebar) and the loader's dtype must not fail with it."""
    from models import device

    def no_card(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("No CUDA GPUs are available")

    monkeypatch.setenv("BFE_DEVICE", "cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", no_card)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", no_card)
    monkeypatch.setattr(device, "_nvidia_smi", lambda: None)
    assert device.describe_device() == device.DeviceInfo("cuda", "CUDA GPU", None)
    assert device.describe_device().label() == "GPU: CUDA GPU"
    assert device.inference_dtype(torch.device("cuda")) == torch.bfloat16


def test_explicit_device_that_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.device import resolve_device

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(InvalidSetting, match="CUDA"):
        resolve_device("cuda")
    monkeypatch.setenv("BFE_DEVICE", "cuda:1")
    with pytest.raises(InvalidSetting):
        load("gpt2")


def test_lru_eviction_under_a_small_budget() -> None:
    sizes = {m: load(m, cache=ModelCache(10**12)).nbytes for m in ("gpt2", "roberta-base", "xlnet-base-cased")}
    cache = ModelCache(sizes["gpt2"] + sizes["roberta-base"] + 1)
    first = load("gpt2", cache=cache)
    load("roberta-base", cache=cache)
    assert load("gpt2", cache=cache) is first  # a hit, and gpt2 becomes most recently used
    load("xlnet-base-cased", cache=cache)  # over budget: roberta (least recently used) goes
    info = cache.info()
    assert [e.model_id for e in info.entries] == ["gpt2", "xlnet-base-cased"]
    assert info.evictions == 1 and info.total_bytes == sizes["gpt2"] + sizes["xlnet-base-cased"]
    assert info.total_bytes <= info.budget_bytes


def test_a_model_bigger_than_the_budget_is_kept_alone() -> None:
    cache = ModelCache(1)
    load("gpt2", cache=cache)
    load("roberta-base", cache=cache)
    assert [e.model_id for e in cache.info().entries] == ["roberta-base"]


def test_concurrent_requests_load_once() -> None:
    cache = ModelCache(10**12)
    calls = []

    def factory():
        calls.append(1)
        time.sleep(0.2)
        return loader.load("gpt2", cache=ModelCache(10**12))

    results = []
    threads = [threading.Thread(target=lambda: results.append(cache.get_or_load(("k",) * 4, factory)))
               for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len({id(r) for r in results}) == 1


def test_default_cache_is_shared_and_uses_the_budget_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_MODEL_CACHE_MB", "7")
    a = load("gpt2")
    assert load("gpt2") is a
    assert loader.default_cache().budget_bytes == 7 * 2**20
    assert [e.model_id for e in loader.default_cache().info().entries] == ["gpt2"]
