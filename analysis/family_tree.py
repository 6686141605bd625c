"""The family tree: the catalog as a table and as two plotly charts (timeline, size by year).

No torch, no streamlit. Lineage comes from the catalog's families (``parents``); each chart draws
an arrow from the first model of a parent family to the first model of the child family.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from analysis.plot_style import themed
from core import registry
from core.registry import OBJECTIVES, ModelCard

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

#: One colour per objective (colour-blind-safe Okabe-Ito palette).
OBJECTIVE_COLOURS: dict[str, str] = {
    "masked-lm": "#0072B2",
    "permutation-lm": "#E69F00",
    "masked-permuted-lm": "#56B4E9",
    "replaced-token-detection": "#009E73",
    "causal-lm": "#D55E00",
    "sentence-embedding": "#CC79A7",
}

PARAMS_NOTE = ("Parameter counts: exact for downloadable checkpoints (the transformers base model, "
               "counted from its config); for the others, the figure reported in the model's paper.")


def family_frame(cards: tuple[ModelCard, ...] | None = None) -> pd.DataFrame:
    """One row per model: id, family, family name, objective (key and label), year, parameters,
    reported parameters, loadable, paper, arXiv id."""
    import pandas as pd

    cards = cards if cards is not None else registry.all_models()
    fams = registry.families()
    return pd.DataFrame([{
        "id": c.id, "family": c.family, "family_name": fams[c.family].name,
        "objective": c.objective, "objective_label": OBJECTIVES[c.objective],
        "year": c.year, "parameters": c.parameters, "parameters_reported": c.parameters_reported,
        "layers": c.layers, "hidden": c.hidden, "heads": c.heads,
        "loadable": c.loadable, "paper": c.paper, "arxiv": c.arxiv or "",
    } for c in cards])


def family_edges() -> list[tuple[str, str]]:
    """(parent family, child family) pairs, for the families present in the catalog."""
    fams = registry.families()
    return [(p, f) for f in fams for p in fams[f].parents]


def lineage_edges(cards: tuple[ModelCard, ...] | None = None) -> list[tuple[str, str]]:
    """(parent model id, child model id) pairs: the first-listed model of each family stands for it."""
    cards = cards if cards is not None else registry.all_models()
    head: dict[str, str] = {}
    for c in cards:
        head.setdefault(c.family, c.id)
    return [(head[p], head[f]) for p, f in family_edges() if p in head and f in head]


def format_params(n: int) -> str:
    """``109482240`` -> ``'109M'``."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= scale:
            return f"{n / scale:.3g}{unit}"
    return str(n)


def _base_layout(fig: go.Figure, title: str, large: bool) -> go.Figure:
    size = 20 if large else 13
    fig.update_layout(
        title=title, font={"size": size},
        legend={"title": "Objective", "orientation": "h", "y": -0.18},
        margin={"l": 10, "r": 10, "t": 50, "b": 10}, height=560 if large else 470,
    )
    return themed(fig)


def size_figure(large: bool = False) -> go.Figure:
    """Parameters (log scale) against year, coloured by objective, with lineage arrows.

    Points of the same year are spread a little sideways so labels do not sit on each other.
    """
    import plotly.graph_objects as go

    df = family_frame()
    # One point per family and year: the largest model, so the chart stays readable.
    df = df.sort_values("parameters").groupby(["family", "year"], as_index=False).tail(1)
    # Spread each year's points evenly across the year, smallest first, labels alternating above/below.
    df = df.sort_values(["year", "parameters"]).reset_index(drop=True)
    rank = df.groupby("year").cumcount()
    count = df.groupby("year")["id"].transform("count")
    df["x"] = df["year"] - 0.4 + (rank + 0.5) * 0.8 / count
    df["textpos"] = ["top center" if r % 2 == 0 else "bottom center" for r in rank]
    fig = go.Figure()
    for obj, colour in OBJECTIVE_COLOURS.items():
        part = df[df["objective"] == obj]
        if part.empty:
            continue
        fig.add_trace(go.Scatter(
            x=part["x"], y=part["parameters"], mode="markers+text", name=OBJECTIVES[obj],
            text=part["family_name"], textposition=list(part["textpos"]),
            marker={"size": 14 if large else 11, "color": colour, "line": {"width": 1, "color": "#222"}},
            customdata=list(zip(part["id"], part["parameters_reported"], part["paper"], strict=True)),
            hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]} parameters<br>%{customdata[2]}<extra></extra>",
        ))
    # An arrow joins a parent family's first point to the child family's first point.
    pos: dict[str, tuple[float, float]] = {}
    for r in df.sort_values("year").itertuples():
        pos.setdefault(r.family, (r.x, r.parameters))
    for parent, child in family_edges():
        if parent in pos and child in pos:
            (x0, y0), (x1, y1) = pos[parent], pos[child]
            fig.add_annotation(x=x1, y=_log10(y1), ax=x0, ay=_log10(y0), xref="x", yref="y", axref="x", ayref="y",
                               showarrow=True, arrowhead=2, arrowwidth=1, arrowcolor="#999", opacity=0.6, text="")
    fig.update_yaxes(type="log", title="Parameters (log scale)")
    fig.update_xaxes(title="Year", dtick=1, range=[df["x"].min() - 0.4, df["x"].max() + 0.4])
    return _base_layout(fig, "Bigger every year: parameters of the family (one point per family)", large)


def _log10(v: float) -> float:
    import math

    return math.log10(v)


