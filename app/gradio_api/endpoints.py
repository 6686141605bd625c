"""The Gradio API's endpoints: each maps a client's JSON arguments to one use case in ``services/`` and its result to
one JSON object. They decide nothing themselves: validation, limits and the work live in the use case, which the
Streamlit pages call too. Each docstring is the endpoint's (and MCP tool's) documentation.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from core.errors import ExplorerError
from services import requests as req
from services.calls import jsonable

log = logging.getLogger("bert_family_explorer.gradio")
#: The most rows of a runs answer.
MAX_RUNS_LISTED = 5_000


#: The endpoints (and the error wrapper they share), as the entry module :mod:`app.gradio_app` re-exports them.
__all__ = [
    "activation_patching",
    "attention",
    "attribution",
    "calculator",
    "cka",
    "fill_mask",
    "friendly",
    "head_importance",
    "hidden_states",
    "lab_runs",
    "logit_lens",
    "nearest_contexts",
    "permutation_masks",
    "pseudo_perplexity",
    "results",
    "scaling_fit",
    "sparse_attention",
    "verdicts",
]


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Library errors become gradio.Error (message + hint); anything else a generic message, logged."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import gradio as gr

        try:
            return fn(*args, **kwargs)
        except ExplorerError as err:
            raise gr.Error(f"{err.message} {err.hint}".strip(), print_exception=False) from None
        except Exception as err:
            log.exception("unexpected error in %s", fn.__name__)
            raise gr.Error(f"Something unexpected went wrong ({type(err).__name__}); try other input.", print_exception=False) from None

    return wrapper


@friendly
def fill_mask(text: str, models: str, top_k: int = 5, mode: str = "independent") -> dict:
    """Fill the [MASK] tokens of a text with up to five masked-language models, their top predictions side by side.

    Args:
        text: the text, with [MASK] (or <mask>) where a word is hidden.
        models: comma-separated model ids (at most 5), e.g. "bert-base-uncased, roberta-base".
        top_k: predictions per mask, 1 to 20.
        mode: independent (each mask on its own) or sequential (fill the surest mask first, then the next).
    Returns:
        {"models": {id: [[{"token", "probability", "sequence", ...}] per mask]}, "errors": {id: message}}.
    """
    from services import objectives

    return objectives.fill_mask(text, models, top_k, mode).to_json()


@friendly
def attention(model: str, text: str, text_pair: str = "", layer: int = 0, head: int = 0) -> dict:
    """One attention head's weights over the tokens of a sentence (or a pair), with the head's statistics.

    Args:
        model: a model id (catalog id, Hub id or local folder).
        text: sentence A.
        text_pair: sentence B (optional).
        layer: the layer, from 0.
        head: the head, from 0.
    Returns:
        {"model", "tokens", "segments", "layer", "head", "weights": T×T (row: the attending token), "stats", "truncated", "notices"}.
    """
    from services import attention as use_case

    layer, head = use_case.head_request(layer, head)
    return use_case.head(use_case.run(model, text, text_pair), layer, head).to_json()


@friendly
def pseudo_perplexity(model: str, sentence: str) -> dict:
    """A masked-language model's pseudo-log-likelihood of a sentence (Salazar et al. 2020): each token masked in turn.

    Args:
        model: a masked-language-model id, e.g. bert-base-uncased.
        sentence: the sentence.
    Returns:
        {"tokens", "log_probs" (one per token), "pll" (their sum), "pppl" (pseudo-perplexity)}.
    """
    from services import objectives

    r = objectives.pseudo_perplexity(model, sentence)
    return {"tokens": list(r.tokens), "log_probs": list(r.log_probs), "pll": r.pll, "pppl": r.pppl}


@friendly
def permutation_masks(sentence: str, order: str = "left-to-right", k: int = 0) -> dict:
    """XLNet's two-stream attention masks for a factorisation order of a sentence's words (Yang et al. 2019).

    Args:
        sentence: the words, separated by spaces (at most the page's limit).
        order: left-to-right, right-to-left, random:SEED, or positions such as 2,0,1,3.
        k: predict the last k positions of the order (0: all).
    Returns:
        {"tokens", "order", "targets", "content_mask", "query_mask", "perm_mask", "target_mapping"} (1: may attend).
    """
    from services import permutation

    _, tokens = permutation.tokens(sentence)
    return permutation.masks(tokens, permutation.order(order, len(tokens) - 2), k).to_json()


@friendly
def sparse_attention(length: int = 16, block_length: int = 2048) -> dict:
    """BigBird's sparse attention (Zaheer et al. 2020, Figure 1 and Table 8): its building blocks at a short length,
    transformers' block layout at a long one, and full against sparse attention's cost from 512 to 16,384 tokens.

    Args:
        length: tokens of the building-block masks (random 2, window 3, global 2): 16, 32, 64 or 128.
        block_length: tokens of the block layout (blocks of 64; 3 random blocks, a window of 3, 2 global): 1024, 2048,
            4096, 8192 or 16384.
    Returns:
        {"length", "block_length", "block_size", "token_masks", "block_masks", "costs", "source"}; each mask set holds
        random, window, global and their union (bigbird) as 0/1 rows (query by key; 1: may attend), the block masks for one head.
    """
    from services import sparse_attention as use_case

    return use_case.explain(length, block_length).to_json()


@friendly
def calculator(model: str, head: str = "base", precision: str = "mixed", optimizer: str = "adamw", batch_size: int = 8,
               seq_len: int = 128, zero_stage: int = 0, data_parallel: int = 1, gpu: str = "V100 16 GB") -> dict:
    """Parameters and training memory of a model (the Size & memory calculator), and the largest batch that fits a GPU.

    Args:
        model: a catalog id (its real configuration), or a Hub id / local folder whose config.json is read.
        head: base, masked-lm, causal-lm, pretraining or xlnet-lm.
        precision: fp32, mixed or bf16.
        optimizer: sgd, momentum, adamw, adam8bit, adafactor or lion.
        batch_size: sequences per GPU, 1 to 100,000.
        seq_len: tokens per sequence, 1 to 1,000,000.
        zero_stage: DeepSpeed ZeRO stage, 0 to 3.
        data_parallel: GPUs sharing the optimizer state, 1 to 100,000.
        gpu: the GPU for the largest batch, e.g. "V100 16 GB".
    Returns:
        {"parameters", "non_embedding", "parts", "memory_bytes", "memory_total_bytes", "max_batch"}.
    """
    from services import calculator as use_case

    return use_case.estimate(model, head, precision, optimizer, batch_size, seq_len, zero_stage, data_parallel, gpu).to_json()


@friendly
def hidden_states(model: str, texts: str, layer: int = -1, method: str = "pca", seed: int = 0,
                  include_vectors: bool = False) -> dict:
    """The hidden vectors of every token of some texts at one layer, projected to 2-D (the Representations page).

    Args:
        model: a model id (catalog id, Hub id or local folder).
        texts: one text per line (at most 100).
        layer: 0 is the embedding output, -1 the last layer.
        method: pca, tsne or umap.
        seed: the projection's random seed (t-SNE, UMAP).
        include_vectors: also return the vectors themselves (at most 1,000,000 numbers).
    Returns:
        {"model", "layers", "layer", "method", "tokens": [{"text_index", "position", "token", "word"}], "coords": [[x, y]],
        "vectors" (when asked), "notices"}: special tokens are left out.
    """
    from services import representations

    include_vectors = req.flag("include_vectors", include_vectors)
    layer, method, seed = representations.projection_request(layer, method, seed)
    reps = representations.states(model, texts)
    return jsonable(representations.project(reps, layer, method, seed).to_json(include_vectors))


@friendly
def cka(model_a: str, model_b: str, texts: str) -> dict:
    """Linear CKA (Kornblith et al. 2019) between every layer of two models on the same texts, words aligned.

    Args:
        model_a: a model id (columns).
        model_b: a model id (rows); the same as model_a compares a model's layers with each other.
        texts: one text per line (at most 100).
    Returns:
        {"model_a", "model_b", "cka": rows = model_b's layers 0..L (0: embeddings), columns = model_a's,
        "best_match": for each of model_b's layers, model_a's most alike, "words"}.
    """
    from services import representations

    r = representations.cka(model_a, model_b, texts)
    return jsonable({"model_a": r.model_a, "model_b": r.model_b, "cka": r.cka.round(6), "best_match": r.best_match,
                     "words": r.words})


@friendly
def nearest_contexts(model: str, text: str, position: int = 1, k: int = 10, layer: int = -1) -> dict:
    """exBERT's search: the corpus tokens (WordNet's example sentences) whose vectors are nearest (cosine) to one
    token of a text. The first search at a layer builds the model's corpus index, which is slow on a CPU.

    Args:
        model: a model id.
        text: the text (at most 1,000 characters).
        position: the token's position, counting [CLS] as 0.
        k: neighbours to return, 1 to 100.
        layer: -1 is the last layer.
    Returns:
        {"model", "layer", "neighbours": [{"token", "sentence", "position", "similarity"}]}.
    """
    from services import representations

    found = representations.nearest(model, text, position, k, layer)
    return jsonable(representations.neighbours_json(req.model_id(model), layer, found))


@friendly
def attribution(model: str, output: str, text: str, text_b: str = "", position: int = 0, steps: int = 50) -> dict:
    """Which input tokens drive an output: integrated gradients and gradient × input (Captum), as on the
    Representations page's "Why this prediction".

    Args:
        model: a model id that has the output's head.
        output: similarity (two sentences, any encoder), fill_mask (text with [MASK]; text_b: a candidate word or
            empty for the top prediction), sentence_relation (NSP/SOP: does text_b follow text?), replaced_token
            (ELECTRA: was the token at position replaced?).
        text: the text (sentence A).
        text_b: sentence B, or the fill-mask candidate.
        position: the token position (replaced_token only).
        steps: integrated-gradients steps, 1 to 200.
    Returns:
        {"model", "output", "tokens", "special", "integrated_gradients", "gradient_x_input", "delta", "f_input",
        "f_baseline", "steps"}: the integrated gradients add up to f_input − f_baseline (up to delta).
    """
    from services import representations

    r = representations.explain(output, model, text, text_b, position, steps)
    return jsonable({"model": r.model_id, "output": r.output, "tokens": r.tokens, "special": r.special,
                     "integrated_gradients": r.integrated_gradients, "gradient_x_input": r.gradient_x_input,
                     "delta": r.delta, "f_input": r.f_input, "f_baseline": r.f_baseline, "steps": r.steps})


@friendly
def scaling_fit(law: str, x: str, y: str, n: str = "", bootstrap: int = 200, seed: int = 0) -> dict:
    """Fit a scaling law to posted points (Huber loss in log space, Hoffmann et al. 2022), with bootstrap intervals.

    Args:
        law: power (L = (x_c/x)^α), power_const (L = L_∞ + A·x^−α) or chinchilla (L = E + A/N^α + B/D^β).
        x: the x values (parameters, tokens or compute), separated by commas; for chinchilla, D (tokens).
        y: the losses, as many as x.
        n: chinchilla only: N (parameters), as many as x.
        bootstrap: resamples for the intervals, 0 to 1,000.
        seed: the bootstrap's seed.
    Returns:
        {"law", "formula", "parameters", "std_errors", "interval_95", "bootstrap_resamples", "rmse_log", "r2_log",
        "huber_delta", "points", "x", "y"}.
    """
    from services import scaling

    return jsonable(scaling.fit_numbers(law, x, y, n, bootstrap, seed).to_dict())


@friendly
def results(models: str = "", tasks: str = "", splits: str = "", main_only: bool = True) -> dict:
    """Published results from the results database (GLUE, SQuAD, … as in the slides), each with its source.

    Args:
        models: comma-separated model names (empty: all), e.g. "BERT-base, RoBERTa-large" (any case).
        tasks: comma-separated tasks (empty: all), e.g. "MNLI, SST-2" (any case).
        splits: comma-separated splits (empty: all): dev, test.
        main_only: only each model's main result (no ablation variants).
    Returns:
        {"rows": [{"model", "variant", "task", "metric", "split", "setting", "value", "citation", "table", "slides",
        "arxiv", "origin"}], "count", "truncated"}.
    """
    from services import results as use_case

    return use_case.query(models, tasks, splits, main_only)


@friendly
def lab_runs(kind: str = "all", group: str = "") -> dict:
    """The pre-training and fine-tuning labs' finished runs on this server (read-only: the API starts no training).

    Args:
        kind: all, pretrain or finetune.
        group: an experiment's group name (empty: every run).
    Returns:
        {"runs": [{"id", "name", "objective", "group", "seconds", "tokens", "parameters", "final_loss", "evaluation",
        "config", "finished_at"}], "finetune_table": Peters et al.'s table (model × mode × task, mean accuracy over
        seeds), "finetune_delta": fine-tuned − frozen per model and task, "count", "truncated"}.
    """
    from services import lab

    return jsonable(lab.finished_runs(kind, group, MAX_RUNS_LISTED))


@friendly
def verdicts(group: str = "") -> dict:
    """The ablations' verdicts: one experiment's report (its claims, each marked primary or exploratory, per-seed
    scores, the verdict with its interval: 95% for a primary measure, Bonferroni for an exploratory one; seeds and
    shared test items both counted), or, with no group, each preset's latest decided verdicts on this server (a
    fitted exponent whose interval leaves out the paper's value "agrees on direction only"). Read-only.

    Args:
        group: an experiment's group name (empty: the latest verdict of every preset).
    Returns:
        With a group: {"group", "preset", "state", "claims", "runs", "arms", ...}; without: {"verdicts": [...]}.
    """
    from services.lab import experiments

    return jsonable(experiments.verdicts_json(req.text("group", group, 100, empty_ok=True)))


@friendly
def logit_lens(model: str, text: str, top_k: int = 5) -> dict:
    """For each [MASK] of a text, the top tokens the model's own masked-LM head reads from every layer's hidden state
    (the logit lens for masked LMs); the last layer's are its fill-mask predictions.

    Args:
        model: a masked-LM model id (catalog id, Hub id or local folder).
        text: the text, with [MASK] where a word is hidden.
        top_k: tokens per layer, 1 to 20.
    Returns:
        {"model", "tokens", "positions", "answers", "layers": [per mask: [{"layer", "top": [[token, p]], "final_probability"}]]}.
    """
    from services import parts

    return jsonable(parts.lens_json(parts.lens(model, text, top_k)))


@friendly
def head_importance(model: str, texts: str, steps: int = 6, seeds: int = 3, mode: str = "zero", target: str = "masked-lm",
                    task: str = "", items: int = 128) -> dict:
    """Which heads matter (Michel, Levy & Neubig 2019): every head's importance, the gradient of the target's loss with
    respect to its mask, and the target's accuracy as heads are removed least important first against random orders
    (mean and 95% interval over the seeds). Heads are ranked on items 1, 3, 5, … and scored on 2, 4, 6, ….

    Args:
        model: a masked-LM model (target masked-lm), a fine-tuned classifier (classifier), or any encoder (probe).
        texts: masked-lm: sentences, one per line (4 to 64); classifier that is not a lab run: `label | sentence` lines;
            otherwise empty.
        steps: points of the pruning curve, 2 to 24.
        seeds: random orders, 2 to 10.
        mode: zero (a removed head outputs zeros) or mean (its mean output).
        target: masked-lm, classifier (a fine-tuning lab run scores its own task) or probe (fitted on `task` first).
        task: supersense or wic (a probe's task; a classifier's, to override its run's); empty otherwise.
        items: labelled test items to score, 8 to 512 (classifier, probe).
    Returns:
        {"model", "target", "measure", "importance": layers × heads, "raw": layers × heads, "loss", "ranked_on",
        "curve": {"removed", "total", "by_importance", "random_mean", "random_low", "random_high", "seeds", "mode", "note"}}.
    """
    from services import parts

    return jsonable(parts.importance_json(parts.head_importance(model, texts, steps, seeds, mode, target, task, items)))


@friendly
def activation_patching(model: str, clean: str, corrupted: str, answer: str, foil: str, unit: str = "layer",
                        position: int = -1) -> dict:
    """Causal tracing (Meng et al. 2022; Vig et al. 2020 for BERT): two sentences of the same token length with one
    [MASK] at the same place; for every layer × position, how much copying that hidden state from the clean run into
    the corrupted one moves the mask's logit difference answer − foil back.

    Args:
        model: a masked-LM model id.
        clean: e.g. "Paris is the capital of [MASK]."
        corrupted: e.g. "Rome is the capital of [MASK]." (same token length).
        answer: the clean answer, one token (e.g. france).
        foil: the corrupted answer, one token (e.g. italy).
        unit: layer (each layer's output at each position) or head (each head's output, Vig et al. 2020).
        position: for unit head, the one token index patched; -1 patches every position.
    Returns:
        {"model", "clean_tokens", "corrupted_tokens", "mask_position", "clean_difference", "corrupted_difference",
        "effects": layers × positions (or layers × heads), "restored": the same as a share of the gap, "passes",
        "unit", "position"}.
    """
    from services import parts

    return jsonable(asdict(parts.patch(model, clean, corrupted, answer, foil, unit, position)))
