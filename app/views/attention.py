"""Attention explorer: what each head of a real model looks at, in plotly and bertviz, offline."""


import pandas as pd
import streamlit as st

from analysis import attention_plots as plots
from analysis.safe_text import csv_bytes
from app import ui
from core import registry
from core.errors import MAX_TEXT_CHARS, ExplorerError
from services import attention as use_case
from services.attention import STAT_LABELS, AttentionResult

BUNDLED = registry.bundled_id()
MODELS = [c.id for c in registry.loadable()]
EXAMPLES = {
    "The cat sat on the mat because it was tired.": "",
    "The animal didn't cross the street because it was too tired.": "",
    "The animal didn't cross the street because it was too wide.": "",
    "A boy plays in the snow.": "A boy is outside.",
    "The trophy would not fit in the brown suitcase because it was too big.": "",
    "Paris is the capital of France.": "",
}
VIEWS = {"heatmap": "Heatmap", "head": "Head view (bertviz)", "model": "Model view (bertviz)", "stats": "Head statistics",
         "rollout": "Rollout"}
DEFAULTS = {"at_model": BUNDLED, "at_model_other": "", "at_compare": False, "at_model2": "distilbert-base-uncased",
            "at_model2_other": "",
            "at_text": next(iter(EXAMPLES)), "at_pair": "", "at_view": "heatmap", "at_layer": 0, "at_head": 0, "at_stat": "to_cls",
            "at_step": ui.LAST_STEP}
ALLOWED = {"at_model": ui.picker_values(MODELS), "at_model2": ui.picker_values(MODELS), "at_model_other": ui.valid_model_id,
           "at_model2_other": ui.valid_model_id, "at_view": list(VIEWS), "at_stat": list(STAT_LABELS),
           "at_layer": use_case.BOUNDS["layer"], "at_head": use_case.BOUNDS["head"], "at_step": (ui.LAST_STEP, 10**9)}


@st.cache_data(show_spinner="Running the model…", max_entries=32)
def attention(model_id: str, text: str, pair: str) -> AttentionResult:
    return use_case.run(model_id, text, pair, call=ui.model_call)


@st.cache_data(show_spinner="Building the offline view…", max_entries=8)
def offline_view(model_id: str, text: str, pair: str, view: str, layer: int) -> str:
    return use_case.bertviz(attention(model_id, text, pair), view, layer)


def use_example() -> None:
    text = st.session_state["at_example"]
    if text in EXAMPLES:
        st.session_state["at_text"], st.session_state["at_pair"] = text, EXAMPLES[text]


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Attention explorer")
st.markdown("#### Type a sentence and see what each head of a real model looks at")
ui.warn_ignored(ignored, "at_")

c = st.columns([5, 2, 5])  # the toggle's column holds "Compare" and its help icon whole at 1280 px
first_id = ui.model_picker("Model", "at_model", MODELS, where=c[0])
c[1].toggle("Compare", key="at_compare", help="A second model on the same text, side by side, aligned by words.")
second_id = ui.model_picker("Second model", "at_model2", MODELS, where=c[2]) if st.session_state["at_compare"] else None
first_id = ui.step_picker(first_id, "at_step")
st.selectbox("Examples from the lectures", ["(pick one)", *EXAMPLES], key="at_example", on_change=use_example)
c = st.columns([3, 2])
c[0].text_area("Sentence A", key="at_text", height=80, max_chars=MAX_TEXT_CHARS)
c[1].text_area("Sentence B (optional: makes a sentence pair)", key="at_pair", height=80, max_chars=MAX_TEXT_CHARS)

state = st.session_state
ids = [m for m in (first_id, second_id) if m]
results: list[AttentionResult] = []
drawn: list[str] = []  # the ids whose weights are in the cache: the views read them from there
ui.await_warmup(ids)
for mid in ids:
    try:
        results.append(attention(mid, state["at_text"], state["at_pair"]))
        drawn.append(mid)
    except ExplorerError as err:
        ui.show_error(err)
if not results:
    ui.save_url_state(DEFAULTS)
    st.stop()
for r in results:
    for note in r.notices:
        st.info(f"{r.model_id}: {note}", icon=":material/info:")
    if r.architecture_note:
        st.caption(f"**{r.model_id}**: {r.architecture_note}")



