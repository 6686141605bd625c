"""BigBird's sparse attention: the masks against transformers' own block-sparse attention, the costs against a hand
count, the lab's sparse arm against the lab's BERT, and the preset."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import sparse_attention as sa
from core.errors import InvalidConfig


def _transformers_probs(n: int, block: int, r: int, heads: int, seed: int, max_positions: int) -> np.ndarray:
    """Which (query, key) pairs transformers' BigBirdBlockSparseAttention gives a weight, in training (its random
    blocks drawn after np.random.seed(seed)): (heads, n, n) bool."""
    import torch
    from transformers import BigBirdConfig
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention, BigBirdModel

    cfg = BigBirdConfig(hidden_size=8 * heads, num_attention_heads=heads, block_size=block, num_random_blocks=r,
                        max_position_embeddings=max_positions)
    attention = BigBirdBlockSparseAttention(cfg, seed=seed).train()
    mask = torch.ones(1, n)
    blocked, band, from_mask, to_mask = BigBirdModel.create_masks_for_block_sparse_attn(mask, block)
    with torch.no_grad():
        _, probs = attention(torch.randn(1, n, 8 * heads), band_mask=band, from_mask=from_mask, to_mask=to_mask,
                             from_blocked_mask=blocked, to_blocked_mask=blocked)
    return (probs[0] != 0).numpy()


@pytest.mark.parametrize(("n", "block", "r", "heads", "max_positions"),
                         [(256, 16, 2, 2, 512), (192, 16, 1, 1, 512), (1024, 64, 3, 2, 4096)])
def test_block_layout_is_transformers_block_sparse_attention(n, block, r, heads, max_positions):
    """Every pair transformers scores, and no other, for each head: the global, window and random blocks (the last
    with the same seed through the port of its random plan; 1,024 takes the paper's old plan)."""
    for seed in (3, 11):
        layout = sa.block_layout(n, block, r, heads, seed=seed, max_positions=max_positions)
        mine = sa.to_tokens(layout["bigbird"], block)  # (heads, n, n)
        assert np.array_equal(mine, _transformers_probs(n, block, r, heads, seed, max_positions))
        computed = heads * sa.sparse_pairs(n, block, r)  # the hand count of the pairs transformers computes
        if n in (1024, 3072, 4096):  # the paper's old plan may draw a window block as a random one: computed twice
            assert computed - heads * block * block * r <= int(mine.sum()) <= computed
        else:
            assert int(mine.sum()) == computed  # no block counted twice
    other = sa.block_layout(n, block, r, heads, seed=4, max_positions=max_positions)["random"]
    assert not np.array_equal(other, sa.block_layout(n, block, r, heads, seed=3, max_positions=max_positions)["random"])


def test_random_blocks_equal_transformers_draws():
    from transformers import BigBirdConfig
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention

    n, block, r, heads = 512, 32, 3, 2
    attention = BigBirdBlockSparseAttention(BigBirdConfig(hidden_size=16, num_attention_heads=heads, block_size=block,
                                                          num_random_blocks=r)).train()
    np.random.seed(5)
    plan, counts = attention._get_rand_attn_plan(n, block, r)
    theirs = np.stack(attention._bigbird_block_rand_mask_with_head(n, n, block, block, heads, plan, counts))
    assert np.array_equal(sa.random_blocks(n, block, r, heads, seed=5), theirs)
    assert np.array_equal(sa.random_blocks(n, block, r, heads, seed=None), np.zeros_like(theirs))  # eval: none


def test_token_masks_are_figure_1():
    """The slide's Figure 1: r random keys per query, a band of width w, g global rows and columns, and the union."""
    n = 16
    m = sa.token_masks(n, **{"random": 2, "window": 3, "global_tokens": 2}, seed=1)
    assert (m["random"].sum(axis=1) == 2).all()
    assert (m["window"].sum(axis=1) == [2, *[3] * (n - 2), 2]).all() and m["window"][5, 4:7].all()
    assert m["global"][:2].all() and m["global"][:, :2].all() and not m["global"][2:, 2:].any()
    assert np.array_equal(m["bigbird"], m["random"] | m["window"] | m["global"])
    assert not np.array_equal(m["random"], sa.token_masks(n, seed=2)["random"])


def test_costs_against_a_hand_count():
    """4,096 tokens, blocks of 64, 3 random blocks, head size 64: 64 blocks; 2 global query blocks × 64 rows ×
    4,096 keys, 2 × 64 × 64 × 7 for the second and second-to-last, 60 × 64 × 64 × 8 for the rest."""
    c = sa.attention_cost(4096, 64, 64, 3)
    pairs = 2 * 64 * 4096 + 2 * 64 * 64 * 7 + 60 * 64 * 64 * 8
    assert c.pairs_sparse == pairs and c.pairs_full == 4096 ** 2
    assert c.flops_full == 4 * 64 * 4096 ** 2 and c.flops_sparse == 4 * 64 * pairs  # QKᵀ and AV: 2 × 2·d per pair
    assert c.bytes_full == 4 * 4096 ** 2 == 64 * 2 ** 20
    assert c.ratio == pytest.approx(pairs / 4096 ** 2)
    table = sa.cost_table()
    assert [t.length for t in table] == [512, 1024, 2048, 4096, 8192, 16_384]
    ratios = [t.ratio for t in table]
    assert table[0].falls_back and ratios[0] == 1  # 512 ≤ (5 + 2·3) × 64: transformers runs full attention
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < 0.05  # linear against quadratic
    assert sa.attention_cost(16_384).pairs_sparse == 2 * 64 * 16_384 + 2 * 64 * 64 * 7 + 252 * 64 * 64 * 8


@pytest.mark.parametrize(("n", "block", "r"), [(100, 16, 2), (176, 16, 3), (32_768, 64, 3), (512, 0, 3), (512, 16, -1)])
def test_settings_block_sparse_attention_cannot_run_are_refused(n, block, r):
    with pytest.raises(InvalidConfig):
        sa.block_layout(n, block, r)


def test_token_masks_are_bounded():
    with pytest.raises(InvalidConfig):
        sa.token_masks(sa.MAX_MASK_LENGTH + 1)
    with pytest.raises(InvalidConfig):
        sa.token_masks(16, random=17)
    with pytest.raises(InvalidConfig):
        sa.to_tokens(np.zeros((1, 128, 128), dtype=bool), 64)
