"""Entry point: builds the navigation and the sidebar, then runs the chosen page.

    streamlit run app/streamlit_app.py
"""

import sys
from pathlib import Path

# `streamlit run` puts this file's folder on sys.path, not the repository root that holds the
# `models` and `analysis` packages (Spaces and Procfile hosts start it the same way).
ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import streamlit as st  # noqa: E402

from app import ui  # noqa: E402

# Presentation mode (?present=1) opens with the sidebar collapsed, one click away: a projector's width is for the page.
st.set_page_config(page_title="BERT Family Explorer", page_icon=str(ROOT / "app" / "assets" / "favicon.png"), layout="wide",
                   initial_sidebar_state="collapsed" if ui.presenting() else "auto")

PAGES = [
    st.Page("views/home.py", title="Family tree", icon=":material/account_tree:", default=True),
    st.Page("views/attention.py", title="Attention explorer", icon=":material/visibility:", url_path="attention"),
    st.Page("views/representations.py", title="Representations", icon=":material/scatter_plot:", url_path="representations"),
    st.Page("views/parts.py", title="Which parts matter", icon=":material/troubleshoot:", url_path="parts"),
    st.Page("views/objectives.py", title="Pre-training objectives", icon=":material/school:", url_path="objectives"),
    st.Page("views/permutation.py", title="Permutation LM (XLNet)", icon=":material/shuffle:", url_path="permutation"),
    st.Page("views/calculator.py", title="Size, memory & compute", icon=":material/calculate:", url_path="calculator"),
    st.Page("views/lab.py", title="Pre-training lab", icon=":material/model_training:", url_path="lab"),
    st.Page("views/finetune.py", title="Fine-tuning lab", icon=":material/tune:", url_path="finetune"),
    st.Page("views/scaling.py", title="Scaling laws", icon=":material/show_chart:", url_path="scaling"),
    st.Page("views/results.py", title="GLUE results database", icon=":material/leaderboard:", url_path="results"),
    st.Page("views/models.py", title="Models & availability", icon=":material/inventory_2:", url_path="models"),
    st.Page("views/pack.py", title="Presentation pack", icon=":material/slideshow:", url_path="pack"),
]

# Every page in the sidebar: past twelve, Streamlit would fold the last ones behind "View N more" by default.
page = st.navigation(PAGES, expanded=True)
# The background warm-up (models.warmup) waits while a page is being drawn.
with ui.page_run():
    ui.presentation_mode()
    with ui.friendly_errors():
        ui.class_panel(PAGES, page)  # a follower goes to the teacher's page before it draws
    try:
        with ui.friendly_errors():
            page.run()
    finally:  # also after a page's st.stop(): its address is saved by then
        ui.lead_class(page)
    ui.restart_notice()
    ui.pack_notice()
    # After the page, so the memory figure includes a model the page has just loaded.
    with ui.friendly_errors():
        ui.sidebar_status()
# Once per process, after the first page is drawn (`python -m app.serve` starts it with the server).
ui.start_warmup()
