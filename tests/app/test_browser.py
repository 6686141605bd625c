"""Browser test: the app started as the README does (`python -m app.serve`) on a local port, every page opened in headless Chromium.

Uses Debian's Chromium (``/usr/bin/chromium``, or ``BFE_CHROMIUM``) driven by Playwright; every
request that leaves localhost is blocked and recorded, so the pages are shown to work offline.
Screenshots are kept in ``artifacts/screenshots/`` (or ``BFE_SCREENSHOTS``).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import TimeoutError as PlaywrightTimeout
from playwright.sync_api import expect

from tests.helpers.servers import CHROMIUM, CHROMIUM_ARGS, PAGES, SHOTS, open_page, running_app, start_server, wait_for  # noqa: F401

pytestmark = pytest.mark.slow  # each test starts a server or a browser: seconds, not milliseconds


@pytest.fixture(scope="module")
def server(tiny_dir: Path) -> Iterator[str]:
    with running_app(tiny_dir) as url:
        yield url


@pytest.mark.parametrize("path", list(PAGES))
def test_every_page_renders_offline(tiny_dir: Path, browser, path: str) -> None:
    """Each page is the first one its own fresh server is asked for, as when a shared link is opened."""
    with running_app(tiny_dir) as server:
        check_page(browser, server, path)


def check_page(browser, server: str, path: str) -> None:
    page, outside = open_page(browser, f"{server}/{path}", PAGES[path])
    assert page.locator('[data-testid="stException"]').count() == 0
    assert "Traceback" not in page.inner_text("body")
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"{path or 'home'}.png"))
    assert not outside, f"requests left localhost: {outside}"
    page.close()


def test_home_draws_its_charts(server: str, browser) -> None:
    page, _ = open_page(browser, server, PAGES[""])
    page.locator(".js-plotly-plot .scatterlayer .point").first.wait_for(timeout=30_000)
    assert page.locator(".js-plotly-plot .scatterlayer .point").count() >= 10
    page.close()


def test_lab_starts_watches_and_cancels_a_run(empty_model_dir: Path, browser) -> None:
    """A run trains in the background: the page shows it running with its live loss curve, and cancels it."""
    query = "lb_preset=single&lb_layers=1&lb_hidden=32&lb_ffn=64&lb_seq=32&lb_batch=8&lb_steps=5000&lb_name=browser-demo"
    with running_app(empty_model_dir) as server:
        page, outside = open_page(browser, f"{server}/lab?{query}", PAGES["lab"])
        page.get_by_role("button", name="Start 1 run").click()
        # queued and claimed in the click's rerun; 90 s was once too short in a full suite run (cause not found: the
        # server's log is printed with a failure now)
        page.get_by_text("▶ running:").first.wait_for(timeout=180_000)
        # the live loss curve: drawn once the worker (a new process that imports torch) writes its first step; 60 s
        # was once too short with a screenshot run training beside the suite
        page.locator(".js-plotly-plot .scatterlayer .trace").first.wait_for(timeout=150_000)
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "lab-running.png"), full_page=True)
        page.get_by_role("button", name="Cancel run").click()
        page.get_by_text("■ cancelled:").first.wait_for(timeout=60_000)
        page.get_by_text("trained/browser-demo").first.wait_for(timeout=30_000)  # what it learned is kept
        assert page.locator('[data-testid="stException"]').count() == 0
        page.screenshot(path=str(SHOTS / "lab-cancelled.png"), full_page=True)
        assert not outside, f"requests left localhost: {outside}"
        page.close()


def test_representations_draws_the_senses_and_explains_offline(server: str, browser) -> None:
    """The bundled MiniLM (real weights): the projection's points are drawn, and 'Why this prediction' colours words."""
    page, outside = open_page(browser, f"{server}/representations", PAGES["representations"])
    page.locator(".js-plotly-plot .scatterlayer .point").first.wait_for(timeout=60_000)
    assert page.locator(".js-plotly-plot .scatterlayer .point").count() >= 15  # the default words: bank and bat, 18 sentences
    page.get_by_text("Why this prediction", exact=True).first.click()
    page.get_by_text("Integrated gradients").first.wait_for(timeout=120_000)
    page.get_by_text("guitar").first.wait_for(timeout=30_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "representations-why.png"), full_page=True)
    assert not outside, f"requests left localhost: {outside}"
    page.close()


