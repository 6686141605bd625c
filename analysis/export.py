"""Slide-ready exports: charts as PNG and SVG, and a presentation pack as PowerPoint, HTML handout or zip.

No streamlit and no torch. Charts are rendered by plotly's own static export (``kaleido``), which
drives a headless Chromium: the system's (``BFE_CHROMIUM``, else ``/usr/bin/chromium`` or one on the
PATH; Spaces install Debian's with ``packages.txt``). One kaleido server is started per process on
first use and reused (a fresh browser per image is slow: ``bench/export.py``, bench/results/README.md).
Without a browser every image export
raises :class:`ExportUnavailable`, with what to install; tables still export.

A pack is a list of :class:`PackItem` (a figure or a table, its title, caption and sources: the
provenance the page shows). :func:`slide_deck` makes a PowerPoint deck with ``python-pptx`` (a
title slide, one slide per item with its image or table, caption and source line, and a sources
slide); :func:`handout_html` one self-contained HTML file (images inline, no external URL);
:func:`pack_zip` a zip of the images, tables, the handout and the deck.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import html
import io
import json
import os
import shutil
import threading
import zipfile
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from core.errors import ExplorerError

MAX_ITEMS = 100
MAX_TITLE_CHARS = 200
MAX_CAPTION_CHARS = 2_000
MAX_FIGURE_BYTES = 20 * 2**20  # a figure's JSON; larger ones (a 512-token heatmap is ~6 MB) are refused
MAX_TABLE_ROWS = 5_000
MAX_PACK_BYTES = 50 * 2**20  # what one browser session's pack may hold (figures as JSON)
RENDER_TIMEOUT_S = 60


class ExportUnavailable(ExplorerError):
    """Image export needs a headless Chromium on the server, and there is none (or it failed)."""


class ExportTooLarge(ExplorerError, ValueError):
    """A figure, table or pack past the export bounds."""


@dataclass(frozen=True)
class PackItem:
    """One figure or table of a presentation pack, with the provenance the page shows.

    ``figure``: a plotly figure as JSON (``fig.to_json()``); ``table``: a pandas DataFrame as
    records (``df.to_dict("records")``). Exactly one of them is set.
    """

    title: str
    caption: str = ""
    sources: tuple[str, ...] = ()
    figure: str | None = None
    table: tuple[dict[str, Any], ...] | None = None
    link: str = ""  # the page's URL with its state, to reopen it
    extra: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if (self.figure is None) == (self.table is None):
            raise ValueError("a pack item holds a figure or a table")


def chromium_path() -> str | None:
    """The browser kaleido will drive, or None."""
    for candidate in (os.environ.get("BFE_CHROMIUM"), "/usr/bin/chromium"):
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")


_server_lock = threading.Lock()
_server_started = False


_rendered: OrderedDict[tuple[str, str, float], bytes] = OrderedDict()  # a pack renders one figure up to 4 times


def _render(fig: Any, fmt: str, scale: float) -> bytes:
    """``fig`` (a plotly Figure, dict or JSON string) as ``fmt`` bytes, through the process's kaleido server."""
    text = _figure_json(fig)
    key = (hashlib.sha256(text.encode()).hexdigest(), fmt, scale)
    with _server_lock:
        if key in _rendered:
            _rendered.move_to_end(key)
            return _rendered[key]
    image = _render_uncached(json.loads(text), fmt, scale)
    with _server_lock:
        _rendered[key] = image
        while len(_rendered) > 16:
            _rendered.popitem(last=False)
    return image


def _render_uncached(spec: dict[str, Any], fmt: str, scale: float) -> bytes:
    global _server_started
    import kaleido

    browser = chromium_path()
    if browser is None:
        raise ExportUnavailable("Image export needs a headless Chromium on the server, and none is installed.",
                                "Use the chart's camera icon (PNG/SVG from your browser), or install Chromium on the server "
                                "(`apt-get install -y chromium`; on a Space, add `chromium` to packages.txt).")
    with _server_lock:  # one render at a time: the server is a single browser tab
        try:
            if not _server_started:
                os.environ.setdefault("BROWSER_PATH", browser)
                kaleido.start_sync_server(n=1, timeout=RENDER_TIMEOUT_S, mathjax=False, silence_warnings=True)
                _server_started = True
            layout = spec.get("layout", {})
            opts = {"format": fmt, "scale": scale, "width": layout.get("width") or 1100, "height": layout.get("height") or 600}
            return kaleido.calc_fig_sync(spec, opts=opts)
        except ExplorerError:
            raise
        except Exception as err:  # the browser crashed, timed out or is not usable
            _stop_server()
            raise ExportUnavailable(f"The chart could not be rendered ({type(err).__name__}: {str(err)[:200]}).",
                                    "Try again; the chart's camera icon still saves it from your browser.") from err


