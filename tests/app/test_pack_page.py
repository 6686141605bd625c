"""The presentation pack as a user builds it: Add to pack on pages, the pack page, its downloads."""

from __future__ import annotations

import io
import re

import pytest
from streamlit.testing.v1 import AppTest

from tests.helpers import ENTRY


@pytest.fixture(autouse=True)
def fresh_caches() -> None:
    import streamlit as st

    st.cache_data.clear()
    st.cache_resource.clear()


def app() -> AppTest:
    at = AppTest.from_file(ENTRY, default_timeout=90)
    at.run()
    assert not at.exception
    return at


def titles(at: AppTest) -> list[str]:
    return [t.value for t in at.text_input if t.key and t.key.startswith("pack_title_")]


def test_an_empty_pack_says_how_to_fill_it() -> None:
    at = app()
    at.switch_page("views/pack.py").run()
    assert not at.exception and any("The pack is empty" in i.value for i in at.info)


def test_charts_go_into_the_pack_across_pages_and_become_a_deck() -> None:
    from pptx import Presentation

    at = app()
    at.button(key="home_chart_plot_pack").click().run()
    assert not at.exception and len(at.session_state["pack"]) == 1
    at.switch_page("views/attention.py").run()
    heat = next(b for b in at.button if b.key and b.key.startswith("at_heat_") and b.key.endswith("_pack"))
    heat.click().run()
    assert len(at.session_state["pack"]) == 2
    item = at.session_state["pack"][1]
    assert "layer 0, head 0" in item.title and "The cat sat on the mat" in item.caption and item.sources
    at.switch_page("views/pack.py").run()
    assert not at.exception
    assert titles(at)[0].startswith("The BERT family") and "attention" in titles(at)[1]
    at.button(key="pack_down_0").click().run()  # reorder
    assert "attention" in titles(at)[0]
    at.text_input(key="pack_title_1").set_value("Bigger every year").run()  # retitle
    assert at.session_state["pack"][1].title == "Bigger every year"
    at.button(key=next(b.key for b in at.button if b.label.startswith("Build"))).click().run()
    assert not at.exception and not at.error
    assert {b.label for b in at.get("download_button")} >= {"PowerPoint (.pptx)", "Handout (offline HTML)", "Everything (.zip)"}
    deck = Presentation(io.BytesIO(at.session_state["pack_files"][1]))
    assert len(deck.slides) == 2 + 2
    texts = ["\n".join(s.text_frame.text for s in slide.shapes if s.has_text_frame) for slide in deck.slides]
    assert "Bigger every year" in texts[2] and "Source:" in texts[1]
    at.button(key="pack_rm_0").click().run()  # remove
    assert len(at.session_state["pack"]) == 1 and titles(at) == ["Bigger every year"]


def test_a_chart_renders_as_png_and_svg_on_request() -> None:
    at = app()
    assert not at.get("download_button")
    at.button(key="home_chart_plot_render").click().run()
    assert not at.exception and not at.error
    assert [b.label for b in at.get("download_button")] == ["PNG", "SVG"]


def test_without_a_browser_the_page_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis import export

    monkeypatch.setattr(export, "chromium_path", lambda: None)
    at = app()
    assert not at.exception
    assert any("need Chromium on the server" in c.value for c in at.caption)
    at.button(key="home_chart_plot_pack").click().run()  # the pack still collects
    at.switch_page("views/pack.py").run()
    assert any("need Chromium on the server" in i.value for i in at.info)


def test_a_results_table_goes_into_the_pack_with_its_sources() -> None:
    from pptx import Presentation

    from analysis import export

    at = app()
    at.switch_page("views/results.py").run()
    at.button(key="gl_table_pack").click().run()
    assert not at.exception
    item = at.session_state["pack"][0]
    assert item.table is not None and item.figure is None and len(item.table) >= 5
    assert item.sources and all(re.fullmatch(r".+ \d{4}.*, .+, dev", s) for s in item.sources)
    assert "Liu et al. 2019, Table 5, dev" in item.sources  # RoBERTa's GLUE dev table
    deck = Presentation(io.BytesIO(export.slide_deck([item])))
    table = next(s for s in deck.slides[1].shapes if s.has_table).table
    assert table.cell(0, 0).text == "row" and any(table.cell(i, 0).text == "BERT-base" for i in range(1, len(table.rows)))


def test_a_pack_saved_as_a_link_reopens_in_another_browser() -> None:
    at = app()
    at.button(key="home_chart_plot_pack").click().run()
    at.switch_page("views/pack.py").run()
    at.text_input(key="pack_deck_title").set_value("My talk").run()
    at.button(key="pack_save").click().run()
    assert not at.exception and not at.error
    token = at.query_params["saved"]
    assert any(f"?saved={token}" in c.value for c in at.code)
    saved = list(at.session_state["pack"])

    other = AppTest.from_file(ENTRY, default_timeout=90)  # a new session: an empty pack
    other.switch_page("views/pack.py")
    other.query_params["saved"] = token
    other.run()
    assert not other.exception and other.session_state["pack"] == saved
    assert other.text_input(key="pack_deck_title").value == "My talk"

    mine = app()  # a session with a pack of its own is asked before it is replaced
    mine.button(key="home_chart_plot_pack").click().run()
    mine.button(key="home_chart_plot_pack").click().run()
    mine.switch_page("views/pack.py")
    mine.query_params["saved"] = token
    mine.run()
    assert len(mine.session_state["pack"]) == 2
    mine.button(key="pack_open_saved").click().run()
    assert mine.session_state["pack"] == saved

    bad = AppTest.from_file(ENTRY, default_timeout=90)
    bad.switch_page("views/pack.py")
    bad.query_params["saved"] = "no-such-pack-token-here"
    bad.run()
    assert not bad.exception and any("No saved pack" in e.value for e in bad.error)


def test_a_browser_that_saves_too_fast_is_told_to_wait() -> None:
    from analysis.results_db import packs

    at = app()
    at.button(key="home_chart_plot_pack").click().run()
    at.switch_page("views/pack.py").run()
    for _ in range(packs.SAVES_PER_MINUTE):
        at.button(key="pack_save").click().run()
        assert not at.exception and not at.error
    at.button(key="pack_save").click().run()
    assert not at.exception and any("last minute" in e.value and "Wait a minute" in e.value for e in at.error)
