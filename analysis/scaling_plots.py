"""Plotly figures and export tables for the scaling-law page (no torch, no streamlit)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from analysis.scaling import Allocation, Fit

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

POINTS, FIT, BAND, EXTRA = "#0072B2", "#D55E00", "rgba(213, 94, 0, 0.18)", "#009E73"


def curve_frame(f: Fit, x_to: float | None = None, n: int = 120, level: float = 0.95) -> pd.DataFrame:
    """The fitted curve on a log grid from the smallest x to ``x_to`` (or the largest x): x, fit, low, high."""
    import pandas as pd

    xs = f.x if f.x.ndim == 1 else f.x[:, 0]
    hi = max(float(xs.max()), float(x_to or 0))
    grid = np.logspace(np.log10(xs.min()), np.log10(hi), n)
    lo_b, hi_b = f.band(grid, level)
    return pd.DataFrame({"x": grid, "fit": f.predict(grid), f"low {level:.0%}": lo_b, f"high {level:.0%}": hi_b})


def fit_figure(f: Fit, x_label: str, y_label: str, x_to: float | None = None, level: float = 0.95,
               labels: list[str] | None = None) -> go.Figure:
    """Log-log plot: the points, the fitted law with its bootstrap band, and the extrapolation to ``x_to``."""
    import plotly.graph_objects as go

    df = curve_frame(f, x_to, level=level)
    fig = go.Figure()
    fig.add_scatter(x=np.concatenate([df["x"], df["x"][::-1]]), y=np.concatenate([df.iloc[:, 3], df.iloc[:, 2][::-1]]),
                    fill="toself", fillcolor=BAND, line={"width": 0}, hoverinfo="skip", name=f"{level:.0%} band (bootstrap)")
    fig.add_scatter(x=df["x"], y=df["fit"], mode="lines", line={"color": FIT, "width": 3}, name=f.formula,
                    hovertemplate="x = %{x:.4g}<br>fit = %{y:.4g}<extra></extra>")
    fig.add_scatter(x=f.x, y=f.y, mode="markers+text" if labels else "markers", text=labels, textposition="top center",
                    marker={"color": POINTS, "size": 11, "line": {"color": "white", "width": 1}}, name="data",
                    hovertemplate="x = %{x:.4g}<br>y = %{y:.4g}<extra></extra>")
    if x_to and x_to > float(f.x.max()):
        lo, hi = f.band(np.array([x_to]), level)
        y_to = float(f.predict(np.array([x_to]))[0])
        fig.add_scatter(x=[x_to], y=[y_to], mode="markers", marker={"color": EXTRA, "size": 14, "symbol": "diamond"},
                        error_y={"type": "data", "symmetric": False, "array": [hi[0] - y_to], "arrayminus": [y_to - lo[0]]},
                        name=f"extrapolation to {x_to:.3g}", hovertemplate="x = %{x:.4g}<br>predicted %{y:.4g}<extra></extra>")
    fig.update_layout(xaxis={"type": "log", "title": x_label}, yaxis={"type": "log", "title": y_label}, height=460,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10}, legend={"orientation": "h", "y": -0.18})
    return fig


def residual_figure(f: Fit, x_label: str) -> go.Figure:
    """Relative residuals log y − log L(x), in percent, against x."""
    import plotly.graph_objects as go

    xs = f.x if f.x.ndim == 1 else f.x[:, 0]
    fig = go.Figure(go.Scatter(x=xs, y=100 * f.residuals, mode="markers", marker={"color": POINTS, "size": 9},
                               hovertemplate="x = %{x:.4g}<br>%{y:.2f}%<extra></extra>"))
    fig.add_hline(y=0, line_color="#444")
    fig.update_layout(xaxis={"type": "log", "title": x_label}, yaxis={"title": "residual (% of y)"}, height=240,
                      margin={"l": 10, "r": 10, "t": 10, "b": 10})
    return fig


def allocation_frame(rows: list[Allocation]) -> pd.DataFrame:
    import pandas as pd

    return pd.DataFrame([{"law": a.law, "N_opt (parameters)": a.n_opt, "D_opt (tokens)": a.d_opt,
                          "tokens per parameter": a.tokens_per_parameter,
                          "predicted loss": a.loss if a.loss is not None else float("nan"), "source": a.source} for a in rows])


def figure_html(fig: go.Figure) -> str:
    """A standalone HTML file of the figure that works offline (plotly.js inlined)."""
    return fig.to_html(include_plotlyjs=True, full_html=True)


def describe(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
