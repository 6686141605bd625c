"""BigBird's sparse attention explained: its building blocks drawn at a chosen length, and what it saves against full
attention from 512 to 16,384 tokens. One use case for every front end; no torch."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from analysis import sparse_attention as sa
from analysis import sparse_plots
from core.errors import InvalidConfig

#: The token figure's lengths (Figure 1's parameters: random 2, window 3, global 2) and the block figure's.
TOKEN_LENGTHS = (16, 32, 64, 128)
BLOCK_LENGTHS = (1024, 2048, 4096, 8192, 16_384)
SOURCE = ("Zaheer et al. 2020, BigBird, Figure 1 (random r = 2, window w = 3, global g = 2) and Table 8 (BigBird-ITC "
          "base: blocks of 64, 2 global blocks, a window of 3 blocks, 3 random blocks); the block layout is "
          "transformers' BigBirdBlockSparseAttention, drawn with its own random plan.")


@dataclass(frozen=True)
class SparseAttentionView:
    """The figures and the cost table of BigBird's sparse attention."""

    tokens: Any  # plotly Figure: Figure 1's building blocks at ``length`` tokens
    blocks: Any  # plotly Figure: transformers' block layout at ``block_length`` tokens (blocks of 64)
    costs: list[dict[str, Any]]  # one row per length: FLOPs and score memory per layer and head, full and sparse
    length: int
    block_length: int
    token_masks: dict[str, Any] = field(default_factory=dict)  # random, window, global and their union bigbird: (length, length) bool
    block_masks: dict[str, Any] = field(default_factory=dict)  # the same per block of 64: (blocks, blocks), one head

    def to_json(self) -> dict[str, Any]:
        """The masks as 0/1 rows (query by key), the cost table and the source: what the figures draw, for an API."""
        return {"length": self.length, "block_length": self.block_length, "block_size": sa.PAPER_BLOCK_SIZE,
                "token_masks": {k: v.astype(int).tolist() for k, v in self.token_masks.items()},
                "block_masks": {k: v.astype(int).tolist() for k, v in self.block_masks.items()},
                "costs": self.costs, "source": SOURCE}


def cost_rows(head_dim: int = 64) -> list[dict[str, Any]]:
    """Full against block-sparse attention (BigBird-ITC base) from 512 to 16,384 tokens, per layer and head, fp32."""
    return [{"tokens": c.length, "full: QKᵀ + AV GFLOPs": c.flops_full / 1e9, "sparse: GFLOPs": c.flops_sparse / 1e9,
             "full: scores MiB": c.bytes_full / 2**20, "sparse: scores MiB": c.bytes_sparse / 2**20,
             "sparse / full": c.ratio, "note": "transformers runs full attention here" if c.falls_back else ""}
            for c in sa.cost_table(head_dim=head_dim)]


def explain(length: int = 16, block_length: int = 2048, seed: int = 0) -> SparseAttentionView:
    """:class:`SparseAttentionView` for ``length`` tokens (one of :data:`TOKEN_LENGTHS`) and a block layout at
    ``block_length`` (one of :data:`BLOCK_LENGTHS`).

    The views are built once per process and shared (the calculator page draws this section on every rerun, and
    building its two figures was much of a rerun's CPU when a class changed the GPU at once: bench/results/README.md):
    draw them, do not
    change them (``ui.chart`` copies a figure before resizing it).

    Raises:
        InvalidConfig: a length not offered.
    """
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in (length, block_length)) \
            or length not in TOKEN_LENGTHS or block_length not in BLOCK_LENGTHS:
        raise InvalidConfig(f"Lengths {str(length)[:20]} and {str(block_length)[:20]} are not offered.",
                            f"Token figure: {', '.join(map(str, TOKEN_LENGTHS))}; block figure: "
                            f"{', '.join(map(str, BLOCK_LENGTHS))}.")
    if not isinstance(seed, int) or isinstance(seed, bool) or not 0 <= seed < 2**32:
        raise InvalidConfig(f"Seed {seed!r} is not a whole number from 0 to 2³²−1.")
    return _explain(int(length), int(block_length), seed)


@lru_cache(maxsize=4 * len(TOKEN_LENGTHS) * len(BLOCK_LENGTHS))
def _explain(length: int, block_length: int, seed: int) -> SparseAttentionView:
    tokens = sa.token_masks(length, **{"random": 2, "window": 3, "global_tokens": 2}, seed=seed)
    layout = sa.block_layout(block_length, sa.PAPER_BLOCK_SIZE, sa.PAPER_RANDOM_BLOCKS, seed=seed)
    blocks = {k: v[0] for k, v in layout.items()}  # (nb, nb): the first head
    nb = block_length // sa.PAPER_BLOCK_SIZE
    return SparseAttentionView(
        sparse_plots.building_blocks(tokens, "token", f"{length} tokens: random 2, window 3, global 2"),
        sparse_plots.building_blocks(blocks, "block", f"{block_length:,} tokens in {nb} blocks of 64: 3 random blocks, a "
                                                      "window of 3, 2 global (one head)"),
        cost_rows(), length, block_length, tokens, blocks)
