"""BigBird's sparse attention as masks and costs, without torch (Zaheer et al. 2020, *Big Bird: Transformers for
Longer Sequences*).

Two levels:

- **Tokens** (the paper's Figure 1, the lecture slide): :func:`token_masks` gives the three building blocks for a
  sequence of ``n`` tokens — *random* (each query attends ``r`` random keys), *sliding window* (each query attends
  the ``w`` keys centred on it), *global* (``g`` tokens attend everywhere and are attended by every query) — and
  their union, BigBird.
- **Blocks** (what transformers' ``BigBirdBlockSparseAttention`` computes, BigBird-ITC): the sequence is cut into
  blocks of ``block_size``; the first and last blocks are global, each other query block attends its 3 neighbouring
  blocks (the window) and ``random_blocks`` random blocks. :func:`block_layout` reproduces transformers' layout
  block for block, its random blocks drawn by a numpy port of transformers' own ``_bigbird_block_rand_mask*`` with
  the same ``np.random`` calls in the same order, so one seed gives the same blocks (tested against transformers).

Why a port rather than transformers' functions: they are methods of a ``torch.nn.Module``, and this module is read
by pages that must not import torch.

Costs (:func:`attention_cost`): the scores QKᵀ and the weighted sum AV per layer and head, full against block
sparse, counted from the layout (2 FLOPs per multiply-add) and the memory of the score matrix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from core.errors import InvalidConfig

#: Longest sequence the block layout and the costs accept (BigBird's longest pre-training length is 4,096;
#: 16,384 is where the lecture's cost table ends). A (n, n) token mask is only built up to MAX_MASK_LENGTH
#: (16 MB of booleans), the figure's use.
MAX_LENGTH = 16_384
MAX_MASK_LENGTH = 4_096
MAX_BLOCK_SIZE = 512
MAX_RANDOM_BLOCKS = 16
MAX_HEADS = 64
#: The paper's Figure 1 (the slide): random r = 2, window w = 3, global g = 2.
FIGURE_1 = {"random": 2, "window": 3, "global": 2}
#: BigBird-ITC base's block-sparse setting: block 64, 2 global blocks, a window of 3 blocks, 3 random blocks
#: (Zaheer et al. 2020, Appendix E, Table 8, MLM hyperparameters; transformers' google/bigbird-roberta-base config).
PAPER_BLOCK_SIZE = 64
PAPER_RANDOM_BLOCKS = 3
#: transformers' sequence lengths that take the paper's old random plan (``_bigbird_block_rand_mask``).
_OLD_PLAN_LENGTHS = (1024, 3072, 4096)


def _check_int(name: str, value: int, low: int, high: int) -> None:
    if not (type(value) is int and low <= value <= high):  # not isinstance: True is an int
        raise InvalidConfig(f"{name} must be a whole number from {low:,} to {high:,}, not {value!r}.")


def token_masks(n: int, random: int = 2, window: int = 3, global_tokens: int = 2, seed: int = 0) -> dict[str, np.ndarray]:
    """The three building blocks and their union for ``n`` tokens, each a (n, n) bool array (row: query, column: key).

    ``random``: keys drawn uniformly per query (without replacement, from all n); ``window``: the ``window`` keys
    centred on the query (an odd width; an even one reaches one further right); ``global_tokens``: the first
    ``global_tokens`` tokens attend every key and every query attends them. Keys: ``random``, ``window``, ``global``,
    ``bigbird`` (the union).

    Raises:
        InvalidConfig: n out of 1–4,096, or a parameter out of 0–n.
    """
    _check_int("The length", n, 1, MAX_MASK_LENGTH)
    for name, value in (("Random keys", random), ("The window", window), ("Global tokens", global_tokens)):
        _check_int(name, value, 0, n)
    rng = np.random.default_rng(seed)
    rand = np.zeros((n, n), dtype=bool)
    if random:
        keys = np.argsort(rng.random((n, n)), axis=1)[:, :random]  # (n, r): r distinct keys per query
        rand[np.arange(n)[:, None], keys] = True
    offset = np.arange(n)[None, :] - np.arange(n)[:, None]  # (n, n): key − query
    left = (window - 1) // 2
    slide = (offset >= -left) & (offset <= window - 1 - left) if window else np.zeros((n, n), dtype=bool)
    glob = np.zeros((n, n), dtype=bool)
    glob[:global_tokens, :] = True
    glob[:, :global_tokens] = True
    return {"random": rand, "window": slide, "global": glob, "bigbird": rand | slide | glob}


def check_block_setting(n: int, block_size: int, random_blocks: int) -> int:
    """The number of blocks of a block-sparse setting; raises InvalidConfig where transformers' block-sparse
    attention would not run it (``n`` not a multiple of ``block_size``, or too short: transformers falls back to full
    attention up to (5 + 2r) blocks)."""
    _check_int("The length", n, 1, MAX_LENGTH)
    _check_int("The block size", block_size, 1, MAX_BLOCK_SIZE)
    _check_int("Random blocks", random_blocks, 0, MAX_RANDOM_BLOCKS)
    if n % block_size:
        raise InvalidConfig(f"The length {n:,} is not a multiple of the block size {block_size}.",
                            "transformers pads to a multiple of the block size; pick such a length.")
    if n <= (5 + 2 * random_blocks) * block_size:
        raise InvalidConfig(f"{n:,} tokens are too few for block-sparse attention with blocks of {block_size} and "
                            f"{random_blocks} random blocks: transformers uses full attention up to "
                            f"(5 + 2·{random_blocks}) × {block_size} = {(5 + 2 * random_blocks) * block_size:,} tokens.",
                            "Use a longer sequence, smaller blocks or fewer random blocks.")
    return n // block_size


def _rand_plan(n: int, block_size: int, r: int) -> tuple[list[int], list[int]]:
    """transformers' ``_get_rand_attn_plan``: where the random blocks may be drawn from."""
    if (2 * r + 5) < (n // block_size):
        return [int((2 * r + 5) * block_size), n], [r, 0]
    if (r + 5) < (n // block_size):
        return [int((r + 5) * block_size), n], [r // 2, r - (r // 2)]
    return [n], [r]


def _old_plan(rng: np.random.RandomState, n: int, block_size: int, r: int, last_idx: int) -> np.ndarray:
    """transformers' ``_bigbird_block_rand_mask`` (its quirks kept: the paper's plan for 1,024 / 3,072 / 4,096)."""
    nb = n // block_size
    rand = np.zeros((nb - 2, r), dtype=np.int32)
    middle = np.arange(1, nb - 1, dtype=np.int32)
    last = nb - 1
    if last_idx > 2 * block_size:
        last = last_idx // block_size - 1
    for i in range(1, nb - 1):
        start, end = i - 2, i
        if i == 1:
            rand[i - 1] = rng.permutation(middle[2:last])[:r]
        elif i == 2:
            rand[i - 1] = rng.permutation(middle[3:last])[:r]
        elif i in (nb - 3, nb - 2) or start > last:
            rand[i - 1] = rng.permutation(middle[:last])[:r]
        elif end + 1 == last:
            rand[i - 1] = rng.permutation(middle[:start])[:r]
        else:
            rand[i - 1] = rng.permutation(np.concatenate((middle[:start], middle[end + 1: last])))[:r]
    return rand


def _row(rng: np.random.RandomState, block: int, start: int, end: int, r: int) -> np.ndarray:
    """transformers' ``_get_single_block_row_attention`` (window 1 + 1 blocks, one global block each side)."""
    perm = rng.permutation(np.arange(start, end, dtype=np.int32))
    illegal = [*range(block - 1, block + 2), 0, end - 1]
    if block == 1:
        illegal.append(end - 2)
    if block == end - 2:
        illegal.append(1)
    chosen = [b for b in perm if b not in illegal][:r]
    return np.array(chosen, dtype=np.int32)


def _with_head(rng: np.random.RandomState, n: int, block_size: int, heads: int, plan: list[int],
               counts: list[int]) -> list[np.ndarray]:
    """transformers' ``_bigbird_block_rand_mask_with_head`` (training mode), the same draws in the same order."""
    nb = n // block_size
    lengths = np.array(plan) // block_size
    top = plan.index(n)
    rand = [np.zeros((nb, int(np.sum(counts[: top + 1]))), dtype=np.int32) for _ in range(heads)]
    for p in range(top + 1):
        lo = 0
        if p > 0:
            if counts[p] > 0:
                lo, hi = int(np.sum(counts[:p])), int(np.sum(counts[: p + 1]))
                for row in range(1, lengths[p - 1]):
                    for h in range(heads):
                        rand[h][row, lo:hi] = _row(rng, row, lengths[p - 1], lengths[p], counts[p])
            for q in range(p):
                if counts[q] == 0:
                    continue
                for row in range(lengths[p - 1], lengths[p]):
                    lo, start = (int(np.sum(counts[:q])), lengths[q - 1]) if q > 0 else (0, 0)
                    hi = int(np.sum(counts[: q + 1]))
                    for h in range(heads):
                        rand[h][row, lo:hi] = _row(rng, row, start, lengths[q], counts[q])
        if counts[p] == 0:
            continue
        hi = int(np.sum(counts[: p + 1]))
        first, start = (1, 0) if p == 0 else (lengths[p - 1], lengths[p - 1])
        if p > 0:
            lo = int(np.sum(counts[:p]))
        for row in range(first, lengths[p]):
            for h in range(heads):
                rand[h][row, lo:hi] = _row(rng, row, start, lengths[p], counts[p])
    return [x[1: nb - 1] for x in rand]


def random_blocks(n: int, block_size: int, random_blocks: int, heads: int = 1, seed: int | None = 0,
                  max_positions: int = 4096) -> np.ndarray:
    """The random key blocks of each middle query block, (heads, n/block_size − 2, random_blocks) block indices, as
    transformers draws them in training after ``np.random.seed(seed)`` (``max_positions``: the model's
    ``max_position_embeddings``, read by its plan for 1,024, 3,072 and 4,096 tokens). ``seed=None``: transformers in
    eval mode, where every random block is block 0 (already global).

    Raises:
        InvalidConfig: see :func:`check_block_setting`; heads out of 1–64.
    """
    nb = check_block_setting(n, block_size, random_blocks)
    _check_int("Heads", heads, 1, MAX_HEADS)
    if seed is None:
        return np.zeros((heads, nb - 2, random_blocks), dtype=np.int32)
    rng = np.random.RandomState(seed)  # the legacy generator np.random.seed seeds: the same draws
    if n in _OLD_PLAN_LENGTHS:
        _check_int("max_positions", max_positions, n, MAX_LENGTH)
        return np.stack([_old_plan(rng, max_positions, block_size, random_blocks, 1024)[: nb - 2] for _ in range(heads)])
    plan, counts = _rand_plan(n, block_size, random_blocks)
    return np.stack(_with_head(rng, n, block_size, heads, plan, counts))


def block_layout(n: int, block_size: int, random_blocks_: int, heads: int = 1, seed: int | None = 0,
                 max_positions: int = 4096) -> dict[str, np.ndarray]:
    """transformers' BigBird-ITC block layout for ``n`` tokens, each part a (heads, nb, nb) bool array over blocks
    (nb = n / block_size; row: query block, column: key block): ``global`` (the first and last blocks attend every
    block, every block attends them), ``window`` (the 3 blocks centred on each), ``random`` (:func:`random_blocks`)
    and ``bigbird``, their union: what ``BigBirdBlockSparseAttention`` computes.

    Raises:
        InvalidConfig: see :func:`random_blocks`.
    """
    rand_idx = random_blocks(n, block_size, random_blocks_, heads, seed, max_positions)  # (heads, nb-2, r)
    nb = n // block_size
    offset = np.arange(nb)[None, :] - np.arange(nb)[:, None]
    window = np.broadcast_to(np.abs(offset) <= 1, (heads, nb, nb)).copy()
    glob = np.zeros((heads, nb, nb), dtype=bool)
    glob[:, [0, -1], :] = True
    glob[:, :, [0, -1]] = True
    rand = np.zeros((heads, nb, nb), dtype=bool)
    h, row, _ = np.indices(rand_idx.shape)
    rand[h, row + 1, rand_idx] = True
    return {"random": rand, "window": window, "global": glob, "bigbird": rand | window | glob}


def to_tokens(blocks: np.ndarray, block_size: int) -> np.ndarray:
    """A (..., nb, nb) block mask as a (..., n, n) token mask (every token of a block as its block). Raises
    InvalidConfig past MAX_MASK_LENGTH tokens."""
    n = blocks.shape[-1] * block_size
    if n > MAX_MASK_LENGTH:
        raise InvalidConfig(f"A token mask of {n:,} tokens is too large to build (at most {MAX_MASK_LENGTH:,}).",
                            "Use the block layout, or attention_cost for the counts.")
    return np.repeat(np.repeat(blocks, block_size, axis=-2), block_size, axis=-1)


@dataclass(frozen=True)
class AttentionCost:
    """Attention's cost per layer and head at one length: (query, key) pairs scored, FLOPs of QKᵀ and AV (2 per
    multiply-add, over ``head_dim``), and the bytes of the score matrix, for full and block-sparse attention."""

    length: int
    head_dim: int
    pairs_full: int
    pairs_sparse: int
    bytes_per_value: int

    @property
    def flops_full(self) -> int:
        return 2 * 2 * self.head_dim * self.pairs_full  # QKᵀ and AV: head_dim multiply-adds per pair each

    @property
    def flops_sparse(self) -> int:
        return 2 * 2 * self.head_dim * self.pairs_sparse

    @property
    def bytes_full(self) -> int:
        return self.bytes_per_value * self.pairs_full

    @property
    def bytes_sparse(self) -> int:
        return self.bytes_per_value * self.pairs_sparse

    @property
    def ratio(self) -> float:
        """Sparse over full, the same for FLOPs and score memory (both scale with the pairs)."""
        return self.pairs_sparse / self.pairs_full

    @property
    def falls_back(self) -> bool:
        """Whether transformers runs full attention at this length (too few blocks for the sparse pattern)."""
        return self.pairs_sparse == self.pairs_full


def sparse_pairs(n: int, block_size: int, random_blocks_: int) -> int:
    """(query, key) pairs block-sparse attention computes at ``n`` tokens (transformers' BigBird-ITC): the 2 global
    query blocks score all n keys; the second and second-to-last score 4 + r blocks (3 window blocks, one of them
    global, and the other global block); every other scores 5 + r (3 window + 2 global). The random plan never
    draws a window or global block, so these are distinct pairs, but at 1,024, 3,072 and 4,096 tokens, where the
    paper's old plan may draw one that is computed twice. Raises InvalidConfig (:func:`check_block_setting`)."""
    nb = check_block_setting(n, block_size, random_blocks_)
    b, r = block_size, random_blocks_
    return 2 * b * n + 2 * b * b * (4 + r) + (nb - 4) * b * b * (5 + r)


def attention_cost(n: int, head_dim: int = 64, block_size: int = PAPER_BLOCK_SIZE,
                   random_blocks_: int = PAPER_RANDOM_BLOCKS, bytes_per_value: int = 4) -> AttentionCost:
    """:class:`AttentionCost` of full and block-sparse attention at ``n`` tokens (defaults: BigBird-ITC base, fp32
    scores). Up to (5 + 2r) blocks transformers runs full attention (its BigBirdModel switches), so the sparse cost is
    the full one there (:attr:`AttentionCost.falls_back`).

    Raises:
        InvalidConfig: n not a multiple of the block size, or a parameter out of bounds.
    """
    _check_int("The head size", head_dim, 1, 1024)
    _check_int("Bytes per value", bytes_per_value, 1, 8)
    _check_int("The length", n, 1, MAX_LENGTH)
    _check_int("The block size", block_size, 1, MAX_BLOCK_SIZE)
    _check_int("Random blocks", random_blocks_, 0, MAX_RANDOM_BLOCKS)
    if n % block_size == 0 and n <= (5 + 2 * random_blocks_) * block_size:
        return AttentionCost(n, head_dim, n * n, n * n, bytes_per_value)
    return AttentionCost(n, head_dim, n * n, sparse_pairs(n, block_size, random_blocks_), bytes_per_value)


COST_LENGTHS = (512, 1024, 2048, 4096, 8192, 16_384)


def cost_table(lengths: tuple[int, ...] = COST_LENGTHS, head_dim: int = 64, block_size: int = PAPER_BLOCK_SIZE,
               random_blocks_: int = PAPER_RANDOM_BLOCKS) -> list[AttentionCost]:
    """:func:`attention_cost` at each length (at most 16 lengths)."""
    if not 1 <= len(lengths) <= 16:
        raise InvalidConfig("Give from 1 to 16 lengths.")
    return [attention_cost(n, head_dim, block_size, random_blocks_) for n in lengths]
