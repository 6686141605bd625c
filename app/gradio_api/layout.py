"""The Gradio app's page: one tab per demo, each with its inputs, its JSON output (the API) and a view."""

from __future__ import annotations

from pathlib import Path

from app.gradio_api.endpoints import (
    activation_patching,
    attention,
    attribution,
    calculator,
    cka,
    fill_mask,
    head_importance,
    hidden_states,
    lab_runs,
    logit_lens,
    nearest_contexts,
    permutation_masks,
    pseudo_perplexity,
    results,
    scaling_fit,
    sparse_attention,
    verdicts,
)

#: Model-free calls (masks, calculator, results, runs) that may run at once, in their own queue.
LIGHT_CONCURRENCY = 4


def _heatmap(result: dict):
    import numpy as np

    from analysis.attention_plots import heatmap

    if not result:
        return None
    return heatmap(np.array(result["weights"]), result["tokens"], title=f"layer {result['layer']}, head {result['head']}")


def _heatmap_files(result: dict) -> list[str] | None:
    """The heatmap as PNG (2x) and SVG files for download; a warning (not an error) when the server has no browser."""
    import tempfile

    import gradio as gr

    from core.errors import ExplorerError
    from services import pack

    fig = _heatmap(result)
    if fig is None:
        return None
    try:
        png, svg = pack.to_png(fig), pack.to_svg(fig)
    except ExplorerError as err:
        gr.Warning(f"{err.message} {err.hint}".strip())
        return None
    folder = Path(tempfile.mkdtemp(prefix="bfe-heatmap-"))
    name = f"attention-layer{result['layer']}-head{result['head']}"
    (folder / f"{name}.png").write_bytes(png)
    (folder / f"{name}.svg").write_bytes(svg)
    return [str(folder / f"{name}.png"), str(folder / f"{name}.svg")]


#: Keyword arguments of a model-free endpoint's event: its own queue, several at once.
LIGHT = {"concurrency_limit": LIGHT_CONCURRENCY, "concurrency_id": "light"}
#: The examples the tabs open with.
DEMO_TEXTS = "The bank raised its rates.\nWe walked along the river bank.\nThe bat flew out of the cave."
RANKED_TEXTS = "\n".join(["The bank raised its rates.", "We walked along the river bank.", "The bat flew out of the cave.",
                          "She plays the guitar on stage.", "The cat sat on the mat.", "A dog ran in the park."])


def _models() -> tuple[list[str], list[str], str]:
    """(every loadable model id, the masked-LM ones, the bundled one) for the tabs' pickers."""
    from core import registry

    loadable = [c.id for c in registry.loadable()]
    return loadable, [c.id for c in registry.loadable() if "masked-lm" in c.tasks], registry.bundled_id()


def _number(value: float, bounds: tuple[float, float], label: str, whole: bool = True):
    """A number input labelled with its use case's bounds for the field (the page's widgets use the same). The bounds
    are not set on the component: Gradio's own refusal ("Value 500 is greater than maximum value 100.") would come
    before the use case's, which names the field ("k must be between 1 and 100, not 500.")."""
    import gradio as gr

    low, high = bounds
    show = (lambda v: f"{v:,}") if whole else (lambda v: f"{v:g}")
    return gr.Number(value, precision=0 if whole else None, label=f"{label} ({show(low)} to {show(high)})")


def _picker(choices: list[str], value: str | None, label: str = "Model (or type a Hub id / your folder)"):
    import gradio as gr

    return gr.Dropdown(choices, value=value, label=label, allow_custom_value=True)


def fill_tab() -> None:
    import gradio as gr

    from services import objectives

    text = gr.Textbox("Chickens cackle and [MASK] quack.", label="Text (write [MASK])")
    models = gr.Textbox("bert-base-uncased, roberta-base", label=f"Models (comma-separated, at most {objectives.MAX_MODELS})")
    top_k = gr.Slider(*objectives.BOUNDS["top_k"], 5, step=1, label="Top k")
    mode = gr.Radio(list(objectives.FILL_MODES), value="independent", label="Several masks")
    out = gr.JSON(label="Predictions")
    gr.Button("Fill", variant="primary").click(fill_mask, [text, models, top_k, mode], out, api_name="fill_mask")


