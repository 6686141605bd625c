"""Which parts of a model matter: what each layer predicts, which heads matter, where a prediction is carried."""

import streamlit as st

from analysis import intervention_plots as plots
from app import ui
from core import registry
from core.errors import MAX_TEXT_CHARS
from services import parts

MLM = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
ENCODERS = [c.id for c in registry.loadable()]
BUNDLED = registry.bundled_id()
VIEWS = ["Layer by layer", "Heads that matter", "Where it is carried"]
TARGETS = {"masked-lm": "Masked words", "classifier": "A fine-tuned classifier", "probe": "A probe"}
CLASSIFIERS = [*ui.trained_here("sequence-classification"), *ui.trained_here("token-classification")]
SENTENCES = ("The bank raised its rates.\nWe walked along the river bank.\nThe bat flew out of the cave.\n"
             "She plays the guitar on stage.\nThe cat sat on the mat.\nA dog ran in the park.")
# The default is a masked LM this machine has: a catalog one, else the newest trained in the lab (offline, those may be
# the only ones), else the first of the catalog (it downloads where the Hub is reachable).
FIRST = next((m for m in MLM if ui.ready_here(m)), None) \
    or next(iter(ui.trained_here("masked-lm")), None) or (MLM[0] if MLM else ui.OTHER)
DEFAULTS = {"wp_model": FIRST, "wp_model_other": "", "wp_view": VIEWS[0],
            "wp_text": "The cat sat on the [MASK] because it was tired.", "wp_k": 5, "wp_texts": SENTENCES, "wp_steps": 6,
            "wp_seeds": 3, "wp_mode": "zero", "wp_clean": "the cat sat on the [MASK] .", "wp_corrupt": "the dog sat on the [MASK] .",
            "wp_answer": "mat", "wp_foil": "floor", "wp_raw": False, "wp_step": ui.LAST_STEP,
            "wp_target": "masked-lm", "wp_task": "supersense", "wp_items": 128, "wp_cls": CLASSIFIERS[0] if CLASSIFIERS else ui.OTHER,
            "wp_cls_other": "", "wp_enc": BUNDLED, "wp_enc_other": "", "wp_labelled": "",
            "wp_unit": "layer", "wp_position": -1, "wp_remove": ""}
#: The page's numbers: widget key → the use case's field, whose bounds (parts.BOUNDS) bound the widget and the link.
NUMBERS = {"wp_k": "top_k", "wp_steps": "steps", "wp_seeds": "seeds", "wp_items": "items", "wp_position": "position"}
ALLOWED = {"wp_model": ui.picker_values(MLM), "wp_model_other": ui.valid_model_id, "wp_view": VIEWS,
           "wp_mode": list(parts.ABLATION_MODES), "wp_step": (ui.LAST_STEP, 10**9),
           "wp_target": list(TARGETS), "wp_task": list(parts.TASKS),
           "wp_cls": ui.picker_values(CLASSIFIERS), "wp_cls_other": ui.valid_model_id, "wp_enc": ui.picker_values(ENCODERS),
           "wp_enc_other": ui.valid_model_id, "wp_unit": ["layer", "head"],
           "wp_remove": lambda v: isinstance(v, str) and len(v) <= parts.MAX_HEADS_CHARS,
           **{key: parts.BOUNDS[name] for key, name in NUMBERS.items()}}
LINES = min(parts.MAX_SENTENCES * (parts.MAX_LINE_CHARS + 1), ui.MAX_LINK_TEXT_CHARS)  # the sentences' box: its lines, in a link
ALLOWED["wp_texts"] = ALLOWED["wp_labelled"] = lambda v: len(v) <= LINES


ignored = ui.restore_url_state(DEFAULTS, ALLOWED)
st.title("Which parts matter")
st.markdown("#### What each layer would predict, which attention heads the model needs, and where a prediction is carried")
ui.warn_ignored(ignored, "wp_")
state = st.session_state
c = st.columns([3, 3])
c[1].segmented_control("View", VIEWS, key="wp_view")
view = state["wp_view"] or VIEWS[0]
st.caption("*Layer by layer* and *Where it is carried* need a masked-LM head (a lab model offline). *Heads that matter* "
           "also takes a fine-tuned classifier (the Fine-tuning lab's runs) or any encoder with a probe: the bundled "
           "MiniLM works offline that way.")
target = (state["wp_target"] or "masked-lm") if view == VIEWS[1] else "masked-lm"
if target == "classifier":
    model = ui.model_picker("Fine-tuned classifier", "wp_cls", CLASSIFIERS, task="sequence-classification", where=c[0],
                            help="A run of the Fine-tuning lab (it is scored on its own task's test items), or any "
                                 "*ForSequenceClassification checkpoint (scored on your labelled sentences).")
elif target == "probe":
    model = ui.model_picker("Encoder", "wp_enc", ENCODERS, where=c[0],
                            help="Any encoder, the bundled MiniLM included: a linear probe is fitted on its last layer "
                                 "first, with every head in place, then held fixed while heads are removed.")
