"""Attention weights written straight into one (layers, heads, T, T) array: no stacking copy.

``output_attentions=True`` makes every layer keep its own probability tensor, and gathering them
costs a second pass over all of them (``torch.stack``): at 512 tokens that is 75 MB copied and the
page faults of a fresh 75 MB, a sizeable share of a bare forward pass of MiniLM on a CPU (measured:
``bench/attention.py``, bench/results/README.md). Nothing in
transformers writes attention into a caller's buffer, so this module registers one attention
function with transformers' own ``AttentionInterface`` (the supported extension point) that does:
when :func:`capturing` is active in the calling thread, each layer's scores are computed with
``torch.matmul(..., out=buffer[layer])`` and turned into probabilities in place, and the buffer is
the result. Outside :func:`capturing` (and while training, or for a batch) it is the model's own
eager function, unchanged.

Only for architectures whose eager attention is BERT's (``CAPTURE_TYPES``: identical code in
transformers 5, and a test compares the captured weights with ``output_attentions`` of a plain
eager model for each). GPT-2 (causal mask, its own scaling options) and XLNet (relative, two
streams) keep the stacking path.
"""

from __future__ import annotations

import contextvars
import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

IMPLEMENTATION = "eager_capture"
CAPTURE_TYPES = frozenset({"bert", "roberta", "distilbert", "albert", "electra"})


@dataclass
class Capture:
    """The buffer one forward pass writes into; ``layer`` counts the layers that wrote."""

    buffer: torch.Tensor  # (L, H, T, T), float32
    layer: int = 0

    @property
    def complete(self) -> bool:
        return self.layer == self.buffer.shape[0]


_active: contextvars.ContextVar[Capture | None] = contextvars.ContextVar("bfe_attention_capture", default=None)


def _own_eager(module: Any):
    """The eager attention function of the module's own modeling file (BERT's, for these types)."""
    return importlib.import_module(type(module).__module__).eager_attention_forward


def capture_attention_forward(module: Any, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                              **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's eager attention, with the probabilities written into the active capture buffer."""
    cap = _active.get()
    if cap is None or module.training or query.shape[0] != 1 or query.dtype != cap.buffer.dtype \
            or cap.layer >= cap.buffer.shape[0] \
            or tuple(cap.buffer.shape[1:]) != (query.shape[1], query.shape[2], key.shape[2]):
        return _own_eager(module)(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout, **kwargs)
    scaling = query.size(-1) ** -0.5 if scaling is None else scaling
    probs = cap.buffer[cap.layer]  # (H, T, T), a view: written in place below
    cap.layer += 1
    torch.matmul(query[0], key[0].transpose(1, 2), out=probs)
    probs.mul_(scaling)
    if attention_mask is not None and attention_mask.dtype == torch.bool:
        probs.masked_fill_(~attention_mask[0], torch.finfo(probs.dtype).min)
    elif attention_mask is not None:
        probs.add_(attention_mask[0])
    # softmax in place (same arithmetic as torch's: subtract the row maximum, exponentiate, normalise)
    probs.sub_(probs.amax(dim=-1, keepdim=True)).exp_()
    probs.div_(probs.sum(dim=-1, keepdim=True))
    out = torch.matmul(probs.unsqueeze(0), value).transpose(1, 2).contiguous()
    return out, probs.unsqueeze(0)


def register() -> None:
    """Register :data:`IMPLEMENTATION` with transformers (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    AttentionInterface.register(IMPLEMENTATION, capture_attention_forward)
    # The same additive float masks eager attention gets (a new name would otherwise get SDPA's).
    AttentionMaskInterface.register(IMPLEMENTATION, eager_mask)


def supports(model: torch.nn.Module) -> bool:
    """Whether ``model`` can write its attention into a capture buffer."""
    return getattr(model.config, "model_type", None) in CAPTURE_TYPES and getattr(model, "_supports_attention_backend", False)


def enable(model: torch.nn.Module) -> bool:
    """Switch a loaded eager model to the capturing implementation when it supports it; True if so."""
    if not supports(model):
        return False
    register()
    model.set_attn_implementation(IMPLEMENTATION)
    return True


@contextmanager
def capturing(layers: int, heads: int, tokens: int, device: torch.device) -> Iterator[Capture]:
    """Within the block, a float32 forward pass of batch 1 in this thread writes its attention into
    the yielded capture's buffer, (layers, heads, T, T). A layer that did not capture (another
    dtype, another architecture) leaves its slot unwritten: check ``complete`` after the pass.
    """
    cap = Capture(torch.empty((layers, heads, tokens, tokens), dtype=torch.float32, device=device))
    token = _active.set(cap)
    try:
        yield cap
    finally:
        _active.reset(token)
