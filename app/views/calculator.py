"""Size, memory and compute: exact parameter counts, where the bytes go, what fits a GPU, what it costs.

No torch: everything comes from ``services.calculator`` (configs, not weights).
"""

from typing import Any

import pandas as pd
import streamlit as st

from analysis import calculator as charts
from app import ui
from core import registry
from core.errors import ExplorerError
from services import calculator as calc
from services import sparse_attention as sparse
from services.calculator_form import FORM_FIELDS, config_from_form, form_fields, form_from_config
from services.requests import MAX_MODEL_ID_CHARS

PRESETS = {c.id: c for c in registry.loadable()}
#: session key -> form field (the form itself, per architecture, lives in services.calculator_form)
FIELDS = {f"sz_{name}": name for name in FORM_FIELDS}
#: The setup's numbers: session key -> the use case's field, whose bounds (calc.BOUNDS) bound the widget and the link.
NUMBERS = {"sz_batch": "batch_size", "sz_seq": "seq_len", "sz_dp": "data_parallel", "sz_tp": "tensor_parallel",
           "sz_custom_gib": "custom_gib", "sz_reserve": "reserve", "sz_tokens_b": "tokens", "sz_ngpus": "gpus",
           "sz_util": "utilisation", "sz_price": "price"}
SEQ_CHOICES = [64, 128, 256, 320, 384, 512, 1024, 2048]
DEFAULTS_STATE = {
    "sz_preset": "bert-base-uncased", "sz_preset_other": "", "sz_head": "pretraining", "sz_type": "bert", "sz_tied": True,
    "sz_layers": 12, "sz_hidden": 768, "sz_heads": 12, "sz_ffn": 3072, "sz_vocab": 30522, "sz_pos": 512, "sz_types": 2,
    "sz_emb": 768, "sz_groups": 1, "sz_inner": 1,
    "sz_precision": "mixed", "sz_opt": "adamw", "sz_batch": 8, "sz_seq": 128, "sz_zero": 0, "sz_dp": 1, "sz_tp": 1,
    "sz_sp": False, "sz_recompute": "none", "sz_flash": False, "sz_gpu": "V100 16 GB",
    "sz_gpus": ["T4 16 GB", "V100 16 GB", "A100 80 GB", "H100 80 GB"], "sz_custom_gib": 12.0, "sz_seqs": [64, 128, 256, 512],
    "sz_reserve": 1.0, "sz_tokens_b": 131.0, "sz_train_gpu": "V100 32 GB", "sz_ngpus": 8, "sz_util": 0.4, "sz_price": 2.5,
    "sz_sparse_n": 16, "sz_sparse_len": 2048,
}
ALLOWED = {
    "sz_preset": [*PRESETS, ui.OTHER, "custom"], "sz_preset_other": ui.valid_model_id,
    "sz_type": list(calc.ARCHITECTURES), "sz_head": list(calc.HEADS), "sz_precision": list(calc.PRECISIONS),
    "sz_opt": list(calc.OPTIMIZERS), "sz_zero": [0, 1, 2, 3], "sz_recompute": ["none", "selective", "full"],
    "sz_gpu": list(calc.GPUS), "sz_train_gpu": list(calc.GPUS), "sz_gpus": list(calc.GPUS), "sz_seqs": SEQ_CHOICES,
    **{key: calc.BOUNDS[name] for key, name in NUMBERS.items()}, **{k: (FORM_FIELDS[f][1], calc.LIMITS[FORM_FIELDS[f][2]]) for k, f in FIELDS.items()},
    "sz_sparse_n": list(sparse.TOKEN_LENGTHS), "sz_sparse_len": list(sparse.BLOCK_LENGTHS),
}



def fill_from_config(config: dict) -> None:
    """Copy a checkpoint's config into the form fields."""
    mt = config["model_type"]
    st.session_state["sz_type"] = mt
    for key, value in form_from_config(config).items():
        st.session_state[f"sz_{key}"] = value
    st.session_state["sz_tied"] = bool(config.get("tie_word_embeddings", True))
    if st.session_state["sz_head"] not in calc.ARCH_HEADS[mt]:
        st.session_state["sz_head"] = "pretraining" if "pretraining" in calc.ARCH_HEADS[mt] else "base"


def fill_from_preset() -> None:
    """Copy the chosen catalog model's real config into the fields."""
    card = PRESETS.get(st.session_state["sz_preset"])
    if card is not None:
        fill_from_config(card.config)


