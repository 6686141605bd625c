"""Pre-training objectives lab: what each family member was trained to do, live."""

import html

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from app import ui
from core import registry
from core.errors import MAX_TEXT_CHARS, ExplorerError
from services import objectives

MLM = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
PRETRAIN = [c.id for c in registry.loadable() if "pretraining" in c.tasks and c.family in ("bert", "albert")]
GEN, DISC = "google/electra-small-generator", "google/electra-small-discriminator"
EXAMPLES = ["John visited [MASK] yesterday and really [MASK] it.", "Chickens cackle and [MASK] quack.",
            "The capital of France is [MASK].", "The man went to the [MASK] to buy a gallon of milk."]
DEFAULTS = {
    "ob_models": ["bert-base-uncased", "roberta-base", "distilbert-base-uncased"], "ob_models_other": "",
    "ob_pll_model_other": "", "ob_nsp_model_other": "", "ob_fill": EXAMPLES[0], "ob_k": 5,
    "ob_mode": "independent", "ob_rtext": "John visited Madagascar yesterday and really loved it.", "ob_seed": 0, "ob_epochs": 4,
    "ob_dynamic": False, "ob_wwm": False, "ob_pll_model": "bert-base-uncased", "ob_s1": "A boy plays in the snow.",
    "ob_s2": "A boy plays on the snow.", "ob_nsp_model": "bert-base-uncased", "ob_a": "A boy plays in the snow.",
    "ob_b": "A boy is outside.", "ob_etext": "The chef cooked the meal for the guests.", "ob_eseed": 0,
    "ob_hand": "The chef ate the meal for the guests.", "ob_prompt": "The BERT family of models", "ob_new": 20, "ob_sample": False,
    "ob_temp": 1.0, "ob_topk": 50, "ob_topp": 0.95, "ob_gseed": 0,
}
#: The page's numbers: widget key → the use case's field, whose bounds (objectives.BOUNDS) bound the widget and the link.
NUMBERS = {"ob_k": "top_k", "ob_seed": "seed", "ob_epochs": "epochs", "ob_eseed": "seed", "ob_new": "new_tokens",
           "ob_temp": "temperature", "ob_topk": "sampling_top_k", "ob_topp": "top_p", "ob_gseed": "seed"}
ALLOWED = {"ob_models": MLM, "ob_models_other": ui.valid_model_id, "ob_pll_model_other": ui.valid_model_id,
           "ob_nsp_model_other": ui.valid_model_id, "ob_pll_model": ui.picker_values(MLM), "ob_nsp_model": ui.picker_values(PRETRAIN),
           "ob_mode": list(objectives.FILL_MODES), **{key: objectives.BOUNDS[name] for key, name in NUMBERS.items()}}
SENTENCE = objectives.MAX_SENTENCE_CHARS
ACTION_STYLE = {"kept": "background:#f3f3f3", "mask": "background:#0072B2;color:white", "random": "background:#D55E00;color:white",
                "same": "background:#009E73;color:white"}



class _NoModel(Exception):
    """No model to run yet (another model not typed in, or refused: the picker said why)."""


# Model results cached by their inputs, as the other model pages keep theirs: a rerun that changed nothing else
# (another tab's widget, a student following the teacher's page) runs no model.
@st.cache_data(show_spinner="Filling the masks…", max_entries=32, ttl=600)
def fill(text: str, models: tuple[str, ...], k: int, mode: str) -> objectives.FillMask:
    return objectives.fill_mask(text, list(models), k, mode, call=ui.model_call)


@st.cache_data(show_spinner="Scoring the sentence…", max_entries=32, ttl=600)
def pll(model: str, text: str) -> objectives.PseudoLikelihood:
    return objectives.pseudo_perplexity(model, text, call=ui.model_call)


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def relation(model: str, a: str, b: str) -> dict:
    return objectives.sentence_relation(model, a, b, call=ui.model_call)


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def electra(text: str, seed: int) -> tuple[str, objectives.Detection]:
    return objectives.electra_round(GEN, DISC, text, seed, call=ui.model_call)


@st.cache_data(show_spinner=False, max_entries=32, ttl=600)
def discriminated(hand: str, text: str) -> objectives.Detection:
    return objectives.discriminate(DISC, hand, text, call=ui.model_call)


@st.cache_data(show_spinner="Generating…", max_entries=32, ttl=600)
def generated(prompt: str, new: int, sample: bool, temp: float, topk: int, topp: float, seed: int) -> objectives.Generation:
    return objectives.generate("gpt2", prompt, new, sample, temp, topk, topp, seed, call=ui.model_call)


@st.cache_data(show_spinner="BERT appending [MASK] after [MASK]…", max_entries=32, ttl=600)
def bert_generated(prompt: str, new: int) -> objectives.Generation:
    return objectives.bert_generate("bert-base-uncased", prompt, new, call=ui.model_call)


