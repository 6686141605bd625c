"""μP, the maximal-update parametrisation (Yang et al. 2022, Tensor Programs V, Table 3 and Table 8), for the lab's
BERT masked LM, and its coordinate check.

Under the standard parametrisation (SP: BERT's N(0, 0.02) initialisation and one Adam learning rate) the best
learning rate shrinks as the model widens; under μP it stays put, so it can be tuned on a narrow model and carried
to a wide one (μTransfer). With ``m = hidden / mup_base_width`` (the width multiplier; at the base width μP *is* SP):

- **hidden weights** (matrix-like: both dimensions grow with the width — Q, K, V, the attention output, the FFN's two
  layers, the MLM head's transform; the pooler): initial std ÷ √m (variance ∝ 1/fan_in), Adam learning rate ÷ m,
  and weight decay × m so that AdamW's decay per step (rate × decay) is the same at every width (what ``mup``'s
  ``MuAdamW`` does with ``decoupled_wd=False``);
- **input weights and every vector** (embeddings, biases, LayerNorms): unchanged;
- **the readout** (the MLM decoder, tied to the word embeddings, and NSP/SOP's classifier): its input multiplied
  by 1/m (``mup``'s ``MuReadout`` / ``MuSharedReadout``: ``output_mult · x / width_mult``); the untied classifier
  is initialised at zero (``readout_zero_init``); the tied decoder keeps the embeddings' initialisation, as
  ``MuSharedReadout`` does;
- **attention**: logits scaled by 1/d (d: the head's size) instead of 1/√d, times √d_base so that the base width
  is unchanged (Table 3's ``attn_mult``).

Why by hand and not with Microsoft's ``mup`` package (``set_base_shapes``, ``MuReadout``, ``MuAdamW``): its rules are
the dozen lines below, while the package would not carry the one rule that needs the model's internals (1/d
attention: transformers 5's ``BertSelfAttention`` takes a ``scaling`` attribute that the package does not know
about, so it would be set by hand anyway), its ``set_base_shapes`` builds a base and a delta model for every run,
its ``MuAdamW`` is an unfused AdamW where the lab's loop uses the fused one (:func:`models.training.optimizer_and_schedule`
takes the parameter groups made here instead), and it brings seaborn and matplotlib for its plots, which the lab
draws with plotly. The classification below follows the package's: a weight is matrix-like when both of its
dimensions scale with the width.

The multipliers (readout, attention) live in the module, not in its weights, so a μP model saved as it is would
reload with ``from_pretrained`` as a different function. The lab saves :func:`portable_state` instead: the same
function with the multipliers folded into the weights (the query's weights and bias, the MLM transform's LayerNorm,
NSP/SOP's classifier), so every page, the backend and the Hub open a μP checkpoint as the plain BERT it is
equivalent to. Only resuming μP *training* from it would need :func:`apply_mup`'s rules back (the lab does not).
:func:`models.pretrain.model.build_model` builds the SP model; the loop applies μP to it (so that this module may
use ``build_model`` without a circle).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

import torch

from core.errors import InvalidConfig
from models.pretrain.config import TrainConfig


def width_mult(config: TrainConfig) -> float:
    """``hidden / mup_base_width``: how much wider this model is than the base model μP's multipliers are set for."""
    return config.hidden / config.mup_base_width


def _width_dims(config: TrainConfig) -> set[int]:
    return {config.hidden, config.ffn}


def classify(model: torch.nn.Module, config: TrainConfig) -> dict[str, str]:
    """Each parameter's name → ``hidden`` (matrix-like), ``readout`` (a linear layer whose input grows with the width
    and whose output does not) or ``vector`` (everything else: embeddings, biases, LayerNorms)."""
    dims = _width_dims(config)
    kinds: dict[str, str] = {}
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            w = f"{name}.weight"
            if module.in_features in dims and module.out_features in dims:
                kinds[w] = "hidden"
            elif module.in_features in dims:
                kinds[w] = "readout"
    return {n: kinds.get(n, "vector") for n, _ in model.named_parameters()}


