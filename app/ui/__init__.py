"""Shared UI helpers for the pages, one job per module; pages use them as ``from app import ui`` then ``ui.chart(...)``.

- :mod:`.errors`: library exceptions become one kind of friendly message (:func:`show_error`, :func:`friendly_errors`);
- :mod:`.caches`: the one place where Streamlit caches library values, and the catalog's availability statuses;
- :mod:`.state`: widget values kept in the URL (:func:`restore_url_state`, :func:`save_url_state`), the page's
  address, and whether the viewer is on this machine;
- :mod:`.sidebar`: presentation mode and the sidebar's status panel;
- :mod:`.calls`: model calls through the process's model queue, page slots, and the background warm-up;
- :mod:`.charts`: charts and tables with their exports, and the presentation pack;
- :mod:`.pickers`: the model picker, "another model…", checkpoints trained here, and which models can run here;
- :mod:`.classroom`: a class that follows its teacher: the sidebar's class panel, following, predict then reveal.

Each module imports only the ones listed above it (and none imports a page). Nothing here imports torch.
Code that replaces one of these names (a test's monkeypatch) patches the module that defines it: the others
read it from there, not from this package.
"""

from app.ui.caches import AVAILABILITY_ICONS, STATUS_LABELS, catalog_availability, device_label, inspect_checkpoint, ready_here
from app.ui.calls import (
    await_warmup,
    free_model_memory,
    loaded_models,
    model_call,
    page_run,
    restart_notice,
    slot_lent,
    start_warmup,
)
from app.ui.charts import PLOTLY_CONFIG, chart, download, download_buttons, pack_notice, table_to_pack
from app.ui.classroom import Ask, ask_the_class, class_panel, lead_class, question_context, reveal_chart
from app.ui.errors import friendly_errors, log, show_error
from app.ui.forms import bounded_number, start_runs
from app.ui.labels import RUN_STATUS_TEXT, cell_text
from app.ui.pickers import (
    LAST_STEP,
    OTHER,
    explain_missing,
    model_label,
    model_picker,
    model_ready,
    other_model,
    picker_values,
    step_picker,
    trained_here,
    valid_model_id,
)
from app.ui.sidebar import PRESENTATION_CSS, main_result, presentation_mode, presenting, sidebar_status
from app.ui.state import MAX_LINK_TEXT_CHARS, context_url, local_viewer, restore_url_state, save_url_state, url_tabs, warn_ignored

__all__ = [
    "AVAILABILITY_ICONS",
    "LAST_STEP",
    "MAX_LINK_TEXT_CHARS",
    "OTHER",
    "PLOTLY_CONFIG",
    "PRESENTATION_CSS",
    "RUN_STATUS_TEXT",
    "STATUS_LABELS",
    "Ask",
    "ask_the_class",
    "await_warmup",
    "bounded_number",
    "catalog_availability",
    "cell_text",
    "chart",
    "class_panel",
    "context_url",
    "device_label",
    "download",
    "download_buttons",
    "explain_missing",
    "free_model_memory",
    "friendly_errors",
    "inspect_checkpoint",
    "lead_class",
    "loaded_models",
    "local_viewer",
    "log",
    "main_result",
    "model_call",
    "model_label",
    "model_picker",
    "model_ready",
    "other_model",
    "pack_notice",
    "page_run",
    "picker_values",
    "presentation_mode",
    "presenting",
    "question_context",
    "ready_here",
    "restart_notice",
    "restore_url_state",
    "reveal_chart",
    "save_url_state",
    "show_error",
    "sidebar_status",
    "slot_lent",
    "start_runs",
    "start_warmup",
    "step_picker",
    "table_to_pack",
    "trained_here",
    "url_tabs",
    "valid_model_id",
    "warn_ignored",
]
