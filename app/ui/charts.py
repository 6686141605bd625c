"""Charts and the presentation pack: a plotly chart with its exports (toolbar PNG, server-side PNG/SVG, "Add to
pack"), a table's "Add table to pack", CSV/Markdown downloads, and the pack's notices.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.ui.errors import friendly_errors
from app.ui.sidebar import PRESENT_CHART_PX, main_result, presenting
from app.ui.state import context_url

#: The plotly toolbar's camera: a PNG at twice the size, named after the app (SVG and the pack: below the chart).
PLOTLY_CONFIG = {"toImageButtonOptions": {"format": "png", "scale": 2, "filename": "bert-family-explorer"},
                 "displaylogo": False}


def _json_engine() -> None:
    """Streamlit sends a chart as ``plotly.io.to_json(fig)``, and plotly's default engine (orjson, where installed) first
    walks every element of an object array in Python: the attention heatmap's hover labels (two per cell) made a
    512-token chart 2.1 s of JSON; the standard library's engine writes the same JSON (equal once parsed) in 0.7 s, and
    a numeric 512 × 512 heatmap in 17 ms against 12 (tests/app/test_pages.py). Process-wide, as plotly's setting is."""
    import plotly.io as pio

    pio.json.config.default_engine = "json"


def _page_link() -> str:
    """This page's path and state (its URL query), to reopen what a pack item shows."""
    path = context_url()
    query = "&".join(f"{k}={v}" for k, v in st.query_params.items())
    return path.split("?", 1)[0] + (f"?{query}" if query else "")


def _add_to_pack(fig: Any, title: str, caption: str, sources: tuple[str, ...], link: str, table: Any = None) -> None:
    from services import pack

    try:
        pack.add(st.session_state.setdefault("pack", []), figure=fig, table=table, title=title, caption=caption,
                 sources=sources, link=link)
    except pack.ExportTooLarge as err:
        st.session_state["pack_refused"] = err.message
        return
    except pack.PackFull:
        st.session_state["pack_full"] = True
        return
    st.session_state["pack_added"] = title


def table_to_pack(df: Any, key: str, *, title: str, caption: str = "", sources: tuple[str, ...] = (), where: Any = None) -> None:
    """An "Add table to pack" button: the table goes into the presentation pack with its caption and sources."""
    (where if where is not None else st).button(
        "Add table to pack", key=f"{key}_pack", icon=":material/playlist_add:", on_click=_add_to_pack,
        args=(None, title, caption, sources, _page_link(), df),
        help="Collect this table, with its caption and sources, for slides (see the Presentation pack page).")


def chart(fig: Any, key: str, *, title: str, caption: str = "", sources: tuple[str, ...] = (), where: Any = None,
          compact: bool = False, main: bool = False, show_caption: bool = False) -> None:
    """A plotly chart with its exports: the toolbar's PNG, server-side PNG (2x) and SVG, and "Add to pack".

    ``title``, ``caption`` and ``sources`` travel with the chart into the presentation pack. Nothing is
    serialised or rendered until a button asks for it, so a chart costs its page nothing more.
    ``compact``: for small charts side by side, the buttons share the chart's width and the
    downloads go below them. ``main``: the page's main result (:func:`main_result`; once per page run): in
    presentation mode it goes beside the inputs and is drawn at most :data:`PRESENT_CHART_PX` tall.
    ``show_caption``: draw the caption under the chart too (pages that write their own explanation leave it off).
    """
    from services import pack

    box = where if where is not None else st
    shown = fig
    if main:
        box = main_result(box)
        height = (fig.layout.height or 450) if hasattr(fig, "layout") else None
        if presenting() and height and height > PRESENT_CHART_PX:
            shown = type(fig)(fig).update_layout(height=PRESENT_CHART_PX)  # a copy: the pack keeps the full size
    _json_engine()
    box.plotly_chart(shown, width="stretch", key=key, config=PLOTLY_CONFIG)
    if show_caption and caption:
        box.caption(caption)
    if compact:
        c1, c2 = box.columns(2)
        c3 = box
    else:
        c1, c2, c3 = box.columns([1, 1, 3])
    c1.button("Add to pack" if not compact else "To pack", key=f"{key}_pack", icon=":material/playlist_add:",
              on_click=_add_to_pack, args=(fig, title, caption, sources, _page_link()),
              help="Collect this chart, with its caption and sources, for slides (see the Presentation pack page).")
    if pack.chromium_path() is None:
        c3.caption("PNG/SVG downloads need Chromium on the server; the chart's camera icon saves a PNG.")
    elif c2.button("PNG / SVG", key=f"{key}_render", icon=":material/image:", help="Render this chart as PNG (2x) and SVG"):
        from app.ui.calls import slot_lent

        with friendly_errors(), st.spinner("Rendering…"), slot_lent():  # Chromium draws it: others may run meanwhile
            png, svg = pack.to_png(fig), pack.to_svg(fig)
            d1, d2 = c3.columns([1, 2] if not compact else [1, 1])
            download(d1, "PNG", png, f"{key}.png", "image/png", key=f"{key}_png")
            download(d2, "SVG", svg, f"{key}.svg", "image/svg+xml", key=f"{key}_svg")


def pack_notice() -> None:
    """Say once that a chart went into the pack (or that the pack is full)."""
    if title := st.session_state.pop("pack_added", None):
        st.toast(f"Added to the presentation pack: {title}", icon=":material/playlist_add_check:")
    if refused := st.session_state.pop("pack_refused", None):
        st.warning(f"Not added to the pack: {refused}", icon=":material/warning:")
    if st.session_state.pop("pack_full", False):
        st.warning("The presentation pack is full (100 items or 50 MB of charts): remove some on its page.",
                   icon=":material/warning:")


def download_buttons(df, name: str, key: str, markdown: str | None = None) -> None:
    """CSV and Markdown download buttons for a data frame (Markdown from ``analysis.calculator.to_markdown``)."""
    from analysis.safe_text import csv_bytes
    from services.pack import table_markdown as to_markdown

    # Built when clicked, not on every rerun of the page (Streamlit calls a callable `data` on download).
    c1, c2 = st.columns(2)
    download(c1, "Download CSV", lambda: csv_bytes(df, index=df.index.name is not None), f"{name}.csv", "text/csv",
             key=f"{key}_csv")
    download(c2, "Download Markdown", lambda: (markdown or to_markdown(df)).encode(), f"{name}.md", "text/markdown",
             key=f"{key}_md")


def download(where: Any, label: str, data: Any, file_name: str, mime: str, **kw: Any) -> None:
    """A download button: ``data`` bytes, or a function built only when clicked (Streamlit's deferred download).

    Every download of the app goes through here so that each is ``on_click="ignore"``: a click fetches the file and does
    not rerun the page. With the default (a rerun), the click's rerun ends by dropping the deferred function the click
    asked for (Streamlit forgets the functions of the run before) and, on a loaded machine, the rerun can win that race:
    no file comes. Nothing on a page needs a rerun after a download.
    """
    where.download_button(label, data, file_name, mime, on_click="ignore", icon=":material/download:", **kw)
