"""Any checkpoint, not just the catalog: a folder under BFE_MODEL_DIR or a Hub id, inspected from its
config and tensor headers before a weight is loaded or downloaded."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from core.errors import InvalidCheckpoint, ModelTooLarge, ModelUnavailable, UnknownModel, UnsafeCheckpoint, UnsupportedTask
from models import checkpoint, locate
from models.checkpoint import heads_from_names
from models.inspection import inspect
from models.loader import load
from tests.helpers import ENTRY


@pytest.fixture(autouse=True)
def fresh_caches():
    """Pages cache availability and inspections: start and leave each test with none."""
    import streamlit as st

    st.cache_data.clear()
    yield
    st.cache_data.clear()


@pytest.fixture
def own_dir(tiny_dir: Path, empty_model_dir: Path):
    """A model directory with checkpoints a student might bring: saved with the head, or as a bare encoder."""
    import transformers

    def make(name: str, arch: str = "bert-base-uncased", cls: str | None = None) -> Path:
        dst = empty_model_dir / name
        if cls is None:
            shutil.copytree(tiny_dir / arch, dst)
        else:  # re-saved with another class: e.g. the bare encoder (AutoModel) of a fine-tuned model
            model = getattr(transformers, cls).from_pretrained(tiny_dir / arch)
            model.save_pretrained(dst)
            transformers.AutoTokenizer.from_pretrained(tiny_dir / arch).save_pretrained(dst)
        return dst
    return make


def test_a_folder_of_ones_own_is_inspected_and_loaded(own_dir) -> None:
    from analysis.params import count_parameters

    folder = own_dir("students/my-bert")
    info = inspect("students/my-bert")
    assert info.model_type == "bert" and info.downloaded and "BFE_MODEL_DIR/students/my-bert" in info.where
    assert info.parameters == count_parameters(json.loads((folder / "config.json").read_text()))
    assert info.heads == ("base", "masked-lm", "pretraining")
    assert "students/my-bert: bert," in info.summary()
    lm = load("students/my-bert", task="masked-lm")
    assert lm.card is None and lm.model_id == "students/my-bert"


def test_a_bare_encoder_is_refused_for_fill_mask_before_its_weights_load(own_dir, monkeypatch) -> None:
    own_dir("encoder-only", cls="BertModel")
    assert inspect("encoder-only").heads == ("base",)
    import transformers

    calls = []
    monkeypatch.setattr(transformers.AutoModelForMaskedLM, "from_pretrained", lambda *a, **k: calls.append(a))
    with pytest.raises(UnsupportedTask, match=r"no trained weights for the masked-lm head \(its tensors hold: base\)"):
        load("encoder-only", task="masked-lm")
    assert calls == []  # refused from the tensor names, never loaded with a random head
    assert load("encoder-only").model.config.model_type == "bert"


@pytest.mark.parametrize(("model_type", "names", "heads"), [
    ("bert", ["bert.embeddings.word_embeddings.weight", "cls.predictions.bias", "cls.seq_relationship.weight"],
     ("base", "masked-lm", "pretraining")),
    ("bert", ["embeddings.word_embeddings.weight", "pooler.dense.weight"], ("base",)),
    ("albert", ["albert.embeddings.word_embeddings.weight", "predictions.bias"], ("base", "masked-lm")),
    ("albert", ["predictions.bias", "sop_classifier.classifier.weight"], ("base", "masked-lm", "pretraining")),
    ("electra", ["electra.embeddings.x", "discriminator_predictions.dense.weight"], ("base", "pretraining")),
    ("electra", ["generator_predictions.dense.weight", "generator_lm_head.bias"], ("base", "masked-lm")),
    ("roberta", ["roberta.embeddings.x", "lm_head.dense.weight"], ("base", "masked-lm", "pretraining")),
    ("distilbert", ["vocab_transform.weight", "vocab_projector.bias"], ("base", "masked-lm", "pretraining")),
    ("gpt2", ["transformer.wte.weight"], ("base", "causal-lm")),
    ("xlnet", ["transformer.word_embedding.weight", "lm_loss.bias"], ("base", "causal-lm", "pretraining", "xlnet-lm")),
    ("xlnet", ["word_embedding.weight"], ("base",)),
    ("modernbert", ["model.embeddings.tok_embeddings.weight", "head.dense.weight", "decoder.bias"], ("base", "masked-lm")),
    ("modernbert", ["embeddings.tok_embeddings.weight"], ("base",)),
    ("deberta-v2", ["deberta.embeddings.x", "lm_predictions.lm_head.dense.weight"], ("base", "masked-lm", "pretraining")),
    ("deberta-v2", ["deberta.embeddings.x", "deberta.encoder.rel_embeddings.weight"], ("base",)),
])
def test_heads_are_read_from_the_tensor_names(model_type: str, names: list[str], heads: tuple[str, ...]) -> None:
    assert heads_from_names(model_type, names) == heads


def test_an_unknown_hub_id_offline_fails_fast_with_the_fetch_command() -> None:
    t0 = time.perf_counter()
    with pytest.raises(ModelUnavailable, match="cannot be reached") as err:
        load("someone/her-fine-tuned-bert")
    assert time.perf_counter() - t0 < 2
    assert "python -m models.fetch someone/her-fine-tuned-bert" in err.value.hint
    with pytest.raises(UnknownModel):  # a bare name is a catalog id or a local folder, never a Hub lookup
        load("her-fine-tuned-bert")


# ----------------------------------------------------------------------------- a Hub stand-in
def _hub(monkeypatch, tmp_path: Path, config: dict, files: list[str], tensors: dict[str, tuple[int, ...]]) -> list[str]:
    """Answer the three inspection requests (file list, config.json, safetensors headers) without a network."""
    import huggingface_hub

    requests: list[str] = []
    monkeypatch.setattr(locate, "is_online", lambda settings=None: True)
    monkeypatch.setattr(locate, "hub_answers", lambda hub_id: True)
    monkeypatch.setattr(locate, "_cached_snapshot", lambda hub_id: None)

    def download(repo, filename, local_dir=None, **kw):
        requests.append(filename)
        path = Path(local_dir or tmp_path) / filename
        path.write_text(json.dumps(config))
        return str(path)

    def metadata(repo, **kw):
        requests.append("safetensors headers")
        fm = SimpleNamespace(tensors={n: SimpleNamespace(shape=list(s)) for n, s in tensors.items()})
        import math
        return SimpleNamespace(files_metadata={"model.safetensors": fm},
                               parameter_count={"F32": sum(math.prod(s) for s in tensors.values())})

    monkeypatch.setattr(huggingface_hub, "list_repo_files", lambda repo, **kw: requests.append("files") or files)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", download)
    monkeypatch.setattr(huggingface_hub, "get_safetensors_metadata", metadata)
    return requests


def _real_tensors(config: dict, cls: str) -> dict[str, tuple[int, ...]]:
    import torch
    import transformers

    cfg = dict(config)
    conf = transformers.AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = getattr(transformers, cls)(conf)
    return {n: tuple(p.shape) for n, p in model.state_dict().items()}


FILES = ["config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"]


def test_a_hub_checkpoint_is_inspected_from_its_config_and_headers(monkeypatch, tmp_path: Path) -> None:
    from analysis.params import count_parameters
    from core import registry

    config = dict(registry.get("deberta-v3-base").config)
    requests = _hub(monkeypatch, tmp_path, config, FILES, _real_tensors(config, "DebertaV2ForMaskedLM"))
    info = inspect("someone/deberta-v3-fine-tuned")
    assert info.model_type == "deberta-v2" and info.parameters == count_parameters(config) == 183_831_552
    assert info.heads == ("base", "masked-lm", "pretraining") and not info.downloaded
    assert requests == ["files", "config.json", "safetensors headers"]  # no weights


@pytest.mark.parametrize(("change", "files", "error", "words"), [
    ({"model_type": "t5"}, FILES, InvalidCheckpoint, "'t5' is not supported.*Supported: albert, bert"),
    ({"auto_map": {"AutoModel": "x.Y"}}, FILES, UnsafeCheckpoint, "custom model code"),
    ({"vocab_size": 10**9}, FILES, ModelTooLarge, "declares at least"),
    ({"num_hidden_layers": 400}, FILES, ModelTooLarge, "BFE_MAX_PARAMS"),
    ({}, ["config.json", "pytorch_model.bin", "vocab.txt"], UnsafeCheckpoint, "only pickle weights"),
    ({}, ["config.json", "model.safetensors"], InvalidCheckpoint, "no tokenizer files"),
    ({}, ["model.safetensors", "vocab.txt"], InvalidCheckpoint, "no config.json"),
])
def test_a_hub_checkpoint_is_refused_before_any_weight_downloads(monkeypatch, tmp_path: Path, change, files, error, words) -> None:
    from core import registry

    config = {**registry.get("bert-base-uncased").config, **change}
    requests = _hub(monkeypatch, tmp_path, config, files, {"embeddings.word_embeddings.weight": (30522, 768)})
    import transformers

    loads = []
    monkeypatch.setattr(transformers.AutoModel, "from_pretrained", lambda *a, **k: loads.append(a))
    with pytest.raises(error, match=words):
        load("someone/odd-model")
    with pytest.raises(error, match=words):
        inspect("someone/odd-model")
    assert loads == [] and "safetensors headers" not in requests[:1]


def test_a_config_that_is_not_json_is_refused(own_dir) -> None:
    folder = own_dir("notjson")
    (folder / "config.json").write_text("{'model_type': 'bert',")
    with pytest.raises(InvalidCheckpoint, match="corrupt"):
        inspect("notjson")


def test_a_checkpoint_without_its_tokenizer_is_refused(own_dir) -> None:
    folder = own_dir("no-tokenizer")
    for f in folder.iterdir():
        if f.name.startswith("tokenizer") or f.name in ("vocab.txt", "special_tokens_map.json"):
            f.unlink()
    with pytest.raises(InvalidCheckpoint, match="no tokenizer files"):
        inspect("no-tokenizer")
    with pytest.raises(InvalidCheckpoint, match="no tokenizer files"):
        load("no-tokenizer")


def test_inspection_is_bounded_by_the_checkpoint_module(monkeypatch) -> None:
    """The module's own refusal does not depend on the page: a budget passed in wins over the setting."""
    with pytest.raises(ModelTooLarge, match="up to 1,000"):
        inspect("bert-base-uncased", max_params=1_000)
    monkeypatch.setenv("BFE_MAX_PARAMS", "1000")
    with pytest.raises(ModelTooLarge, match="up to 1,000"):
        checkpoint.check_config({"model_type": "bert"}, "a BERT-base config")


