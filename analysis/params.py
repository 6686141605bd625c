"""Exact parameter counts of the BERT family, from a configuration alone (no torch, no weights).

``parameter_breakdown(config, head)`` lists every parameter tensor the transformers model built
from ``config`` holds, with its shape and the part of the network it belongs to; the count is
exact: it equals ``sum(p.numel() for p in model.parameters())`` of ``AutoModel*.from_config`` (the
tests check every catalog configuration on the ``meta`` device). Tied weights (the LM head's decoder
and the word embeddings) are one tensor and counted once; ALBERT's shared layers are counted once
per group, as they are stored.

Counting is arithmetic per layer *kind*: the L identical layers of a model are one set of
:class:`Tensor` records with ``copies=L``, so the cost does not grow with the depth. Every size is
checked against :data:`LIMITS` (a declared sanity bound, also the size calculator's input limits)
and refused with :class:`InvalidConfig` in microseconds.

``config`` is a transformers config object or a plain dict with the same keys (missing keys take
the transformers defaults of that ``model_type``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from analysis.architectures import ARCHITECTURES
from core.errors import InvalidConfig, UnsupportedArchitecture

#: The heads, named as ``models.loader.load(task=...)`` names them, and what each adds.
HEADS: dict[str, str] = {
    "base": "the bare encoder/decoder (with BERT's pooler, as AutoModel builds it)",
    "masked-lm": "masked-LM head (AutoModelForMaskedLM; no pooler)",
    "causal-lm": "left-to-right LM head (AutoModelForCausalLM)",
    "pretraining": "the pre-training heads (AutoModelForPreTraining: MLM+NSP, MLM+SOP, ELECTRA discriminator ...)",
    "xlnet-lm": "XLNet's LM head (XLNetLMHeadModel)",
}

#: Defaults of the transformers config classes (checked against them in the tests), from the architecture records.
DEFAULTS: dict[str, Mapping[str, Any]] = {mt: a.defaults for mt, a in ARCHITECTURES.items()}

#: Which heads each architecture has (what transformers' Auto classes build for it).
ARCH_HEADS: dict[str, tuple[str, ...]] = {mt: a.heads for mt, a in ARCHITECTURES.items()}

#: Architectures whose tensors are laid out as another's (XLM-R is RoBERTa with another vocabulary).
SAME_LAYOUT: dict[str, str] = {mt: a.layout for mt, a in ARCHITECTURES.items() if a.layout != mt}

#: Above this the calculators refuse: no model has been trained near it, and it is usually a typo.
MAX_PARAMETERS = 10**13

#: Sanity bounds on each size (inclusive): far past every model trained so far, and the calculator
#: page's input limits. A config beyond them is refused with InvalidConfig before anything is counted.
LIMITS: dict[str, int] = {
    "vocabulary size": 1_000_000, "hidden size": 65_536, "layers": 1_000, "attention heads": 1_024,
    "feed-forward size": 262_144, "positions": 1_000_000, "token types": 16, "embedding size": 65_536,
    "hidden groups": 1_000, "layers per group": 100,
}

EMBEDDING_PARTS = frozenset({"word embeddings", "position embeddings", "token type embeddings"})


@dataclass(frozen=True)
class Arch:
    """The numbers that fix a model's shape, under one naming for every family."""

    model_type: str
    vocab: int  # V
    hidden: int  # H (d_model)
    layers: int  # L
    heads: int  # A
    ffn: int  # feed-forward inner size
    positions: int  # learned absolute positions; 0 for XLNet (relative)
    token_types: int
    embedding: int  # E (ALBERT, ELECTRA); = H elsewhere
    groups: int = 1  # ALBERT num_hidden_groups
    inner: int = 1  # ALBERT inner_group_num
    tied: bool = True  # LM decoder tied to the word embeddings
    #: Architecture-specific switches, as (key, value) pairs: DeBERTa's relative-position options,
    #: MPNet's buckets, ModernBERT's biases. Read them with :meth:`opt`.
    opts: tuple[tuple[str, Any], ...] = ()

    def opt(self, key: str, default: Any = None) -> Any:
        return dict(self.opts).get(key, default)

    @property
    def absolute_positions(self) -> bool:
        """Whether the model has a learned position table (ModernBERT: rotary; DeBERTa-v3: relative only)."""
        return bool(self.positions) and self.opt("absolute_positions", True)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def is_decoder(self) -> bool:
        return self.model_type == "gpt2"