def test_models_page_loads_a_model_in_the_browser(server: str, browser) -> None:
    page, _ = open_page(browser, f"{server}/models", PAGES["models"])
    page.get_by_role("button", name="Load it").click()
    page.get_by_text("attention weights checked").wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.screenshot(path=str(SHOTS / "models-loaded.png"))
    page.close()


def test_calculator_tabs_charts_and_a_bad_link(server: str, browser) -> None:
    page, _ = open_page(browser, f"{server}/calculator", PAGES["calculator"])
    page.locator(".js-plotly-plot").first.wait_for(timeout=30_000)  # the parameter treemap
    page.get_by_role("tab", name="Training memory").click()
    page.get_by_text("14.90 GiB").first.wait_for(timeout=30_000)
    page.locator(".js-plotly-plot .barlayer").first.wait_for(timeout=30_000)
    page.screenshot(path=str(SHOTS / "calculator-memory.png"))
    page.close()
    page, _ = open_page(browser, f"{server}/calculator?sz_preset=custom&sz_heads=7&sz_batch=-1", "where the bytes go")
    page.get_by_text("do not divide the hidden size").wait_for(timeout=30_000)
    assert page.get_by_text("were not valid and were reset").count() == 1
    assert page.locator('[data-testid="stException"]').count() == 0 and "Traceback" not in page.inner_text("body")
    page.screenshot(path=str(SHOTS / "calculator-bad-link.png"))
    page.close()


def test_scaling_page_fits_an_uploaded_csv_and_rejects_a_bad_one(server: str, browser, tmp_path: Path) -> None:
    page, _ = open_page(browser, f"{server}/scaling", PAGES["scaling"])
    page.locator(".js-plotly-plot .scatterlayer .point").first.wait_for(timeout=30_000)
    page.get_by_text("Your CSV", exact=True).click()
    good = tmp_path / "mine.csv"
    good.write_text("params,loss\n1e6,5.0\n1e7,4.1\n1e8,3.4\n1e9,2.8\n1e10,2.3\n")
    page.locator('input[type="file"]').set_input_files(str(good))
    page.get_by_text("fitted to 5 points").wait_for(timeout=60_000)
    # widgets that were not drawn while no file was chosen come back with their values, not their defaults
    assert page.get_by_role("spinbutton", name="Bootstrap resamples").input_value() == "200"
    page.screenshot(path=str(SHOTS / "scaling-upload.png"))
    bad = tmp_path / "bad.csv"
    bad.write_text("params,loss\n0,5.0\n1e7,four\n1e8,3.4\n")
    page.locator('input[type="file"]').set_input_files(str(bad))
    page.get_by_text("at least two columns that are numbers").wait_for(timeout=60_000)
    assert page.locator('[data-testid="stException"]').count() == 0 and "Traceback" not in page.inner_text("body")
    page.close()


def test_attention_head_view_draws_offline_and_never_runs_typed_html(server: str, browser) -> None:
    from urllib.parse import quote

    text = quote("The cat <script>alert('x')</script> <img src=x onerror=alert(2)> sat.")
    page, outside = open_page(browser, f"{server}/attention?at_view=head&at_text={text}", PAGES["attention"])
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    frame = page.frame_locator("iframe").first
    frame.locator("svg text").first.wait_for(timeout=60_000)
    assert frame.locator("svg *").count() > 100  # bertviz drew its lines and token boxes
    assert frame.get_by_text("script").count() >= 1  # the typed HTML is shown as tokens
    page.screenshot(path=str(SHOTS / "attention-head-view.png"))
    page.get_by_text("Heatmap", exact=True).click()
    page.locator(".js-plotly-plot .heatmaplayer").first.wait_for(timeout=30_000)
    assert not dialogs and not outside, (dialogs, outside)
    assert page.locator('[data-testid="stException"]').count() == 0
    page.close()


