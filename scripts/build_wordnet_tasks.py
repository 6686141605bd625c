"""Build the fine-tuning lab's offline downstream tasks from WordNet 3.0 (run once; the output is committed).

    python scripts/build_wordnet_tasks.py /usr/share/wordnet      # Debian/Ubuntu: apt-get install wordnet-base

Writes into ``data/tasks/``:

- ``wic.csv.gz``: Word-in-Context pairs (Pilehvar & Camacho-Collados 2019, NAACL; WiC in SuperGLUE): one target
  word in two example sentences; label 1 when both uses are the same WordNet synset, 0 when they are two
  different synsets of that word. Columns ``split,lemma,pos,text_a,text_b,start_a,end_a,start_b,end_b,
  synset_a,synset_b,label``.
- ``supersense.csv.gz``: the supersense (lexicographer file, e.g. ``noun.person``, ``verb.motion``) of a marked
  word in an example sentence (Ciaramita & Altun 2006, EMNLP). Columns ``split,lemma,pos,text,start,end,synset,label``.

Example sentences are the double-quoted parts of a synset's gloss, as in ``scripts/build_wordnet_corpus.py``;
the target word is one of the synset's lemmas, found in the sentence as written or as a regular inflection
(``regular_forms``). Both tasks split by lemma into train, validation and test (``split_of``); then nothing of a
held-out row is left in train (``disjoint``): a train row that shares a sentence, a synset or a word of its lemma with a
validation or test row is dropped, so a test sentence never appears word for word in train under a related lemma
(``back up`` / ``back``). Every choice is seeded, so the same WordNet gives the same bytes. The script prints the
tables and the leak counts that ``data/tasks/README.md`` shows.

WordNet 3.0 licence: ``data/corpus/LICENSE-WordNet``.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import io
import random
import re
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "data" / "tasks"
SEED = 13
#: Shares of lemmas that go to test and to validation (by a hash of the lemma, so the choice does not depend on the
#: order of the input); the rest is train.
TEST_FRACTION = 0.2
VALIDATION_FRACTION = 0.1
SPLITS = ("train", "validation", "test")
#: Caps, so that a fine-tune on two CPU cores stays classroom-sized (the lab can subsample further). Supersense's test
#: split keeps every row, so that a lab run drawing 1,500 test rows per seed draws different ones per seed.
WIC_MAX = {"train": 5_000, "validation": 600, "test": 1_200}
SUPERSENSE_MAX = {"train": 6_000, "validation": 1_000, "test": 100_000}
#: Positive pairs one synset may give to WiC: without a cap, a few synsets with many examples would dominate.
WIC_PAIRS_PER_SYNSET = 6
#: A supersense with fewer sentences than this in train is dropped (noun.Tops has a handful).
MIN_CLASS_TRAIN = 30
#: Rows a class keeps at least when the caps sample a split down (rare classes stay learnable).
MIN_CLASS_SAMPLE = {"train": 40, "validation": 10, "test": 10}

QUOTED = re.compile(r'"([^"]{8,300})"')  # as in build_wordnet_corpus.py: an example sentence in a gloss
POS_FILES = {"n": "data.noun", "v": "data.verb"}
VOWELS = set("aeiou")

#: WordNet 3.0's lexicographer files (the ``lexnames`` file, documented in lexnames(5WN)). Debian's
#: ``wordnet-base`` does not ship that file, so this copy of it is used when the WordNet folder lacks one.
LEXNAMES_3_0 = (
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact", "noun.attribute",
    "noun.body", "noun.cognition", "noun.communication", "noun.event", "noun.feeling", "noun.food", "noun.group",
    "noun.location", "noun.motive", "noun.object", "noun.person", "noun.phenomenon", "noun.plant", "noun.possession",
    "noun.process", "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition", "verb.consumption",
    "verb.contact", "verb.creation", "verb.emotion", "verb.motion", "verb.perception", "verb.possession",
    "verb.social", "verb.stative", "verb.weather", "adj.ppl",
)

WIC_COLUMNS = ("split", "lemma", "pos", "text_a", "text_b", "start_a", "end_a", "start_b", "end_b", "synset_a", "synset_b", "label")
SUPERSENSE_COLUMNS = ("split", "lemma", "pos", "text", "start", "end", "synset", "label")


@dataclass(frozen=True)
class Synset:
    """One synset of data.noun / data.verb: ``id`` is ``offset-pos`` (e.g. ``02084071-n``), unique across files."""

    id: str
    pos: str
    lexname: str
    lemmas: tuple[str, ...]  # as WordNet writes them, underscores turned into spaces
    examples: tuple[str, ...]
    related: frozenset[str]  # ids of the synsets its pointers reach (hypernyms, antonyms, derivations, ...)
    hypernyms: frozenset[str]


@dataclass(frozen=True)
class Occurrence:
    """A lemma of a synset found in one of the synset's example sentences: ``text[start:end]`` is the word."""

    lemma: str  # lower case: the unit of the train/test split
    pos: str
    text: str
    start: int
    end: int
    synset: str
    lexname: str