@dataclass(frozen=True)
class Tensor:
    """One parameter tensor: where it sits (``group``: embeddings, layer 3, pooler ...), what it is."""

    group: str
    part: str
    name: str
    shape: tuple[int, ...]
    copies: int = 1  # identical tensors in as many layers (``group`` names them: "layers 0–11")

    @property
    def numel(self) -> int:
        """Parameters in all copies together."""
        return math.prod(self.shape) * self.copies


@dataclass(frozen=True)
class Breakdown:
    """Every parameter tensor of a model; ``total`` is the exact ``numel`` sum."""

    arch: Arch
    head: str
    tensors: tuple[Tensor, ...] = field(repr=False)

    @property
    def total(self) -> int:
        return sum(t.numel for t in self.tensors)

    @property
    def embedding(self) -> int:
        """Word, position and token-type embedding tables (what Kaplan et al. leave out of N)."""
        return sum(t.numel for t in self.tensors if t.part in EMBEDDING_PARTS)

    @property
    def non_embedding(self) -> int:
        """N of the scaling laws: all parameters except the embedding tables (Kaplan et al. 2020, §2.1)."""
        return self.total - self.embedding

    def by_part(self) -> dict[str, int]:
        """part -> parameters, in network order."""
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.part] = out.get(t.part, 0) + t.numel
        return out

    def by_group(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for t in self.tensors:
            out[t.group] = out.get(t.group, 0) + t.numel
        return out

    @property
    def tensor_count(self) -> int:
        """How many parameter tensors the model holds (copies counted)."""
        return sum(t.copies for t in self.tensors)

    def rows(self) -> list[dict[str, Any]]:
        """One dict per tensor kind (group, part, name, shape, copies, parameters of all copies): ready for a data frame."""
        return [{"group": t.group, "part": t.part, "name": t.name, "shape": " × ".join(map(str, t.shape)), "copies": t.copies,
                 "parameters": t.numel} for t in self.tensors]


def _get(cfg: Mapping[str, Any], defaults: Mapping[str, Any], *keys: str) -> Any:
    for k in keys:
        if k in cfg and cfg[k] is not None:
            return cfg[k]
    for k in keys:
        if k in defaults:
            return defaults[k]
    raise InvalidConfig(f"The configuration has no {keys[0]!r}.")


def _positive_int(name: str, value: Any, allow_zero: bool = False) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidConfig(f"{name} must be a whole number, not {str(value)[:40]!r}.")
    value = int(value)
    if value < 0 or (value == 0 and not allow_zero):
        raise InvalidConfig(f"{name} must be {'zero or more' if allow_zero else 'at least 1'}, not {value}.")
    return value


def arch_of(config: Any) -> Arch:
    """Normalise a transformers config object or a dict into an :class:`Arch`; validate it.

    Raises:
        UnsupportedArchitecture: the ``model_type`` is missing or not one of :data:`DEFAULTS`.
        InvalidConfig: a size that is not a positive whole number, or heads that do not divide the hidden size.
    """
    if isinstance(config, Arch):
        return config
    if hasattr(config, "to_dict"):
        cfg = config.to_dict()
    elif isinstance(config, Mapping):
        cfg = dict(config)
    else:
        raise InvalidConfig(f"A configuration is a dict or a transformers config, not {type(config).__name__}.",
                            "Pass e.g. {'model_type': 'bert', 'hidden_size': 768, ...} or AutoConfig.for_model('bert').")
    mt = cfg.get("model_type")
    if mt not in DEFAULTS:
        raise UnsupportedArchitecture(
            f"Unknown architecture {mt!r}." if mt else "The configuration names no model_type.",
            "The calculators know: " + ", ".join(DEFAULTS) + ".")
    d = DEFAULTS[mt]
    g = lambda *keys: _get(cfg, d, *keys)  # noqa: E731
    hidden = g("hidden_size", "dim", "d_model", "n_embd")
    raw = {
        "vocabulary size": g("vocab_size"),
        "hidden size": hidden,
        "layers": g("num_hidden_layers", "n_layers", "n_layer"),
        "attention heads": g("num_attention_heads", "n_heads", "n_head"),
        "feed-forward size": (cfg.get("n_inner") or 4 * hidden) if mt == "gpt2" else g("intermediate_size", "hidden_dim", "d_inner"),
        "positions": 0 if mt == "xlnet" else g("max_position_embeddings", "n_positions"),
        "token types": g("type_vocab_size") if mt in ("bert", "roberta", "albert", "electra") else 0,
        "embedding size": g("embedding_size") if mt in ("albert", "electra") else hidden,
        "hidden groups": g("num_hidden_groups") if mt == "albert" else 1,
        "layers per group": g("inner_group_num") if mt == "albert" else 1,
    }
    if mt in ("xlm-roberta", "deberta-v2"):
        raw["token types"] = g("type_vocab_size")
    if mt == "deberta-v2":
        raw["embedding size"] = cfg.get("embedding_size") or hidden
    v = {k: _positive_int(k, x, allow_zero=k in ("positions", "token types")) for k, x in raw.items()}
    over = [f"{k} {v[k]:,} (limit {LIMITS[k]:,})" for k in v if v[k] > LIMITS[k]]
    if over:
        raise InvalidConfig("This configuration is past the calculator's sanity bounds: " + "; ".join(over) + ".",
                            "No trained model comes near these sizes; check for a typo.")
    if mt not in ("xlnet",) and v["positions"] == 0:
        raise InvalidConfig("positions must be at least 1.")
    if v["hidden size"] % v["attention heads"]:
        raise InvalidConfig(
            f"{v['attention heads']} attention heads do not divide the hidden size {v['hidden size']}.",
            "Each head gets hidden/heads dimensions: pick a head count that divides the hidden size (768 → 12).")
    if v["hidden groups"] > v["layers"]:
        raise InvalidConfig(f"ALBERT cannot have more hidden groups ({v['hidden groups']}) than layers ({v['layers']}).")
    return Arch(model_type=mt, vocab=v["vocabulary size"], hidden=v["hidden size"], layers=v["layers"],
                heads=v["attention heads"], ffn=v["feed-forward size"], positions=v["positions"],
                token_types=v["token types"], embedding=v["embedding size"], groups=v["hidden groups"],
                inner=v["layers per group"], tied=bool(cfg.get("tie_word_embeddings", True)),
                opts=_options(mt, cfg, d, v["positions"]))


def _options(mt: str, cfg: dict[str, Any], d: Mapping[str, Any], positions: int) -> tuple[tuple[str, Any], ...]:
    """The switches beyond the common sizes that change which tensors a model holds (see :attr:`Arch.opts`)."""
    g = lambda key: cfg[key] if cfg.get(key) is not None else d.get(key)  # noqa: E731
    if mt == "deberta-v2":
        pos_att = g("pos_att_type") or []
        if isinstance(pos_att, str):
            pos_att = [x.strip() for x in pos_att.lower().split("|")]
        relative = bool(g("relative_attention"))
        buckets = int(cfg.get("position_buckets") or -1)
        max_rel = int(g("max_relative_positions") or -1)
        rel_size = 2 * (buckets if buckets > 0 else (max_rel if max_rel >= 1 else positions)) if relative else 0
        conv = int(cfg.get("conv_kernel_size") or 0)
        return (("absolute_positions", bool(g("position_biased_input"))), ("relative_embeddings", rel_size),
                ("norm_relative", relative and "layer_norm" in str(cfg.get("norm_rel_ebd") or "none").lower()),
                ("position_projections", () if (not relative or cfg.get("share_att_key")) else
                 tuple(t for t in ("c2p", "p2c") if t in pos_att)),
                ("conv_kernel", conv), ("conv_groups", int(cfg.get("conv_groups") or 1)), ("legacy_head", bool(g("legacy"))))
    if mt == "mpnet":
        return (("relative_buckets", _positive_int("relative buckets", g("relative_attention_num_buckets"))),)
    if mt == "modernbert":
        return (("absolute_positions", False),
                *((k, bool(g(k))) for k in ("attention_bias", "mlp_bias", "norm_bias", "decoder_bias", "classifier_bias")))
    return ()


def _linear(group: str, part: str, name: str, n_in: int, n_out: int, bias: bool = True, copies: int = 1) -> list[Tensor]:
    out = [Tensor(group, part, f"{name}.weight", (n_out, n_in), copies)]
    if bias:
        out.append(Tensor(group, part, f"{name}.bias", (n_out,), copies))
    return out


def _norm(group: str, part: str, name: str, n: int, copies: int = 1) -> list[Tensor]:
    return [Tensor(group, part, f"{name}.weight", (n,), copies), Tensor(group, part, f"{name}.bias", (n,), copies)]


def _layers_group(n: int) -> str:
    return "layer 0" if n == 1 else f"layers 0–{n - 1}"


def _repeat(tensors: list[Tensor], copies: int) -> list[Tensor]:
    """The same tensors in ``copies`` identical layers (one record each, not one per layer)."""
    return [replace(t, copies=t.copies * copies) for t in tensors]


#: Tensor names of the post-LN encoder layer (Q, K, V, output, LN, FFN in, FFN out, LN) in each family.
LAYER_NAMES: dict[str, tuple[str, ...]] = {
    "bert": ("query", "key", "value", "attention.output", "attention.LayerNorm", "intermediate", "output", "output.LayerNorm"),
    "distilbert": ("q_lin", "k_lin", "v_lin", "out_lin", "sa_layer_norm", "ffn.lin1", "ffn.lin2", "output_layer_norm"),
    "mpnet": ("attention.attn.q", "attention.attn.k", "attention.attn.v", "attention.attn.o", "attention.LayerNorm",
              "intermediate", "output", "output.LayerNorm"),
}


def _bert_layer(a: Arch, group: str, names: tuple[str, ...] = LAYER_NAMES["bert"]) -> list[Tensor]:
    """A post-LN encoder layer (Q, K, V, output, LN, FFN, LN): BERT, ALBERT, ELECTRA, RoBERTa, DistilBERT, MPNet."""
    h, f = a.hidden, a.ffn
    q, k, v, o, ln1, ff1, ff2, ln2 = names
    return [*_linear(group, "attention Q", q, h, h), *_linear(group, "attention K", k, h, h),
            *_linear(group, "attention V", v, h, h), *_linear(group, "attention output", o, h, h),
            *_norm(group, "layer norms", ln1, h),
            *_linear(group, "feed-forward", ff1, h, f), *_linear(group, "feed-forward", ff2, f, h),
            *_norm(group, "layer norms", ln2, h)]


def _embeddings(a: Arch, dim: int) -> list[Tensor]:
    g = "embeddings"
    out = [Tensor(g, "word embeddings", "word_embeddings.weight", (a.vocab, dim))]
    if a.absolute_positions:
        out.append(Tensor(g, "position embeddings", "position_embeddings.weight", (a.positions, dim)))
    if a.token_types:
        out.append(Tensor(g, "token type embeddings", "token_type_embeddings.weight", (a.token_types, dim)))
    if a.model_type != "gpt2":
        out += _norm(g, "embedding layer norm", "LayerNorm", dim)
    return out


def _mlm_head(a: Arch, dim: int, name: str) -> list[Tensor]:
    """transform (H→dim dense + LN) and a decoder tied to the word embeddings, with its own bias."""
    g = "head"
    out = [*_linear(g, "MLM head", f"{name}.dense", a.hidden, dim), *_norm(g, "MLM head", f"{name}.LayerNorm", dim)]
    if not a.tied:
        out.append(Tensor(g, "MLM head", f"{name}.decoder.weight", (a.vocab, dim)))
        if SAME_LAYOUT.get(a.model_type, a.model_type) in ("bert", "roberta", "albert", "deberta-v2"):
            # These heads keep a bias of their own beside the decoder's; tying makes them one tensor.
            out.append(Tensor(g, "MLM head", f"{name}.decoder.bias", (a.vocab,)))
    out.append(Tensor(g, "MLM head", f"{name}.bias", (a.vocab,)))
    return out


def _pooler(a: Arch) -> list[Tensor]:
    return _linear("pooler", "pooler", "pooler.dense", a.hidden, a.hidden)


def _encoder(a: Arch) -> list[Tensor]:
    """BERT, RoBERTa, ELECTRA and ALBERT bodies (embeddings, projection, layers)."""
    out = _embeddings(a, a.embedding)
    if a.model_type == "albert":
        out += _linear("embeddings", "embedding projection", "embedding_hidden_mapping_in", a.embedding, a.hidden)
        stored = a.groups * a.inner  # each group stores inner_group_num layers, shared by the layers that use it
        out += _repeat(_bert_layer(a, "shared group 0" if stored == 1 else f"shared groups ({a.groups} × {a.inner} layers)"), stored)
    else:
        if a.model_type == "electra" and a.embedding != a.hidden:
            out += _linear("embeddings", "embedding projection", "embeddings_project", a.embedding, a.hidden)
        out += _repeat(_bert_layer(a, _layers_group(a.layers)), a.layers)
    return out


def _distilbert(a: Arch, head: str) -> list[Tensor]:
    h = a.hidden
    out = _embeddings(a, h)
    g = _layers_group(a.layers)
    out += _repeat(_bert_layer(a, g, LAYER_NAMES["distilbert"]), a.layers)
    if head != "base":
        out += _mlm_head(a, h, "vocab")
    return out


def _xlnet(a: Arch, head: str) -> list[Tensor]:
    h, f, n, d = a.hidden, a.ffn, a.heads, a.head_dim
    out = [Tensor("embeddings", "word embeddings", "word_embedding.weight", (a.vocab, h)),
           Tensor("embeddings", "mask embedding", "mask_emb", (1, 1, h))]
    g = _layers_group(a.layers)
    out += _repeat([Tensor(g, "attention Q", "rel_attn.q", (h, n, d)), Tensor(g, "attention K", "rel_attn.k", (h, n, d)),
                Tensor(g, "attention V", "rel_attn.v", (h, n, d)), Tensor(g, "attention output", "rel_attn.o", (h, n, d)),
                Tensor(g, "relative positions", "rel_attn.r", (h, n, d)),
                *(Tensor(g, "relative positions", f"rel_attn.{b}", (n, d)) for b in ("r_r_bias", "r_s_bias", "r_w_bias")),
                Tensor(g, "relative positions", "rel_attn.seg_embed", (2, n, d)),
                *_norm(g, "layer norms", "rel_attn.layer_norm", h), *_norm(g, "layer norms", "ff.layer_norm", h),
                *_linear(g, "feed-forward", "ff.layer_1", h, f), *_linear(g, "feed-forward", "ff.layer_2", f, h)], a.layers)
    if head != "base":
        if not a.tied:
            out.append(Tensor("head", "LM head", "lm_loss.weight", (a.vocab, h)))
        out.append(Tensor("head", "LM head", "lm_loss.bias", (a.vocab,)))
    return out


def _gpt2(a: Arch, head: str) -> list[Tensor]:
    h, f = a.hidden, a.ffn
    out = [Tensor("embeddings", "word embeddings", "wte.weight", (a.vocab, h)),
           Tensor("embeddings", "position embeddings", "wpe.weight", (a.positions, h))]
    g = _layers_group(a.layers)
    # c_attn is one Conv1D producing Q, K and V; split here so the parts read as in the other families.
    out += _repeat([*_norm(g, "layer norms", "ln_1", h),
                Tensor(g, "attention Q", "attn.c_attn.weight[:, :H]", (h, h)), Tensor(g, "attention Q", "attn.c_attn.bias[:H]", (h,)),
                Tensor(g, "attention K", "attn.c_attn.weight[:, H:2H]", (h, h)), Tensor(g, "attention K", "attn.c_attn.bias[H:2H]", (h,)),
                Tensor(g, "attention V", "attn.c_attn.weight[:, 2H:]", (h, h)), Tensor(g, "attention V", "attn.c_attn.bias[2H:]", (h,)),
                *_linear(g, "attention output", "attn.c_proj", h, h), *_norm(g, "layer norms", "ln_2", h),
                *_linear(g, "feed-forward", "mlp.c_fc", h, f), *_linear(g, "feed-forward", "mlp.c_proj", f, h)], a.layers)
    out += _norm("final layer norm", "final layer norm", "ln_f", h)
    if head != "base" and not a.tied:
        out.append(Tensor("head", "LM head", "lm_head.weight", (a.vocab, h)))
    return out


def _deberta(a: Arch, head: str) -> list[Tensor]:
    """DeBERTa-v2/v3: BERT layers without absolute positions (v3), plus the shared relative-position table."""
    h, e = a.hidden, a.embedding
    out = [t for t in _embeddings(a, e) if t.part != "embedding layer norm"]
    if e != h:
        out.append(Tensor("embeddings", "embedding projection", "embed_proj.weight", (h, e)))
    out += _norm("embeddings", "embedding layer norm", "LayerNorm", h)  # after the projection: at H
    g = _layers_group(a.layers)
    layer = _bert_layer(a, g)
    for kind in a.opt("position_projections", ()):
        name = "pos_key_proj" if kind == "c2p" else "pos_query_proj"
        layer += _linear(g, "relative positions", f"attention.self.{name}", h, h)
    out += _repeat(layer, a.layers)
    if a.opt("relative_embeddings"):
        out.append(Tensor("encoder", "relative positions", "encoder.rel_embeddings.weight", (a.opt("relative_embeddings"), h)))
        if a.opt("norm_relative"):
            out += _norm("encoder", "relative positions", "encoder.LayerNorm", h)
    if a.opt("conv_kernel"):
        k, groups = a.opt("conv_kernel"), a.opt("conv_groups", 1)
        out += [Tensor("encoder", "convolution", "encoder.conv.conv.weight", (h, h // groups, k)),
                Tensor("encoder", "convolution", "encoder.conv.conv.bias", (h,)), *_norm("encoder", "convolution", "encoder.conv.LayerNorm", h)]
    if head != "base":
        if a.opt("legacy_head", True):
            out += _mlm_head(a, a.embedding, "cls.predictions")
        else:  # the newer head: transform at H and a bias, the word embeddings as decoder
            out += [*_linear("head", "MLM head", "lm_predictions.lm_head.dense", h, h),
                    *_norm("head", "MLM head", "lm_predictions.lm_head.LayerNorm", h),
                    Tensor("head", "MLM head", "lm_predictions.lm_head.bias", (a.vocab,))]
    return out


def _mpnet(a: Arch, head: str) -> list[Tensor]:
    """MPNet: BERT layers (q, k, v, o) with a T5-style relative-position bias shared by all layers."""
    h = a.hidden
    out = _embeddings(a, h)
    g = _layers_group(a.layers)
    out += _repeat(_bert_layer(a, g, LAYER_NAMES["mpnet"]), a.layers)
    out.append(Tensor("encoder", "relative positions", "encoder.relative_attention_bias.weight",
                      (a.opt("relative_buckets"), a.heads)))
    if head == "base":
        out += _pooler(a)
    else:
        out += [*_linear("head", "MLM head", "lm_head.dense", h, h), *_norm("head", "MLM head", "lm_head.layer_norm", h)]
        if not a.tied:
            out += [Tensor("head", "MLM head", "lm_head.decoder.weight", (a.vocab, h)),
                    Tensor("head", "MLM head", "lm_head.decoder.bias", (a.vocab,))]
        out.append(Tensor("head", "MLM head", "lm_head.bias", (a.vocab,)))
    return out


def _modernbert(a: Arch, head: str) -> list[Tensor]:
    """ModernBERT: pre-LN layers, fused QKV, GeGLU feed-forward (Wi makes 2 × ffn), rotary positions, optional biases."""
    h, f = a.hidden, a.ffn
    nb, ab, mb = a.opt("norm_bias"), a.opt("attention_bias"), a.opt("mlp_bias")

    def norm(group: str, part: str, name: str, copies: int = 1) -> list[Tensor]:
        out = [Tensor(group, part, f"{name}.weight", (h,), copies)]
        return [*out, Tensor(group, part, f"{name}.bias", (h,), copies)] if nb else out

    out = [Tensor("embeddings", "word embeddings", "embeddings.tok_embeddings.weight", (a.vocab, h)),
           *norm("embeddings", "embedding layer norm", "embeddings.norm")]
    g = _layers_group(a.layers)
    # Layer 0 has no attention norm (the embedding norm stands in); every other layer has one.
    if a.layers > 1:
        out += norm(f"layers 1–{a.layers - 1}" if a.layers > 2 else "layer 1", "layer norms", "attn_norm", a.layers - 1)
    out += _repeat([Tensor(g, "attention Q", "attn.Wqkv.weight[:H]", (h, h)), Tensor(g, "attention K", "attn.Wqkv.weight[H:2H]", (h, h)),
                    Tensor(g, "attention V", "attn.Wqkv.weight[2H:]", (h, h)),
                    *([Tensor(g, "attention Q", "attn.Wqkv.bias", (3 * h,))] if ab else []),
                    *_linear(g, "attention output", "attn.Wo", h, h, bias=ab), *norm(g, "layer norms", "mlp_norm"),
                    *_linear(g, "feed-forward", "mlp.Wi", h, 2 * f, bias=mb), *_linear(g, "feed-forward", "mlp.Wo", f, h, bias=mb)],
                   a.layers)
    out += norm("final layer norm", "final layer norm", "final_norm")
    if head != "base":
        out += [*_linear("head", "MLM head", "head.dense", h, h, bias=a.opt("classifier_bias")), *norm("head", "MLM head", "head.norm")]
        if not a.tied:
            out.append(Tensor("head", "MLM head", "decoder.weight", (a.vocab, h)))
        if a.opt("decoder_bias"):
            out.append(Tensor("head", "MLM head", "decoder.bias", (a.vocab,)))
    return out


def parameter_breakdown(config: Any, head: str | None = None) -> Breakdown:
    """Every parameter tensor of the transformers model for ``config`` with ``head`` (None: ``base``).

    Raises:
        UnsupportedArchitecture: unknown ``model_type``, or a head that architecture has no class for.
        InvalidConfig: sizes that are not positive whole numbers, heads not dividing the hidden size,
            or more than :data:`MAX_PARAMETERS` parameters.
    """
    a = arch_of(config)
    head = head or "base"
    if head not in HEADS:
        raise UnsupportedArchitecture(f"Unknown head {head!r}.", "Heads: " + ", ".join(HEADS) + ".")
    if head not in ARCH_HEADS[a.model_type]:
        raise UnsupportedArchitecture(f"{a.model_type} has no {head} head in transformers.",
                                      f"{a.model_type} heads: " + ", ".join(ARCH_HEADS[a.model_type]) + ".")
    # Rough size first: the limits bound each number, this bounds their product.
    rough = a.vocab * a.embedding + max(a.layers, a.groups * a.inner) * (4 * a.hidden**2 + 2 * a.hidden * a.ffn)
    if rough > MAX_PARAMETERS:
        raise InvalidConfig(f"This configuration has about {rough:.2g} parameters, over the calculator's limit of 10^13.",
                            "The largest models trained so far are around 10^12; check for a typo.")
    mt = SAME_LAYOUT.get(a.model_type, a.model_type)
    if mt == "deberta-v2":
        tensors = _deberta(a, head)
    elif mt == "mpnet":
        tensors = _mpnet(a, head)
    elif mt == "modernbert":
        tensors = _modernbert(a, head)
    elif mt == "distilbert":
        tensors = _distilbert(a, head)
    elif mt == "xlnet":
        tensors = _xlnet(a, head)
    elif mt == "gpt2":
        tensors = _gpt2(a, head)
    else:
        tensors = _encoder(a)
        pooled = (head == "base" and mt != "electra") or (head == "pretraining" and mt in ("bert", "albert"))
        if pooled:
            tensors += _pooler(a)
        if head in ("masked-lm", "causal-lm") or (head == "pretraining" and mt != "electra"):
            name = {"bert": "cls.predictions.transform", "roberta": "lm_head", "albert": "predictions",
                    "electra": "generator_predictions"}[mt]
            tensors += _mlm_head(a, a.embedding, name)
        if head == "pretraining" and mt == "bert":
            tensors += _linear("head", "NSP head", "cls.seq_relationship", a.hidden, 2)
        if head == "pretraining" and mt == "albert":
            tensors += _linear("head", "SOP head", "sop_classifier.classifier", a.hidden, 2)
        if head == "pretraining" and mt == "electra":
            tensors += [*_linear("head", "discriminator head", "discriminator_predictions.dense", a.hidden, a.hidden),
                        *_linear("head", "discriminator head", "discriminator_predictions.dense_prediction", a.hidden, 1)]
    return Breakdown(a, head, tuple(tensors))


def count_parameters(config: Any, head: str | None = None) -> int:
    """Exact number of parameters of the transformers model for ``config`` with ``head`` (tied once)."""
    return parameter_breakdown(config, head).total


def albert_saving(config: Any) -> dict[str, int]:
    """What ALBERT's two ideas save against the same shape without them (base model, pooler included).

    Returns parameters of: ``bert_like`` (E = H, no sharing), ``factorized`` (E as given, no sharing),
    ``shared`` (E = H, layers shared as given), ``albert`` (both). Without factorisation there is no
    E→H projection either, as in BERT.
    """
    a = arch_of(config)
    if a.model_type != "albert":
        raise UnsupportedArchitecture("ALBERT's saving needs an ALBERT configuration.")
    unshared = {"groups": a.layers, "inner": 1}
    projection = a.hidden * a.hidden + a.hidden
    return {
        "bert_like": count_parameters(replace(a, embedding=a.hidden, **unshared)) - projection,
        "factorized": count_parameters(replace(a, **unshared)),
        "shared": count_parameters(replace(a, embedding=a.hidden)) - projection,
        "albert": count_parameters(a),
    }