def test_results_page_tooltips_escaping_and_a_bad_import(tiny_dir: Path, browser, tmp_path: Path) -> None:
    from urllib.parse import quote

    from analysis import results_db

    evil = "<img src=x onerror=alert(1)>"
    results_db.add_result(results_db.NewResult(model=evil, task="SST-2", metric="acc", split="dev", value=90.0,
                          source="Liu et al. 2019, class re-run", note="<script>alert(2)</script>"), results_db.get_engine())
    models = quote(",".join([evil, "BERT-base", "RoBERTa-large"]))
    with running_app(tiny_dir) as server:
        page, outside = open_page(browser, f"{server}/results?gl_models={models}", PAGES["results"])
        dialogs: list[str] = []
        page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
        cell = page.locator("table.bfe-glue td.best").first
        cell.wait_for(timeout=30_000)
        assert "Liu et al. 2019" in (cell.get_attribute("title") or "")  # each value's source on hover
        rows = page.locator("table.bfe-glue th.row").all_inner_texts()
        assert evil in rows and "BERT-base" in rows  # typed HTML is shown as text, never run
        page.screenshot(path=str(SHOTS / "results-table.png"))
        page.goto(f"{server}/results?gl_view=Add+results")
        page.get_by_text("Import a CSV").wait_for(timeout=30_000)
        bad = tmp_path / "bad.csv"
        bad.write_text("model,task,metric,split,value,source\nMine,CoLA,mcc,dev,50,liu2019\nMine,CoLA,mcc,dev,150,liu2019\n")
        page.locator('input[type="file"]').set_input_files(str(bad))
        page.get_by_role("button", name="Import").click()
        page.get_by_text("Nothing imported").wait_for(timeout=30_000)
        page.get_by_text("outside the range").first.wait_for(timeout=30_000)  # the problem, by line
        page.screenshot(path=str(SHOTS / "results-bad-import.png"))
        assert not dialogs and not outside, (dialogs, outside)
        assert page.locator('[data-testid="stException"]').count() == 0 and "Traceback" not in page.inner_text("body")
        page.close()
    assert len(results_db.results_frame(results_db.get_engine(), models=["Mine"])) == 0


def test_downloads_are_built_when_clicked(server: str, browser) -> None:
    """Download buttons hand Streamlit a function, run only on a click: the file still arrives, whole."""
    page, _ = open_page(browser, f"{server}/results", "GLUE results database")
    page.get_by_text("Table (CSV)").first.wait_for(timeout=30_000)
    # The click does not rerun the page (ui.download: on_click="ignore"); a rerun could drop the file's function first
    with page.expect_download(timeout=90_000) as info:
        page.get_by_role("button", name="Table (CSV)").click()
    data = Path(info.value.path()).read_text(encoding="utf-8")
    assert data.splitlines()[0].startswith("row,MNLI m,") and "BERT-base" in data and len(data.splitlines()) >= 5
    page.close()


