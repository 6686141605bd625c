"""Representations: what the hidden vectors hold, layer by layer, and which input tokens drive an output."""

import pandas as pd
import streamlit as st

from analysis import representation_plots as plots
from app import ui
from core import registry
from core.errors import ExplorerError
from services import attention, representations

BUNDLED = registry.bundled_id()
MODELS = [c.id for c in registry.loadable()]
MLM = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
PRETRAIN = [c.id for c in registry.loadable() if "pretraining" in c.tasks and c.family in ("bert", "albert")]
DISC = [c.id for c in registry.loadable() if c.objective == "replaced-token-detection" and "pretraining" in c.tasks
        and c.family == "electra"]
SENSES = representations.senses()
VIEWS = {"projection": "Projection", "similarity": "Similarity by layer", "nearest": "Nearest contexts",
         "neuron": "Neuron view", "why": "Why this prediction"}
METHODS = {"pca": "PCA", "tsne": "t-SNE", "umap": "UMAP"}
OUTPUTS = representations.OUTPUTS
DEFAULTS = {
    "rp_view": "projection", "rp_model": BUNDLED, "rp_model_other": "", "rp_source": "senses",
    "rp_words": ["bank", "bat"], "rp_text": "The bank raised its rates.\nWe walked along the river bank.",
    "rp_focus": "", "rp_layer": 4, "rp_method": "pca", "rp_seed": 0, "rp_model2": "distilbert-base-uncased",
    "rp_model2_other": "", "rp_sentence": 0, "rp_token": 1, "rp_k": 10, "rp_head": 0, "rp_query": 1,
    "rp_output": "similarity", "rp_a": "A man is playing the guitar on stage.", "rp_b": "Someone performs music.",
    "rp_fill": "The capital of France is [MASK].", "rp_candidate": "", "rp_steps": 50, "rp_position": 2,
}
#: The numbers of the page and their bounds, the use cases' (representations.BOUNDS, attention.BOUNDS): widgets and links.
NUMBERS = {"rp_layer": (0, representations.BOUNDS["layer"][1]), "rp_seed": representations.BOUNDS["seed"],
           "rp_sentence": (0, representations.MAX_TEXTS - 1), "rp_token": representations.BOUNDS["position"],
           "rp_k": representations.BOUNDS["k"], "rp_head": attention.BOUNDS["head"], "rp_query": representations.BOUNDS["position"],
           "rp_steps": representations.BOUNDS["steps"], "rp_position": representations.BOUNDS["replaced_position"]}
ALLOWED = {"rp_view": list(VIEWS), "rp_model": ui.picker_values(MODELS), "rp_model_other": ui.valid_model_id,
           "rp_model2": ui.picker_values(MODELS), "rp_model2_other": ui.valid_model_id, "rp_source": ["senses", "typed"],
           "rp_words": sorted(set(SENSES["word"])), "rp_method": list(METHODS), "rp_output": list(OUTPUTS),
           "rp_focus": lambda v: len(v) <= representations.MAX_FOCUS_CHARS, **NUMBERS}
LINE = representations.MAX_LINE_CHARS
TEXTS = min(representations.MAX_TEXTS * (LINE + 1), ui.MAX_LINK_TEXT_CHARS)  # the sentences' box: its lines, in a link
ALLOWED["rp_text"] = lambda v: len(v) <= TEXTS
SOURCES_CITED = {
    "projection": ("Coenen et al. 2019, Visualizing and Measuring the Geometry of BERT (word senses separate by layer)",),
    "similarity": ("Ethayarajh 2019, How Contextual are Contextualized Word Representations? (EMNLP), §3–4",
                   "Kornblith et al. 2019, Similarity of Neural Network Representations Revisited (ICML): linear CKA"),
    "why": ("Sundararajan et al. 2017, Axiomatic Attribution for Deep Networks (integrated gradients)",
            "Jain & Wallace 2019, Attention is not Explanation; Wiegreffe & Pinter 2019, Attention is not not Explanation",
            "Abnar & Zuidema 2020, Quantifying Attention Flow in Transformers (rollout)"),
}