# -- reading WordNet ---------------------------------------------------------------------------------------


def read_lexnames(wordnet_dir: Path) -> dict[int, str]:
    """Lexicographer file number → name, from ``lexnames`` (``NN<TAB>name<TAB>category``) or the built-in copy."""
    path = Path(wordnet_dir) / "lexnames"
    if not path.exists():
        return dict(enumerate(LEXNAMES_3_0))
    names = {}
    for line in path.read_text(encoding="latin-1").splitlines():
        fields = line.split()
        if len(fields) >= 2:
            names[int(fields[0])] = fields[1]
    return names


def parse_data_line(line: str, lexnames: dict[int, str]) -> Synset | None:
    """One line of a ``data.*`` file (format in wndb(5WN)); None for the licence header."""
    if line.startswith("  ") or "|" not in line:
        return None
    head, gloss = line.split("|", 1)
    fields = head.split()
    offset, lex_filenum, pos = fields[0], int(fields[1]), fields[2]
    n_words = int(fields[3], 16)
    lemmas = tuple(fields[4 + 2 * i].replace("_", " ") for i in range(n_words))
    i = 4 + 2 * n_words
    n_pointers = int(fields[i])
    related, hypernyms = set(), set()
    for k in range(n_pointers):
        symbol, target, target_pos = fields[i + 1 + 4 * k : i + 4 + 4 * k]
        target_id = f"{target}-{'a' if target_pos == 's' else target_pos}"
        related.add(target_id)
        if symbol in ("@", "@i"):
            hypernyms.add(target_id)
    examples = tuple(" ".join(s.split()) for s in QUOTED.findall(gloss))
    return Synset(f"{offset}-{pos}", pos, lexnames[lex_filenum], lemmas, tuple(e for e in examples if len(e.split()) >= 4),
                  frozenset(related), frozenset(hypernyms))


def read_synsets(wordnet_dir: Path) -> list[Synset]:
    """The noun and verb synsets of a WordNet folder, in file order."""
    lexnames = read_lexnames(wordnet_dir)
    synsets = []
    for fname in POS_FILES.values():
        for line in (Path(wordnet_dir) / fname).read_text(encoding="latin-1").splitlines():
            synset = parse_data_line(line, lexnames)
            if synset is not None:
                synsets.append(synset)
    return synsets


# -- finding the target word -------------------------------------------------------------------------------


def regular_forms(word: str, pos: str) -> set[str]:
    """``word`` and its regular inflections: plural for nouns; -s, -ed, -ing (with e-drop, y→i, doubling) for verbs.

    Over-generation is harmless: a form is only looked for in the synset's own example sentences.
    """
    w = word.lower()
    forms = {w}
    consonant_y = len(w) > 2 and w.endswith("y") and w[-2] not in VOWELS
    if pos == "n":
        forms |= {w + "s", w + "es"}
        if consonant_y:
            forms.add(w[:-1] + "ies")
    elif pos == "v":
        forms |= {w + "s", w + "es", w + "ed", w + "ing"}
        if w.endswith("e"):
            forms |= {w + "d", w[:-1] + "ing"}
        if w.endswith("ie"):
            forms.add(w[:-2] + "ying")
        if consonant_y:
            forms |= {w[:-1] + "ies", w[:-1] + "ied"}
        if len(w) >= 3 and w[-1] not in VOWELS | set("wxy") and w[-2] in VOWELS and w[-3] not in VOWELS:
            forms |= {w + w[-1] + "ed", w + w[-1] + "ing"}  # stop → stopped, stopping
    return forms


def lemma_forms(lemma: str, pos: str) -> set[str]:
    """Forms of a (possibly multi-word) lemma: a verb inflects its first word (``warm up`` → ``warmed up``), a noun its last."""
    words = lemma.lower().split()
    if len(words) == 1:
        return regular_forms(words[0], pos)
    if pos == "v":
        return {" ".join([f, *words[1:]]) for f in regular_forms(words[0], pos)}
    return {" ".join([*words[:-1], f]) for f in regular_forms(words[-1], pos)}