def test_a_chart_goes_into_the_pack_and_out_as_a_deck(server: str, browser) -> None:
    """As a presenter: Add to pack on Home, open the pack from the sidebar (same session), download the deck."""
    from pptx import Presentation

    page, outside = open_page(browser, server, PAGES[""])
    page.get_by_role("button", name="Add to pack").first.click()
    page.get_by_text("Added to the presentation pack").first.wait_for(timeout=30_000)
    page.get_by_role("link", name="Presentation pack").click()
    page.get_by_text("1 item(s) of at most 100").wait_for(timeout=30_000)
    page.get_by_role("button", name="Build the deck, handout and zip").click()
    with page.expect_download(timeout=60_000) as info:
        page.get_by_role("button", name="PowerPoint (.pptx)").click(timeout=60_000)
    deck = Presentation(info.value.path())
    assert len(deck.slides) == 3 and any(s.shape_type == 13 for s in deck.slides[1].shapes)  # 13: a picture
    page.get_by_role("button", name="Save the pack as a link").click()
    page.wait_for_url("**/pack?saved=*", timeout=30_000)
    link = page.url
    assert not outside
    page.close()
    other = browser.new_context()  # another browser: its own session, an empty pack until the link fills it
    try:
        page2 = other.new_page()
        page2.goto(link)
        page2.get_by_text("1 item(s) of at most 100").wait_for(timeout=60_000)
        # a retrying assertion: the item's Title box can be drawn a moment before its value is (it once read "")
        expect(page2.get_by_role("textbox", name="Title").first).to_have_value(re.compile(r"^The BERT family"), timeout=30_000)
    finally:
        other.close()


def test_the_bertviz_view_saves_itself_as_svg(server: str, browser) -> None:
    """bertviz has no image export: the view's button saves the drawn SVG (offline, in the browser)."""
    from xml.etree import ElementTree

    page, outside = open_page(browser, f"{server}/attention?at_view=head", PAGES["attention"])
    frame = page.frame_locator("iframe").first
    frame.locator("svg text").first.wait_for(timeout=60_000)
    with page.expect_download(timeout=30_000) as info:
        frame.get_by_role("button", name="Download this view as SVG").click()
    assert info.value.suggested_filename.startswith("bertviz-head-") and info.value.suggested_filename.endswith(".svg")
    root = ElementTree.parse(info.value.path()).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    words = " ".join(root.itertext())
    assert "cat" in words and "mat" in words  # the tokens of the sentence on screen
    assert not outside
    page.close()


@pytest.mark.parametrize("path", list(PAGES))
def test_presentation_mode_on_a_projector(server: str, browser, path: str) -> None:
    """?present=1 at 1280x720: larger type than Streamlit's 16 px, and nothing wider than the screen (screenshots kept in
    artifacts/; tests/app/test_present.py checks that each page's main result is on this first screen)."""
    page = browser.new_page(viewport={"width": 1280, "height": 720})
    page.goto(f"{server}/{path}?present=1")
    page.get_by_text(PAGES[path]).first.wait_for(timeout=60_000)
    page.wait_for_function("() => !document.querySelector('[data-testid=\"stStatusWidget\"]')", timeout=60_000)
    # the presentation style sheet arrives with the page's first elements; give it a moment to apply
    page.wait_for_function("() => parseFloat(getComputedStyle(document.documentElement).fontSize) >= 18", timeout=15_000)
    root_px = float(page.evaluate("getComputedStyle(document.documentElement).fontSize").removesuffix("px"))
    body_px = float(page.evaluate(
        "getComputedStyle(document.querySelector('[data-testid=\"stMarkdownContainer\"] p, [data-testid=\"stCaptionContainer\"]')"
        " || document.body).fontSize").removesuffix("px"))
    overflow_js = """() => { const m = document.querySelector('[data-testid="stMain"]');
        return m ? m.scrollWidth - m.clientWidth : 0; }"""
    with contextlib.suppress(PlaywrightTimeout):  # measured and reported below either way
        page.wait_for_function(f"({overflow_js})() <= 1", timeout=5_000)  # a table resizes itself a frame later
    overflow = page.evaluate(overflow_js)
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / f"projector-{path or 'home'}.png"))
    page.close()
    assert root_px >= 18 and body_px >= 16, (root_px, body_px)
    assert overflow <= 1, f"{path or 'home'}: {overflow}px wider than a 1280-pixel projector"
