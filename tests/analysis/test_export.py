"""Slide exports (analysis.export): the files are opened and checked, not just produced.

Image export drives Debian's Chromium through kaleido (the README's test command installs it).
"""

from __future__ import annotations

import io
import re
import struct
import zipfile
from xml.etree import ElementTree

import plotly.graph_objects as go
import pytest

from analysis import export
from analysis.export import ExportTooLarge, ExportUnavailable, PackItem


def chart(title: str = "Parameters by year") -> go.Figure:
    fig = go.Figure(go.Scatter(x=[2018, 2019, 2020], y=[110, 340, 17_000], mode="markers+lines", name="size"))
    return fig.update_layout(title=title, width=800, height=450)


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


def test_png_at_twice_the_size_and_svg_with_the_charts_text() -> None:
    fig = chart("BERT → GPT-3, 日本語 ✓")
    png = export.to_png(fig)
    assert png_size(png) == (1600, 900) and len(png) > 5_000
    svg = export.to_svg(fig)
    root = ElementTree.fromstring(svg)
    assert root.tag.endswith("svg")
    text = " ".join(t for t in root.itertext())
    assert "BERT → GPT-3, 日本語 ✓" in text and "2019" in text
    assert export.to_png(fig.to_json()) == png  # the same figure from its JSON: the same image (and cached)


def test_no_browser_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(export, "chromium_path", lambda: None)
    with pytest.raises(ExportUnavailable, match="Chromium") as err:
        export.to_png(chart("never drawn"))
    assert "camera icon" in err.value.hint


def test_bounds() -> None:
    huge = go.Figure(go.Heatmap(z=[[0.123456789] * 1500] * 1500))
    with pytest.raises(ExportTooLarge, match="MB"):
        export.to_png(huge)
    with pytest.raises(ExportTooLarge, match="Scale"):
        export.to_png(chart(), scale=50)
    many = [PackItem("t", table=({"a": 1},))] * (export.MAX_ITEMS + 1)
    with pytest.raises(ExportTooLarge, match="at most 100"):
        export.slide_deck(many)
    with pytest.raises(ExportTooLarge, match="too long"):
        export.handout_html([PackItem("t", caption="x" * 5000, table=({"a": 1},))])
    with pytest.raises(ValueError, match="figure or a table"):
        PackItem("neither")


def pack() -> list[PackItem]:
    return [
        PackItem("Size by year", "Parameters of the family, log scale. 🙂 Ελληνικά 中文",
                 ("Devlin et al. 2019, Table 1", "Brown et al. 2020, Table 2.1"), figure=chart().to_json(),
                 link="http://127.0.0.1:8501/?home_chart=Size"),
        PackItem("GLUE dev, single models", "<script>alert(1)</script> =HYPERLINK(\"http://x\")",
                 ("Liu et al. 2019 (RoBERTa), Table 5, dev",),
                 table=({"model": "=cmd|'/c calc'!A1", "MNLI": 90.2}, {"model": "BERT-large", "MNLI": 86.6})),
    ]


def test_slide_deck_opens_with_one_slide_per_item_and_its_source() -> None:
    from pptx import Presentation
    from pptx.shapes.picture import Picture

    deck = Presentation(io.BytesIO(export.slide_deck(pack(), "Reading group")))
    slides = list(deck.slides)
    assert len(slides) == 2 + 2  # title, two items, sources
    assert slides[0].shapes.title.text == "Reading group"
    texts = ["\n".join(s.text_frame.text for s in slide.shapes if s.has_text_frame) for slide in slides]
    assert any(isinstance(s, Picture) for s in slides[1].shapes)
    assert "Source: Devlin et al. 2019, Table 1; Brown et al. 2020, Table 2.1" in texts[1] and "🙂 Ελληνικά 中文" in texts[1]
    table = next(s for s in slides[2].shapes if s.has_table).table
    assert table.cell(0, 0).text == "model" and table.cell(2, 0).text == "BERT-large"
    assert "Source: Liu et al. 2019 (RoBERTa), Table 5, dev" in texts[2]
    assert "Devlin et al. 2019, Table 1" in texts[3] and "Liu et al. 2019 (RoBERTa), Table 5, dev" in texts[3]
    empty = Presentation(io.BytesIO(export.slide_deck([])))
    assert len(empty.slides) == 2


def test_handout_is_self_contained_and_escapes_text() -> None:
    page = export.handout_html(pack())
    assert "data:image/png;base64," in page
    external = re.findall(r"""(?:src|href)\s*=\s*['"]?(?:https?:)?//""", page)
    assert not external, external
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert "Brown et al. 2020, Table 2.1" in page and "BERT-large" in page


