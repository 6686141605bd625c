"""bertviz's neuron view for one head: each token's query and key vectors and their scaled products, read by hooks on
the model's own projections, for the architectures whose attention is plain ``softmax(q·kᵀ/√d + mask)``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.architectures import ARCHITECTURES, PLAIN
from core.errors import AttentionUnavailable
from models.attention import clean_text, readable
from models.loader import ModelRef

#: Architectures whose attention is plain scaled dot-product softmax(q·kᵀ/√d + mask), so the query and key
#: vectors explain the weights. The others add terms q·k does not show: DeBERTa (content-to-position and
#: position-to-content), MPNet (a relative-position bias), XLNet (relative positions and segments),
#: ModernBERT (rotary positions turn q and k before the product).
PLAIN_ATTENTION = tuple(mt for mt, a in ARCHITECTURES.items() if a.attention == PLAIN)
NOT_PLAIN = {mt: a.attention for mt, a in ARCHITECTURES.items() if a.attention != PLAIN}


@dataclass(frozen=True)
class QueryKey:
    """bertviz's neuron view for one head: each token's query and key, and what they make."""

    model_id: str
    layer: int
    head: int
    tokens: tuple[str, ...]
    query: np.ndarray = field(repr=False)  # (T, d)
    key: np.ndarray = field(repr=False)  # (T, d)
    scores: np.ndarray = field(repr=False)  # (T, T): q·kᵀ/√d plus the mask (−inf where a token may not look)
    causal: bool = False

    def product(self, i: int) -> np.ndarray:
        """Query ``i`` times every key, elementwise (T, d): its row sums, scaled, are the scores of row ``i``."""
        return self.query[i][None, :] * self.key

    @property
    def probabilities(self) -> np.ndarray:
        """softmax of the scores: the head's attention."""
        s = self.scores - self.scores.max(axis=-1, keepdims=True)
        e = np.exp(s)
        return e / e.sum(axis=-1, keepdims=True)


def _projection_modules(net: Any, layer: int) -> tuple[Any, Any, int]:
    """The modules whose outputs are layer ``layer``'s queries and keys, and which call of them is that layer."""
    mt = net.config.model_type
    if mt in ("bert", "roberta", "xlm-roberta", "electra"):
        att = net.encoder.layer[layer].attention.self
        return att.query, att.key, 0
    if mt == "distilbert":
        att = net.transformer.layer[layer].attention
        return att.q_lin, att.k_lin, 0
    if mt == "albert":
        cfg = net.config
        group = int(layer / (cfg.num_hidden_layers / cfg.num_hidden_groups))
        first = next(i for i in range(cfg.num_hidden_layers) if int(i / (cfg.num_hidden_layers / cfg.num_hidden_groups)) == group)
        inner = net.encoder.albert_layer_groups[group].albert_layers
        if len(inner) != 1:
            raise AttentionUnavailable("The neuron view takes ALBERT models with one layer per group.")
        return inner[0].attention.query, inner[0].attention.key, layer - first
    if mt == "gpt2":
        c_attn = net.h[layer].attn.c_attn
        return c_attn, None, 0
    raise AttentionUnavailable(f"The neuron view needs plain scaled dot-product attention; {mt}'s is not: "
                               f"{NOT_PLAIN.get(mt, 'its attention is not implemented here')}.",
                               "Pick a BERT, RoBERTa, XLM-R, ELECTRA, ALBERT, DistilBERT or GPT-2 model.")


def query_key(model: ModelRef, text: str, layer: int, head: int) -> QueryKey:
    """The query and key vectors of one head, their scaled scores, read with forward hooks on the model's
    own projections (so they are the numbers the model used). ``probabilities`` reproduces the head's attention.

    Raises:
        AttentionUnavailable: an architecture whose attention is not plain q·k (see :data:`NOT_PLAIN`).
        InvalidText: empty text; AttentionUnavailable: a layer or head out of range.
    """
    import torch

    from models.loader import as_loaded

    lm = as_loaded(model, attentions=True)
    net, tok, dev = lm
    cfg = net.config
    n_layers = cfg.num_hidden_layers
    n_heads = cfg.num_attention_heads
    if not (0 <= layer < n_layers and 0 <= head < n_heads):
        raise AttentionUnavailable(f"{lm.model_id} has layers 0–{n_layers - 1} and heads 0–{n_heads - 1}.")
    q_mod, k_mod, call = _projection_modules(net, layer)
    text, _ = clean_text(text)
    enc = tok(text, truncation=True, max_length=lm.max_tokens, return_tensors="pt").to(dev)
    seen: dict[str, list[torch.Tensor]] = {"q": [], "k": []}
    hooks = [q_mod.register_forward_hook(lambda m, i, o: seen["q"].append(o.detach()))]
    if k_mod is not None:
        hooks.append(k_mod.register_forward_hook(lambda m, i, o: seen["k"].append(o.detach())))
    try:
        with torch.inference_mode():
            net(**enc)
    finally:
        for h in hooks:
            h.remove()
    hidden = cfg.hidden_size
    d = hidden // n_heads
    if k_mod is None:  # GPT-2: one projection gives q, k and v
        q_all, k_all = seen["q"][call][0, :, :hidden], seen["q"][call][0, :, hidden:2 * hidden]
    else:
        q_all, k_all = seen["q"][call][0], seen["k"][call][0]
    q = q_all[:, head * d:(head + 1) * d].float().cpu().numpy()
    k = k_all[:, head * d:(head + 1) * d].float().cpu().numpy()
    scores = (q @ k.T) / np.sqrt(d)
    causal = cfg.model_type == "gpt2"
    if causal:
        scores = np.where(np.tril(np.ones_like(scores, dtype=bool)), scores, -np.inf)
    tokens = tuple(readable(x) for x in tok.convert_ids_to_tokens(enc["input_ids"][0].tolist()))
    return QueryKey(lm.model_id, layer, head, tokens, q, k, scores, causal)