def fill_from_other() -> None:
    """Another checkpoint's config (a Hub id or a folder here), read alone: the calculator needs no weights and no budget."""
    mid = (st.session_state.get("sz_preset_other") or "").strip()
    st.session_state["sz_other_done"] = mid
    st.session_state.pop("sz_other_error", None)
    if not mid:
        return
    try:
        fill_from_config(calc.config_of(mid))
    except ExplorerError as err:
        st.session_state["sz_other_error"] = err


def current_config() -> dict:
    return config_from_form(state["sz_type"], {f: state[k] for k, f in FIELDS.items()}, state["sz_tied"])


def current_setup() -> calc.TrainingSetup:
    """The training setup the memory and GPU-fit tabs share (their widgets live in the memory tab)."""
    state = st.session_state
    return calc.setup(state["sz_precision"], state["sz_opt"], state["sz_zero"], state["sz_dp"], state["sz_tp"], state["sz_sp"],
                      state["sz_recompute"], state["sz_flash"])


ignored = ui.restore_url_state(DEFAULTS_STATE, ALLOWED)
state = st.session_state
if "sz_filled" not in st.session_state:
    # A shared link that names a preset but no fields gets the preset's config; a link with fields keeps them.
    st.session_state["sz_filled"] = True
    if not any(k in st.query_params for k in FIELDS) and st.session_state["sz_preset"] not in ("custom", ui.OTHER):
        fill_from_preset()
    if st.session_state["sz_preset"] == ui.OTHER and not any(k in st.query_params for k in FIELDS):
        fill_from_other()

st.title("Size, memory & compute")
st.markdown("#### How many parameters, where the bytes go, what fits on a GPU, and what training costs")
ui.warn_ignored(ignored, "sz_")

# ------------------------------------------------------------------------------------ the model
c1, c2 = st.columns([2, 2])
c1.selectbox("Preset (real configs of the catalog checkpoints)", [*PRESETS, ui.OTHER, "custom"], key="sz_preset",
             on_change=fill_from_preset,
             format_func=lambda m: "custom configuration" if m == "custom" else ui.model_label(m) if m == ui.OTHER
             else f"{m} ({PRESETS[m].parameters_reported})")
if st.session_state["sz_preset"] == ui.OTHER:
    c1.text_input("Model id", key="sz_preset_other", max_chars=MAX_MODEL_ID_CHARS, on_change=fill_from_other,
                  placeholder="owner/name (Hub) or a folder under BFE_MODEL_DIR",
                  help="Its config.json alone is read (no weights, no size limit): the form below takes its numbers.")
    if err := st.session_state.get("sz_other_error"):
        with c1:
            ui.show_error(err)
    elif st.session_state.get("sz_other_done"):
        c1.caption(f"The numbers below are {st.session_state['sz_other_done']}'s config.json.")
mt = st.session_state["sz_type"]
heads = calc.ARCH_HEADS[mt]
if st.session_state["sz_head"] not in heads:
    st.session_state["sz_head"] = "base"
c2.selectbox("With which head", heads, key="sz_head", format_func=lambda h: f"{h}: {calc.HEADS[h]}")

with st.expander("Architecture (edit any number; presets fill these in)", expanded=st.session_state["sz_preset"] == "custom"):
    cols = st.columns(4)
    cols[0].selectbox("Architecture", list(calc.ARCHITECTURES), key="sz_type")
    for i, field in enumerate(form_fields(mt), start=1):
        label, lo, limit, _keys, hint = FORM_FIELDS[field]
        cols[i % 4].number_input(label, min_value=lo, max_value=calc.LIMITS[limit], step=1, key=f"sz_{field}", help=hint)
    st.toggle("LM head tied to the word embeddings", key="sz_tied", help="tie_word_embeddings: the decoder reuses V×E")

config = current_config()
try:
    bd = calc.breakdown(config, st.session_state["sz_head"])
except ExplorerError as err:
    ui.show_error(err)
    ui.save_url_state(DEFAULTS_STATE)
    st.stop()

card = PRESETS.get(st.session_state["sz_preset"])
edited = card is not None and calc.reshaped(config, card.config)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Parameters", f"{bd.total:,}", help="Equal to sum(p.numel()) of the transformers model from this config.")
m2.metric("Non-embedding N", f"{bd.non_embedding:,}", help="Kaplan et al. 2020's N: without the word/position/type embedding tables.")
m3.metric("Embeddings", f"{bd.embedding / bd.total:.1%}", help=f"{bd.embedding:,} parameters")
m4.metric("fp32 weights", charts.human_bytes(bd.total * 4))
if card is not None:
    st.caption(f"{card.id}: the paper reports {card.parameters_reported} ({card.paper}, arXiv {card.arxiv})."
               + (" **Edited:** the numbers above are for your changes, not the checkpoint." if edited else ""))

