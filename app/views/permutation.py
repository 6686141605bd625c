"""Permutation LM lab: XLNet's factorization orders, its two streams' masks, live predictions, recurrence."""

import pandas as pd
import streamlit as st

from analysis import attention_plots as plots
from analysis.safe_text import csv_bytes
from app import ui
from core import registry
from core.errors import ExplorerError
from services import permutation

XLNET, BERT = "xlnet-base-cased", "bert-base-uncased"
XLNETS = [c.id for c in registry.loadable() if c.model_type == "xlnet"]
KIND_LABELS = {"left-to-right": "Left to right", "right-to-left": "Right to left", "random": "Random (seeded)", "custom": "Your own"}
PARAGRAPH = ("The cat sat on the mat because it was tired. It had chased a mouse all morning. "
             "The mouse hid under the stairs, and the cat gave up. Then it slept in the sun.")
DEFAULTS = {"pm_model": XLNET, "pm_model_other": "",
            "pm_text": "New York is a city .", "pm_kind": "random", "pm_seed": 0, "pm_custom": "", "pm_k": 2, "pm_target": -1,
            "pm_ny": "New York is a city .", "pm_first": "New", "pm_second": "York", "pm_par": PARAGRAPH, "pm_seg": 8, "pm_mem": 8}
ALLOWED = {"pm_model": ui.picker_values(XLNETS), "pm_model_other": ui.valid_model_id,
           "pm_kind": list(permutation.KINDS), "pm_seed": permutation.BOUNDS["seed"], "pm_k": (1, permutation.MAX_TOKENS),
           "pm_target": (-1, permutation.MAX_TOKENS), "pm_seg": permutation.BOUNDS["segment"], "pm_mem": permutation.BOUNDS["memory"]}


@st.cache_data(show_spinner="Predicting…", max_entries=32)
def predictions(model_id: str, text: str, order: tuple, k: int) -> list:
    return permutation.predictions(model_id, text, list(order), k, call=ui.model_call)


@st.cache_data(show_spinner="Checking…", max_entries=32)
def checked(model_id: str, text: str, order: tuple, target: int) -> permutation.SelfCheck:
    return permutation.self_check(model_id, text, list(order), target, call=ui.model_call)


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Permutation LM")
st.markdown("#### XLNet predicts tokens in a random order, seeing both sides, and never its own target")
ui.warn_ignored(ignored, "pm_")
state = st.session_state
c = st.columns([2, 3])
xlnet_id = ui.model_picker("XLNet checkpoint", "pm_model", XLNETS, task="xlnet-lm", where=c[0],
                           help="Any XLNet: the catalog's, a Hub id, or your own folder under BFE_MODEL_DIR.")
have_xlnet = xlnet_id is not None and ui.model_ready(xlnet_id)
wanted = xlnet_id or XLNET

c[1].text_input("Sentence", key="pm_text", max_chars=permutation.MAX_SENTENCE_CHARS)
tokens, ids = None, None
try:
    ids, tokens = permutation.tokens(state["pm_text"], xlnet_id if have_xlnet else None, call=ui.model_call)
except ExplorerError as err:
    ui.show_error(err)
    ui.save_url_state(DEFAULTS)
    st.stop()
if not have_xlnet:
    st.info(f"{wanted} is not on this machine, so tokens are the sentence's words and predictions are off; the order and "
            f"masks below work the same. To get it: `python -m models.fetch {wanted}` on a machine with internet.",
            icon=":material/info:")

n = len(tokens) - 2
c = st.columns([4, 1, 3])
c[0].segmented_control("Factorization order", list(KIND_LABELS), key="pm_kind", format_func=KIND_LABELS.get)
kind = state["pm_kind"] or "random"
if kind == "random":
    ui.bounded_number(c[1], "Seed", "pm_seed", ALLOWED["pm_seed"])
if kind == "custom":
    c[2].text_input(f"Order: the positions 0–{n - 1}, comma-separated", key="pm_custom", max_chars=permutation.MAX_ORDER_CHARS,
                    placeholder=", ".join(map(str, range(n))))
