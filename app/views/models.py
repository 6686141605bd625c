"""Models & availability: what is on this machine, how to get the rest, and a load check.

Preparing a class: see which models are ready, fetch the missing ones on a connected machine, and
load one here to check it works (this is the only part of the page that imports torch).
"""

import pandas as pd
import streamlit as st

from app import ui
from core import registry
from core.errors import ExplorerError
from core.settings import SETTINGS, get_settings, shown
from services.executor import executor

st.title("Models & availability")
settings = get_settings()
on_backend = executor().elsewhere  # where the models run: the one route every page uses
avail = ui.catalog_availability()

rows = [{
    "model": c.id, "status": ui.STATUS_LABELS[avail[c.id][0]],
    "objective": c.objective_label, "year": c.year, "parameters (paper)": c.parameters_reported,
    "heads in checkpoint": ", ".join(c.tasks) or "—", "Hub id": c.hub_id or "—",
} for c in registry.all_models()]
ui.main_result().dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")

st.subheader("Get models for an offline classroom")
st.markdown(
    "On a machine with internet, download the checkpoints once, then copy the model folder to the "
    "classroom machines (or point `BFE_MODEL_DIR` at a shared folder):")
st.code("python -m models.fetch --kit            # the small models every page uses\n"
        "python -m models.fetch roberta-large    # or any catalog id\n"
        "python -m models.fetch --list           # what is here", language="bash")
if on_backend:
    st.caption(f"The models run on the model backend at `{settings.backend}`: fetch them there, into its `BFE_MODEL_DIR`.")
else:
    st.caption(f"Model folder on this machine: `{settings.model_dir}`" if ui.local_viewer()
               else "Model folder on this machine: the one `BFE_MODEL_DIR` names (shown only to a browser on the server itself).")

st.subheader("Check that a model loads")
loadable = [c.id for c in registry.loadable()]
col1, col2 = st.columns([3, 1])
model_id = col1.selectbox("Model", loadable, index=loadable.index(registry.bundled_id()), key="models_pick",
                          format_func=lambda m: f"{m} ({ui.STATUS_LABELS[avail[m][0]]})")
col2.write("")
if col2.button("Load it", key="models_load", type="primary"):
    with ui.friendly_errors(), st.spinner(f"Loading {model_id} ..."):
        from services import models

        done = models.load(model_id, call=ui.model_call)
        st.success(f"{model_id} loaded from {done['source']} in {done['seconds']:.2f} s: "
                   f"{done['nbytes'] / 2**20:,.1f} MB on {done['device']} ({done['dtype']}), attention weights checked.")

try:
    info = ui.loaded_models()
except ExplorerError as err:
    ui.show_error(err)
    st.stop()
st.subheader("Loaded now")
if info.entries:
    st.dataframe(pd.DataFrame([{
        "model": e.model_id, "head": e.task, "attention": e.attn_implementation, "device": e.device,
        "dtype": e.dtype, "MB": round(e.nbytes / 2**20, 1)} for e in info.entries]), hide_index=True)
    if not on_backend and st.button("Free model memory", key="models_clear"):  # a backend's serve every front end
        with ui.friendly_errors():
            ui.free_model_memory()
        st.rerun()
else:
    st.caption("No model is loaded on the model backend." if on_backend else "No model is loaded on this server.")
st.caption(f"{info.total_bytes / 2**20:,.0f} MB of a {info.budget_bytes / 2**20:,.0f} MB budget "
           f"(BFE_MODEL_CACHE_MB); {info.evictions} eviction(s) so far.")

with st.expander("Settings in force"):
    st.dataframe(pd.DataFrame([{"variable": s.env, "value": shown(s.name, getattr(settings, s.name)),
                                "meaning": s.help} for s in SETTINGS]), hide_index=True, width="stretch")
