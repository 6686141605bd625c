"""XLNet's permutation language modelling as use cases: a factorisation order, the two streams' masks, live
predictions, the self-check, BERT against XLNet on "New York", and segment recurrence.

The Permutation page and the Gradio ``/permutation_masks`` endpoint share :func:`order` (every way of naming an order)
and :func:`masks`; the model-backed calls run through ``call``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import ExplorerError
from models.permutation import MAX_ORDER_CHARS, MAX_TOKENS, InvalidOrder, PermutationInputs, SelfCheck
from services import requests as req
from services.calls import Call, direct

__all__ = ["BOUNDS", "KINDS", "MAX_ORDER_CHARS", "MAX_PARAGRAPH_CHARS", "MAX_SENTENCE_CHARS", "MAX_TOKENS", "MAX_WORD_CHARS", "Masks", "SelfCheck",
           "masks", "new_york", "order", "predictions", "segments", "self_check", "tokens"]
#: How an order is named: a direction, a seeded shuffle, or the positions themselves.
KINDS = ("left-to-right", "right-to-left", "random", "custom")
MAX_SENTENCE_CHARS = 400
#: The longest word of the New York example, and the longest paragraph the recurrence view reads in segments.
MAX_WORD_CHARS = 50
MAX_PARAGRAPH_CHARS = 4_000
#: The bounds (inclusive) of each whole number a request takes, by field; the page's widgets, its links and the Gradio
#: tab use the same. "k" 0 predicts every position; "segment" and "memory" are Transformer-XL's lengths in tokens.
BOUNDS: dict[str, tuple[int, int]] = {"seed": (0, 10**6), "k": (0, MAX_TOKENS), "target": (0, MAX_TOKENS), "segment": (1, 64),
                                      "memory": (0, 64)}


def tokens(text: str, model: str | None = None, *, call: Call = direct) -> tuple[list[int] | None, list[str]]:
    """``text``'s tokens with XLNet's trailing ``<sep> <cls>``: the tokenizer of ``model`` (an XLNet on this machine), or
    the words themselves when ``model`` is None (the masks are the same; the ids are then None)."""
    from models import permutation

    text = req.text("The sentence", text, MAX_SENTENCE_CHARS, example="New York is a city .")
    if model is None:
        return None, permutation.word_tokens(text)
    return call(permutation.tokens_for, req.model_id(model), text)


def order(kind: str, n: int, seed: int = 0, custom: str = "") -> list[int]:
    """A factorisation order of ``n`` positions: ``kind`` left-to-right, right-to-left, random (with ``seed``), or
    custom (``custom``: the positions, comma-separated). ``kind`` may also be a spec: ``random:SEED`` or positions."""
    from models import permutation

    kind = req.text("The order", kind, MAX_ORDER_CHARS, empty_ok=True) or "left-to-right"
    if kind.startswith("random:"):
        seed_text = kind.partition(":")[2]
        if not seed_text.isdigit():
            raise InvalidOrder("Write random:SEED with a whole-number seed, e.g. random:3.")
        kind, seed = "random", int(seed_text)
    elif kind not in KINDS:
        kind, custom = "custom", kind
    if kind == "custom":
        return permutation.parse_order(req.text("The order", custom, MAX_ORDER_CHARS), n)
    return permutation.make_order(kind, n, req.bounded("seed", seed, BOUNDS))


@dataclass(frozen=True)
class Masks:
    """The two streams' masks for one order (1: may attend) and the targets (the last ``k`` positions of the order)."""

    tokens: list[str]
    inputs: PermutationInputs
    content: np.ndarray
    query: np.ndarray

    @property
    def targets(self) -> list[int]:
        return list(self.inputs.targets)

    def seen_by(self, target: int) -> list[int]:
        """The positions ``target`` is predicted from."""
        from models.permutation import conditioned_on

        return conditioned_on(self.inputs, target)

    def rows(self) -> list[dict[str, Any]]:
        """One row per pair of tokens: who may see whom in each stream, and XLNet's ``perm_mask``."""
        t, i = self.tokens, self.inputs
        return [{"from": a, "from_token": t[a], "to": b, "to_token": t[b], "content_sees": bool(self.content[a, b]),
                 "query_sees": bool(self.query[a, b]), "perm_mask": int(i.perm_mask[0, a, b])}
                for a in range(len(t)) for b in range(len(t))]

    def to_json(self) -> dict:
        i = self.inputs
        return {"tokens": self.tokens, "order": list(i.order), "targets": list(i.targets),
                "content_mask": self.content.astype(int).tolist(), "query_mask": self.query.astype(int).tolist(),
                "perm_mask": i.perm_mask[0].astype(int).tolist(), "target_mapping": i.target_mapping[0].astype(int).tolist()}


def masks(tokens: list[str], order: list[int], k: int = 0) -> Masks:
    """XLNet's content and query masks for ``order`` over ``tokens`` (the last two: ``<sep> <cls>``, seen by all),
    predicting the last ``k`` positions of the order (0: all)."""
    from models import permutation

    n = len(tokens) - 2
    k = req.bounded("k", k, BOUNDS)
    inputs = permutation.permutation_inputs(order, min(k, n) or None, specials=[n, n + 1])
    return Masks(tokens, inputs, permutation.content_mask(inputs), permutation.query_mask(inputs))


def predictions(model: str, text: str, order: list[int], k: int, *, call: Call = direct) -> list[Any]:
    """XLNet's top-5 predictions for the last ``k`` positions of ``order``."""
    from models.permutation import predict_last_k

    return call(predict_last_k, req.model_id(model), text, list(order), req.whole("k", k, 1, BOUNDS["k"][1]), 5)  # at least one to predict


def self_check(model: str, text: str, order: list[int], target: int, *, call: Call = direct) -> SelfCheck:
    """How much the prediction at ``target`` moves when a later and an earlier token of the order are replaced."""
    from models.permutation import self_check as check

    return call(check, req.model_id(model), text, list(order), req.bounded("target", target, BOUNDS))


def new_york(bert: str, xlnet: str, text: str, first: str, second: str, *, call: Call = direct) -> dict[str, float]:
    """The XLNet paper's §2.3 example: BERT's independent guesses against XLNet's chained ones for two neighbours."""
    from models.permutation import new_york as compare

    text = req.text("The sentence", text, MAX_SENTENCE_CHARS, example="New York is a city .")
    first, second = req.text("The first word", first, MAX_WORD_CHARS), req.text("The second word", second, MAX_WORD_CHARS)
    return call(compare, req.model_id(bert), req.model_id(xlnet), text, first, second)


def segments(model: str, text: str, segment: int, memory: int, *, call: Call = direct) -> list[Any]:
    """``text`` through XLNet in segments with a memory (Transformer-XL's recurrence) and the attention into memory."""
    from models.permutation import segment_recurrence

    text = req.text("The paragraph", text, MAX_PARAGRAPH_CHARS, example="The cat sat on the mat.")
    if not isinstance(model, str):
        raise ExplorerError("Pick an XLNet model.")
    return call(segment_recurrence, req.model_id(model), text, req.bounded("segment", segment, BOUNDS),
                req.bounded("memory", memory, BOUNDS))