try:
    order = permutation.order(kind, n, state["pm_seed"], state["pm_custom"])
except ExplorerError as err:
    ui.show_error(err)
    ui.save_url_state(DEFAULTS)
    st.stop()

state["pm_k"] = min(state["pm_k"], n)
c = st.columns([2, 2])
if n > 1:
    c[0].slider("K: predict the last K positions of the order", 1, n, key="pm_k",
                help="XLNet's partial prediction: only the last 1/K of the order is predicted (the paper uses K = 6 or 7).")
else:
    c[0].caption("One position: K is 1, it is the only target.")
masks = permutation.masks(tokens, order, state["pm_k"])
targets = masks.targets
if state["pm_target"] not in targets:
    state["pm_target"] = targets[0]  # the first predicted: there are later targets it must not see
c[1].selectbox("Target to inspect", targets, key="pm_target", format_func=lambda p: f"{p}: {tokens[p]}")
tgt = state["pm_target"]

ui.chart(plots.order_path(tokens[:n], order, targets, tgt), "pm_path", main=True, title="A factorization order, drawn as in XLNet's Figure 1",
         caption=f"Order {' → '.join(map(str, order))}; target {tgt}.", sources=("Yang et al. 2019 (XLNet), Figure 1",))
seen = masks.seen_by(tgt)
st.markdown(f"**{tokens[tgt]}** (position {tgt}, step {order.index(tgt) + 1} of the order) is predicted from: "
            + (", ".join(f"`{tokens[j]}`" for j in seen) if seen else "*nothing: it comes first*")
            + f". Orange: the {len(targets)} predicted positions; blue: what the selected one sees.")

content, query = masks.content, masks.query
left, right = st.columns(2)
for where, m, name, key in ((left, content, "Content stream: may see (itself included)", "pm_content"),
                            (right, query, "Query stream: may see (never itself)", "pm_query")):
    ui.chart(plots.heatmap(m.astype(float), tokens, title=name, zmax=1, colorbar="sees"), key, where=where, compact=True,
             title=f"XLNet two-stream attention masks. {name}", caption=f"Order {' → '.join(map(str, order))}.",
             sources=("Yang et al. 2019 (XLNet), Section 2.3 and Figure 1",))
ui.download(st, "Download the masks (CSV)", lambda: csv_bytes(pd.DataFrame(masks.rows())), "xlnet-masks.csv", "text/csv",
            key="pm_dl_masks")

st.subheader("Predictions for the last K")
if not have_xlnet:
    st.info(f"Predictions need {wanted} (see above).", icon=":material/info:")
else:
    try:
        preds = predictions(xlnet_id, state["pm_text"], tuple(order), state["pm_k"])
        table = pd.DataFrame([{"position": p.position, "token": p.token, "p(token)": p.true_probability,
                               **{f"#{i + 1}": f"{t} ({q:.1%})" for i, (t, q) in enumerate(p.top)}} for p in preds])
        st.dataframe(table, hide_index=True, width="stretch", column_config={"p(token)": st.column_config.NumberColumn(format="%.4f")})
        ui.download(st, "Download predictions (CSV)", lambda: csv_bytes(table), "xlnet-predictions.csv", "text/csv",
                    key="pm_dl_preds")
        chk = checked(xlnet_id, state["pm_text"], tuple(order), tgt)
        st.markdown("**Self-check.** Replace one token and watch the prediction at "
                    f"**{tokens[tgt]}** (largest change of any probability):")
        a, b = st.columns(2)
        if chk.later is not None:
            a.metric(f"Later in the order: `{tokens[chk.later]}` replaced", f"{chk.change_later:.2g}",
                     help="It comes after the target, so the target must not see it: the change must be exactly 0.")
        else:
            a.caption("The target is last in the order: nothing comes after it.")
        if chk.earlier is not None:
            b.metric(f"Earlier in the order: `{tokens[chk.earlier]}` replaced", f"{chk.change_earlier:.2g}",
                     help="It comes before the target, which conditions on it: the prediction should move.")
        else:
            b.caption("The target is first in the order: nothing comes before it.")
    except ExplorerError as err:
        ui.show_error(err)

