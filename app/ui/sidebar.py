"""Presentation mode and the sidebar's status panel (compute device, models on this machine, model memory, the model queue)."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any

import streamlit as st

from app.ui.caches import AVAILABILITY_ICONS, catalog_availability, device_label
from services.models import ModelStatus

#: The key of the container that holds a page's main result (:func:`main_result`); presentation mode puts it beside
#: the inputs, within one screen.
MAIN_RESULT = "main-result"
#: The tallest a main chart is drawn in presentation mode: a 720-pixel projector less the compact header and title.
PRESENT_CHART_PX = 540

# Presentation mode, for a projector (1280×720 and up): larger type, higher contrast, the sidebar collapsed, a
# compact header, and the page as a grid of two columns: the title across both, the inputs (and notes) on the left,
# the main result on the right from the top, so it is on the first screen. The main result's row of the grid runs
# into a last 1fr row, so a result taller than the inputs does not spread the inputs apart; row gaps become margins,
# since the grid's spare rows would each add one. Inside a tab (the page's inputs are in it), the main result comes
# first. Streamlit's own test ids are the selectors (stable across
# releases, unlike its generated class names).
PRESENTATION_CSS = """
<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 18px; }
[data-testid="stAppViewContainer"] { background: #ffffff; color: #000000; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.05rem; line-height: 1.45; }
h1 { font-size: 2.1rem !important; padding: 0 0 0.2rem 0 !important; }
[data-testid="stMarkdownContainer"]:has(h1, h2, h3, h4) { margin-bottom: 0 !important; }
h2 { font-size: 1.7rem !important; } h3 { font-size: 1.4rem !important; } h4 { font-size: 1.1rem !important; padding: 0 !important; }
a { color: #0040a0 !important; text-decoration: underline; }
[data-testid="stCaptionContainer"] { color: #222 !important; font-size: 0.9rem; }
[data-testid="stHeader"] { height: 2.25rem; min-height: 2.25rem; background: transparent; }
[data-testid="stMainBlockContainer"] { padding: 2.25rem 1.5rem 3rem 1.5rem !important; max-width: 100% !important; }
[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"]:has(.st-key-main-result) {
  display: grid; grid-template-columns: minmax(340px, 36%) minmax(0, 1fr); column-gap: 1.5rem; row-gap: 0;
  grid-template-rows: auto repeat(58, min-content) 1fr; align-items: start;
}
[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"]:has(.st-key-main-result) > * {
  grid-column: 1; margin-bottom: 0.6rem; min-width: 0; width: auto !important;
}
[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"]:has(.st-key-main-result) > *:has(h1) { grid-column: 1 / -1; grid-row: 1; }
[data-testid="stMainBlockContainer"] > [data-testid="stVerticalBlock"]:has(.st-key-main-result) > *:has(.st-key-main-result) {
  grid-column: 2; grid-row: 2 / -1; overflow-x: clip;  /* a table sized before this grid applied: no scrollbar flash */
}
[data-testid="stTabPanel"] > [data-testid="stVerticalBlock"] > *:has(.st-key-main-result) { order: -1; }
[data-testid="stMainBlockContainer"] [data-testid="stHorizontalBlock"] { flex-wrap: wrap; row-gap: 0.4rem; }
[data-testid="stMainBlockContainer"] [data-testid="stColumn"] { min-width: min(160px, 100%); }
[data-testid="stSidebarNavLink"] span { white-space: normal !important; overflow: visible !important; }
</style>
"""


def _sync_presentation_url() -> None:
    if st.session_state.get("present"):
        st.query_params["present"] = "1"
    else:
        st.query_params.pop("present", None)


def presenting() -> bool:
    """Whether presentation mode is on for this session (the toggle, or ``?present=1`` before it is drawn)."""
    return bool(st.session_state.get("present", st.query_params.get("present") == "1"))


def main_result(where: Any = None) -> Any:
    """The container for a page's main result (a chart, a table), in ``where`` (a column; default the page):
    presentation mode keeps it on the first screen, beside the inputs. ``with ui.main_result(): ...``.

    The first call of a run is the main result; a later one in the same run (a page that marks two, or a view that
    marks its own inside another's) gets a plain container, so the page draws either way."""
    from streamlit.errors import StreamlitDuplicateElementKey

    box = where if where is not None else st
    try:
        return box.container(key=MAIN_RESULT)
    except StreamlitDuplicateElementKey:
        return box.container()


def presentation_mode() -> bool:
    """The sidebar's presentation toggle, kept in the URL (``?present=1``) so a shared link keeps it."""
    if "present" not in st.session_state:
        st.session_state["present"] = st.query_params.get("present") == "1"
    on = st.sidebar.toggle("Presentation mode", key="present", on_change=_sync_presentation_url,
                           help="Larger type and higher contrast for a projector.")
    if on:
        st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)
    return on


def sidebar_status() -> None:
    """Compute device, which catalog models are available now, and what the model cache holds."""
    from app.ui.calls import slot_lent
    from services.executor import executor

    route = executor()
    on_backend = route.elsewhere
    # With a model backend, all three ask it (each cached a while): a wait on another machine, so the page's slot goes
    # to the next page run meanwhile, and a backend that does not answer stops no one else.
    with slot_lent() if on_backend else nullcontext():
        device = device_label()
        avail = catalog_availability()
        engine = route.status()
    sb = st.sidebar
    sb.markdown("**Compute**")
    sb.caption(device)
    ready = [m for m, (s, _) in avail.items() if s == ModelStatus.READY]
    loadable = [m for m, (s, _) in avail.items() if s != ModelStatus.CATALOG_ONLY]
    sb.markdown("**Models**")
    where = "the model backend" if on_backend else "this machine"
    sb.caption(f"{len(ready)} of {len(loadable)} downloadable models are on {where}.")
    with sb.expander("Which ones"):
        for mid, (status, _) in avail.items():
            if status != ModelStatus.CATALOG_ONLY:
                st.caption(f"{AVAILABILITY_ICONS[status]} {mid}")
    sb.markdown("**Model memory**")
    sb.caption(engine.memory)
    sb.caption(engine.queue + (f" · {engine.state}" if engine.state else ""))
