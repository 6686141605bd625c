"""Exact parameter counts (against transformers on the meta device) and their breakdown."""

from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from analysis import params
from analysis.params import ARCH_HEADS, count_parameters, parameter_breakdown
from core import registry
from core.errors import InvalidConfig, UnsupportedArchitecture
from models.loader import TASK_CLASSES
from services import calculator_form as form
from tests.helpers import ROOT


def real_count(config: dict, head: str) -> tuple[int, str]:
    """sum(p.numel()) of the transformers model, built on the meta device (no memory)."""
    import torch
    import transformers

    cfg = dict(config)
    model_type = cfg.pop("model_type")
    if head == "causal-lm" and model_type not in ("gpt2", "xlnet"):
        cfg["is_decoder"] = True  # what BertLMHeadModel & co. expect
    conf = transformers.AutoConfig.for_model(model_type, **cfg)
    cls = getattr(transformers, TASK_CLASSES[head])
    with torch.device("meta"):
        model = cls(conf) if head == "xlnet-lm" else cls.from_config(conf)
    return sum(p.numel() for p in model.parameters()), type(model).__name__


CASES = [(card.id, head) for card in registry.loadable() for head in ARCH_HEADS[card.config["model_type"]]]


@pytest.mark.parametrize(("model_id", "head"), CASES, ids=[f"{m}:{h}" for m, h in CASES])
def test_exact_for_every_catalog_config_and_head(model_id: str, head: str) -> None:
    config = registry.get(model_id).config
    expected, cls = real_count(config, head)
    assert count_parameters(config, head) == expected, cls