st.subheader("\"New York\": BERT's independence against XLNet's chain")
if not (have_xlnet and ui.model_ready(BERT)):
    st.info(f"This comparison runs {BERT} and {wanted}; get them with `python -m models.fetch {BERT} {wanted}`.", icon=":material/info:")
else:
    c = st.columns([3, 1, 1])
    c[0].text_input("Sentence", key="pm_ny", max_chars=permutation.MAX_SENTENCE_CHARS)
    c[1].text_input("First word", key="pm_first", max_chars=permutation.MAX_WORD_CHARS)
    c[2].text_input("Second word", key="pm_second", max_chars=permutation.MAX_WORD_CHARS)
    try:
        ny = permutation.new_york(BERT, xlnet_id, state["pm_ny"], state["pm_first"], state["pm_second"], call=ui.model_call)
        st.dataframe(pd.DataFrame([
            {"model": "BERT (both masked, independent)", "log p(first)": ny["bert_first"], "log p(second)": ny["bert_second"],
             "log p(pair)": ny["bert_pair"]},
            {"model": "XLNet (first, then second given first)", "log p(first)": ny["xlnet_first"],
             "log p(second)": ny["xlnet_second_given_first"], "log p(pair)": ny["xlnet_pair"]}]), hide_index=True, width="stretch")
        st.caption("XLNet paper §2.3: BERT's objective is log p(New | is a city) + log p(York | is a city); XLNet's "
                   "is log p(New | is a city) + log p(York | New, is a city).")
    except ExplorerError as err:
        ui.show_error(err)

st.subheader("Segment recurrence: attention into memory")
if not have_xlnet:
    st.info(f"Recurrence is drawn from XLNet's real attention into its memory (mems); it needs {wanted}.", icon=":material/info:")
else:
    st.text_area("A longer text", key="pm_par", height=90, max_chars=permutation.MAX_PARAGRAPH_CHARS)
    c = st.columns(2)
    ui.bounded_number(c[0], "Segment length (tokens)", "pm_seg", ALLOWED["pm_seg"])
    ui.bounded_number(c[1], "Memory length (0 = vanilla, fixed context)", "pm_mem", ALLOWED["pm_mem"])
    try:
        segs = permutation.segments(xlnet_id, state["pm_par"], state["pm_seg"], state["pm_mem"], call=ui.model_call)
    except ExplorerError as err:
        ui.show_error(err)
    else:
        ui.chart(plots.memory_share([g.segment for g in segs], [[float(v) for v in g.into_memory] for g in segs]), "pm_memory",
                 title="XLNet's segment recurrence: attention into memory", caption="Share of each segment's attention that "
                 "goes into the remembered previous segment, per layer.", sources=("Dai et al. 2019 (Transformer-XL), Section 3.2; "
                 "Yang et al. 2019 (XLNet), Section 2.4",))
        st.caption("Share of each segment's attention that goes into the remembered previous segment, per layer "
                   "(Transformer-XL's recurrence, kept by XLNet as `mems`). With memory 0 every segment starts blind.")
        if len(segs) > 1 and segs[1].memory:
            g = segs[1]
            mem_tokens = [f"m:{t}" for t in segs[0].tokens[-g.memory:]]
            ui.chart(plots.heatmap(g.weights[-1].mean(0), list(g.tokens), mem_tokens + list(g.tokens),
                                   title="Segment 1, last layer, mean over heads: memory | current"), "pm_mem_heat",
                     title="Segment recurrence: attention into the remembered segment",
                     caption="Segment 1, last layer, mean over heads; columns: memory, then the current segment.",
                     sources=("Dai et al. 2019 (Transformer-XL), Section 3.2; Yang et al. 2019 (XLNet)",))

ui.save_url_state(DEFAULTS)
