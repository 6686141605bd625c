"""Where a model's attention heads meet, and :class:`HeadMask`, which scales, removes or mean-ablates each head's
output by hooks, without touching the attention code."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from core.errors import UnsupportedArchitecture


def head_projections(net: Any) -> list[Any]:
    """Per layer (in the order the forward pass runs them), the module whose input is the heads' concatenated outputs
    (B, T, heads × head size). ALBERT shares one module across layers: it appears once per layer it serves.

    Raises:
        UnsupportedArchitecture: an architecture without such a module (XLNet computes its output in one einsum).
    """
    base = getattr(net, "base_model", net)
    cfg = net.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "deberta-v2", "camembert"):
        return [layer.attention.output.dense for layer in base.encoder.layer]
    if kind == "distilbert":
        return [layer.attention.out_lin for layer in base.transformer.layer]
    if kind == "mpnet":
        return [layer.attention.attn.o for layer in base.encoder.layer]
    if kind == "modernbert":
        return [layer.attn.Wo for layer in base.layers]
    if kind == "gpt2":
        return [block.attn.c_proj for block in base.h]
    if kind == "albert":
        if cfg.inner_group_num != 1:
            raise UnsupportedArchitecture("This ALBERT has several layers per group; head masking takes one.")
        groups = base.encoder.albert_layer_groups
        per_group = cfg.num_hidden_layers / cfg.num_hidden_groups
        return [groups[int(i / per_group)].albert_layers[0].attention.dense for i in range(cfg.num_hidden_layers)]
    raise UnsupportedArchitecture(f"Head masking does not know where {kind}'s heads meet.",
                                  "Supported: BERT, RoBERTa, XLM-R, ELECTRA, DeBERTa-v3, DistilBERT, MPNet, ModernBERT, "
                                  "ALBERT, GPT-2 and XLNet (XLNet through its post_attention: see xlnet_attentions).")


def xlnet_attentions(net: Any) -> list[Any]:
    """XLNet's attention modules, per layer. XLNet has no module whose input is the heads' outputs: it projects them
    with an einsum over its parameter ``o`` inside ``post_attention``, so :class:`HeadMask` and :func:`head_means` wrap
    that method (:func:`wrap_post_attention`, on the instance, for the duration of the block) where they hook a module
    elsewhere."""
    base = getattr(net, "base_model", net)
    return [layer.rel_attn for layer in base.layer]


def head_shape(net: Any) -> tuple[int, int]:
    """(layers, heads per layer)."""
    cfg = net.config
    if cfg.model_type == "xlnet":
        return cfg.n_layer, cfg.n_head
    layers = len(head_projections(net))
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None) or cfg.n_heads
    return layers, int(heads)


class _LayerCalls:
    """Which layer a hooked module's call belongs to. ``modules`` lists one module per layer in forward order (ALBERT's
    shared one once per layer it serves); within one forward pass, the n-th call of a module is the n-th layer it
    serves. :meth:`reset` starts a new pass."""

    def __init__(self, modules: list[Any]) -> None:
        self._where: dict[int, list[int]] = {}
        for layer, m in enumerate(modules):
            self._where.setdefault(id(m), []).append(layer)
        self.unique = list({id(m): m for m in modules}.values())  # each module once, to hook
        self._calls: dict[int, int] = {}

    def reset(self, *_: Any) -> None:
        self._calls.clear()

    def layer(self, module: Any) -> int:
        n = self._calls.get(id(module), 0)
        self._calls[id(module)] = n + 1
        layers = self._where[id(module)]
        return layers[n % len(layers)]


class HeadMask:
    """``with HeadMask(net, mask): net(...)``: each head's output times ``mask[layer, head]`` ((layers, heads), ones
    keep a head, zeros remove it; it may require a gradient). With ``means`` ((layers, heads, head size), from
    :func:`head_means`), a removed head's output is replaced by its mean instead of zero (mean ablation):
    ``mask·x + (1 − mask)·mean``."""

    def __init__(self, net: Any, mask: Any, means: Any = None) -> None:
        self.net, self.mask, self.means = net, mask, means
        self.layers, self.heads = head_shape(net)
        if tuple(mask.shape) != (self.layers, self.heads):
            raise ValueError(f"mask must be ({self.layers}, {self.heads}), not {tuple(mask.shape)}")
        self._handles: list[Any] = []

    def _apply(self, layer: int, split: Any) -> Any:
        """``split`` (…, heads, head size) with each head kept, zeroed or replaced by its mean."""
        keep = self.mask[layer].to(split.dtype).view(*([1] * (split.dim() - 2)), self.heads, 1)
        out = split * keep
        if self.means is not None:
            out = out + (1 - keep) * self.means[layer].to(split.dtype)
        return out

    def __enter__(self) -> HeadMask:
        if self.net.config.model_type == "xlnet":
            self._handles += wrap_post_attention(self.net, self._apply)
            return self
        calls = _LayerCalls(head_projections(self.net))

        def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            x = args[0]
            split = x.view(*x.shape[:-1], self.heads, x.shape[-1] // self.heads)
            return (self._apply(calls.layer(module), split).reshape(x.shape), *args[1:])

        self._handles.append(self.net.register_forward_pre_hook(calls.reset))
        self._handles += [m.register_forward_pre_hook(hook) for m in calls.unique]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


class _Unwrap:
    """A handle that removes an instance attribute set over a class method (the method shows through again)."""

    def __init__(self, owner: Any, name: str) -> None:
        self.owner, self.name = owner, name

    def remove(self) -> None:
        self.owner.__dict__.pop(self.name, None)


def wrap_post_attention(net: Any, change: Callable[[int, Any], Any]) -> list[_Unwrap]:
    """Wrap every XLNet layer's ``post_attention`` (on the instance) so that its heads' outputs ``attn_vec`` (T, B,
    heads, head size) pass through ``change(layer, attn_vec)`` first: XLNet's stand-in for a hook on an output
    projection (:func:`xlnet_attentions`). Returns the handles whose ``remove()`` unwraps."""
    handles = []
    for layer, attention in enumerate(xlnet_attentions(net)):
        original = attention.post_attention

        def wrapped(h: Any, attn_vec: Any, *args: Any, layer: int = layer, original: Any = original, **kw: Any) -> Any:
            return original(h, change(layer, attn_vec), *args, **kw)

        attention.post_attention = wrapped
        handles.append(_Unwrap(attention, "post_attention"))
    return handles


def head_means(net: Any, batch: dict[str, Any]) -> Any:
    """Each head's mean output over the real tokens of ``batch`` (layers, heads, head size): what a mean ablation puts
    in a removed head's place."""
    import torch

    layers, heads = head_shape(net)
    sums: list[Any] = [None] * layers
    real = batch["attention_mask"].bool()
    if net.config.model_type == "xlnet":

        def capture(layer: int, attn_vec: Any) -> Any:
            sums[layer] = attn_vec.transpose(0, 1)[real].mean(0).detach()  # (T, B, n, d) → real tokens → (n, d)
            return attn_vec

        handles: list[Any] = wrap_post_attention(net, capture)
    else:
        calls = _LayerCalls(head_projections(net))

        def hook(module: Any, args: tuple[Any, ...]) -> None:
            x = args[0][real]  # (real tokens, heads × size)
            sums[calls.layer(module)] = x.view(x.shape[0], heads, -1).mean(0).detach()

        handles = [m.register_forward_pre_hook(hook) for m in calls.unique]
    try:
        with torch.inference_mode():
            net(**batch)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(sums)