else:
    model = ui.model_picker("Masked-LM model", "wp_model", MLM, task="masked-lm", where=c[0],
                            help="A model with a masked-LM head: a catalog model on this machine, one trained in the "
                                 "Pre-training lab, or another checkpoint.")
    model = ui.step_picker(model, "wp_step")
if target == "masked-lm" and FIRST not in ui.trained_here("masked-lm") and not ui.ready_here(FIRST):
    st.caption("No masked-LM model is on this machine yet. Offline, train one in the **Pre-training lab** (a few minutes; "
               "it appears in this picker), or fetch one where the Hub is reachable.")
if model is None:
    if target == "classifier" and not CLASSIFIERS:
        st.info("No fine-tuned classifier is on this machine yet: fine-tune one in the **Fine-tuning lab** (the bundled "
                "MiniLM on supersense takes a few minutes), or score the heads with a probe instead.", icon=":material/info:")
    elif not MLM and target == "masked-lm":
        st.info("No masked-LM model is on this machine yet: train one in the **Pre-training lab** (a few minutes), or name "
                "a checkpoint above.", icon=":material/info:")
    ui.save_url_state(DEFAULTS)
    st.stop()
source = (f"Computed by BERT Family Explorer on {model}",)
ui.await_warmup([model])  # the server may still be loading it (the bundled MiniLM, a probe's encoder)

def lens_view() -> None:
    """The logit lens: each layer's hidden state at each mask read by the model's own masked-LM head."""
    c = st.columns([5, 1])
    c[0].text_input("Text with [MASK]", key="wp_text", max_chars=MAX_TEXT_CHARS)
    ui.bounded_number(c[1], "Top k", "wp_k", ALLOWED["wp_k"])
    with ui.friendly_errors():
        lens = parts.lens(model, state["wp_text"], state["wp_k"], call=ui.model_call)
        for i, pos in enumerate(lens.positions):
            ui.chart(plots.lens_figure(lens, i), f"wp_lens_{i}", main=i == 0,
                     title=f"Logit lens: {model}, mask {i + 1}",
                     caption=f"{model}: each layer's hidden state at mask {i + 1} (token {pos}) read by the model's own masked-LM head, "
                             "its top tokens shaded by probability (darker: likelier); the top row is the model's fill-mask "
                             "output; right: the probability of that final answer at each layer.", sources=source, show_caption=True)
        st.caption("The logit lens (nostalgebraist 2020, for decoders) applied to a masked LM: where the final answer first "
                   "becomes likely shows how many layers the prediction needs.")


def pruning_inputs() -> str:
    """What scores a removed head, on which texts, and how the pruning curve is drawn; the texts typed ("" for a
    probe's or a classifier's own task)."""
    c = st.columns([5, 3, 2])
    c[0].segmented_control("Scored by", list(TARGETS), key="wp_target", format_func=TARGETS.get,
                           help="What a removed head costs: the masked-LM loss on your sentences, a fine-tuned "
                                "classifier's task loss, or a linear probe's loss on a task.")
    if target == "probe":
        c[1].segmented_control("Task", list(parts.TASKS), key="wp_task",
                               help="supersense: a word's WordNet supersense (26 classes); wic: does a word mean the same "
                                    "in two sentences (2 classes).")
    if target != "masked-lm":
        ui.bounded_number(c[2], "Test items", "wp_items", ALLOWED["wp_items"], step=8, help="Half rank the heads, half score the curve.")
    texts = ""
    if target == "masked-lm":
        st.text_area(f"Sentences, one per line (4 to {parts.MAX_SENTENCES}): the heads are ranked on lines 1, 3, 5, … and scored on "
                     "2, 4, 6, …", key="wp_texts", height=150, max_chars=LINES)
        texts = state["wp_texts"]
    elif parts.needs_texts(target, model):
        st.text_area(f"Labelled sentences, one `label | sentence` per line (4 to {parts.MAX_SENTENCES}; the labels are the model's)",
                     key="wp_labelled", height=150, max_chars=LINES)
        texts = state["wp_labelled"]
    c = st.columns(3)
    ui.bounded_number(c[0], "Pruning steps", "wp_steps", ALLOWED["wp_steps"])
    ui.bounded_number(c[1], "Random orders", "wp_seeds", ALLOWED["wp_seeds"])
    c[2].segmented_control("A removed head outputs", list(parts.ABLATION_MODES), key="wp_mode")
    return texts


