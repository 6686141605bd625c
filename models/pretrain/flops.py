"""Training FLOPs of the lab's runs, counted as the loop performs them, without torch.

One convention for everything that prices a run: the presets' "equal compute" arms, the IsoFLOP budgets, the lab
page's plan, the verdicts' compute table and ``bench/mfu.py``'s MFU numerator (the "model FLOPs" of Chowdhery et
al. 2022, Appendix B):

- forward + backward = 3 × the forward's matrix-multiply FLOPs, 2 FLOPs per multiply-add;
- every linear layer of an encoder on each **real** token (padding is an implementation's waste, not the method's
  cost: the masked-LM loop does not even compute it, :mod:`models.pretrain.unpadded`);
- attention scores and their weighted sum over each text's own length (``pairs``: Σ n² over the texts);
- each output layer only where the loss reads it: the masked positions for a masked LM and for ELECTRA's
  generator (its transform and its logits over the vocabulary), every position for ELECTRA's discriminator (one
  logit each), as Clark et al.'s own FLOP counter does (``output_frac``). An output layer over the vocabulary at
  every position, as the Kaplan convention has it, would be most of a small model's count (about 70% at 2 × 128
  with 8,192 words) and would give an arm that scores fewer positions compute it never spends.

Kaplan et al. 2020's 6·N per token (N: non-embedding parameters, plus 6·n_layer·n_ctx·d attention) is given beside it
for reference (:func:`kaplan_per_token`).

A run's texts set its real tokens: :func:`length_stats` reads them (the run's corpus, tokenizer and sequence length;
the Rust tokenizer, no torch) for what a plan expects; :func:`step_flops` counts one batch exactly.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from models.pretrain.config import LAB_VOCAB, VOCAB_SIZES, TrainConfig

#: transformers' DataCollatorForLanguageModeling's default: the share of (non-special) tokens a masked LM predicts.
MASK_RATE = 0.15


@dataclass(frozen=True)
class LengthStats:
    """What a run's texts give a batch: real tokens per sequence (after truncation), attention pairs per real token
    (E[n²] / E[n]), masked positions per real token (15% of the tokens that are not [CLS] / [SEP]), and positions
    computed per real token (1, but for XLNet's collator, which pads every text to the sequence length)."""

    tokens_per_sequence: float
    pairs_per_token: float
    masked_per_token: float
    positions_per_token: float = 1.0


@dataclass(frozen=True)
class Shape:
    """One encoder's shape: width, feed-forward width, layers; ``embedding``: the width its embeddings come in at."""

    hidden: int
    ffn: int
    layers: int
    embedding: int

    def encoder(self, tokens: float, pairs: float) -> float:
        """Forward FLOPs of the layers over ``tokens`` real tokens with ``pairs`` attention (query, key) pairs."""
        h, f = self.hidden, self.ffn
        linear = 2 * (4 * h * h + 2 * h * f)  # q, k, v, output; FFN in and out: per token, per layer
        attention = 2 * 2 * h  # q·k over the keys, weights·v: per (query, key) pair, per layer
        projection = 2 * self.embedding * h if self.embedding != h else 0  # ELECTRA's generator: E → its width
        return self.layers * (tokens * linear + pairs * attention) + tokens * projection


def shapes(config: TrainConfig) -> dict[str, Shape]:
    """The encoders a run trains: ``main`` (and ELECTRA's ``generator``, ``generator_ratio`` of the width)."""
    out = {"main": Shape(config.hidden, config.ffn, config.layers, config.hidden)}
    if config.objective == "electra":
        out["generator"] = Shape(int(config.hidden * config.generator_ratio), max(16, int(config.ffn * config.generator_ratio)),
                                 config.layers, config.hidden)
    return out


def step_flops(config: TrainConfig, tokens: float, pairs: float, masked: float, sequences: float = 0.0) -> float:
    """Training FLOPs of one step (or any number of them): ``tokens`` real tokens, ``pairs`` attention pairs (Σ n²),
    ``masked`` masked positions, ``sequences`` texts (their NSP/SOP logit). Causal and permutation LMs score every
    position over the vocabulary."""
    v = VOCAB_SIZES[config.vocab]
    enc = shapes(config)
    main = enc["main"]
    h = main.hidden
    forward = main.encoder(tokens, pairs)
    if config.objective in ("mlm", "mlm+nsp", "mlm+sop", "distil"):
        forward += masked * 2 * (h * h + h * v)  # the MLM head's transform and decoder, at the masked positions
        if config.objective in ("mlm+nsp", "mlm+sop"):
            forward += sequences * 2 * (h * h + 2 * h)  # pooler and the two-way NSP/SOP logit
    elif config.objective == "electra":
        g = enc["generator"]
        forward += g.encoder(tokens, pairs)
        forward += masked * 2 * (g.hidden * g.embedding + g.embedding * v)  # the generator's head, masked positions
        forward += tokens * 2 * (h * h + h)  # the discriminator's head: one logit at every position
    else:  # plm, clm: every position predicts a token
        forward += tokens * 2 * h * v
    if config.objective == "distil":  # the teacher's forward pass on the same batch: no backward, so once, not 3×
        return 3 * forward + teacher_shape(config).encoder(tokens, pairs) + masked * 2 * (h * h + h * v)
    return 3 * forward


def teacher_shape(config: TrainConfig) -> Shape:
    """A distillation run's teacher as the plan prices it: the student's width and twice its layers (the student keeps
    every other layer; a teacher of 2L − 1 layers, which also gives L, is counted one layer high). The checkpoint is
    not read here: a preset's teacher is not trained yet when its students are planned."""
    return Shape(config.hidden, config.ffn, 2 * config.layers, config.hidden)


def per_token(config: TrainConfig, stats: LengthStats) -> float:
    """Expected training FLOPs per real token of ``config`` on texts like ``stats`` (:func:`step_flops`'s convention)."""
    return step_flops(config, stats.positions_per_token, stats.pairs_per_token, stats.masked_per_token, 1.0 / stats.tokens_per_sequence)


def kaplan_per_token(config: TrainConfig, context: int | None = None) -> float:
    """Kaplan et al. 2020's C ≈ 6·N + 6·n_layer·n_ctx·d per token (Table 1): N the non-embedding parameters of every
    encoder the run trains, the output layer not counted; ``context`` defaults to the sequence length."""
    n_ctx = context or config.seq_len
    total = 0.0
    for s in shapes(config).values():
        n = 2 * s.hidden * s.layers * (2 * s.hidden + s.ffn)
        total += 6 * n + 6 * s.layers * n_ctx * s.hidden
    return total


def length_stats(config: TrainConfig) -> LengthStats:
    """The real tokens a run's batches hold, read from its own training texts with its tokenizer (cached per corpus,
    vocabulary, sequence length, objective and seed). Packed sequences (``pack``) are all ``seq_len`` long and score
    every pair, BigBird's arm too (its pattern is a mask on dense scores: :mod:`models.pretrain.sparse`)."""
    if config.pack:
        n = config.seq_len
        return LengthStats(float(n), float(n), MASK_RATE * (n - 2) / n)
    return _length_stats(config.corpus, _version(config.corpus), config.vocab, config.seq_len, config.objective, config.seed,
                         config.corpus_lines)


def _version(corpus: str) -> tuple[int, int] | None:
    """A user's corpus file as it is now (size, time), so that a changed file is priced again; None for WordNet's."""
    if corpus == "wordnet":
        return None
    try:
        stat = os.stat(corpus)
    except OSError:
        return None  # usable_lines says what is wrong with it
    return stat.st_size, stat.st_mtime_ns


@lru_cache(maxsize=64)
def _length_stats(corpus: str, version: tuple[int, int] | None, vocab: str, seq_len: int, objective: str, seed: int,
                  corpus_lines: int) -> LengthStats:
    from models.pretrain.corpus import pair_plan, training_order

    counts = _counts(corpus, version, vocab)
    train, _ = training_order(len(counts.lines), seed, corpus_lines)
    tok = _tokenizer(vocab)
    if objective in ("mlm+nsp", "mlm+sop"):
        specials = tok.num_special_tokens_to_add(True)
        plan = np.array(pair_plan(len(train), objective[-3:], seed), dtype=np.int64).reshape(-1, 5)
        rows = np.asarray(train, dtype=np.int64)
        halves = counts.halves(rows)  # row i: text i of the training texts
        raw = halves[plan[:, 0], plan[:, 1]] + halves[plan[:, 2], plan[:, 3]]
    else:
        specials = tok.num_special_tokens_to_add(False)
        raw = counts.whole(np.asarray(train, dtype=np.int64))
    # Truncated as the batches are (longest first for a pair): the specials always stay.
    lengths = np.minimum(raw + specials, seq_len)
    total, n = int(lengths.sum()), len(lengths)
    if objective == "plm":  # XLNet's collator pads every text to the sequence length, and the model attends over all of it
        return LengthStats(total / n, seq_len * seq_len * n / total, 0.0, seq_len * n / total)
    return LengthStats(total / n, int((lengths * lengths).sum()) / total, MASK_RATE * int(np.maximum(0, lengths - specials).sum()) / total)


class _TokenCounts:
    """Tokens (without specials) of each usable line of one corpus under one vocabulary, whole and in its two
    halves, counted as lines are first asked for. A plan prices every seed and arm of a preset, each a different
    draw of the same lines, and the lab page plans on every rerun: each line is tokenized once, not once per draw."""

    def __init__(self, lines: tuple[str, ...], vocab: str) -> None:
        self.lines, self.vocab = lines, vocab
        self._whole = np.full(len(lines), -1, dtype=np.int64)
        self._halves = np.full((len(lines), 2), -1, dtype=np.int64)
        self._lock = threading.Lock()

    def _count(self, texts: list[str]) -> np.ndarray:
        tok = _tokenizer(self.vocab)
        return np.array([len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False)], dtype=np.int64)

    def whole(self, rows: np.ndarray) -> np.ndarray:
        with self._lock:
            todo = np.unique(rows[self._whole[rows] < 0])
            if len(todo):
                self._whole[todo] = self._count([self.lines[i] for i in todo])
            return self._whole[rows]

    def halves(self, rows: np.ndarray) -> np.ndarray:
        """(tokens of the first half, of the second) of each row."""
        from models.pretrain.corpus import halves

        with self._lock:
            todo = np.unique(rows[self._halves[rows, 0] < 0])
            if len(todo):
                split = [halves(self.lines[i]) for i in todo]
                self._halves[todo, 0] = self._count([a for a, _ in split])
                self._halves[todo, 1] = self._count([b for _, b in split])
            return self._halves[rows]


