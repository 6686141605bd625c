"""Figures and coloured text for the Representations page (numpy in, plotly figures or escaped HTML out; no torch)."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from analysis.attention_plots import label

if TYPE_CHECKING:
    import plotly.graph_objects as go

    from analysis.representations import LayerContextuality

#: Okabe-Ito (colour-blind-safe) plus grey and wine: one colour per group for the demo set's nine senses.
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000", "#999999", "#882255")


def projection_figure(coords: np.ndarray, groups: Sequence[str], texts: Sequence[str], hover: Sequence[str],
                      title: str, method: str) -> go.Figure:
    """One point per token, coloured by ``groups`` (word or sense), labelled with ``texts``, sentence on hover."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for i, g in enumerate(dict.fromkeys(groups)):
        idx = [j for j, x in enumerate(groups) if x == g]
        fig.add_trace(go.Scatter(
            x=coords[idx, 0], y=coords[idx, 1], mode="markers+text", name=label(g) or "(other)",
            text=[label(texts[j]) for j in idx], textposition="top center", textfont={"size": 10},
            marker={"size": 10, "color": PALETTE[i % len(PALETTE)], "line": {"width": 0.5, "color": "white"}},
            customdata=[html.escape(hover[j]) for j in idx], hovertemplate="%{text}: %{customdata}<extra></extra>"))
    axis = {"PCA": "component", "t-SNE": "t-SNE", "UMAP": "UMAP"}.get(method, method)
    fig.update_layout(title=title, height=520, margin={"l": 10, "r": 10, "t": 50, "b": 10}, legend={"title": ""},
                      xaxis={"title": f"{axis} 1", "zeroline": False}, yaxis={"title": f"{axis} 2", "zeroline": False})
    return fig


def contextuality_figure(measures: Sequence[LayerContextuality], model_id: str) -> go.Figure:
    """Ethayarajh's curves by layer: self-similarity, intra-sentence similarity, anisotropy, adjusted self-similarity."""
    import plotly.graph_objects as go

    layers = [m.layer for m in measures]
    fig = go.Figure()
    for name, values, dash in (
            ("self-similarity", [m.self_similarity for m in measures], "solid"),
            ("intra-sentence similarity", [m.intra_sentence for m in measures], "solid"),
            ("anisotropy (random pairs)", [m.anisotropy for m in measures], "dot"),
            ("self-similarity − anisotropy", [m.adjusted_self_similarity for m in measures], "dash")):
        fig.add_trace(go.Scatter(x=layers, y=values, name=name, mode="lines+markers", line={"dash": dash},
                                 hovertemplate=f"{name}, layer %{{x}}: %{{y:.3f}}<extra></extra>"))
    fig.update_layout(title=f"How contextual, layer by layer: {label(model_id)}", height=420,
                      margin={"l": 10, "r": 10, "t": 50, "b": 10}, xaxis={"title": "layer (0: embeddings)", "dtick": 1},
                      yaxis={"title": "mean cosine similarity"})
    return fig


def cka_figure(matrix: np.ndarray, x_title: str, y_title: str, title: str) -> go.Figure:
    """Linear CKA between layers (rows: ``y_title``'s layers, columns: ``x_title``'s)."""
    import plotly.graph_objects as go

    fig = go.Figure(go.Heatmap(z=matrix, colorscale="Viridis", zmin=0, zmax=1, colorbar={"title": "CKA"},
                               hovertemplate=f"{label(y_title)} layer %{{y}} · {label(x_title)} layer %{{x}}: %{{z:.3f}}<extra></extra>"))
    fig.update_layout(title=title, height=460, margin={"l": 10, "r": 10, "t": 50, "b": 10},
                      xaxis={"title": f"{label(x_title)} layer", "dtick": 1},
                      yaxis={"title": f"{label(y_title)} layer", "dtick": 1, "autorange": "reversed"})
    return fig


def neuron_figure(product: np.ndarray, keys: Sequence[str], query: str, scores: np.ndarray, probs: np.ndarray) -> go.Figure:
    """bertviz's neuron view as two panels: query × key elementwise (keys × dimensions), and the scores and weights."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = [label(k) for k in keys]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.72, 0.28], horizontal_spacing=0.04,
                        subplot_titles=(f"q({label(query)}) × k, elementwise", "q·k/√d and softmax"))
    lim = float(np.nanmax(np.abs(product))) if product.size else 1.0
    fig.add_trace(go.Heatmap(z=product, y=list(range(len(rows))), colorscale="RdBu", zmid=0, zmin=-lim, zmax=lim,
                             colorbar={"title": "q·k term", "x": 0.7}, hovertemplate="key %{y}, dim %{x}: %{z:.3f}<extra></extra>"),
                  row=1, col=1)
    fig.add_trace(go.Bar(y=list(range(len(rows))), x=np.where(np.isfinite(scores), scores, 0), orientation="h", name="score",
                         marker={"color": "#999999"}, hovertemplate="score %{x:.3f}<extra></extra>"), row=1, col=2)
    fig.add_trace(go.Bar(y=list(range(len(rows))), x=probs, orientation="h", name="weight", marker={"color": "#0072B2"},
                         hovertemplate="weight %{x:.3f}<extra></extra>"), row=1, col=2)
    height = max(360, min(900, 24 * len(rows) + 120))
    fig.update_layout(height=height, margin={"l": 10, "r": 10, "t": 50, "b": 10}, barmode="overlay", showlegend=True,
                      legend={"x": 1.0, "y": 1.0})
    for col in (1, 2):
        fig.update_yaxes(tickvals=list(range(len(rows))), ticktext=rows, autorange="reversed", row=1, col=col,
                         showticklabels=col == 1)
    fig.update_xaxes(title="dimension of the head", row=1, col=1)
    return fig


def saliency_html(tokens: Sequence[str], scores: np.ndarray, special: Sequence[bool], caption: str) -> str:
    """Tokens as coloured text: blue pushes the output up, red down, intensity the share of the largest |score|."""
    s = np.asarray(scores, dtype=float)
    top = float(np.max(np.abs(s))) if s.size and np.isfinite(s).any() else 0.0
    spans = []
    for tok, v, sp in zip(tokens, s, special, strict=True):
        a = 0.0 if top == 0 or not np.isfinite(v) else min(1.0, abs(v) / top)
        colour = f"rgba(0,114,178,{a:.2f})" if v >= 0 else f"rgba(213,94,0,{a:.2f})"
        text_colour = "white" if a > 0.55 else "black"
        style = f"background:{colour};color:{text_colour};padding:2px 4px;margin:1px;border-radius:4px;display:inline-block"
        if sp:
            style += ";opacity:0.5"
        spans.append(f"<span title='{v:+.4f}' style='{style}'>{html.escape(tok)}</span>")
    return (f"<div style='font-family:sans-serif;font-size:16px;line-height:2'>{''.join(spans)}</div>"
            f"<div style='font-family:sans-serif;font-size:12px;color:#555'>{html.escape(caption)}</div>")
