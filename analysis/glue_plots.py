"""Plotly figures for the results database page (no streamlit, no torch)."""

from __future__ import annotations

import html
import math

import pandas as pd
import plotly.graph_objects as go

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


def radar(comp: Comparison) -> go.Figure:
    """A radar per model over the columns it reports (gaps where it does not)."""
    cols = [_esc(c) for c in comp.values.columns]
    fig = go.Figure()
    for row in comp.values.index:
        vals = comp.values.loc[row].tolist()
        fig.add_scatterpolar(r=vals + vals[:1], theta=cols + cols[:1], name=_esc(row), connectgaps=False, mode="lines+markers",
                             hovertemplate="%{theta}: <b>%{r}</b><extra>" + _esc(row) + "</extra>")
    finite = comp.values.stack()
    low = max(0.0, math.floor(float(finite.min()) / 10) * 10) if len(finite) else 0
    fig.update_layout(polar=dict(radialaxis=dict(range=[low, 100 if len(finite) and finite.max() <= 100 else None])),
                      margin=dict(t=30, b=30), height=520, legend_title="model")
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
