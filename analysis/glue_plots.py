"""Plotly figures and the comparison table as HTML, Markdown and LaTeX for the results database page (no streamlit, no
torch): data in, a figure or text out."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go

from analysis import glue
from analysis.glue import Comparison

FAMILY_COLOURS = {"BERT": "#1f77b4", "RoBERTa": "#ff7f0e", "XLNet": "#2ca02c", "ALBERT": "#d62728", "DistilBERT": "#9467bd",
                  "ERNIE": "#8c564b", "Megatron": "#e377c2", "GPT": "#7f7f7f", "GPT-2": "#7f7f7f", "ELMo": "#bcbd22",
                  "Turing-NLG": "#17becf"}


def _esc(text: object) -> str:
    return html.escape(str(text))


def grouped_bars(comp: Comparison) -> go.Figure:
    """One group per column, one bar per row (model); the hover names the source."""
    fig = go.Figure()
    for row in comp.values.index:
        vals = comp.values.loc[row]
        fig.add_bar(name=_esc(row), x=[_esc(c) for c in comp.values.columns], y=vals.tolist(),
                    customdata=[_esc(s) if isinstance(s, str) else "" for s in comp.sources.loc[row]],
                    hovertemplate="%{x}: <b>%{y}</b><br>%{customdata}<extra>" + _esc(row) + "</extra>")
    finite = comp.values.stack()
    low = max(0.0, math.floor(float(finite.min()) / 5) * 5 - 5) if len(finite) else 0
    fig.update_layout(barmode="group", yaxis_title="reported value", yaxis_range=[low, float(finite.max()) + 2] if len(finite) else None,
                      legend_title="model", margin=dict(t=30, b=10), height=460)
    return fig


def radar(comp: Comparison, separate: bool = False) -> go.Figure:
    """The models on radar axes, one per column: overlaid, or ``separate`` (a small radar per model, 3 per row)."""
    from plotly.subplots import make_subplots

    cols = [_esc(c) for c in comp.values.columns]
    rows = list(comp.values.index)
    finite = comp.values.stack()
    low = max(0.0, math.floor(float(finite.min()) / 10) * 10) if len(finite) else 0
    high = 100 if len(finite) and finite.max() <= 100 else None
    per_row = 3
    n_rows = math.ceil(len(rows) / per_row) if separate else 1
    n_cols = per_row if separate else 1
    fig = make_subplots(rows=n_rows, cols=n_cols, specs=[[{"type": "polar"}] * n_cols] * n_rows,
                        subplot_titles=[_esc(r) for r in rows] if separate else None, horizontal_spacing=0.14,
                        vertical_spacing=0.12 / (n_rows - 1) if n_rows > 1 else 0)
    for i, row in enumerate(rows):
        vals = comp.values.loc[row].tolist()
        at = dict(row=i // per_row + 1, col=i % per_row + 1) if separate else dict(row=1, col=1)
        fig.add_trace(go.Scatterpolar(r=vals + vals[:1], theta=cols + cols[:1], name=_esc(row), connectgaps=False, mode="lines+markers",
                                      fill="toself" if separate else None, showlegend=not separate,
                                      hovertemplate="%{theta}: <b>%{r}</b><extra>" + _esc(row) + "</extra>"), **at)
    fig.update_polars(radialaxis=dict(range=[low, high]), angularaxis=dict(tickfont_size=10))
    fig.update_annotations(yshift=22)  # model names above the top axis label
    fig.update_layout(margin=dict(t=60, b=30, l=60, r=60), height=(360 * n_rows + 60) if separate else 520, legend_title="model")
    return fig


def delta_heatmap(delta: pd.DataFrame, baseline: str) -> go.Figure:
    """Each model's difference from the baseline, per column (green above, red below)."""
    z = delta.to_numpy(dtype=float)
    text = [["" if math.isnan(v) else f"{v:+.1f}" for v in row] for row in z]
    lim = max(1.0, float(pd.Series(z.ravel()).abs().max(skipna=True) or 1.0))
    fig = go.Figure(go.Heatmap(z=z, x=[_esc(c) for c in delta.columns], y=[_esc(r) for r in delta.index], text=text,
                               texttemplate="%{text}", colorscale="RdYlGn", zmid=0, zmin=-lim, zmax=lim,
                               colorbar=dict(title="Δ"), hovertemplate="%{y}<br>%{x}: %{z:+.2f}<extra></extra>"))
    fig.update_layout(title=f"Difference from {_esc(baseline)}", yaxis_autorange="reversed", margin=dict(t=50, b=10),
                      height=max(260, 40 * len(delta) + 120))
    return fig


