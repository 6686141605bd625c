"""Which parts of a model matter, as use cases: the logit lens, head importance with its pruning curve, removing
chosen heads, and causal tracing. The Parts page and the Gradio ``/logit_lens``, ``/head_importance`` and
``/activation_patching`` endpoints call these; each validates its whole request, then runs through ``call``.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from core.errors import MAX_LINE_CHARS, MAX_TEXT_CHARS
from models.interventions import MAX_ITEMS, MAX_SEEDS, MAX_SENTENCES, MAX_STEPS, TARGETS, parse_heads
from services import requests as req
from services.calls import Call, direct

__all__ = ["ABLATION_MODES", "BOUNDS", "MAX_HEADS_CHARS", "MAX_ITEMS", "MAX_LINE_CHARS", "MAX_SEEDS", "MAX_SENTENCES", "MAX_STEPS", "MAX_WORD_CHARS",
           "TARGETS", "TASKS", "ablate", "head_importance", "importance_json", "lens", "needs_texts", "patch"]
ABLATION_MODES = ("zero", "mean")
TASKS = ("supersense", "wic")
#: The bounds (inclusive) of each whole number a request takes, by field; the page's widgets, its links and the Gradio
#: tabs use the same. "position" is the token patched, -1 every position.
BOUNDS: dict[str, tuple[int, int]] = {"top_k": (1, 20), "items": (8, MAX_ITEMS), "steps": (2, MAX_STEPS), "seeds": (2, MAX_SEEDS),
                                      "position": (-1, 10**6)}
#: The longest answer or foil (one token, so one word), and the longest list of heads ("1.3, 2.7, ...": 144 heads fit).
MAX_WORD_CHARS = 100
MAX_HEADS_CHARS = 2_000


def lens(model: str, text: str, top_k: int = 5, *, call: Call = direct) -> Any:
    """For each [MASK] of ``text``, the top tokens ``model``'s own masked-LM head reads from every layer."""
    from models.interventions import logit_lens

    text = req.text("The text", text, MAX_TEXT_CHARS, example="The cat sat on the [MASK].")
    return call(logit_lens, req.model_id(model), text, req.bounded("top_k", top_k, BOUNDS))


def lens_json(result: Any) -> dict:
    return {"model": result.model_id, "tokens": result.tokens, "positions": result.positions, "answers": result.answers,
            "layers": [[asdict(r) for r in rows] for rows in result.rows]}


def needs_texts(target: str, model: str) -> bool:
    """Whether ``target`` on ``model`` is scored on lines the user writes: sentences for a masked LM, ``label | sentence``
    lines for a classifier that is not a Fine-tuning lab run on a built-in task."""
    from models.interventions import needs_labelled_lines

    target = req.choice("target", target, TARGETS)
    return target == "masked-lm" or (target == "classifier" and needs_labelled_lines(req.model_id(model)))


def _request(model: str, texts: Any, mode: str, target: str, task: str, items: int) -> tuple[str, list[str], str, str, str, int]:
    from analysis.tasks import BUILT_IN

    mid, target = req.model_id(model), req.choice("target", target, TARGETS)
    task = "" if task in ("", None) else req.choice("task", task, BUILT_IN)
    lines = req.texts(texts, MAX_SENTENCES, MAX_LINE_CHARS, example="The cat sat on the mat.") if needs_texts(target, mid) else []
    return mid, lines, req.choice("mode", mode, ABLATION_MODES), target, task, req.bounded("items", items, BOUNDS)


def head_importance(model: str, texts: Any = "", steps: int = 6, seeds: int = 3, mode: str = "zero", target: str = "masked-lm",
                    task: str = "", items: int = 128, *, call: Call = direct) -> Any:
    """Every head's importance (Michel et al. 2019) and the pruning curve against random orders (``PruningCurve``)."""
    from models.interventions import pruning_curve

    mid, lines, mode, target, task, items = _request(model, texts, mode, target, task, items)
    steps, seeds = req.bounded("steps", steps, BOUNDS), req.bounded("seeds", seeds, BOUNDS)
    return call(pruning_curve, mid, lines, steps, seeds, mode, 0, target, task, items)


def importance_json(curve: Any) -> dict:
    imp = curve.importance
    body = {k: v for k, v in asdict(curve).items() if k not in ("importance", "correct")}
    return {"model": imp.model_id, "target": imp.target, "measure": imp.measure, "importance": imp.scores, "raw": imp.raw,
            "loss": imp.loss, "ranked_on": imp.texts, "curve": body}


def ablate(model: str, heads: str, texts: Any = "", mode: str = "zero", target: str = "masked-lm", task: str = "",
           items: int = 128, *, call: Call = direct) -> Any:
    """The target's accuracy and loss with ``heads`` ("layer.head" list, counted from 1) removed, and with every head."""
    from models.interventions import ablate_heads

    chosen = parse_heads(req.text("The heads", heads, MAX_HEADS_CHARS, example="1.3, 2.7"))
    mid, lines, mode, target, task, items = _request(model, texts, mode, target, task, items)
    return call(ablate_heads, mid, chosen, lines, mode, target, task, items)


def patch(model: str, clean: str, corrupted: str, answer: str, foil: str, unit: str = "layer", position: int = -1, *,
          call: Call = direct) -> Any:
    """Causal tracing: for every layer × position (or layer × head), how much of the answer − foil logit difference
    copying that state from the clean run restores (``Patching``); ``position`` -1 patches a head everywhere."""
    from models.interventions import activation_patching

    clean = req.text("The clean sentence", clean, MAX_TEXT_CHARS, example="Paris is the capital of [MASK].")
    corrupted = req.text("The corrupted sentence", corrupted, MAX_TEXT_CHARS, example="Rome is the capital of [MASK].")
    answer, foil = req.text("The answer", answer, MAX_WORD_CHARS), req.text("The foil", foil, MAX_WORD_CHARS)
    unit, where = req.choice("unit", unit, ("layer", "head")), req.bounded("position", position, BOUNDS)
    return call(activation_patching, req.model_id(model), clean, corrupted, answer, foil, unit, None if where < 0 else where)
