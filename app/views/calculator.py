"""Size, memory and compute: exact parameter counts, where the bytes go, what fits a GPU, what it costs.

No torch: everything comes from analysis.params / analysis.memory (configs, not weights).
"""

import pandas as pd
import streamlit as st

from analysis import calculator as calc
from analysis import memory
from analysis.memory import GiB, TrainingSetup
from analysis.params import ARCH_HEADS, DEFAULTS, HEADS, LIMITS, albert_saving, arch_of, parameter_breakdown
from app import ui
from models import registry
from models.errors import ExplorerError

PRESETS = {c.id: c for c in registry.loadable()}
FIELDS = {  # session key -> (label, min, max, help); the maxima are analysis.params.LIMITS, the calculator's sanity bounds
    "sz_layers": ("Layers L", 1, LIMITS["layers"], "num_hidden_layers / n_layers / n_layer"),
    "sz_hidden": ("Hidden size H", 1, LIMITS["hidden size"], "hidden_size / dim / d_model / n_embd"),
    "sz_heads": ("Attention heads A", 1, LIMITS["attention heads"], "must divide H"),
    "sz_ffn": ("Feed-forward size", 1, LIMITS["feed-forward size"], "intermediate_size (usually 4·H)"),
    "sz_vocab": ("Vocabulary V", 1, LIMITS["vocabulary size"], "WordPiece 30,522 · BPE 50,257/50,265 · SentencePiece 30,000/32,000"),
    "sz_pos": ("Positions", 1, LIMITS["positions"], "max_position_embeddings; XLNet has none (relative positions)"),
    "sz_types": ("Token types", 0, LIMITS["token types"], "segment embeddings (BERT 2, RoBERTa 1)"),
    "sz_emb": ("Embedding size E", 1, LIMITS["embedding size"], "ALBERT and ELECTRA factorise V×H into V×E + E×H"),
    "sz_groups": ("Hidden groups", 1, LIMITS["hidden groups"], "ALBERT: layers share parameters within a group (1 = all shared)"),
    "sz_inner": ("Layers per group", 1, LIMITS["layers per group"], "ALBERT inner_group_num"),
}
CONFIG_KEYS = {
    "sz_layers": ("num_hidden_layers", "n_layers", "n_layer"), "sz_hidden": ("hidden_size", "dim", "d_model", "n_embd"),
    "sz_heads": ("num_attention_heads", "n_heads", "n_head"), "sz_ffn": ("intermediate_size", "hidden_dim", "d_inner", "n_inner"),
    "sz_vocab": ("vocab_size",), "sz_pos": ("max_position_embeddings", "n_positions"), "sz_types": ("type_vocab_size",),
    "sz_emb": ("embedding_size",), "sz_groups": ("num_hidden_groups",), "sz_inner": ("inner_group_num",),
}
SEQ_CHOICES = [64, 128, 256, 320, 384, 512, 1024, 2048]
DEFAULTS_STATE = {
    "sz_preset": "bert-base-uncased", "sz_head": "pretraining", "sz_type": "bert", "sz_tied": True,
    "sz_layers": 12, "sz_hidden": 768, "sz_heads": 12, "sz_ffn": 3072, "sz_vocab": 30522, "sz_pos": 512, "sz_types": 2,
    "sz_emb": 768, "sz_groups": 1, "sz_inner": 1,
    "sz_precision": "mixed", "sz_opt": "adamw", "sz_batch": 8, "sz_seq": 128, "sz_zero": 0, "sz_dp": 1, "sz_tp": 1,
    "sz_sp": False, "sz_recompute": "none", "sz_flash": False, "sz_gpu": "V100 16 GB",
    "sz_gpus": ["T4 16 GB", "V100 16 GB", "A100 80 GB", "H100 80 GB"], "sz_custom_gib": 12.0, "sz_seqs": [64, 128, 256, 512],
    "sz_reserve": 1.0, "sz_tokens_b": 131.0, "sz_train_gpu": "V100 32 GB", "sz_ngpus": 8, "sz_util": 0.4, "sz_price": 2.5,
}
ALLOWED = {
    "sz_preset": [*PRESETS, "custom"], "sz_type": list(DEFAULTS), "sz_head": list(HEADS), "sz_precision": list(memory.PRECISIONS),
    "sz_opt": list(memory.OPTIMIZERS), "sz_zero": [0, 1, 2, 3], "sz_recompute": ["none", "selective", "full"],
    "sz_gpu": list(memory.GPUS), "sz_train_gpu": list(memory.GPUS), "sz_gpus": list(memory.GPUS), "sz_seqs": SEQ_CHOICES,
    "sz_batch": (1, 100_000), "sz_seq": (1, 1_000_000), "sz_dp": (1, 100_000), "sz_tp": (1, 1024),
    "sz_custom_gib": (0.5, 10_000.0), "sz_reserve": (0.0, 64.0), "sz_tokens_b": (0.001, 1e6), "sz_ngpus": (1, 100_000),
    "sz_util": (0.01, 1.0), "sz_price": (0.0, 1000.0), **{k: (lo, hi) for k, (_, lo, hi, _) in FIELDS.items()},
}