# ----------------------------------------------------------------------------- python -m models.fetch <any id>
def test_fetch_takes_any_hub_id_and_refuses_it_before_downloading(monkeypatch, tmp_path: Path, tiny_dir: Path,
                                                                   empty_model_dir: Path) -> None:
    from core import registry
    from models import fetch

    config = dict(registry.get("bert-base-uncased").config)
    _hub(monkeypatch, tmp_path, {**config, "model_type": "t5"}, FILES, {})
    monkeypatch.setattr(fetch, "is_online", lambda settings=None: True)
    downloads = []
    monkeypatch.setattr(fetch, "download", lambda hub_id, local_dir=None, on_progress=None: downloads.append(hub_id)
                        or shutil.copytree(tiny_dir / "bert-base-uncased", local_dir))
    with pytest.raises(InvalidCheckpoint, match="'t5' is not supported"):
        fetch.fetch("someone/a-t5")
    assert downloads == []
    tiny_config = json.loads((tiny_dir / "bert-base-uncased" / "config.json").read_text())
    _hub(monkeypatch, tmp_path, tiny_config, FILES, _real_tensors(tiny_config, "BertForPreTraining"))
    assert fetch.main(["someone/her-bert"]) == 0 and downloads == ["someone/her-bert"]
    assert (empty_model_dir / "someone" / "her-bert" / "config.json").is_file()
    monkeypatch.setattr(locate, "is_online", lambda settings=None: False)
    assert load("someone/her-bert", task="masked-lm").source.kind == "local"  # offline now, from BFE_MODEL_DIR
    with pytest.raises(UnknownModel):
        fetch.fetch("her-bert")


