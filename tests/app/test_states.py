"""Every state a user can reach draws: the crawl of ``tests/helpers/crawl.py`` over every page the entry script registers.

A state fails when the page raises, shows Streamlit's exception box or the app's "Something unexpected went wrong", or
offers a download that does not build. The pages and their widgets are discovered, not listed here.

- ``test_every_widget_of_a_page_draws`` (``slow``, run by CI): every single move and every URL key with a valid,
  a malformed and an out-of-range value, in a seeded world: the labs hold finished experiments with verdicts, and
  the presentation pack holds a chart and a table added on other pages, as a user would have put them there.
- ``test_a_sample_of_every_page_draws`` (the default suite, a few minutes): each page's defaults and presentation
  mode and every :data:`SAMPLE`-th single move and URL key, in the same seeded world; in a run that also crawls every
  widget, these states are the every-widget crawl's own, counted apart, and not tried a second time.
- ``test_every_widget_draws_with_only_the_bundled_model`` (``slow``): every :data:`BUNDLED_SAMPLE`-th single move on
  an offline machine that has only the model shipped in the pip package (the state of a new classroom laptop).
- The whole crawl adds every pair of choice widgets (at most :data:`PAIR_CAP` options of each) and every widget a
  choice reveals: about 3,200 states, over half an hour on 2 cores, more than CI can spend beside the rest of the
  suite, so it is a bench: ``python bench/crawl.py`` (numbers in docs/benchmarks.md).

Each page runs with its own model folder (a copy of the tiny models) and database, and no lab worker
(``BFE_LAB_CONCURRENCY=0``): a pressed Start queues its runs, and the page shows the queue. The seeded world is built
once per test process (``conftest.seeded_world``) and copied for each page. Every state starts from an unwritten copy
of its page's world: one is made after each state that wrote, detected from the files
(:class:`tests.helpers.crawl.Worlds`).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.helpers import SUMMARY, crawl

PAGES = crawl.pages()
#: Each page's every-widget crawl and its sampled crawl run on one xdist worker, in that order (the sample reads what
#: the every-widget crawl found: test_a_sample_of_every_page_draws).
PAIRED = [pytest.param(p, marks=pytest.mark.xdist_group(f"crawl-{Path(p).stem}")) for p in PAGES]
#: The quick crawl takes every SAMPLE-th single move of a page.
SAMPLE = 9  # 7 until the class panel joined every page run: the default suite stays under 5 minutes
#: Options of each widget tried in the pairs (bench/crawl.py's default).
PAIR_CAP = 3
#: The bundled-model-only crawl takes every BUNDLED_SAMPLE-th single move of a page.
BUNDLED_SAMPLE = 3


@pytest.fixture(autouse=True)
def own_world(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model folder of the page's own (a copy of the tiny models), a fresh database (conftest), no lab worker, and
    Streamlit's caches empty, as on a new server."""
    import streamlit as st

    models = tmp_path / "models"
    shutil.copytree(tiny_dir, models, symlinks=True)
    monkeypatch.setenv("BFE_MODEL_DIR", str(models))
    monkeypatch.setenv("BFE_LAB_CONCURRENCY", "0")
    st.cache_data.clear()
    st.cache_resource.clear()
    return models


def _check(result: crawl.Crawl, what: str) -> None:
    SUMMARY.append(f"{what}: {result.line()}")
    assert result.states >= 2, f"{result.page}: the crawl reached almost nothing ({result.states} states)"
    assert not result.failures, "\n".join(result.failures[:15]) + (f"\n… {len(result.failures) - 15} more"
                                                                   if len(result.failures) > 15 else "")


#: What the every-widget crawl of each page found in this process (the sampled crawl of the page reads it).
EVERY_WIDGET: dict[str, crawl.Crawl] = {}


@pytest.mark.slow
@pytest.mark.parametrize("page", PAIRED)
def test_every_widget_of_a_page_draws(page: str, seeded_world_copy: Path, tmp_path: Path) -> None:
    fresh = crawl.Worlds(tmp_path / "worlds")
    result = crawl.crawl_page(page, pairs=False, prelude=crawl.preludes(page), fresh=fresh, mark_sample=SAMPLE)
    EVERY_WIDGET[page] = result
    _check(result, "state crawl (every widget, seeded labs)")