def _lineage_order(years: dict[str, int]) -> list[str]:
    """Families depth-first from the roots, children by year, so each sits just under its parent."""
    fams = registry.families()
    children: dict[str, list[str]] = {f: [] for f in years}
    for f in years:
        parents = [p for p in fams[f].parents if p in years]
        if parents:
            children[max(parents, key=lambda p: years[p])].append(f)
    roots = sorted((f for f in years if not any(p in years for p in fams[f].parents)), key=lambda f: (years[f], f))
    order: list[str] = []

    def visit(f: str) -> None:
        order.append(f)
        for c in sorted(children[f], key=lambda c: (years[c], c)):
            visit(c)

    for r in roots:
        visit(r)
    return order


def timeline_figure(large: bool = False) -> go.Figure:
    """Each family on its own row, placed at the year of its first model, with lineage arrows."""
    import plotly.graph_objects as go

    df = family_frame()
    first = df.sort_values("year").groupby("family", as_index=False).first()
    order = _lineage_order(dict(zip(first["family"], first["year"], strict=True)))
    first = first.set_index("family").loc[order].reset_index()
    first["row"] = range(len(first))
    first["size"] = df.groupby("family")["id"].count().reindex(first["family"]).to_numpy()
    fig = go.Figure()
    for obj, colour in OBJECTIVE_COLOURS.items():
        part = first[first["objective"] == obj]
        if part.empty:
            continue
        fig.add_trace(go.Scatter(
            x=part["year"], y=part["row"], mode="markers+text", name=OBJECTIVES[obj],
            text=part["family_name"], textposition="middle right",
            marker={"size": 16 if large else 13, "color": colour, "symbol": "circle", "line": {"width": 1, "color": "#222"}},
            customdata=list(zip(part["family_name"], part["size"], strict=True)),
            hovertemplate="<b>%{customdata[0]}</b><br>%{customdata[1]} model(s) in the catalog<extra></extra>",
        ))
    rows = {r.family: (r.year, r.row) for r in first.itertuples()}
    for parent, fam in family_edges():
        if parent in rows and fam in rows:
            (x0, y0), (x1, y1) = rows[parent], rows[fam]
            fig.add_annotation(x=x1, y=y1, ax=x0, ay=y0, xref="x", yref="y", axref="x", ayref="y",
                               showarrow=True, arrowhead=2, arrowcolor="#999", opacity=0.6, text="")
    fig.update_yaxes(visible=False, autorange="reversed")
    fig.update_xaxes(title="Year of first release", dtick=1, range=[first["year"].min() - 0.3, first["year"].max() + 1.4])
    return _base_layout(fig, "Who came from whom: the family on a timeline", large)


#: Material Symbols names (the icon font Streamlit ships, so they draw offline) and colours per status.
STATUS_SYMBOLS = {"ready": ("check_circle", "#1a7f37"), "download": ("cloud_download", "#0969da"),
                  "broken": ("warning", "#b35900"), "catalog-only": ("menu_book", "#57606a")}

_CARDS_CSS = """<style>
.bfe-cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(17rem,1fr));gap:1rem;font-family:inherit}
.bfe-card{border:1px solid rgba(49,51,63,.2);border-radius:.5rem;padding:.9rem 1rem;line-height:1.45}
.bfe-card h5{margin:0 0 .4rem 0;font-size:1.05rem;display:flex;align-items:center;gap:.35rem;overflow-wrap:anywhere}
.bfe-card .ms{font-family:'Material Symbols Rounded';font-size:1.25rem;font-weight:normal;line-height:1}
.bfe-card ul{margin:.4rem 0 .4rem 1.1rem;padding:0}.bfe-card p{margin:.3rem 0}
.bfe-card .dim{color:#57606a;font-size:.9rem}.bfe-card code{font-size:.85em}
</style>"""


def _inline(text: str) -> str:
    """Catalog text as HTML: escaped, with `code` spans (the only markup the catalog uses)."""
    import html
    import re

    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def cards_html(cards: list[ModelCard], availability: dict[str, tuple[str, str]], labels: dict[str, str]) -> str:
    """The catalog as one HTML grid of cards (status, objective, year, size, shape, key ideas, paper).

    One element instead of a container per card: the Home page draws faster in the browser (measured:
    ``bench/startup.py``, bench/results/README.md).
    ``availability`` maps an id to (status, message); ``labels`` a status to its words.
    """
    import html

    out = [_CARDS_CSS, '<div class="bfe-cards">']
    for c in cards:
        status, message = availability.get(c.id, ("catalog-only", ""))
        symbol, colour = STATUS_SYMBOLS.get(status, STATUS_SYMBOLS["catalog-only"])
        exact = f" · exact {c.parameters:,}" if c.loadable else ""
        shape = (f"{c.layers} layers · hidden {c.hidden}" + (f" · {c.heads} heads" if c.heads else "")
                 + f" · {c.tokenizer} tokenizer") if c.layers else ""
        paper = (f'<a href="{html.escape(c.paper_url)}" target="_blank" rel="noopener">{_inline(c.paper)}</a>'
                 if c.paper_url else _inline(c.paper))
        ideas = "".join(f"<li>{_inline(i)}</li>" for i in c.key_ideas)
        notes = f" {_inline(c.notes)}" if c.notes else ""
        out.append(
            f'<div class="bfe-card"><h5><span class="ms" style="color:{colour}" aria-hidden="true">{symbol}</span>'
            f"{html.escape(c.id)}</h5>"
            f"<p><b>{html.escape(c.objective_label)}</b> · {c.year} · {html.escape(c.parameters_reported)} parameters "
            f"(paper){exact}</p>" + (f'<p class="dim">{html.escape(shape)}</p>' if shape else "")
            + f"<ul>{ideas}</ul><p>Paper: {paper}</p>"
            f'<p class="dim"><b>{html.escape(labels.get(status, status).capitalize())}.</b> {_inline(message)}{notes}</p></div>')
    out.append("</div>")
    return "".join(out)
