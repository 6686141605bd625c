"""Causal tracing (activation patching) of one masked prediction: each layer's output at each position, or each head's
output, copied from a clean run into a corrupted one, :data:`~models.interventions.targets.BATCH` patched copies per
forward pass."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidConfig, InvalidText, UnsupportedArchitecture
from models.interventions.heads import _LayerCalls, head_projections, head_shape
from models.interventions.lens import mlm_head
from models.interventions.targets import BATCH, _masked_lm
from models.loader import ModelRef

#: Batched forward passes causal tracing may cost (layers × tokens / :data:`BATCH`): 12 layers × 128 tokens for BERT-base.
MAX_PATCH_PASSES = 96


def layer_modules(net: Any) -> list[Any]:
    """Per layer, in the order the forward pass runs them, the module whose output is that layer's hidden states (ALBERT's
    shared group appears once per layer it serves).

    Raises:
        UnsupportedArchitecture: see :func:`head_projections`.
    """
    base = getattr(net, "base_model", net)
    cfg = net.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "deberta-v2", "camembert", "mpnet"):
        return list(base.encoder.layer)
    if kind == "distilbert":
        return list(base.transformer.layer)
    if kind == "modernbert":
        return list(base.layers)
    if kind == "albert":
        per_group = cfg.num_hidden_layers / cfg.num_hidden_groups
        return [base.encoder.albert_layer_groups[int(i / per_group)] for i in range(cfg.num_hidden_layers)]
    head_projections(net)  # raises for what it does not know
    raise UnsupportedArchitecture(f"Activation patching takes encoders; {kind} is not one.")


@dataclass(frozen=True)
class Patching:
    """Causal tracing of one masked prediction: ``effects[layer, position]`` is the change in the logit difference
    (answer − foil) at the mask of the corrupted sentence when that layer's output at that position is copied from the
    clean run; ``restored`` is the same as a share of the clean − corrupted gap (1: fully restored)."""

    model_id: str
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    mask_position: int
    answer: str
    foil: str
    clean_difference: float
    corrupted_difference: float
    effects: Any  # numpy (layers, positions), or (layers, heads) for unit "head"
    restored: Any  # the same shape
    passes: int
    unit: str = "layer"
    position: int | None = None  # unit "head": the one position patched, None for every position


def activation_patching(model: ModelRef, clean: str, corrupted: str, answer: str, foil: str, unit: str = "layer",
                        position: int | None = None) -> Patching:
    """Meng et al. 2022's causal tracing (Vig et al. 2020 for BERT), for a masked LM: ``clean`` and ``corrupted`` are
    sentences of the same token length with one ``[MASK]`` at the same place (e.g. "Paris is the capital of [MASK]." and
    "Rome is the capital of [MASK]."); the target is the mask's logit for ``answer`` minus that for ``foil`` (one
    vocabulary token each). :data:`BATCH` patched copies run per forward pass.

    ``unit="layer"``: every layer × position, the layer's output there copied from the clean run. ``unit="head"``:
    every layer × head, that head's output (its context vectors, where they enter the output projection) copied at
    ``position``, or at every position when ``position`` is None (as Vig et al. patch a head).

    Raises:
        InvalidText: texts of different token lengths, masks that differ or are not one, an answer or foil that is not
            one token, a position outside the sentence, more than :data:`MAX_PATCH_PASSES` forward passes.
        InvalidConfig: an unknown unit.
        UnsupportedTask, UnsupportedArchitecture: as :func:`logit_lens` and :func:`layer_modules`.
    """
    if unit not in ("layer", "head"):
        raise InvalidConfig(f"Unknown unit {str(unit)[:20]!r}.", "Patch a layer's output ('layer') or a head's ('head').")
    import torch

    from models.objectives import _encode, to_model_text

    lm = _masked_lm(model)
    net, tok = lm.model, lm.tokenizer
    enc_c, enc_x = _encode(lm, to_model_text(clean, tok)), _encode(lm, to_model_text(corrupted, tok))
    ids_c, ids_x = enc_c["input_ids"], enc_x["input_ids"]
    if ids_c.shape != ids_x.shape:
        raise InvalidText(f"The sentences are {ids_c.shape[1]} and {ids_x.shape[1]} tokens; patching needs the same length.",
                          "Change one word for another of the same token length.")
    masks_c, masks_x = (ids_c[0] == tok.mask_token_id).nonzero().flatten(), (ids_x[0] == tok.mask_token_id).nonzero().flatten()
    if len(masks_c) != 1 or not torch.equal(masks_c, masks_x):
        raise InvalidText("Both sentences need one [MASK], at the same place.")
    pos = int(masks_c[0])
    targets = []
    for word in (answer, foil):
        pieces = tok(word, add_special_tokens=False)["input_ids"] if isinstance(word, str) and word.strip() else []
        if len(pieces) != 1:
            raise InvalidText(f"{word!r} is {len(pieces)} tokens for {lm.model_id}; the answer and the foil must be one each.")
        targets.append(pieces[0])
    layers = layer_modules(net)
    if position is not None and not (isinstance(position, int) and not isinstance(position, bool)
                                     and 0 <= position < ids_c.shape[1]):
        raise InvalidText(f"Position {str(position)[:20]} is outside the sentence (0 to {ids_c.shape[1] - 1}).")
    n_units = head_shape(net)[1] if unit == "head" else ids_c.shape[1]
    needed = math.ceil(len(layers) * n_units / BATCH)
    if needed > MAX_PATCH_PASSES:
        what = f"{n_units} heads" if unit == "head" else f"{ids_c.shape[1]} tokens"
        raise InvalidText(f"Tracing {what} through {len(layers)} layers takes {needed} forward passes; at most "
                          f"{MAX_PATCH_PASSES} are run.", "Use a shorter sentence." if unit == "layer" else "Patch layers.")
    head = mlm_head(net)

    def difference(hidden: Any) -> Any:  # hidden (B, T, H) → (B,): the answer − foil logits at the mask
        logits = head(hidden[:, pos]).float()
        return logits[:, targets[0]] - logits[:, targets[1]]

    if unit == "head":
        return _patch_heads(lm, ids_c, ids_x, pos, difference, position, answer, foil)
    with torch.inference_mode():
        clean = net.base_model(input_ids=ids_c, output_hidden_states=True)
        clean_states = clean.hidden_states[1:]  # each layer's output
        d_clean = float(difference(clean.last_hidden_state)[0])
        d_corrupt = float(difference(net.base_model(input_ids=ids_x).last_hidden_state)[0])
    calls = _LayerCalls(layers)

    def patcher(chunk: list[tuple[int, int]]) -> Any:
        def patch(module: Any, _args: Any, output: Any) -> Any:  # a forward hook: the layer's output
            layer = calls.layer(module)
            hidden = output[0] if isinstance(output, tuple) else output
            hidden = hidden.clone()
            for row, (target_layer, p) in enumerate(chunk):
                if target_layer == layer:
                    hidden[row, p] = clean_states[layer][0, p]
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden
        return patch

    effects, passes = _sweep(net, ids_x, (len(layers), ids_c.shape[1]), calls, patcher, "register_forward_hook",
                             difference, d_corrupt)
    return _traced(lm, ids_c, ids_x, pos, answer, foil, d_clean, d_corrupt, effects, passes)


def _sweep(net: Any, ids_x: Any, shape: tuple[int, int], calls: _LayerCalls, patcher: Any, register: str,
           difference: Any, d_corrupt: float) -> tuple[Any, int]:
    """Every cell (i, j) of ``shape``, :data:`BATCH` per forward pass of the corrupted input: ``patcher(chunk)`` is the
    hook (registered with ``register`` on each of ``calls``' modules) that patches row r for the chunk's r-th cell.
    Returns (each cell's change in the logit difference, passes run)."""
    import numpy as np
    import torch

    cells = [(i, j) for i in range(shape[0]) for j in range(shape[1])]
    effects = np.zeros(shape)
    passes = 0
    for start in range(0, len(cells), BATCH):
        chunk = cells[start:start + BATCH]
        calls.reset()
        hook = patcher(chunk)
        handles = [getattr(m, register)(hook) for m in calls.unique]
        try:
            with torch.inference_mode():
                diffs = difference(net.base_model(input_ids=ids_x.expand(len(chunk), -1)).last_hidden_state).tolist()
        finally:
            for h in handles:
                h.remove()
        passes += 1
        for (i, j), d in zip(chunk, diffs, strict=True):
            effects[i, j] = d - d_corrupt
    return effects, passes


def _traced(lm: Any, ids_c: Any, ids_x: Any, pos: int, answer: str, foil: str, d_clean: float, d_corrupt: float,
            effects: Any, passes: int, unit: str = "layer", position: int | None = None) -> Patching:
    """A :class:`Patching` from a sweep's effects (the share restored: each effect over the clean − corrupted gap)."""
    import numpy as np

    tok = lm.tokenizer
    gap = d_clean - d_corrupt
    restored = effects / gap if abs(gap) > 1e-9 else np.full_like(effects, np.nan)
    return Patching(lm.model_id, tok.convert_ids_to_tokens(ids_c[0].tolist()), tok.convert_ids_to_tokens(ids_x[0].tolist()), pos,
                    answer, foil, d_clean, d_corrupt, effects, restored, passes, unit, position)


def _patch_heads(lm: Any, ids_c: Any, ids_x: Any, pos: int, difference: Any, position: int | None,
                 answer: str, foil: str) -> Patching:
    """:func:`activation_patching` per head: each head's context vectors, read where they enter its layer's output
    projection in the clean run, written there in the corrupted run (at ``position``, or everywhere)."""
    import torch

    net = lm.model
    n_layers, n_heads = head_shape(net)
    where = slice(None) if position is None else slice(position, position + 1)
    clean_in: list[Any] = [None] * n_layers
    calls = _LayerCalls(head_projections(net))

    def record(module: Any, args: tuple[Any, ...]) -> None:
        clean_in[calls.layer(module)] = args[0].detach().clone()

    handles = [net.register_forward_pre_hook(calls.reset)] + [m.register_forward_pre_hook(record) for m in calls.unique]
    try:
        with torch.inference_mode():
            d_clean = float(difference(net.base_model(input_ids=ids_c).last_hidden_state)[0])
    finally:
        for h in handles:
            h.remove()
    with torch.inference_mode():
        d_corrupt = float(difference(net.base_model(input_ids=ids_x).last_hidden_state)[0])

    def patcher(chunk: list[tuple[int, int]]) -> Any:
        def patch(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:  # a pre-hook: the heads' context vectors
            layer = calls.layer(module)
            x = args[0].clone()
            size = x.shape[-1] // n_heads
            for row, (target_layer, h) in enumerate(chunk):
                if target_layer == layer:
                    x[row, where, h * size:(h + 1) * size] = clean_in[layer][0, where, h * size:(h + 1) * size]
            return (x, *args[1:])
        return patch

    effects, passes = _sweep(net, ids_x, (n_layers, n_heads), calls, patcher, "register_forward_pre_hook", difference,
                             d_corrupt)
    return _traced(lm, ids_c, ids_x, pos, answer, foil, d_clean, d_corrupt, effects, passes, "head", position)
