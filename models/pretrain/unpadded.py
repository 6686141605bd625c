"""BERT's encoder run on the real tokens only, for the training loop: the same modules and weights, the same loss
and the same random draws as transformers' padded forward; the lab's default step runs faster (``bench/mfu.py``,
bench/results/README.md).

A batch is padded to its longest text; WordNet's glosses are short, so at the lab's default size (batch 64,
sequence 64) about 60% of the positions are padding, and every linear layer, layer norm, GELU and dropout of the
padded forward spends that share of its work on rows that nothing reads. Here those layers run on the (N, h) rows
of the real tokens (N = the attention mask's sum); only the attention product, which needs a square per text,
runs on the padded (B, heads, W, W) layout: q, k and v are scattered into it (padding as zeros: a padded key is
masked, so it gets weight 0, as in the padded forward) and the result is gathered back. This is "unpadding" as in
MosaicBERT and transformers' variable-length flash-attention path, in plain torch ops so that it runs on a CPU.

The same loss, within float rounding: a linear layer, a layer norm or a GELU treats each row on its own, a masked
key gets exactly zero weight, and a padded row's output reaches neither the loss nor any weight's gradient.

The same random draws, so that a seed gives the same curve as transformers' forward: on a CPU, ``F.dropout`` draws
``bernoulli_(1 - p)`` on a tensor of its input's (padded) shape. Each dropout here draws on that shape, in the
padded forward's order, and keeps the real rows. Without MKL's kernel (an AMD CPU) ``bernoulli_`` takes one float64
uniform per element from the generator and compares it with ``1 - p``; ``torch.rand(..., dtype=float64) < 1 - p``
makes the same draws faster (bench/results/README.md), and :func:`_kept` uses it where a check at first use finds
the two equal (on an Intel CPU with MKL ``bernoulli_`` draws differently, and fast: it is used as it is). On a GPU
the fused dropout kernel draws its own stream anyway: there the real rows alone are drawn, and attention is
transformers'.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import torch
import torch.nn.functional as F


def supports(bert: Any) -> bool:
    """Whether :func:`encode` can run this transformers ``BertModel``: an encoder with absolute positions, no
    cross-attention, no chunked feed-forward (what the lab builds)."""
    c = getattr(bert, "config", None)
    return (c is not None and getattr(c, "model_type", "") == "bert" and not c.is_decoder
            and not getattr(c, "add_cross_attention", False) and not getattr(c, "chunk_size_feed_forward", 0)
            and getattr(c, "position_embedding_type", "absolute") == "absolute")


@cache
def _uniform_draws_bernoulli() -> bool:
    """Whether ``bernoulli_(q)`` here equals ``rand(float64) < q``, the same number of draws included."""
    a, b = torch.Generator().manual_seed(12345), torch.Generator().manual_seed(12345)
    drawn = torch.empty(4099).bernoulli_(0.9, generator=a)
    return bool(torch.equal(drawn, (torch.rand(4099, dtype=torch.float64, generator=b) < 0.9).float())
                and torch.equal(a.get_state(), b.get_state()))


def _kept(shape: tuple[int, ...], p: float) -> torch.Tensor:
    """Which elements CPU dropout keeps, as a bool tensor of ``shape``: the same draws, from the same generator, as
    aten's ``empty(shape).bernoulli_(1 - p)``."""
    if _uniform_draws_bernoulli():
        return torch.rand(shape, dtype=torch.float64) < 1 - p
    return torch.empty(shape).bernoulli_(1 - p).bool()