@st.cache_data(show_spinner="Running the model on the sentences…", max_entries=16)
def states(model_id: str, texts: tuple[str, ...]) -> representations.Representations:
    return representations.states(model_id, list(texts), call=ui.model_call)


@st.cache_data(show_spinner="Projecting…", max_entries=32)
def projected(model_id: str, texts: tuple[str, ...], layer: int, method: str, seed: int,
              focus: frozenset[str]) -> representations.Projection:
    return representations.project(states(model_id, texts), layer, method, seed, set(focus))


@st.cache_data(show_spinner="Searching the corpus (the first search at a layer builds its index: about a minute)…",
               max_entries=32)
def neighbours(model_id: str, text: str, position: int, k: int, layer: int) -> list:
    return representations.nearest(model_id, text, position, k, layer, call=ui.model_call)


@st.cache_data(show_spinner="Reading the head's queries and keys…", max_entries=32)
def neuron(model_id: str, text: str, layer: int, head: int):
    return attention.query_key(model_id, text, layer, head, call=ui.model_call)


@st.cache_data(show_spinner="Integrated gradients (its interpolation steps in one batch)…", max_entries=32)
def explain(kind: str, model_id: str, text: str, text_b: str, position: int, steps: int):
    return representations.explain(kind, model_id, text, text_b, position, steps, call=ui.model_call)


@st.cache_data(show_spinner=False, max_entries=32)
def rollout_row(model_id: str, text: str, pair: str, row: int):
    return attention.rollout_row(model_id, text, pair, row, call=ui.model_call)


def short(model_id: str) -> str:
    """A model's name without its owner, for chart titles."""
    return model_id.rsplit("/", 1)[-1]


def sentences() -> tuple[list[str], list[str]]:
    """The sentences and, per sentence, its group label (the sense in the demo set, '' when typed)."""
    state = st.session_state
    if state["rp_source"] == "senses":
        rows = SENSES[SENSES["word"].isin(state["rp_words"] or list(DEFAULTS["rp_words"]))]
        return list(rows["sentence"]), [f"{w}: {m}" for w, m in zip(rows["word"], rows["sense"], strict=True)]
    lines = [line.strip() for line in state["rp_text"].splitlines() if line.strip()][: representations.MAX_TEXTS]
    return lines, [""] * len(lines)


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Representations")
st.markdown("#### What the hidden vectors hold, layer by layer, and which words drive a prediction")
ui.warn_ignored(ignored, "rp_")
state = st.session_state
st.segmented_control("View", list(VIEWS), key="rp_view", format_func=VIEWS.get, label_visibility="collapsed")
view = state["rp_view"] or "projection"


def sentence_inputs() -> tuple[str, list[str], list[str], representations.Representations]:
    """The model and sentences the first four views share, run through the model: (model id, sentences, their groups,
    the hidden states). Stops the page with a message where there is nothing to show."""
    c = st.columns([3, 3, 3])
    model_id = ui.model_picker("Model", "rp_model", MODELS, where=c[0])
    c[1].segmented_control("Sentences", ["senses", "typed"], key="rp_source", format_func={"senses": "Demo", "typed": "Yours"}.get,
                           help="Demo: 38 sentences with 'bank', 'bat', 'light' and 'spring' in different senses. "
                                "Yours: type one sentence per line.")
    if state["rp_source"] == "senses":
        c[2].multiselect("Words", sorted(set(SENSES["word"])), key="rp_words",
                         help="Each in several senses: 'bank' of a river and of money, 'bat', 'light', 'spring'.")
    else:
        c[2].text_area(f"One sentence per line (at most {representations.MAX_TEXTS})", key="rp_text", height=100,
                       max_chars=TEXTS)
    texts, groups = sentences()
    if model_id and not texts:
        st.info("Pick at least one word, or type a sentence.", icon=":material/edit:")
    try:
        reps = states(model_id, tuple(texts)) if model_id and texts else None
    except ExplorerError as err:
        ui.show_error(err)
        reps = None
    if reps is None:
        ui.save_url_state(DEFAULTS)
        st.stop()
    for note in reps.notices:
        st.info(note, icon=":material/info:")
    state["rp_layer"] = min(state["rp_layer"], reps.layers)
    return model_id, texts, groups, reps


