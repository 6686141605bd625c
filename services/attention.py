"""The attention explorer's use case: a sentence (or a pair) through a model, every head's weights, one head's view.

The Attention page and the Gradio ``/attention`` endpoint both call :func:`run` (validated text, the model's weights)
and :func:`head` (one head's weights and statistics, its range checked); the page draws them, the endpoint sends
:meth:`HeadView.to_json`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import MAX_TEXT_CHARS, ExplorerError
from models import attention as extraction
from models.attention import STAT_LABELS, AttentionResult
from models.neuron_view import NOT_PLAIN
from services import requests as req
from services.calls import Call, direct

__all__ = ["BOUNDS", "NOT_PLAIN", "STAT_LABELS", "AttentionResult", "HeadView", "WordQuestion", "align", "bertviz", "head", "query_key",
           "result_stats", "rollout", "run", "stats_rows", "word_question"]
EXAMPLE = "The cat sat on the mat."
#: The bounds (inclusive) of the numbers a request takes, by field (a model's own layers and heads are checked after
#: it is read); the pages' widgets, links and the Gradio tab use the same.
BOUNDS: dict[str, tuple[int, int]] = {"layer": (0, 1_000), "head": (0, 1_000)}


def run(model: str, text: str, pair: str = "", *, call: Call = direct) -> AttentionResult:
    """Every layer's and head's attention weights of ``model`` over ``text`` (and ``pair``, sentence B, when given)."""
    from models.attention import extract_attention

    model = req.model_id(model)
    text = req.text("The text", text, MAX_TEXT_CHARS, example=EXAMPLE)
    pair = req.text("Sentence B", pair, MAX_TEXT_CHARS, empty_ok=True)
    return call(extract_attention, model, text, pair or None)


@dataclass(frozen=True)
class HeadView:
    """One head of a result: its T × T weights (row: the attending token) and its statistics (NaN: no such token)."""

    result: AttentionResult
    layer: int
    head: int
    weights: np.ndarray
    stats: dict[str, float]

    def caption(self) -> str:
        """The head's statistics in one line, as the page prints them under a chart."""
        return f"Layer {self.layer}, head {self.head}: " + " · ".join(
            f"{STAT_LABELS[k]}: {'—' if v != v else f'{v:.3f}'}" for k, v in self.stats.items())

    def to_json(self) -> dict:
        r = self.result
        return {"model": r.model_id, "tokens": list(r.tokens), "segments": list(r.segments), "layer": self.layer,
                "head": self.head, "weights": [[round(float(v), 6) for v in row] for row in self.weights],
                "stats": {k: (None if v != v else v) for k, v in self.stats.items()}, "truncated": r.truncated,
                "notices": list(r.notices)}


def head_request(layer: int, head: int) -> tuple[int, int]:
    """A head's layer and index (from 0) as whole numbers, checked before any model runs (the model's own range is
    checked by :func:`head` once its size is known)."""
    return req.bounded("layer", layer, BOUNDS), req.bounded("head", head, BOUNDS)


def head(result: AttentionResult, layer: int, head: int) -> HeadView:
    """Layer ``layer``, head ``head`` (from 0) of ``result``; :class:`ExplorerError` naming the model's range."""
    layer, head = head_request(layer, head)
    if not (0 <= layer < result.layers and 0 <= head < result.heads):
        raise ExplorerError(f"{result.model_id} has layers 0–{result.layers - 1} and heads 0–{result.heads - 1}.")
    # this head's measures only: every head's (result_stats) cost a second at 512 tokens for one caption
    one = extraction.head_stats(result.weights[layer:layer + 1, head:head + 1], result.tokens, result.cls_like, result.sep_like)
    stats = {k: float(v[0, 0]) for k, v in one.items()}
    return HeadView(result, layer, head, result.weights[layer, head], stats)


#: Tokens above which the bertviz views hold one layer: the full view grows past a few MB (layers × T²).
BERTVIZ_ALL_LAYERS = 128