class Unpadded:
    """The real tokens of a right-padded batch: ``rows`` (N,), their flat indices into the B·W positions."""

    def __init__(self, attention_mask: torch.Tensor) -> None:
        self.batch, self.width = attention_mask.shape
        self.rows = attention_mask.reshape(-1).nonzero().squeeze(1)  # (N,)

    def gather(self, padded: torch.Tensor) -> torch.Tensor:
        """(B, W, ...) -> (N, ...)"""
        return padded.reshape(self.batch * self.width, *padded.shape[2:]).index_select(0, self.rows)

    def scatter(self, real: torch.Tensor) -> torch.Tensor:
        """(N, d) -> (B, W, d), zeros at the padding."""
        out = real.new_zeros(self.batch * self.width, real.shape[-1])
        return out.index_copy(0, self.rows, real).view(self.batch, self.width, -1)

    def dropout(self, x: torch.Tensor, p: float, training: bool) -> torch.Tensor:
        """``F.dropout`` of the padded tensor, at the real rows: x (N, d) -> (N, d)."""
        if not training or p == 0:
            return x
        if x.device.type != "cpu":
            return F.dropout(x, p, True)
        # aten's CPU dropout: input * (bernoulli draws / (1 - p)), the draws on the padded shape
        kept = _kept((self.batch * self.width, x.shape[-1]), p).index_select(0, self.rows)  # (N, d)
        return x * kept.to(x.dtype).div_(1 - p)


def _attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, attention_mask: torch.Tensor, scaling: float,
               p: float) -> torch.Tensor:
    """transformers' eager attention with dropout ``p``, written out so that its dropout draws as
    :meth:`Unpadded.dropout` does: q, k, v (B, nh, W, hs), attention_mask (B, W) -> (B, W, nh, hs)."""
    bias = torch.zeros(attention_mask.shape, dtype=q.dtype).masked_fill_(attention_mask == 0, torch.finfo(q.dtype).min)
    scores = torch.matmul(q, k.transpose(2, 3)) * scaling + bias[:, None, None, :]  # (B, nh, W, W)
    weights = F.softmax(scores, dim=-1)
    weights = weights * _kept(weights.shape, p).to(weights.dtype).div_(1 - p)
    return torch.matmul(weights, v).transpose(1, 2)


def encode(bert: Any, input_ids: torch.Tensor, attention_mask: torch.Tensor,
           token_type_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, Unpadded]:
    """The last hidden states of the real tokens, (N, h) in row-major order (the padded forward's ``hidden`` at
    ``rows``), and the :class:`Unpadded` that maps them back. ``bert`` is a transformers ``BertModel``."""
    from transformers.masking_utils import create_bidirectional_mask
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    from transformers.models.bert.modeling_bert import eager_attention_forward

    u = Unpadded(attention_mask)
    B, W = u.batch, u.width
    emb, config = bert.embeddings, bert.config
    ids = input_ids.reshape(-1)[u.rows]  # (N,)
    types = token_type_ids.reshape(-1)[u.rows] if token_type_ids is not None else torch.zeros_like(ids)
    x = emb.word_embeddings(ids) + emb.token_type_embeddings(types)  # (N, h), summed in BertEmbeddings' order
    x = x + emb.position_embeddings(u.rows % W)
    x = u.dropout(emb.LayerNorm(x), emb.dropout.p, emb.training)
    h = x.shape[-1]
    mask = None
    for layer in bert.encoder.layer:
        sa, so = layer.attention.self, layer.attention.output
        heads = (B, W, -1, sa.attention_head_size)
        q, k, v = (u.scatter(lin(x)).view(heads).transpose(1, 2) for lin in (sa.query, sa.key, sa.value))  # (B, nh, W, hs)
        p = sa.dropout.p if sa.training else 0.0
        if p and q.device.type == "cpu":
            a = _attention(q, k, v, attention_mask, sa.scaling, p)  # (B, W, nh, hs)
        else:  # transformers' attention (SDPA's fused kernels on a GPU)
            if mask is None:
                mask = create_bidirectional_mask(config=config, inputs_embeds=x.new_empty(B, W, h), attention_mask=attention_mask)
            attend = ALL_ATTENTION_FUNCTIONS.get_interface(config._attn_implementation, eager_attention_forward)
            a, _ = attend(sa, q, k, v, mask, dropout=p, scaling=sa.scaling)
        a = u.gather(a.reshape(B, W, h))  # (N, h)
        x = so.LayerNorm(u.dropout(so.dense(a), so.dropout.p, so.training) + x)
        out = layer.output
        x = out.LayerNorm(u.dropout(out.dense(layer.intermediate(x)), out.dropout.p, out.training) + x)
    return x, u
