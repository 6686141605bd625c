"""The Representations page's use cases, shared with the Gradio endpoints ``/hidden_states``, ``/cka``,
``/nearest_contexts`` and ``/attribution``: a model's token vectors for some texts, projected to 2-D; how contextual
they are and how two models' layers match (CKA); exBERT's nearest contexts; and which input tokens drive an output.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from analysis import representations as geometry
from core.errors import MAX_LINE_CHARS, InvalidData
from models.representations import Representations
from services import requests as req
from services.calls import Call, direct

__all__ = ["BOUNDS", "MAX_FOCUS_CHARS", "MAX_LINE_CHARS", "MAX_TEXTS", "METHODS", "OUTPUTS", "Projection", "Representations", "cka", "compare",
           "explain", "focus_words", "nearest", "project", "project_vectors", "similarity", "states"]
METHODS = geometry.METHODS
#: What an attribution explains, with the model it needs.
OUTPUTS = {"similarity": "similarity of two sentences (any encoder)", "fill_mask": "a fill-mask prediction",
           "sentence_relation": "NSP / SOP: does B follow A?", "replaced_token": "ELECTRA: was this token replaced?"}
#: Texts one request takes (the demo sets have up to 40), each within core.errors.MAX_LINE_CHARS.
MAX_TEXTS = 100
#: The bounds (inclusive) of each whole number a request takes, by field: the page's widgets, its links and the Gradio
#: tabs use the same. "steps" and "replaced_position" are models.attribution's MAX_STEPS and MAX_TOKENS, written out so
#: that a page does not import torch (a test keeps them equal); "position" is a token of one line, "layer" -1 the last.
BOUNDS: dict[str, tuple[int, int]] = {"layer": (-1, 1_000), "seed": (0, 10**6), "position": (0, 10_000), "k": (1, 100),
                                      "steps": (1, 200), "replaced_position": (0, 256)}
#: The largest CSV of one's own vectors, in MB (the upload box's limit).
MAX_UPLOAD_MB = max(1, geometry.MAX_UPLOAD_BYTES // 2**20)
#: Numbers one answer may carry as raw vectors (tokens × hidden size), so that it stays a few MB.
MAX_VECTOR_NUMBERS = 1_000_000
EXAMPLE = "The bank raised its rates."
#: The longest list of words a projection keeps, as typed ("bank, bat").
MAX_FOCUS_CHARS = 200


def texts(value: Any) -> list[str]:
    """One text per line (or a list of texts), within :data:`MAX_TEXTS` × :data:`MAX_LINE_CHARS`."""
    return req.texts(value, MAX_TEXTS, MAX_LINE_CHARS, example=EXAMPLE)


def states(model: str, lines: Any, *, call: Call = direct) -> Representations:
    """Every layer's hidden vector of every token of ``lines`` (0: the embeddings)."""
    from models.representations import hidden_states

    return call(hidden_states, req.model_id(model), texts(lines))


class TooFewTokens(InvalidData):
    """Fewer than three tokens to project: a state to explain (widen the words), not a fault."""


@dataclass(frozen=True)
class Projection:
    """The tokens drawn (special tokens left out) and their 2-D coordinates; ``vectors`` are the layer's own."""

    model: str
    layers: int
    layer: int
    method: str
    tokens: list[dict[str, Any]]
    coords: np.ndarray
    vectors: np.ndarray
    notices: list[str] = field(default_factory=list)

    def to_json(self, include_vectors: bool = False) -> dict:
        out = {"model": self.model, "layers": self.layers, "layer": self.layer, "method": self.method, "tokens": self.tokens,
               "coords": self.coords.round(6), "notices": self.notices}
        if include_vectors:
            if self.vectors.size > MAX_VECTOR_NUMBERS:
                raise InvalidData(f"{self.vectors.shape[0]:,} tokens × {self.vectors.shape[1]:,} numbers is more than "
                                  f"{MAX_VECTOR_NUMBERS:,}.", "Send fewer texts, or leave the vectors out.")
            out["vectors"] = self.vectors.round(6)
        return out


def projection_request(layer: int, method: str, seed: int) -> tuple[int, str, int]:
    """A projection's layer (-1: the last), method and seed, checked before any model runs."""
    return req.bounded("layer", layer, BOUNDS), req.choice("method", method, METHODS), req.bounded("seed", seed, BOUNDS)


def focus_words(typed: str) -> set[str]:
    """The words a projection keeps (:func:`project`'s ``focus``) from a comma-separated list as typed: lower case, the
    empty set for none."""
    words = req.text("The words kept", typed, MAX_FOCUS_CHARS, empty_ok=True).split(",")
    return {w.strip().lower() for w in words if w.strip()}


