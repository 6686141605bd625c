"""Checkpoints the project ships for the lab to start from: today one, the DistilBERT preset's teacher.

DistilBERT (Sanh et al. 2019) distils from a teacher trained before the experiment (bert-base-uncased). The lab
trained its teachers per seed inside the experiment instead, and a lesson's 300 steps leave them at chance on the
downstream suite, so no classroom verdict on retention or on distilled-vs-scratch could be reached
(bench/results/verdicts-distil-classroom-per-seed-teachers.txt). A teacher trained once, 12,000 steps (``bench/ship_teacher.py``,
15.5 min on one thread), scores +0.063 [+0.037, +0.089] over its random initialisation on the classroom suite
(bench/results/distil-teacher-steps.txt) and is 6 MB: it ships under ``data/lab/teachers/`` and a run starts from
it with ``init`` (its ``steps`` may be 0: the shipped weights evaluated and saved as the run).

No torch here: what fits is decided from the configs alone.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

from core.errors import InvalidConfig

TEACHERS_DIR = Path(__file__).resolve().parents[2] / "data" / "lab" / "teachers"
#: The shipped checkpoints by name (a folder under :data:`TEACHERS_DIR`), with what each is.
DESCRIPTIONS = {"distil-h128": "a masked LM of 2 layers of 128 trained 12,000 steps of 64 WordNet glosses (15.5 min on one "
                               "thread: bench/ship_teacher.py), +0.063 [+0.037, +0.089] over its random initialisation "
                               "on the classroom suite (bench/results/distil-teacher-steps.txt)"}
SHIPPED = tuple(DESCRIPTIONS)
#: What a run must share with a shipped checkpoint to start from it: the model's shape and what it reads.
SAME = ("layers", "hidden", "heads", "ffn", "attention", "vocab", "corpus", "corpus_lines")


#: How ``distil-h128`` differs from the lab's default run (``TrainConfig()``: 2 layers of 128, 64 tokens, WordNet):
#: what ``bench/ship_teacher.py`` trains it with.
TEACHER_SETTINGS = {"steps": 12_000, "batch": 64, "seed": 0}


@cache
def shipped_config(name: str) -> dict[str, Any]:
    """The training config stored with a shipped checkpoint (its ``bfe_run.json``), once its files are checked: the
    config with every field a run must share, the tokenizer, and weights safetensors opens (it refuses a header that
    does not parse or tensors the file does not hold to the end: a cut copy, or a Git LFS pointer in place of the
    weights, is refused here, at plan time, not when every teacher run of an experiment fails).

    Raises:
        InvalidConfig: no such shipped checkpoint, or its folder is missing, incomplete or damaged.
    """
    if not isinstance(name, str) or name not in SHIPPED:
        raise InvalidConfig(f"No shipped checkpoint named {str(name)[:60]!r}.", "Shipped: " + ", ".join(SHIPPED) + ".")
    where = TEACHERS_DIR / name
    try:
        config = json.loads((where / "bfe_run.json").read_text(encoding="utf-8"))["config"]
        if not isinstance(config, dict) or any(f not in config for f in (*SAME, "seq_len", "seed")):
            raise ValueError("its config lacks fields")
        if not (where / "tokenizer.json").is_file():
            raise ValueError("no tokenizer.json")
        from safetensors import SafetensorError, safe_open  # its header check, without torch (numpy arrays)

        try:
            with safe_open(where / "model.safetensors", framework="numpy") as weights:  # refuses a file cut short
                weights.keys()
        except SafetensorError as err:
            raise ValueError(str(err)) from err
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise InvalidConfig(f"The shipped checkpoint {name!r} is missing or damaged ({type(err).__name__}: {str(err)[:120]}).",
                            "Restore data/lab/teachers/ from the repository, or rebuild it: python bench/ship_teacher.py.") from err
    return config


def folder(name: str) -> Path:
    """Where a shipped checkpoint's weights are. Raises InvalidConfig for a name that is not one."""
    shipped_config(name)
    return TEACHERS_DIR / name


def mismatch(name: str, config: Any) -> dict[str, tuple[Any, Any]]:
    """What differs between a run's config and the shipped checkpoint's ({field: (run's, shipped's)}); also a
    sequence longer than the one it was trained at and an objective other than the masked LM. Empty: it fits."""
    shipped = shipped_config(name)
    out = {f: (getattr(config, f), shipped[f]) for f in SAME if getattr(config, f) != shipped[f]}
    if config.seq_len > shipped["seq_len"]:
        out["seq_len"] = (config.seq_len, shipped["seq_len"])
    if config.objective != "mlm" or config.parametrisation != "sp":
        out["objective"] = (f"{config.objective} ({config.parametrisation})", "mlm (sp)")
    return out


def teacher_for(base: Any) -> str:
    """The shipped teacher a distillation experiment of ``base``'s shape and data starts from, or "" where none fits
    (another width or depth, an uploaded corpus, a longer sequence: its teachers are then trained per seed)."""
    candidate = replace(base, objective="mlm")  # a μP base keeps μP: no shipped teacher, and μP's own refusal
    for name in SHIPPED:
        try:
            if not mismatch(name, candidate):
                return name
        except InvalidConfig:  # a damaged or missing folder: train the teacher instead of failing the plan
            continue
    return ""


def check_init(config: Any) -> None:
    """A run's ``init``: a shipped checkpoint its config fits; ``steps`` 0 only with one.

    Raises:
        InvalidConfig: an unknown name, a config that does not fit it (with what differs), or 0 steps from nothing.
    """
    if not isinstance(config.init, str):
        raise InvalidConfig(f"init is the name of a shipped checkpoint or empty, not {type(config.init).__name__}.")
    if not config.init:
        if config.steps < 1:
            raise InvalidConfig("steps must be at least 1 (0 only from a shipped checkpoint, init).")
        return
    wrong = mismatch(config.init, config)
    if wrong:
        said = ", ".join(f"{k} {a!r} (it has {b!r})" for k, (a, b) in wrong.items())
        raise InvalidConfig(f"This run cannot start from the shipped checkpoint {config.init}: {said}.",
                            "Use its shape and data, or start from random initialisation (init '').")