def score_vs_size(points: pd.DataFrame, column: str) -> go.Figure:
    """Value against parameter count on a log axis, coloured by family, with DistilBERT and ALBERT called out."""
    fig = go.Figure()
    for family, group in points.groupby("family", sort=False):
        fig.add_scatter(x=group["parameters"], y=group["value"], mode="markers+text", name=_esc(family),
                        text=[_esc(m) for m in group["label"]], textposition="top center",
                        marker=dict(size=12, color=FAMILY_COLOURS.get(family, "#555")),
                        customdata=[_esc(s) for s in group["source"]],
                        hovertemplate="%{text}<br>%{x:.3s} parameters<br>" + _esc(column) + ": <b>%{y}</b><br>%{customdata}<extra></extra>")
    fig.update_xaxes(type="log", title="parameters (log scale)")
    fig.update_layout(yaxis_title=_esc(column), height=520, margin=dict(t=30, b=10), legend_title="family")
    return fig


# ------------------------------------------------------------------------- the table as text: HTML, Markdown, LaTeX


def to_html(comp: Comparison) -> str:
    """The table as escaped HTML: the best value per column bold with ★, each cell's source in its tooltip."""
    esc = html.escape
    head = "".join(f"<th title='{esc(t + ' · ' + m)}'>{esc(c)}{'' if comp.higher_is_better[c] else ' ↓'}</th>"
                   for c, (t, m) in comp.columns.items())
    body = []
    for r in comp.values.index:
        cells = []
        for c in comp.values.columns:
            v = comp.values.at[r, c]
            src = comp.sources.at[r, c]
            if isinstance(v, float) and math.isnan(v):
                cells.append("<td class='na'>–</td>")
                continue
            best = bool(comp.best.at[r, c])
            cells.append(f"<td class='{'best' if best else ''}' title='{esc(str(src), quote=True)}'>"
                         f"{'<b>' if best else ''}{esc(glue.fmt(float(v)))}{' ★</b>' if best else ''}</td>")
        body.append(f"<tr><th class='row'>{esc(r)}</th>{''.join(cells)}</tr>")
    style = ("<style>.bfe-glue{border-collapse:collapse;font-size:0.9rem;width:100%}.bfe-glue th,.bfe-glue td{border-bottom:1px solid "
             "rgba(128,128,128,.3);padding:4px 8px;text-align:right;white-space:nowrap}.bfe-glue th.row{text-align:left;min-width:10em;"
             "white-space:normal}.bfe-glue td.best{background:rgba(46,160,67,.18)}.bfe-glue td.na{color:#999}"
             ".bfe-glue td[title]{cursor:help}</style>")
    return (f"{style}<div style='overflow-x:auto'><table class='bfe-glue'><thead><tr><th class='row'>model</th>{head}</tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table></div>")


def _text_table(comp: Comparison) -> pd.DataFrame:
    """The values as text, formatted as the page shows them; the index is named ``model``."""
    out = comp.values.map(lambda v: glue.fmt(float(v))).astype(object)
    out.index.name = "model"
    return out


def to_markdown(comp: Comparison) -> str:
    """A GitHub Markdown table for slides; the best value per column bold. Sources listed under it."""
    from analysis.calculator import MarkdownCell
    from analysis.calculator import to_markdown as markdown_table
    from analysis.safe_text import markdown_text

    t = _text_table(comp)
    t = t.astype(object).where(~comp.best.astype(bool), t.map(lambda v: MarkdownCell(f"**{markdown_text(v)}**")))
    return markdown_table(t) + "\n" + "Sources:\n" + "\n".join("- " + markdown_text(s) for s in _source_list(comp)) + "\n"


def _source_list(comp: Comparison) -> list[str]:
    return list(dict.fromkeys(s.split(" — ")[0] for s in comp.sources.stack().dropna()))


_LATEX = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{", "}": r"\}",
          "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}", ">": r"\textgreater{}"}


def latex_escape(text: str) -> str:
    """Escape LaTeX's special characters so any text typesets literally."""
    return "".join(_LATEX.get(ch, ch) for ch in str(text))


def to_latex(comp: Comparison, caption: str = "Results") -> str:
    """A booktabs ``tabular`` in a ``table`` float; the best value per column in bold; sources in the caption."""
    t = _text_table(comp)
    lines = [r"\begin{table}[t]", r"\centering", r"\small", r"\begin{tabular}{l" + "r" * len(t.columns) + "}", r"\toprule",
             "Model & " + " & ".join(latex_escape(c) for c in t.columns) + r" \\", r"\midrule"]
    for r in t.index:
        cells = [(rf"\textbf{{{latex_escape(v)}}}" if bool(comp.best.at[r, c]) else latex_escape(v)) for c, v in t.loc[r].items()]
        lines.append(latex_escape(r) + " & " + " & ".join(cells) + r" \\")
    srcs = "; ".join(_source_list(comp))
    lines += [r"\bottomrule", r"\end{tabular}", rf"\caption{{{latex_escape(caption)}. Sources: {latex_escape(srcs)}.}}", r"\end{table}"]
    return "\n".join(lines) + "\n"
