"""Plotly figures for the Attention page: a head's heatmap, the layers × heads statistics grid, rollout.

Takes numpy arrays and token lists (no torch). Tokens are placed by position (``tickvals``) so
repeated tokens keep their own row, and ``<``/``>`` are written as entities so a token like
``<script>`` is drawn as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import plotly.graph_objects as go

SCALE = "Blues"


def label(token: str) -> str:
    return token.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def heatmap(matrix: np.ndarray, rows: list[str], cols: list[str] | None = None, title: str = "", height: int | None = None,
            zmax: float | None = None, colorbar: str = "attention") -> go.Figure:
    """Attention matrix (rows attend to columns) with token labels on both axes."""
    import plotly.graph_objects as go

    cols = rows if cols is None else cols
    zmax = float(np.nanmax(matrix)) if zmax is None and np.size(matrix) else zmax  # 0 stays white: no exaggerated contrast
    r_lab, c_lab = [label(t) for t in rows], [label(t) for t in cols]
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=SCALE, zmin=0, zmax=zmax,
        colorbar={"title": colorbar}, customdata=[[[r_lab[i], c_lab[j]] for j in range(len(cols))] for i in range(len(rows))],
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>"))
    size = height or max(360, min(900, 22 * len(rows) + 140))
    fig.update_layout(
        title=title, height=size, margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        xaxis={"tickvals": list(range(len(cols))), "ticktext": c_lab, "side": "top", "tickangle": -60, "title": "attends to"},
        yaxis={"tickvals": list(range(len(rows))), "ticktext": r_lab, "autorange": "reversed", "title": "token"})
    return fig


def stats_grid(values: np.ndarray, measure: str, title: str = "", selected: tuple[int, int] | None = None) -> go.Figure:
    """Layers × heads grid of one head statistic; the selected head is outlined."""
    import plotly.graph_objects as go

    layers, heads = values.shape
    fig = go.Figure(go.Heatmap(z=values, x=list(range(heads)), y=list(range(layers)), colorscale="Viridis",
                               colorbar={"title": measure},
                               hovertemplate="layer %{y}, head %{x}: %{z:.3f}<extra></extra>"))
    if selected is not None:
        li, hi = selected
        fig.add_shape(type="rect", x0=hi - 0.5, x1=hi + 0.5, y0=li - 0.5, y1=li + 0.5, line={"color": "#D55E00", "width": 3})
    fig.update_layout(title=title, height=max(260, 34 * layers + 120), margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
                      xaxis={"title": "head", "dtick": 1}, yaxis={"title": "layer", "dtick": 1, "autorange": "reversed"})
    return fig