tab_p, tab_m, tab_g, tab_c = ui.url_tabs(["Parameters", "Training memory", "Fits on a GPU?", "Compute & cost"], key="sz_tab")
name = st.session_state["sz_preset"] if not edited else "your model"
state = st.session_state

# ------------------------------------------------------------------------------------ parameters
def parameters_tab() -> None:
    """The Parameters tab: where the parameters sit, and what ALBERT saves."""
    left, right = st.columns([3, 2])
    ui.chart(charts.params_treemap(bd, name), "sz_treemap", where=left, main=True, title=f"Where the parameters of {name} sit",
             caption=f"{bd.total:,} parameters, counted exactly from the configuration.",
             sources=("Exact count from the model's configuration (BERT Family Explorer, analysis.params)",))
    parts = charts.parts_frame(bd)
    right.dataframe(parts, hide_index=True, width="stretch",
                    column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                   "share": st.column_config.NumberColumn(format="percent")})
    with right:
        ui.download_buttons(parts, "parameters", "sz_parts")
    if mt == "albert":
        saving = calc.albert_saving(config)
        st.subheader("ALBERT: factorised embeddings and cross-layer sharing")
        a1, a2, a3, a4 = st.columns(4)
        a1.metric("Same shape, BERT-style", charts.human_count(saving["bert_like"]), help="E = H, no sharing")
        a2.metric("Factorised only", charts.human_count(saving["factorized"]), delta=f"{saving['factorized'] - saving['bert_like']:,}", delta_color="inverse")
        a3.metric("Shared only", charts.human_count(saving["shared"]), delta=f"{saving['shared'] - saving['bert_like']:,}", delta_color="inverse")
        a4.metric("ALBERT (both)", charts.human_count(saving["albert"]), delta=f"{saving['albert'] / saving['bert_like']:.1%} of BERT-style",
                  delta_color="off")
        st.caption("V×H becomes V×E + E×H (ALBERT paper §3.1); layers share one set of weights per group (§3.1). "
                   "Change E, hidden groups and layers per group in Architecture above. ALBERT paper Table 1: "
                   "BERT-large 334M vs ALBERT-large 18M.")
    else:
        st.caption("Pick an ALBERT preset to see what factorised embeddings and layer sharing save.")

# ------------------------------------------------------------------------------------ training memory
def memory_inputs() -> None:
    """The Training memory tab's slides example and its settings (precision, optimizer, batch, parallelism, GPU)."""
    slides_gib = calc.fact("memory_per_billion_params")
    st.info("**The slides' example** (Going bigger — the challenge): 10⁹ parameters × (2 B weights + 2 B gradients "
            f"+ 12 B Adam states) = 16 × 10⁹ B = **{calc.slides_example_gib():.2f} GiB** by this calculator, "
            f"{slides_gib.value:.2f} in the slides, before any activation. (The slides write GB; it is GiB, 2³⁰ bytes.) "
            f"Source: {slides_gib.source}.", icon=":material/school:")
    c = st.columns(4)
    c[0].selectbox("Precision", list(calc.PRECISIONS), key="sz_precision", format_func=calc.PRECISIONS.get)
    c[1].selectbox("Optimizer", list(calc.OPTIMIZERS), key="sz_opt", format_func=lambda o: calc.OPTIMIZERS[o].label)
    ui.bounded_number(c[2], "Batch per GPU (sequences)", "sz_batch", ALLOWED["sz_batch"])
    ui.bounded_number(c[3], "Sequence length (tokens)", "sz_seq", ALLOWED["sz_seq"])
    c = st.columns(4)
    c[0].selectbox("ZeRO stage", [0, 1, 2, 3], key="sz_zero", format_func=lambda z: ["0 (off)", "1: optimizer states",
                                                                                     "2: + gradients", "3: + weights"][z])
    ui.bounded_number(c[1], "Data-parallel GPUs N_d", "sz_dp", ALLOWED["sz_dp"])
    ui.bounded_number(c[2], "Tensor-parallel degree t", "sz_tp", ALLOWED["sz_tp"])
    c[3].selectbox("Recomputation", ["none", "selective", "full"], key="sz_recompute")
    c = st.columns(4)
    c[0].toggle("Sequence parallelism", key="sz_sp", disabled=st.session_state["sz_tp"] == 1)
    c[1].toggle("FlashAttention", key="sz_flash")
    c[2].selectbox("GPU (capacity line)", list(calc.GPUS), key="sz_gpu")