def attention_tab() -> None:
    import gradio as gr

    from services.attention import BOUNDS as attention_bounds

    loadable, _, bundled = _models()
    inputs = [_picker(loadable, bundled), gr.Textbox("The cat sat on the mat because it was tired.", label="Sentence A"),
              gr.Textbox("", label="Sentence B (optional)"), _number(0, attention_bounds["layer"], "Layer"),
              _number(0, attention_bounds["head"], "Head")]
    out = gr.JSON(label="Attention of this head")
    plot = gr.Plot(label="Heatmap")
    files = gr.File(label="The heatmap as PNG (2x) and SVG, for slides", file_count="multiple")
    gr.Button("Show", variant="primary").click(attention, inputs, out, api_name="attention").then(
        _heatmap, out, plot, api_visibility="private").then(_heatmap_files, out, files, api_visibility="private")


def pll_tab() -> None:
    import gradio as gr

    _, mlm, _ = _models()
    inputs = [_picker(mlm, "bert-base-uncased"), gr.Textbox("A boy plays in the snow.", label="Sentence")]
    out = gr.JSON(label="Pseudo-likelihood")
    gr.Button("Score", variant="primary").click(pseudo_perplexity, inputs, out, api_name="pseudo_perplexity")


def permutation_tab() -> None:
    import gradio as gr

    from services import permutation

    inputs = [gr.Textbox("New York is a city", label="Sentence (words)"),
              gr.Textbox("random:0", label="Order: left-to-right, right-to-left, random:SEED, or positions 2,0,1,…"),
              _number(2, permutation.BOUNDS["k"], "K (0 = predict all)")]
    out = gr.JSON(label="Masks")
    gr.Button("Build", variant="primary").click(permutation_masks, inputs, out, api_name="permutation_masks", **LIGHT)


def sparse_tab() -> None:
    import gradio as gr

    from services import sparse_attention as sparse

    inputs = [gr.Dropdown(list(sparse.TOKEN_LENGTHS), value=16, label="Tokens of the building blocks"),
              gr.Dropdown(list(sparse.BLOCK_LENGTHS), value=2048, label="Tokens of the block layout")]
    out = gr.JSON(label="Masks (1: may attend) and cost, full against sparse")
    gr.Button("Build", variant="primary").click(sparse_attention, inputs, out, api_name="sparse_attention", **LIGHT)


def calculator_tab() -> None:
    import gradio as gr

    from services import calculator as sizing

    loadable, _, _ = _models()
    inputs = [_picker(loadable, "bert-base-uncased", "Model (its real config; or type a Hub id / your folder)"),
              gr.Dropdown(list(sizing.HEADS), value="base", label="Head"),
              gr.Dropdown(list(sizing.PRECISIONS), value="mixed", label="Precision"),
              gr.Dropdown(list(sizing.OPTIMIZERS), value="adamw", label="Optimizer"),
              _number(8, sizing.BOUNDS["batch_size"], "Batch per GPU"), _number(128, sizing.BOUNDS["seq_len"], "Sequence length"),
              _number(0, sizing.BOUNDS["zero_stage"], "ZeRO stage"), _number(1, sizing.BOUNDS["data_parallel"], "Data-parallel GPUs"),
              gr.Dropdown(list(sizing.GPUS), value="V100 16 GB", label="GPU")]
    out = gr.JSON(label="Counts and bytes")
    gr.Button("Compute", variant="primary").click(calculator, inputs, out, api_name="calculator", **LIGHT)


def states_tab() -> None:
    import gradio as gr

    from services import representations

    loadable, _, bundled = _models()
    inputs = [_picker(loadable, bundled),
              gr.Textbox(DEMO_TEXTS, lines=4, label=f"Texts, one per line (at most {representations.MAX_TEXTS})"),
              _number(-1, representations.BOUNDS["layer"], "Layer (0: embeddings, -1: the last)"),
              gr.Dropdown(list(representations.METHODS), value="pca", label="Projection"), _number(0, representations.BOUNDS["seed"], "Seed"),
              gr.Checkbox(False, label="Include the vectors")]
    out = gr.JSON(label="Tokens, 2-D coordinates (and vectors)")
    gr.Button("Project", variant="primary").click(hidden_states, inputs, out, api_name="hidden_states")


