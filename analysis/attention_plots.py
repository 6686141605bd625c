"""Plotly figures for the Attention page (a head's heatmap, the layers × heads statistics grid, rollout) and the XLNet
page (a factorization order, attention into memory).

Takes numpy arrays and token lists (no torch). Tokens are placed by position (``tickvals``) so
repeated tokens keep their own row, and ``<``/``>`` are written as entities so a token like
``<script>`` is drawn as text.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from analysis.plot_style import themed

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
    # each cell's (row token, column token) for its hover, as one array: plotly validates a nested list cell by cell,
    # an array at once (measured: bench/results/README.md, "Figures that lived in code comments")
    pairs = np.stack(np.broadcast_arrays(np.asarray(r_lab, dtype=object)[:, None], np.asarray(c_lab, dtype=object)[None, :]), axis=-1)
    size = height or max(360, min(900, 22 * len(rows) + 140))
    return go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=SCALE, zmin=0, zmax=zmax,
        colorbar={"title": colorbar}, customdata=pairs,  # (rows, cols, 2)
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>"), layout={
        "title": title, "height": size, "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        "xaxis": {"tickvals": list(range(len(cols))), "ticktext": c_lab, "side": "top", "tickangle": -60, "title": "attends to"},
        "yaxis": {"tickvals": list(range(len(rows))), "ticktext": r_lab, "autorange": "reversed", "title": "token"}})


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


def order_path(tokens: list[str], order: list[int], targets: list[int], selected: int | None = None) -> go.Figure:
    """The factorization order drawn as a path over the tokens (XLNet paper, Figure 1 style): tokens
    in sentence order along x, arcs from each position to the next one in the order, numbered; targets
    in orange, the selected position ringed, and what it is conditioned on in blue."""
    import plotly.graph_objects as go

    n = len(tokens)
    rank = {p: r for r, p in enumerate(order)}
    seen = set(order[: rank[selected]]) if selected in rank else set()
    top = 0.35 + 0.12 * max((abs(order[r + 1] - order[r]) for r in range(len(order) - 1)), default=0)
    # Every trace and annotation handed to the figure at once: one validation, where add_scatter/add_annotation per arc
    # validates the figure's growing lists again at each call (most of a page run for a long order).
    arcs, numbers = [], []
    for r in range(len(order) - 1):
        a, b = order[r], order[r + 1]
        xs = np.linspace(a, b, 20)
        height = 0.35 + 0.12 * abs(b - a)
        ys = height * np.sin(np.linspace(0, np.pi, 20)) * (1 if r % 2 == 0 else -1)
        arcs.append(go.Scatter(x=xs, y=ys, mode="lines", line={"color": "#999", "width": 1.5}, hoverinfo="skip", showlegend=False))
        numbers.append({"x": (a + b) / 2, "y": float(ys[10]), "text": str(r + 1), "showarrow": False, "font": {"size": 11, "color": "#555"}})
    colours = ["#D55E00" if p in targets else ("#0072B2" if p in seen else "#BBBBBB") for p in range(n)]
    tokens_trace = go.Scatter(
        x=list(range(n)), y=[0] * n, mode="markers+text", text=[label(t) for t in tokens], textposition="bottom center",
        marker={"size": 22, "color": colours, "line": {"color": ["black" if p == selected else "white" for p in range(n)],
                                                        "width": [3 if p == selected else 1 for p in range(n)]}},
        customdata=[rank.get(p, -1) + 1 for p in range(n)], showlegend=False,
        hovertemplate="position %{x}: %{text}<br>step %{customdata} of the order<extra></extra>")
    fig = go.Figure([*arcs, tokens_trace], layout={
        "height": 300, "margin": {"l": 10, "r": 10, "t": 10, "b": 10}, "plot_bgcolor": "white", "annotations": numbers,
        "xaxis": {"visible": False, "range": [-0.7, n - 0.3]}, "yaxis": {"visible": False, "range": [-top - 0.9, top + 0.2]}})
    return fig


def memory_share(segments: list[int], shares: list[list[float]], height: int = 220) -> go.Figure:
    """XLNet's segment recurrence: per layer, the share of each segment's attention that goes into the remembered previous segment."""
    import plotly.graph_objects as go

    layers = len(shares[0]) if shares else 0
    traces = [go.Scatter(x=list(segments), y=[s[li] for s in shares], name=f"layer {li}", mode="lines+markers",
                         hovertemplate=f"layer {li}, segment %{{x}}: %{{y:.1%}}<extra></extra>") for li in range(layers)]
    return themed(go.Figure(traces, layout={"height": height, "margin": {"l": 10, "r": 10, "t": 10, "b": 10}, "xaxis": {"title": "segment", "dtick": 1},
                                            "yaxis": {"title": "share into memory", "rangemode": "tozero"}}))
