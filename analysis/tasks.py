"""Downstream tasks for the fine-tuning lab: the built-in WordNet tasks, and a user's own CSV.

Torch-free: a :class:`Task` is plain text and label indices, ready for any tokenizer.

- :func:`load_task`: a built-in task (:data:`BUILT_IN`) from ``data/tasks/`` (built by
  ``scripts/build_wordnet_tasks.py``; sizes, sources and baselines in ``data/tasks/README.md``), optionally
  subsampled to a classroom size, the same for the same seed.

  - ``wic`` (kind ``"pair"``): is the marked word used in the same sense in both sentences? Labels
    ``("different", "same")``; ``span`` / ``span_b`` mark the word in ``text`` / ``text_b``.
  - ``supersense`` (kind ``"token"``): the WordNet supersense (``noun.person``, ``verb.motion``, ...) of the
    word marked by ``span`` in ``text``.

- :func:`parse_task_csv`: a user's CSV (``text,label`` or ``text_a,text_b,label``), validated whole before a
  task is built (:class:`~core.errors.InvalidTaskFile` names the problem and the lines), split into train and
  test stratified by label.

Examples keep their file order; shuffle when training.
"""

from __future__ import annotations

import csv
import gzip
import io
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from core.errors import MAX_TEXT_CHARS, InvalidConfig, InvalidTaskFile, UnknownTask

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "tasks"
BUILT_IN = ("wic", "supersense")
TASK_SPLITS = ("train", "validation", "test")
WORDNET_SOURCE = ("Built from WordNet 3.0's example sentences (Princeton University; licence data/corpus/LICENSE-WordNet) "
                  "by scripts/build_wordnet_tasks.py; see data/tasks/README.md.")

#: The largest CSV :func:`parse_task_csv` takes, in bytes, and the most rows (refused before the rows are parsed).
MAX_TASK_BYTES = 20 * 1024 * 1024
MAX_TASK_ROWS = 200_000
#: The most distinct labels: more is usually a text or id column taken for the label.
MAX_LABELS = 100
#: Line numbers an error message lists before "and N more".
_SHOWN_LINES = 10


@dataclass(frozen=True)
class Example:
    """One example. ``label`` indexes :attr:`Task.labels`; ``span`` is ``(start, end)`` character offsets of the
    marked word in ``text`` (``text[start:end]``), ``span_b`` the same in ``text_b``. ``item`` names the example in its
    file (scores per item are matched by it across runs), ``cluster`` the group whose examples are not independent
    (the built-in tasks' lemma: a bootstrap resamples whole lemmas); both empty where unknown."""

    text: str
    label: int
    text_b: str | None = None
    span: tuple[int, int] | None = None
    span_b: tuple[int, int] | None = None
    item: str = ""
    cluster: str = ""


@dataclass(frozen=True)
class Task:
    """A classification task: ``"single"`` (a text), ``"pair"`` (two texts) or ``"token"`` (a marked word in a text)."""

    name: str
    kind: Literal["pair", "single", "token"]
    labels: tuple[str, ...]
    train: tuple[Example, ...]
    test: tuple[Example, ...]
    source: str
    #: Held out from training and from the test score: for choosing a learning rate and for the per-epoch curve, so
    #: that the test set is scored once, at the end. Empty where a file is too small to spare one.
    validation: tuple[Example, ...] = ()

    def split(self, split: str) -> tuple[Example, ...]:
        """The examples of ``"train"``, ``"validation"`` or ``"test"``."""
        if split not in TASK_SPLITS:
            raise InvalidConfig(f"Unknown split {split!r}.", 'Use "train", "validation" or "test".')
        return {"train": self.train, "validation": self.validation, "test": self.test}[split]

    def label_counts(self, split: str = "train") -> dict[str, int]:
        """Examples per label name in a split, in the order of :attr:`labels` (zeros included)."""
        counts = Counter(e.label for e in self.split(split))
        return {name: counts[i] for i, name in enumerate(self.labels)}

    @property
    def majority_label(self) -> str:
        """Train's most frequent label (the first in :attr:`labels` on a tie)."""
        counts = self.label_counts("train")
        return max(self.labels, key=lambda name: (counts[name], -self.labels.index(name)))

    def majority_baseline(self) -> float:
        """Accuracy on test of always predicting :attr:`majority_label`: the score a fine-tune must beat (NaN with no test)."""
        if not self.test:
            return float("nan")
        return self.label_counts("test")[self.majority_label] / len(self.test)

    def summary(self) -> dict:
        """Sizes, label counts per split and the majority baseline, as plain values (a table row, JSON)."""
        return {"name": self.name, "kind": self.kind, "labels": list(self.labels),
                "sizes": {"train": len(self.train), "validation": len(self.validation), "test": len(self.test)},
                "label_counts": {split: self.label_counts(split) for split in TASK_SPLITS},
                "majority_label": self.majority_label, "majority_baseline": self.majority_baseline(),
                "source": self.source}


