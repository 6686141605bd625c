"""The fine-tuning lab's downstream tasks: the WordNet builder, the committed files, loading, and users' CSVs.

The builder runs on a tiny hand-written WordNet (the real one need not be installed); the committed files are
checked for WiC's rules and against the numbers data/tasks/README.md states, so the README cannot drift.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import re
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from analysis.tasks import BUILT_IN, MAX_LABELS, MAX_TASK_ROWS, Task, load_task, parse_task_csv
from core.errors import ExplorerError, InvalidTaskFile, UnknownTask
from tests.helpers import ROOT

TASKS = ROOT / "data" / "tasks"

# -- the builder, on a tiny WordNet ----------------------------------------------------------------------------

LEXNAMES = "03\tnoun.Tops\t1\n06\tnoun.artifact\t1\n14\tnoun.group\t1\n17\tnoun.object\t1\n18\tnoun.person\t1\n" \
           "38\tverb.motion\t2\n41\tverb.social\t2\n"
DATA_NOUN = """\
  1 This software and database is being provided to you, the LICENSEE, by Princeton University
00000001 18 n 01 bank 0 001 @ 00000009 n 0000 | a firm; "she went to the bank to cash a check"; "the bank raised its rates again"; "two banks merged last year"
00000002 17 n 02 bank 1 riverbank 0 000 | land by water; "they pulled the canoe up on the bank"; "he sat on the riverbank and fished"; "the banks flooded"
00000003 06 n 01 bench 0 000 | a long seat; "she sat on the bench in the park"; "the benches were wet after the rain"
00000004 14 n 01 bench 1 000 | the judges as a group; "the bench ruled against the appeal"; "the whole bench agreed with him"
00000005 18 n 01 stranger 0 000 | someone you do not know; "a stranger knocked at the door"; "the strangers left at noon"
00000009 03 n 01 entity 0 000 | that which exists
"""
DATA_VERB = """\
  1 This software and database is being provided to you, the LICENSEE, by Princeton University
