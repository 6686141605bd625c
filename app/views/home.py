"""Home: the family tree. Longer, bigger, smaller, smarter. Needs no model and never imports torch."""

import streamlit as st

from analysis import family_tree
from app import ui
from core import registry
from core.registry import OBJECTIVES

large = st.session_state.get("present", False)

st.title("BERT Family Explorer")
st.markdown("#### Longer, bigger, smaller, smarter: BERT, its descendants, and GPT for contrast")
st.caption(f"Models run on: {ui.device_label()}")


CHARTS = {"Size by year": family_tree.size_figure, "Timeline and lineage": family_tree.timeline_figure}


@st.cache_data(show_spinner=False)
def figure(name: str, large: bool):
    return CHARTS[name](large)


# One chart at a time: each plotly chart is slow for the browser to draw on a laptop CPU (bench/results/README.md).
view = st.segmented_control("Chart", list(CHARTS), default="Size by year", key="home_chart",
                            label_visibility="collapsed") or "Size by year"
LINEAGE = (" Arrows follow lineage (BERT → RoBERTa / DistilBERT / ALBERT / ModernBERT; RoBERTa → XLM-R / DeBERTa; "
           "BERT + XLNet → MPNet; Transformer-XL → XLNet; GPT → GPT-2 → GPT-3).")
ui.chart(figure(view, large), "home_chart_plot", main=True, title=f"The BERT family: {view.lower()}",
         caption=family_tree.PARAMS_NOTE + LINEAGE, sources=("The models' papers (see each model's card)",))
st.caption(family_tree.PARAMS_NOTE + LINEAGE)

st.subheader("The models")
avail = ui.catalog_availability()
f1, f2 = st.columns([3, 1])
chosen = f1.multiselect("Objective", list(OBJECTIVES), default=list(OBJECTIVES), format_func=OBJECTIVES.get,
                        key="home_objectives")
only_ready = f2.toggle("Only models ready here", key="home_only_ready")

cards = [c for c in registry.all_models()
         if c.objective in chosen and (not only_ready or ui.ready_here(c.id))]
if not cards:
    st.info("No model matches these filters. Pick another objective, or turn off 'Only models ready here'.")
    st.stop()

ordered = sorted(cards, key=lambda c: (c.year, c.family, c.parameters))
st.html(family_tree.cards_html(ordered, avail, ui.STATUS_LABELS))