def projection_view(model_id: str, texts: list[str], groups: list[str], reps: representations.Representations) -> None:
    """The token vectors of one layer projected to 2-D (PCA, t-SNE, UMAP), coloured by sense or word."""
    c = st.columns([3, 2, 2, 1])
    c[0].slider("Layer (0: the embeddings)", 0, reps.layers, key="rp_layer")
    c[1].segmented_control("Method", list(METHODS), key="rp_method", format_func=METHODS.get)
    c[2].text_input("Only the tokens of", key="rp_focus", max_chars=representations.MAX_FOCUS_CHARS,
                    help="Comma-separated words; empty: the words picked above (demo), or every word of your sentences.")
    ui.bounded_number(c[3], "Seed", "rp_seed", NUMBERS["rp_seed"])
    focus = representations.focus_words(state["rp_focus"])
    if not focus and state["rp_source"] == "senses":
        focus = set(state["rp_words"])
    try:
        shown = projected(model_id, tuple(texts), state["rp_layer"], state["rp_method"] or "pca", int(state["rp_seed"]),
                          frozenset(focus))
    except representations.TooFewTokens as err:
        st.info(f"{err.message} Widen 'Only the tokens of', or add sentences.", icon=":material/info:")
    except ExplorerError as err:
        ui.show_error(err)
    else:
        projection_chart(shown, texts, groups, reps)
    upload_projection()


def projection_chart(shown: representations.Projection, texts: list[str], groups: list[str],
                     reps: representations.Representations) -> None:
    colour = [groups[t["text_index"]] or t["word"].lower() for t in shown.tokens]
    labels = [t["token"] for t in shown.tokens]
    hover = [reps.items[t["text_index"]].text for t in shown.tokens]
    method = METHODS[shown.method]
    coords = shown.coords
    ui.chart(plots.projection_figure(coords, colour, labels, hover, f"{short(reps.model_id)}, layer {shown.layer}: {method}", method),
             "rp_proj", main=True, title=f"Token vectors of {reps.model_id} at layer {shown.layer} ({method})",
             caption=f"{len(labels)} tokens of {len(texts)} sentences, coloured by "
                     + ("sense" if state["rp_source"] == "senses" else "word") + ".",
             sources=(*SOURCES_CITED["projection"], f"Hidden states of {reps.model_id}, computed by BERT Family Explorer"))
    for note in shown.notices[len(reps.notices):]:
        st.caption(note)
    st.caption("In the middle layers the senses of one word pull apart (the river bank and the money bank form "
               "their own clusters); at layer 0 every 'bank' is the same vector. PCA is linear and exact; t-SNE and "
               "UMAP keep neighbours, not distances (fixed seed, same picture).")
    table = pd.DataFrame({"sentence": hover, "token": labels, "group": colour, "x": coords[:, 0], "y": coords[:, 1]})
    ui.download_buttons(table, "projection", "rp_dl_proj")


def upload_projection() -> None:
    """A user's own vectors (CSV) projected the same way."""
    with st.expander("Project vectors of your own (CSV)"):
        up = st.file_uploader("One row per item, one numeric column per dimension, an optional 'label' column",
                              type=["csv"], key="rp_upload", max_upload_size=representations.MAX_UPLOAD_MB)
        if up is None:
            return
        try:
            mine, xy, names = representations.project_vectors(up.getvalue(), state["rp_method"] or "pca", int(state["rp_seed"]))
        except ExplorerError as err:
            ui.show_error(err)
            return
        method = METHODS[state["rp_method"] or "pca"]
        ui.chart(plots.projection_figure(xy, ["your vectors"] * len(names), names, names, f"{up.name[:60]}: {method}", method),
                 "rp_proj_upload", title=f"Your vectors ({mine.shape[0]} × {mine.shape[1]}), {method}",
                 caption=f"Uploaded as {up.name[:60]}.", sources=("Your data",))


