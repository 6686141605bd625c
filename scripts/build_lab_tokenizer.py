"""Train the pre-training lab's small WordPiece vocabulary on the WordNet glosses (run once; the output is committed).

    python scripts/build_lab_tokenizer.py

Writes ``data/corpus/wordpiece-8k/vocab.txt``: 8,192 uncased WordPiece tokens with BERT's special tokens,
trained with Hugging Face ``tokenizers`` (the library BERT's own fast tokenizer runs on). Why not BERT's
30,522-token vocabulary: in a model with hidden size 128, the word embeddings and the output layer over
30,522 tokens are most of the parameters and most of the compute, so a class would wait for the vocabulary,
not the transformer. 8,192 covers the glosses with few splits (see the lab's size line).
"""

from __future__ import annotations

import gzip
import string
import tempfile
from pathlib import Path

from tokenizers import BertWordPieceTokenizer

DATA = Path(__file__).resolve().parent.parent / "data" / "corpus"
VOCAB_SIZE = 8192


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        text = Path(tmp) / "glosses.txt"
        with gzip.open(DATA / "wordnet_glosses.txt.gz", "rt", encoding="utf-8") as f:
            text.write_text(f.read(), encoding="utf-8")
        tok = BertWordPieceTokenizer(lowercase=True, strip_accents=True)
        tok.train([str(text)], vocab_size=VOCAB_SIZE, min_frequency=2, limit_alphabet=200,
                  initial_alphabet=list(string.ascii_lowercase + string.digits + string.punctuation),
                  special_tokens=["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"])
    out = DATA / "wordpiece-8k"
    out.mkdir(exist_ok=True)
    tok.save_model(str(out))
    print(f"{tok.get_vocab_size():,} tokens -> {out / 'vocab.txt'}")


if __name__ == "__main__":
    main()
