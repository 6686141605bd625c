"""The labs' figures (analysis.lab_plots) and the XLNet page's recurrence chart: each draws what its data says."""

from __future__ import annotations

import pandas as pd

from analysis import attention_plots, lab_plots


def test_loss_curves_draw_a_line_per_run_in_the_order_runs_first_appear() -> None:
    long = pd.DataFrame({"run": ["b", "b", "a", "a", "b"], "step": [1, 2, 1, 2, 3], "loss (smoothed)": [3.0, 2.5, 4.0, 3.5, 2.0],
                         "loss": [3.1, 2.4, 4.2, 3.3, 1.9]})
    fig = lab_plots.loss_curves(long, y="loss (smoothed)", raw="loss", title="t", height=300)
    assert [t.name for t in fig.data] == ["b", "a"]
    assert list(fig.data[0].y) == [3.0, 2.5, 2.0] and list(fig.data[0].customdata) == [3.1, 2.4, 1.9]
    assert fig.layout.height == 300 and fig.layout.yaxis.title.text == "loss (smoothed)"
    assert fig.data[0].line.color is None  # coloured by the template's colour cycle, a colour per run, as express did


def test_the_probe_chart_marks_the_chosen_step_and_chance() -> None:
    table = pd.DataFrame({"step": [0, 10, 100, 1000], "POS probe": [0.25, 0.4, 0.6, 0.7]})
    fig = lab_plots.probe_over_training(table, 100)
    assert list(fig.data[0].x) == ["0", "10", "100", "1000"] and fig.layout.xaxis.type == "category"
    step_line, chance_line = fig.layout.shapes
    assert step_line.x0 == step_line.x1 == 2 and chance_line.y0 == chance_line.y1 == 0.25
    assert tuple(fig.layout.yaxis.range) == (0, 1)


def test_loss_against_size_draws_a_line_per_budget_on_log_axes() -> None:
    table = pd.DataFrame({"run": ["r1", "r2", "r3", "r4"], "N (non-embedding)": [1e5, 2e5, 1e5, 2e5], "held-out loss": [5.0, 4.5, 4.8, 4.1]})
    fig = lab_plots.loss_against_size(table, ["1e12", "1e12", "1e13", "1e13"])
    assert [t.name for t in fig.data] == ["1e12", "1e13"] and list(fig.data[1].y) == [4.8, 4.1]
    assert fig.layout.xaxis.type == fig.layout.yaxis.type == "log"
    single = lab_plots.loss_against_size(table, None)
    assert len(single.data) == 1 and not single.data[0].showlegend and list(single.data[0].hovertext) == ["r1", "r2", "r3", "r4"]


def test_layer_change_puts_each_measure_on_its_own_axis() -> None:
    change = pd.DataFrame({"layer": [0, 1, 2], "weight_change": [0.01, 0.02, 0.05], "cka": [0.99, 0.9, 0.6]})
    fig = lab_plots.layer_change(change, "What changed")
    assert [(t.yaxis, list(t.y)) for t in fig.data] == [("y", [0.01, 0.02, 0.05]), ("y2", [0.99, 0.9, 0.6])]
    assert fig.layout.yaxis.domain[0] > fig.layout.yaxis2.domain[1]  # one above the other, not overlapping


def test_memory_share_draws_a_line_per_layer() -> None:
    fig = attention_plots.memory_share([0, 1, 2], [[0.0, 0.0], [0.3, 0.5], [0.2, 0.4]])
    assert [t.name for t in fig.data] == ["layer 0", "layer 1"] and list(fig.data[1].y) == [0.0, 0.5, 0.4]


def test_a_figure_themed_without_the_copy_is_the_figure_a_named_template_gives() -> None:
    """analysis.plot_style sets plotly_white as plotly sets its default template (no deep copy): every chart that
    uses it is the same figure as with ``template="plotly_white"`` validated; and the registered template is not
    changed by a figure that holds it."""
    import copy

    import plotly.graph_objects as go
    import plotly.io as pio

    from analysis import plot_style

    registered = copy.deepcopy(pio.templates[plot_style.TEMPLATE].to_plotly_json())
    long = pd.DataFrame({"run": ["a", "a"], "step": [1, 2], "loss": [3.0, 2.5]})
    figures = [lab_plots.loss_curves(long, y="loss", title="t", height=300),
               lab_plots.probe_over_training(pd.DataFrame({"step": [0, 10], "POS probe": [0.25, 0.4]}), 10),
               lab_plots.layer_change(pd.DataFrame({"layer": [0], "weight_change": [0.1], "cka": [0.9]}), "t"),
               attention_plots.memory_share([0, 1], [[0.1], [0.2]])]
    for fig in figures:
        named = go.Figure(fig)
        named.update_layout(template=plot_style.TEMPLATE)  # plotly's own path: validated, a deep copy
        assert fig.to_dict() == named.to_dict()
        assert fig.layout.template.layout.plot_bgcolor == "white"  # plotly_white, not the default template (#E5ECF6)
        fig.update_layout(template="none")  # another template on this figure leaves the registered one as it was
    assert pio.templates[plot_style.TEMPLATE].to_plotly_json() == registered