def similarity_view(model_id: str, texts: list[str], groups: list[str], reps: representations.Representations) -> None:
    """How contextual one model's vectors are by layer, and linear CKA between its layers."""
    try:
        sim = representations.similarity(reps)
    except ExplorerError as err:
        ui.show_error(err)
        sim = None
    if sim is not None:
        measures = sim.measures
        left, right = st.columns(2)
        ui.chart(plots.contextuality_figure(measures, short(reps.model_id)), "rp_ctx", where=left, compact=True, main=True,
                 title=f"How contextual are {reps.model_id}'s vectors, by layer",
                 caption=f"{len(texts)} sentences; self-similarity over the {measures[0].words} words seen in two or more of them.",
                 sources=SOURCES_CITED["similarity"][:1])
        left.caption("Self-similarity: one word's vectors across its contexts (1 = the context changes nothing). "
                     "Intra-sentence: tokens against their sentence's mean. Anisotropy: random pairs (all vectors point one "
                     "way when high); the dashed line subtracts it, as Ethayarajh does.")
        ui.chart(plots.cka_figure(sim.cka, short(reps.model_id), short(reps.model_id), f"Linear CKA between layers: {short(reps.model_id)}"),
                 "rp_cka", where=right, compact=True, title=f"Linear CKA between the layers of {reps.model_id}", caption=f"{sim.tokens} token vectors.",
                 sources=SOURCES_CITED["similarity"][1:])
        table = pd.DataFrame([{"layer": m.layer, "self_similarity": m.self_similarity, "intra_sentence": m.intra_sentence,
                               "anisotropy": m.anisotropy, "adjusted_self_similarity": m.adjusted_self_similarity} for m in measures])
        ui.download_buttons(table, "contextuality", "rp_dl_ctx")
    across_models(texts, reps)


def across_models(texts: list[str], reps: representations.Representations) -> None:
    """Linear CKA between the layers of two models, aligned by words."""
    st.subheader("Across two models (aligned by words)")
    c = st.columns([3, 5])
    other = ui.model_picker("Compare with", "rp_model2", MODELS, where=c[0],
                            help="BERT against DistilBERT: which student layer matches which teacher layer.")
    if not other or ui.explain_missing([other] if other in MODELS else [], "The comparison needs"):
        return
    try:
        reps2 = states(other, tuple(texts))
        cross = representations.compare(reps, reps2)
    except ExplorerError as err:
        ui.show_error(err)
        return
    ui.chart(plots.cka_figure(cross.cka, short(reps.model_id), short(reps2.model_id),
                              f"Linear CKA: {short(reps2.model_id)} against {short(reps.model_id)}"),
             "rp_cka2", where=c[1], title=f"Linear CKA between {reps2.model_id} and {reps.model_id}, layer by layer",
             caption=f"{cross.words} words (tokens mean-pooled per word).", sources=SOURCES_CITED["similarity"][1:])
    c[0].caption("Best match of each of its layers: " + ", ".join(f"{i}→{j}" for i, j in enumerate(cross.best_match)))


