"""The charts' template, set the way plotly sets its default one.

Every chart of the app that names a template uses ``plotly_white``. Named in a layout (``{"template": "plotly_white"}``,
``update_layout(template=...)``), it is validated, and plotly validates a named template by deep-copying the registered
``Template`` object and validating the copy: about 27 ms a figure on this project's 2-core machine, several times the rest
of a small chart, paid on every rerun of a page (a watched lab run redraws two charts every 2 s) and in every state the
page crawl tries. Plotly sets its own *default* template without that (``BaseFigure._initialize_layout_template``: the
registered object, validation off for that one assignment, which stores a copy of its plain data); :func:`themed` does
the same for ours. The figure is the same (``to_dict()`` equal: tests/analysis/test_lab_plots.py); only the order of keys
in its JSON differs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import plotly.graph_objects as go

__all__ = ["TEMPLATE", "themed"]

TEMPLATE = "plotly_white"


def themed(fig: go.Figure, template: str = TEMPLATE) -> go.Figure:
    """``fig`` with the registered ``template`` as its layout's template, set unvalidated (see the module); returns it.

    Raises:
        KeyError: ``template`` is not a registered plotly template.
    """
    import plotly.io as pio

    chosen = pio.templates[template]
    layout = fig._layout_obj
    if not getattr(fig, "_allow_disable_validation", False):  # a figure type that must validate (as plotly checks too)
        layout.template = chosen
        return fig
    layout._validate = False
    try:
        layout.template = chosen
    finally:
        layout._validate = fig._validate
    return fig
