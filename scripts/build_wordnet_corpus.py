"""Extract WordNet 3.0's example sentences and glosses into data/corpus/ (run once; the output is committed).

    apt-get download wordnet-base && dpkg-deb -x wordnet-base_*.deb /tmp/wn
    python scripts/build_wordnet_corpus.py /tmp/wn/usr/share/wordnet

Writes ``wordnet_examples.txt.gz`` (one example sentence per line, as WordNet quotes them, with the
synset's first lemma and part of speech: ``lemma<TAB>pos<TAB>sentence``) and ``wordnet_glosses.txt.gz``
(one definition per line). WordNet 3.0 licence: ``data/corpus/LICENSE-WordNet`` (permissive; the
copyright notice travels with the data).
"""

from __future__ import annotations

import gzip
import re
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "corpus"
POS = {"noun": "n", "verb": "v", "adj": "a", "adv": "r"}
QUOTED = re.compile(r'"([^"]{8,300})"')


def main(wordnet_dir: str) -> None:
    examples, glosses = [], []
    for name, pos in POS.items():
        for line in (Path(wordnet_dir) / f"data.{name}").read_text(encoding="latin-1").splitlines():
            if line.startswith("  ") or "|" not in line:
                continue  # the licence header
            head, gloss = line.split("|", 1)
            lemma = head.split()[4].replace("_", " ")
            definition = gloss.split(";")[0].strip()
            if definition and not definition.startswith('"'):
                glosses.append(definition)
            for sentence in QUOTED.findall(gloss):
                sentence = " ".join(sentence.split())
                if len(sentence.split()) >= 4:
                    examples.append(f"{lemma}\t{pos}\t{sentence}")
    OUT.mkdir(parents=True, exist_ok=True)
    for fname, lines in (("wordnet_examples.txt.gz", examples), ("wordnet_glosses.txt.gz", glosses)):
        with gzip.GzipFile(OUT / fname, "wb", mtime=0) as f:  # mtime 0: the same input gives the same bytes
            f.write(("\n".join(lines) + "\n").encode("utf-8"))
        print(f"{fname}: {len(lines):,} lines")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/wordnet")