def label(mid: str) -> str:
    return f"{mid} · {ui.STATUS_LABELS[ui.catalog_availability()[mid][0]]}"


def bars(preds: list, title: str) -> go.Figure:
    return go.Figure(go.Bar(x=[p.probability for p in preds][::-1], y=[f"{p.token_str.strip() or '␣'} " for p in preds][::-1],
                            orientation="h", marker_color="#0072B2", hovertemplate="%{y}: %{x:.3f}<extra></extra>"),
                     layout={"title": title, "height": 60 + 28 * len(preds), "margin": {"l": 10, "r": 10, "t": 36, "b": 10},
                             "xaxis": {"title": "probability"}})


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Pre-training objectives")
st.markdown("#### What each family member was trained to do: masked LM, NSP and SOP, replaced-token detection, left to right")
ui.warn_ignored(ignored, "ob_")
state = st.session_state
tabs = ui.url_tabs(["Fill the mask", "How BERT masks", "Which sentence is more natural?", "Does B follow A?",
                    "Spot the replaced word", "Left to right"], key="ob_tab")

def fill_tab() -> None:
    """The Fill the mask tab: each model's top tokens for every [MASK], after the class has predicted the first."""
    c = st.columns([3, 2])
    c[0].multiselect("Models", MLM, key="ob_models", format_func=label, max_selections=4)
    extra = ui.other_model("ob_models_other", task="masked-lm", where=c[1], label="And another model (optional)",
                           optional=True)
    st.selectbox("Examples from the lectures", ["(pick one)", *EXAMPLES], key="ob_example",
                 on_change=lambda: state.update(ob_fill=state["ob_example"]) if state["ob_example"] in EXAMPLES else None)
    c = st.columns([5, 1, 2])
    c[0].text_input("Text: write [MASK] for every model (RoBERTa gets its <mask>)", key="ob_fill", max_chars=MAX_TEXT_CHARS)
    ui.bounded_number(c[1], "Top k", "ob_k", ALLOWED["ob_k"])
    c[2].segmented_control("Several masks", list(objectives.FILL_MODES), key="ob_mode",
                           help="Independent: one pass, as BERT predicts them. Sequential: fill the surest, run again.")
    missing = ui.explain_missing(state["ob_models"], "Fill the mask with")
    runnable = [m for m in state["ob_models"] if m not in missing] + ([extra] if extra and extra not in state["ob_models"] else [])
    if not state["ob_models"] and not extra:
        st.info("Pick at least one model.")
    elif runnable:
        try:
            filled = fill(state["ob_fill"], tuple(runnable), state["ob_k"], state["ob_mode"] or "independent")
        except ExplorerError as err:
            ui.show_error(err)
            filled = objectives.FillMask(state["ob_fill"], "independent", {})
        table = filled.table()
        for mid, msg in filled.errors.items():
            st.error(f"**{mid}**: {msg}", icon=":material/error:")
        asked = ui.Ask()
        if len(table):  # a class predicts the first model's first [MASK] before it is shown
            first_model = table["model"].iloc[0]
            asked = ui.ask_the_class(
                "word", ui.question_context("fill", state["ob_fill"], first_model, state["ob_mode"]),
                f"What will {first_model} put in the first mask of “{state['ob_fill'][:120]}”?", key="ob_fill_q")
        if asked.revealed:
            top = filled.predictions[first_model][0]
            ui.reveal_chart(asked.revealed, {p.token_str.strip().lower(): p.probability for p in top}, key="ob_fill_q",
                            model_label=first_model, sources=(f"Predictions of {first_model}, computed by BERT Family Explorer",))
        if len(table) and not asked.hide:
            fill_results(filled, table)


def fill_results(filled: objectives.FillMask, table: pd.DataFrame) -> None:
    """Each model's chart per [MASK], its best guess, and the table's downloads."""
    cols = st.columns(len(table["model"].unique()))
    first = (table["model"].iloc[0], table["mask"].iloc[0])  # its first chart is the page's main result
    for col, (mid, grp) in zip(cols, table.groupby("model", sort=False), strict=True):
        col.markdown(f"**{mid}**")
        for mask, g in grp.groupby("mask"):
            preds = filled.predictions[mid][mask - 1]
            step = f" (filled at step {g['step'].iloc[0]})" if state["ob_mode"] == "sequential" else ""
            ui.chart(bars(preds, f"mask {mask}{step}"), f"ob_bar_{mid.replace('/', '_')}_{mask}", where=col, compact=True,
                     main=(mid, mask) == first,
                     title=f"{mid}: fill-mask, mask {mask}{step}",
                     caption=f"Input: “{state['ob_fill'][:300]}”. Top {len(preds)} tokens by probability.",
                     sources=(f"Predictions of {mid}, computed by BERT Family Explorer",))
        col.markdown(f":gray[Best guess:] {filled.best_guess(mid)}")
    ui.download_buttons(table, "fill-mask", "ob_dl_fill")


