"""Plotly figures of BigBird's sparse attention (:mod:`analysis.sparse_attention`): its building blocks side by side,
as the paper's Figure 1 draws them (query rows, key columns, a filled cell where the query attends the key)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: The building blocks in Figure 1's order, each with its colour.
PARTS = {"random": ("Random", "#d62728"), "window": ("Window", "#1f77b4"), "global": ("Global", "#2ca02c"),
         "bigbird": ("BigBird = union", "#6a3d9a")}


def building_blocks(masks: dict[str, np.ndarray], unit: str = "token", title: str = "") -> go.Figure:
    """One panel per part of ``masks`` (:data:`PARTS`' keys, each an (n, n) bool array), square cells, the share of
    attended pairs in each panel's title (the share of pairs). ``unit``: what a row is (token or block)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    parts = [p for p in PARTS if p in masks]
    titles = [f"{PARTS[p][0]}: {masks[p].mean():.0%}" for p in parts]
    fig = make_subplots(rows=1, cols=len(parts), subplot_titles=titles, horizontal_spacing=0.03)
    for i, p in enumerate(parts, start=1):
        colour = PARTS[p][1]
        fig.add_trace(go.Heatmap(z=masks[p].astype(np.int8), zmin=0, zmax=1, showscale=False,
                                 colorscale=[[0, "#ffffff"], [1, colour]], xgap=1 if len(masks[p]) <= 64 else 0,
                                 ygap=1 if len(masks[p]) <= 64 else 0,
                                 hovertemplate=f"query {unit} %{{y}} → key {unit} %{{x}}: %{{z}}<extra>{PARTS[p][0]}</extra>"),
                      row=1, col=i)
        fig.update_yaxes(autorange="reversed", scaleanchor=f"x{i if i > 1 else ''}", showticklabels=i == 1,
                         title_text=f"query {unit}" if i == 1 else None, row=1, col=i)
        fig.update_xaxes(constrain="domain", title_text=f"key {unit}" if i == 1 else None, row=1, col=i)
    fig.update_layout(title=title, height=380, margin={"l": 10, "r": 10, "t": 80 if title else 40, "b": 10},
                      plot_bgcolor="#f0f0f0")
    return fig