def nearest_view(model_id: str, texts: list[str], groups: list[str], reps: representations.Representations) -> None:
    """exBERT's search: the corpus tokens whose vectors at a layer are closest to a chosen token's."""
    c = st.columns([4, 2, 2, 1])
    state["rp_sentence"] = min(state["rp_sentence"], len(texts) - 1)
    c[0].selectbox("Sentence", list(range(len(texts))), key="rp_sentence", format_func=lambda i: texts[i])
    item = reps.items[state["rp_sentence"]]
    choices = [p for p in range(len(item.tokens)) if not item.special[p]]
    if state["rp_token"] not in choices:
        state["rp_token"] = choices[0]
    c[1].selectbox("Token", choices, key="rp_token", format_func=lambda p: f"{p}: {item.tokens[p]}")
    c[2].slider("Layer", 0, reps.layers, key="rp_layer")
    ui.bounded_number(c[3], "k", "rp_k", NUMBERS["rp_k"])
    st.caption("exBERT's search: the tokens of 6,000 WordNet example sentences (Princeton WordNet 3.0, its licence in "
               "data/corpus/) whose vectors at this layer are closest to the chosen token (cosine, exact).")
    asked = (reps.model_id, item.text, state["rp_token"], state["rp_k"], state["rp_layer"])
    if not (st.button("Search the corpus", icon=":material/search:", key="rp_search") or state.get("rp_searched") == asked):
        return
    state["rp_searched"] = asked
    try:
        hits = neighbours(*asked)
    except ExplorerError as err:
        ui.show_error(err)
        return
    table = pd.DataFrame([{"similarity": round(h.similarity, 4), "token": h.token, "sentence": h.sentence} for h in hits])
    ui.main_result().dataframe(table, hide_index=True, width="stretch")
    ui.download_buttons(table, "nearest-contexts", "rp_dl_nn")
    same = sum(h.token == item.tokens[state["rp_token"]] for h in hits)
    st.caption(f"{same} of {len(hits)} neighbours are the same word; read their sentences to see which sense the layer keeps.")


def neuron_view(model_id: str, texts: list[str], groups: list[str], reps: representations.Representations) -> None:
    """bertviz's neuron view: one head's query × key, dimension by dimension, for a chosen query token."""
    c = st.columns([4, 1, 1, 2])
    state["rp_sentence"] = min(state["rp_sentence"], len(texts) - 1)
    c[0].selectbox("Sentence", list(range(len(texts))), key="rp_sentence", format_func=lambda i: texts[i])
    c[1].number_input("Layer", 0, max(0, reps.layers - 1), key="rp_layer")
    ui.bounded_number(c[2], "Head", "rp_head", NUMBERS["rp_head"])
    try:
        qk = neuron(reps.model_id, reps.items[state["rp_sentence"]].text, min(state["rp_layer"], reps.layers - 1), state["rp_head"])
    except ExplorerError as err:
        ui.show_error(err)
        return
    state["rp_query"] = min(state["rp_query"], len(qk.tokens) - 1)
    c[3].selectbox("Query token", list(range(len(qk.tokens))), key="rp_query", format_func=lambda p: f"{p}: {qk.tokens[p]}")
    i = state["rp_query"]
    ui.chart(plots.neuron_figure(qk.product(i), qk.tokens, qk.tokens[i], qk.scores[i], qk.probabilities[i]), "rp_neuron", main=True,
             title=f"{qk.model_id}: neuron view, layer {qk.layer}, head {qk.head}, query “{qk.tokens[i]}”",
             caption="Left: each dimension's share q_d·k_d of the score; right: q·k/√d and the softmax weight.",
             sources=("Vig 2019, bertviz (the neuron view)", f"Queries and keys of {qk.model_id}, read from the model"))
    st.caption(f"Summing a row on the left and dividing by √{qk.query.shape[1]} gives the grey bar; the softmax of the grey "
               "bars is the blue one, the head's attention (checked against the model's own weights in the tests). bertviz "
               "shows this for BERT, GPT-2 and RoBERTa; here it works for every architecture whose attention is plain q·k: "
               "not for " + "; ".join(f"{k} ({v})" for k, v in attention.NOT_PLAIN.items()) + ".")