def _stop_server() -> None:
    global _server_started
    import kaleido

    if _server_started:
        with contextlib.suppress(Exception):  # already gone is fine
            kaleido.stop_sync_server(silence_warnings=True)
        _server_started = False


def check_figure(spec: str) -> str:
    """``spec`` (a figure's JSON) if it is within :data:`MAX_FIGURE_BYTES`, else ExportTooLarge."""
    if len(spec) > MAX_FIGURE_BYTES:
        raise ExportTooLarge(f"This chart is {len(spec) / 2**20:.0f} MB of data; exports stop at "
                             f"{MAX_FIGURE_BYTES // 2**20} MB.", "Export a smaller view (fewer tokens, one layer).")
    return spec


def _figure_json(fig: Any) -> str:
    """A figure (plotly Figure, dict or its JSON) as bounded JSON text: the render cache's key and the renderer's input."""
    if isinstance(fig, str):
        return check_figure(fig)
    if isinstance(fig, dict):
        return check_figure(json.dumps(fig))
    if hasattr(fig, "to_json"):
        return check_figure(fig.to_json())
    raise TypeError(f"not a plotly figure: {type(fig).__name__}")


def to_png(fig: Any, scale: float = 2.0) -> bytes:
    """The chart as PNG at ``scale`` × its size (2: sharp on a projector).

    Raises:
        ExportUnavailable: no browser, or it failed. ExportTooLarge: past :data:`MAX_FIGURE_BYTES`.
    """
    if not 0.25 <= scale <= 4:
        raise ExportTooLarge(f"Scale {scale} is outside 0.25 to 4.")
    return _render(fig, "png", scale)


def to_svg(fig: Any) -> bytes:
    """The chart as SVG (text stays text: editable and searchable on a slide)."""
    return _render(fig, "svg", 1)


# ----------------------------------------------------------------------------------------- packs

def check_pack(items: list[PackItem]) -> None:
    """Raise ExportTooLarge for a pack past the bounds (items, title and caption length, table rows)."""
    if len(items) > MAX_ITEMS:
        raise ExportTooLarge(f"The pack has {len(items)} items; it holds at most {MAX_ITEMS}.", "Remove some items.")
    for i, item in enumerate(items, 1):
        if len(item.title) > MAX_TITLE_CHARS or len(item.caption) > MAX_CAPTION_CHARS:
            raise ExportTooLarge(f"Item {i}'s title or caption is too long (at most {MAX_TITLE_CHARS} and "
                                 f"{MAX_CAPTION_CHARS} characters).", "Shorten it in the pack view.")
        if item.table is not None and len(item.table) > MAX_TABLE_ROWS:
            raise ExportTooLarge(f"Item {i}'s table has {len(item.table):,} rows; exports stop at {MAX_TABLE_ROWS:,}.")


def pack_bytes(items: list[PackItem]) -> int:
    """The memory a pack's figures take, roughly (their JSON)."""
    return sum(len(i.figure or "") + 200 * len(i.table or ()) for i in items)


#: A saved pack (:func:`pack_to_bytes`), compressed; larger ones are refused rather than stored.
MAX_SAVED_BYTES = 8 * 2**20
_SAVED_FORMAT = "bfe-pack/1"


def pack_to_bytes(items: list[PackItem], title: str = "BERT Family Explorer") -> bytes:
    """A pack as compressed JSON (zlib), to store and reopen later (:func:`pack_from_bytes`).

    Raises:
        ExportTooLarge: the pack is past the bounds, or compresses to more than ``MAX_SAVED_BYTES``.
    """
    import zlib

    check_pack(items)
    doc = {"format": _SAVED_FORMAT, "title": title[:MAX_TITLE_CHARS],
           "items": [{"title": i.title, "caption": i.caption, "sources": list(i.sources), "figure": i.figure,
                      "table": list(i.table) if i.table is not None else None, "link": i.link} for i in items]}
    raw = zlib.compress(json.dumps(doc, default=str, allow_nan=True).encode(), 6)
    if len(raw) > MAX_SAVED_BYTES:
        raise ExportTooLarge(f"This pack is {len(raw) / 2**20:.1f} MB compressed; a saved pack holds at most "
                             f"{MAX_SAVED_BYTES // 2**20} MB.", "Remove the largest charts (big heatmaps) and save again.")
    return raw


