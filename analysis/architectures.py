"""One record per architecture (``model_type``): what every part of the explorer needs to know about it.

Adding an architecture means adding one :class:`Architecture` here (and, for a new tensor layout, a counter in
:mod:`analysis.params`): the parameter counter reads ``defaults``, ``heads`` and ``layout``; the checkpoint checks
(:mod:`models.checkpoint`) accept exactly these ``model_type`` values; the attention pages read ``attention`` (whether
q·k explains the weights, for the neuron view) and ``note``; the catalog's cards name one of these types (tested).

No torch, no transformers: the defaults are the transformers config classes' own (a test checks them against
``AutoConfig.for_model``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from core.errors import UnsupportedArchitecture

PLAIN = "plain"


@dataclass(frozen=True)
class Architecture:
    """What the explorer knows about one ``model_type``."""

    model_type: str
    #: transformers' config defaults for the keys the counter reads
    defaults: Mapping[str, Any]
    #: heads transformers' Auto classes build for it (as ``models.loader.load(task=...)`` names them)
    heads: tuple[str, ...]
    #: which tensor layout :mod:`analysis.params` counts (XLM-R is laid out as RoBERTa)
    layout: str = ""
    #: ``"plain"`` when softmax(q·kᵀ/√d + mask) is the whole score (the neuron view explains it), else what it adds
    attention: str = PLAIN
    #: a sentence for the attention page on what is particular about its attention, with its source
    note: str = ""
    #: fine-tuning heads (``AutoModelForSequenceClassification`` / ``...TokenClassification``) exist for it
    classification: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "defaults", MappingProxyType(dict(self.defaults)))
        object.__setattr__(self, "layout", self.layout or self.model_type)


ARCHITECTURES: dict[str, Architecture] = {
    "bert": Architecture(
        "bert",
        {
            "vocab_size": 30522,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
        },
        ("base", "masked-lm", "causal-lm", "pretraining"),
    ),
    "roberta": Architecture(
        "roberta",
        {
            "vocab_size": 50265,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
        },
        ("base", "masked-lm", "causal-lm", "pretraining"),
    ),
    "distilbert": Architecture(
        "distilbert",
        {"vocab_size": 30522, "dim": 768, "n_layers": 6, "n_heads": 12, "hidden_dim": 3072, "max_position_embeddings": 512},
        ("base", "masked-lm", "pretraining"),
    ),
    "albert": Architecture(
        "albert",
        {
            "vocab_size": 30000,
            "embedding_size": 128,
            "hidden_size": 4096,
            "num_hidden_layers": 12,
            "num_attention_heads": 64,
            "intermediate_size": 16384,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
            "num_hidden_groups": 1,
            "inner_group_num": 1,
        },
        ("base", "masked-lm", "pretraining"),
    ),
    "electra": Architecture(
        "electra",
        {
            "vocab_size": 30522,
            "embedding_size": 128,
            "hidden_size": 256,
            "num_hidden_layers": 12,
            "num_attention_heads": 4,
            "intermediate_size": 1024,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
        },
        ("base", "masked-lm", "causal-lm", "pretraining"),
    ),
    "xlnet": Architecture(
        "xlnet",
        {"vocab_size": 32000, "d_model": 1024, "n_layer": 24, "n_head": 16, "d_inner": 4096},
        ("base", "causal-lm", "pretraining", "xlnet-lm"),
        attention="relative positions and segment terms are added to q·k",
    ),
    "gpt2": Architecture(
        "gpt2", {"vocab_size": 50257, "n_embd": 768, "n_layer": 12, "n_head": 12, "n_positions": 1024, "n_inner": None}, ("base", "causal-lm", "pretraining")
    ),
    "deberta-v2": Architecture(
        "deberta-v2",
        {
            "vocab_size": 128100,
            "hidden_size": 1536,
            "num_hidden_layers": 24,
            "num_attention_heads": 24,
            "intermediate_size": 6144,
            "max_position_embeddings": 512,
            "type_vocab_size": 0,
            "relative_attention": False,
            "max_relative_positions": -1,
            "position_biased_input": True,
            "pos_att_type": None,
            "legacy": True,
        },
        ("base", "masked-lm", "pretraining"),
        attention="disentangled attention adds content-to-position and position-to-content scores",
        note=(
            "DeBERTa's disentangled attention: each score adds content-to-content, content-to-position and position-to-content terms "
            "over relative positions; the layers see no absolute positions (He et al. 2021, DeBERTa, Section 3.1). The weights shown "
            "are the softmax of that sum."
        ),
    ),
    "mpnet": Architecture(
        "mpnet",
        {
            "vocab_size": 30527,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "max_position_embeddings": 512,
            "relative_attention_num_buckets": 32,
        },
        ("base", "masked-lm", "pretraining"),
        attention="a learned relative-position bias is added to q·k",
        note=(
            "MPNet adds a learned relative-position bias (shared by all layers) to the scores, and sees the positions of the whole "
            "sentence while predicting in a permuted order (Song et al. 2020, MPNet)."
        ),
    ),
    "xlm-roberta": Architecture(
        "xlm-roberta",
        {
            "vocab_size": 30522,
            "hidden_size": 768,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "intermediate_size": 3072,
            "max_position_embeddings": 512,
            "type_vocab_size": 2,
        },
        ("base", "masked-lm", "causal-lm", "pretraining"),
        layout="roberta",
        note=("XLM-RoBERTa: RoBERTa's attention, one 250k SentencePiece vocabulary for 100 languages (Conneau et al. 2020)."),
    ),
    "modernbert": Architecture(
        "modernbert",
        {
            "vocab_size": 50368,
            "hidden_size": 768,
            "num_hidden_layers": 22,
            "num_attention_heads": 12,
            "intermediate_size": 1152,
            "max_position_embeddings": 8192,
            "attention_bias": False,
            "mlp_bias": False,
            "norm_bias": False,
            "decoder_bias": True,
            "classifier_bias": False,
            "local_attention": 128,
        },
        ("base", "masked-lm"),
        attention="rotary position embeddings rotate q and k before their product",
    ),
}


def get(model_type: str) -> Architecture:
    """The record of ``model_type``.

    Raises:
        UnsupportedArchitecture: a type the explorer does not know, with the list it knows.
    """
    try:
        return ARCHITECTURES[model_type]
    except (KeyError, TypeError):
        raise UnsupportedArchitecture(f"Unknown architecture {str(model_type)[:60]!r}.", "Supported: " + ", ".join(sorted(ARCHITECTURES)) + ".") from None
