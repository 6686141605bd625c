"""The lab's BigBird arm: the lab's masked-LM BERT with its self-attention restricted to BigBird's block-sparse
pattern by an additive attention mask, and the packed long sequences it trains on.

Why a mask on the lab's BERT rather than transformers' ``BigBirdForMaskedLM`` with ``attention_type="block_sparse"``:
at the lab's sizes on a CPU BigBird's block-sparse step was slower than the same class with ``original_full`` and
than the lab's BERT with the sparse mask (the figures: bench/results/README.md): the block-sparse kernel's
gathers cost more than the attention it saves at these lengths on a CPU. A mask also keeps the full arm exactly the
lab's BERT (the same class, loss path and random draws), so the two arms differ in the attention pattern alone.
What the mask does not give is the saving: the scores are computed densely and the masked ones thrown away, so the
arm learns what BigBird's pattern allows while the CPU spends full attention's work. The pattern's cost is counted
by :func:`analysis.sparse_attention.attention_cost`.

The pattern is transformers' layout (:func:`analysis.sparse_attention.block_layout`): each head its own random
blocks, drawn again for every batch from the run's seed (so a run repeats), the same for every layer and every row of
the batch, and kept when the held-out loss is measured. That differs from transformers' own training: its
``BigBirdLayer`` reseeds numpy with the layer's index on each training forward, so its random blocks are fixed across
batches and differ per layer, and it uses none in eval mode. The lab's redraw exposes each head to more of the
sequence over a run; a per-layer pattern would need a mask per layer.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig


def packed(texts: list[str], tok: Any, seq_len: int) -> list[dict[str, list[int]]]:
    """The texts' tokens end to end, cut into examples of exactly ``seq_len`` tokens ([CLS] + seq_len − 2 + [SEP];
    the remainder dropped), as RoBERTa's FULL-SENTENCES packs documents. Raises InvalidConfig when the texts do not
    fill one example."""
    ids = [i for row in tok(texts, add_special_tokens=False)["input_ids"] for i in row]
    body = seq_len - 2
    if len(ids) < body:
        raise InvalidConfig(f"The texts hold {len(ids):,} tokens, too few for one packed sequence of {seq_len}.",
                            "Use a shorter sequence or more text.")
    return [{"input_ids": [tok.cls_token_id, *ids[s: s + body], tok.sep_token_id], "token_type_ids": [0] * seq_len,
             "attention_mask": [1] * seq_len} for s in range(0, len(ids) - body + 1, body)]


class SparsePattern:
    """BigBird's pattern for a run's batches: one draw of random blocks per batch from the run's seed."""

    def __init__(self, config: TrainConfig) -> None:
        self.c = config
        self.rng = np.random.RandomState(config.seed)

    def draw(self, batch: int) -> torch.Tensor:
        """Which keys each query may attend: (batch, heads, seq_len, seq_len) bool, every row of the batch alike."""
        from analysis.sparse_attention import block_layout, to_tokens

        c = self.c
        seed = int(self.rng.randint(2**31 - 1))
        blocks = block_layout(c.seq_len, c.block_size, c.random_blocks, c.heads, seed=seed)["bigbird"]  # (H, nb, nb)
        mask = torch.from_numpy(to_tokens(blocks, c.block_size))  # (H, W, W)
        return mask.unsqueeze(0).expand(batch, *mask.shape)  # (B, H, W, W)


def attention_bias(sparse_mask: torch.Tensor, attention_mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """The additive mask BertModel takes as is (a 4-D mask): 0 where a query may attend a real key, the dtype's
    minimum elsewhere. sparse_mask (B, H, W, W) bool, attention_mask (B, W) -> (B, H, W, W)."""
    allowed = sparse_mask & attention_mask.bool()[:, None, None, :]
    return torch.zeros(allowed.shape, dtype=dtype, device=allowed.device).masked_fill_(~allowed, torch.finfo(dtype).min)


def masked_lm_loss(model: torch.nn.Module, batch: dict[str, Any], masked: torch.Tensor) -> torch.Tensor:
    """The masked LM's loss with sparse attention: transformers' padded BertModel forward with the pattern as its
    attention mask, the output layer at the masked positions only (as the full arm's loss path). ``model``: a
    BertForMaskedLM.

    Raises:
        InvalidConfig: a batch split over several processes (the sparse arm trains in one).
    """
    if "global_masked" in batch or not hasattr(model, "bert"):
        raise InvalidConfig("BigBird's sparse arm trains in one process.")
    bias = attention_bias(batch["sparse_mask"], batch["attention_mask"], model.bert.embeddings.word_embeddings.weight.dtype)
    hidden = model.bert(input_ids=batch["input_ids"], attention_mask=bias).last_hidden_state  # (B, W, h)
    logits = model.cls(hidden[masked])  # (masked, vocab)
    return torch.nn.functional.cross_entropy(logits.float(), batch["labels"][masked])