def memory_tab() -> None:
    """The Training memory tab: memory per GPU for the settings, ZeRO stages, the class's question."""
    memory_inputs()
    try:
        setup = current_setup()
        plan = calc.memory_plan(bd, state["sz_batch"], state["sz_seq"], setup, state["sz_gpu"])
    except ExplorerError as err:
        ui.show_error(err)
    else:
        gpu, zero_nd = plan.gpu, plan.zero_gpus
        setting = (f"{name}, {calc.OPTIMIZERS[state['sz_opt']].label}, {calc.PRECISIONS[state['sz_precision']]}, batch "
                   f"{state['sz_batch']} × {state['sz_seq']} tokens" + (f", ZeRO {state['sz_zero']} on {zero_nd} GPUs" if state["sz_zero"] else ""))
        asked = ui.ask_the_class("choice", ui.question_context("fit", setting, sorted(config.items()), setup, gpu.name),
                                 f"{setting}: does it fit a {gpu.name}?", ("fits", "does not fit"), key="sz_fit_q")
        if asked.revealed:
            ui.reveal_chart(asked.revealed, {"fits": float(plan.fits), "does not fit": float(not plan.fits)}, key="sz_fit_q",
                            model_label="the calculator", value_label="answer",
                            sources=("Rajbhandari et al. 2020 (ZeRO); Korthikanti et al. 2022 (activations)",))
        if not asked.hide:  # the class is answering: the verdict, charts and table wait for the reveal
            memory_answer(plan, setup)


def memory_answer(plan: Any, setup: calc.TrainingSetup) -> None:
    """What the calculator answers for the settings: the verdict, the ZeRO stages and the curve, then the table."""
    est, gpu, zero_nd = plan.estimate, plan.gpu, plan.zero_gpus
    verdict = "fits" if plan.fits else "does **not** fit"
    st.markdown(f"**{charts.human_bytes(est.total)} per GPU** for batch {state['sz_batch']} × {state['sz_seq']} tokens: "
                f"it {verdict} a {gpu.name} (keeping 1 GiB for the CUDA context and fragmentation).")
    left, right = st.columns(2)
    ui.chart(charts.memory_bars(plan.stages, f"ZeRO stages side by side, N_d = {zero_nd} GPUs", plan.capacity_gib), "sz_zero_chart",
             where=left, title=f"Training memory per GPU, ZeRO stages, {zero_nd} GPUs",
             caption=f"Batch {state['sz_batch']} × {state['sz_seq']} tokens.",
             sources=("Rajbhandari et al. 2020 (ZeRO); Korthikanti et al. 2022 (activations)",))
    z = {k: calc.fact(f"zero_{k}") for k in ("max_params", "bigger", "faster", "cheaper")}
    left.caption(f"What ZeRO promised at its release: models of {z['max_params'].value / 1e9:.0f}B parameters, "
                 f"{z['bigger'].value:.0f}× bigger, up to {z['faster'].value:.0f}× faster and up to "
                 f"{z['cheaper'].value:.0f}× cheaper training ({z['max_params'].source}).")
    seqs = plan.curve_sequences
    ui.chart(charts.memory_curve(bd, setup, seqs, 256, plan.capacity_gib), "sz_curve", where=right,
             title="Training memory against batch size",
             caption=f"Sequence lengths {', '.join(map(str, seqs))}; {gpu.name} capacity line.",
             sources=("Korthikanti et al. 2022 (activations); the calculator's own count",))
    right.caption("Memory against batch size for three sequence lengths, with the settings above.")
    memory_table(est)