@pytest.mark.parametrize("page", PAIRED)
def test_a_sample_of_every_page_draws(page: str, seeded_world_copy: Path, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    """Every SAMPLE-th state of the every-widget crawl. Where that crawl runs in the same session (the full suite), it
    has just tried these very states in the same world (conftest orders the two, on one worker) and counted them apart,
    so they are checked from what it found instead of being tried twice; else (``-m "not slow"``) they are tried here."""
    ran = [i for i in request.session.items if i.originalname == "test_every_widget_of_a_page_draws"
           and i.callspec.params["page"] == page]
    if ran and page in EVERY_WIDGET:
        _check(EVERY_WIDGET[page].sample(), "state crawl (sample, tried by the every-widget crawl)")
        return
    fresh = crawl.Worlds(tmp_path / "worlds")
    _check(crawl.crawl_page(page, pairs=False, sample=SAMPLE, prelude=crawl.preludes(page), fresh=fresh),
           "state crawl (sample)")


@pytest.mark.slow
@pytest.mark.parametrize("page", list(crawl.QUESTIONS))
def test_every_widget_draws_while_a_class_answers(page: str, seeded_world_copy: Path, tmp_path: Path) -> None:
    """The teacher's page with its question open (the model's answer hidden): every widget of the class (Reveal,
    Cancel, End the class) moved, and a sample of the page's own (every one of them is crawled outside a class; the
    class panel's widgets outside a class are crawled with Home's states)."""
    fresh = crawl.Worlds(tmp_path / "worlds")
    result = crawl.crawl_page(page, pairs=False, url=False, single_cap=3, sample=SAMPLE, prelude=crawl.asked(page), fresh=fresh)
    fresh.ready()
    base = crawl.open_page(page, prelude=crawl.asked(page))
    ours = {ref: w for ref, w in crawl.widgets(base).items() if ref.key and ref.key.startswith((crawl.QUESTIONS[page][0], "class_"))}
    assert {f"{crawl.QUESTIONS[page][0]}_reveal", f"{crawl.QUESTIONS[page][0]}_cancel", "class_end"} <= {r.key for r in ours}
    for ref, w in ours.items():
        for move in crawl.moves(ref, w):
            if fresh.ready():
                result.worlds += 1
            ok, found, _ = crawl.run_state(page, (move,), prelude=crawl.asked(page))
            assert ok, f"{move} could not be made"
            result.states += 1
            result.failures += [f"{page} [{move}]: " + " | ".join(dict.fromkeys(found))] if found else []
    _check(result, "state crawl (a class answering)")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_widget_draws_with_only_the_bundled_model(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bundled-only"
    empty.mkdir()
    monkeypatch.setenv("BFE_MODEL_DIR", str(empty))
    fresh = crawl.Worlds(tmp_path / "worlds")
    _check(crawl.crawl_page(page, pairs=False, url=False, sample=BUNDLED_SAMPLE, fresh=fresh), "state crawl (bundled model only)")


def test_a_state_that_writes_starts_from_a_fresh_world(seeded_world_copy: Path, tmp_path: Path) -> None:
    """A pressed button's writes reach neither the next state nor the start copy: each world is the page's starting
    one, so what a crawl finds does not depend on its order. A copy is made where the world was written (the
    database or the model folder), detected from the files, and not where it was only read."""
    from analysis import results_db
    from analysis.results_db import runs

    before = len(runs.list_runs())
    fresh = crawl.Worlds(tmp_path / "worlds")
    assert fresh.ready()  # the first state always gets a copy of its own
    first = os.environ["DATABASE_URL"]
    assert len(runs.list_runs()) == before and not fresh.written()  # reading writes nothing
    assert not fresh.ready() and os.environ["DATABASE_URL"] == first
    for rid in runs.list_runs()["id"]:
        runs.delete_run(int(rid))
    assert runs.list_runs().empty and fresh.written()
    assert fresh.ready()
    assert os.environ["DATABASE_URL"] != first and len(runs.list_runs()) == before
    second = os.environ["DATABASE_URL"]
    (Path(os.environ["BFE_MODEL_DIR"]) / "stray.bin").write_bytes(b"x")  # a model folder written: a copy too
    assert fresh.ready() and os.environ["DATABASE_URL"] != second
    assert not (Path(os.environ["BFE_MODEL_DIR"]) / "stray.bin").exists()
    results_db.dispose_engines()
    assert not (tmp_path / "worlds" / "world1").exists()  # the old copies are swept


@pytest.mark.parametrize("page", ["views/calculator.py", "views/attention.py", "views/objectives.py"])
def test_a_state_started_from_a_copy_of_the_opened_page_is_the_state_a_new_open_reaches(page: str, tmp_path: Path) -> None:
    """The crawl opens a page once per world and starts each state with moves from a copy of it (crawl.opened): a move
    made on the copy draws exactly what the same move draws on a page opened anew (every element, the address), and
    the copy shares nothing a move changes with the page it was copied from."""
    import re

    def drawn(at) -> tuple[list[str], dict]:
        out: list[str] = []

        def walk(node) -> None:
            if getattr(node, "proto", None) is not None:  # a download's file id is a fresh uuid on every run
                out.append(re.sub(r'deferred_file_id: "\w+"', "", str(node.proto)))
            for child in getattr(node, "children", {}).values():
                walk(child)

        walk(at._tree)
        return out, dict(at.query_params)

    base = crawl.open_page(page)
    before = drawn(base)
    shown = crawl.widgets(base)
    picked = [m for ref, w in shown.items() if ref.key not in crawl.SHARED_SIDEBAR for m in crawl.moves(ref, w, 3)][::5][:4]
    assert len(picked) >= 3
    for move in picked:
        ok, found, copied = crawl.run_state(page, (move,), world=tmp_path)
        ok_new, found_new, anew = crawl.run_state(page, (move,))
        assert ok and ok_new and found == found_new, move
        assert drawn(copied) == drawn(anew), move
    assert crawl._opened and crawl._opened[0][0][-1] == tmp_path  # the states above started from one open page
    assert drawn(crawl._opened[0][1]) == before  # ... which no move changed
    # a move that calls back into the page is made on a page opened anew (its callback holds the opened page's objects)
    backs = {str(m.ref): crawl.calls_back(base, m) for ref, w in shown.items() for m in crawl.moves(ref, w, 1)}
    assert backs["class_start"] and not backs.get("sz_layers", backs.get("at_layer", backs.get("ob_k", False)))


def test_the_url_keys_a_page_declares_are_crawled() -> None:
    """Every page that keeps URL state gives the crawl its keys (read from the dict it passes to restore_url_state,
    whatever its name and whatever its values are)."""
    declared = crawl.url_defaults("views/scaling.py")
    assert {"sc_law", "sc_ds"} <= set(declared) and declared["sc_law"] == "power"
    keeping = [p for p in PAGES if "restore_url_state(" in (crawl.ENTRY.parent / p).read_text(encoding="utf-8")]
    assert len(keeping) >= 9 and all(crawl.url_defaults(p) for p in keeping), [p for p in keeping if not crawl.url_defaults(p)]
    assert "sz_layers" in crawl.url_defaults("views/calculator.py")  # a dict named DEFAULTS_STATE
    assert crawl._out_of_range("3") == [("below zero", "-1"), ("past any bound", "1e308")]
    assert crawl._out_of_range("power")[0] == ("not offered", "no-such-option")


def test_the_crawl_finds_what_it_exists_to_find(tmp_path: Path) -> None:
    """The crawler itself: a page that crashes on one option of a selectbox, on a long text and on a deferred download
    fails it, each by name; a page that refuses them with messages passes."""
    page = tmp_path / "probe.py"
    page.write_text(
        "import streamlit as st\n"
        "from app import ui\n"
        "pick = st.selectbox('Pick', ['fine', 'crash'], key='pr_pick', format_func=str.upper)\n"
        "text = st.text_input('Text', key='pr_text')\n"
        "st.download_button('Get', lambda: 1 / 0 if pick == 'fine' else b'x', 'x.txt', key='pr_dl')\n"
        "with ui.friendly_errors():\n"
        "    if pick == 'crash':\n"
        "        raise KeyError('boom')\n"
        "    if len(text) > 5000:\n"
        "        raise ValueError('too long')\n")
    failures = {line.split(" [", 1)[1].split("]: ", 1)[0]: line.split("]: ", 1)[1]
                for line in crawl.crawl_page(str(page), pairs=False, entry=page).failures}
    assert "ZeroDivisionError" in failures["defaults"]  # the download fails while 'fine' is picked
    assert "unexpected: KeyError: 'boom'" in failures["pr_pick := 'CRASH'"]
    assert "download" not in failures["pr_pick := 'CRASH'"]  # ... and builds once 'crash' is
    assert "unexpected: ValueError: too long" in failures["pr_text := 'huge (20,000 characters)'"]
    assert "unexpected" not in failures["pr_text := 'markup'"]


class _Builds:
    """How many times the downloads below were built (a class: pickled by name, so not part of their inputs)."""

    count = 0


def _download(value: int, fail: bool = False):
    def make() -> bytes:
        _Builds.count += 1
        if fail:
            raise ValueError(f"cannot build {value}")
        return str(value).encode()
    return make


def test_a_download_with_the_same_inputs_is_built_once_and_its_failure_reported_each_time() -> None:
    """The crawl builds each distinct download once: the same function of the same values (a state's rerun, a widget
    that did not change it) gives the same file or the same error, and the error is still reported where offered."""
    _Builds.count = 0
    crawl._deferred[:] = [("a.csv", _download(1)), ("b.csv", _download(1)), ("c.csv", _download(2))]
    assert crawl.build_downloads() == [] and _Builds.count == 2
    crawl._deferred[:] = [("d.csv", _download(3, fail=True))]
    first = crawl.build_downloads()
    crawl._deferred[:] = [("d.csv", _download(3, fail=True))]
    assert crawl.build_downloads() == first == ["download d.csv: ValueError: cannot build 3"] and _Builds.count == 3