def masking_tab() -> None:
    """The How BERT masks tab: which tokens BERT's recipe masks, epoch by epoch (static or dynamic, whole words)."""
    st.text_input("Sentence", key="ob_rtext", max_chars=SENTENCE)
    c = st.columns(4)
    ui.bounded_number(c[0], "Seed", "ob_seed", ALLOWED["ob_seed"])
    ui.bounded_number(c[1], "Epochs", "ob_epochs", ALLOWED["ob_epochs"])
    c[2].toggle("Dynamic masking (RoBERTa)", key="ob_dynamic")
    c[3].toggle("Whole-word masking", key="ob_wwm")
    words_text = state["ob_rtext"].split()
    if not words_text:
        st.info("Type a sentence.")
    else:
        ready = ui.model_ready("bert-base-uncased")
        tokens, words, vocab = objectives.masking_tokens("bert-base-uncased", state["ob_rtext"],
                                                         call=ui.model_call if ready else None)
        if not ready:
            st.caption("BERT's tokenizer is not on this machine: the recipe runs on words.")
        epochs = objectives.masking_epochs(tokens, words, vocab, state["ob_epochs"], state["ob_seed"], state["ob_dynamic"], state["ob_wwm"])
        rows = "".join(
            f"<tr><td style='padding:4px 8px;color:#555'>epoch {e + 1}</td><td>"
            + " ".join(f"<span style='{ACTION_STYLE[a]};padding:2px 5px;border-radius:4px;margin:1px;display:inline-block'>"
                       f"{html.escape(t)}</span>" for a, t in ep) + "</td></tr>" for e, ep in enumerate(epochs))
        st.html(f"<table style='font-family:sans-serif;font-size:15px'>{rows}</table>")
        st.html("<div style='font-family:sans-serif;font-size:13px'>" + " ".join(
            f"<span style='{ACTION_STYLE[a]};padding:2px 6px;border-radius:4px'>{lab}</span>" for a, lab in
            (("mask", "chosen → [MASK] (80%)"), ("random", "chosen → random token (10%)"), ("same", "chosen, kept (10%)"),
             ("kept", "not chosen"))) + "</div>")
        st.caption("BERT (create_pretraining_data.py): 15% of the tokens are chosen; of those 80% become [MASK], 10% a random "
                   "token, 10% stay. BERT drew the pattern once per sequence (static; it duplicated the data 10 times); "
                   "RoBERTa draws a new one each epoch (dynamic).")

def pll_tab() -> None:
    """The Which sentence is more natural? tab: pseudo-perplexity of two sentences under one masked LM."""
    c = st.columns([2, 3, 3])
    pll_model = ui.model_picker("Model", "ob_pll_model", MLM, task="masked-lm", where=c[0])
    c[1].text_input("Sentence 1", key="ob_s1", max_chars=SENTENCE)
    c[2].text_input("Sentence 2", key="ob_s2", max_chars=SENTENCE)
    try:
        if pll_model is None:
            raise _NoModel
        r1, r2 = pll(pll_model, state["ob_s1"]), pll(pll_model, state["ob_s2"])
    except _NoModel:
        pass
    except ExplorerError as err:
        ui.show_error(err)
    else:
        m = st.columns(2)
        m[0].metric("Sentence 1: pseudo-perplexity", f"{r1.pppl:.2f}", help=f"PLL {r1.pll:.2f} over {len(r1.tokens)} tokens")
        m[1].metric("Sentence 2: pseudo-perplexity", f"{r2.pppl:.2f}", help=f"PLL {r2.pll:.2f} over {len(r2.tokens)} tokens")
        better = 1 if r1.pppl < r2.pppl else 2
        st.markdown(f"The model finds **sentence {better}** more natural (lower pseudo-perplexity).")
        df = pd.DataFrame([{"sentence": i, "token": t, "log p": lp} for i, r in ((1, r1), (2, r2)) for t, lp in zip(r.tokens, r.log_probs, strict=True)])
        st.dataframe(df, hide_index=True, width="stretch")
        ui.download_buttons(df, "pseudo-likelihood", "ob_dl_pll")
        st.caption("Salazar et al. 2020: mask each token in turn and add log p(token | the rest); all masked copies run in one batch.")