def memory_table(est: Any) -> None:
    """Each part of the memory per GPU (exact or estimated), its notes and sources."""
    table = pd.DataFrame(est.rows())
    table["how"] = ["exact" if e else "estimate" for e in table.pop("exact")]
    st.dataframe(table, hide_index=True, width="stretch",
                 column_config={"bytes": st.column_config.NumberColumn(format="localized"),
                                "GiB": st.column_config.NumberColumn(format="%.3f")})
    ui.download_buttons(table, "training-memory", "sz_mem")
    for note in est.notes:
        st.caption(note)
    with st.expander("Where each number comes from"):
        for key in ("zero", "korthikanti", "flash", "megatron", "adam8bit", "adafactor", "lion", "torch"):
            st.markdown(f"- {calc.SOURCES[key]}")
        st.markdown("- Activations are an estimate: frameworks also keep workspace and allocator slack. "
                    "Model states are exact for the tensors of this config (checked against a real AdamW step).")


# ------------------------------------------------------------------------------------ GPU fit
def fit_tab() -> None:
    """The Fits on a GPU? tab: the largest batch per GPU and sequence length, and the slides' tables."""
    c = st.columns([3, 2, 1, 1])
    c[0].multiselect("GPUs", list(calc.GPUS), key="sz_gpus")
    c[1].multiselect("Sequence lengths", SEQ_CHOICES, key="sz_seqs")
    ui.bounded_number(c[2], "Custom GPU (GiB)", "sz_custom_gib", ALLOWED["sz_custom_gib"], help="The slides' table is for a 12 GB card.")
    ui.bounded_number(c[3], "Reserve (GiB)", "sz_reserve", ALLOWED["sz_reserve"], help="CUDA context, workspace, fragmentation")
    try:
        setup = current_setup()
        fit = calc.gpu_fit(bd, state["sz_seqs"], setup, state["sz_gpus"], state["sz_custom_gib"], state["sz_reserve"])
    except ExplorerError as err:
        ui.show_error(err)
    else:
        if fit is None:
            st.info("Pick at least one sequence length the model can take (at most its positions).")
        else:
            st.markdown(f"**Largest per-GPU training batch** ({calc.PRECISIONS[setup.precision]}, "
                        f"{calc.OPTIMIZERS[setup.optimizer].label}, settings of the Training memory tab). 0 = not even one sequence.")
            st.dataframe(fit, width="stretch")
            ui.download_buttons(fit, "max-batch", "sz_fit")
    st.subheader("The slides' tables, and ours under the same assumptions")
    rows = calc.readme_batches()
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption("Slides 002 ('FP32 TF 1.11.0 12GB GPU' from the BERT GitHub README; 'FP32 TF 1.13.1 16GB GPU' from XLNet's). "
               "Ours is 2–4× higher for BERT: TensorFlow 1.11 "
               "kept unfused fp32 intermediates (GELU pieces, attention scores before and after softmax, fp32 dropout masks) "
               "that the Korthikanti count of a fused 16-bit implementation, doubled for fp32, does not include. "
               "Treat our figure as what a modern fused implementation can reach.")

# ------------------------------------------------------------------------------------ compute & cost
def cost_tab() -> None:
    """The Compute & cost tab: FLOPs, time and cost of a run, and what BERT cost."""
    c = st.columns(5)
    ui.bounded_number(c[0], "Training tokens D (billions)", "sz_tokens_b", ALLOWED["sz_tokens_b"], format="%.3f")
    c[1].selectbox("GPU", list(calc.GPUS), key="sz_train_gpu")
    ui.bounded_number(c[2], "GPUs", "sz_ngpus", ALLOWED["sz_ngpus"])
    ui.bounded_number(c[3], "Utilisation (MFU)", "sz_util", ALLOWED["sz_util"], step=0.05, help="Fraction of peak; 0.3–0.5 is typical")
    ui.bounded_number(c[4], "$ per GPU-hour", "sz_price", ALLOWED["sz_price"], step=0.25)
    try:
        run = calc.cost(bd, state["sz_tokens_b"], state["sz_train_gpu"], state["sz_ngpus"], state["sz_util"], state["sz_price"],
                        state["sz_precision"], state["sz_seq"])
    except ExplorerError as err:
        ui.show_error(err)
    else:
        k = st.columns(4)
        k[0].metric("Training FLOPs (6·N·D)", f"{run.flops:.3g}")
        k[1].metric("PF-days", f"{run.pf_days:,.2f}")
        k[2].metric("Time", charts.human_seconds(run.seconds))
        k[3].metric("Cost", f"${run.dollars:,.0f}")
        train_gpu = calc.GPUS[state["sz_train_gpu"]]
        st.caption(f"Per token, forward: 2·N + 2·n_layer·n_ctx·d_attn = {run.forward_per_token:,.0f} FLOPs (N non-embedding = "
                   f"{bd.non_embedding:,}); {calc.SOURCES['kaplan']} Peak of a {state['sz_train_gpu']}: "
                   f"{train_gpu.peak_16bit / 1e12:g} TFLOP/s 16-bit, {train_gpu.peak_fp32 / 1e12:g} fp32 ({calc.SOURCES['gpus']}).")
    reference_costs()
    sparse_attention_section()


