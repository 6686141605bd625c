"""The classroom-kit command and the family-tree data."""

from __future__ import annotations

import time

import pytest

from analysis import family_tree
from core import registry
from core.errors import ModelUnavailable
from models import fetch


def test_list_shows_every_model_and_where_it_is(capsys: pytest.CaptureFixture[str]) -> None:
    assert fetch.main(["--list"]) == 0
    out = capsys.readouterr().out
    lines = {line.split()[0]: line for line in out.splitlines()[1:]}
    assert set(lines) == {c.id for c in registry.all_models()}
    assert "ready" in lines["gpt2"] and "local folder" in lines["gpt2"]
    assert "bundled" in lines["sentence-transformers/all-MiniLM-L6-v2"]
    assert "download" in lines["roberta-large"]
    assert "catalog-only" in lines["gpt-3"]


def test_fetch_offline_fails_fast_and_says_why(capsys: pytest.CaptureFixture[str]) -> None:
    start = time.perf_counter()
    with pytest.raises(ModelUnavailable, match="cannot be reached"):
        fetch.fetch("roberta-large")
    assert fetch.main(["roberta-large", "gpt-3", "not-a-model"]) == 1
    err = capsys.readouterr().err
    assert "cannot be reached" in err and "catalog-only" in err and "Unknown model" in err
    assert time.perf_counter() - start < 5


def test_kit_models_are_in_the_catalog() -> None:
    assert all(registry.get(m).loadable for m in fetch.KIT)


def test_family_frame_and_lineage() -> None:
    df = family_tree.family_frame()
    assert len(df) == len(registry.all_models()) and df["parameters"].gt(0).all()
    edges = family_tree.lineage_edges()
    assert ("bert-base-uncased", "roberta-base") in edges
    assert ("transformer-xl", "xlnet-base-cased") in edges
    assert ("openai-gpt", "gpt2") in edges and ("gpt2", "gpt-3") in edges
    # the successors, to 2024: RoBERTa -> XLM-R and DeBERTa, BERT + XLNet -> MPNet, BERT -> ModernBERT
    fams = family_tree.family_edges()
    assert {("roberta", "xlm-r"), ("roberta", "deberta"), ("bert", "mpnet"), ("xlnet", "mpnet"), ("bert", "modernbert")} <= set(fams)
    assert max(df["year"]) == 2024


def test_charts_cover_every_family_with_log_axis() -> None:
    fig = family_tree.size_figure()
    assert fig.layout.yaxis.type == "log"
    names = {t for trace in fig.data for t in trace.text}
    assert names == {f.name for f in registry.families().values()}
    assert len(fig.layout.annotations) == len(family_tree.family_edges()) == 21
    timeline = family_tree.timeline_figure()
    rows = sorted(y for trace in timeline.data for y in trace.y)
    assert rows == list(range(len(registry.families())))
    assert len(timeline.layout.annotations) == 21


def test_lineage_order_puts_children_after_parents() -> None:
    first_years = family_tree.family_frame().groupby("family")["year"].min().to_dict()
    order = family_tree._lineage_order(first_years)
    assert sorted(order) == sorted(first_years)
    assert order.index("bert") < order.index("roberta") and order.index("transformer-xl") < order.index("xlnet")


@pytest.mark.parametrize(("n", "text"), [(109482240, "109M"), (175_000_000_000, "175B"), (13_483_008, "13.5M"), (999, "999")])
def test_format_params(n: int, text: str) -> None:
    assert family_tree.format_params(n) == text


def test_model_cards_html_escapes_catalog_text_and_shows_status() -> None:
    import dataclasses

    card = registry.find("transformer-xl")
    hostile = dataclasses.replace(card, id="x<script>alert(1)</script>", notes="<img src=x onerror=alert(1)> keeps `mems`")
    html = family_tree.cards_html([hostile, registry.find("bert-base-uncased")],
                                  {hostile.id: ("catalog-only", "No <b>weights</b>."),
                                   "bert-base-uncased": ("ready", "On this machine.")},
                                  {"catalog-only": "catalog only", "ready": "ready"})
    assert "<script>" not in html and "<img" not in html and "&lt;script&gt;" in html
    assert "<code>mems</code>" in html and "No &lt;b&gt;weights&lt;/b&gt;." in html
    assert html.count('class="bfe-card"') == 2 and "check_circle" in html and "menu_book" in html
    assert 'href="https://arxiv.org/abs/1810.04805"' in html and "exact 109,482,240" in html
