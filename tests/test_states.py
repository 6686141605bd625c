"""Every state a user can reach draws: the crawl of ``tests/crawl.py`` over every page the entry script registers.

A state fails when the page raises, shows Streamlit's exception box or the app's "Something unexpected went wrong", or
offers a download that does not build. The pages and their widgets are discovered, not listed here.

- ``test_a_sample_of_every_page_draws`` (the default suite, a few minutes): each page's defaults and presentation
  mode and every :data:`SAMPLE`-th single move, on the tiny models and an empty database.
- ``test_every_widget_of_a_page_draws`` (``slow``, run by CI): every single move and every URL key with a valid,
  a malformed and an out-of-range value, in a seeded world: the labs hold finished experiments with verdicts, and
  the presentation pack holds a chart and a table added on other pages, as a user would have put them there.
- ``test_every_widget_draws_with_only_the_bundled_model`` (``slow``): every :data:`BUNDLED_SAMPLE`-th single move on
  an offline machine that has only the model shipped in the pip package (the state of a new classroom laptop).
- The whole crawl adds every pair of choice widgets (at most :data:`PAIR_CAP` options of each) and every widget a
  choice reveals: about 3,200 states, over half an hour on 2 cores, more than CI can spend beside the rest of the
  suite, so it is a bench: ``python bench/crawl.py`` (numbers in docs/benchmarks.md).

Each page runs with its own model folder (a copy of the tiny models) and database, and no lab worker
(``BFE_LAB_CONCURRENCY=0``): a pressed Start queues its runs, and the page shows the queue.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests import crawl
from tests.support import SUMMARY, seed_lab

PAGES = crawl.pages()
#: The quick crawl takes every SAMPLE-th single move of a page.
SAMPLE = 7
#: Options of each widget tried in the pairs (bench/crawl.py's default).
PAIR_CAP = 3
#: The bundled-model-only crawl takes every BUNDLED_SAMPLE-th single move of a page.
BUNDLED_SAMPLE = 3
#: Buttons pressed on other pages before the pack page is crawled (a chart and a table in the pack).
PACK_PRELUDE = (("views/home.py", crawl.Move(crawl.Ref("button", "home_chart_plot_pack", "Add to pack"), "click", True)),
                ("views/results.py", crawl.Move(crawl.Ref("button", "gl_table_pack", "Add table to pack"), "click", True)))


@pytest.fixture(autouse=True)
def own_world(tiny_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A model folder of the page's own (a copy of the tiny models), a fresh database (conftest), no lab worker, and
    Streamlit's caches empty, as on a new server."""
    import streamlit as st

    models = tmp_path / "models"
    shutil.copytree(tiny_dir, models)
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


@pytest.mark.parametrize("page", PAGES)
def test_a_sample_of_every_page_draws(page: str) -> None:
    _check(crawl.crawl_page(page, pairs=False, sample=SAMPLE), "state crawl (sample)")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_widget_of_a_page_draws(page: str) -> None:
    seed_lab()
    prelude = PACK_PRELUDE if page.endswith("pack.py") else ()
    _check(crawl.crawl_page(page, pairs=False, prelude=prelude), "state crawl (every widget, seeded labs)")


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_widget_draws_with_only_the_bundled_model(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "bundled-only"
    empty.mkdir()
    monkeypatch.setenv("BFE_MODEL_DIR", str(empty))
    _check(crawl.crawl_page(page, pairs=False, url=False, sample=BUNDLED_SAMPLE), "state crawl (bundled model only)")


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