TINY_VARIANTS = [
    {"model_type": "albert", "vocab_size": 99, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 6,
     "num_attention_heads": 4, "intermediate_size": 37, "num_hidden_groups": 3, "inner_group_num": 2},
    {"model_type": "albert", "vocab_size": 99, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 4,
     "num_attention_heads": 4, "intermediate_size": 37, "tie_word_embeddings": False},
    {"model_type": "electra", "vocab_size": 99, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
     "num_attention_heads": 4, "intermediate_size": 37},
    {"model_type": "electra", "vocab_size": 99, "embedding_size": 32, "hidden_size": 32, "num_hidden_layers": 2,
     "num_attention_heads": 4, "intermediate_size": 37, "type_vocab_size": 3},
    {"model_type": "gpt2", "vocab_size": 99, "n_embd": 32, "n_layer": 3, "n_head": 4, "n_positions": 40, "n_inner": 50},
    {"model_type": "gpt2", "vocab_size": 99, "n_embd": 32, "n_layer": 2, "n_head": 2, "n_positions": 40, "tie_word_embeddings": False},
    {"model_type": "xlnet", "vocab_size": 99, "d_model": 32, "n_layer": 2, "n_head": 4, "d_inner": 37},
    {"model_type": "xlnet", "vocab_size": 99, "d_model": 32, "n_layer": 2, "n_head": 4, "d_inner": 37, "tie_word_embeddings": False},
    {"model_type": "distilbert", "vocab_size": 99, "dim": 32, "n_layers": 3, "n_heads": 4, "hidden_dim": 37, "max_position_embeddings": 40},
    {"model_type": "roberta", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "max_position_embeddings": 42, "type_vocab_size": 1},
    {"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "tie_word_embeddings": False},
    {"model_type": "roberta", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "tie_word_embeddings": False},
    {"model_type": "electra", "vocab_size": 99, "embedding_size": 16, "hidden_size": 32, "num_hidden_layers": 2,
     "num_attention_heads": 4, "intermediate_size": 37, "tie_word_embeddings": False},
    {"model_type": "distilbert", "vocab_size": 99, "dim": 32, "n_layers": 3, "n_heads": 4, "hidden_dim": 37, "tie_word_embeddings": False},
    # DeBERTa-v2: separate position projections, a convolution layer, E != H, the newer MLM head, untied decoder
    {"model_type": "deberta-v2", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "relative_attention": True, "pos_att_type": ["c2p", "p2c"], "share_att_key": False,
     "type_vocab_size": 2, "conv_kernel_size": 3, "embedding_size": 16},
    {"model_type": "deberta-v2", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "legacy": False, "tie_word_embeddings": False},
    {"model_type": "deberta-v2", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "relative_attention": True, "max_relative_positions": 20, "pos_att_type": "c2p",
     "tie_word_embeddings": False},
    {"model_type": "mpnet", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "relative_attention_num_buckets": 7, "tie_word_embeddings": False},
    {"model_type": "xlm-roberta", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
     "intermediate_size": 37, "max_position_embeddings": 40, "type_vocab_size": 1, "tie_word_embeddings": False},
    # ModernBERT with every bias switched on, and with one layer (layer 0 has no attention norm)
    {"model_type": "modernbert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 3, "num_attention_heads": 4,
     "intermediate_size": 37, "attention_bias": True, "mlp_bias": True, "norm_bias": True, "classifier_bias": True,
     "decoder_bias": False, "tie_word_embeddings": False, "pad_token_id": 0},
    {"model_type": "modernbert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 4,
     "intermediate_size": 37, "pad_token_id": 0},
]
TINY_CASES = [(i, h) for i, c in enumerate(TINY_VARIANTS) for h in ARCH_HEADS[c["model_type"]]]


@pytest.mark.parametrize(("index", "head"), TINY_CASES, ids=[f"{TINY_VARIANTS[i]['model_type']}{i}:{h}" for i, h in TINY_CASES])
def test_exact_for_tiny_configs_with_sharing_projection_and_untied_heads(index: int, head: str) -> None:
    config = TINY_VARIANTS[index]
    assert count_parameters(config, head) == real_count(config, head)[0]


def test_a_transformers_config_object_counts_the_same_as_its_dict() -> None:
    import transformers

    conf = transformers.AlbertConfig(**{k: v for k, v in registry.get("albert-base-v2").config.items() if k != "model_type"})
    assert count_parameters(conf) == registry.get("albert-base-v2").parameters == count_parameters(registry.get("albert-base-v2").config)


@pytest.mark.parametrize("model_type", list(params.DEFAULTS))
def test_defaults_match_the_transformers_config_classes(model_type: str) -> None:
    import transformers

    conf = transformers.AutoConfig.for_model(model_type).to_dict()
    for key, value in params.DEFAULTS[model_type].items():
        assert conf.get(key) == value, key


def test_breakdown_names_the_parts_and_sums_to_the_total() -> None:
    bd = parameter_breakdown(registry.get("bert-base-uncased").config, "pretraining")
    parts = bd.by_part()
    assert sum(parts.values()) == bd.total == sum(r["parameters"] for r in bd.rows())
    assert parts["word embeddings"] == 30522 * 768
    assert parts["position embeddings"] == 512 * 768 and parts["token type embeddings"] == 2 * 768
    for q in ("attention Q", "attention K", "attention V", "attention output"):
        assert parts[q] == 12 * (768 * 768 + 768)
    assert parts["feed-forward"] == 12 * (2 * 768 * 3072 + 3072 + 768)
    assert parts["pooler"] == 768 * 768 + 768 and parts["NSP head"] == 768 * 2 + 2
    # the MLM decoder is tied to the word embeddings: only its bias and the transform are new
    assert parts["MLM head"] == 768 * 768 + 768 + 2 * 768 + 30522
    assert bd.non_embedding == bd.total - (30522 + 512 + 2) * 768


def test_non_embedding_count_is_close_to_kaplans_12_l_d2() -> None:
    bd = parameter_breakdown(registry.get("gpt2-medium").config)
    approx = 12 * 24 * 1024**2
    assert abs(bd.non_embedding - approx) / approx < 0.01


def test_albert_saving_reproduces_the_papers_table_1() -> None:
    """ALBERT paper Table 1: BERT-large 334M vs ALBERT-large 18M (E=128, all layers shared)."""
    s = params.albert_saving(registry.get("albert-large-v2").config)
    assert s["bert_like"] > 330e6 and round(s["albert"] / 1e6) == 18
    assert s["albert"] < s["factorized"] < s["bert_like"] and s["albert"] < s["shared"] < s["bert_like"]
    # factorising V×H into V×E + E×H saves exactly (V+P+T)·(H−E) + 2(H−E) − (E·H + H)
    a = params.arch_of(registry.get("albert-large-v2").config)
    emb_rows = a.vocab + a.positions + a.token_types
    saved = emb_rows * (a.hidden - a.embedding) + 2 * (a.hidden - a.embedding) - (a.embedding * a.hidden + a.hidden)
    assert s["shared"] - s["albert"] == saved


@pytest.mark.parametrize(("change", "error", "words"), [
    ({"num_attention_heads": 7}, InvalidConfig, "do not divide"),
    ({"hidden_size": 0}, InvalidConfig, "at least 1"),
    ({"hidden_size": -768}, InvalidConfig, "at least 1"),
    ({"num_hidden_layers": 2.5}, InvalidConfig, "whole number"),
    ({"vocab_size": "lots"}, InvalidConfig, "whole number"),
    ({"hidden_size": 10**7, "num_attention_heads": 10}, InvalidConfig, "limit"),
    ({"model_type": "t5"}, UnsupportedArchitecture, "Unknown architecture"),
])
def test_bad_configs_raise_clear_errors(change: dict, error: type, words: str) -> None:
    config = {**registry.get("bert-base-uncased").config, **change}
    with pytest.raises(error, match=words):
        count_parameters(config)


def test_a_head_the_architecture_lacks_is_refused() -> None:
    with pytest.raises(UnsupportedArchitecture, match="no masked-lm head"):
        count_parameters(registry.get("gpt2").config, "masked-lm")
    with pytest.raises(UnsupportedArchitecture, match="Unknown head"):
        count_parameters(registry.get("gpt2").config, "nsp")


def test_arch_is_accepted_directly_and_albert_groups_cannot_exceed_layers() -> None:
    a = params.arch_of(registry.get("albert-base-v2").config)
    assert count_parameters(a) == registry.get("albert-base-v2").parameters
    assert count_parameters(replace(a, groups=12)) > 11 * count_parameters(a) / 2  # 12 unshared layers
    with pytest.raises(InvalidConfig, match="more hidden groups"):
        count_parameters({**registry.get("albert-base-v2").config, "num_hidden_groups": 13})


def test_importing_the_calculators_does_not_import_torch() -> None:
    import subprocess

    code = "import sys, analysis.params, analysis.memory; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("card", registry.loadable(), ids=lambda c: c.id)
def test_the_calculator_form_round_trips_every_catalog_config(card: registry.ModelCard) -> None:
    """The form (services.calculator_form) reproduces each checkpoint's architecture from the values it shows."""
    values = form.form_from_config(card.config)
    config = form.config_from_form(card.config["model_type"], values)
    assert params.arch_of(config) == params.arch_of(card.config)
    assert count_parameters(config) == card.parameters
    assert set(form.form_fields(card.config["model_type"])) <= set(values)


def test_form_fields_follow_the_architecture() -> None:
    assert "emb" in form.form_fields("albert") and "groups" in form.form_fields("albert")
    assert "types" in form.form_fields("deberta-v2") and "types" not in form.form_fields("modernbert")
    assert "pos" not in form.form_fields("xlnet") and "types" in form.form_fields("xlm-roberta")
    with pytest.raises(UnsupportedArchitecture):
        form.config_from_form("t5", form.form_from_config({"model_type": "bert"}))


# ------------------------------------------------------------------------------------------ any valid configuration

def _sizes(draw, st):
    heads = draw(st.sampled_from([1, 2, 4]))
    return heads, heads * draw(st.integers(2, 12)), draw(st.integers(1, 3)), draw(st.integers(3, 64)), draw(st.integers(5, 300))


def _config(draw, st, model_type: str) -> dict:
    """A random valid configuration of ``model_type``: heads dividing the width, any FFN, vocabulary and depth."""
    heads, hidden, layers, ffn, vocab = _sizes(draw, st)
    tie = draw(st.booleans())
    if model_type == "gpt2":
        return {"model_type": "gpt2", "vocab_size": vocab, "n_embd": hidden, "n_layer": layers, "n_head": heads,
                "n_positions": draw(st.integers(8, 64)), "n_inner": ffn, "tie_word_embeddings": tie}
    if model_type == "xlnet":
        return {"model_type": "xlnet", "vocab_size": vocab, "d_model": hidden, "n_layer": layers, "n_head": heads, "d_inner": ffn,
                "tie_word_embeddings": tie}
    if model_type == "distilbert":
        return {"model_type": "distilbert", "vocab_size": vocab, "dim": hidden, "n_layers": layers, "n_heads": heads,
                "hidden_dim": ffn, "max_position_embeddings": draw(st.integers(8, 64)), "tie_word_embeddings": tie}
    cfg = {"model_type": model_type, "vocab_size": vocab, "hidden_size": hidden, "num_hidden_layers": layers,
           "num_attention_heads": heads, "intermediate_size": ffn, "max_position_embeddings": draw(st.integers(8, 64)),
           "type_vocab_size": draw(st.integers(1, 3)), "tie_word_embeddings": tie}
    if model_type in ("albert", "electra"):
        cfg["embedding_size"] = draw(st.integers(4, 48))
    if model_type == "albert":
        groups = draw(st.sampled_from([g for g in (1, 2, 3) if layers % g == 0]))
        cfg |= {"num_hidden_groups": groups, "inner_group_num": draw(st.integers(1, 2))}
    return cfg


@pytest.mark.parametrize("model_type", ["bert", "roberta", "albert", "electra", "distilbert", "gpt2", "xlnet"])
def test_any_valid_configuration_counts_exactly_what_transformers_builds(model_type: str) -> None:
    """Property: for random valid configurations (widths, depths, vocabularies, tied or not, ALBERT's groups), and each
    head of the architecture, the counter equals ``sum(p.numel())`` of the model transformers builds."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=12, deadline=None, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.data())
    def check(data) -> None:
        config = _config(data.draw, st, model_type)
        head = data.draw(st.sampled_from(ARCH_HEADS[model_type]))
        expected, cls = real_count(config, head)
        assert count_parameters(config, head) == expected, (cls, config)

    check()
