"""Plotly figures of which parts of a model matter (no torch, no streamlit): the logit lens layer by layer, head
importance as a layers × heads heatmap, the pruning curve against random orders, and causal tracing as a layers ×
positions heatmap. Each takes the plain result of :mod:`models.interventions`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import plotly.graph_objects as go

BLUE, ORANGE, GREY = "#0072B2", "#D55E00", "#999999"


def _clean(token: str) -> str:
    return token.replace("Ġ", "").replace("▁", "").replace("##", "") or "␣"


def lens_figure(lens: Any, mask: int = 0) -> go.Figure:
    """One mask of a :class:`~models.interventions.LogitLens`: a row per layer (embeddings at the bottom), its top
    tokens left to right shaded by probability (darker: likelier; the number on hover), and the final answer's
    probability by layer on the right."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    rows = lens.rows[mask]
    k = len(rows[0].top)
    names = ["embeddings" if r.layer == 0 else f"layer {r.layer}" for r in rows]
    fig = make_subplots(rows=1, cols=2, column_widths=[0.72, 0.28], horizontal_spacing=0.04, shared_yaxes=True,
                        subplot_titles=("Top tokens each layer reads", f"p({_clean(lens.answers[mask])}) by layer"))
    fig.add_trace(go.Heatmap(z=[[p for _, p in r.top] for r in rows], x=[f"#{i + 1}" for i in range(k)], y=names,
                             text=[[_clean(t) for t, _ in r.top] for r in rows], texttemplate="%{text}", colorscale="Blues",
                             zmin=0, zmax=1, showscale=False, hovertemplate="%{y}, %{x}: %{text} (%{z:.3f})<extra></extra>"),
                  1, 1)
    fig.add_trace(go.Scatter(x=[r.final_probability for r in rows], y=names, mode="lines+markers", line={"color": ORANGE},
                             hovertemplate="%{y}: %{x:.3f}<extra></extra>", showlegend=False), 1, 2)
    fig.update_xaxes(range=[0, 1], title_text="probability", row=1, col=2)
    fig.update_layout(height=140 + 34 * len(rows), margin={"l": 10, "r": 10, "t": 40, "b": 10})
    return fig


def importance_figure(scores: Any) -> go.Figure:
    """Head importance (layers × heads, normalised per layer) as a heatmap, layer 1 at the bottom."""
    import plotly.graph_objects as go

    layers, heads = len(scores), len(scores[0])
    fig = go.Figure(go.Heatmap(z=[list(map(float, row)) for row in scores], x=[f"head {h}" for h in range(heads)],
                               y=[f"layer {i + 1}" for i in range(layers)], colorscale="Viridis", colorbar={"title": "importance"},
                               hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(height=120 + 30 * layers, margin={"l": 10, "r": 10, "t": 30, "b": 10}, title="Head importance (Michel et al. 2019)")
    return fig


def pruning_figure(curve: Any) -> go.Figure:
    """A :class:`~models.interventions.PruningCurve`: accuracy against the share of heads removed, least important
    first, and random orders (mean with its 95% interval over seeds)."""
    import plotly.graph_objects as go

    share = [100 * r / curve.total for r in curve.removed]
    fig = go.Figure()
    # an accuracy lies in [0, 1]; a t interval over few seeds can reach past it: the band is drawn clipped
    high, low = ([min(1.0, max(0.0, v)) for v in side] for side in (curve.random_high, curve.random_low))
    fig.add_trace(go.Scatter(x=share + share[::-1], y=high + low[::-1], fill="toself",
                             fillcolor="rgba(153,153,153,0.25)", line={"width": 0}, name=f"random order, 95% interval ({curve.seeds} seeds)",
                             hoverinfo="skip"))
    fig.add_trace(go.Scatter(x=share, y=curve.random_mean, mode="lines+markers", line={"color": GREY}, name="random order (mean)"))
    fig.add_trace(go.Scatter(x=share, y=curve.by_importance, mode="lines+markers", line={"color": BLUE}, name="least important first"))
    fig.update_layout(xaxis_title="heads removed (%)", yaxis_title=curve.measure, height=380,
                      margin={"l": 10, "r": 10, "t": 30, "b": 10}, legend={"orientation": "h", "y": -0.25})
    return fig


def patching_figure(patching: Any, restored: bool = True) -> go.Figure:
    """Causal tracing: per layer (rows) and position (columns, the corrupted sentence's tokens; heads for a per-head
    trace), the share of the clean − corrupted logit difference that copying that state restores (or the raw change)."""
    import plotly.graph_objects as go

    z = patching.restored if restored else patching.effects
    if getattr(patching, "unit", "layer") == "head":
        x = [f"head {h + 1}" for h in range(len(z[0]))]
    else:
        x = [f"{i}: {_clean(t)}" for i, t in enumerate(patching.corrupted_tokens)]
    fig = go.Figure(go.Heatmap(z=[list(map(float, row)) for row in z], x=x, y=[f"layer {i + 1}" for i in range(len(z))],
                               colorscale="RdBu", zmid=0, colorbar={"title": "restored" if restored else "Δ logit diff."},
                               hovertemplate="%{y}, %{x}: %{z:.3f}<extra></extra>"))
    fig.update_layout(height=140 + 30 * len(z), margin={"l": 10, "r": 10, "t": 30, "b": 10},
                      title=f"Copying a clean state into the corrupted run: {patching.answer} − {patching.foil} at the mask")
    return fig