# -- built-in tasks ------------------------------------------------------------------------------------------------


def load_task(name: str, max_train: int | None = None, max_test: int | None = None, seed: int = 0,
              max_validation: int | None = None) -> Task:
    """A built-in task, with at most ``max_train`` / ``max_test`` / ``max_validation`` examples (stratified by label,
    the same for the same seed, another for another seed: where a split holds more than asked for, each seed scores
    its own sample of it).

    Raises:
        UnknownTask: ``name`` is not in :data:`BUILT_IN`.
        InvalidConfig: a size below 1.
    """
    if not isinstance(name, str) or name not in BUILT_IN:
        raise UnknownTask(name, BUILT_IN)
    full = _read_built_in(name)
    return Task(full.name, full.kind, full.labels, _subsample(full.train, max_train, seed, "max_train"),
                _subsample(full.test, max_test, seed + 1, "max_test"), full.source,
                _subsample(full.validation, max_validation, seed + 2, "max_validation"))


def class_count(name: str) -> int:
    """How many classes a built-in task has (read from its file, so a label says what the data holds).

    Raises:
        UnknownTask: ``name`` is not in :data:`BUILT_IN`.
    """
    if not isinstance(name, str) or name not in BUILT_IN:
        raise UnknownTask(name, BUILT_IN)
    return len(_read_built_in(name).labels)