def controls(results: list[AttentionResult]) -> tuple[str, int, int]:
    """The view, layer, head and statistic widgets (layer and head kept within the smaller model); (view, layer, head)."""
    state = st.session_state
    st.segmented_control("View", list(VIEWS), key="at_view", format_func=VIEWS.get)
    c = st.columns([1, 1, 2, 2])
    max_layer = min(r.layers for r in results) - 1
    max_head = min(r.heads for r in results) - 1
    state["at_layer"] = min(state["at_layer"], max_layer)
    state["at_head"] = min(state["at_head"], max_head)
    c[0].number_input("Layer", 0, max_layer, key="at_layer")
    c[1].number_input("Head", 0, max_head, key="at_head")
    c[2].selectbox("Statistic", list(STAT_LABELS), key="at_stat", format_func=STAT_LABELS.get)
    return state["at_view"] or "heatmap", state["at_layer"], state["at_head"]


def model_view(r: AttentionResult, main: bool, view: str, li: int, hi: int, stats: dict | None) -> None:
    """One model's chart of the chosen view: the head's heatmap, bertviz, the statistic per head, or the rollout."""
    state, key = st.session_state, r.model_id.replace("/", "_")
    source = f"Attention weights of {r.model_id}, computed by BERT Family Explorer"
    text = f"Input: “{state['at_text'][:300]}”"
    if view == "heatmap":
        ui.chart(plots.heatmap(r.weights[li, hi], list(r.tokens), title=f"layer {li}, head {hi}"), f"at_heat_{key}", main=main,
                 title=f"{r.model_id}: attention, layer {li}, head {hi}", sources=(source,),
                 caption=text + (f" / “{state['at_pair'][:300]}”" if state["at_pair"] else "")
                 + f" ({len(r.tokens)} tokens). Row i: where token i looks.")
    elif view in ("head", "model"):
        html = offline_view(r.model_id, state["at_text"], state["at_pair"], view, li)
        if len(r.tokens) > use_case.BERTVIZ_ALL_LAYERS:
            st.caption(f"{len(r.tokens)} tokens: the bertviz view holds layer {li} only, to stay light. Change the layer above.")
        st.iframe(html, height=min(2400, 90 + 23 * len(r.tokens)) if view == "head" else 900)
        ui.download(st, "Download this view (offline HTML)", html.encode(), f"bertviz-{view}-{key}.html", "text/html",
                    key=f"at_dl_html_{key}")
    elif view == "stats" and all(v != v for v in stats[state["at_stat"]].ravel()):
        st.info(f"{r.model_id} has no token this measure needs ({STAT_LABELS[state['at_stat']]}): pick another statistic.",
                icon=":material/info:")
    elif view == "stats":
        ui.chart(plots.stats_grid(stats[state["at_stat"]], STAT_LABELS[state["at_stat"]], selected=(li, hi)), f"at_stats_{key}",
                 title=f"{r.model_id}: {STAT_LABELS[state['at_stat']]} per head", caption=f"{text}.",
                 sources=("Clark et al. 2019, What Does BERT Look At? (the measures)", source))
        st.caption("Measures of Clark et al. 2019, *What Does BERT Look At?*, averaged over the tokens. "
                   "Pick a layer and head above to open it in the heatmap.")
    else:
        ui.chart(plots.heatmap(use_case.rollout(r.weights)[li], list(r.tokens), title=f"rollout up to layer {li}", zmax=None),
                 f"at_roll_{key}", title=f"{r.model_id}: attention rollout up to layer {li}", caption=f"{text}.",
                 sources=("Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers (rollout)", source))
        st.caption("Attention rollout (Abnar & Zuidema 2020): attention of all heads, with the residual path, "
                   "multiplied through the layers.")


