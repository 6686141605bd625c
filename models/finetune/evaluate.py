"""What a run scored and what it changed: predictions, accuracy and macro-F1 with intervals, and per layer the
relative weight change and the CKA between representations before and after."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from analysis.tasks import Task
from models.finetune.config import FineTuneResult
from models.finetune.data import collate
from models.finetune.model import encoder_of

if TYPE_CHECKING:
    import torch

#: test sentences whose tokens the before/after CKA compares (bounded: CKA is O(tokens × hidden²))
CKA_SENTENCES = 200


def _layer_modules(model: torch.nn.Module) -> list[tuple[str, list[Any]]]:
    """(name, parameters) per layer: the embeddings, each transformer layer (the ModuleList as long as the model's
    layer count), then the task head (everything outside the pre-trained body)."""
    import torch

    body = encoder_of(model)
    n = int(getattr(model.config, "num_hidden_layers", 0) or getattr(model.config, "n_layer", 0))
    layers = next((m for m in body.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n), None)
    in_layers = {id(p) for p in layers.parameters()} if layers is not None else set()
    in_body = {id(p) for p in body.parameters()}
    out = [("embeddings", [p for name, p in body.named_parameters() if id(p) not in in_layers and "embed" in name])]
    if layers is not None:
        out += [(f"layer {i + 1}", list(m.parameters())) for i, m in enumerate(layers)]
    out.append(("head", [p for p in model.parameters() if id(p) not in in_body]))
    return out


def weight_snapshot(model: torch.nn.Module) -> list[tuple[str, list[Any]]]:
    """A copy of every layer's tensors (for :func:`weight_change`)."""
    return [(name, [p.detach().clone() for p in ps]) for name, ps in _layer_modules(model)]


def weight_change(model: torch.nn.Module, before: list[tuple[str, list[Any]]]) -> list[tuple[str, float]]:
    """(layer, ‖W_after − W_before‖ / ‖W_before‖) over each layer's tensors together (Frobenius norms)."""
    out = []
    for (name, now), (_, then) in zip(_layer_modules(model), before, strict=True):
        if not then:
            continue
        # the snapshot is taken before accelerate moves the model (to a GPU, where there is one): compare on its device
        diff = math.sqrt(sum(float((a.detach().float() - b.to(a.device).float()).pow(2).sum()) for a, b in zip(now, then, strict=True)))
        base = math.sqrt(sum(float(b.float().pow(2).sum()) for b in then))
        out.append((name, diff / base if base else float("nan")))
    return out


def hidden_states(model: torch.nn.Module, enc: dict[str, Any], idx: Sequence[int], pad_id: int, batch: int = 32) -> list[Any]:
    """Per layer (embeddings first), the vectors of every real token of the examples ``idx``: (tokens, hidden)
    float32 numpy arrays, in the same order for any model over the same input."""
    import numpy as np
    import torch

    body = encoder_of(model)
    dev = next(model.parameters()).device
    per_layer: list[list[Any]] = []
    with torch.no_grad():
        for s in range(0, len(idx), batch):
            b = collate(enc, idx[s: s + batch], pad_id, False)
            kwargs = {k: v.to(dev) for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            hs = body(**kwargs, output_hidden_states=True).hidden_states
            keep = b["attention_mask"].bool()
            if not per_layer:
                per_layer = [[] for _ in hs]
            for i, h in enumerate(hs):
                per_layer[i].append(h.float().cpu()[keep].numpy())
    return [np.concatenate(chunks) for chunks in per_layer]


def predict(model: torch.nn.Module, enc: dict[str, Any], pad_id: int, token_task: bool, batch: int = 64) -> list[int]:
    """The predicted label of every example of an :func:`~models.finetune.data.encode`d split (at the marked word
    for a token task)."""
    import torch

    dev = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for s in range(0, len(enc["input_ids"]), batch):
            idx = list(range(s, min(s + batch, len(enc["input_ids"]))))
            b = collate(enc, idx, pad_id, token_task)
            kwargs = {k: v.to(dev) for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            logits = model(**kwargs).logits.float().cpu()
            if token_task:
                pos = torch.tensor([max(enc["word_index"][i], 0) for i in idx])
                logits = logits[torch.arange(len(idx)), pos]
            out += logits.argmax(-1).tolist()
    return out


def score(result: FineTuneResult, task: Task, pred: Any, seed: int) -> None:
    """Fill ``result`` with the test split's scores: per-item correctness (with the items' ids and clusters, for
    paired comparisons), accuracy and macro-F1 with bootstrap 95% intervals. Where every item has a cluster (a
    built-in task's lemma), the intervals resample clusters: a lemma's items are not independent."""
    import numpy as np

    from analysis.stats import bootstrap_interval, macro_f1

    y_test = np.array([e.label for e in task.test])
    correct = (pred == y_test).astype(int)
    result.correct = correct.tolist()
    result.items, result.clusters = [e.item for e in task.test], [e.cluster for e in task.test]
    clusters = result.clusters if all(result.clusters) else None
    result.accuracy = float(correct.mean())
    result.accuracy_interval = bootstrap_interval(y_test, pred, "accuracy", seed=seed, clusters=clusters)
    result.macro_f1 = macro_f1(y_test, pred, len(task.labels))
    result.macro_f1_interval = bootstrap_interval(y_test, pred, "macro_f1", seed=seed, n_labels=len(task.labels),
                                                  clusters=clusters)


def layer_change(model: torch.nn.Module, before_states: list[Any], before_weights: list[tuple[str, list[Any]]], enc: dict[str, Any],
                 idx: Sequence[int], pad_id: int) -> list[dict[str, Any]]:
    """Per layer (embeddings, each layer, then the head): ``{layer, weight_change, cka}``, the relative weight change
    since ``before_weights`` (:func:`weight_snapshot`) and the linear CKA between ``before_states``
    (:func:`hidden_states` of the examples ``idx`` of ``enc``) and the same states now (NaN for the head, which has
    none)."""
    from analysis.representations import linear_cka

    after_states = hidden_states(model, enc, idx, pad_id)
    changes = dict(weight_change(model, before_weights))
    names = ["embeddings"] + [f"layer {i}" for i in range(1, len(after_states))]
    out = [{"layer": name, "weight_change": changes.get(name, float("nan")),
            "cka": float(linear_cka(b, a)) if len(b) > 1 else float("nan")}
           for name, b, a in zip(names, before_states, after_states, strict=True)]
    if "head" in changes:
        out.append({"layer": "head", "weight_change": changes["head"], "cka": float("nan")})
    return out