def apply_mup(model: torch.nn.Module, config: TrainConfig) -> Any:
    """Turn a freshly initialised BERT (``BertForMaskedLM`` / ``BertForPreTraining``) into its μP version in place
    (module docstring), and return it. Hidden weights are rescaled, not redrawn, so the random stream is SP's.

    Raises:
        InvalidConfig: the model is not one of BERT's (μP's readout and attention rules are written for it).
    """
    if getattr(getattr(model, "config", None), "model_type", "") != "bert":
        raise InvalidConfig("μP is implemented for the lab's BERT models only.")
    m = width_mult(config)
    kinds = classify(model, config)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, kind in kinds.items():
            if kind == "hidden":
                params[name].mul_(1 / math.sqrt(m))
    head = config.hidden // config.heads
    base_head = config.mup_base_width / config.heads
    for module in model.modules():
        if hasattr(module, "scaling") and hasattr(module, "attention_head_size"):
            module.scaling = math.sqrt(base_head) / head  # 1/d, equal to SP's 1/√d at the base width
    decoder = model.cls.predictions.decoder
    readouts = [decoder]
    relation = getattr(model.cls, "seq_relationship", None)
    if relation is not None:
        with torch.no_grad():
            relation.weight.zero_()
        readouts.append(relation)
    for layer in readouts:
        layer.register_forward_pre_hook(lambda _mod, args, _m=m: (args[0] / _m, *args[1:]))
    model.mup_width_mult = m
    return model


def portable_state(model: torch.nn.Module) -> dict[str, Any]:
    """The state dict of a model :func:`apply_mup` made, with its multipliers folded into the weights: a plain BERT of
    the same config loaded with it computes the same outputs (to rounding). Exact because each multiplier meets a
    linear map: attention's scale ``s`` against SP's ``1/√d`` multiplies the query's weight and bias by ``s·√d``; the
    readout's ``1/m`` on its input multiplies the MLM transform's LayerNorm (the decoder's input; the decoder itself
    is tied to the word embeddings) and NSP/SOP's classifier weight. Changed tensors are copies: the model is left
    as it is (the loop saves kept steps mid-run). A model without μP's multipliers comes back unchanged."""
    state = model.state_dict()
    m = getattr(model, "mup_width_mult", None)
    if m is None:
        return state
    for name, module in model.named_modules():
        if hasattr(module, "scaling") and hasattr(module, "attention_head_size"):
            r = module.scaling * math.sqrt(module.attention_head_size)
            for key in (f"{name}.query.weight", f"{name}.query.bias"):
                state[key] = state[key] * r
    for key in ("cls.predictions.transform.LayerNorm.weight", "cls.predictions.transform.LayerNorm.bias",
                "cls.seq_relationship.weight"):
        if key in state:
            state[key] = state[key] / m
    return state


def param_groups(models: Sequence[Any], config: TrainConfig, weight_decay: float = 0.01) -> list[dict[str, Any]]:
    """AdamW's parameter groups under μP: hidden weights at ``lr / m`` with weight decay × m, the rest at ``lr``.
    Each parameter once (the decoder shares the word embeddings' weight)."""
    m = width_mult(config)
    seen: set[int] = set()
    hidden: list[Any] = []
    other: list[Any] = []
    for model in models:
        kinds = classify(model, config)
        for name, p in model.named_parameters():
            if id(p) in seen:
                continue
            seen.add(id(p))
            (hidden if kinds[name] == "hidden" else other).append(p)
    return [{"params": hidden, "lr": config.lr / m, "weight_decay": weight_decay * m},
            {"params": other, "lr": config.lr, "weight_decay": weight_decay}]


# ------------------------------------------------------------------------------------------ coordinate check

#: Bounds of :func:`coord_check`: it trains one tiny model per width, in seconds, never a real run.
COORD_MAX_WIDTH = 1024
COORD_MAX_STEPS = 20