def pack_from_bytes(raw: bytes) -> tuple[str, list[PackItem]]:
    """The title and items of a pack saved by :func:`pack_to_bytes`, checked as untrusted input.

    Raises:
        ExportTooLarge: it inflates past the pack's bounds (a zip bomb is stopped while inflating).
        ValueError: it is not a saved pack.
    """
    import zlib

    if len(raw) > MAX_SAVED_BYTES:
        raise ExportTooLarge("This saved pack is larger than a pack may be.")
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(raw, MAX_PACK_BYTES + 2**20)
    except zlib.error:
        raise ValueError("not a saved presentation pack") from None
    if inflater.unconsumed_tail:
        raise ExportTooLarge("This saved pack inflates past the pack's size bound.")
    try:
        doc = json.loads(text)
    except ValueError:
        raise ValueError("not a saved presentation pack") from None
    if not isinstance(doc, dict) or doc.get("format") != _SAVED_FORMAT or not isinstance(doc.get("items"), list):
        raise ValueError("not a saved presentation pack")
    items = []
    for entry in doc["items"][: MAX_ITEMS + 1]:
        if not isinstance(entry, dict):
            raise ValueError("not a saved presentation pack")
        table = entry.get("table")
        figure = entry.get("figure")
        if (figure is not None and not isinstance(figure, str)) or (table is not None and not (
                isinstance(table, list) and all(isinstance(r, dict) for r in table))):
            raise ValueError("not a saved presentation pack")
        items.append(PackItem(title=str(entry.get("title", ""))[:MAX_TITLE_CHARS],
                              caption=str(entry.get("caption", ""))[:MAX_CAPTION_CHARS],
                              sources=tuple(str(s)[:500] for s in (entry.get("sources") or ())[:50]),
                              figure=figure, table=tuple(table) if table is not None else None,
                              link=_safe_link(str(entry.get("link", "")))))
    check_pack(items)
    return str(doc.get("title", "BERT Family Explorer"))[:MAX_TITLE_CHARS], items


def _safe_link(link: str) -> str:
    """A reopen link from a saved pack: http(s) or a path on this app; anything else (javascript:, data:) dropped."""
    link = link.strip()[:2000]
    return link if link.startswith(("https://", "http://", "/")) and not link.startswith("//") else ""


def source_line(item: PackItem) -> str:
    return "Source: " + "; ".join(item.sources) if item.sources else "Source: BERT Family Explorer"


def all_sources(items: list[PackItem]) -> list[str]:
    """Every source the pack cites, once, in order of first use."""
    return list(dict.fromkeys(s for item in items for s in item.sources))


def _table_rows(item: PackItem, limit: int) -> tuple[list[str], list[list[str]]]:
    rows = list(item.table or ())
    columns = list(dict.fromkeys(k for r in rows for k in r))
    return columns, [[_cell(r.get(c)) for c in columns] for r in rows[:limit]]


