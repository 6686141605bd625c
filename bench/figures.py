"""What a page pays per chart: the figures redrawn on every rerun, built as the pages built them before (plotly
express, per-arc ``add_scatter``/``add_annotation``, ``update_layout`` after the constructor, Streamlit's Altair line
chart) against how they are built now (``plotly.graph_objects``, one constructor call: analysis.lab_plots,
analysis.attention_plots).

    python bench/figures.py [--repeats R]

Each repeat times every pair, old then new, rotating which comes first, so both see the same load on a shared
machine; the ratio (old / new) is taken within a repeat and the medians are printed. Figures only: no page, no
browser (the serialisation Streamlit does afterwards is the same for both).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


# The two attention figures as they were built before (analysis/attention_plots.py at 55a4565), for the comparison.
def _heatmap_before(matrix: Any, rows: list[str], cols: list[str] | None = None, title: str = "", height: int | None = None,
            zmax: float | None = None, colorbar: str = "attention") -> Any:
    """Attention matrix (rows attend to columns) with token labels on both axes."""
    import numpy as np
    import plotly.graph_objects as go

    from analysis.attention_plots import SCALE, label

    cols = rows if cols is None else cols
    zmax = float(np.nanmax(matrix)) if zmax is None and np.size(matrix) else zmax  # 0 stays white: no exaggerated contrast
    r_lab, c_lab = [label(t) for t in rows], [label(t) for t in cols]
    # each cell's (row token, column token) for its hover, as one array: plotly validates a nested list cell by cell,
    # an array at once (measured: bench/results/README.md, "Figures that lived in code comments")
    pairs = np.stack(np.broadcast_arrays(np.asarray(r_lab, dtype=object)[:, None], np.asarray(c_lab, dtype=object)[None, :]), axis=-1)
    fig = go.Figure(go.Heatmap(
        z=matrix, x=list(range(len(cols))), y=list(range(len(rows))), colorscale=SCALE, zmin=0, zmax=zmax,
        colorbar={"title": colorbar}, customdata=pairs,  # (rows, cols, 2)
        hovertemplate="%{customdata[0]} → %{customdata[1]}: %{z:.3f}<extra></extra>"))
    size = height or max(360, min(900, 22 * len(rows) + 140))
    fig.update_layout(
        title=title, height=size, margin={"l": 10, "r": 10, "t": 40 if title else 10, "b": 10},
        xaxis={"tickvals": list(range(len(cols))), "ticktext": c_lab, "side": "top", "tickangle": -60, "title": "attends to"},
        yaxis={"tickvals": list(range(len(rows))), "ticktext": r_lab, "autorange": "reversed", "title": "token"})
    return fig


def _order_path_before(tokens: list[str], order: list[int], targets: list[int], selected: int | None = None) -> Any:
    """The factorization order drawn as a path over the tokens (XLNet paper, Figure 1 style): tokens
    in sentence order along x, arcs from each position to the next one in the order, numbered; targets
    in orange, the selected position ringed, and what it is conditioned on in blue."""
    import numpy as np
    import plotly.graph_objects as go

    from analysis.attention_plots import label

    n = len(tokens)
    rank = {p: r for r, p in enumerate(order)}
    seen = set(order[: rank[selected]]) if selected in rank else set()
    fig = go.Figure()
    top = 0.35 + 0.12 * max((abs(order[r + 1] - order[r]) for r in range(len(order) - 1)), default=0)
    for r in range(len(order) - 1):
        a, b = order[r], order[r + 1]
        xs = np.linspace(a, b, 20)
        height = 0.35 + 0.12 * abs(b - a)
        ys = height * np.sin(np.linspace(0, np.pi, 20)) * (1 if r % 2 == 0 else -1)
        fig.add_scatter(x=xs, y=ys, mode="lines", line={"color": "#999", "width": 1.5}, hoverinfo="skip", showlegend=False)
        fig.add_annotation(x=(a + b) / 2, y=ys[10], text=str(r + 1), showarrow=False, font={"size": 11, "color": "#555"})
    colours = ["#D55E00" if p in targets else ("#0072B2" if p in seen else "#BBBBBB") for p in range(n)]
    fig.add_scatter(x=list(range(n)), y=[0] * n, mode="markers+text", text=[label(t) for t in tokens], textposition="bottom center",
                    marker={"size": 22, "color": colours, "line": {"color": ["black" if p == selected else "white" for p in range(n)],
                                                                    "width": [3 if p == selected else 1 for p in range(n)]}},
                    customdata=[rank.get(p, -1) + 1 for p in range(n)], showlegend=False,
                    hovertemplate="position %{x}: %{text}<br>step %{customdata} of the order<extra></extra>")
    fig.update_layout(height=300, margin={"l": 10, "r": 10, "t": 10, "b": 10}, plot_bgcolor="white",
                      xaxis={"visible": False, "range": [-0.7, n - 0.3]}, yaxis={"visible": False, "range": [-top - 0.9, top + 0.2]})
    return fig


def _pairs() -> dict:
    import numpy as np
    import pandas as pd
    import plotly.express as px
    from streamlit.elements.lib.built_in_chart_utils import ChartType, generate_chart

    from analysis import attention_plots, lab_plots

    rng = np.random.default_rng(0)
    long = pd.DataFrame({"run": np.repeat([f"run-{i}" for i in range(4)], 300), "step": np.tile(np.arange(300), 4),
                         "loss": rng.random(1200) + 3})
    long["loss (smoothed)"] = long.groupby("run")["loss"].transform(lambda x: x.rolling(20, min_periods=1).mean())
    probe = pd.DataFrame({"step": [0, 10, 30, 100, 300, 1000], "POS probe": [0.25, 0.3, 0.4, 0.55, 0.6, 0.62]})
    change = pd.DataFrame({"layer": range(6), "weight_change": rng.random(6) / 10, "cka": 1 - rng.random(6) / 3})
    tokens = [f"w{i}" for i in range(14)]
    order = [int(i) for i in rng.permutation(14)]
    matrix = rng.random((16, 16))
    labels = [*tokens, "a", "b"]
    path = (tokens, order, order[-4:], order[-2])
    shares = rng.random((6, 4)) / 2

    def curves_px():
        fig = px.line(long, x="step", y="loss (smoothed)", color="run", title="t", template="plotly_white", hover_data={"loss": ":.3f"})
        return fig.update_layout(height=380, legend_title_text="", margin={"t": 50})

    def probe_px():
        fig = px.line(probe, x="step", y="POS probe", markers=True, template="plotly_white", range_y=[0, 1], title="t")
        fig.update_xaxes(type="category")
        fig.add_vline(x=3, line_dash="dot")
        return fig.add_hline(y=0.25, line_dash="dash", annotation_text="chance")

    def change_px():
        melted = change.melt(id_vars="layer", value_vars=["weight_change", "cka"], var_name="measure")
        fig = px.bar(melted, x="layer", y="value", facet_row="measure", template="plotly_white", title="t")
        return fig.update_yaxes(matches=None, title_text="").update_layout(height=460)

    def memory_altair():
        frame = pd.DataFrame({"segment": range(6), **{f"layer {li}": shares[:, li] for li in range(4)}}).set_index("segment")
        chart = generate_chart(chart_type=ChartType.LINE, data=frame, x_from_user=None, y_from_user=None, x_axis_label=None,
                               y_axis_label=None, color_from_user=None, size_from_user=None, width=None, height=220)
        return (chart[0] if isinstance(chart, tuple) else chart).to_dict()  # what st.line_chart sends

    return {
        "training curves (4 runs × 300 steps)": (curves_px, lambda: lab_plots.loss_curves(long, y="loss (smoothed)", raw="loss", title="t", height=380)),
        "probe over training": (probe_px, lambda: lab_plots.probe_over_training(probe, 100)),
        "layer change (2 rows)": (change_px, lambda: lab_plots.layer_change(change, "t")),
        "factorization order (14 tokens)": (lambda: _order_path_before(*path), lambda: attention_plots.order_path(*path)),
        "attention heatmap (16 × 16)": (lambda: _heatmap_before(matrix, labels, title="t"), lambda: attention_plots.heatmap(matrix, labels, title="t")),
        "attention into memory (Altair → plotly)": (memory_altair, lambda: attention_plots.memory_share(list(range(6)), shares.tolist())),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    pairs = _pairs()
    for old, new in pairs.values():  # imports and first-call caches out of the timing
        old(), new()
    times: dict[str, tuple[list[float], list[float], list[float]]] = {k: ([], [], []) for k in pairs}
    for r in range(args.repeats):
        for name, (old, new) in pairs.items():
            took = {}
            for which, fn in (("old", old), ("new", new))[:: 1 if r % 2 == 0 else -1]:
                t = time.perf_counter()
                fn()
                took[which] = time.perf_counter() - t
            o, n, ratio = times[name]
            o.append(took["old"])
            n.append(took["new"])
            ratio.append(took["old"] / took["new"])
    print(f"# bench/figures.py, {args.repeats} repeats, medians (old then new, order rotated)")
    print(f"{'figure':44} {'before ms':>10} {'now ms':>8} {'before/now':>11}")
    for name, (o, n, ratio) in times.items():
        print(f"{name:44} {statistics.median(o) * 1e3:10.1f} {statistics.median(n) * 1e3:8.1f} {statistics.median(ratio):10.1f}x")


if __name__ == "__main__":
    main()