def cka_tab() -> None:
    import gradio as gr

    from services import representations

    loadable, _, bundled = _models()
    inputs = [_picker(loadable, bundled, "Model A (columns)"), _picker(loadable, bundled, "Model B (rows)"),
              gr.Textbox(DEMO_TEXTS, lines=4, label=f"Texts, one per line (at most {representations.MAX_TEXTS})")]
    out = gr.JSON(label="Linear CKA, layer by layer")
    gr.Button("Compare", variant="primary").click(cka, inputs, out, api_name="cka")


def nearest_tab() -> None:
    import gradio as gr

    from services import representations

    loadable, _, bundled = _models()
    inputs = [_picker(loadable, bundled, "Model"), gr.Textbox("We walked along the river bank.", label="Text"),
              _number(6, representations.BOUNDS["position"], "Token position ([CLS] is 0)"),
              _number(10, representations.BOUNDS["k"], "Neighbours"), _number(-1, representations.BOUNDS["layer"], "Layer (-1: the last)")]
    out = gr.JSON(label="Nearest corpus tokens")
    gr.Button("Search", variant="primary").click(nearest_contexts, inputs, out, api_name="nearest_contexts")


def attribution_tab() -> None:
    import gradio as gr

    from services import representations

    loadable, _, bundled = _models()
    inputs = [_picker(loadable, bundled, "Model"),
              gr.Dropdown(list(representations.OUTPUTS), value="similarity", label="Output explained"),
              gr.Textbox("A man is playing the guitar on stage.", label="Text (sentence A; with [MASK] for fill_mask)"),
              gr.Textbox("Someone performs music.", label="Sentence B (or the fill-mask candidate)"),
              _number(0, representations.BOUNDS["replaced_position"], "Token position (replaced_token)"),
              _number(50, representations.BOUNDS["steps"], "Integrated-gradients steps")]
    out = gr.JSON(label="Integrated gradients and gradient × input per token")
    gr.Button("Explain", variant="primary").click(attribution, inputs, out, api_name="attribution")


def fit_tab() -> None:
    import gradio as gr

    from services import scaling as fits

    inputs = [gr.Dropdown(["power", "power_const", "chinchilla"], value="power", label="Law"),
              gr.Textbox("1e6, 3e6, 1e7, 3e7, 1e8", label="x (or D for chinchilla), comma-separated"),
              gr.Textbox("4.2, 3.9, 3.6, 3.35, 3.1", label="Loss, comma-separated"), gr.Textbox("", label="N (chinchilla only)"),
              _number(200, fits.BOUNDS["bootstrap"], "Bootstrap resamples"), _number(0, fits.BOUNDS["seed"], "Seed")]
    out = gr.JSON(label="Fitted parameters with 95% intervals")
    gr.Button("Fit", variant="primary").click(scaling_fit, inputs, out, api_name="scaling_fit")


def results_tab() -> None:
    import gradio as gr

    inputs = [gr.Textbox("", label="Models (comma-separated; empty: all)"),
              gr.Textbox("", label="Tasks (comma-separated, e.g. MNLI, SST-2; empty: all)"),
              gr.Textbox("", label="Splits (dev, test; empty: all)"), gr.Checkbox(True, label="Main results only (no ablation variants)")]
    out = gr.JSON(label="Results with their sources")
    gr.Button("Query", variant="primary").click(results, inputs, out, api_name="results", **LIGHT)


def lab_tab() -> None:
    import gradio as gr

    gr.Markdown("Read-only: the finished runs of the pre-training and fine-tuning labs on this server, and the ablations' "
                "verdicts. Training is started from the Streamlit app's lab pages, not from here.")
    inputs = [gr.Radio(["all", "pretrain", "finetune"], value="all", label="Runs"), gr.Textbox("", label="Experiment group (empty: all)")]
    out = gr.JSON(label="Finished runs")
    gr.Button("List runs").click(lab_runs, inputs, out, api_name="lab_runs", **LIGHT)
    group = gr.Textbox("", label="Experiment group for its verdicts (empty: every preset's latest)")
    said = gr.JSON(label="Verdicts")
    gr.Button("Show verdicts").click(verdicts, [group], said, api_name="verdicts", **LIGHT)


