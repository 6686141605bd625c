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

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from analysis.architectures import ARCHITECTURES
from analysis.param_layouts import Arch, Tensor, tensors_of
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
    return Breakdown(a, head, tuple(tensors_of(a, head)))



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
