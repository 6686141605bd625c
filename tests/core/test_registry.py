"""The family catalog: coverage, lookup, and exact parameter counts against transformers."""

from __future__ import annotations

import pytest

from core import registry
from core.errors import UnknownModel

REQUIRED = [
    "bert-base-uncased", "bert-large-uncased", "bert-base-cased", "roberta-base", "roberta-large",
    "distilbert-base-uncased", "albert-base-v2", "albert-large-v2", "albert-xlarge-v2", "albert-xxlarge-v2",
    "xlnet-base-cased", "xlnet-large-cased", "google/electra-small-generator",
    "google/electra-small-discriminator", "google/electra-base-discriminator", "gpt2", "gpt2-medium",
    "distilgpt2", "sentence-transformers/all-MiniLM-L6-v2",
]
CATALOG_ONLY = ["elmo", "openai-gpt", "transformer-xl", "megatron-lm-8.3b", "turing-nlg-17b", "ctrl",
                "ernie-2.0", "bigbird", "gpt-3"]


@pytest.mark.parametrize("model_id", REQUIRED)
def test_required_models_are_loadable_entries(model_id: str) -> None:
    card = registry.get(model_id)
    assert card.loadable and card.hub_id and card.config["model_type"]
    assert card.layers and card.hidden and card.heads and card.vocab_size
    assert card.year >= 2018 and card.paper and card.key_ideas
    assert "base" in card.tasks
    assert card.mask_token is None or card.objective != "causal-lm"


@pytest.mark.parametrize("model_id", CATALOG_ONLY)
def test_slide_models_are_catalog_only(model_id: str) -> None:
    card = registry.get(model_id)
    assert not card.loadable and card.hub_id is None and card.tasks == ()
    assert card.parameters > 0 and card.parameters_reported


def test_lookup_by_hub_id_and_case() -> None:
    assert registry.get("google-bert/bert-base-uncased").id == "bert-base-uncased"
    assert registry.get("  ROBERTA-BASE ").id == "roberta-base"


def test_unknown_id_lists_close_matches() -> None:
    with pytest.raises(UnknownModel) as err:
        registry.get("bert-base-uncase")
    assert "bert-base-uncased" in err.value.suggestions
    assert "bert-base-uncased" in str(err.value)
    with pytest.raises(LookupError):  # UnknownModel is a LookupError, so callers may catch that
        registry.get("no-such-model-at-all-xyz")


def test_exactly_one_bundled_model() -> None:
    assert [c.id for c in registry.all_models() if c.bundled] == ["sentence-transformers/all-MiniLM-L6-v2"]
    assert registry.bundled_id() == "sentence-transformers/all-MiniLM-L6-v2"


@pytest.mark.parametrize("card", registry.loadable(), ids=lambda c: c.id)
def test_parameter_count_is_exact_for_the_real_config(card: registry.ModelCard) -> None:
    """Build the real architecture on the meta device (no memory) and count its parameters."""
    import torch
    from transformers import AutoConfig, AutoModel

    cfg = dict(card.config)
    config = AutoConfig.for_model(cfg.pop("model_type"), **cfg)
    with torch.device("meta"):
        model = AutoModel.from_config(config)
    assert sum(p.numel() for p in model.parameters()) == card.parameters
    assert config.num_hidden_layers == card.layers
    assert config.num_attention_heads == card.heads
    assert config.vocab_size == card.vocab_size


def test_lineage_parents_exist_and_have_no_cycles() -> None:
    fams = registry.families()

    def ancestors(f: str, seen: tuple[str, ...] = ()) -> None:
        assert f not in seen, f"cycle through {f}"
        for p in fams[f].parents:
            ancestors(p, (*seen, f))

    for f in fams:
        ancestors(f)
    assert "bert" in fams["roberta"].parents and "transformer-xl" in fams["xlnet"].parents


def test_bad_catalog_is_refused(tmp_path) -> None:
    import json

    data = json.loads(registry.CATALOG_PATH.read_text())
    data["models"][0]["objective"] = "telepathy"
    bad = tmp_path / "catalog.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="telepathy"):
        registry.load_catalog(bad)


def test_one_year_convention_the_first_arxiv_version() -> None:
    """The catalog's year is the paper's first arXiv version wherever the paper has an arXiv id."""
    for card in registry.all_models():
        if card.arxiv:
            assert card.year == card.arxiv_year == registry.arxiv_year(card.arxiv), card.id
    assert registry.arxiv_year("1810.04805") == 2018 and registry.arxiv_year(None) is None and registry.arxiv_year("hep-th/9901001") is None