def pruning_view() -> None:
    """Michel et al.'s pruning curve and head importance, and heads the user removes."""
    texts = pruning_inputs()
    with ui.friendly_errors():
        curve = parts.head_importance(model, texts, state["wp_steps"], state["wp_seeds"], state["wp_mode"] or "zero", target,
                                      state["wp_task"] if target == "probe" else "", state["wp_items"], call=ui.model_call)
        importance = curve.importance
        left, right = st.columns(2)
        ui.chart(plots.pruning_figure(curve), "wp_prune", where=left, main=True, title=f"Pruning heads of {model}",
                 caption=f"{curve.measure.capitalize()} as heads are removed ({curve.mode} ablation), least important "
                         f"first against {curve.seeds} random orders. {curve.note}",
                 sources=("Michel, Levy & Neubig 2019, Are Sixteen Heads Really Better than One?, Figure 3 (method)", *source), show_caption=True)
        ui.chart(plots.importance_figure(importance.scores), "wp_importance", where=right, title=f"Head importance of {model}",
                 caption=f"|∂L/∂ξ_h| summed over batches and normalised per layer, on {importance.texts} "
                         f"{'sentences' if target == 'masked-lm' else 'items'} ({importance.masked} scored places).",
                 sources=source, show_caption=True)
        st.caption("The paper's finding: at test time a large share of BERT's heads can be removed with little loss, and "
                   "the most important ones are found with one backward pass (Michel et al. 2019, Section 4).")
    removal(texts)


def removal(texts: str) -> None:
    """The heads the user names, removed together, against every head."""
    st.text_input("Remove these heads yourself (layer.head, counted from 1 as in the heatmap: e.g. 1.3, 2.7)",
                  key="wp_remove", max_chars=parts.MAX_HEADS_CHARS)
    if not state["wp_remove"].strip():
        return
    with ui.friendly_errors():
        cut = parts.ablate(model, state["wp_remove"], texts, state["wp_mode"] or "zero", target,
                           state["wp_task"] if target == "probe" else "", state["wp_items"], call=ui.model_call)
        c = st.columns(3)
        c[0].metric(f"{cut.measure.capitalize()}, every head", f"{cut.full_accuracy:.1%}")
        c[1].metric(f"With {len(cut.heads)} head{'s' * (len(cut.heads) != 1)} removed ({cut.mode})", f"{cut.accuracy:.1%}",
                    f"{100 * (cut.accuracy - cut.full_accuracy):+.1f} points")
        c[2].metric("Loss", f"{cut.loss:.3f}", f"{cut.loss - cut.full_loss:+.3f}", delta_color="inverse")
        st.caption(f"On all {cut.scored} scored places (both halves). One run, no interval: the pruning curve above "
                   "gives random orders' spread for comparison.")


def patching_view() -> None:
    """Causal tracing: which layer or head, copied from a clean run into a corrupted one, restores the answer."""
    c = st.columns(2)
    c[0].text_input("Clean sentence (one [MASK])", key="wp_clean", max_chars=MAX_TEXT_CHARS)
    c[1].text_input("Corrupted sentence (same length, one word changed)", key="wp_corrupt", max_chars=MAX_TEXT_CHARS)
    c = st.columns(4)
    c[0].text_input("Answer (one token)", key="wp_answer", max_chars=parts.MAX_WORD_CHARS)
    c[1].text_input("Foil (one token)", key="wp_foil", max_chars=parts.MAX_WORD_CHARS)
    c[2].segmented_control("Patch", ["layer", "head"], key="wp_unit", format_func={"layer": "Layers", "head": "Heads"}.get,
                           help="Layers: each layer's output at each position. Heads: each head's output, at every "
                                "position (Vig et al. 2020) or at one.")
    c[3].toggle("Raw change instead of share restored", key="wp_raw")
    unit = state["wp_unit"] or "layer"
    if unit == "head":
        ui.bounded_number(st, "Position to patch (−1: every position)", "wp_position", ALLOWED["wp_position"],
                          help="The token index in the corrupted sentence (0 is [CLS]); −1 patches the head everywhere.")
    with ui.friendly_errors():
        traced = parts.patch(model, state["wp_clean"], state["wp_corrupt"], state["wp_answer"], state["wp_foil"], unit,
                             state["wp_position"] if unit == "head" else -1, call=ui.model_call)
        where = "every position" if traced.position is None else f"position {traced.position} ({traced.corrupted_tokens[traced.position]})"
        what = f"each cell copies one head's output at {where}" if unit == "head" else "each cell copies one layer's output at one position"
        ui.chart(plots.patching_figure(traced, restored=not state["wp_raw"]), "wp_patch", main=True,
                 title=f"Causal tracing in {model}" + (" (heads)" if unit == "head" else ""),
                 caption=f"Logit difference {traced.answer} − {traced.foil} at the mask: clean {traced.clean_difference:+.2f}, "
                         f"corrupted {traced.corrupted_difference:+.2f}; {what} from the clean run ({traced.passes} batched passes).",
                 sources=("Meng et al. 2022, Locating and Editing Factual Associations in GPT (method); Vig et al. 2020, "
                          "Investigating Gender Bias in Language Models Using Causal Mediation Analysis", *source), show_caption=True)


#: Each view drawn by one function.
DRAWN_BY = dict(zip(VIEWS, (lens_view, pruning_view, patching_view), strict=True))
DRAWN_BY[view]()

ui.save_url_state(DEFAULTS)
