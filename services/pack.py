"""The presentation pack's use cases: collect a chart or a table with its caption and sources, export the pack (a
slide deck, a handout, a zip), save it behind a link and open it again, and draw a chart as PNG or SVG for slides.

The pages' "Add to pack" buttons, the Pack page and the Gradio app's heatmap downloads all come here.
"""

from __future__ import annotations

from typing import Any

from analysis import export
from analysis.export import MAX_ITEMS, MAX_PACK_BYTES, MAX_TABLE_ROWS, MAX_TITLE_CHARS, ExportTooLarge, ExportUnavailable, PackItem
from core.errors import ExplorerError

__all__ = ["MAX_ITEMS", "MAX_TITLE_CHARS", "ExportTooLarge", "ExportUnavailable", "PackFull", "PackItem", "add", "chromium_path",
           "handout_html", "open_saved", "pack_zip", "save", "slide_deck", "source_line", "table_markdown", "to_png", "to_svg"]


class PackFull(ExplorerError):
    """The pack holds :data:`MAX_ITEMS` items or :data:`MAX_PACK_BYTES` already."""


def add(pack: list[PackItem], *, figure: Any = None, table: Any = None, title: str, caption: str = "",
        sources: tuple[str, ...] = (), link: str = "") -> PackItem:
    """Append a chart (a plotly figure) or a table (a data frame) to ``pack`` with its caption, sources and the link that
    reopens it. A figure is serialised only now (a 512-token heatmap is megabytes).

    Raises:
        ExportTooLarge: the table has more than ``MAX_TABLE_ROWS`` rows, or the figure's JSON is too large.
        PackFull: the pack is at its item or byte limit.
    """
    if table is not None:
        if len(table) > MAX_TABLE_ROWS:
            raise ExportTooLarge(f"This table has {len(table):,} rows; the pack takes tables of up to {MAX_TABLE_ROWS:,}.")
        records = tuple(table.reset_index().to_dict("records") if table.index.name else table.to_dict("records"))
        spec, size = None, 200 * len(records)
    else:
        spec = export.check_figure(figure.to_json())
        records, size = None, len(spec)
    if len(pack) >= MAX_ITEMS or export.pack_bytes(pack) + size > MAX_PACK_BYTES:
        raise PackFull(f"The pack is full (at most {MAX_ITEMS} items, {MAX_PACK_BYTES // 2**20} MB).")
    item = PackItem(title=title[:200], caption=caption[:2000], sources=tuple(sources), figure=spec, table=records, link=link)
    pack.append(item)
    return item


def save(pack: list[PackItem], title: str, saver: str) -> str:
    """Store the pack in the results database; the token of its link (rate-limited per ``saver``)."""
    from analysis.results_db import save_pack

    return save_pack(pack, title, saver=saver)


def open_saved(token: str) -> tuple[str, list[PackItem]]:
    """A saved pack's title and items, by its link's token."""
    from analysis.results_db import load_pack

    return load_pack(token)


def table_markdown(df: Any) -> str:
    """A data frame as a Markdown table (numbers kept readable, text made safe)."""
    from analysis.calculator import to_markdown

    return to_markdown(df)


# The exports, looked up in ``analysis.export`` at each call (a test that takes the browser away patches it there).
def chromium_path() -> str | None:
    """The Chromium that renders PNG and SVG, or None when the server has none."""
    return export.chromium_path()


def to_png(fig: Any, scale: float = 2.0) -> bytes:
    """A plotly figure as PNG (``scale``× its size)."""
    return export.to_png(fig, scale)


def to_svg(fig: Any) -> bytes:
    """A plotly figure as SVG."""
    return export.to_svg(fig)


def slide_deck(items: list[PackItem], title: str) -> bytes:
    """The pack as a PowerPoint deck: a title slide, then one slide per item with its caption and sources."""
    return export.slide_deck(items, title)


def handout_html(items: list[PackItem], title: str) -> str:
    """The pack as one offline HTML handout."""
    return export.handout_html(items, title)


def pack_zip(items: list[PackItem], title: str) -> bytes:
    """Every item as PNG, SVG, HTML or CSV, with the deck and the handout, in one zip."""
    return export.pack_zip(items, title)


def source_line(item: PackItem) -> str:
    """An item's sources in one line."""
    return export.source_line(item)