def find_word(sentence: str, lemma: str, pos: str) -> tuple[int, int] | None:
    """Character offsets of the first whole-word occurrence of a form of ``lemma`` in ``sentence``, or None.

    A form inside a hyphenated word (``well-known``) does not count: the target must be a word of its own.
    """
    forms = sorted(lemma_forms(lemma, pos), key=lambda f: (-len(f), f))
    pattern = r"(?<![\w-])(?:" + "|".join(re.escape(f) for f in forms) + r")(?![\w-])"
    m = re.search(pattern, sentence, flags=re.IGNORECASE)
    return (m.start(), m.end()) if m else None


def occurrences(synsets: Iterable[Synset]) -> list[Occurrence]:
    """Every (example sentence, lemma of its synset found in it), in input order; a sentence without any lemma is skipped."""
    found = []
    for s in synsets:
        for text in s.examples:
            seen = set()
            for lemma in s.lemmas:
                key = lemma.lower()
                span = find_word(text, lemma, s.pos) if key not in seen else None
                if span is not None:
                    seen.add(key)
                    found.append(Occurrence(key, s.pos, text, span[0], span[1], s.id, s.lexname))
    return found


# -- splits and sampling -------------------------------------------------------------------------------------


def split_of(lemma: str, test_fraction: float = TEST_FRACTION, validation_fraction: float = VALIDATION_FRACTION) -> str:
    """``"test"`` for about ``test_fraction`` of lemmas, ``"validation"`` for about ``validation_fraction``, else
    ``"train"``: chosen by a hash of the lemma (the same in both tasks)."""
    h = int.from_bytes(hashlib.sha256(lemma.lower().encode("utf-8")).digest()[:8], "big") / 2**64
    return "test" if h < test_fraction else "validation" if h < test_fraction + validation_fraction else "train"


def _keys(row: dict) -> set[tuple[str, str]]:
    """What a row could give away to another split: its sentences, its synsets and the words of its lemma."""
    texts = [row["text"]] if "text" in row else [row["text_a"], row["text_b"]]
    synsets = [row["synset"]] if "synset" in row else [row["synset_a"], row["synset_b"]]
    return {("sentence", t) for t in texts} | {("synset", x) for x in synsets} | {("word", w) for w in row["lemma"].split()}


def disjoint(rows: Sequence[dict]) -> list[dict]:
    """The rows without leaks between splits: a train row that shares a sentence, a synset or any word of its lemma
    with a test or validation row is dropped, and a validation row that shares one with a test row. (Splitting by
    lemma alone left test sentences in train under a related lemma: ``back up`` in train, ``back`` in test. Splitting
    whole connected groups instead is not possible: synonymy and polysemy join half of WordNet's examples into one.)"""
    held: dict[str, set[tuple[str, str]]] = {split: set() for split in SPLITS}
    for r in rows:
        held[r["split"]] |= _keys(r)
    later = {"train": held["validation"] | held["test"], "validation": held["test"], "test": set()}
    return [r for r in rows if not _keys(r) & later[r["split"]]]


def leaks(rows: Sequence[dict]) -> dict[str, int]:
    """Leak counts between train and the held-out splits (all 0 after :func:`disjoint`): held-out rows with a sentence
    that is in train, held-out synsets that are in train, and words of held-out lemmas that are words of train lemmas."""
    train = set().union(*[_keys(r) for r in rows if r["split"] == "train"]) if rows else set()
    held = [r for r in rows if r["split"] != "train"]
    keys = set().union(*[_keys(r) for r in held]) if held else set()
    return {"sentences": sum(1 for r in held if {k for k in _keys(r) if k[0] == "sentence"} & train),
            "synsets": len({k for k in keys if k[0] == "synset"} & train),
            "words": len({k for k in keys if k[0] == "word"} & train)}


def _stratified_sample(rows: Sequence[dict], key: str, cap: int, floor: int, rng: random.Random) -> list[dict]:
    """At most about ``cap`` rows, each class keeping its share (at least ``floor`` rows, or all it has)."""
    if len(rows) <= cap:
        return list(rows)
    by_class: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_class[r[key]].append(r)
    quota = {c: min(len(v), max(floor, round(cap * len(v) / len(rows)))) for c, v in sorted(by_class.items())}
    # The floors push the total over the cap: take the excess from the largest classes.
    while sum(quota.values()) > cap:
        biggest = max(sorted(quota), key=lambda c: quota[c])
        quota[biggest] -= 1
    picked = []
    for c in sorted(by_class):
        picked += rng.sample(by_class[c], quota[c])
    return picked


# -- the two tasks ---------------------------------------------------------------------------------------------