def fill_from_preset() -> None:
    """Copy the chosen catalog model's real config into the fields."""
    card = PRESETS.get(st.session_state["sz_preset"])
    if card is None:
        return
    cfg, mt = card.config, card.config["model_type"]
    st.session_state["sz_type"] = mt
    merged = {**DEFAULTS[mt], **cfg}
    for key, names in CONFIG_KEYS.items():
        value = next((merged[n] for n in names if merged.get(n) is not None), None)
        if key == "sz_ffn" and value is None:
            value = 4 * st.session_state["sz_hidden"]
        if key == "sz_emb" and value is None:
            value = next(merged[n] for n in CONFIG_KEYS["sz_hidden"] if merged.get(n) is not None)
        if value is not None:
            st.session_state[key] = int(value)
    if mt == "xlnet":
        st.session_state["sz_pos"] = 512
    st.session_state["sz_tied"] = True
    if st.session_state["sz_head"] not in ARCH_HEADS[mt]:
        st.session_state["sz_head"] = "pretraining" if "pretraining" in ARCH_HEADS[mt] else "base"


def current_config() -> dict:
    s = st.session_state
    mt = s["sz_type"]
    cfg = {"model_type": mt, "vocab_size": s["sz_vocab"], "tie_word_embeddings": s["sz_tied"]}
    names = {"distilbert": ("dim", "n_layers", "n_heads", "hidden_dim"), "xlnet": ("d_model", "n_layer", "n_head", "d_inner"),
             "gpt2": ("n_embd", "n_layer", "n_head", "n_inner")}.get(
        mt, ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size"))
    cfg.update(zip(names, (s["sz_hidden"], s["sz_layers"], s["sz_heads"], s["sz_ffn"]), strict=True))
    if mt == "gpt2":
        cfg["n_positions"] = s["sz_pos"]
    elif mt != "xlnet":
        cfg["max_position_embeddings"] = s["sz_pos"]
    if mt in ("bert", "roberta", "albert", "electra"):
        cfg["type_vocab_size"] = s["sz_types"]
    if mt in ("albert", "electra"):
        cfg["embedding_size"] = s["sz_emb"]
    if mt == "albert":
        cfg.update(num_hidden_groups=s["sz_groups"], inner_group_num=s["sz_inner"])
    return cfg


def current_setup() -> TrainingSetup:
    """The training setup the memory and GPU-fit tabs share (their widgets live in the memory tab)."""
    s = st.session_state
    return TrainingSetup(s["sz_precision"], s["sz_opt"], s["sz_zero"], s["sz_dp"], s["sz_tp"],
                         s["sz_sp"] and s["sz_tp"] > 1, s["sz_recompute"], s["sz_flash"]).validate()


ignored = ui.restore_url_state(DEFAULTS_STATE, ALLOWED)
if "sz_filled" not in st.session_state:
    # A shared link that names a preset but no fields gets the preset's config; a link with fields keeps them.
    st.session_state["sz_filled"] = True
    if not any(k in st.query_params for k in FIELDS) and st.session_state["sz_preset"] != "custom":
        fill_from_preset()

st.title("Size, memory & compute")
st.markdown("#### How many parameters, where the bytes go, what fits on a GPU, and what training costs")
ui.warn_ignored(ignored, "sz_")

# ------------------------------------------------------------------------------------ the model
c1, c2 = st.columns([2, 2])
c1.selectbox("Preset (real configs of the catalog checkpoints)", [*PRESETS, "custom"], key="sz_preset", on_change=fill_from_preset,
             format_func=lambda m: "custom configuration" if m == "custom" else f"{m} ({PRESETS[m].parameters_reported})")
mt = st.session_state["sz_type"]
heads = ARCH_HEADS[mt]
if st.session_state["sz_head"] not in heads:
    st.session_state["sz_head"] = "base"
c2.selectbox("With which head", heads, key="sz_head", format_func=lambda h: f"{h}: {HEADS[h]}")

with st.expander("Architecture (edit any number; presets fill these in)", expanded=st.session_state["sz_preset"] == "custom"):
    cols = st.columns(4)
    cols[0].selectbox("Architecture", list(DEFAULTS), key="sz_type")
    shown = [k for k in FIELDS if not (
        (k == "sz_emb" and mt not in ("albert", "electra")) or (k in ("sz_groups", "sz_inner") and mt != "albert")
        or (k == "sz_types" and mt not in ("bert", "roberta", "albert", "electra")) or (k == "sz_pos" and mt == "xlnet"))]
    for i, key in enumerate(shown, start=1):
        label, lo, hi, hint = FIELDS[key]
        cols[i % 4].number_input(label, min_value=lo, max_value=hi, step=1, key=key, help=hint)
    st.toggle("LM head tied to the word embeddings", key="sz_tied", help="tie_word_embeddings: the decoder reuses V×E")

config = current_config()
try:
    bd = parameter_breakdown(config, st.session_state["sz_head"])
except ExplorerError as err:
    ui.show_error(err)
    ui.save_url_state(DEFAULTS_STATE)
    st.stop()

card = PRESETS.get(st.session_state["sz_preset"])
edited = card is not None and arch_of(config) != arch_of(card.config)
m1, m2, m3, m4 = st.columns(4)
m1.metric("Parameters", f"{bd.total:,}", help="Equal to sum(p.numel()) of the transformers model from this config.")
m2.metric("Non-embedding N", f"{bd.non_embedding:,}", help="Kaplan et al. 2020's N: without the word/position/type embedding tables.")
m3.metric("Embeddings", f"{bd.embedding / bd.total:.1%}", help=f"{bd.embedding:,} parameters")
m4.metric("fp32 weights", calc.human_bytes(bd.total * 4))
if card is not None:
    st.caption(f"{card.id}: the paper reports {card.parameters_reported} ({card.paper}, arXiv {card.arxiv})."
               + (" **Edited:** the numbers above are for your changes, not the checkpoint." if edited else ""))

tab_p, tab_m, tab_g, tab_c = st.tabs(["Parameters", "Training memory", "Fits on a GPU?", "Compute & cost"])

# ------------------------------------------------------------------------------------ parameters
with tab_p:
    left, right = st.columns([3, 2])
    name = st.session_state["sz_preset"] if not edited else "your model"
    ui.chart(calc.params_treemap(bd, name), "sz_treemap", where=left, title=f"Where the parameters of {name} sit",
             caption=f"{bd.total:,} parameters, counted exactly from the configuration.",
             sources=("Exact count from the model's configuration (BERT Family Explorer, analysis.params)",))
    parts = calc.parts_frame(bd)
    right.dataframe(parts, hide_index=True, width="stretch",
                    column_config={"parameters": st.column_config.NumberColumn(format="localized"),
                                   "share": st.column_config.NumberColumn(format="percent")})
    with right:
        ui.download_buttons(parts, "parameters", "sz_parts")
    if mt == "albert":
        s = albert_saving(config)
        st.subheader("ALBERT: factorised embeddings and cross-layer sharing")
        a1, a2, a3, a4 = st.columns(4)
        a1.metric("Same shape, BERT-style", calc.human_count(s["bert_like"]), help="E = H, no sharing")
        a2.metric("Factorised only", calc.human_count(s["factorized"]), delta=f"{s['factorized'] - s['bert_like']:,}", delta_color="inverse")
        a3.metric("Shared only", calc.human_count(s["shared"]), delta=f"{s['shared'] - s['bert_like']:,}", delta_color="inverse")
        a4.metric("ALBERT (both)", calc.human_count(s["albert"]), delta=f"{s['albert'] / s['bert_like']:.1%} of BERT-style",
                  delta_color="off")
        st.caption("V×H becomes V×E + E×H (ALBERT paper §3.1); layers share one set of weights per group (§3.1). "
                   "Change E, hidden groups and layers per group in Architecture above. ALBERT paper Table 1: "
                   "BERT-large 334M vs ALBERT-large 18M.")
    else:
        st.caption("Pick an ALBERT preset to see what factorised embeddings and layer sharing save.")

# ------------------------------------------------------------------------------------ training memory
with tab_m:
    st.info("**The slides' example** (Going bigger — the challenge): 10⁹ parameters × (2 B weights + 2 B gradients "
            f"+ 12 B Adam states) = 16 × 10⁹ B = **{memory.training_memory(10**9).total / GiB:.2f} GiB**, "
            "before any activation. (The slides write GB; 14.90 is in GiB, 2³⁰ bytes.)", icon=":material/school:")
    c = st.columns(4)
    c[0].selectbox("Precision", list(memory.PRECISIONS), key="sz_precision", format_func=memory.PRECISIONS.get)
    c[1].selectbox("Optimizer", list(memory.OPTIMIZERS), key="sz_opt", format_func=lambda o: memory.OPTIMIZERS[o].label)
    c[2].number_input("Batch per GPU (sequences)", 1, 100_000, key="sz_batch")
    c[3].number_input("Sequence length (tokens)", 1, 1_000_000, key="sz_seq")
    c = st.columns(4)
    c[0].selectbox("ZeRO stage", [0, 1, 2, 3], key="sz_zero", format_func=lambda z: ["0 (off)", "1: optimizer states",
                                                                                     "2: + gradients", "3: + weights"][z])
    c[1].number_input("Data-parallel GPUs N_d", 1, 100_000, key="sz_dp")
    c[2].number_input("Tensor-parallel degree t", 1, 1024, key="sz_tp")
    c[3].selectbox("Recomputation", ["none", "selective", "full"], key="sz_recompute")
    c = st.columns(4)
    c[0].toggle("Sequence parallelism", key="sz_sp", disabled=st.session_state["sz_tp"] == 1)
    c[1].toggle("FlashAttention", key="sz_flash")
    c[2].selectbox("GPU (capacity line)", list(memory.GPUS), key="sz_gpu")
    s = st.session_state
    try:
        setup = current_setup()
        est = memory.training_memory(bd, s["sz_batch"], s["sz_seq"], setup)
        # ZeRO shards over the data-parallel GPUs: with one GPU every stage is the same, so compare on 8.
        zero_nd = s["sz_dp"] if s["sz_dp"] > 1 else 8
        stages = calc.zero_stages(bd, s["sz_batch"], s["sz_seq"], memory.with_setup(setup, data_parallel=zero_nd))
    except ExplorerError as err:
        ui.show_error(err)
    else:
        gpu = memory.GPUS[s["sz_gpu"]]
        cap = gpu.memory_bytes / GiB
        verdict = "fits" if est.total <= gpu.memory_bytes - GiB else "does **not** fit"
        st.markdown(f"**{calc.human_bytes(est.total)} per GPU** for batch {s['sz_batch']} × {s['sz_seq']} tokens: "
                    f"it {verdict} a {gpu.name} (keeping 1 GiB for the CUDA context and fragmentation).")
        left, right = st.columns(2)
        ui.chart(calc.memory_bars(stages, f"ZeRO stages side by side, N_d = {zero_nd} GPUs", cap), "sz_zero_chart", where=left,
                 title=f"Training memory per GPU, ZeRO stages, {zero_nd} GPUs", caption=f"Batch {s['sz_batch']} × {s['sz_seq']} tokens.",
                 sources=("Rajbhandari et al. 2020 (ZeRO); Korthikanti et al. 2022 (activations)",))
        seqs = [x for x in (128, 256, 512) if not bd.arch.positions or x <= bd.arch.positions] or [min(s["sz_seq"], bd.arch.positions)]
        ui.chart(calc.memory_curve(bd, setup, seqs, 256, cap), "sz_curve", where=right, title="Training memory against batch size",
                 caption=f"Sequence lengths {', '.join(map(str, seqs))}; {gpu.name} capacity line.",
                 sources=("Korthikanti et al. 2022 (activations); the calculator's own count",))
        right.caption("Memory against batch size for three sequence lengths, with the settings above.")
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
                st.markdown(f"- {memory.SOURCES[key]}")
            st.markdown("- Activations are an estimate: frameworks also keep workspace and allocator slack. "
                        "Model states are exact for the tensors of this config (checked against a real AdamW step).")

# ------------------------------------------------------------------------------------ GPU fit
with tab_g:
    c = st.columns([3, 2, 1, 1])
    c[0].multiselect("GPUs", list(memory.GPUS), key="sz_gpus")
    c[1].multiselect("Sequence lengths", SEQ_CHOICES, key="sz_seqs")
    c[2].number_input("Custom GPU (GiB)", 0.5, 10_000.0, key="sz_custom_gib", help="The slides' table is for a 12 GB card.")
    c[3].number_input("Reserve (GiB)", 0.0, 64.0, key="sz_reserve", help="CUDA context, workspace, fragmentation")
    seq_list = sorted(x for x in s["sz_seqs"] if not bd.arch.positions or x <= bd.arch.positions)
    if not seq_list:
        st.info("Pick at least one sequence length the model can take (at most its positions).")
    else:
        try:
            setup = current_setup()
            gpus = [memory.GPUS[g] for g in s["sz_gpus"]] + [memory.custom_gpu(s["sz_custom_gib"])]
            fit = calc.gpu_fit_frame(bd, seq_list, setup, gpus, int(s["sz_reserve"] * GiB))
        except ExplorerError as err:
            ui.show_error(err)
        else:
            st.markdown(f"**Largest per-GPU training batch** ({memory.PRECISIONS[setup.precision]}, "
                        f"{memory.OPTIMIZERS[setup.optimizer].label}, settings of the Training memory tab). 0 = not even one sequence.")
            st.dataframe(fit, width="stretch")
            ui.download_buttons(fit, "max-batch", "sz_fit")
    slides = {"bert-base-uncased": {64: 64, 128: 32, 256: 16, 320: 14, 384: 12, 512: 6},
              "bert-large-uncased": {64: 12, 128: 6, 256: 2, 320: 1, 384: 0, 512: 0}}
    st.subheader("The slides' table, and ours under the same assumptions")
    rows = []
    for mid, table in slides.items():
        mbd = parameter_breakdown(registry.get(mid).config, "pretraining")
        for seq, value in table.items():
            ours = memory.max_batch_size(mbd, memory.custom_gpu(12), seq, TrainingSetup(precision="fp32")).max_batch
            rows.append({"model": mid, "sequence length": seq, "slides (TF 1.11, fp32, 12 GB)": value, "ours (fp32 Adam, 1 GiB reserve)": ours})
    st.dataframe(pd.DataFrame(rows), hide_index=True, width="stretch")
    st.caption("Slides 002 ('FP32 TF 1.11.0 12GB GPU', from the BERT GitHub README). Ours is 2–4× higher: TensorFlow 1.11 "
               "kept unfused fp32 intermediates (GELU pieces, attention scores before and after softmax, fp32 dropout masks) "
               "that the Korthikanti count of a fused 16-bit implementation, doubled for fp32, does not include. "
               "Treat our figure as what a modern fused implementation can reach.")

# ------------------------------------------------------------------------------------ compute & cost
with tab_c:
    c = st.columns(5)
    c[0].number_input("Training tokens D (billions)", 0.001, 1e6, key="sz_tokens_b", format="%.3f")
    c[1].selectbox("GPU", list(memory.GPUS), key="sz_train_gpu")
    c[2].number_input("GPUs", 1, 100_000, key="sz_ngpus")
    c[3].number_input("Utilisation (MFU)", 0.01, 1.0, key="sz_util", step=0.05, help="Fraction of peak; 0.3–0.5 is typical")
    c[4].number_input("$ per GPU-hour", 0.0, 1000.0, key="sz_price", step=0.25)
    try:
        flops = memory.training_flops(bd.total, s["sz_tokens_b"] * 1e9)
        secs = memory.training_time(flops, s["sz_train_gpu"], s["sz_ngpus"], s["sz_util"], s["sz_precision"])
        cost = memory.training_cost(secs, s["sz_ngpus"], s["sz_price"])
    except ExplorerError as err:
        ui.show_error(err)
    else:
        k = st.columns(4)
        k[0].metric("Training FLOPs (6·N·D)", f"{flops:.3g}")
        k[1].metric("PF-days", f"{memory.pf_days(flops):,.2f}")
        k[2].metric("Time", calc.human_seconds(secs))
        k[3].metric("Cost", f"${cost:,.0f}")
        fwd = memory.forward_flops_per_token(bd, min(s["sz_seq"], bd.arch.positions or s["sz_seq"]))
        st.caption(f"Per token, forward: 2·N + 2·n_layer·n_ctx·d_attn = {fwd:,.0f} FLOPs (N non-embedding = {bd.non_embedding:,}); "
                   f"{memory.SOURCES['kaplan']} Peak of a {s['sz_train_gpu']}: "
                   f"{memory.GPUS[s['sz_train_gpu']].peak_16bit / 1e12:g} TFLOP/s 16-bit, "
                   f"{memory.GPUS[s['sz_train_gpu']].peak_fp32 / 1e12:g} fp32 ({memory.SOURCES['gpus']}).")
    st.subheader("Worked example: what BERT cost")
    rows = []
    for ex in memory.BERT_COST_EXAMPLE:
        f = memory.training_flops(ex["parameters"], ex["tokens"])
        t = memory.training_time(f, s["sz_train_gpu"], s["sz_ngpus"], s["sz_util"], s["sz_precision"])
        rows.append({"model": ex["model"], "6·N·D FLOPs": f"{f:.2e}", "PF-days": round(memory.pf_days(f), 2),
                     "paper: hardware, 4 days": ex["devices"], "slides: cost": f"${ex['slides_usd']:,}",
                     "implied $ per Cloud-TPU-hour": round(ex["slides_usd"] / ex["device_hours"], 2),
                     f"on {s['sz_ngpus']}× {s['sz_train_gpu']} (your settings)": calc.human_seconds(t),
                     "cost at your price": f"${memory.training_cost(t, s['sz_ngpus'], s['sz_price']):,.0f}"})
    ex_df = pd.DataFrame(rows)
    st.dataframe(ex_df, hide_index=True, width="stretch")
    ui.download_buttons(ex_df, "bert-cost", "sz_cost")
    st.caption(memory.SOURCES["bert_cost"] + " Tokens: 1M steps × 256 sequences × 512 tokens (an upper bound: 90% of "
               "BERT's steps used 128 tokens). The slides give no derivation; the implied hourly prices are ours.")

ui.save_url_state(DEFAULTS_STATE)