def nsp_tab() -> None:
    """The Does B follow A? tab: NSP (BERT) or SOP (ALBERT) on two sentences, and swapped."""
    c = st.columns([2, 3, 3])
    nsp_model = ui.model_picker("Model (NSP: BERT, SOP: ALBERT)", "ob_nsp_model", PRETRAIN, task="pretraining", where=c[0])
    c[1].text_input("Sentence A", key="ob_a", max_chars=SENTENCE)
    c[2].text_input("Sentence B", key="ob_b", max_chars=SENTENCE)
    try:
        if nsp_model is None:
            raise _NoModel
        rel = relation(nsp_model, state["ob_a"], state["ob_b"])
    except _NoModel:
        pass
    except ExplorerError as err:
        ui.show_error(err)
    else:
        m = st.columns(2)
        m[0].metric(f"{rel['head']}: P(B follows A)", f"{rel['p_follows']:.1%}")
        m[1].metric(f"{rel['head']}: swapped, P(A follows B)", f"{rel['p_follows_swapped']:.1%}")
        st.caption("BERT's NSP was trained on B = the next sentence or a random one; ALBERT's SOP on B = the next sentence "
                   "or the two swapped, which forces it to learn order rather than topic.")
        ui.download_buttons(pd.DataFrame([rel]), "sentence-relation", "ob_dl_nsp")

def electra_tab() -> None:
    """The Spot the replaced word tab: ELECTRA's generator rewrites a sentence, its discriminator spots the changes."""
    c = st.columns([5, 1])
    c[0].text_input("Sentence", key="ob_etext", max_chars=SENTENCE)
    ui.bounded_number(c[1], "Seed", "ob_eseed", ALLOWED["ob_eseed"])
    try:
        corrupted, det = electra(state["ob_etext"], state["ob_eseed"])
    except ExplorerError as err:
        ui.show_error(err)
    else:
        st.markdown(f"The generator rewrote it as: **{corrupted}**")
        spans = " ".join(
            f"<span style='padding:2px 5px;border-radius:4px;margin:1px;display:inline-block;"
            f"background:rgba(213,94,0,{p:.2f});{'outline:2px solid black;' if r else ''}'>{html.escape(t)} "
            f"<small>{p:.2f}</small></span>" for t, r, p in zip(det.tokens, det.replaced, det.p_replaced, strict=True))
        st.html(f"<div style='font-family:sans-serif;font-size:15px;line-height:2'>{spans}</div>")
        st.caption("Shade: the discriminator's probability that the token was replaced; outline: it really was.")
        st.text_input("Replace a word by hand", key="ob_hand", max_chars=SENTENCE)
        try:
            hand = discriminated(state["ob_hand"], state["ob_etext"])
            st.dataframe(pd.DataFrame({"token": hand.tokens, "p(replaced)": hand.p_replaced, "really replaced": hand.replaced}),
                         hide_index=True, width="stretch")
        except ExplorerError as err:
            ui.show_error(err)

def generate_tab() -> None:
    """The Left to right tab: GPT-2 generates; BERT, filling [MASK] after [MASK], cannot."""
    st.text_input("Prompt", key="ob_prompt", max_chars=SENTENCE)
    c = st.columns(6)
    ui.bounded_number(c[0], "New tokens", "ob_new", ALLOWED["ob_new"])
    c[1].toggle("Sample", key="ob_sample")
    ui.bounded_number(c[2], "Temperature", "ob_temp", ALLOWED["ob_temp"], disabled=not state["ob_sample"])
    ui.bounded_number(c[3], "Top-k", "ob_topk", ALLOWED["ob_topk"], disabled=not state["ob_sample"])
    ui.bounded_number(c[4], "Top-p", "ob_topp", ALLOWED["ob_topp"], disabled=not state["ob_sample"])
    ui.bounded_number(c[5], "Seed", "ob_gseed", ALLOWED["ob_gseed"])
    left, right = st.columns(2)
    with left:
        st.markdown("**GPT-2** (trained left to right)")
        try:
            g = generated(state["ob_prompt"], state["ob_new"], state["ob_sample"], state["ob_temp"], state["ob_topk"],
                          state["ob_topp"], state["ob_gseed"])
            st.markdown(f"{state['ob_prompt']} **{g.new_text}**")
            st.caption(f"{g.seconds:.2f} s")
        except ExplorerError as err:
            ui.show_error(err)
    with right:
        st.markdown("**BERT** (appending [MASK] and filling it, again and again)")
        try:
            b = bert_generated(state["ob_prompt"], state["ob_new"])
            st.markdown(f"{state['ob_prompt']} **{b.new_text}**")
            st.caption(f"{b.seconds:.2f} s — BERT cannot generate: it was never trained to predict the next word.")
        except ExplorerError as err:
            ui.show_error(err)


for tab, draw in zip(tabs, (fill_tab, masking_tab, pll_tab, nsp_tab, electra_tab, generate_tab), strict=True):
    if tab.open:  # only the open tab is drawn (and runs its models): its name is in the address (ui.url_tabs)
        with tab:
            draw()

ui.save_url_state(DEFAULTS)
