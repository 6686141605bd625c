"""Tables, exports and plotly charts for the size/memory/compute page (no torch, no streamlit).

The page calls these with plain values; every number comes from :mod:`analysis.params` and
:mod:`analysis.memory`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analysis import memory
from analysis.memory import GiB, MemoryEstimate, TrainingSetup
from analysis.params import Breakdown

if TYPE_CHECKING:
    import pandas as pd
    import plotly.graph_objects as go

#: Colours for memory components (Okabe-Ito, colour-blind safe), stable across charts.
COMPONENT_COLOURS = {
    "weights": "#0072B2", "gradients": "#56B4E9", "master weights (fp32)": "#009E73", "optimizer states": "#E69F00",
    "optimizer step counters": "#F0E442", "activations": "#D55E00", "logits (fp32, for the loss)": "#CC79A7",
    "activations (one layer's peak)": "#D55E00", "logits": "#CC79A7", "KV cache": "#999999",
}


def section(group: str) -> str:
    """Collapse per-layer groups so a chart shows 'transformer layers (×12)', not 12 boxes."""
    if group.startswith(("layer ", "layers ")):
        return "transformer layers"
    if group.startswith("shared group"):
        return "shared layers (ALBERT)"
    return group


def parts_frame(bd: Breakdown) -> pd.DataFrame:
    """One row per (section, part): parameters and share of the total."""
    import pandas as pd

    rows: dict[tuple[str, str], int] = {}
    for t in bd.tensors:
        key = (section(t.group), t.part)
        rows[key] = rows.get(key, 0) + t.numel
    df = pd.DataFrame([{"section": s, "part": p, "parameters": n} for (s, p), n in rows.items()])
    df["share"] = df["parameters"] / bd.total
    return df


def params_treemap(bd: Breakdown, title: str = "") -> go.Figure:
    """Treemap: model → section → part, box area = parameters (from one dict, as :func:`memory_bars`)."""
    import plotly.graph_objects as go

    df = parts_frame(bd)
    root = title or "model"
    ids, labels, parents, values = [root], [root], [""], [bd.total]
    for sec, grp in df.groupby("section", sort=False):
        ids.append(sec)
        labels.append(sec)
        parents.append(root)
        values.append(int(grp["parameters"].sum()))
        for part, n in zip(grp["part"], grp["parameters"], strict=True):
            ids.append(f"{sec}/{part}")
            labels.append(part)
            parents.append(sec)
            values.append(int(n))
    return go.Figure(data=[{"type": "treemap", "ids": ids, "labels": labels, "parents": parents, "values": values,
                            "branchvalues": "total", "texttemplate": "%{label}<br>%{value:,}<br>%{percentRoot:.1%}",
                            "hovertemplate": "%{label}: %{value:,} parameters (%{percentRoot:.2%})<extra></extra>"}],
                     layout={"margin": {"l": 0, "r": 0, "t": 30, "b": 0}, "height": 420})


def _capacity_line(capacity_gib: float, text: str, left: bool) -> dict[str, list[dict]]:
    """A dashed horizontal line at the GPU's capacity with its label, as layout shapes and annotations (what
    ``fig.add_hline`` makes, without its per-call layout updates: a tenth of the time)."""
    return {"shapes": [{"type": "line", "xref": "x domain", "x0": 0, "x1": 1, "yref": "y", "y0": capacity_gib, "y1": capacity_gib,
                        "line": {"dash": "dash", "color": "#444"}}],
            "annotations": [{"text": text, "xref": "x domain", "x": 0 if left else 1, "yref": "y", "y": capacity_gib,
                             "showarrow": False, "xanchor": "left" if left else "right", "yanchor": "bottom"}]}


def memory_bars(estimates: dict[str, MemoryEstimate], title: str = "", capacity_gib: float | None = None) -> go.Figure:
    """Stacked bars, one per estimate (label → estimate), one colour per component, in GiB.

    Built from one dict (the traces and layout validated once) rather than trace by trace: the calculator redraws
    it on every rerun, and a class following its teacher reruns it once per student."""
    import plotly.graph_objects as go

    components: list[str] = []
    for est in estimates.values():
        components += [c for c in est.components if c not in components]
    names = list(estimates)
    data: list[dict] = [{"type": "bar", "name": comp, "x": names, "y": [e.components.get(comp, 0) / GiB for e in estimates.values()],
                         "marker": {"color": COMPONENT_COLOURS.get(comp)}, "hovertemplate": f"{comp}: %{{y:.3f}} GiB<extra></extra>"}
                        for comp in components]
    totals = [e.total / GiB for e in estimates.values()]
    data.append({"type": "scatter", "x": names, "y": totals, "mode": "text", "text": [f"{t:,.2f} GiB" for t in totals],
                 "textposition": "top center", "showlegend": False, "hoverinfo": "skip"})
    layout = {"barmode": "stack", "title": {"text": title}, "yaxis": {"title": {"text": "GiB per GPU"}}, "height": 420,
              "margin": {"l": 10, "r": 10, "t": 40 if title else 10, "b": 10}, "legend": {"orientation": "h", "y": -0.15},
              **(_capacity_line(capacity_gib, f"GPU memory {capacity_gib:g} GiB", left=True) if capacity_gib else {})}
    return go.Figure(data=data, layout=layout)


def memory_curve(bd: Breakdown, setup: TrainingSetup, seq_lens: list[int], max_batch: int = 64,
                 capacity_gib: float | None = None) -> go.Figure:
    """Total training memory against batch size, one line per sequence length (built from one dict, as
    :func:`memory_bars`)."""
    import plotly.graph_objects as go

    batches = sorted({1, 2, 4, 8, 16, 32, 64, 128, 256, 512, max_batch} & set(range(1, max_batch + 1)))
    data = [{"type": "scatter", "x": batches, "y": [memory.training_memory(bd, b, s, setup).total / GiB for b in batches],
             "mode": "lines+markers", "name": f"{s} tokens", "hovertemplate": f"{s} tokens, batch %{{x}}: %{{y:.2f}} GiB<extra></extra>"}
            for s in seq_lens]
    layout = {"xaxis": {"title": {"text": "batch size (sequences per GPU)"}, "type": "log", "tickvals": batches,
                        "ticktext": [str(b) for b in batches]},
              "yaxis": {"title": {"text": "GiB per GPU"}}, "height": 380, "margin": {"l": 10, "r": 10, "t": 10, "b": 10},
              **(_capacity_line(capacity_gib, f"{capacity_gib:g} GiB", left=False) if capacity_gib else {})}
    return go.Figure(data=data, layout=layout)


def zero_stages(model: Any, batch: int, seq: int, setup: TrainingSetup) -> dict[str, MemoryEstimate]:
    """The same run under ZeRO stages 0–3 (label → estimate)."""
    labels = {0: "no ZeRO", 1: "ZeRO-1 (P_os)", 2: "ZeRO-2 (P_os+g)", 3: "ZeRO-3 (P_os+g+p)"}
    return {labels[z]: memory.training_memory(model, batch, seq, memory.with_setup(setup, zero_stage=z))
            for z in range(4)}


def gpu_fit_frame(bd: Breakdown, seq_lens: list[int], setup: TrainingSetup, gpus: list[memory.GPU],
                  reserve_bytes: int = GiB) -> pd.DataFrame:
    """Rows: sequence length; columns: GPUs; cells: largest per-GPU batch that fits (0: none)."""
    import pandas as pd

    data = {g.name: [memory.max_batch_size(bd, g, s, setup, reserve_bytes).max_batch for s in seq_lens] for g in gpus}
    return pd.DataFrame(data, index=pd.Index(seq_lens, name="sequence length"))


@dataclass(frozen=True)
class MarkdownCell:
    """A table cell that is already Markdown (e.g. a bold best value); every other cell is escaped as text."""

    markup: str


def to_markdown(df: pd.DataFrame, index: bool = True) -> str:
    """A GitHub-flavoured Markdown table (no tabulate dependency); text cells and headers are escaped."""
    from analysis.safe_text import markdown_text

    frame = df.reset_index() if index and df.index.name else df
    cols = [markdown_text(c) for c in frame.columns]

    def fmt(v: Any) -> str:
        if isinstance(v, MarkdownCell):
            return v.markup
        if isinstance(v, float):
            return f"{v:,.4g}" if abs(v) < 1e4 else f"{v:,.0f}"
        if isinstance(v, int):
            return f"{v:,}"
        return markdown_text(v)

    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in frame.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def human_bytes(n: float) -> str:
    """Bytes in binary units (GiB), as the slides' 14.90 GB is."""
    for unit, size in (("TiB", 2**40), ("GiB", GiB), ("MiB", 2**20), ("KiB", 2**10)):
        if abs(n) >= size:
            return f"{n / size:,.2f} {unit}"
    return f"{n:,.0f} B"


def human_count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if abs(n) >= size:
            return f"{n / size:,.2f}{unit}"
    return f"{n:,.0f}"


def human_seconds(s: float) -> str:
    if s >= 86400:
        return f"{s / 86400:,.1f} days"
    if s >= 3600:
        return f"{s / 3600:,.1f} hours"
    if s >= 60:
        return f"{s / 60:,.1f} minutes"
    return f"{s:,.1f} s"