def reference_costs() -> None:
    """What BERT cost (worked example), and the published costs and times of one pre-training run."""
    st.subheader("Worked example: what BERT cost")
    rows = calc.bert_cost_rows(state["sz_train_gpu"], state["sz_ngpus"], state["sz_util"], state["sz_price"], state["sz_precision"])
    ex_df = pd.DataFrame(rows)
    st.dataframe(ex_df, hide_index=True, width="stretch")
    ui.download_buttons(ex_df, "bert-cost", "sz_cost")
    st.caption(calc.SOURCES["bert_cost"] + " Tokens: 1M steps × 256 sequences × 512 tokens (an upper bound: 90% of "
               "BERT's steps used 128 tokens). The slides give no derivation; the implied hourly prices are ours.")
    st.subheader("What one pre-training run cost, and how fast it can go")
    c = st.columns(2)
    run_costs, run_times = calc.reference_tables()
    costs = pd.DataFrame(run_costs)
    c[0].dataframe(costs, hide_index=True, width="stretch")
    c[0].caption("One run each; 'developing new pre-training techniques may require many runs' (slides 001).")
    times = pd.DataFrame(run_times).rename(
        columns={"minutes": "BERT-large in (minutes)", "v100_gpus": "V100 GPUs"})
    c[1].dataframe(times, hide_index=True, width="stretch")
    eff, gpus = calc.fact("megatron_scaling_efficiency"), calc.fact("megatron_scaling_gpus")
    c[1].caption(f"From 256 to 1,472 GPUs (5.75×) the time falls 5.0× (236 → 47 min). Megatron-LM reports "
                 f"{eff.value:.0%} scaling efficiency at {gpus.value:,.0f} GPUs ({eff.source}).")


def sparse_attention_section() -> None:
    """BigBird's building blocks at a chosen length, and full against sparse attention's cost up to 16k tokens."""
    st.subheader("Long sequences: BigBird's sparse attention")
    c = st.columns(2)
    c[0].select_slider("Tokens in Figure 1", sparse.TOKEN_LENGTHS, key="sz_sparse_n")
    c[1].select_slider("Sequence length of the block layout", sparse.BLOCK_LENGTHS, key="sz_sparse_len",
                       format_func=lambda n: f"{n:,}")
    view = sparse.explain(st.session_state["sz_sparse_n"], st.session_state["sz_sparse_len"])
    ui.chart(view.tokens, "sz_sparse_tokens", title=f"BigBird's building blocks at {view.length} tokens",
             caption="Each query (row) attends 2 random keys, the 3 keys around it, and the 2 global tokens; the 2 "
                     "global tokens attend every key.", sources=(sparse.SOURCE,), show_caption=True)
    ui.chart(view.blocks, "sz_sparse_blocks", title=f"BigBird's block layout at {view.block_length:,} tokens",
             caption="What transformers' block-sparse attention computes, one cell a block of 64 × 64 pairs (each "
                     "panel's title: the share of pairs). Its random plan draws the random blocks from the first "
                     "5 + 2·3 = 11 blocks (at 1,024, 3,072 and 4,096 tokens, the paper's plan: the first 1,024 tokens).",
             sources=(sparse.SOURCE,), show_caption=True)
    costs = pd.DataFrame(view.costs)
    st.dataframe(costs, hide_index=True, width="stretch",
                 column_config={"sparse / full": st.column_config.NumberColumn(format="percent")})
    ui.download_buttons(costs, "sparse-attention-cost", "sz_sparse_cost")
    st.caption("Per layer and head, head size 64, fp32 scores; FLOPs of QKᵀ and AV, 2 per multiply-add. Full attention "
               "grows with n², the sparse pattern with n (about 8 blocks of 64 keys per query). " + sparse.SOURCE)


for tab, draw in ((tab_p, parameters_tab), (tab_m, memory_tab), (tab_g, fit_tab), (tab_c, cost_tab)):
    if tab.open:  # only the open tab is drawn: its name is in the address (ui.url_tabs), a tab change reruns the page
        with tab:
            draw()

ui.save_url_state(DEFAULTS_STATE)
