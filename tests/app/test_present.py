"""Presentation mode on a projector: every page at 1280×720 with ``?present=1`` shows its main result on the first
screen, whole, with no text overflowing its box. The lab pages are opened with finished runs in the database (their
main results are the loss curves and the frozen-vs-fine-tuned table)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.servers import PAGES, SHOTS, running_app

pytestmark = pytest.mark.slow  # a server and a browser

WIDTH, HEIGHT = 1280, 720

#: Text boxes that must not overflow: headings, labels, buttons, paragraphs, tabs and the sidebar's page names.
#: (A select box or a text input cuts its value on purpose and is left out.)
OVERFLOW_JS = """() => {
  const bad = [];
  const sel = 'h1, h2, h3, h4, [data-testid="stWidgetLabel"] p, button p, [data-testid="stMarkdownContainer"] p, '
            + '[data-baseweb="tab"] p, [data-testid="stSidebarNavLink"] span';
  for (const el of document.querySelectorAll(sel)) {
    const r = el.getBoundingClientRect();
    if (r.width === 0 || r.height === 0) continue;
    if (el.scrollWidth > el.clientWidth + 1) bad.push(el.tagName + ': ' + el.innerText.slice(0, 60));
  }
  return bad;
}"""

#: The main result's box: the first descendant with a size (a chart's own box, a table), in CSS pixels.
BOX_JS = """() => {
  const main = document.querySelector('.st-key-main-result');
  if (!main) return null;
  const r = main.getBoundingClientRect();
  return {top: r.top, bottom: r.bottom, left: r.left, right: r.right, height: r.height, width: r.width};
}"""


@pytest.fixture(scope="module")
def present_server(tiny_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One server whose database holds a finished pre-training run and a frozen/fine-tuned pair."""
    from analysis import results_db
    from analysis.results_db import runs as R
    from services import lab

    url = f"sqlite:///{tmp_path_factory.mktemp('present-db') / 'results.db'}"
    old = os.environ.get("DATABASE_URL")
    os.environ["DATABASE_URL"] = url
    try:
        run = R.create_run("present-mlm", "mlm", {"steps": 40, "objective": "mlm"}, group="present-mlm")
        R.start_run(run)
        R.record_curve(run, [(s, 7.0 - s / 10) for s in range(1, 41)], seconds=4.0)
        R.finish_run(run, "finished", evaluation={"heldout_loss": 3.1}, seconds=4.0, tokens=4096, parameters=100_000)
        for mode, acc in (("frozen", 0.61), ("finetune", 0.78)):
            ft = R.create_run(f"present-ft-{mode}", lab.FINETUNE, {"model": "bert-base-uncased", "mode": mode, "task": "wic",
                                                                   "seed": 0, "run": f"present-ft-{mode}"}, group="present-ft")
            R.start_run(ft)
            R.record_curve(ft, [(s, 0.7 - s / 100) for s in range(1, 21)], seconds=2.0)
            R.finish_run(ft, "finished", evaluation={"task": "wic", "accuracy": acc, "accuracy_interval": [acc - 0.05, acc + 0.05],
                                                     "macro_f1": acc, "majority_baseline": 0.5}, seconds=2.0)
        results_db.dispose_engines()
        with running_app(tiny_dir) as server:
            yield server
    finally:
        if old is None:
            os.environ.pop("DATABASE_URL", None)
        else:
            os.environ["DATABASE_URL"] = old


@pytest.mark.parametrize("path", list(PAGES))
def test_the_main_result_is_on_the_first_screen_of_a_projector(present_server: str, browser, path: str) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{present_server}/{path}?present=1")
        page.get_by_text(PAGES[path]).first.wait_for(timeout=60_000)
        page.locator(".st-key-main-result").first.wait_for(state="visible", timeout=90_000)
        page.wait_for_function("""() => !document.querySelector('[data-testid="stStatusWidget"]')
                                         && !document.querySelector('[data-testid="stSkeleton"]')""", timeout=90_000)
        page.wait_for_timeout(1500)  # charts lay out after the script has finished
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / f"present-{path or 'home'}.png"))
        assert page.locator('[data-testid="stException"]').count() == 0
        box = page.evaluate(BOX_JS)
        assert box and box["height"] > 40 and box["width"] > 200, box
        # whole, on the first screen: nothing to scroll to see it
        assert box["top"] >= 0 and box["bottom"] <= HEIGHT + 1 and box["left"] >= 0 and box["right"] <= WIDTH + 1, box
        # the sidebar starts collapsed (one click away): its width is the page's
        assert page.evaluate("""() => { const s = document.querySelector('[data-testid="stSidebar"]');
                                        return !s || s.getBoundingClientRect().right <= 1; }""")
        assert page.evaluate(OVERFLOW_JS) == []
    finally:
        page.close()


def test_outside_presentation_mode_the_sidebar_names_are_whole(present_server: str, browser) -> None:
    page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})
    try:
        page.goto(f"{present_server}/attention")
        page.get_by_text(PAGES["attention"]).first.wait_for(timeout=60_000)
        names = page.locator('[data-testid="stSidebarNavLink"] span')
        assert names.count() >= 12
        assert page.evaluate(OVERFLOW_JS) == []
    finally:
        page.close()