def model_column(r: AttentionResult, main: bool, view: str, li: int, hi: int) -> None:
    """One model: its size, the chosen view, the head's statistics and the downloads."""
    seg = "" if r.sentence_b_start is None else f" · pair: B starts at token {r.sentence_b_start}"
    st.markdown(f"**{r.model_id}** · {len(r.tokens)} tokens · {r.layers} layers × {r.heads} heads"
                + (" · causal" if r.causal else "") + seg)
    # every head's statistics only for the view that draws them (a second at 512 tokens), else when the CSV is asked for
    stats, key = use_case.result_stats(r) if view == "stats" else None, r.model_id.replace("/", "_")
    model_view(r, main, view, li, hi, stats)
    st.caption(use_case.head(r, li, hi).caption())
    # Built only when clicked: at 512 tokens a layer is 3 million rows and the JSON tens of MB.
    d1, d2, d3 = st.columns(3)
    ui.download(d1, r.export_label(li, hi), lambda: csv_bytes(pd.DataFrame(r.export_rows(li, hi))),
                f"attention-{key}-layer{li}.csv", "text/csv", key=f"at_dl_w_{key}")
    ui.download(d2, "Statistics CSV", lambda: csv_bytes(pd.DataFrame(use_case.stats_rows(stats or use_case.result_stats(r)))),
                f"head-stats-{key}.csv", "text/csv", key=f"at_dl_s_{key}")
    ui.download(d3, "JSON", r.to_json, f"attention-{key}.json", "application/json",
                key=f"at_dl_j_{key}")


def aligned(results: list[AttentionResult], li: int, hi: int) -> None:
    """Two models' attention merged into the words of the text, side by side."""
    st.subheader("Aligned by words")
    try:
        words, a, b = use_case.align(results[0], results[1])
    except ExplorerError as err:
        ui.show_error(err)
        return
    st.caption("Each model's tokens are merged into the words of the text (attention to a word: summed over its "
               "tokens; from a word: averaged), special tokens left out, so different tokenizers share one grid.")
    w1, w2 = st.columns(2)
    for where, r, w, key in ((w1, results[0], a, "at_words_a"), (w2, results[1], b, "at_words_b")):
        ui.chart(plots.heatmap(w[li, hi], words, title=f"{r.model_id}: layer {li}, head {hi}"), key, where=where,
                 compact=True, title=f"{r.model_id}: attention by words, layer {li}, head {hi}",
                 caption=f"Input: “{st.session_state['at_text'][:300]}”; tokens merged into words.",
                 sources=(f"Attention weights of {r.model_id}, computed by BERT Family Explorer",))


def draw(results: list[AttentionResult]) -> None:
    """The view controls and what they draw, for each model, and the two aligned by words."""
    view, li, hi = controls(results)
    r0 = results[0]
    question = use_case.word_question(r0, li, hi)
    asked = ui.Ask()
    if question is not None:  # a class predicts the head's favourite word before it is drawn
        asked = ui.ask_the_class("choice", ui.question_context("attention", r0.model_id, r0.tokens, li, hi), question.prompt,
                                 question.choices, key="at_q")
    if asked.revealed:
        ui.reveal_chart(asked.revealed, question.weights, key="at_q", model_label=f"{r0.model_id}, layer {li} head {hi}",
                        value_label="attention weight", sources=(f"Attention weights of {r0.model_id}, computed by BERT Family Explorer",))
    if not asked.hide:
        for col, r in zip(st.columns(len(results)), results, strict=True):
            with col:
                model_column(r, r is results[0], view, li, hi)
        if len(results) == 2:
            aligned(results, li, hi)
    ui.save_url_state(DEFAULTS)
    ui.lead_class()  # the view's controls rerun only this fragment: the class follows them too


@st.fragment
def views(ids: tuple[str, ...]) -> None:
    """:func:`draw` as a fragment: changing the view, layer, head or statistic reruns only this, not the page with its
    pickers and model calls. The weights are read again from the page's cache (not kept as the fragment's argument,
    which would hold every idle session's weights in memory); a rerun's errors and notices are its own."""
    state = st.session_state
    with ui.friendly_errors():
        draw([attention(mid, state["at_text"], state["at_pair"]) for mid in ids])
    ui.pack_notice()
    ui.restart_notice()


# Presentation mode sets the page's main result beside every input (one grid over the page's blocks), which a fragment,
# one block holding the controls and the chart, would break; a presenter's reruns are one session's, not a class's.
if ui.presenting():
    draw(results)
else:
    views(tuple(drawn))
ui.save_url_state(DEFAULTS)
