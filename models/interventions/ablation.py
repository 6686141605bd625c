"""Named heads removed (zeroed or mean-ablated), and the target scored with and without them; heads as the pages
name them (``layer.head``, counted from 1) read and checked against the model."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidConfig
from models.interventions.heads import head_means, head_shape
from models.interventions.targets import _merged_inputs, _summed, make_target
from models.loader import ModelRef


@dataclass(frozen=True)
class Ablation:
    """The target's loss and accuracy with every head, and with ``heads`` removed."""

    model_id: str
    heads: list[tuple[int, int]]
    mode: str
    measure: str
    full_loss: float
    full_accuracy: float
    loss: float
    accuracy: float
    scored: int


def _head_pairs(heads: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) pairs of whole numbers ≥ 0, at most 1,000, none twice; shape not yet checked.

    Raises:
        InvalidConfig: not a list of pairs, a pair that is not two whole numbers ≥ 0, more than 1,000 pairs.
    """
    if isinstance(heads, str | bytes) or not hasattr(heads, "__len__"):
        raise InvalidConfig("Name the heads as (layer, head) pairs.")
    if len(heads) > 1000:
        raise InvalidConfig(f"{len(heads):,} heads named; at most 1,000 are read.")
    out = []
    for pair in heads:
        if isinstance(pair, str | bytes) or not hasattr(pair, "__len__") or len(pair) != 2 or \
                not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in pair):
            raise InvalidConfig(f"{str(pair)[:30]} is not a (layer, head) pair of whole numbers.")
        out.append((int(pair[0]), int(pair[1])))
    return sorted(set(out))


def check_heads(net: Any, heads: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """``heads`` ((layer, head) pairs counted from 0) as sorted distinct pairs, each in the model.

    Raises:
        InvalidConfig: what :func:`_head_pairs` refuses; a head outside the model (named counted from 1, as the
            heatmap labels it, with the model's shape); all heads at once.
    """
    pairs = _head_pairs(heads)
    layers, per_layer = head_shape(net)
    for layer, head in pairs:
        if not (layer < layers and head < per_layer):
            raise InvalidConfig(f"Head {layer + 1}.{head + 1} (layer.head, counted from 1) is not in this model: it has "
                                f"{layers} layers × {per_layer} heads.")
    if len(pairs) >= layers * per_layer:
        raise InvalidConfig("Removing every head leaves nothing to attend with.", "Keep at least one head.")
    return pairs


def parse_heads(text: str) -> list[tuple[int, int]]:
    """``"1.3, 6.12"`` (layer.head, counted from 1 as the heatmap labels them) as (layer, head) pairs from 0.

    Raises:
        InvalidConfig: an entry that is not ``layer.head``, or more than 1,000 entries.
    """
    entries = [e.strip() for e in str(text).replace(";", ",").replace(" ", ",").split(",") if e.strip()]
    if len(entries) > 1000:
        raise InvalidConfig(f"{len(entries):,} heads named; at most 1,000 are read.")
    out = []
    for e in entries:
        layer, dot, head = e.partition(".")
        if not (dot and layer.isdigit() and head.isdigit() and int(layer) >= 1 and int(head) >= 1):
            raise InvalidConfig(f"{e[:20]!r} is not a head.", "Write layer.head, counted from 1: e.g. 1.3, 6.12.")
        out.append((int(layer) - 1, int(head) - 1))
    return out


def ablate_heads(model: ModelRef, heads: Sequence[Sequence[int]], texts: Sequence[str] = (), mode: str = "zero",
                 target: str = "masked-lm", task: str = "", items: int = 128, seed: int = 0) -> Ablation:
    """Remove ``heads`` ((layer, head) pairs, from 0) — their outputs zeroed, or replaced by their mean output over the
    scored items (``mode="mean"``) — and score ``target`` (:func:`make_target`) with and without them.

    Raises:
        InvalidConfig: heads outside the model or all of them (:func:`check_heads`), an unknown mode; as
            :func:`make_target` for the rest.
    """
    import torch

    if mode not in ("zero", "mean"):
        raise InvalidConfig("A removed head outputs zeros ('zero') or its mean ('mean').")
    _head_pairs(heads)  # the request's form, before any model loads or probe is fitted
    made = make_target(model, target, texts, task, seed, items)
    removed = check_heads(made.lm.model, heads)
    chunks = made.chunks(slice(None), seed)
    layers, per_layer = head_shape(made.lm.model)
    mask = torch.ones(layers, per_layer, device=made.lm.device)
    for layer, head in removed:
        mask[layer, head] = 0.0
    means = head_means(made.lm.model, _merged_inputs(chunks)) if mode == "mean" else None
    full = made.per_item(chunks)
    cut = made.score(chunks, mask, means)
    return Ablation(made.lm.model_id, removed, mode, made.measure, *_summed(full), *cut, len(full[0]))
