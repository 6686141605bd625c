"""Plotly figures of a preset's verdict (no torch, no streamlit): arms side by side with their intervals and
seeds as points, the random-init control beside them; for the scaling presets, the points per seed on log axes."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from scipy import stats

from analysis.plot_style import themed

if TYPE_CHECKING:
    import plotly.graph_objects as go

ARM, CONTROL, CHANCE = "#0072B2", "#999999", "#D55E00"
SEEDS = "#222222"


def mean_interval(values: list[float], level: float = 0.95) -> tuple[float, float, float]:
    """Mean and its Student-t interval over seeds (the same rule as the verdict); NaN bounds for one seed."""
    x = np.asarray(values, dtype=float)
    m = float(x.mean()) if len(x) else float("nan")
    if len(x) < 2:
        return m, float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x)))
    return m, m - half, m + half


#: Measures drawn as points on a zoomed axis, not bars from zero.
LOSSES = frozenset({"held_out_loss"})


def seed_name(claim: dict[str, Any], replicate: Any) -> str:
    """A point's name by the seed it ran: the experiment's first seed (``first_seed``, where not 0: an experiment on
    fresh seeds starts past 0) plus its replicate."""
    return f"seed {int(claim.get('first_seed') or 0) + int(replicate)}"


def arms_figure(claim: dict[str, Any]) -> go.Figure:
    """One claim of :func:`services.lab.experiments.report`: per arm the mean over seeds with its 95% interval, each seed
    as a point, and the same architecture from random initialisation (where measured); a line at chance."""
    import plotly.graph_objects as go

    fig = go.Figure()
    names, means, lows, highs, colours = [], [], [], [], []
    seeds = {name: [seed_name(claim, rep) for rep, _ in pts]
             for name, pts in [*claim["scores"].items(), *claim.get("controls", {}).items()]}
    groups = [(arm, [v for _, v in pts], ARM) for arm, pts in claim["scores"].items()]
    for name, pts in claim.get("controls", {}).items():
        groups.append((name, [v for _, v in pts], CONTROL))
    for name, values, colour in groups:
        m, lo, hi = mean_interval(values)
        names.append(name)
        means.append(m)
        lows.append(m - lo if lo == lo else 0)
        highs.append(hi - m if hi == hi else 0)
        colours.append(colour)
    error = {"type": "data", "symmetric": False, "array": highs, "arrayminus": lows, "thickness": 2, "width": 8}
    if claim.get("measure") in LOSSES:  # a loss has no zero to stand a bar on: a bar from 0 to 7 hides a 0.05 gap
        fig.add_scatter(x=names, y=means, mode="markers", marker={"color": colours, "size": 14, "symbol": "diamond"},
                        error_y=error, name="mean over seeds (95% t interval)", hovertemplate="%{x}: %{y:.3f}<extra></extra>")
    else:
        fig.add_bar(x=names, y=means, marker_color=colours, opacity=0.55, name="mean over seeds (95% t interval)",
                    error_y=error, hovertemplate="%{x}: %{y:.3f}<extra></extra>")
    xs, ys, text = [], [], []
    for name, values, _ in groups:
        xs += [name] * len(values)
        ys += values
        text += seeds[name]
    fig.add_scatter(x=xs, y=ys, mode="markers", marker={"color": SEEDS, "size": 8, "symbol": "circle-open"}, name="one seed",
                    text=text, hovertemplate="%{x}, %{text}: %{y:.3f}<extra></extra>")
    if claim.get("chance") is not None:
        fig.add_hline(y=claim["chance"], line={"color": CHANCE, "dash": "dot"}, annotation_text="chance")
    verdict = claim.get("verdict") or {}
    title = claim.get("label", "")
    if verdict:
        title += f" — {verdict['label']}"
    fig.update_layout(title=title, height=360, yaxis_title=claim.get("label", "score"),
                      legend={"orientation": "h", "y": -0.2}, margin={"t": 50, "b": 40}, bargap=0.45)
    return themed(fig)


def trend_figure(claim: dict[str, Any]) -> go.Figure:
    """A trend claim's points, log-log, held-out loss against N: points of (seed, N, loss) as a line per seed; points
    of (seed, compute, N, loss) (an IsoFLOP grid) as one series per compute budget. The points say which, not the
    preset's name."""
    import plotly.graph_objects as go

    fig = go.Figure()
    pts = claim.get("points", [])
    if pts and len(pts[0]) == 4:
        for c in sorted({p[1] for p in pts}):
            row = sorted((p[2], p[3]) for p in pts if p[1] == c)
            fig.add_scatter(x=[n for n, _ in row], y=[v for _, v in row], mode="markers", name=f"C ≈ {c:.2g} FLOPs")
        x_title = "N (non-embedding parameters)"
    else:
        for seed in sorted({p[0] for p in pts}):
            row = sorted((p[1], p[2]) for p in pts if p[0] == seed)
            fig.add_scatter(x=[n for n, _ in row], y=[v for _, v in row], mode="lines+markers",
                            name=seed_name(claim, seed))
        x_title = "N (non-embedding parameters)"
    verdict = claim.get("verdict") or {}
    title = "Held-out loss against model size" + (f" — {verdict['label']}" if verdict else "")
    fig.update_layout(title=title, height=360, xaxis_type="log", yaxis_type="log",
                      xaxis_title=x_title, yaxis_title="held-out loss", margin={"t": 50})
    return themed(fig)


def ratio_figure(claim: dict[str, Any]) -> go.Figure:
    """A ratio claim (retention, speed-up): each seed's ratio as a point, the verdict's estimate with its interval
    (the delta method over paired seeds), the floor the claim is decided against and the paper's value."""
    import plotly.graph_objects as go

    reps = [int(rep) for rep, _, _ in claim["points"]]
    ratios = [top / bottom for _, top, bottom in claim["points"]]
    fig = go.Figure()
    fig.add_scatter(x=[seed_name(claim, r) for r in reps], y=ratios, mode="markers", name="one seed",
                    marker={"color": SEEDS, "size": 9, "symbol": "circle-open"}, hovertemplate="%{x}: %{y:.3f}<extra></extra>")
    verdict = claim.get("verdict") or {}
    if verdict and math.isfinite(verdict.get("low", float("nan"))):
        est = verdict["estimate"]
        fig.add_bar(x=["all seeds"], y=[est], marker_color=ARM, opacity=0.55, name="ratio of means (95% interval)",
                    error_y={"type": "data", "symmetric": False, "array": [verdict["high"] - est],
                             "arrayminus": [est - verdict["low"]], "thickness": 2, "width": 8},
                    hovertemplate="ratio of means: %{y:.3f}<extra></extra>")
    floor = claim["claim"].get("margin")
    if floor is not None:
        fig.add_hline(y=floor, line={"color": CHANCE, "dash": "dash"}, annotation_text=f"claim's floor {floor:g}")
    if verdict.get("reference") is not None and verdict["reference"] != floor:
        fig.add_hline(y=verdict["reference"], line={"color": CONTROL, "dash": "dot"},
                      annotation_text=f"paper {verdict['reference']:.3g}", annotation_position="bottom right")
    title = claim.get("label", "") + (f" — {verdict['label']}" if verdict else "")
    fig.update_layout(title=title, height=360, yaxis_title=claim.get("label", "ratio"),
                      legend={"orientation": "h", "y": -0.2}, margin={"t": 50, "b": 40}, bargap=0.6)
    return themed(fig)
