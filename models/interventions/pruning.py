"""The pruning curve: the target's accuracy as heads are removed in order of importance, against random orders
(several seeds, a t interval per point), heads ranked once on one half of the items and scored on the other; and the
verdict over replicates on whether importance order keeps more accuracy."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import InvalidConfig, InvalidText
from models.interventions.heads import head_means, head_shape
from models.interventions.importance import Importance, importance_of
from models.interventions.targets import BATCH, MAX_ITEMS, _merged_inputs, _summed, _texts, make_target
from models.loader import ModelRef

#: Points of a pruning curve at most, and random orders at most.
MAX_STEPS = 24
MAX_SEEDS = 10
#: Forward passes a pruning curve may cost ((steps + 1) × (seeds + 1) × batches of scored texts); what that is in
#: time for BERT-base on 2 CPU cores: bench/results/README.md.
MAX_PRUNING_PASSES = 120


@dataclass(frozen=True)
class PruningCurve:
    """The target's accuracy (and loss) against the share of heads removed: in importance order, and over random
    orders (mean and 95% t interval over ``seeds``). ``correct`` holds, per point, the per-item correctness in
    importance order and in each random order (``{"importance": [...], "random": [[...], ...]}``), for paired
    comparisons."""

    model_id: str
    removed: list[int]  # heads removed at each point
    total: int
    by_importance: list[float]
    random_mean: list[float]
    random_low: list[float]
    random_high: list[float]
    loss_by_importance: list[float]
    seeds: int
    mode: str
    importance: Importance
    note: str = field(default="")
    measure: str = "masked-word accuracy"
    scored: int = 0
    correct: list[dict[str, Any]] = field(default_factory=list, repr=False)
    item_ids: list[str] = field(default_factory=list, repr=False)  # each scored place's name, in ``correct``'s order
    item_clusters: list[str] = field(default_factory=list, repr=False)  # and its cluster (a lemma, a sentence)
    seed: int = 0  # the seed its masks and random orders were drawn with


def pruning_curve(model: ModelRef, texts: Sequence[str] = (), steps: int = 10, seeds: int = 3, mode: str = "zero",
                  seed: int = 0, target: str = "masked-lm", task: str = "", items: int = 128,
                  max_passes: int = MAX_PRUNING_PASSES) -> PruningCurve:
    """Remove heads ``steps`` times in equal shares (0 up to all but one head), least important first, and in
    ``seeds`` random orders; score the target's accuracy after each. Importance is measured on items 1, 3, 5, … and
    the curve scored on items 2, 4, 6, …, so the order is not fitted to the score (the curve carries that importance).

    Raises:
        InvalidText: see :func:`head_importance` (at least 4 texts here: 2 to rank, 2 to score).
        InvalidConfig: steps, seeds, mode, target or task out of range, or more than ``max_passes`` forward passes.
    """
    import numpy as np
    import torch
    from scipy import stats

    if not (isinstance(steps, int) and 2 <= steps <= MAX_STEPS) or not (isinstance(seeds, int) and 2 <= seeds <= MAX_SEEDS):
        raise InvalidConfig(f"Steps must be 2 to {MAX_STEPS} and seeds 2 to {MAX_SEEDS}.")
    if mode not in ("zero", "mean"):
        raise InvalidConfig("A removed head outputs zeros ('zero') or its mean ('mean').")
    if not (isinstance(items, int) and not isinstance(items, bool) and 8 <= items <= MAX_ITEMS):
        raise InvalidConfig(f"Items must be a whole number from 8 to {MAX_ITEMS}.")
    if target == "masked-lm":
        kept = _texts(texts)
        if len(kept) < 4:
            raise InvalidText("A pruning curve needs at least 4 sentences (half rank the heads, half score them).")
        scored_items = len(kept[1::2])
    else:
        scored_items = (items + 1) // 2
    passes = (steps + 1) * (seeds + 1) * math.ceil(scored_items / BATCH)
    if passes > max_passes:
        raise InvalidConfig(f"This curve would take {passes} forward passes; at most {max_passes} are run.",
                            "Use fewer steps, fewer random orders, or fewer sentences or items.")
    made = make_target(model, target, texts, task, seed, items)
    importance = importance_of(made, made.chunks(slice(0, None, 2), seed))
    scored = made.chunks(slice(1, None, 2), seed + 1)
    places = made.places(slice(1, None, 2), scored)
    net = made.lm.model
    layers, heads = head_shape(net)
    total = layers * heads
    means = head_means(net, _merged_inputs(scored)) if mode == "mean" else None
    counts = sorted({round(i * (total - 1) / steps) for i in range(steps + 1)})

    def curve(order: list[tuple[int, int]]) -> tuple[list[float], list[float], list[list[int]]]:
        acc, loss, right = [], [], []
        for k in counts:
            mask = torch.ones(layers, heads, device=made.lm.device)
            for layer, head in order[:k]:
                mask[layer, head] = 0.0
            item_loss, item_right = made.per_item(scored, mask, means)
            lo, ac = _summed((item_loss, item_right))
            acc.append(ac)
            loss.append(lo)
            right.append(item_right)
        return acc, loss, right

    by_importance, loss_by_importance, right_importance = curve(importance.order())
    randoms, right_random = [], []
    for s in range(seeds):
        order = [(i // heads, i % heads) for i in range(total)]
        random.Random(seed + 1000 + s).shuffle(order)
        acc, _, right = curve(order)
        randoms.append(acc)
        right_random.append(right)
    r = np.array(randoms)
    mean = r.mean(0)
    half = stats.t.ppf(0.975, seeds - 1) * r.std(0, ddof=1) / math.sqrt(seeds)
    correct = [{"importance": right_importance[i], "random": [rr[i] for rr in right_random]} for i in range(len(counts))]
    unit = "sentences" if made.kind == "masked-lm" else "items"
    return PruningCurve(made.lm.model_id, counts, total, by_importance, mean.tolist(), (mean - half).tolist(),
                        (mean + half).tolist(), loss_by_importance, seeds, mode, importance,
                        f"Heads ranked once on {unit} 1, 3, 5, …; {made.measure} scored on {unit} 2, 4, 6, … "
                        f"({len(right_importance[0])} scored places).", made.measure, len(right_importance[0]), correct,
                        [i for i, _ in places], [c for _, c in places], seed)


#: The claim a pruning verdict decides, with its source.
PRUNING_CLAIM = ("Removing the least important heads first keeps more accuracy than removing heads in a random order: "
                 "at test time a large share of heads can go with little loss, if the important ones stay.",
                 "Michel, Levy & Neubig 2019, Are Sixteen Heads Really Better than One?, Section 4 and Figure 3 "
                 "(BERT on MNLI, importance-ordered pruning)")


def pruning_verdict(curves: Sequence[PruningCurve], clusters: Sequence[Sequence[str]] | None = None,
                    ids: Sequence[Sequence[str]] | None = None, share: float = 0.5) -> Any:
    """Does importance-ordered pruning keep more accuracy than random orders when ``share`` of the heads are removed?
    ``curves``: one per replicate (a fine-tuning seed: each its own model and importance, and its random orders drawn
    with its own ``seed``), paired by replicate; the random arm of a replicate is the mean over its random orders.
    ``clusters`` (by default each curve's ``item_clusters``, a built-in task's lemma) group the scored items whose
    noise is shared across replicates: the labs' verdict (:func:`analysis.verdicts.verdict`) adds it by cluster, so
    ``ids`` (by default ``item_ids``) matter only where no clusters are given.

    Raises:
        InvalidData: fewer than 2 curves, two curves drawn with the same seed (their random orders would be the same
            orders, which a paired t over replicates does not allow for), clusters or ids that do not match.
    """
    import numpy as np

    from analysis.verdicts import verdict
    from core.errors import InvalidData

    if len(curves) < 2:
        raise InvalidData("A pruning verdict needs at least 2 replicates (fine-tuning seeds).")
    if len({c.seed for c in curves}) < len(curves):
        raise InvalidData("Two curves were drawn with the same seed: their random orders are the same orders.",
                          "Draw each replicate's curve with its own seed (pruning_curve(..., seed=...)).")
    a, b, items_a, items_b = [], [], [], []
    for n, curve in enumerate(curves):
        point = min(range(len(curve.removed)), key=lambda i: abs(curve.removed[i] / curve.total - share))
        by_importance = np.asarray(curve.correct[point]["importance"], dtype=float)
        by_random = np.asarray(curve.correct[point]["random"], dtype=float).mean(0)
        named = list(clusters[n]) if clusters is not None else (curve.item_clusters or None)
        names = list(ids[n]) if ids is not None else (curve.item_ids or None)
        if any(x is not None and len(x) != len(by_importance) for x in (named, names)):
            raise InvalidData(f"Curve {n + 1} scored {len(by_importance)} items; its clusters or ids do not match.")
        a.append(float(by_importance.mean()))
        b.append(float(by_random.mean()))
        items_a.append({"values": by_importance.tolist(), "clusters": named, "ids": names})
        items_b.append({"values": by_random.tolist(), "clusters": named, "ids": names})
    return verdict(a, b, ">", items_a=items_a, items_b=items_b)