def why_inputs() -> tuple[str, str, str, str, str]:
    """The output to explain, its model and its text: (kind, model id or "", text, second text, sentence pair)."""
    c = st.columns([3, 3])
    c[0].selectbox("Explain", list(OUTPUTS), key="rp_output", format_func=OUTPUTS.get)
    kind = state["rp_output"]
    pool = {"similarity": MODELS, "fill_mask": MLM, "sentence_relation": PRETRAIN, "replaced_token": DISC}[kind]
    if state["rp_model"] not in pool and state["rp_model"] != ui.OTHER:
        state["rp_model"] = BUNDLED if kind == "similarity" else pool[0]
    model_id = ui.model_picker("Model", "rp_model", pool, task={"similarity": "base", "fill_mask": "masked-lm"}.get(kind, "pretraining"),
                               where=c[1])
    c = st.columns([3, 3, 1])
    if kind == "fill_mask":
        c[0].text_input("Text with [MASK]", key="rp_fill", max_chars=LINE)
        c[1].text_input("Candidate (empty: the top prediction)", key="rp_candidate", max_chars=LINE)
        text, text_b, pair = state["rp_fill"], state["rp_candidate"], ""
    elif kind == "replaced_token":
        c[0].text_input("Text", key="rp_a", max_chars=LINE)
        ui.bounded_number(c[1], "Token position", "rp_position", NUMBERS["rp_position"])
        text, text_b, pair = state["rp_a"], "", ""
    else:
        c[0].text_input("Sentence A", key="rp_a", max_chars=LINE)
        c[1].text_input("Sentence B", key="rp_b", max_chars=LINE)
        text, text_b, pair = state["rp_a"], state["rp_b"], (state["rp_b"] if kind == "sentence_relation" else "")
    ui.bounded_number(c[2], "IG steps", "rp_steps", NUMBERS["rp_steps"])
    return kind, model_id or "", text, text_b, pair


def why_view() -> None:
    """Which input tokens drive an output: integrated gradients, gradient × input and attention rollout side by side."""
    kind, model_id, text, text_b, pair = why_inputs()
    if not model_id or ui.explain_missing([model_id] if model_id in MODELS else [], "This needs"):
        return
    try:
        a = explain(kind, model_id, text, text_b, state["rp_position"], int(state["rp_steps"]))
        row = next((p for p, t in enumerate(a.tokens) if t in ("[MASK]", "<mask>")), 0) if kind == "fill_mask" else (
            state["rp_position"] if kind == "replaced_token" else 0)
        roll = rollout_row(model_id, text, pair, row)
    except ExplorerError as err:
        ui.show_error(err)
        return
    st.markdown(f"**{a.output}** = {a.f_input:.4f} (baseline, words replaced by padding: {a.f_baseline:.4f})")
    cols = ui.main_result().columns(3)
    cols[0].markdown("**Integrated gradients**")
    cols[0].html(plots.saliency_html(a.tokens, a.integrated_gradients, a.special,
                                     f"sum {a.integrated_gradients.sum():+.4f} = f(x) − f(baseline) "
                                     f"{a.f_input - a.f_baseline:+.4f}, delta {a.delta:+.1e}, {a.steps} steps"))
    cols[1].markdown("**Gradient × input**")
    cols[1].html(plots.saliency_html(a.tokens, a.gradient_x_input, a.special, "one gradient, at the input only"))
    cols[2].markdown("**Attention rollout**")
    if len(roll) == len(a.tokens):
        cols[2].html(plots.saliency_html(a.tokens, roll, a.special, f"how much token {row} ({a.tokens[row]}) attends to each, through all layers"))
    else:
        cols[2].caption("The attention view tokenizes this input differently; rollout is not drawn.")
    st.caption("Blue raises the output, orange lowers it (hover a word for its number). When the three disagree, "
               "remember: attention weights say where information flows, not what made the output (Jain & Wallace "
               "2019; Wiegreffe & Pinter 2019); integrated gradients satisfy completeness — they add up to the change "
               "of the output — which the other two do not (Sundararajan et al. 2017). Computed with Captum.")
    table = pd.DataFrame({"token": a.tokens, "integrated_gradients": a.integrated_gradients, "gradient_x_input": a.gradient_x_input,
                          "rollout": roll if len(roll) == len(a.tokens) else float("nan")})
    ui.download_buttons(table, "attribution", "rp_dl_attr")


#: The views over the shared sentences, each drawn by one function; "why" has inputs of its own.
SENTENCE_VIEWS = {"projection": projection_view, "similarity": similarity_view, "nearest": nearest_view, "neuron": neuron_view}

if view in SENTENCE_VIEWS:
    SENTENCE_VIEWS[view](*sentence_inputs())
else:
    why_view()
ui.save_url_state(DEFAULTS)
