"""The parameter tensors of each family's layout: what :func:`analysis.params.parameter_breakdown` counts, one
function per layout (BERT's post-LN encoder and its heads, DistilBERT, XLNet, GPT-2, DeBERTa, MPNet, ModernBERT),
each a list of :class:`Tensor` records with the shapes transformers builds from the same configuration."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from analysis.architectures import ARCHITECTURES

#: Architectures whose tensors are laid out as another's (XLM-R is RoBERTa with another vocabulary).
SAME_LAYOUT: dict[str, str] = {mt: a.layout for mt, a in ARCHITECTURES.items() if a.layout != mt}


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


def tensors_of(a: Arch, head: str) -> list[Tensor]:
    """Every parameter tensor of architecture ``a`` with ``head`` (already checked), laid out as its family (or the
    one whose layout it shares, :data:`SAME_LAYOUT`) lays it out."""
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
    return tensors
