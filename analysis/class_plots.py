"""The reveal of a class's question as a plotly figure (no torch, no streamlit): the class's answers beside the
model's, one bar pair per answer, as shares of the class and the model's probabilities (or the head's weights).

Students' answers are anonymous plain text: a label is escaped before it reaches plotly (which reads ``<b>``,
``<br>`` and links in text), so an answer like ``<a href=...>`` shows as typed and never as markup.
"""

from __future__ import annotations

import html
import textwrap
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

CLASS, MODEL = "#E69F00", "#0072B2"
#: The most answers drawn: the rest are summed into one bar ("other answers").
MAX_BARS = 12


def _label(text: str) -> str:
    return html.escape(text, quote=False)


def reveal_figure(counts: dict[str, int], model: dict[str, float] | None = None, *, title: str,
                  model_label: str = "model", value_label: str = "probability") -> go.Figure:
    """The class's answers (``counts``: answer → students) as shares of the class, beside ``model``'s value for each
    answer (answer → a probability or weight in [0, 1]; None: a question whose model answer is one of the choices,
    drawn as the class only). The class's most common answers and the model's highest come first; past
    :data:`MAX_BARS` answers the class's rest are one bar."""
    import plotly.graph_objects as go

    total = sum(counts.values())
    model = dict(model or {})
    ranked = sorted(counts, key=lambda a: (-counts[a], a))
    for word in sorted(model, key=lambda w: -model[w]):
        if word not in counts:
            ranked.append(word)
    shown, rest = ranked[:MAX_BARS], ranked[MAX_BARS:]
    rest_count = sum(counts.get(a, 0) for a in rest)
    labels = [_label(a) for a in shown] + (["other answers"] if rest_count else [])
    share = [100 * counts.get(a, 0) / total if total else 0.0 for a in shown] + ([100 * rest_count / total] if rest_count else [])
    fig = go.Figure()
    fig.add_bar(y=labels, x=share, orientation="h", name=f"class ({total} answer{'s' if total != 1 else ''})",
                marker_color=CLASS, text=[f"{v:.0f}%" for v in share], textposition="outside",
                hovertemplate="%{y}: %{x:.0f}% of the class<extra></extra>")
    if model:
        values = [100 * model.get(a, 0.0) for a in shown] + ([0.0] if rest_count else [])
        fig.add_bar(y=labels, x=values, orientation="h", name=model_label, marker_color=MODEL,
                    text=[f"{v:.1f}%" if v else "" for v in values], textposition="outside",
                    hovertemplate=f"%{{y}}: {value_label} %{{x:.1f}}%<extra></extra>")
    heading = "<br>".join(textwrap.wrap(_label(title), 90)[:3])  # a long question on up to three lines
    fig.update_layout(title={"text": heading, "font": {"size": 14}}, barmode="group", height=max(260, 60 + 44 * len(labels)),
                      xaxis={"title": "% of the class" + (f" / model {value_label}" if model else ""), "rangemode": "tozero"},
                      yaxis={"autorange": "reversed", "automargin": True}, legend={"orientation": "h", "y": -0.2},
                      margin={"l": 10, "r": 30, "t": 90, "b": 40})
    return fig
