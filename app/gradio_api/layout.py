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


def build():
    """The Gradio Blocks app: one tab per demo, each with its JSON output (the API) and a view."""
    import gradio as gr

    from core import registry
    from services import calculator as sizing
    from services import objectives, representations
    from services import scaling as fits
    from services import sparse_attention as sparse

    loadable = [c.id for c in registry.loadable()]
    mlm = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
    # delete_cache: the heatmap files of an hour ago go (every hour), so a class's downloads do not fill the disk
    with gr.Blocks(title="BERT Family Explorer — widgets", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("## BERT Family Explorer — embeddable demos\nEach tab is also an API endpoint (see *Use via API* below).")
        with gr.Tab("Fill the mask"):
            fill_text = gr.Textbox("Chickens cackle and [MASK] quack.", label="Text (write [MASK])")
            fill_models = gr.Textbox(
                "bert-base-uncased, roberta-base", label=f"Models (comma-separated, at most {objectives.MAX_MODELS})"
            )
            fill_top_k = gr.Slider(1, 20, 5, step=1, label="Top k")
            fill_mode = gr.Radio(["independent", "sequential"], value="independent", label="Several masks")
            fill_json = gr.JSON(label="Predictions")
            gr.Button("Fill", variant="primary").click(
                fill_mask, [fill_text, fill_models, fill_top_k, fill_mode], fill_json, api_name="fill_mask"
            )
        with gr.Tab("Attention"):
            attention_model = gr.Dropdown(
                loadable, value=registry.bundled_id(), label="Model (or type a Hub id / your folder)", allow_custom_value=True
            )
            attention_text = gr.Textbox("The cat sat on the mat because it was tired.", label="Sentence A")
            attention_pair = gr.Textbox("", label="Sentence B (optional)")
            attention_layer = gr.Number(0, precision=0, label="Layer")
            attention_head = gr.Number(0, precision=0, label="Head")
            attention_json = gr.JSON(label="Attention of this head")
            attention_plot = gr.Plot(label="Heatmap")
            attention_files = gr.File(label="The heatmap as PNG (2x) and SVG, for slides", file_count="multiple")
            gr.Button("Show", variant="primary").click(
                attention,
                [attention_model, attention_text, attention_pair, attention_layer, attention_head],
                attention_json,
                api_name="attention",
            ).then(_heatmap, attention_json, attention_plot, api_visibility="private").then(
                _heatmap_files, attention_json, attention_files, api_visibility="private"
            )
        with gr.Tab("Pseudo-perplexity"):
            pll_model = gr.Dropdown(
                mlm, value="bert-base-uncased", label="Model (or type a Hub id / your folder)", allow_custom_value=True
            )
            pll_sentence = gr.Textbox("A boy plays in the snow.", label="Sentence")
            pll_json = gr.JSON(label="Pseudo-likelihood")
            gr.Button("Score", variant="primary").click(
                pseudo_perplexity, [pll_model, pll_sentence], pll_json, api_name="pseudo_perplexity"
            )
        with gr.Tab("XLNet permutation masks"):
            perm_sentence = gr.Textbox("New York is a city", label="Sentence (words)")
            perm_order = gr.Textbox("random:0", label="Order: left-to-right, right-to-left, random:SEED, or positions 2,0,1,…")
            perm_k = gr.Number(2, precision=0, label="K (0 = predict all)")
            perm_json = gr.JSON(label="Masks")
            gr.Button("Build", variant="primary").click(
                permutation_masks,
                [perm_sentence, perm_order, perm_k],
                perm_json,
                api_name="permutation_masks",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
        with gr.Tab("BigBird sparse attention"):
            sparse_length = gr.Dropdown(list(sparse.TOKEN_LENGTHS), value=16, label="Tokens of the building blocks")
            sparse_blocks = gr.Dropdown(list(sparse.BLOCK_LENGTHS), value=2048, label="Tokens of the block layout")
            sparse_json = gr.JSON(label="Masks (1: may attend) and cost, full against sparse")
            gr.Button("Build", variant="primary").click(
                sparse_attention,
                [sparse_length, sparse_blocks],
                sparse_json,
                api_name="sparse_attention",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
        with gr.Tab("Parameters & memory"):
            calc_model = gr.Dropdown(
                loadable,
                value="bert-base-uncased",
                label="Model (its real config; or type a Hub id / your folder)",
                allow_custom_value=True,
            )
            calc_head = gr.Dropdown(list(sizing.HEADS), value="base", label="Head")
            calc_precision = gr.Dropdown(list(sizing.PRECISIONS), value="mixed", label="Precision")
            calc_optimizer = gr.Dropdown(list(sizing.OPTIMIZERS), value="adamw", label="Optimizer")
            calc_batch = gr.Number(8, precision=0, label="Batch per GPU")
            calc_seq_len = gr.Number(128, precision=0, label="Sequence length")
            calc_zero = gr.Number(0, precision=0, minimum=0, maximum=3, label="ZeRO stage (0–3)")
            calc_data_parallel = gr.Number(1, precision=0, label="Data-parallel GPUs")
            calc_gpu = gr.Dropdown(list(sizing.GPUS), value="V100 16 GB", label="GPU")
            calc_json = gr.JSON(label="Counts and bytes")
            gr.Button("Compute", variant="primary").click(
                calculator,
                [
                    calc_model,
                    calc_head,
                    calc_precision,
                    calc_optimizer,
                    calc_batch,
                    calc_seq_len,
                    calc_zero,
                    calc_data_parallel,
                    calc_gpu,
                ],
                calc_json,
                api_name="calculator",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
        demo_texts = "The bank raised its rates.\nWe walked along the river bank.\nThe bat flew out of the cave."
        with gr.Tab("Hidden states"):
            states_model = gr.Dropdown(
                loadable, value=registry.bundled_id(), label="Model (or type a Hub id / your folder)", allow_custom_value=True
            )
            states_texts = gr.Textbox(demo_texts, lines=4, label=f"Texts, one per line (at most {representations.MAX_TEXTS})")
            states_layer = gr.Number(-1, precision=0, label="Layer (0: embeddings, -1: the last)")
            states_method = gr.Dropdown(["pca", "tsne", "umap"], value="pca", label="Projection")
            states_seed = gr.Number(0, precision=0, label="Seed")
            states_vectors = gr.Checkbox(False, label="Include the vectors")
            states_json = gr.JSON(label="Tokens, 2-D coordinates (and vectors)")
            gr.Button("Project", variant="primary").click(
                hidden_states,
                [states_model, states_texts, states_layer, states_method, states_seed, states_vectors],
                states_json,
                api_name="hidden_states",
            )
        with gr.Tab("CKA"):
            cka_model_a = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model A (columns)", allow_custom_value=True)
            cka_model_b = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model B (rows)", allow_custom_value=True)
            cka_texts = gr.Textbox(demo_texts, lines=4, label=f"Texts, one per line (at most {representations.MAX_TEXTS})")
            cka_json = gr.JSON(label="Linear CKA, layer by layer")
            gr.Button("Compare", variant="primary").click(cka, [cka_model_a, cka_model_b, cka_texts], cka_json, api_name="cka")
        with gr.Tab("Nearest contexts"):
            near_model = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model", allow_custom_value=True)
            near_text = gr.Textbox("We walked along the river bank.", label="Text")
            near_position = gr.Number(6, precision=0, label="Token position ([CLS] is 0)")
            near_k = gr.Number(10, precision=0, label="Neighbours (1–100)")
            near_layer = gr.Number(-1, precision=0, label="Layer (-1: the last)")
            near_json = gr.JSON(label="Nearest corpus tokens")
            gr.Button("Search", variant="primary").click(
                nearest_contexts,
                [near_model, near_text, near_position, near_k, near_layer],
                near_json,
                api_name="nearest_contexts",
            )
        with gr.Tab("Attribution"):
            attr_model = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model", allow_custom_value=True)
            attr_output = gr.Dropdown(list(representations.OUTPUTS), value="similarity", label="Output explained")
            attr_text = gr.Textbox("A man is playing the guitar on stage.", label="Text (sentence A; with [MASK] for fill_mask)")
            attr_text_b = gr.Textbox("Someone performs music.", label="Sentence B (or the fill-mask candidate)")
            attr_position = gr.Number(0, precision=0, label="Token position (replaced_token)")
            attr_steps = gr.Number(50, precision=0, label="Integrated-gradients steps (1–200)")
            attr_json = gr.JSON(label="Integrated gradients and gradient × input per token")
            gr.Button("Explain", variant="primary").click(
                attribution,
                [attr_model, attr_output, attr_text, attr_text_b, attr_position, attr_steps],
                attr_json,
                api_name="attribution",
            )
        with gr.Tab("Scaling-law fit"):
            fit_law = gr.Dropdown(["power", "power_const", "chinchilla"], value="power", label="Law")
            fit_x = gr.Textbox("1e6, 3e6, 1e7, 3e7, 1e8", label="x (or D for chinchilla), comma-separated")
            fit_y = gr.Textbox("4.2, 3.9, 3.6, 3.35, 3.1", label="Loss, comma-separated")
            fit_n = gr.Textbox("", label="N (chinchilla only)")
            fit_bootstrap = gr.Number(200, precision=0, label=f"Bootstrap resamples (0–{fits.MAX_BOOTSTRAP})")
            fit_seed = gr.Number(0, precision=0, label="Seed")
            fit_json = gr.JSON(label="Fitted parameters with 95% intervals")
            gr.Button("Fit", variant="primary").click(
                scaling_fit, [fit_law, fit_x, fit_y, fit_n, fit_bootstrap, fit_seed], fit_json, api_name="scaling_fit"
            )
        with gr.Tab("Results database"):
            results_models = gr.Textbox("", label="Models (comma-separated; empty: all)")
            results_tasks = gr.Textbox("", label="Tasks (comma-separated, e.g. MNLI, SST-2; empty: all)")
            results_splits = gr.Textbox("", label="Splits (dev, test; empty: all)")
            results_main_only = gr.Checkbox(True, label="Main results only (no ablation variants)")
            results_json = gr.JSON(label="Results with their sources")
            gr.Button("Query", variant="primary").click(
                results,
                [results_models, results_tasks, results_splits, results_main_only],
                results_json,
                api_name="results",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
        with gr.Tab("Lab runs & verdicts"):
            gr.Markdown(
                "Read-only: the finished runs of the pre-training and fine-tuning labs on this server, and the "
                "ablations' verdicts. Training is started from the Streamlit app's lab pages, not from here."
            )
            runs_kind = gr.Radio(["all", "pretrain", "finetune"], value="all", label="Runs")
            runs_group = gr.Textbox("", label="Experiment group (empty: all)")
            runs_json = gr.JSON(label="Finished runs")
            gr.Button("List runs").click(
                lab_runs,
                [runs_kind, runs_group],
                runs_json,
                api_name="lab_runs",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
            verdicts_group = gr.Textbox("", label="Experiment group for its verdicts (empty: every preset's latest)")
            verdicts_json = gr.JSON(label="Verdicts")
            gr.Button("Show verdicts").click(
                verdicts,
                [verdicts_group],
                verdicts_json,
                api_name="verdicts",
                concurrency_limit=LIGHT_CONCURRENCY,
                concurrency_id="light",
            )
        with gr.Tab("Which parts matter"):
            gr.Markdown(
                "Masked-LM models: what each layer predicts (logit lens), which heads matter (Michel et al. 2019) "
                "and where a prediction is carried (activation patching)."
            )
            parts_model = gr.Dropdown(mlm, value=mlm[0] if mlm else None, label="Model", allow_custom_value=True)
            lens_text = gr.Textbox("The cat sat on the [MASK] because it was tired.", label="Text with [MASK] (logit lens)")
            lens_top_k = gr.Slider(1, 20, 5, step=1, label="Top k per layer")
            lens_json = gr.JSON(label="Layer by layer")
            gr.Button("Read every layer", variant="primary").click(
                logit_lens, [parts_model, lens_text, lens_top_k], lens_json, api_name="logit_lens"
            )
            ranked = "\n".join(
                [
                    "The bank raised its rates.",
                    "We walked along the river bank.",
                    "The bat flew out of the cave.",
                    "She plays the guitar on stage.",
                    "The cat sat on the mat.",
                    "A dog ran in the park.",
                ]
            )
            prune_texts = gr.Textbox(
                ranked, lines=6, label="Sentences, one per line (4–64; heads ranked on lines 1, 3, 5, …, scored on 2, 4, 6, …)"
            )
            prune_steps = gr.Number(6, precision=0, label="Pruning steps (2–24)")
            prune_seeds = gr.Number(3, precision=0, label="Random orders (2–10)")
            prune_mode = gr.Radio(["zero", "mean"], value="zero", label="A removed head outputs")
            prune_target = gr.Radio(
                ["masked-lm", "classifier", "probe"],
                value="masked-lm",
                label="Scored by",
                info="classifier: a Fine-tuning lab run (its own task); probe: any encoder, a probe fitted on the task",
            )
            prune_task = gr.Dropdown(["", "supersense", "wic"], value="", label="Task (probe; optional for a classifier)")
            prune_items = gr.Number(128, precision=0, label="Test items (classifier, probe: 8–512)")
            prune_json = gr.JSON(label="Head importance and the pruning curve")
            gr.Button("Rank the heads").click(
                head_importance,
                [parts_model, prune_texts, prune_steps, prune_seeds, prune_mode, prune_target, prune_task, prune_items],
                prune_json,
                api_name="head_importance",
            )
            patch_clean = gr.Textbox("the cat sat on the [MASK] .", label="Clean sentence")
            patch_corrupted = gr.Textbox("the dog sat on the [MASK] .", label="Corrupted sentence (same token length)")
            patch_answer = gr.Textbox("mat", label="Answer (one token)")
            patch_foil = gr.Textbox("floor", label="Foil (one token)")
            patch_unit = gr.Radio(["layer", "head"], value="layer", label="Patch each layer's output, or each head's")
            patch_position = gr.Number(-1, precision=0, label="Heads: the position patched (-1: every position)")
            patch_json = gr.JSON(label="Layers × positions (or layers × heads)")
            gr.Button("Patch").click(
                activation_patching,
                [parts_model, patch_clean, patch_corrupted, patch_answer, patch_foil, patch_unit, patch_position],
                patch_json,
                api_name="activation_patching",
            )
    from core.settings import get_settings

    return demo.queue(default_concurrency_limit=get_settings().gradio_concurrency, max_size=256)
