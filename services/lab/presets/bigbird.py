"""BigBird's sparse attention (random + window + global blocks) against full attention (Zaheer et al. 2020)."""

from __future__ import annotations

from dataclasses import replace

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.presets.base import Preset, budgets

BLOCKS = 32  # the sparse arm cuts a sequence into 32 blocks: each query then scores about 7/32 of the keys
RANDOM_BLOCKS = 2


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """The lab's masked LM on packed sequences of the base's length, at equal steps; the sparse arm with 32 blocks of
    seq_len/32 tokens and 2 random blocks (BigBird-ITC's layout: 2 global blocks, a window of 3,
    :mod:`models.pretrain.sparse`)."""
    full = replace(base, objective="mlm", pack=True, attention="full")
    sparse = replace(full, attention="bigbird", block_size=max(1, base.seq_len // BLOCKS), random_blocks=RANDOM_BLOCKS)
    return [("sparse", sparse), ("full", full)]


def attention_saved(config: TrainConfig) -> str:
    """The attention cost a sparse arm saves, in words: its pattern's score FLOPs and memory over full attention's
    at its length, per layer and head (:func:`analysis.sparse_attention.attention_cost`)."""
    from analysis.sparse_attention import attention_cost

    cost = attention_cost(config.seq_len, config.hidden // config.heads, config.block_size, config.random_blocks)
    return (f"At {config.seq_len} tokens (blocks of {config.block_size}, {config.random_blocks} random) the sparse pattern "
            f"scores {cost.ratio:.0%} of full attention's pairs: {cost.flops_sparse:.3g} against {cost.flops_full:.3g} "
            f"FLOPs for QKᵀ and AV and {cost.bytes_sparse / 2**10:,.0f} against {cost.bytes_full / 2**10:,.0f} KiB of "
            "fp32 scores per layer and head.")


# Lower is better: sparse's held-out loss at most full's + 0.05 nats, a perplexity within 5% (e^0.05 = 1.051) of full
# attention's; the paper's "matches" is a few points of MLM accuracy at 512 tokens (Table 1).
PRESET = Preset(
    "bigbird", "BigBird: sparse vs full attention",
    "Zaheer et al. 2020, BigBird, Table 1 (building blocks at 512 tokens: random + window close to BERT-base's MLM) and "
    "Figure 1 (the pattern)",
    "Random, window and global attention together match full attention's masked-LM loss while each query scores a fixed "
    "number of keys: attention's cost grows linearly with the length, not quadratically. Here, at 32 blocks, the sparse "
    "arm scores 27% of the (query, key) pairs: 0.27 × full attention's QKᵀ/AV FLOPs and score memory at 256 and 512 "
    "tokens (analysis.sparse_attention.attention_cost), though the CPU computes them densely under a mask.",
    runs,
    claims=(ArmClaim("sparse", "held_out_loss", "Sparse attention (random + window + global) matches full attention's "
                     "masked-LM loss at a fraction of the attention cost.",
                     "Zaheer et al. 2020, BigBird, Table 1 (building blocks at 512 tokens) and Figure 1 (the pattern)",
                     "sparse", "full", ">=", 0.05),),
    # Long packed sequences: every step costs 4–8 × a default step's tokens, so fewer steps and a small batch.
    budgets=budgets("bigbird", {"seeds": 2, "steps": 120, "batch": 8, "seq_len": 256, "downstream": None},
                    {"seeds": 5, "steps": 500, "batch": 8, "seq_len": 512, "downstream": None}))