def bertviz(result: AttentionResult, view: str, layer: int) -> str:
    """bertviz's head or model view of ``result`` as one offline HTML document (its JavaScript inside); above
    :data:`BERTVIZ_ALL_LAYERS` tokens it holds ``layer`` only."""
    from models.attention_html import bertviz_html

    long = len(result.tokens) > BERTVIZ_ALL_LAYERS
    return bertviz_html(result, view, layer=layer, only_layers=[layer] if long else None)


def query_key(model: str, text: str, layer: int, head: int, *, call: Call = direct):
    """bertviz's neuron view for one head: its queries, keys and their products (``models.neuron_view.QueryKey``)."""
    from models.neuron_view import query_key as read

    text = req.text("The sentence", text, MAX_TEXT_CHARS, example=EXAMPLE)
    return call(read, req.model_id(model), text, req.bounded("layer", layer, BOUNDS), req.bounded("head", head, BOUNDS))


def result_stats(r: AttentionResult) -> dict[str, np.ndarray]:
    """Every head's statistics over ``r`` (Clark et al. 2019's measures, :data:`STAT_LABELS`): measure → (layers × heads),
    NaN where the text has no token the measure needs. The page's per-head grid, the head's caption (:func:`head`) and
    the statistics CSV all read these, so they agree."""
    return extraction.result_stats(r)


def stats_rows(stats: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """:func:`result_stats` as the statistics CSV's rows: one per (layer, head), every measure a column."""
    return extraction.stats_rows(stats)


def rollout(weights: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020) of a result's weights, (layers, T, T): row i of layer l, how much token i
    draws on each input token up to layer l. ``residual``: the share kept for the residual path, in [0, 1] (checked
    here; the paper's 0.5 by default)."""
    return extraction.rollout(weights, req.number("residual", residual, 0.0, 1.0))


def align(a: AttentionResult, b: AttentionResult) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Two models' results on the same text side by side: (the words both cover, A's and B's attention between those
    words, each (layers, heads, W, W)), so that two tokenizers share one grid. :class:`ExplorerError` for two results
    on different texts."""
    return extraction.align(a, b)


def rollout_row(model: str, text: str, pair: str, row: int, *, call: Call = direct) -> np.ndarray:
    """How much token ``row`` attends to each token through all layers (attention rollout, Abnar & Zuidema 2020)."""
    r = run(model, text, pair, call=call)
    return rollout(r.weights)[-1][min(row, len(r.tokens) - 1)]


@dataclass(frozen=True)
class WordQuestion:
    """A class's question about one head: which token does ``query`` (the last word of sentence A) attend to most?
    ``choices``: the text's tokens (special tokens left out, each once, at most 64); ``weights``: the head's weight on
    each choice from the query (a token that occurs twice: summed)."""

    prompt: str
    query: str
    choices: tuple[str, ...]
    weights: dict[str, float]


def word_question(result: AttentionResult, layer: int, head_index: int) -> WordQuestion | None:
    """The question a teacher can ask about layer ``layer``, head ``head_index``; None for a text with no word."""
    from analysis.results_db.classes import MAX_ANSWER_CHARS, MAX_CHOICES

    view = head(result, layer, head_index)
    words = [i for i, t in enumerate(result.tokens) if not result.special[i] and any(ch.isalpha() for ch in t)]
    in_a = [i for i in words if result.sentence_b_start is None or i < result.sentence_b_start]
    if not in_a:
        return None
    qi = in_a[-1]
    weights: dict[str, float] = {}
    for i, tok in enumerate(result.tokens):
        if not result.special[i] and tok.strip():
            t = tok.strip()[:MAX_ANSWER_CHARS]
            weights[t] = weights.get(t, 0.0) + float(view.weights[qi, i])
    if len(weights) > MAX_CHOICES:  # the heaviest keys, then the query's own token
        keep = sorted(weights, key=lambda t: -weights[t])[:MAX_CHOICES]
        weights = {t: w for t, w in weights.items() if t in keep}
    query = result.tokens[qi].strip()
    return WordQuestion(f"In layer {layer}, head {head_index}, which token of the text (not [CLS] or [SEP]) does “{query}” attend to most?", query,
                        tuple(weights), weights)