def build_wic(synsets: Sequence[Synset], seed: int = SEED, caps: dict[str, int] = WIC_MAX) -> list[dict]:
    """WiC pairs, balanced within each split, split by lemma, each sentence pair once.

    Targets are polysemous words (two or more synsets of that part of speech in WordNet): a word with one
    sense is always used in the same sense, which a model could learn without reading the sentences.
    Positives pair two example sentences of one synset that both use the word; negatives pair sentences of
    two synsets of the word. In the spirit of WiC's pruning of closely related senses, a negative whose synsets
    are linked directly in WordNet (a pointer either way) or are sisters (share a hypernym) is left out.
    Negatives are drawn from the positives' own words first (as many as each word has positives), so that
    the word itself says little about the label, then from other words, one pair per word in turn.
    """
    rng = random.Random(seed)
    by_id = {s.id: s for s in synsets}
    senses_of = Counter((lemma.lower(), s.pos) for s in synsets for lemma in {x.lower() for x in s.lemmas})
    uses: dict[tuple[str, str], dict[str, list[Occurrence]]] = defaultdict(lambda: defaultdict(list))
    for o in occurrences(synsets):
        if senses_of[o.lemma, o.pos] > 1:
            uses[o.lemma, o.pos][o.synset].append(o)

    positives: dict[str, list[tuple[Occurrence, Occurrence]]] = {split: [] for split in SPLITS}
    negatives: dict[str, dict[tuple[str, str], list[tuple[Occurrence, Occurrence]]]] = {split: {} for split in SPLITS}
    for word, senses in sorted(uses.items()):
        # A sentence that illustrates two senses of the word would be its own counter-example.
        texts = Counter(o.text for occ in senses.values() for o in occ)
        senses = {sid: [o for o in occ if texts[o.text] == 1] for sid, occ in senses.items()}
        split, ids = split_of(word[0]), sorted(senses)
        for i, a in enumerate(ids):
            same = [(x, y) for k, x in enumerate(senses[a]) for y in senses[a][k + 1 :]]
            positives[split] += rng.sample(same, min(len(same), WIC_PAIRS_PER_SYNSET))
            for b in ids[i + 1 :]:
                sa, sb = by_id[a], by_id[b]
                if b in sa.related or a in sb.related or sa.hypernyms & sb.hypernyms:
                    continue
                negatives[split].setdefault(word, []).extend((x, y) for x in senses[a] for y in senses[b])

    rows, seen = [], set()

    def take(pair: tuple[Occurrence, Occurrence], label: int, split: str) -> bool:
        x, y = pair
        key = frozenset((x.text, y.text))
        if key in seen:
            return False
        seen.add(key)
        if rng.random() < 0.5:  # which sentence comes first carries no signal
            x, y = y, x
        rows.append({"split": split, "lemma": x.lemma, "pos": x.pos, "text_a": x.text, "text_b": y.text,
                     "start_a": x.start, "end_a": x.end, "start_b": y.start, "end_b": y.end,
                     "synset_a": x.synset, "synset_b": y.synset, "label": label})
        return True

    for split in SPLITS:
        pos = rng.sample(positives[split], min(len(positives[split]), caps[split] // 2))
        n_pos = len([p for p in pos if take(p, 1, split)])
        pools = {w: rng.sample(p, len(p)) for w, p in sorted(negatives[split].items())}
        wanted = Counter((x.lemma, x.pos) for x, _ in pos)
        n_neg = 0
        for w in sorted(wanted):
            got = 0
            while pools.get(w) and got < wanted[w] and n_neg < n_pos:
                if take(pools[w].pop(), 0, split):
                    got, n_neg = got + 1, n_neg + 1
        order = sorted(pools)
        rng.shuffle(order)
        while n_neg < n_pos and any(pools.values()):
            for w in order:
                if pools[w] and n_neg < n_pos and take(pools[w].pop(), 0, split):
                    n_neg += 1
        if n_neg < n_pos:  # the negatives ran out: drop the last positives, so the split stays balanced
            for i in [i for i, r in enumerate(rows) if r["split"] == split and r["label"] == 1][n_neg:][::-1]:
                del rows[i]
    return sorted(_balanced(disjoint(rows), rng), key=lambda r: (SPLITS.index(r["split"]), r["lemma"], r["pos"], r["text_a"], r["text_b"]))


def _balanced(rows: list[dict], rng: random.Random) -> list[dict]:
    """Each split with as many label-0 as label-1 rows (what :func:`disjoint` dropped may have unbalanced it): the
    larger side loses rows drawn at random."""
    out = []
    for split in SPLITS:
        part = [r for r in rows if r["split"] == split]
        by_label = {label: [r for r in part if r["label"] == label] for label in (0, 1)}
        n = min(len(v) for v in by_label.values())
        out += [r for label in (0, 1) for r in (by_label[label] if len(by_label[label]) == n else rng.sample(by_label[label], n))]
    return out


def build_supersense(synsets: Sequence[Synset], seed: int = SEED, caps: dict[str, int] = SUPERSENSE_MAX,
                     min_class_train: int = MIN_CLASS_TRAIN) -> list[dict]:
    """One row per example sentence × lemma found in it, labelled with the synset's lexicographer file.

    Classes with fewer than ``min_class_train`` train rows are dropped; each split is then sampled down to ``caps``.
    """
    rng = random.Random(seed)
    found = occurrences(synsets)
    # A sentence whose marked word WordNet files under two supersenses (the same sentence in two synsets) is ambiguous.
    labels_of: dict[tuple[str, int, int], set[str]] = defaultdict(set)
    for o in found:
        labels_of[o.text, o.start, o.end].add(o.lexname)
    rows, seen = [], set()
    for o in found:
        key = (o.text, o.start, o.end)
        if len(labels_of[key]) > 1 or key in seen:
            continue
        seen.add(key)
        rows.append({"split": split_of(o.lemma), "lemma": o.lemma, "pos": o.pos, "text": o.text, "start": o.start,
                     "end": o.end, "synset": o.synset, "label": o.lexname})
    rows = disjoint(rows)
    train_counts = Counter(r["label"] for r in rows if r["split"] == "train")
    keep = {c for c, n in train_counts.items() if n >= min_class_train}
    rows = [r for r in rows if r["label"] in keep]
    out = []
    for split in SPLITS:
        part = [r for r in rows if r["split"] == split]
        out += _stratified_sample(part, "label", caps[split], MIN_CLASS_SAMPLE[split], rng)
    return sorted(out, key=lambda r: (SPLITS.index(r["split"]), r["lemma"], r["pos"], r["text"], r["start"]))


# -- output -------------------------------------------------------------------------------------------------------


def to_csv_gz(rows: Sequence[dict], columns: Sequence[str]) -> bytes:
    """Rows as gzipped CSV bytes; mtime 0, so the same rows give the same bytes."""
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=list(columns), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", mtime=0, filename="") as f:
        f.write(text.getvalue().encode("utf-8"))
    return buf.getvalue()


def summary_table(rows: Sequence[dict]) -> str:
    """The README's Markdown table: rows per split and label, the majority baseline on test, and the leak counts."""
    counts = Counter((r["split"], str(r["label"])) for r in rows)
    labels = sorted({str(r["label"]) for r in rows})
    size = Counter(r["split"] for r in rows)
    lines = ["| label | train | validation | test |", "| --- | ---: | ---: | ---: |"]
    lines += [f"| {label} | {counts['train', label]} | {counts['validation', label]} | {counts['test', label]} |" for label in labels]
    lines.append(f"| **total** | {size['train']} | {size['validation']} | {size['test']} |")
    if not labels:
        return "\n".join(lines) + "\n\nNo rows."
    majority = max(labels, key=lambda label: (counts["train", label], -labels.index(label)))  # a tie: the first label, as analysis.tasks
    accuracy = counts["test", majority] / size["test"] if size["test"] else 0.0
    lemmas = {s: len({r["lemma"] for r in rows if r["split"] == s}) for s in SPLITS}
    leak = leaks(rows)
    return "\n".join(lines) + (f"\n\nLemmas: {lemmas['train']} train, {lemmas['validation']} validation, {lemmas['test']} test. "
                               f"Majority class (train's most frequent label, `{majority}`) on test: accuracy **{accuracy:.3f}**. "
                               f"Leaks from validation and test into train: {leak['sentences']} sentences, {leak['synsets']} "
                               f"synsets, {leak['words']} words of lemmas.")


def main(wordnet_dir: str, out_dir: Path = OUT) -> None:
    synsets = read_synsets(Path(wordnet_dir))
    out_dir.mkdir(parents=True, exist_ok=True)
    for name, rows, columns in (("wic", build_wic(synsets), WIC_COLUMNS),
                                ("supersense", build_supersense(synsets), SUPERSENSE_COLUMNS)):
        data = to_csv_gz(rows, columns)
        (out_dir / f"{name}.csv.gz").write_bytes(data)
        print(f"{name}.csv.gz: {len(data):,} bytes", file=sys.stderr)
        print(f"#### `{name}`\n\n{summary_table(rows)}\n")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/wordnet")