def test_zip_holds_images_tables_handout_and_deck() -> None:
    z = zipfile.ZipFile(io.BytesIO(export.pack_zip(pack())))
    names = set(z.namelist())
    assert names == {"01.png", "01.svg", "02.csv", "02.md", "captions.txt", "handout.html", "deck.pptx"}
    png_size(z.read("01.png"))
    csv = z.read("02.csv").decode("utf-8-sig")
    assert "'=cmd" in csv and "\n=cmd" not in csv  # a formula in a table is neutralised for spreadsheets
    assert "Liu et al. 2019 (RoBERTa), Table 5, dev" in z.read("captions.txt").decode()


# ------------------------------------------------------------------------------ saved packs
def test_a_saved_pack_round_trips_with_its_text_and_tables() -> None:
    items = [PackItem(title="日本語 🙂 <b>", caption="=HYPERLINK(\"x\")", sources=("BERT, Table 1, dev",),
                      figure=chart().to_json(), link="/attention?model=bert"),
             PackItem(title="t", table=({"model": "BERT", "score": 80.5},))]
    title, back = export.pack_from_bytes(export.pack_to_bytes(items, "Deck"))
    assert title == "Deck" and back == items


def test_a_saved_pack_is_untrusted_input() -> None:
    import json
    import zlib

    def saved(doc: dict) -> bytes:
        return zlib.compress(json.dumps(doc).encode())

    item = {"title": "x", "table": [{"a": 1}]}
    for link in ("javascript:alert(1)", "data:text/html,x", "//evil.example/x"):
        _, items = export.pack_from_bytes(saved({"format": "bfe-pack/1", "items": [dict(item, link=link)]}))
        assert items[0].link == ""
    for junk in (b"", b"not zlib", zlib.compress(b"[1, 2]"), saved({"format": "other", "items": []}),
                 saved({"format": "bfe-pack/1", "items": [{"title": "both", "figure": "{}", "table": [{}]}]}),
                 saved({"format": "bfe-pack/1", "items": [{"title": "t", "table": "rows"}]})):
        with pytest.raises(ValueError):
            export.pack_from_bytes(junk)
    bomb = zlib.compress(b" " * (export.MAX_PACK_BYTES + 4 * 2**20), 9)  # ~50 KB that inflates to 54 MB
    assert len(bomb) < 1_000_000
    with pytest.raises(ExportTooLarge, match="inflates"):
        export.pack_from_bytes(bomb)
    with pytest.raises(ExportTooLarge, match="at most 100"):
        export.pack_from_bytes(saved({"format": "bfe-pack/1", "items": [item] * 150}))


def test_non_latin_text_and_emoji_are_drawn_not_boxes() -> None:
    """Without a CJK or emoji font, two different three-character titles both draw as the same three boxes."""
    def png(title: str) -> bytes:
        return export.to_png(go.Figure(go.Scatter(x=[1, 2], y=[2, 1]), layout={"title": title, "width": 400, "height": 300}))

    assert png("日本語") != png("中文字")
    assert png("한국어") != png("조선말")
    assert png("🙂🚀🎓") != png("🔥🧠📈")


def test_a_saved_pack_of_random_bytes_is_read_or_refused_by_name() -> None:
    """Property: random bytes, random deflated bytes and deflated JSON of the wrong shape are refused with the two
    documented errors (ValueError: not a pack; ExportTooLarge: past its bounds), or read as a title and items."""
    import json
    import zlib

    from hypothesis import given, settings
    from hypothesis import strategies as st

    shapes = st.recursive(st.none() | st.booleans() | st.floats() | st.text(max_size=10),
                          lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
                          max_leaves=20)
    packs = st.one_of(st.binary(max_size=2000), st.binary(max_size=2000).map(zlib.compress),
                      shapes.map(lambda doc: zlib.compress(json.dumps(doc).encode())),
                      st.dictionaries(st.sampled_from(["title", "items", "version", "kind"]), shapes, max_size=4)
                      .map(lambda doc: zlib.compress(json.dumps(doc).encode())))

    @settings(max_examples=250, deadline=None, derandomize=True, database=None)
    @given(packs)
    def check(raw: bytes) -> None:
        try:
            title, items = export.pack_from_bytes(raw)
        except (ValueError, ExportTooLarge):
            return
        assert isinstance(title, str) and all(isinstance(i, PackItem) for i in items)

    check()
