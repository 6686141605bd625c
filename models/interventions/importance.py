"""Michel, Levy & Neubig 2019 ("Are Sixteen Heads Really Better than One?"): the importance of head h is the
expected absolute gradient of the loss with respect to its mask variable ξ_h, summed over batches as the paper's
released code does (one backward pass per batch), then normalised per layer (L2), as the paper."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from models.interventions.heads import HeadMask, head_shape
from models.interventions.targets import Chunk, Target, make_target
from models.loader import ModelRef


@dataclass(frozen=True)
class Importance:
    """Head importance (layers × heads): ``raw`` the summed absolute gradients, ``scores`` normalised per layer (L2)."""

    model_id: str
    raw: Any  # numpy (layers, heads)
    scores: Any  # numpy (layers, heads)
    loss: float
    texts: int
    masked: int
    target: str = "masked-lm"
    measure: str = "masked-word accuracy"
    #: ∂L/∂ξ_h of the mean loss over every scored place (signed): −gradient is the first-order estimate of what
    #: removing head h does to the loss, which ablating it measures.
    gradient: Any = None

    def order(self) -> list[tuple[int, int]]:
        """Heads from the least to the most important (the order the paper prunes them in)."""
        import numpy as np

        flat = np.argsort(self.scores, axis=None, kind="stable")
        return [(int(i // self.scores.shape[1]), int(i % self.scores.shape[1])) for i in flat]


def importance_of(target: Target, chunks: list[Chunk]) -> Importance:
    """Michel et al.'s importance of every head for ``target``'s loss over ``chunks``: |∂L/∂ξ_h| summed over batches
    (one backward pass each), normalised per layer by its L2 norm."""
    import torch

    net = target.lm.model
    layers, heads = head_shape(net)
    mask = torch.ones(layers, heads, device=target.lm.device, requires_grad=True)
    raw = torch.zeros(layers, heads, device=target.lm.device)
    signed = torch.zeros(layers, heads, device=target.lm.device)
    loss_sum, count = 0.0, 0
    was_training = net.training
    net.eval()
    try:
        with HeadMask(net, mask):
            for inputs, labels, extra in chunks:
                logits, gold = target.outputs(inputs, labels, extra)
                loss = torch.nn.functional.cross_entropy(logits.float(), gold)
                mask.grad = None
                loss.backward()
                raw += mask.grad.abs().detach()
                signed += mask.grad.detach() * int(gold.numel())
                loss_sum += float(loss.detach()) * int(gold.numel())
                count += int(gold.numel())
    finally:
        net.zero_grad(set_to_none=True)
        net.train(was_training)
    norm = raw.pow(2).sum(-1, keepdim=True).sqrt()
    scores = raw / (norm + 1e-20)
    ranked = sum(int(inputs["input_ids"].shape[0]) for inputs, _, _ in chunks)
    return Importance(target.lm.model_id, raw.cpu().numpy(), scores.cpu().numpy(), loss_sum / count, ranked, count,
                      target.kind, target.measure, (signed / count).cpu().numpy())


def head_importance(model: ModelRef, texts: Sequence[str] = (), seed: int = 0, target: str = "masked-lm", task: str = "",
                    items: int = 128) -> Importance:
    """Michel et al.'s importance of every head for ``target``'s loss (:func:`make_target`; the masked-LM loss on
    ``texts`` by default): |∂L/∂ξ_h| summed over batches (one backward pass each), normalised per layer by its L2
    norm.

    Raises:
        InvalidText: fewer than 2 or more than :data:`MAX_SENTENCES` texts, a text too long.
        InvalidConfig: an unknown target or task.
        UnsupportedTask: a model without the head the target needs.
        UnsupportedArchitecture: see :func:`head_projections`.
    """
    made = make_target(model, target, texts, task, seed, items)
    return importance_of(made, made.chunks(slice(None), seed))
