"""The size calculator's form: which numbers of a configuration a user edits, under what labels and bounds, and the
configuration a filled-in form describes. The counts themselves are ``analysis.params``'s; this is the form that edits
their input, so it lives with the calculator's use case, not with the arithmetic.

A new architecture adds its DEFAULTS, ARCH_HEADS and counting function in ``analysis.params`` and, if it needs them,
FORM_NAMES and FORM_SWITCHES entries here; the calculator page draws whatever this says.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from analysis.param_layouts import SAME_LAYOUT
from analysis.params import DEFAULTS
from core.errors import UnsupportedArchitecture

#: Form field -> (label, minimum, the LIMITS entry that is its maximum, config keys by priority, help).
FORM_FIELDS: dict[str, tuple[str, int, str, tuple[str, ...], str]] = {
    "layers": ("Layers L", 1, "layers", ("num_hidden_layers", "n_layers", "n_layer"), "num_hidden_layers / n_layers / n_layer"),
    "hidden": ("Hidden size H", 1, "hidden size", ("hidden_size", "dim", "d_model", "n_embd"), "hidden_size / dim / d_model / n_embd"),
    "heads": ("Attention heads A", 1, "attention heads", ("num_attention_heads", "n_heads", "n_head"), "must divide H"),
    "ffn": ("Feed-forward size", 1, "feed-forward size", ("intermediate_size", "hidden_dim", "d_inner", "n_inner"),
            "intermediate_size (usually 4·H; ModernBERT's GeGLU uses 1.5·H, doubled in its input projection)"),
    "vocab": ("Vocabulary V", 1, "vocabulary size", ("vocab_size",),
              "WordPiece 30,522 · BPE 50,257/50,265 · SentencePiece 30,000/32,000/128,100/250,002"),
    "pos": ("Positions", 1, "positions", ("max_position_embeddings", "n_positions"),
            "max_position_embeddings: a learned table, or (DeBERTa-v3, ModernBERT) only the longest input"),
    "types": ("Token types", 0, "token types", ("type_vocab_size",), "segment embeddings (BERT 2, RoBERTa 1, DeBERTa-v3 0)"),
    "emb": ("Embedding size E", 1, "embedding size", ("embedding_size",), "ALBERT and ELECTRA factorise V×H into V×E + E×H"),
    "groups": ("Hidden groups", 1, "hidden groups", ("num_hidden_groups",), "ALBERT: layers share parameters within a group (1 = all shared)"),
    "inner": ("Layers per group", 1, "layers per group", ("inner_group_num",), "ALBERT inner_group_num"),
}

#: The config's own names for (hidden, layers, heads, ffn), where they are not BERT's.
FORM_NAMES: dict[str, tuple[str, str, str, str]] = {
    "distilbert": ("dim", "n_layers", "n_heads", "hidden_dim"), "xlnet": ("d_model", "n_layer", "n_head", "d_inner"),
    "gpt2": ("n_embd", "n_layer", "n_head", "n_inner"),
}
_BERT_NAMES = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size")

#: Switches a configuration typed into the form takes: those of the architecture's best-known checkpoint
#: (DeBERTa-v3's relative positions, MPNet's buckets, ModernBERT's alternating attention).
FORM_SWITCHES: dict[str, dict[str, Any]] = {
    "deberta-v2": {"relative_attention": True, "position_buckets": 256, "norm_rel_ebd": "layer_norm", "share_att_key": True,
                   "pos_att_type": "p2c|c2p", "max_relative_positions": -1, "position_biased_input": False},
    "mpnet": {"relative_attention_num_buckets": 32},
    "modernbert": {"global_attn_every_n_layers": 3, "local_attention": 128},
}


def form_fields(model_type: str) -> list[str]:
    """The form fields that mean something for ``model_type``, in the form's order."""
    layout = SAME_LAYOUT.get(model_type, model_type)
    skip = set()
    if layout not in ("albert", "electra"):
        skip.add("emb")
    if layout != "albert":
        skip |= {"groups", "inner"}
    if layout not in ("bert", "roberta", "albert", "electra", "deberta-v2"):
        skip.add("types")
    if layout == "xlnet":
        skip.add("pos")
    return [f for f in FORM_FIELDS if f not in skip]


def form_from_config(config: Mapping[str, Any]) -> dict[str, int]:
    """A checkpoint's config as form values (every field; defaults of its ``model_type`` where it is silent)."""
    mt = config.get("model_type")
    if mt not in DEFAULTS:
        raise UnsupportedArchitecture(f"Unknown architecture {mt!r}.", "The calculators know: " + ", ".join(DEFAULTS) + ".")
    merged = {**DEFAULTS[mt], **{k: v for k, v in config.items() if v is not None}}
    out: dict[str, int] = {}
    for name, (*_, keys, _help) in FORM_FIELDS.items():
        value = next((merged[k] for k in keys if merged.get(k) is not None), None)
        if name == "ffn" and value is None:
            value = 4 * out["hidden"]
        if name == "emb" and value is None:
            value = out["hidden"]
        if name == "pos" and value is None:
            value = 512  # XLNet: no positions; the field is hidden
        if name in ("types", "groups", "inner") and value is None:
            value = {"types": 0, "groups": 1, "inner": 1}[name]
        out[name] = int(value)
    return out


def config_from_form(model_type: str, values: Mapping[str, int], tied: bool = True) -> dict[str, Any]:
    """The config a filled-in form describes (``values`` as :func:`form_from_config` gives them)."""
    if model_type not in DEFAULTS:
        raise UnsupportedArchitecture(f"Unknown architecture {model_type!r}.", "The calculators know: " + ", ".join(DEFAULTS) + ".")
    cfg: dict[str, Any] = {"model_type": model_type, "vocab_size": values["vocab"], "tie_word_embeddings": tied,
                           **FORM_SWITCHES.get(model_type, {})}
    names = FORM_NAMES.get(model_type, _BERT_NAMES)
    cfg.update(zip(names, (values["hidden"], values["layers"], values["heads"], values["ffn"]), strict=True))
    shown = form_fields(model_type)
    if model_type == "gpt2":
        cfg["n_positions"] = values["pos"]
    elif "pos" in shown:
        cfg["max_position_embeddings"] = values["pos"]
    if "types" in shown:
        cfg["type_vocab_size"] = values["types"]
    if "emb" in shown:
        cfg["embedding_size"] = values["emb"]
    if "groups" in shown:
        cfg.update(num_hidden_groups=values["groups"], inner_group_num=values["inner"])
    return cfg