@lru_cache(maxsize=len(BUILT_IN))
def _read_built_in(name: str) -> Task:
    """The whole task, parsed once per process (a Task is immutable, so the cached one is shared)."""
    with gzip.open(DATA_DIR / f"{name}.csv.gz", "rt", encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    if name == "wic":
        labels = ("different", "same")  # the file's 0 and 1
        examples = [(r["split"], Example(r["text_a"], int(r["label"]), r["text_b"], (int(r["start_a"]), int(r["end_a"])),
                                         (int(r["start_b"]), int(r["end_b"])), f"{name}:{line}", r["lemma"]))
                    for line, r in enumerate(rows, start=2)]
        kind = "pair"
    else:
        labels = tuple(sorted({r["label"] for r in rows}))
        index = {label: i for i, label in enumerate(labels)}
        examples = [(r["split"], Example(r["text"], index[r["label"]], span=(int(r["start"]), int(r["end"])),
                                         item=f"{name}:{line}", cluster=r["lemma"])) for line, r in enumerate(rows, start=2)]
        kind = "token"
    by_split = {split: tuple(e for s, e in examples if s == split) for split in TASK_SPLITS}
    return Task(name, kind, labels, by_split["train"], by_split["test"], WORDNET_SOURCE, by_split["validation"])


def _subsample(examples: tuple[Example, ...], n: int | None, seed: int, what: str) -> tuple[Example, ...]:
    """At most ``n`` examples, each label keeping its share (largest remainders; at least one each when n allows), in file order."""
    if n is None:
        return examples
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InvalidConfig(f"{what} must be a whole number of at least 1, not {n!r}.")
    if n >= len(examples):
        return examples
    by_label: dict[int, list[int]] = {}
    for i, e in enumerate(examples):
        by_label.setdefault(e.label, []).append(i)
    exact = {label: n * len(idx) / len(examples) for label, idx in sorted(by_label.items())}
    quota = {label: int(q) for label, q in exact.items()}
    if n >= len(by_label):
        quota = {label: max(1, q) for label, q in quota.items()}
    for label in sorted(exact, key=lambda label: (quota[label] - exact[label], label)):
        if sum(quota.values()) >= n:
            break
        quota[label] += 1
    while sum(quota.values()) > n:  # the floors of one per label went over: trim the largest
        quota[max(quota, key=lambda label: (quota[label], -label))] -= 1
    rng = random.Random(seed)
    chosen = sorted(i for label in sorted(by_label) for i in rng.sample(by_label[label], quota[label]))
    return tuple(examples[i] for i in chosen)


# -- a user's CSV ------------------------------------------------------------------------------------------------


def parse_task_csv(data: bytes, name: str = "my-task", test_fraction: float = 0.2, seed: int = 0) -> Task:
    """A task from an uploaded CSV: columns ``text,label`` (kind ``"single"``) or ``text_a,text_b,label`` (``"pair"``).

    Other columns are ignored. Everything is checked before the task is built: size (:data:`MAX_TASK_BYTES`), row
    count (:data:`MAX_TASK_ROWS`, counted before the rows are parsed), UTF-8 text (a byte-order mark is dropped),
    the columns, an empty text or label on any line, 2 to :data:`MAX_LABELS` labels with at least 2 rows each.
    Train and test are split by label (each label in both), the same for the same seed, and a tenth of the rows held
    out for validation where every label has enough; labels are sorted (numerically when they are all whole numbers).

    Raises:
        InvalidTaskFile: the problem, with the line numbers at fault (``err.lines``; line 1 is the header).
        InvalidConfig: ``test_fraction`` not strictly between 0 and 1.
    """
    if not 0 < test_fraction < 1:
        raise InvalidConfig(f"test_fraction must be between 0 and 1, not {test_fraction!r}.", "0.2 keeps a fifth for testing.")
    text = _decode(data)
    header, rows = _read_rows(text)
    pair = "text_a" in header or "text_b" in header
    columns = ("text_a", "text_b", "label") if pair else ("text", "label")
    missing = [c for c in columns if c not in header]
    if missing:
        raise InvalidTaskFile(f"The CSV has no {' or '.join(repr(c) for c in missing)} column (its header: "
                              f"{', '.join(repr(h) for h in header[:10])}).",
                              "The first line names the columns: text,label for one text, text_a,text_b,label for a pair.", [1])
    at = {c: header.index(c) for c in columns}
    texts = ("text_a", "text_b") if pair else ("text",)

    problems: dict[str, list[int]] = {}
    values, row_lines = [], []
    for line, row in rows:
        if len(row) < len(header):
            problems.setdefault(f"fewer fields than the header's {len(header)} (a missing {' or '.join(columns[1:])}?)",
                                []).append(line)
            continue
        if len(row) > len(header):
            problems.setdefault(f"more fields than the header's {len(header)} (an unquoted comma?)", []).append(line)
            continue
        cells = {c: row[at[c]].strip() for c in columns}
        for c in columns:
            if not cells[c]:
                problems.setdefault(f"an empty {c}", []).append(line)
            elif len(cells[c]) > MAX_TEXT_CHARS:
                problems.setdefault(f"a {c} longer than {MAX_TEXT_CHARS:,} characters", []).append(line)
        values.append((cells[texts[0]], cells["text_b"] if pair else None, cells["label"]))
        row_lines.append(line)
    if problems:
        what, lines = next(iter(problems.items()))
        extra = f" Also: {'; '.join(f'{w} on {_lines(ls)}' for w, ls in list(problems.items())[1:])}." if len(problems) > 1 else ""
        hint = ("Every row needs a text_b when the column is there." if "text_b" in what else
                "Quote a text that contains a comma (\"like, this\")." if "comma" in what else
                "Fill in or remove those rows.")
        raise InvalidTaskFile(f"Rows with {what}: {_lines(lines)}.{extra}", hint, sorted({n for ls in problems.values() for n in ls}))
    if not values:
        raise InvalidTaskFile("The CSV has a header but no rows.", "Add one row per example under the header.")

    counts = Counter(label for _, _, label in values)
    if len(counts) < 2:
        raise InvalidTaskFile(f"Every row has the label {next(iter(counts))!r}: a classifier needs at least two labels.",
                              "Add examples of the other class(es).")
    if len(counts) > MAX_LABELS:
        raise InvalidTaskFile(f"{len(counts):,} different labels; at most {MAX_LABELS} are taken.",
                              "Is the label column a text or an id? Labels are classes, each with several examples.")
    single = sorted(label for label, n in counts.items() if n < 2)
    if single:
        raise InvalidTaskFile(f"{len(single)} label(s) with a single row ({', '.join(repr(s) for s in single[:10])}"
                              f"{', ...' if len(single) > 10 else ''}): each label needs one row for training and one for testing.",
                              "Add examples of those labels, or remove their rows.")

    labels = tuple(sorted(counts, key=_label_order))
    index = {label: i for i, label in enumerate(labels)}
    examples = [Example(a, index[label], b, item=f"line:{line}") for line, (a, b, label) in zip(row_lines, values, strict=True)]
    test_rows = _stratified_test_rows([e.label for e in examples], test_fraction, seed)
    rest = [i for i in range(len(examples)) if i not in test_rows]
    # A validation split (a tenth of the rows) where every label can spare one row for it and keep two for training.
    spare = all(n - round(n * test_fraction) >= 3 for n in counts.values()) and len(rest) >= 20
    held = {rest[i] for i in _stratified_test_rows([examples[i].label for i in rest], 0.125, seed + 1)} if spare else set()
    return Task(str(name)[:100], "pair" if pair else "single", labels,
                tuple(e for i, e in enumerate(examples) if i not in test_rows and i not in held),
                tuple(e for i, e in enumerate(examples) if i in test_rows), f"uploaded CSV ({len(examples):,} rows)",
                tuple(e for i, e in enumerate(examples) if i in held))


def _label_order(label: str) -> tuple[int, int, str]:
    """Whole numbers first, in numeric order ("2" before "10"), then the rest alphabetically."""
    try:
        return (0, int(label), label)
    except ValueError:
        return (1, 0, label)


def _decode(data: bytes) -> str:
    """The file as text, refusing a file too big, binary (a spreadsheet, a zip) or not UTF-8."""
    if isinstance(data, str):
        data = data.encode("utf-8")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise InvalidTaskFile(f"Expected the file's bytes, got {type(data).__name__}.")
    data = bytes(data)
    if len(data) > MAX_TASK_BYTES:
        raise InvalidTaskFile(f"The file is {len(data) / 2**20:.1f} MB; at most {MAX_TASK_BYTES // 2**20} MB are taken.",
                              "Sample it down: a few thousand rows are plenty to fine-tune here.")
    if data.startswith((b"PK\x03\x04", b"\xd0\xcf\x11\xe0")):
        raise InvalidTaskFile("This is a spreadsheet or zip file, not a CSV.", 'Save it as "CSV UTF-8" and upload that.')
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InvalidTaskFile("The file is UTF-16 text, not UTF-8.", 'Save it as "CSV UTF-8" and upload that.')
    if b"\x00" in data:
        raise InvalidTaskFile("The file holds binary data (NUL bytes), not CSV text.", 'Save it as "CSV UTF-8" and upload that.')
    try:
        return data.decode("utf-8-sig")  # -sig: a byte-order mark (Excel's "CSV UTF-8") is dropped
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise InvalidTaskFile(f"The file is not UTF-8 text (an undecodable byte on line {line}).",
                              'Save it as "CSV UTF-8" (in Excel: Save As → CSV UTF-8).', [line]) from None


def _read_rows(text: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(the header, lower-cased; every non-blank row with the line it starts on), refusing more than MAX_TASK_ROWS rows.

    The row count is checked first on newlines (a row spans at least one), so a huge file is refused without being
    parsed; only when there are more lines than rows allowed (quoted texts can span lines) are rows counted exactly.
    """
    too_many = InvalidTaskFile(f"The file has more than {MAX_TASK_ROWS:,} rows.",
                               "Sample it down: a few thousand rows are plenty to fine-tune here.")
    if max(text.count("\n"), text.count("\r")) > MAX_TASK_ROWS + 1:
        n = 0
        try:
            for row in csv.reader(io.StringIO(text, newline="")):
                n += any(row)
                if n > MAX_TASK_ROWS + 1:
                    raise too_many
        except csv.Error:
            pass  # the full read below names the line
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip().lower() for h in next(reader)]
    except StopIteration:
        raise InvalidTaskFile("The file is empty.", "Upload a CSV whose first line is text,label (or text_a,text_b,label).") from None
    except csv.Error as err:
        raise InvalidTaskFile(f"The header line cannot be read as CSV ({err}).") from None
    dupes = sorted({h for h in header if h and header.count(h) > 1})
    if dupes:
        raise InvalidTaskFile(f"The header names {', '.join(repr(d) for d in dupes)} more than once.", "Give each column one name.", [1])
    rows, start = [], reader.line_num + 1
    try:
        for row in reader:
            if any(cell.strip() for cell in row):  # blank lines (a trailing newline, spacing) are not rows
                rows.append((start, row))
                if len(rows) > MAX_TASK_ROWS:
                    raise too_many
            start = reader.line_num + 1
    except csv.Error as err:
        if "field larger than field limit" in str(err):
            raise InvalidTaskFile(f"Line {start} holds a text longer than {MAX_TEXT_CHARS:,} characters.",
                                  "Shorten it: models read a few hundred words at most.", [start]) from None
        raise InvalidTaskFile(f"Line {start} cannot be read as CSV ({err}).", "Check its quotes: a quoted text ends with a quote.",
                              [start]) from None
    return header, rows


def _lines(lines: Sequence[int]) -> str:
    """``line 3`` / ``lines 3, 7 and 9`` / ``lines 3, 7, ... and 40 more``."""
    shown = ", ".join(str(n) for n in lines[:_SHOWN_LINES])
    if len(lines) == 1:
        return f"line {shown}"
    if len(lines) > _SHOWN_LINES:
        return f"lines {shown} and {len(lines) - _SHOWN_LINES:,} more"
    head, _, last = shown.rpartition(", ")
    return f"lines {head} and {last}"


def _stratified_test_rows(labels: Sequence[int], test_fraction: float, seed: int) -> set[int]:
    """Row indices for test: ``test_fraction`` of each label (at least one, and at least one left for train)."""
    rng = random.Random(seed)
    by_label: dict[int, list[int]] = {}
    for i, label in enumerate(labels):
        by_label.setdefault(label, []).append(i)
    test: set[int] = set()
    for label in sorted(by_label):
        idx = by_label[label]
        k = min(len(idx) - 1, max(1, round(test_fraction * len(idx))))
        test.update(rng.sample(idx, k))
    return test