def _cell(value: Any) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def slide_deck(items: list[PackItem], title: str = "BERT Family Explorer", subtitle: str = "") -> bytes:
    """A 16:9 PowerPoint deck: a title slide, one slide per item (image or table, caption, source line),
    and a sources slide. Images are PNG at 2x.

    Raises:
        ExportTooLarge, ExportUnavailable (a figure needs the browser).
    """
    from pptx import Presentation
    from pptx.util import Emu, Inches, Pt

    check_pack(items)
    deck = Presentation()
    deck.slide_width, deck.slide_height = Inches(13.333), Inches(7.5)
    blank, title_layout = deck.slide_layouts[6], deck.slide_layouts[0]
    first = deck.slides.add_slide(title_layout)
    first.shapes.title.text = title[:MAX_TITLE_CHARS]
    first.placeholders[1].text = subtitle or f"{len(items)} figure(s) and table(s), with their sources"

    def text_box(slide, text: str, top: float, height: float, size: int, bold: bool = False) -> None:
        box = slide.shapes.add_textbox(Inches(0.5), Inches(top), Inches(12.33), Inches(height))
        frame = box.text_frame
        frame.word_wrap = True
        frame.text = text
        for p in frame.paragraphs:
            for run in p.runs:
                run.font.size, run.font.bold = Pt(size), bold

    for item in items:
        slide = deck.slides.add_slide(blank)
        text_box(slide, item.title, 0.3, 0.8, 28, bold=True)
        if item.figure is not None:
            png = to_png(item.figure, scale=2)
            pic = slide.shapes.add_picture(io.BytesIO(png), Inches(0.5), Inches(1.2), height=Inches(4.9))
            if pic.width > Inches(12.33):  # keep it on the slide, aspect kept
                ratio = Inches(12.33) / pic.width
                pic.width, pic.height = Emu(int(pic.width * ratio)), Emu(int(pic.height * ratio))
        else:
            columns, rows = _table_rows(item, 14)
            shape = slide.shapes.add_table(len(rows) + 1, max(1, len(columns)), Inches(0.5), Inches(1.2), Inches(12.33),
                                           Inches(0.35 * (len(rows) + 1)))
            for j, c in enumerate(columns):
                shape.table.cell(0, j).text = str(c)
            for i, r in enumerate(rows, 1):
                for j, v in enumerate(r):
                    shape.table.cell(i, j).text = v
        text_box(slide, item.caption, 6.2, 0.6, 14)
        text_box(slide, source_line(item), 6.85, 0.4, 11)
    closing = deck.slides.add_slide(blank)
    text_box(closing, "Sources", 0.3, 0.8, 28, bold=True)
    text_box(closing, "\n".join(all_sources(items)) or "No external sources.", 1.2, 5.8, 14)
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue()


def handout_html(items: list[PackItem], title: str = "BERT Family Explorer") -> str:
    """One self-contained HTML file: every figure as an inline PNG, tables as HTML, captions and sources.

    Nothing in it is fetched from anywhere (no external URL but the items' own links back to the app).
    """
    check_pack(items)
    esc = html.escape
    parts = [f"<!doctype html><html lang='en'><head><meta charset='utf-8'><title>{esc(title)}</title>",
             "<style>body{font-family:system-ui,sans-serif;max-width:1100px;margin:2rem auto;line-height:1.5}"
             "figure{margin:2rem 0}img{max-width:100%}table{border-collapse:collapse}td,th{border:1px solid #ccc;"
             "padding:.2rem .5rem}.src{color:#555;font-size:.9rem}</style></head><body>", f"<h1>{esc(title)}</h1>"]
    for item in items:
        parts.append(f"<figure><h2>{esc(item.title)}</h2>")
        if item.figure is not None:
            png = base64.b64encode(to_png(item.figure, scale=2)).decode()
            parts.append(f"<img alt='{esc(item.title)}' src='data:image/png;base64,{png}'>")
        else:
            columns, rows = _table_rows(item, MAX_TABLE_ROWS)
            parts.append("<table><tr>" + "".join(f"<th>{esc(str(c))}</th>" for c in columns) + "</tr>"
                         + "".join("<tr>" + "".join(f"<td>{esc(v)}</td>" for v in r) + "</tr>" for r in rows) + "</table>")
        parts.append(f"<figcaption>{esc(item.caption)}<br><span class='src'>{esc(source_line(item))}</span></figcaption></figure>")
    parts.append("<h2>Sources</h2><ul>" + "".join(f"<li>{esc(s)}</li>" for s in all_sources(items)) + "</ul></body></html>")
    return "".join(parts)


def pack_zip(items: list[PackItem], title: str = "BERT Family Explorer") -> bytes:
    """A zip: per item its PNG and SVG (figures) or CSV and Markdown (tables), a captions file, the
    handout (``handout.html``) and the deck (``deck.pptx``)."""
    import pandas as pd

    from analysis.calculator import to_markdown
    from analysis.safe_text import csv_bytes

    check_pack(items)
    out = io.BytesIO()
    captions = []
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        for i, item in enumerate(items, 1):
            stem = f"{i:02d}"
            if item.figure is not None:
                z.writestr(f"{stem}.png", to_png(item.figure))
                z.writestr(f"{stem}.svg", to_svg(item.figure))
            else:
                df = pd.DataFrame(list(item.table or ()))
                z.writestr(f"{stem}.csv", csv_bytes(df))
                z.writestr(f"{stem}.md", to_markdown(df))
            captions.append(f"{stem}  {item.title}\n    {item.caption}\n    {source_line(item)}")
        z.writestr("captions.txt", "\n\n".join(captions) + "\n")
        z.writestr("handout.html", handout_html(items, title))
        z.writestr("deck.pptx", slide_deck(items, title))
    return out.getvalue()