00000006 38 v 02 run 0 warm_up 0 001 @ 00000008 v 0000 01 + 02 00 | move fast; "she runs every morning"; "the kids were running outside"; "we warmed up first"
00000007 41 v 01 run 1 000 01 + 08 00 | direct or manage; "she runs a small company in town"; "they are running the meeting well"
00000008 38 v 01 stop 0 000 01 + 02 00 | come to a halt; "the bus stopped at the corner"; "the cars keep stopping at the light"
"""


def _load_builder():
    spec = importlib.util.spec_from_file_location("build_wordnet_tasks", ROOT / "scripts" / "build_wordnet_tasks.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the script loads
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def builder():
    return _load_builder()


@pytest.fixture
def wordnet(tmp_path: Path) -> Path:
    folder = tmp_path / "wordnet"
    folder.mkdir()
    (folder / "lexnames").write_text(LEXNAMES, encoding="latin-1")
    (folder / "data.noun").write_text(DATA_NOUN, encoding="latin-1")
    (folder / "data.verb").write_text(DATA_VERB, encoding="latin-1")
    return folder


def test_builder_reads_the_wordnet_format(builder, wordnet: Path) -> None:
    synsets = {s.id: s for s in builder.read_synsets(wordnet)}
    assert len(synsets) == 9  # the licence header is no synset
    bank = synsets["00000002-n"]
    assert (bank.lexname, bank.lemmas, bank.pos) == ("noun.object", ("bank", "riverbank"), "n")
    assert bank.examples[0] == "they pulled the canoe up on the bank"
    assert synsets["00000001-n"].hypernyms == {"00000009-n"}
    run = synsets["00000006-v"]
    assert (run.lexname, run.lemmas, run.hypernyms) == ("verb.motion", ("run", "warm up"), {"00000008-v"})
    assert synsets["00000009-n"].examples == ()
    # Without a lexnames file (Debian's package has none) the names come from lexnames(5WN).
    (wordnet / "lexnames").unlink()
    assert builder.read_lexnames(wordnet)[38] == "verb.motion"


@pytest.mark.parametrize(("sentence", "lemma", "pos", "word"), [
    ("the bus stopped at the corner", "stop", "v", "stopped"),
    ("we warmed up first", "warm up", "v", "warmed up"),
    ("he carries the bags", "carry", "v", "carries"),
    ("the banks of the river", "bank", "n", "banks"),
    ("Banks merged", "bank", "n", "Banks"),
    ("a well-banked road near the bank", "bank", "n", "bank"),  # not inside a hyphenated word
    ("she ran away", "run", "v", None),  # irregular forms are not looked for
])
def test_find_word_matches_the_lemma_or_a_regular_inflection(builder, sentence: str, lemma: str, pos: str, word: str | None) -> None:
    span = builder.find_word(sentence, lemma, pos)
    assert (sentence[span[0]:span[1]] if span else None) == word


def test_the_builder_is_deterministic(builder, wordnet: Path) -> None:
    def build() -> tuple[bytes, bytes]:
        synsets = builder.read_synsets(wordnet)
        wic = builder.build_wic(synsets, caps={"train": 100, "validation": 100, "test": 100})
        supersense = builder.build_supersense(synsets, min_class_train=1)
        return builder.to_csv_gz(wic, builder.WIC_COLUMNS), builder.to_csv_gz(supersense, builder.SUPERSENSE_COLUMNS)

    first = build()
    assert build() == first
    wic = pd.read_csv(io.BytesIO(first[0]), compression="gzip", keep_default_na=False)
    assert len(wic) > 0 and set(wic.lemma) <= {"bank", "bench", "run"}  # polysemous words only: not "stranger", "stop"
    assert set(wic.columns) == set(builder.WIC_COLUMNS)
    for split, part in wic.groupby("split"):
        assert (part.label == 1).sum() == (part.label == 0).sum(), split
    assert ((wic.synset_a == wic.synset_b) == (wic.label == 1)).all()
    supersense = pd.read_csv(io.BytesIO(first[1]), compression="gzip", keep_default_na=False)
    lexname = {s.id: s.lexname for s in builder.read_synsets(wordnet)}
    assert len(supersense) > 0 and (supersense.label == supersense.synset.map(lexname)).all()
    assert set(supersense.label[supersense.split == "test"]) <= set(supersense.label[supersense.split == "train"])
    for r in supersense.itertuples():
        _check_span(r.text, r.start, r.end, r.lemma)


def test_main_writes_the_same_bytes_twice(builder, wordnet: Path, tmp_path: Path) -> None:
    builder.main(str(wordnet), tmp_path / "a")
    builder.main(str(wordnet), tmp_path / "b")
    for name in ("wic.csv.gz", "supersense.csv.gz"):
        data = (tmp_path / "a" / name).read_bytes()
        assert data == (tmp_path / "b" / name).read_bytes()
        assert data[4:8] == b"\0\0\0\0"  # gzip mtime 0


# -- the committed files ------------------------------------------------------------------------------------------


def _read(name: str) -> pd.DataFrame:
    return pd.read_csv(TASKS / f"{name}.csv.gz", compression="gzip", keep_default_na=False)


@pytest.fixture(scope="module")
def frames() -> dict[str, pd.DataFrame]:
    return {name: _read(name) for name in BUILT_IN}


@pytest.mark.parametrize("name", BUILT_IN)
def test_files_are_small_and_have_three_splits(name: str, frames: dict[str, pd.DataFrame]) -> None:
    assert (TASKS / f"{name}.csv.gz").stat().st_size < 1.5e6
    assert set(frames[name].split) == {"train", "validation", "test"}


@pytest.mark.parametrize("name", BUILT_IN)
def test_nothing_of_a_held_out_row_is_in_train(name: str, frames: dict[str, pd.DataFrame]) -> None:
    """No lemma, sentence, synset or word of a lemma of a validation or test row occurs in train (the leak counts
    data/tasks/README.md states are these, and 0)."""
    df = frames[name]
    texts = ["text"] if name == "supersense" else ["text_a", "text_b"]
    synsets = ["synset"] if name == "supersense" else ["synset_a", "synset_b"]
    train, held = df[df.split == "train"], df[df.split != "train"]
    assert not set(train.lemma) & set(held.lemma)
    assert not set(train[texts].to_numpy().ravel()) & set(held[texts].to_numpy().ravel())
    assert not set(train[synsets].to_numpy().ravel()) & set(held[synsets].to_numpy().ravel())
    assert not {w for lemma in train.lemma for w in lemma.split()} & {w for lemma in held.lemma for w in lemma.split()}
    assert "Leaks from validation and test into train: 0 sentences, 0 synsets, 0 words of lemmas." in \
           (TASKS / "README.md").read_text(encoding="utf-8").split(f"#### `{name}`", 1)[1].split("####", 1)[0]


def test_wic_is_balanced_with_each_sentence_pair_once(frames: dict[str, pd.DataFrame]) -> None:
    wic = frames["wic"]
    for split, part in wic.groupby("split"):
        counts = part.label.value_counts()
        assert counts[0] == counts[1], split
    pairs = [frozenset(p) for p in zip(wic.text_a, wic.text_b, strict=True)]
    assert len(set(pairs)) == len(pairs)
    assert all(len(p) == 2 for p in pairs)  # never a sentence with itself
    assert ((wic.synset_a == wic.synset_b) == (wic.label == 1)).all()
    assert set(wic.pos) == {"n", "v"}


def _is_form_of(word: str, lemma: str) -> bool:
    """An oracle written apart from the builder: ``word`` is ``lemma`` with a regular English ending."""
    if word == lemma:
        return True
    stem = lemma[:-2] if lemma.endswith("ie") else lemma[:-1] if lemma.endswith(("e", "y")) else lemma
    suffix = word[len(stem):]
    endings = {"s", "es", "d", "ed", "ing", "e", "eing", "y", "ie", "ies", "ied", "ying", "ys", "yed", "yes"}
    return word.startswith(stem) and (suffix in endings or suffix in {stem[-1] + "ed", stem[-1] + "ing"})


def _check_span(text: str, start: int, end: int, lemma: str) -> None:
    word = text[start:end].lower()
    words, lemma_words = word.split(), lemma.split()
    assert len(words) == len(lemma_words) and all(_is_form_of(w, lw) for w, lw in zip(words, lemma_words, strict=True)), (word, lemma)
    assert not (start > 0 and (text[start - 1].isalnum() or text[start - 1] == "-")), text  # a word of its own
    assert not (end < len(text) and (text[end].isalnum() or text[end] == "-")), text


def test_spans_point_at_the_word(frames: dict[str, pd.DataFrame]) -> None:
    for r in frames["wic"].itertuples():
        _check_span(r.text_a, r.start_a, r.end_a, r.lemma)
        _check_span(r.text_b, r.start_b, r.end_b, r.lemma)
    for r in frames["supersense"].itertuples():
        _check_span(r.text, r.start, r.end, r.lemma)


def test_supersense_test_labels_occur_in_train(frames: dict[str, pd.DataFrame]) -> None:
    ss = frames["supersense"]
    train = set(ss.label[ss.split == "train"])
    assert set(ss.label[ss.split == "test"]) <= train
    assert all(label.split(".")[0] in ("noun", "verb") for label in train)
    # 26 noun and 15 verb classes in WordNet 3.0: the ones with too few examples are dropped, the rest kept.
    assert 30 <= len(train) <= 41


def _readme_tables() -> dict[str, tuple[dict[str, tuple[int, int]], str, float]]:
    """From data/tasks/README.md, per task: {label: (train, validation, test)}, the total row under "total", the majority
    label and accuracy."""
    text = (TASKS / "README.md").read_text(encoding="utf-8")
    out = {}
    for name in BUILT_IN:
        section = text.split(f"#### `{name}`", 1)[1].split("####", 1)[0]
        rows = {}
        for cells in re.findall(r"^\|\s*([^|]+?)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|\s*(\d+)\s*\|$", section, flags=re.MULTILINE):
            rows[cells[0].strip("*")] = (int(cells[1]), int(cells[2]), int(cells[3]))
        majority, accuracy = re.search(r"label, `([^`]+)`\) on test: accuracy \*\*([0-9.]+)\*\*", section).groups()
        out[name] = (rows, majority, float(accuracy))
    return out


@pytest.mark.parametrize("name", BUILT_IN)
def test_readme_states_the_files_sizes_counts_and_baseline(name: str, frames: dict[str, pd.DataFrame]) -> None:
    rows, majority, accuracy = _readme_tables()[name]
    df = frames[name]
    counts = df.groupby(["label", "split"]).size()
    splits = ("train", "validation", "test")
    assert rows.pop("total") == tuple((df.split == split).sum() for split in splits)
    assert rows == {str(label): tuple(int(counts.get((label, split), 0)) for split in splits) for label in sorted(set(df.label))}
    task = load_task(name)  # and the loader sees the same numbers
    names = {str(k): (task.labels[int(k)] if name == "wic" else k) for k in rows}
    assert {names[k]: v for k, v in rows.items()} == {label: tuple(task.label_counts(split)[label] for split in splits)
                                                      for label in task.labels}
    assert task.majority_label == names[majority]
    assert round(task.majority_baseline(), 3) == accuracy


# -- loading ------------------------------------------------------------------------------------------------------


def test_load_task_gives_the_kinds_and_spans() -> None:
    wic, ss = load_task("wic"), load_task("supersense")
    assert (wic.kind, wic.labels) == ("pair", ("different", "same"))
    assert ss.kind == "token" and "verb.motion" in ss.labels and list(ss.labels) == sorted(ss.labels)
    e = wic.train[0]
    assert e.text_b and e.span and e.span_b and e.label in (0, 1)
    assert all(e.span is not None and e.text_b is None and 0 <= e.span[0] < e.span[1] <= len(e.text) for e in ss.test)
    summary = ss.summary()
    assert summary["sizes"] == {"train": len(ss.train), "validation": len(ss.validation), "test": len(ss.test)}
    assert len({e.item for e in (*ss.train, *ss.validation, *ss.test)}) == len(ss.train) + len(ss.validation) + len(ss.test)
    assert all(e.cluster for e in wic.test) and len({e.cluster for e in wic.test}) < len(wic.test)  # lemmas: clusters
    assert sum(summary["label_counts"]["test"].values()) == len(ss.test)
    assert 0 < summary["majority_baseline"] < 0.2


@pytest.mark.parametrize("name", BUILT_IN)
def test_load_task_subsamples_deterministically(name: str) -> None:
    a = load_task(name, max_train=300, max_test=100, seed=7)
    assert a == load_task(name, max_train=300, max_test=100, seed=7)
    assert (len(a.train), len(a.test)) == (300, 100)
    assert a.train != load_task(name, max_train=300, max_test=100, seed=8).train
    full = load_task(name)
    assert set(a.train) <= set(full.train) and set(a.test) <= set(full.test)
    # Each label keeps roughly its share.
    for label, n in full.label_counts("train").items():
        assert abs(a.label_counts("train")[label] - 300 * n / len(full.train)) <= 1.5
    if name == "wic":
        assert a.label_counts("train") == {"different": 150, "same": 150}


def test_load_task_refuses_an_unknown_name_and_a_bad_size() -> None:
    with pytest.raises(UnknownTask, match="wic") as err:
        load_task("glue-sst2")
    assert isinstance(err.value, LookupError) and isinstance(err.value, ExplorerError)
    with pytest.raises(ExplorerError, match="max_train"):
        load_task("wic", max_train=0)


# -- a user's CSV -------------------------------------------------------------------------------------------------


def _single(n: int = 10) -> str:
    return "text,label\n" + "".join(f"review number {i},{'pos' if i % 2 else 'neg'}\n" for i in range(n))


def test_parse_task_csv_accepts_a_single_text_file() -> None:
    task = parse_task_csv(("\ufeff" + _single(20)).encode("utf-8"), name="reviews", seed=3)  # a BOM, as Excel writes
    assert isinstance(task, Task)
    assert (task.name, task.kind, task.labels) == ("reviews", "single", ("neg", "pos"))
    assert (len(task.train), len(task.test)) == (16, 4)
    assert task.label_counts("test") == {"neg": 2, "pos": 2}  # stratified
    assert task == parse_task_csv(("\ufeff" + _single(20)).encode("utf-8"), name="reviews", seed=3)
    assert task.test != parse_task_csv(_single(20).encode(), name="reviews", seed=4).test
    assert task.majority_baseline() == 0.5


def test_parse_task_csv_accepts_a_pair_file_with_quotes_and_numeric_labels() -> None:
    rows = ['"A man, a plan",A canal,0', "It rains,It pours,1", "Cats purr,Dogs bark,2", "x,y,10", "p,q,10",
            "a,b,0", "c,d,1", "e,f,2"]
    task = parse_task_csv(("Text_A,text_b,label,notes\n" + "\n".join(r + ",note" for r in rows) + "\n\n").encode())
    assert (task.kind, task.labels) == ("pair", ("0", "1", "2", "10"))  # whole numbers in numeric order
    assert len(task.train) + len(task.test) == 8 and len(task.test) == 4  # one of each label in test
    assert "A man, a plan" in {e.text for e in task.train + task.test}
    assert all(e.text_b for e in task.train + task.test)


def _refusal(data: bytes) -> InvalidTaskFile:
    with pytest.raises(InvalidTaskFile) as err:
        parse_task_csv(data)
    assert isinstance(err.value, ValueError) and err.value.hint
    return err.value


@pytest.mark.parametrize(("data", "says"), [
    ("text,label\n" + "".join(f"t{i},pos\n" for i in range(5)), "at least two labels"),
    ("text,category\nhello,a\nworld,b\n", "'label' column"),
    ("sentence,label\nhello,a\nworld,b\n", "'text' column"),
    ("text,label\n" + "".join(f"t{i},l{i}\nu{i},l{i}\n" for i in range(MAX_LABELS + 1)), f"at most {MAX_LABELS}"),
    ("text,label\na,x\nb,x\nc,y\n", "single row"),
    ("text_a,label\na,x\nb,y\n", "'text_b' column"),
    ("", "empty"),
    ("text,label\n", "no rows"),
    ("text,text,label\na,b,c\n", "more than once"),
])
def test_parse_task_csv_refuses_a_bad_file(data: str, says: str) -> None:
    assert says in str(_refusal(data.encode("utf-8")))


def test_parse_task_csv_names_the_line_of_an_empty_text() -> None:
    err = _refusal(b"text,label\ngood,a\n  ,b\nfine,a\nok,b\n")
    assert "empty text" in str(err) and "line 3" in str(err) and err.lines == [3]


def test_parse_task_csv_names_the_lines_of_a_missing_or_empty_text_b() -> None:
    err = _refusal(b"text_a,text_b,label\na,b,x\nc,y\ne,,y\ng,h,x\n")
    assert "line 3" in str(err) and "line 4" in str(err) and "text_b" in str(err)
    assert err.lines == [3, 4]
    err = _refusal(b"text_a,text_b,label\na,b,x\nc,,y\ne,f,y\ng,h,x\n")
    assert "empty text_b" in str(err) and "line 3" in str(err) and "text_b" in err.hint


def test_parse_task_csv_refuses_binary_bytes() -> None:
    assert "UTF-8" in str(_refusal(bytes(range(256)) * 4))
    assert "spreadsheet" in str(_refusal(b"PK\x03\x04" + bytes(100)))
    assert "UTF-8" in str(_refusal("text,label\ncafé,a\nthé,b\n".encode("latin-1")))


def test_parse_task_csv_refuses_a_million_rows_fast() -> None:
    data = ("text,label\n" + "a fine film,pos\n" * 10**6).encode()
    start = time.perf_counter()
    err = _refusal(data)
    assert time.perf_counter() - start < 2
    assert f"{MAX_TASK_ROWS:,} rows" in str(err)


def test_parse_task_csv_refuses_a_file_too_big() -> None:
    assert "MB" in str(_refusal(b"text,label\n" + b"x" * (21 * 2**20)))


def test_committed_files_are_gzip_with_no_timestamp() -> None:
    for name in BUILT_IN:
        with (TASKS / f"{name}.csv.gz").open("rb") as f:
            head = f.read(8)
        assert head[:2] == b"\x1f\x8b" and head[4:8] == b"\0\0\0\0"
        with gzip.open(TASKS / f"{name}.csv.gz", "rt", encoding="utf-8") as f:
            assert f.readline().startswith("split,lemma,pos,")


def test_random_bytes_are_a_task_or_an_invalid_task_file() -> None:
    """Property: whatever a user uploads as a task CSV (random bytes, random text, random rows under a valid header),
    parse_task_csv returns a task or raises InvalidTaskFile, never anything else."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from analysis.tasks import parse_task_csv
    from core.errors import InvalidTaskFile

    cell = st.one_of(st.text(max_size=12), st.integers(-5, 5).map(str), st.sampled_from(["", '"', '""', "\r", "\x00", "=1+1"]))
    rows = st.lists(st.lists(cell, min_size=1, max_size=4), max_size=40)
    header = st.sampled_from(["text,label", "text_a,text_b,label", "label,text", "text", "a,b,c", ""])

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(st.one_of(st.binary(max_size=3000), st.text(max_size=800).map(str.encode),
                     st.tuples(header, rows).map(lambda hr: (hr[0] + "\n" + "\n".join(",".join(r) for r in hr[1])).encode())))
    def check(raw: bytes) -> None:
        try:
            task = parse_task_csv(raw)
        except InvalidTaskFile:
            return
        assert task.train and task.test and len(task.labels) >= 2

    check()