def project(reps: Representations, layer: int = -1, method: str = "pca", seed: int = 0, focus: set[str] | None = None) -> Projection:
    """The vectors of ``reps``'s tokens at ``layer`` (-1: the last) projected by ``method``; only the tokens of the words in
    ``focus`` when given (lower case, punctuation stripped); the first ``MAX_POINTS`` when there are more (with a notice)."""
    layer, method, seed = projection_request(layer, method, seed)
    layer = reps.layers if layer == -1 else layer
    x, where = reps.layer_matrix(layer)
    tokens, keep = [], []
    for row, (t, p) in enumerate(where):
        item = reps.items[t]
        word = item.word_texts[item.words[p]] if item.words[p] is not None else ""
        if not focus or word.lower().strip(".,;:!?\"'") in focus:
            tokens.append({"text_index": t, "position": p, "token": item.tokens[p], "word": word})
            keep.append(row)
    notices = list(reps.notices)
    if len(keep) > geometry.MAX_POINTS:
        notices.append(f"{len(keep):,} tokens: the first {geometry.MAX_POINTS:,} are drawn.")
        tokens, keep = tokens[: geometry.MAX_POINTS], keep[: geometry.MAX_POINTS]
    if len(keep) < 3:
        raise TooFewTokens(f"Fewer than three tokens match ({len(keep)}).", "Widen the words kept, or add sentences.")
    vectors = x[keep]
    return Projection(reps.model_id, reps.layers, layer, method, tokens, geometry.project(vectors, method, seed), vectors, notices)


def project_vectors(raw: bytes, method: str = "pca", seed: int = 0) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Vectors of one's own (a CSV: one row per item, an optional 'label' column): the matrix, its projection, the names."""
    vectors, names = geometry.parse_vectors_csv(raw)
    return vectors, geometry.project(vectors, req.choice("method", method, METHODS), req.bounded("seed", seed, BOUNDS)), names


def senses() -> Any:
    """The demo set: sentences with 'bank', 'bat', 'light' and 'spring' in their senses (word, sense, sentence)."""
    import pandas as pd

    from models.representations import SENSES

    return pd.read_csv(SENSES)


def similarity(reps: Representations) -> Any:
    """How contextual ``reps``'s vectors are, layer by layer, and the linear CKA between its layers
    (``models.representations.LayerSimilarity``)."""
    from models.representations import layer_similarity

    return layer_similarity(reps)


def compare(a: Representations, b: Representations) -> Any:
    """Linear CKA between every layer of two models on the same texts, words aligned (``CrossModelCKA``)."""
    from models.representations import cross_model_cka

    return cross_model_cka(a, b)


def cka(model_a: str, model_b: str, lines: Any, *, call: Call = direct) -> Any:
    """:func:`compare` from model ids and texts (one model's layers with each other when the ids are the same)."""
    lines = texts(lines)
    a = states(model_a, lines, call=call)
    return compare(a, a if req.model_id(model_b) == a.model_id else states(model_b, lines, call=call))


def nearest(model: str, text: str, position: int, k: int = 10, layer: int = -1, *, call: Call = direct) -> list[Any]:
    """exBERT's search: the corpus tokens whose vectors at ``layer`` are nearest (cosine) to ``text``'s token ``position``."""
    from models.representations import nearest_contexts

    line = req.text("The text", text, MAX_LINE_CHARS, example=EXAMPLE)
    return call(nearest_contexts, req.model_id(model), line, req.bounded("position", position, BOUNDS),
                req.bounded("k", k, BOUNDS), req.bounded("layer", layer, BOUNDS))


def neighbours_json(model: str, layer: int, found: list[Any]) -> dict:
    return {"model": model, "layer": layer, "neighbours": [asdict(n) for n in found]}


def explain(output: str, model: str, text: str, text_b: str = "", position: int = 0, steps: int = 50, *,
            call: Call = direct) -> Any:
    """Integrated gradients and gradient × input for one of :data:`OUTPUTS` (Captum): ``text_b`` is sentence B, or the
    fill-mask candidate (empty: the top prediction); ``position`` the token asked about for ``replaced_token``."""
    from models import attribution

    output, model = req.choice("output", output, OUTPUTS), req.model_id(model)
    a = req.text("The text", text, MAX_LINE_CHARS, example="A man is playing the guitar.")
    b = req.text("Text B", text_b, MAX_LINE_CHARS, empty_ok=output not in ("similarity", "sentence_relation"),
                 example="Someone performs music.")
    steps = req.bounded("steps", steps, BOUNDS)
    position = req.whole("position", position, *BOUNDS["replaced_position"]) if output == "replaced_token" else 0
    if output == "similarity":
        return call(attribution.similarity, model, a, b, steps)
    if output == "fill_mask":
        return call(attribution.fill_mask, model, a, b or None, 0, steps)
    if output == "sentence_relation":
        return call(attribution.sentence_relation, model, a, b, steps)
    return call(attribution.replaced_token, model, a, position, steps)
