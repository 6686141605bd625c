"""The lab presets' downstream measure: fine-tune a pre-trained checkpoint on a suite of tasks, with or without the
random-initialisation control."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analysis.tasks import BUILT_IN
from core.errors import InvalidConfig
from models.finetune.config import FineTuneConfig
from models.finetune.loop import finetune

#: What the lab's presets fine-tune a pre-trained checkpoint with (tiny models from scratch need a larger rate
#: than BERT's 2e-5–5e-5: the lab pre-trains at 1e-3, and at 1e-4 a 2 × 128 model stays at the majority class).
DOWNSTREAM_DEFAULTS: dict[str, Any] = {"tasks": ["supersense"], "epochs": 3, "max_train": 2000, "max_test": 500,
                                       "lr": 1e-3, "max_len": 128, "batch": 16}


def check_downstream(spec: dict[str, Any]) -> dict[str, Any]:
    """The downstream suite of a lab preset, completed with :data:`DOWNSTREAM_DEFAULTS` and checked whole.

    Raises:
        InvalidConfig: an unknown key or task, or a size out of :data:`LIMITS`.
    """
    if not isinstance(spec, dict):
        raise InvalidConfig("The downstream suite must be a mapping of settings.")
    unknown = set(spec) - set(DOWNSTREAM_DEFAULTS)
    if unknown:
        raise InvalidConfig(f"Unknown downstream setting(s): {', '.join(sorted(map(str, unknown)))[:200]}.",
                            "Use: " + ", ".join(DOWNSTREAM_DEFAULTS) + ".")
    out = {**DOWNSTREAM_DEFAULTS, **spec}
    tasks = out["tasks"]
    if not (isinstance(tasks, list | tuple) and 1 <= len(tasks) <= len(BUILT_IN) and all(t in BUILT_IN for t in tasks)):
        raise InvalidConfig(f"Downstream tasks must be some of {', '.join(BUILT_IN)}, not {str(tasks)[:80]!r}.")
    out["tasks"] = list(dict.fromkeys(tasks))
    for t in out["tasks"]:  # the same bounds as a fine-tuning run of the page
        FineTuneConfig(model="trained/x", task=t, epochs=out["epochs"], batch=out["batch"], lr=out["lr"], max_len=out["max_len"],
                       max_train=out["max_train"], max_test=out["max_test"], run="x").validate()
    return out


def downstream(checkpoint: str, spec: dict[str, Any], seed: int, control: bool = False,
               should_stop: Callable[[], bool] | None = None, on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fine-tune a pre-trained ``checkpoint`` on each task of ``spec`` (:func:`check_downstream`) with ``seed`` and,
    with ``control``, the same architecture from random initialisation: the lab presets' downstream measure.

    Returns ``{task: {accuracy, interval, baseline, correct, items, clusters, seconds, [random_accuracy, random_correct,
    random_seconds]}}`` (``correct``: 1 per right test item, ``items`` their ids and ``clusters`` their lemmas; the test
    subset is drawn from the seed, so two arms with the same seed are scored on the same items, and two seeds on
    different ones where the split is larger than ``max_test``). A cancelled fine-tune stops the loop; what finished
    is returned.
    """
    spec = check_downstream(spec)
    out: dict[str, Any] = {}
    for task in spec["tasks"]:
        row: dict[str, Any] = {}
        for mode in ("finetune", "random") if control else ("finetune",):
            if should_stop is not None and should_stop():
                return out
            if on_phase is not None:
                on_phase(f"downstream: {task}, {'from random initialisation' if mode == 'random' else 'fine-tuning'}")
            cfg = FineTuneConfig(model=checkpoint, task=task, mode=mode, seed=seed, epochs=spec["epochs"], batch=spec["batch"],
                                 lr=spec["lr"], max_len=spec["max_len"], max_train=spec["max_train"], max_test=spec["max_test"],
                                 run="downstream")
            r = finetune(cfg, should_stop=should_stop, save=False)
            if r.stopped:
                return out
            prefix = "random_" if mode == "random" else ""
            row.update({f"{prefix}accuracy": r.accuracy, f"{prefix}correct": r.correct, f"{prefix}seconds": round(r.seconds, 2)})
            if mode == "finetune":
                row.update(interval=list(r.accuracy_interval), baseline=r.majority_baseline, test_examples=r.test_examples,
                           items=r.items, clusters=r.clusters)
        out[task] = row
    return out