@lru_cache(maxsize=2)
def _counts(corpus: str, version: tuple[int, int] | None, vocab: str) -> _TokenCounts:
    """The counts of a corpus as it is (``version``: :func:`_version`) under a vocabulary; the last two kept, as the
    corpora's lines are (:func:`models.pretrain.corpus.usable_lines`)."""
    from models.pretrain.corpus import usable_lines

    return _TokenCounts(usable_lines(corpus), vocab)


@lru_cache(maxsize=2)
def _tokenizer(vocab: str):
    """The run's WordPiece tokenizer from ``tokenizers`` (the Rust library, no torch), as transformers' fast tokenizer
    builds it; counts are taken whole (no padding, no truncation: :func:`_length_stats` truncates them)."""
    from tokenizers import BertWordPieceTokenizer, Tokenizer

    if vocab == "wordnet-8k":
        tok = BertWordPieceTokenizer(str(LAB_VOCAB), lowercase=True)
    else:
        from models.locate import bundled_folder

        tok = Tokenizer.from_file(str(bundled_folder() / "tokenizer.json"))
    tok.no_padding()  # a tokenizer.json may pad or truncate to a fixed length
    tok.no_truncation()
    return tok


def batch_stats(lengths: Sequence[int], masked: int) -> tuple[int, int, int]:
    """(real tokens, attention pairs, masked positions) of one batch from its texts' lengths."""
    return sum(lengths), sum(n * n for n in lengths), masked