def parts_tab() -> None:
    import gradio as gr

    from services.parts import BOUNDS as parts_bounds

    _, mlm, _ = _models()
    gr.Markdown("Masked-LM models: what each layer predicts (logit lens), which heads matter (Michel et al. 2019) "
                "and where a prediction is carried (activation patching).")
    model = gr.Dropdown(mlm, value=mlm[0] if mlm else None, label="Model", allow_custom_value=True)
    lens_inputs = [model, gr.Textbox("The cat sat on the [MASK] because it was tired.", label="Text with [MASK] (logit lens)"),
                   gr.Slider(*parts_bounds["top_k"], 5, step=1, label="Top k per layer")]
    lens_out = gr.JSON(label="Layer by layer")
    gr.Button("Read every layer", variant="primary").click(logit_lens, lens_inputs, lens_out, api_name="logit_lens")
    pruning_inputs(model)
    patching_inputs(model)


def pruning_inputs(model) -> None:
    """Head importance and the pruning curve (Michel et al. 2019), bounded by the use case's limits."""
    import gradio as gr

    from services import parts

    inputs = [model, gr.Textbox(RANKED_TEXTS, lines=6, label=f"Sentences, one per line (4–{parts.MAX_SENTENCES}; heads ranked on "
                                                               "lines 1, 3, 5, …, scored on 2, 4, 6, …)"),
              _number(6, parts.BOUNDS["steps"], "Pruning steps"), _number(3, parts.BOUNDS["seeds"], "Random orders"),
              gr.Radio(list(parts.ABLATION_MODES), value="zero", label="A removed head outputs"),
              gr.Radio(list(parts.TARGETS), value="masked-lm", label="Scored by",
                       info="classifier: a Fine-tuning lab run (its own task); probe: any encoder, a probe fitted on the task"),
              gr.Dropdown(["", *parts.TASKS], value="", label="Task (probe; optional for a classifier)"),
              _number(128, parts.BOUNDS["items"], "Test items (classifier, probe)")]
    out = gr.JSON(label="Head importance and the pruning curve")
    gr.Button("Rank the heads").click(head_importance, inputs, out, api_name="head_importance")


def patching_inputs(model) -> None:
    """Causal tracing: a clean and a corrupted sentence, the answer and its foil."""
    import gradio as gr

    from services.parts import BOUNDS as parts_bounds

    inputs = [model, gr.Textbox("the cat sat on the [MASK] .", label="Clean sentence"),
              gr.Textbox("the dog sat on the [MASK] .", label="Corrupted sentence (same token length)"),
              gr.Textbox("mat", label="Answer (one token)"), gr.Textbox("floor", label="Foil (one token)"),
              gr.Radio(["layer", "head"], value="layer", label="Patch each layer's output, or each head's"),
              _number(-1, parts_bounds["position"], "Heads: the position patched (-1: every position)")]
    out = gr.JSON(label="Layers × positions (or layers × heads)")
    gr.Button("Patch").click(activation_patching, inputs, out, api_name="activation_patching")


#: The tabs in order: (title, the function that lays it out and wires its endpoint).
TABS = (("Fill the mask", fill_tab), ("Attention", attention_tab), ("Pseudo-perplexity", pll_tab),
        ("XLNet permutation masks", permutation_tab), ("BigBird sparse attention", sparse_tab),
        ("Parameters & memory", calculator_tab), ("Hidden states", states_tab), ("CKA", cka_tab),
        ("Nearest contexts", nearest_tab), ("Attribution", attribution_tab), ("Scaling-law fit", fit_tab),
        ("Results database", results_tab), ("Lab runs & verdicts", lab_tab), ("Which parts matter", parts_tab))


def build():
    """The Gradio Blocks app: one tab per demo (:data:`TABS`), each with its JSON output (the API) and a view."""
    import gradio as gr

    from core.settings import get_settings

    # delete_cache: the heatmap files of an hour ago go (every hour), so a class's downloads do not fill the disk
    with gr.Blocks(title="BERT Family Explorer — widgets", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("## BERT Family Explorer — embeddable demos\nEach tab is also an API endpoint (see *Use via API* below).")
        for title, lay_out in TABS:
            with gr.Tab(title):
                lay_out()
    return demo.queue(default_concurrency_limit=get_settings().gradio_concurrency, max_size=256)