def coord_check(widths: Sequence[int], parametrisation: str, lr: float = 1e-2, steps: int = 4, layers: int = 2,
                heads: int = 2, seq_len: int = 16, batch: int = 8, vocab: int = 256, base_width: int = 32,
                seed: int = 0) -> dict[int, list[dict[str, float]]]:
    """μP's coordinate check (Yang et al. 2022, Tensor Programs V, Figure 5; ``mup``'s ``get_coord_data``): train a
    tiny BERT masked LM of each width for ``steps`` Adam steps at one constant ``lr`` (no warm-up, no clipping, no
    dropout) on one fixed batch of random tokens, and record at each step the mean absolute value of every layer's
    output before that step's update: the embeddings, each layer's attention output, FFN hidden layer and FFN output
    (before the residual and LayerNorm, which would hide the scale), and the logits.

    Returns width → one dict (layer → mean |activation|) per step. Under μP the values after a few steps do not grow
    with the width; under SP they do (the logits first).

    Raises:
        InvalidConfig: a width out of 16–1,024 or not divisible by ``heads``, or more than 20 steps.
    """
    from models.pretrain.model import build_model

    if not 1 <= steps <= COORD_MAX_STEPS:
        raise InvalidConfig(f"A coordinate check takes 1 to {COORD_MAX_STEPS} steps, not {steps!r}.")
    if not widths or any(not (16 <= w <= COORD_MAX_WIDTH) or w % heads for w in widths):
        raise InvalidConfig(f"Widths must be from 16 to {COORD_MAX_WIDTH} and divisible by {heads} heads: {list(widths)!r}.")
    out: dict[int, list[dict[str, float]]] = {}
    for width in widths:
        cfg = TrainConfig(objective="mlm", layers=layers, hidden=width, heads=heads, ffn=4 * width, seq_len=seq_len,
                          batch=batch, steps=steps, lr=lr, seed=seed, dropout=0.0, parametrisation=parametrisation,
                          mup_base_width=base_width).validate()
        torch.manual_seed(seed)
        random.seed(seed)
        model = build_model(cfg, vocab, SimpleNamespace(pad_token_id=0))
        if parametrisation == "mup":
            apply_mup(model, cfg)
        model.train()
        groups = param_groups([model], cfg, 0.0) if parametrisation == "mup" else [{"params": list(model.parameters())}]
        optimizer = torch.optim.AdamW(groups, lr=lr, weight_decay=0.0)
        gen = torch.Generator().manual_seed(seed)
        ids = torch.randint(1, vocab, (batch, seq_len), generator=gen)
        record: dict[str, float] = {}
        hooks = []

        def keep(name: str, record: dict[str, float] = record) -> Any:
            def hook(_mod: Any, _args: Any, output: Any) -> None:
                t = output[0] if isinstance(output, tuple) else output
                record[name] = float(t.detach().abs().mean())
            return hook

        hooks.append(model.bert.embeddings.register_forward_hook(keep("embeddings")))
        for i, layer in enumerate(model.bert.encoder.layer):
            hooks.append(layer.attention.output.dense.register_forward_hook(keep(f"layer{i}.attention")))
            hooks.append(layer.intermediate.dense.register_forward_hook(keep(f"layer{i}.ffn_hidden")))
            hooks.append(layer.output.dense.register_forward_hook(keep(f"layer{i}.ffn_out")))
        hooks.append(model.cls.register_forward_hook(keep("logits")))
        rows = []
        for _ in range(steps):
            record.clear()
            loss = model(input_ids=ids, labels=ids).loss
            rows.append(dict(record))
            loss.backward()
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
        for h in hooks:
            h.remove()
        out[width] = rows
    return out


def width_ratios(coords: dict[int, list[dict[str, float]]], step: int = -1) -> dict[str, float]:
    """Per layer, the widest model's mean |activation| over the narrowest's at ``step`` (the last by default): about
    1 when the scale does not depend on the width."""
    lo, hi = coords[min(coords)][step], coords[max(coords)][step]
    return {k: hi[k] / lo[k] for k in lo if lo[k] > 0}
