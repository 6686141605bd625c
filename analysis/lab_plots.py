"""Plotly figures for the two labs: training curves, a probe over training, held-out loss against size, per-layer
change after fine-tuning.

Built with ``plotly.graph_objects`` in one constructor call each, not with plotly express: these charts are redrawn on
every rerun of their page (a watched run reruns every 2 s), and express spends about ten times as long as the figure it
makes (``bench/figures.py``). Takes data frames and lists (no torch).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analysis.plot_style import themed

if TYPE_CHECKING:
    import plotly.graph_objects as go



def _groups(frame: Any, by: str) -> list[tuple[Any, Any]]:
    """``frame``'s rows by ``by``, in the order each value first appears (the order plotly express colours them)."""
    return [(key, frame[frame[by] == key]) for key in dict.fromkeys(frame[by])]


def loss_curves(long: Any, *, y: str, title: str, height: int, raw: str | None = None) -> go.Figure:
    """One line per run of ``long`` (columns run, step, ``y``; ``raw``: a column shown beside ``y`` on hover)."""
    import plotly.graph_objects as go

    hover = f"%{{fullData.name}}<br>step %{{x}}<br>{y} %{{y:.3f}}" + (f"<br>{raw} %{{customdata:.3f}}" if raw else "") + "<extra></extra>"
    traces = [go.Scatter(x=g["step"], y=g[y], name=str(run), mode="lines", customdata=g[raw] if raw else None,
                         hovertemplate=hover) for run, g in _groups(long, "run")]
    return themed(go.Figure(traces, layout={"title": title, "height": height, "legend": {"title": {"text": ""}}, "margin": {"t": 50},
                                            "xaxis": {"title": "step"}, "yaxis": {"title": y}}))


def probe_over_training(table: Any, step: int, *, measure: str = "POS probe", chance: float = 0.25) -> go.Figure:
    """A probe's accuracy at each step a run kept (categorical x: the steps are log-spaced), the chosen step marked by a
    dotted line and chance by a dashed one."""
    import plotly.graph_objects as go

    steps = [int(s) for s in table["step"]]
    x = [str(s) for s in steps]
    return themed(go.Figure(go.Scatter(x=x, y=table[measure], mode="lines+markers", name=measure, showlegend=False,
                                       hovertemplate=f"step %{{x}}<br>{measure} %{{y:.3f}}<extra></extra>"), layout={
        "title": f"{measure} accuracy over training",
        "xaxis": {"type": "category", "title": "step (the steps the run kept, log-spaced)"},
        "yaxis": {"range": [0, 1], "title": measure},
        "shapes": [{"type": "line", "xref": "x", "x0": steps.index(step), "x1": steps.index(step), "yref": "paper", "y0": 0, "y1": 1,
                    "line": {"dash": "dot", "color": "#D55E00"}},
                   {"type": "line", "xref": "paper", "x0": 0, "x1": 1, "yref": "y", "y0": chance, "y1": chance,
                    "line": {"dash": "dash", "color": "#999"}}],
        "annotations": [{"text": "chance", "xref": "paper", "x": 1, "xanchor": "right", "yref": "y", "y": chance,
                         "yanchor": "bottom", "showarrow": False}]}))


def loss_against_size(table: Any, budgets: Sequence[str | None] | None) -> go.Figure:
    """Held-out loss against non-embedding parameters, log-log, a line per compute budget (one line where none)."""
    import plotly.graph_objects as go

    x, y = "N (non-embedding)", "held-out loss"
    frame = table.assign(_budget=list(budgets) if budgets else "")
    traces = [go.Scatter(x=g[x], y=g[y], name=str(budget), mode="lines+markers", showlegend=bool(budgets), hovertext=g["run"],
                         hovertemplate=f"%{{hovertext}}<br>{x} %{{x:,}}<br>{y} %{{y:.3f}}<extra></extra>")
              for budget, g in _groups(frame, "_budget")]
    return themed(go.Figure(traces, layout={"title": "Held-out loss against model size", "height": 380,
                                            "legend": {"title": {"text": "compute budget"}},
                                            "xaxis": {"type": "log", "title": x}, "yaxis": {"type": "log", "title": y}}))


def layer_change(change: Any, title: str) -> go.Figure:
    """Two bar charts over the layers, one above the other, each with its own y scale: the relative weight change and
    the CKA of a layer's representations before and after fine-tuning."""
    import plotly.graph_objects as go

    rows = (("weight_change", "relative weight change ‖ΔW‖/‖W‖"), ("cka", "CKA before vs after (1 = unchanged)"))
    traces = [go.Bar(x=change["layer"], y=change[col], name=name, showlegend=False, xaxis="x", yaxis=f"y{i + 1 if i else ''}",
                     marker_color="#636EFA", hovertemplate=f"layer %{{x}}<br>{name}: %{{y:.3f}}<extra></extra>")
              for i, (col, name) in enumerate(rows)]
    return themed(go.Figure(traces, layout={
        "title": title, "height": 460, "margin": {"t": 60},
        "xaxis": {"title": "layer", "anchor": "y2"}, "yaxis": {"domain": [0.54, 1.0]}, "yaxis2": {"domain": [0.0, 0.46]},
        "annotations": [{"text": name, "xref": "paper", "yref": "paper", "x": 1.0, "xanchor": "right", "y": top, "yanchor": "bottom",
                         "showarrow": False} for (_, name), top in zip(rows, (1.0, 0.46), strict=True)]}))
