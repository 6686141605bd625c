"""Gradio: each demo as an embeddable widget and a JSON API, over the same library as the Streamlit app.

    python -m app.gradio_app [--host 127.0.0.1] [--port 7860]

Endpoints (``gradio_client.Client(url).predict(..., api_name=...)``), each returning one JSON object:

- ``/fill_mask`` (text, models: comma-separated ids, top_k, mode) → {"models": {id: [[prediction, ...] per mask]}, "errors": {id: message}}
- ``/attention`` (model, text, text_pair, layer, head) → {"model", "tokens", "segments", "layer", "head", "weights": T×T, "stats", "truncated", "notices"}
- ``/pseudo_perplexity`` (model, sentence) → {"tokens", "log_probs", "pll", "pppl"}
- ``/permutation_masks`` (sentence, order: comma-separated positions or left-to-right/right-to-left/random:SEED, k) →
  {"tokens", "order", "targets", "content_mask", "query_mask", "perm_mask", "target_mapping"}
- ``/calculator`` (model: catalog id, head, precision, optimizer, batch_size, seq_len, zero_stage, data_parallel, gpu) →
  {"parameters", "non_embedding", "parts", "memory_bytes", "memory_total_bytes", "max_batch"}
- ``/hidden_states`` (model, texts, layer, method, seed) → token vectors of a layer projected to 2-D (PCA, t-SNE, UMAP)
- ``/cka`` (model_a, model_b, texts) → linear CKA between every pair of layers
- ``/nearest_contexts`` (model, text, position, k, layer) → the corpus tokens whose vectors are nearest (exBERT's search)
- ``/attribution`` (model, output, text, text_b, position, steps) → integrated gradients per token (Captum)
- ``/scaling_fit`` (law, x, y, n, bootstrap, seed) → a scaling law's parameters with bootstrap intervals
- ``/results`` (models, tasks, splits, main_only) → the published results, each row with its source
- ``/lab_runs`` (kind, group) → the labs' runs and the fine-tuning table
- ``/verdicts`` (group) → an ablation's verdicts, or every preset's latest
- ``/logit_lens`` (model, text, top_k) → per [MASK], what the model's own masked-LM head reads from every layer
- ``/head_importance`` (model, texts, steps, seeds, mode, target, task, items) → every head's importance (Michel et al. 2019) and the
  pruning curve against random orders
- ``/activation_patching`` (model, clean, corrupted, answer, foil, unit, position) → causal tracing: layers ×
  positions, or layers × heads

Each function's docstring gives its arguments and the keys it returns; the MCP tools are the same functions.

The functions below only translate between JSON and the library; every error a user can cause
comes back as a ``gradio.Error`` with the library's message and hint, never a traceback. Models are
loaded once per process through ``models.loader`` (the same cache and offline rules as Streamlit);
the queue runs at most ``BFE_GRADIO_CONCURRENCY`` (default 2) model calls at a time, and the two
model-free endpoints (masks, calculator) share a second queue of :data:`LIGHT_CONCURRENCY`, so every
call is queued and a flood of cheap calls never starves the model calls. Request bodies are limited
to :data:`MAX_BODY_BYTES`; an unknown endpoint is a 404.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from core.errors import ExplorerError  # noqa: E402
from services import requests as req  # noqa: E402

log = logging.getLogger("bert_family_explorer.gradio")
MAX_MODELS = 4
#: The largest request body (and upload) the API takes: its longest input is a 128-token sentence.
MAX_BODY_BYTES = 256 * 1024
#: Model-free calls (masks, calculator) that may run at once, in their own queue.
LIGHT_CONCURRENCY = 4
API_NAMES = frozenset({"fill_mask", "attention", "pseudo_perplexity", "permutation_masks", "calculator", "hidden_states", "cka",
                       "nearest_contexts", "attribution", "scaling_fit", "results", "lab_runs", "verdicts", "logit_lens",
                       "head_importance", "activation_patching"})


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


# ------------------------------------------------------------------------------------ the API functions


@friendly
def fill_mask(text: str, models: str, top_k: int = 5, mode: str = "independent") -> dict:
    """Fill the [MASK] tokens of a text with up to four masked-language models, their top predictions side by side.

    Args:
        text: the text, with [MASK] (or <mask>) where a word is hidden.
        models: comma-separated model ids (at most 4), e.g. "bert-base-uncased, roberta-base".
        top_k: predictions per mask, 1 to 20.
        mode: independent (each mask on its own) or sequential (fill the surest mask first, then the next).
    Returns:
        {"models": {id: [[{"token", "probability", "sequence", ...}] per mask]}, "errors": {id: message}}.
    """
    from core.errors import MAX_TEXT_CHARS as LONGEST
    from models import objectives

    text = req.text("The text", text, LONGEST, example="The cat sat on the [MASK].")
    top_k, mode = req.whole("top_k", top_k, 1, 20), req.choice("mode", mode, ("independent", "sequential"))
    ids = [req.model_id(m) for m in req.names(models, MAX_MODELS + 1) or []]
    if not ids:
        raise ExplorerError("Name at least one model.", "For example: bert-base-uncased, roberta-base")
    if len(ids) > MAX_MODELS:
        raise ExplorerError(f"At most {MAX_MODELS} models at once.")
    out, errors = {}, {}
    for mid in ids:
        try:
            out[mid] = [[asdict(p) for p in row] for row in objectives.fill_mask(mid, text, top_k, mode)]
        except ExplorerError as err:
            errors[mid] = str(err)
    if not out:
        raise ExplorerError(" ".join(f"{m}: {e}" for m, e in errors.items()))
    return {"models": out, "errors": errors}


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
    from core.errors import MAX_TEXT_CHARS as LONGEST
    from models.attention import extract_attention, result_stats

    model, text = req.model_id(model), req.text("The sentence", text, LONGEST, example="The cat sat on the mat.")
    text_pair = req.text("Sentence B", text_pair, LONGEST, empty_ok=True)
    layer, head = req.whole("layer", layer, 0, 1_000), req.whole("head", head, 0, 1_000)
    r = extract_attention(model, text, text_pair or None)
    if not (0 <= layer < r.layers and 0 <= head < r.heads):
        raise ExplorerError(f"{r.model_id} has layers 0–{r.layers - 1} and heads 0–{r.heads - 1}.")
    stats = result_stats(r)
    return {"model": r.model_id, "tokens": list(r.tokens), "segments": list(r.segments), "layer": layer, "head": head,
            "weights": [[round(float(v), 6) for v in row] for row in r.weights[layer, head]],
            "stats": {k: (None if v[layer, head] != v[layer, head] else float(v[layer, head])) for k, v in stats.items()},
            "truncated": r.truncated, "notices": list(r.notices)}


@friendly
def pseudo_perplexity(model: str, sentence: str) -> dict:
    """A masked-language model's pseudo-log-likelihood of a sentence (Salazar et al. 2020): each token masked in turn.

    Args:
        model: a masked-language-model id, e.g. bert-base-uncased.
        sentence: the sentence.
    Returns:
        {"tokens", "log_probs" (one per token), "pll" (their sum), "pppl" (pseudo-perplexity)}.
    """
    from core.errors import MAX_TEXT_CHARS as LONGEST
    from models.objectives import pseudo_log_likelihood

    r = pseudo_log_likelihood(req.model_id(model), req.text("The sentence", sentence, LONGEST, example="The cat sat on the mat."))
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
    from models import permutation as P

    tokens = P.word_tokens(sentence)
    spec = req.text("The order", order, P.MAX_ORDER_CHARS, empty_ok=True) or "left-to-right"
    k = req.whole("k", k, 0, P.MAX_TOKENS)
    n = len(tokens) - 2
    if spec in ("left-to-right", "right-to-left"):
        seq = P.make_order(spec, n)
    elif spec.startswith("random"):
        seed = spec.partition(":")[2] or "0"
        if not seed.isdigit():
            raise P.InvalidOrder("Write random:SEED with a whole-number seed, e.g. random:3.")
        seq = P.make_order("random", n, int(seed))
    else:
        seq = P.parse_order(spec, n)
    inputs = P.permutation_inputs(seq, k or None, specials=[n, n + 1])
    return {"tokens": tokens, "order": list(inputs.order), "targets": list(inputs.targets),
            "content_mask": P.content_mask(inputs).astype(int).tolist(), "query_mask": P.query_mask(inputs).astype(int).tolist(),
            "perm_mask": inputs.perm_mask[0].astype(int).tolist(), "target_mapping": inputs.target_mapping[0].astype(int).tolist()}


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
    from analysis import memory
    from analysis.params import parameter_breakdown
    from core import registry

    model, head = req.model_id(model), req.text("head", head, 40, empty_ok=True) or "base"
    precision, optimizer = req.text("precision", precision, 40), req.text("optimizer", optimizer, 40)
    gpu = req.text("gpu", gpu, 100)
    batch_size, seq_len = req.whole("batch_size", batch_size, 1, 100_000), req.whole("seq_len", seq_len, 1, 1_000_000)
    zero_stage, data_parallel = req.whole("zero_stage", zero_stage, 0, 3), req.whole("data_parallel", data_parallel, 1, 100_000)
    card = registry.find(model)
    if card is not None and not card.config:
        raise ExplorerError(f"{card.id} has no configuration in the catalog (it is catalog-only).", "Pick a downloadable model.")
    if card is not None:
        config = card.config
    else:  # any checkpoint: its config.json alone (a folder here, or a Hub id when online); no size limit, nothing loads
        from analysis.params import MAX_PARAMETERS
        from models.inspection import inspect

        config = inspect(model, max_params=MAX_PARAMETERS).config
    bd = parameter_breakdown(config, head)
    setup = memory.TrainingSetup(precision, optimizer, zero_stage, data_parallel).validate()
    est = memory.training_memory(bd, batch_size, seq_len, setup)
    fit = memory.max_batch_size(bd, gpu, seq_len, setup)
    return {"parameters": bd.total, "non_embedding": bd.non_embedding, "parts": bd.by_part(), "memory_bytes": est.components,
            "memory_total_bytes": est.total, "max_batch": {"gpu": fit.gpu, "seq_len": fit.seq_len, "batch": fit.max_batch}}


# ------------------------------------------------------------------- read-only views of the library (representations,
# attributions, scaling fits, the results database, the labs' finished runs and verdicts)

#: The most texts one hidden-states or CKA call takes through the API (the page's demo sets have up to 40).
MAX_TEXTS = 64
#: The most characters of one text (the pages' text boxes take 500).
MAX_TEXT_CHARS = 1_000
#: The most numbers one hidden-states answer carries (tokens × hidden size), so that an answer stays a few MB.
MAX_VECTOR_NUMBERS = 1_000_000
#: The most rows of a results or runs answer.
MAX_ROWS = 5_000
#: Bootstrap resamples one scaling fit may ask for (the Scaling page uses 200).
MAX_BOOTSTRAP = 1_000
#: Points × fits (1 + bootstrap) one fit may cost: about 4 s for L(N, D) on 2 cores (0.4 s per 50,000).
MAX_FIT_WORK = 500_000
ATTRIBUTION_OUTPUTS = ("similarity", "fill_mask", "sentence_relation", "replaced_token")


def jsonable(value: Any) -> Any:
    """``value`` with numpy numbers and arrays, tuples, dates and DataFrames made JSON, and NaN/inf as null
    (JSON has no NaN; Gradio would otherwise send an invalid document)."""
    import datetime as dt
    import math

    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame: its records
        return jsonable(value.to_dict("records"))
    return value


def _texts(texts: Any) -> list[str]:
    """One text per line (or a list of texts), within :data:`MAX_TEXTS` × :data:`MAX_TEXT_CHARS`."""
    return req.texts(texts, MAX_TEXTS, MAX_TEXT_CHARS, example="The bank raised its rates.")


@friendly
def hidden_states(model: str, texts: str, layer: int = -1, method: str = "pca", seed: int = 0,
                  include_vectors: bool = False) -> dict:
    """The hidden vectors of every token of some texts at one layer, projected to 2-D (the Representations page).

    Args:
        model: a model id (catalog id, Hub id or local folder).
        texts: one text per line (at most 64).
        layer: 0 is the embedding output, -1 the last layer.
        method: pca, tsne or umap.
        seed: the projection's random seed (t-SNE, UMAP).
        include_vectors: also return the vectors themselves (at most 1,000,000 numbers).
    Returns:
        {"model", "layers", "layer", "method", "tokens": [{"text_index", "position", "token", "word"}], "coords": [[x, y]],
        "vectors" (when asked), "notices"}: special tokens are left out.
    """
    from analysis import representations as R
    from core.errors import InvalidData
    from models.representations import hidden_states as states

    model, lines = req.model_id(model), _texts(texts)
    layer, seed = req.whole("layer", layer, -1, 1_000), req.whole("seed", seed, 0, 10**6)
    method, include_vectors = req.choice("method", method, R.METHODS), req.flag("include_vectors", include_vectors)
    reps = states(model, lines)
    layer = reps.layers if layer == -1 else layer
    x, where = reps.layer_matrix(layer)
    if len(where) > R.MAX_POINTS:
        raise InvalidData(f"{len(where):,} tokens: at most {R.MAX_POINTS:,} can be projected.", "Send fewer or shorter texts.")
    if include_vectors and x.size > MAX_VECTOR_NUMBERS:
        raise InvalidData(f"{x.shape[0]:,} tokens × {x.shape[1]:,} numbers is more than {MAX_VECTOR_NUMBERS:,}.",
                          "Send fewer texts, or leave include_vectors off.")
    coords = R.project(x, method, seed)
    tokens = [{"text_index": t, "position": p, "token": reps.items[t].tokens[p],
               "word": reps.items[t].word_texts[reps.items[t].words[p]] if reps.items[t].words[p] is not None else ""}
              for t, p in where]
    out = {"model": reps.model_id, "layers": reps.layers, "layer": layer, "method": method, "tokens": tokens,
           "coords": coords.round(6), "notices": list(reps.notices)}
    if include_vectors:
        out["vectors"] = x.round(6)
    return jsonable(out)


@friendly
def cka(model_a: str, model_b: str, texts: str) -> dict:
    """Linear CKA (Kornblith et al. 2019) between every layer of two models on the same texts, words aligned.

    Args:
        model_a: a model id (columns).
        model_b: a model id (rows); the same as model_a compares a model's layers with each other.
        texts: one text per line (at most 64).
    Returns:
        {"model_a", "model_b", "cka": rows = model_b's layers 0..L (0: embeddings), columns = model_a's,
        "best_match": for each of model_b's layers, model_a's most alike, "words"}.
    """
    from models.representations import cross_model_cka
    from models.representations import hidden_states as states

    model_a, model_b, lines = req.model_id(model_a), req.model_id(model_b), _texts(texts)
    a = states(model_a, lines)
    b = a if model_b == model_a else states(model_b, lines)
    r = cross_model_cka(a, b)
    return jsonable({"model_a": r.model_a, "model_b": r.model_b, "cka": r.cka.round(6), "best_match": r.best_match,
                     "words": r.words})


@friendly
def nearest_contexts(model: str, text: str, position: int = 1, k: int = 10, layer: int = -1) -> dict:
    """exBERT's search: the corpus tokens (WordNet's example sentences) whose vectors are nearest (cosine) to one
    token of a text. The first search at a layer builds the model's corpus index (about a minute on a CPU).

    Args:
        model: a model id.
        text: the text (at most 1,000 characters).
        position: the token's position, counting [CLS] as 0.
        k: neighbours to return, 1 to 100.
        layer: -1 is the last layer.
    Returns:
        {"model", "layer", "neighbours": [{"token", "sentence", "position", "similarity"}]}.
    """
    from models.representations import nearest_contexts as nearest

    model, line = req.model_id(model), req.text("The text", text, MAX_TEXT_CHARS, example="The bank raised its rates.")
    position, k, layer = req.whole("position", position, 0, 10_000), req.whole("k", k, 1, 100), req.whole("layer", layer, -1, 1_000)
    found = nearest(model, line, position, k, layer)
    return jsonable({"model": model, "layer": layer, "neighbours": [asdict(n) for n in found]})


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
    from models import attribution as A

    output, model = req.choice("output", output, ATTRIBUTION_OUTPUTS), req.model_id(model)
    a = req.text("The text", text, MAX_TEXT_CHARS, example="A man is playing the guitar.")
    b = req.text("Text B", text_b, MAX_TEXT_CHARS, empty_ok=output not in ("similarity", "sentence_relation"),
                 example="Someone performs music.")
    steps, position = req.whole("steps", steps, 1, A.MAX_STEPS), req.whole("position", position, 0, A.MAX_TOKENS)
    if output == "similarity":
        r = A.similarity(model, a, b, steps)
    elif output == "fill_mask":
        r = A.fill_mask(model, a, b or None, 0, steps)
    elif output == "sentence_relation":
        r = A.sentence_relation(model, a, b, steps)
    else:
        r = A.replaced_token(model, a, position, steps)
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
    from analysis import scaling
    from core.errors import InvalidData

    law = req.choice("law", law, scaling.LAWS)
    bootstrap, seed = req.whole("bootstrap", bootstrap, 0, MAX_BOOTSTRAP), req.whole("seed", seed, 0, 10**6)
    xs, ys = req.numbers("x", x), req.numbers("y", y)
    if scaling.LAWS[law].variables == 2:
        ns = req.numbers("n", n)
        if len(ns) != len(xs):
            raise InvalidData(f"chinchilla needs as many N as D values ({len(ns)} and {len(xs)}).")
        xs = [[a, b] for a, b in zip(ns, xs, strict=True)]  # type: ignore[misc]
    if len(ys) * (bootstrap + 1) > MAX_FIT_WORK:
        raise InvalidData(f"{len(ys):,} points × {bootstrap + 1:,} fits is more than {MAX_FIT_WORK:,} point-fits.",
                          f"Use fewer bootstrap resamples (at most {max(0, MAX_FIT_WORK // max(1, len(ys)) - 1):,} for "
                          f"{len(ys):,} points), or average the points first.")
    return jsonable(scaling.fit(law, xs, ys, bootstrap=bootstrap, seed=seed).to_dict())


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
    import difflib

    from analysis.results_db.queries import results_frame
    from core.errors import InvalidData

    wanted = {"model": req.names(models), "task": req.names(tasks), "split": req.names(splits)}
    df = results_frame(variants=not req.flag("main_only", main_only))
    for column, names in wanted.items():
        if names is None:
            continue
        known = {str(v).lower(): v for v in df[column].dropna().unique()}
        unknown = [w for w in names if w.lower() not in known]
        if unknown:
            close = difflib.get_close_matches(unknown[0].lower(), list(known), n=3, cutoff=0.5)
            raise InvalidData(f"No {column} {unknown[0][:60]!r} in the results database.",
                              ("Did you mean: " + ", ".join(known[c] for c in close) + "?") if close else
                              f"Known {column}s include: " + ", ".join(sorted(map(str, known.values()))[:12]) + ".")
        df = df[df[column].isin([known[w.lower()] for w in names])]
    cols = ["model", "variant", "family", "parameters", "task", "benchmark", "metric", "metric_name", "higher_is_better", "split",
            "setting", "value", "citation", "source", "table", "slides", "arxiv", "snapshot", "note", "origin"]
    return jsonable({"rows": df[cols].head(MAX_ROWS), "count": len(df), "truncated": len(df) > MAX_ROWS})


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
    from analysis.results_db import runs as R
    from services import lab

    kind = req.choice("kind", kind, ("all", "pretrain", "finetune"))
    frame = R.list_runs(group=req.text("group", group, 100, empty_ok=True) or None)
    frame = frame[frame["status"] == "finished"]
    if kind != "all":
        frame = frame[(frame["objective"] == lab.FINETUNE) == (kind == "finetune")]
    rows = [{"id": r["id"], "name": r["name"], "objective": r["objective"], "group": r["group"], "seconds": r["seconds"],
             "tokens": r["tokens"], "parameters": r["parameters"], "final_loss": r["curve"][-1][1] if r["curve"] else None,
             "evaluation": r["evaluation"], "config": r["config"], "finished_at": r["finished_at"]}
            for r in frame.head(MAX_ROWS).to_dict("records")]
    table = lab.finetune_table(frame)
    return jsonable({"runs": rows, "finetune_table": table, "finetune_delta": lab.finetune_delta(table), "count": len(frame),
                     "truncated": len(frame) > MAX_ROWS})


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
    from services import ablations

    group = req.text("group", group, 100, empty_ok=True)
    if not group:
        return jsonable({"verdicts": ablations.results_so_far()})
    report = ablations.report(group)
    report["runs"] = [{k: r[k] for k in ("id", "name", "arm", "replicate", "status", "seconds", "tokens", "flops")}
                      for r in report.get("runs", [])]
    return jsonable(report)


# ------------------------------------------------------------------------------------ the Blocks app


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
    from core.errors import MAX_TEXT_CHARS as LONGEST
    from models import interventions

    text = req.text("The text", text, LONGEST, example="The cat sat on the [MASK].")
    lens = interventions.logit_lens(req.model_id(model), text, req.whole("top_k", top_k, 1, 20))
    return jsonable({"model": lens.model_id, "tokens": lens.tokens, "positions": lens.positions, "answers": lens.answers,
                     "layers": [[asdict(r) for r in rows] for rows in lens.rows]})


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
    from analysis.tasks import BUILT_IN
    from models import interventions

    mid = req.model_id(model)
    target = req.choice("target", target, tuple(interventions.TARGETS))
    task = "" if task in ("", None) else req.choice("task", task, BUILT_IN)
    needs_texts = target == "masked-lm" or (target == "classifier" and isinstance(texts, str) and texts.strip() != "")
    lines = req.texts(texts, interventions.MAX_TEXTS, MAX_TEXT_CHARS, example="The cat sat on the mat.") if needs_texts else []
    steps, seeds = req.whole("steps", steps, 2, interventions.MAX_STEPS), req.whole("seeds", seeds, 2, interventions.MAX_SEEDS)
    mode = req.choice("mode", mode, ("zero", "mean"))
    items = req.whole("items", items, 8, interventions.MAX_ITEMS)
    curve = interventions.pruning_curve(mid, lines, steps, seeds, mode, target=target, task=task, items=items)
    imp = curve.importance
    body = {k: v for k, v in asdict(curve).items() if k not in ("importance", "correct")}
    return jsonable({"model": imp.model_id, "target": imp.target, "measure": imp.measure, "importance": imp.scores,
                     "raw": imp.raw, "loss": imp.loss, "ranked_on": imp.texts, "curve": body})


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
    from core.errors import MAX_TEXT_CHARS as LONGEST
    from models import interventions

    clean = req.text("The clean sentence", clean, LONGEST, example="Paris is the capital of [MASK].")
    corrupted = req.text("The corrupted sentence", corrupted, LONGEST, example="Rome is the capital of [MASK].")
    answer, foil = req.text("The answer", answer, 100), req.text("The foil", foil, 100)
    unit = req.choice("unit", unit, ("layer", "head"))
    where = req.whole("position", position, -1, 10**6)
    return jsonable(asdict(interventions.activation_patching(req.model_id(model), clean, corrupted, answer, foil, unit,
                                                             None if where < 0 else where)))


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

    from analysis import export
    from core.errors import ExplorerError

    fig = _heatmap(result)
    if fig is None:
        return None
    try:
        png, svg = export.to_png(fig), export.to_svg(fig)
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

    from analysis import memory
    from analysis.params import HEADS
    from core import registry

    loadable = [c.id for c in registry.loadable()]
    mlm = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
    # delete_cache: the heatmap files of an hour ago go (every hour), so a class's downloads do not fill the disk
    with gr.Blocks(title="BERT Family Explorer — widgets", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("## BERT Family Explorer — embeddable demos\nEach tab is also an API endpoint (see *Use via API* below).")
        with gr.Tab("Fill the mask"):
            t = gr.Textbox("Chickens cackle and [MASK] quack.", label="Text (write [MASK])")
            m = gr.Textbox("bert-base-uncased, roberta-base", label=f"Models (comma-separated, at most {MAX_MODELS})")
            k = gr.Slider(1, 20, 5, step=1, label="Top k")
            mode = gr.Radio(["independent", "sequential"], value="independent", label="Several masks")
            out = gr.JSON(label="Predictions")
            gr.Button("Fill", variant="primary").click(fill_mask, [t, m, k, mode], out, api_name="fill_mask")
        with gr.Tab("Attention"):
            am = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model (or type a Hub id / your folder)",
                             allow_custom_value=True)
            at = gr.Textbox("The cat sat on the mat because it was tired.", label="Sentence A")
            ap = gr.Textbox("", label="Sentence B (optional)")
            al = gr.Number(0, precision=0, label="Layer")
            ah = gr.Number(0, precision=0, label="Head")
            aj = gr.JSON(label="Attention of this head")
            plot = gr.Plot(label="Heatmap")
            files = gr.File(label="The heatmap as PNG (2x) and SVG, for slides", file_count="multiple")
            gr.Button("Show", variant="primary").click(attention, [am, at, ap, al, ah], aj, api_name="attention").then(
                _heatmap, aj, plot, api_visibility="private").then(_heatmap_files, aj, files, api_visibility="private")
        with gr.Tab("Pseudo-perplexity"):
            pm = gr.Dropdown(mlm, value="bert-base-uncased", label="Model (or type a Hub id / your folder)",
                             allow_custom_value=True)
            ps = gr.Textbox("A boy plays in the snow.", label="Sentence")
            pj = gr.JSON(label="Pseudo-likelihood")
            gr.Button("Score", variant="primary").click(pseudo_perplexity, [pm, ps], pj, api_name="pseudo_perplexity")
        with gr.Tab("XLNet permutation masks"):
            xs = gr.Textbox("New York is a city", label="Sentence (words)")
            xo = gr.Textbox("random:0", label="Order: left-to-right, right-to-left, random:SEED, or positions 2,0,1,…")
            xk = gr.Number(2, precision=0, label="K (0 = predict all)")
            xj = gr.JSON(label="Masks")
            gr.Button("Build", variant="primary").click(permutation_masks, [xs, xo, xk], xj, api_name="permutation_masks",
                                                       concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
        with gr.Tab("Parameters & memory"):
            cm = gr.Dropdown(loadable, value="bert-base-uncased", label="Model (its real config; or type a Hub id / your folder)",
                             allow_custom_value=True)
            ch = gr.Dropdown(list(HEADS), value="base", label="Head")
            cp = gr.Dropdown(list(memory.PRECISIONS), value="mixed", label="Precision")
            co = gr.Dropdown(list(memory.OPTIMIZERS), value="adamw", label="Optimizer")
            cb = gr.Number(8, precision=0, label="Batch per GPU")
            cs = gr.Number(128, precision=0, label="Sequence length")
            cz = gr.Number(0, precision=0, minimum=0, maximum=3, label="ZeRO stage (0–3)")
            cd = gr.Number(1, precision=0, label="Data-parallel GPUs")
            cg = gr.Dropdown(list(memory.GPUS), value="V100 16 GB", label="GPU")
            cj = gr.JSON(label="Counts and bytes")
            gr.Button("Compute", variant="primary").click(calculator, [cm, ch, cp, co, cb, cs, cz, cd, cg], cj, api_name="calculator",
                                                          concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
        demo_texts = "The bank raised its rates.\nWe walked along the river bank.\nThe bat flew out of the cave."
        with gr.Tab("Hidden states"):
            hm = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model (or type a Hub id / your folder)",
                             allow_custom_value=True)
            ht = gr.Textbox(demo_texts, lines=4, label=f"Texts, one per line (at most {MAX_TEXTS})")
            hl = gr.Number(-1, precision=0, label="Layer (0: embeddings, -1: the last)")
            hp = gr.Dropdown(["pca", "tsne", "umap"], value="pca", label="Projection")
            hs = gr.Number(0, precision=0, label="Seed")
            hv = gr.Checkbox(False, label="Include the vectors")
            hj = gr.JSON(label="Tokens, 2-D coordinates (and vectors)")
            gr.Button("Project", variant="primary").click(hidden_states, [hm, ht, hl, hp, hs, hv], hj, api_name="hidden_states")
        with gr.Tab("CKA"):
            ka = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model A (columns)", allow_custom_value=True)
            kb = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model B (rows)", allow_custom_value=True)
            kt = gr.Textbox(demo_texts, lines=4, label=f"Texts, one per line (at most {MAX_TEXTS})")
            kj = gr.JSON(label="Linear CKA, layer by layer")
            gr.Button("Compare", variant="primary").click(cka, [ka, kb, kt], kj, api_name="cka")
        with gr.Tab("Nearest contexts"):
            nm = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model", allow_custom_value=True)
            nt = gr.Textbox("We walked along the river bank.", label="Text")
            npos = gr.Number(6, precision=0, label="Token position ([CLS] is 0)")
            nk = gr.Number(10, precision=0, label="Neighbours (1–100)")
            nl = gr.Number(-1, precision=0, label="Layer (-1: the last)")
            nj = gr.JSON(label="Nearest corpus tokens")
            gr.Button("Search", variant="primary").click(nearest_contexts, [nm, nt, npos, nk, nl], nj, api_name="nearest_contexts")
        with gr.Tab("Attribution"):
            im = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model", allow_custom_value=True)
            io = gr.Dropdown(list(ATTRIBUTION_OUTPUTS), value="similarity", label="Output explained")
            it = gr.Textbox("A man is playing the guitar on stage.", label="Text (sentence A; with [MASK] for fill_mask)")
            ib = gr.Textbox("Someone performs music.", label="Sentence B (or the fill-mask candidate)")
            ip = gr.Number(0, precision=0, label="Token position (replaced_token)")
            isteps = gr.Number(50, precision=0, label="Integrated-gradients steps (1–200)")
            ij = gr.JSON(label="Integrated gradients and gradient × input per token")
            gr.Button("Explain", variant="primary").click(attribution, [im, io, it, ib, ip, isteps], ij, api_name="attribution")
        with gr.Tab("Scaling-law fit"):
            sl = gr.Dropdown(["power", "power_const", "chinchilla"], value="power", label="Law")
            sx = gr.Textbox("1e6, 3e6, 1e7, 3e7, 1e8", label="x (or D for chinchilla), comma-separated")
            sy = gr.Textbox("4.2, 3.9, 3.6, 3.35, 3.1", label="Loss, comma-separated")
            sn = gr.Textbox("", label="N (chinchilla only)")
            sb = gr.Number(200, precision=0, label=f"Bootstrap resamples (0–{MAX_BOOTSTRAP})")
            ss = gr.Number(0, precision=0, label="Seed")
            sj = gr.JSON(label="Fitted parameters with 95% intervals")
            gr.Button("Fit", variant="primary").click(scaling_fit, [sl, sx, sy, sn, sb, ss], sj, api_name="scaling_fit")
        with gr.Tab("Results database"):
            rm = gr.Textbox("", label="Models (comma-separated; empty: all)")
            rt = gr.Textbox("", label="Tasks (comma-separated, e.g. MNLI, SST-2; empty: all)")
            rs = gr.Textbox("", label="Splits (dev, test; empty: all)")
            rv = gr.Checkbox(True, label="Main results only (no ablation variants)")
            rj = gr.JSON(label="Results with their sources")
            gr.Button("Query", variant="primary").click(results, [rm, rt, rs, rv], rj, api_name="results",
                                                        concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
        with gr.Tab("Lab runs & verdicts"):
            gr.Markdown("Read-only: the finished runs of the pre-training and fine-tuning labs on this server, and the "
                        "ablations' verdicts. Training is started from the Streamlit app's lab pages, not from here.")
            lk = gr.Radio(["all", "pretrain", "finetune"], value="all", label="Runs")
            lg = gr.Textbox("", label="Experiment group (empty: all)")
            lj = gr.JSON(label="Finished runs")
            gr.Button("List runs").click(lab_runs, [lk, lg], lj, api_name="lab_runs",
                                         concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
            vg = gr.Textbox("", label="Experiment group for its verdicts (empty: every preset's latest)")
            vj = gr.JSON(label="Verdicts")
            gr.Button("Show verdicts").click(verdicts, [vg], vj, api_name="verdicts",
                                             concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
        with gr.Tab("Which parts matter"):
            gr.Markdown("Masked-LM models: what each layer predicts (logit lens), which heads matter (Michel et al. 2019) "
                        "and where a prediction is carried (activation patching).")
            wm = gr.Dropdown(mlm, value=mlm[0] if mlm else None, label="Model", allow_custom_value=True)
            wt = gr.Textbox("The cat sat on the [MASK] because it was tired.", label="Text with [MASK] (logit lens)")
            wk = gr.Slider(1, 20, 5, step=1, label="Top k per layer")
            wj = gr.JSON(label="Layer by layer")
            gr.Button("Read every layer", variant="primary").click(logit_lens, [wm, wt, wk], wj, api_name="logit_lens")
            ranked = "\n".join(["The bank raised its rates.", "We walked along the river bank.", "The bat flew out of the cave.",
                                "She plays the guitar on stage.", "The cat sat on the mat.", "A dog ran in the park."])
            ws = gr.Textbox(ranked, lines=6, label="Sentences, one per line (4–64; heads ranked on lines 1, 3, 5, …, scored on 2, 4, 6, …)")
            wsteps = gr.Number(6, precision=0, label="Pruning steps (2–24)")
            wseeds = gr.Number(3, precision=0, label="Random orders (2–10)")
            wmode = gr.Radio(["zero", "mean"], value="zero", label="A removed head outputs")
            wtarget = gr.Radio(["masked-lm", "classifier", "probe"], value="masked-lm", label="Scored by",
                               info="classifier: a Fine-tuning lab run (its own task); probe: any encoder, a probe fitted on the task")
            wtask = gr.Dropdown(["", "supersense", "wic"], value="", label="Task (probe; optional for a classifier)")
            witems = gr.Number(128, precision=0, label="Test items (classifier, probe: 8–512)")
            wi = gr.JSON(label="Head importance and the pruning curve")
            gr.Button("Rank the heads").click(head_importance, [wm, ws, wsteps, wseeds, wmode, wtarget, wtask, witems], wi,
                                              api_name="head_importance")
            wc = gr.Textbox("the cat sat on the [MASK] .", label="Clean sentence")
            wx = gr.Textbox("the dog sat on the [MASK] .", label="Corrupted sentence (same token length)")
            wa = gr.Textbox("mat", label="Answer (one token)")
            wf = gr.Textbox("floor", label="Foil (one token)")
            wu = gr.Radio(["layer", "head"], value="layer", label="Patch each layer's output, or each head's")
            wpos = gr.Number(-1, precision=0, label="Heads: the position patched (-1: every position)")
            wp = gr.JSON(label="Layers × positions (or layers × heads)")
            gr.Button("Patch").click(activation_patching, [wm, wc, wx, wa, wf, wu, wpos], wp, api_name="activation_patching")
    from core.settings import get_settings

    return demo.queue(default_concurrency_limit=get_settings().gradio_concurrency, max_size=256)


class UnknownEndpoint404:
    """ASGI middleware: a call to an API name the app does not have is a 404, not Gradio's 500.

    Gradio raises ``FnIndexInferError`` deep in its route for ``/gradio_api/call/<unknown>``, which
    reaches the client as "Internal Server Error"; this answers before the route runs.
    """

    _CALL = re.compile(r"^/gradio_api/(?:call|run)/(?:v2/)?([^/]+)/?$")

    def __init__(self, app: Any, names: frozenset[str] = API_NAMES) -> None:
        self.app, self.names = app, names

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and (m := self._CALL.match(scope.get("path", ""))) and m.group(1) not in self.names:
            body = json.dumps({"detail": f"No endpoint /{m.group(1)[:60]}; see /gradio_api/info."}).encode()
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def launch_options() -> dict[str, Any]:
    """What ``launch()`` needs beyond host and port: request-size limits and the 404 for unknown endpoints."""
    from starlette.middleware import Middleware

    return {"max_file_size": MAX_BODY_BYTES, "app_kwargs": {"max_body_size": MAX_BODY_BYTES, "middleware": [Middleware(UnknownEndpoint404)]}}


def mcp_json_text() -> None:
    """Make the MCP server send each tool's JSON object as JSON text.

    Gradio's MCP server (``gradio.mcp.GradioMCPServer.postprocess_output_data``) sends a dict as ``str(dict)``: a
    Python repr (``None``, ``True``, single quotes) that an assistant's JSON parser rejects. This wraps it so that
    dicts and lists go out as ``json.dumps`` and files and images as before. Gradio is pinned; the MCP test checks
    that every tool's text parses as JSON, so a Gradio that changes this method fails it.
    """
    from gradio.mcp import GradioMCPServer

    original = GradioMCPServer.postprocess_output_data
    if getattr(original, "_bfe_json", False):
        return

    def postprocess(self: Any, data: Any, root_url: str) -> list[Any]:
        if all(isinstance(item, dict | list) and not (isinstance(item, dict) and "path" in item and "meta" in item) for item in data):
            return [self.types.TextContent(type="text", text=json.dumps(item, ensure_ascii=False)) for item in data]
        return original(self, data, root_url)

    postprocess._bfe_json = True  # type: ignore[attr-defined]
    GradioMCPServer.postprocess_output_data = postprocess  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    import gradio as gr

    parser = argparse.ArgumentParser(description="BERT Family Explorer: Gradio widgets and API")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", os.environ.get("PORT", "7860"))))
    args = parser.parse_args(argv)
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
    from core.settings import get_settings

    mcp = get_settings().gradio_mcp
    if mcp:
        mcp_json_text()
    build().launch(server_name=args.host, server_port=args.port, show_error=True, theme=theme, footer_links=["api"],
                   mcp_server=mcp, **launch_options())


if __name__ == "__main__":
    main()
