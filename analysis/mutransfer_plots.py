"""The μTransfer slide's figure redrawn from the lab's runs (Yang et al. 2022, Tensor Programs V, Figure 1): held-out
loss against log2 learning rate, one line per width, SP on the left and μP on the right. Plotly, no torch, no
streamlit."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from analysis.plot_style import themed

if TYPE_CHECKING:
    import plotly.graph_objects as go

#: Narrow to wide: light to dark (Tensor Programs V's Figure 1 colours its widths the same way).
WIDTH_COLOURS = ("#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
PANELS = (("sp", "Standard parametrisation (SP)"), ("mup", "Maximal update (μP)"))


def curves(points: list[Any]) -> dict[str, dict[int, list[tuple[float, float, int]]]]:
    """parametrisation → width → [(log2 rate, mean held-out loss over the seeds that did not diverge, diverged seeds)]
    from ``(parametrisation, seed, width, rate, loss)`` points."""
    cells: dict[tuple[str, int, float], list[float]] = {}
    for p, _seed, width, rate, loss in points:
        cells.setdefault((p, int(width), float(rate)), []).append(float(loss))
    out: dict[str, dict[int, list[tuple[float, float, int]]]] = {}
    for (p, width, rate), losses in sorted(cells.items()):
        ok = [v for v in losses if math.isfinite(v)]
        mean = sum(ok) / len(ok) if ok else math.nan
        out.setdefault(p, {}).setdefault(width, []).append((math.log2(rate), mean, len(losses) - len(ok)))
    return out


def transfer_figure(claim: dict[str, Any]) -> go.Figure:
    """Two panels (SP, μP) of :func:`services.lab.experiments.report`'s μTransfer claim: per width the seed-mean held-out
    loss against log2 learning rate, each seed as a faint point, each width's best rate as a star."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    pts = claim.get("points", [])
    lines = curves(pts)
    widths = sorted({int(p[2]) for p in pts})
    fig = make_subplots(rows=1, cols=2, shared_yaxes=True, subplot_titles=[t for _, t in PANELS], horizontal_spacing=0.05)
    for col, (p, _) in enumerate(PANELS, start=1):
        for i, width in enumerate(widths):
            row = lines.get(p, {}).get(width)
            if not row:
                continue
            colour = WIDTH_COLOURS[min(len(WIDTH_COLOURS) - 1, round(i * (len(WIDTH_COLOURS) - 1) / max(1, len(widths) - 1)))]
            xs, ys = [x for x, _, _ in row], [y for _, y, _ in row]
            text = [f"{d} seed(s) diverged" if d else "" for _, _, d in row]
            fig.add_trace(go.Scatter(x=xs, y=ys, mode="lines+markers", name=f"width {width}", legendgroup=str(width),
                                     showlegend=col == 1, line={"color": colour}, text=text,
                                     hovertemplate=f"width {width}, log2 lr %{{x}}: %{{y:.3f}} %{{text}}<extra></extra>"),
                          row=1, col=col)
            seeds = [(math.log2(float(q[3])), float(q[4])) for q in pts if q[0] == p and int(q[2]) == width
                     and math.isfinite(float(q[4]))]
            fig.add_trace(go.Scatter(x=[x for x, _ in seeds], y=[y for _, y in seeds], mode="markers", opacity=0.35,
                                     marker={"color": colour, "size": 5}, legendgroup=str(width), showlegend=False,
                                     hovertemplate=f"width {width}, one seed: %{{y:.3f}}<extra></extra>"), row=1, col=col)
            finite = [(y, x) for x, y, _ in row if math.isfinite(y)]
            if finite:
                y, x = min(finite)
                fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", marker={"color": colour, "size": 14, "symbol": "star",
                                                                              "line": {"color": "#222222", "width": 1}},
                                         legendgroup=str(width), showlegend=False,
                                         hovertemplate=f"width {width}: best log2 lr %{{x}}<extra></extra>"), row=1, col=col)
        fig.update_xaxes(title_text="log2 learning rate", dtick=1, row=1, col=col)
    verdict = claim.get("verdict") or {}
    title = "Held-out loss against learning rate, per width" + (f" — {verdict['label']}" if verdict else "")
    fig.update_yaxes(title_text="held-out loss", row=1, col=1)
    fig.update_layout(title=title, height=400, margin={"t": 70}, legend={"orientation": "h", "y": -0.25})
    return themed(fig)