def test_download_reports_bytes_as_they_arrive(monkeypatch, tmp_path: Path) -> None:
    import huggingface_hub

    from models import fetch

    sizes = {"config.json": 500, "model.safetensors": 10_000, "tokenizer.json": 2_000}
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo, **kw: [
        SimpleNamespace(filename=f, file_size=n) for f, n in sizes.items()])

    def hf_hub_download(repo, filename, local_dir=None, tqdm_class=None, **kw):
        bar = tqdm_class(total=sizes[filename])
        for _ in range(4):
            bar.update(sizes[filename] // 4)
        (Path(local_dir) / filename).write_text("x")
        return str(Path(local_dir) / filename)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    seen: list[tuple[int, int]] = []
    assert fetch.download("someone/x", local_dir=tmp_path, on_progress=lambda d, t: seen.append((d, t))) == str(tmp_path)
    done = [d for d, _ in seen]
    assert done == sorted(done) and seen[-1] == (12_500, 12_500) and len(seen) >= 12


# ----------------------------------------------------------------------------- the pages' "another model…"
def _page(path: str, **params: str):
    from streamlit.testing.v1 import AppTest

    entry = ENTRY
    at = AppTest.from_file(entry, default_timeout=90)
    at.switch_page(path)
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


def test_the_attention_page_opens_a_folder_of_ones_own_from_its_link(own_dir) -> None:
    import streamlit as st

    from app import ui

    st.cache_data.clear()
    own_dir("students/my-bert")
    at = _page("views/attention.py", at_model=ui.OTHER, at_model_other="students/my-bert")
    assert not at.exception and not at.error
    assert any("students/my-bert: bert," in c.value for c in at.caption)
    assert any("students/my-bert" in m.value and "tokens" in m.value for m in at.markdown)  # the heatmap's header
    assert at.query_params["at_model_other"] == "students/my-bert"


@pytest.mark.parametrize(("typed", "words"), [
    ("someone/not-here", "python -m models.fetch someone/not-here"),  # offline: the fetch command
    ("no-such-folder", "not in the catalog"),
])
def test_the_attention_page_refuses_another_model_with_a_clear_message(typed: str, words: str) -> None:
    import streamlit as st

    from app import ui

    st.cache_data.clear()
    at = _page("views/attention.py", at_model=ui.OTHER, at_model_other=typed)
    assert not at.exception
    shown = " ".join(e.value for e in [*at.error, *at.info])
    assert words in shown, shown


def test_a_hostile_id_in_the_link_is_ignored_with_a_notice() -> None:
    from app import ui

    at = _page("views/attention.py", at_model=ui.OTHER, at_model_other="../../etc/passwd")
    assert not at.exception and any("were reset" in w.value for w in at.warning)
    assert at.text_input(key="at_model_other").value == ""


def test_the_objectives_page_fills_the_mask_with_another_model_and_refuses_a_bare_encoder(own_dir) -> None:
    from app import ui

    own_dir("students/my-roberta", "roberta-base")
    own_dir("students/encoder", cls="BertModel")
    at = _page("views/objectives.py", ob_models="bert-base-uncased", ob_models_other="students/my-roberta",
               ob_pll_model=ui.OTHER, ob_pll_model_other="students/encoder")
    assert not at.exception
    assert any(m.value == "**students/my-roberta**" for m in at.markdown)  # its column of predictions
    at = _page("views/objectives.py", ob_pll_model=ui.OTHER, ob_pll_model_other="students/encoder",
               ob_tab="Which sentence is more natural?")
    assert not at.exception
    assert any("students/encoder** has no trained masked-lm head" in e.value for e in at.error)
    assert not any(m.label.startswith("Sentence 1: pseudo") for m in at.metric)


def test_the_calculator_takes_another_checkpoints_config(own_dir) -> None:
    from analysis.params import count_parameters
    from app import ui

    folder = own_dir("students/my-albert", "albert-base-v2")
    config = json.loads((folder / "config.json").read_text())
    at = _page("views/calculator.py", sz_preset=ui.OTHER, sz_preset_other="students/my-albert", sz_seq="32")
    assert not at.exception and not at.error
    assert at.session_state["sz_type"] == "albert" and at.session_state["sz_emb"] == config["embedding_size"]
    total = next(m for m in at.metric if m.label == "Parameters").value
    assert total == f"{count_parameters(config, at.session_state['sz_head']):,}"
    bad = _page("views/calculator.py", sz_preset=ui.OTHER, sz_preset_other="someone/not-here")
    assert not bad.exception and any("python -m models.fetch someone/not-here" in i.value for i in bad.info)


def test_the_calculator_presets_reach_2024() -> None:
    at = _page("views/calculator.py", sz_preset="modernbert-large", sz_head="masked-lm")
    assert not at.exception and at.session_state["sz_type"] == "modernbert"
    assert next(m for m in at.metric if m.label == "Parameters").value == "395,881,664"


# ----------------------------------------------------------------------------- the successors through every page
SUCCESSORS = ["bert-base-multilingual-cased", "xlm-roberta-base", "mpnet-base", "deberta-v3-base", "modernbert-base"]


@pytest.mark.parametrize("model_id", SUCCESSORS)
def test_the_successors_through_the_attention_page(model_id: str) -> None:
    at = _page("views/attention.py", at_model=model_id, at_text="the cat sat on the mat .", at_pair="a boy is outside .")
    assert not at.exception and not at.error
    assert any(m.value.startswith(f"**{model_id}**") for m in at.markdown)


@pytest.mark.parametrize("model_id", [m for m in SUCCESSORS if m != "deberta-v3-base"])
def test_the_successors_fill_the_mask_on_the_objectives_page(model_id: str) -> None:
    at = _page("views/objectives.py", ob_models=model_id, ob_pll_model=model_id)
    assert not at.exception and not at.error
    assert any(m.value == f"**{model_id}**" for m in at.markdown)
    at = _page("views/objectives.py", ob_pll_model=model_id, ob_tab="Which sentence is more natural?")
    assert not at.exception and not at.error
    assert any(m.label.startswith("Sentence 1: pseudo") for m in at.metric)


def test_deberta_v3_without_an_mlm_head_is_not_offered_for_fill_mask() -> None:
    from core import registry

    assert "masked-lm" not in registry.get("deberta-v3-base").tasks
    at = _page("views/objectives.py", ob_models="deberta-v3-base")
    assert not at.exception and "deberta-v3-base" not in at.multiselect(key="ob_models").value
    assert any("were reset" in w.value for w in at.warning)


@pytest.mark.parametrize("model_id", ["bert-base-multilingual-cased", "xlm-roberta-large", "mpnet-base", "deberta-v3-large",
                                      "modernbert-base"])
def test_the_successors_as_calculator_presets(model_id: str) -> None:
    from analysis.params import count_parameters
    from core import registry

    at = _page("views/calculator.py", sz_preset=model_id, sz_head="base")
    assert not at.exception and not at.error
    assert next(m for m in at.metric if m.label == "Parameters").value == f"{count_parameters(registry.get(model_id).config):,}"
