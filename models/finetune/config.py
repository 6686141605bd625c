"""What a fine-tuning run is: its modes and limits, :class:`FineTuneConfig` (checked whole before any work starts),
:class:`FineTuneResult`, and the recipe's learning rate by model size. No torch: the lab's page and planner import
this at no cost."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analysis.tasks import BUILT_IN
from core.errors import InvalidConfig
from models.run_config import check_run_name, check_whole_numbers, from_stored

TRAINING_MODES = {"finetune": "fine-tuned (all weights)", "frozen": "frozen encoder + linear classifier",
         "random": "random initialisation, fine-tuned (the control)"}
LAYERS = {"last": "the last layer", "last4": "the last four layers, concatenated (BERT's best frozen variant)"}
LIMITS = {"epochs": (1, 20), "batch": (1, 256), "max_len": (16, 512), "max_train": (10, 100_000), "max_test": (10, 20_000),
          "seed": (0, 10**6)}


@dataclass(frozen=True)
class FineTuneConfig:
    """One fine-tuning run. ``task``: ``wic``, ``supersense`` or a path to a CSV (``text`` or ``text_a,text_b``, and
    ``label``). ``lr`` None: the recipe's rate for the model's size (:func:`default_lr`)."""

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    task: str = "wic"
    mode: str = "finetune"
    seed: int = 0
    epochs: int = 3
    batch: int = 16
    lr: float | None = None
    warmup: float = 0.1
    max_len: int = 128
    max_train: int = 2000
    max_test: int = 500
    layer: str = "last"  # frozen mode: "last", "last4" or a layer number ("0" = embeddings)
    run: str = ""

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> FineTuneConfig:
        return from_stored(cls, stored)

    def validate(self) -> FineTuneConfig:
        """Check the whole request (names included) before any work starts.

        Raises:
            InvalidConfig: an unknown mode or layer, a size out of bounds, a run name that cannot be a folder.
        """
        if self.mode not in TRAINING_MODES:
            raise InvalidConfig(f"Unknown mode {self.mode!r}.", "Use one of: " + ", ".join(TRAINING_MODES) + ".")
        check_whole_numbers(self, LIMITS)
        if self.lr is not None and not (isinstance(self.lr, int | float) and 0 < self.lr < 1):
            raise InvalidConfig(f"The learning rate must be in (0, 1), not {self.lr!r}.")
        if not 0 <= self.warmup < 1:
            raise InvalidConfig(f"Warm-up is a share of the steps in [0, 1), not {self.warmup!r}.")
        if self.layer not in LAYERS and not (self.layer.isdigit() and int(self.layer) <= 128):
            raise InvalidConfig(f"Unknown layer {self.layer!r}.", "Use last, last4 or a layer number (0 = embeddings).")
        if not isinstance(self.model, str) or not self.model or len(self.model) > 200:
            raise InvalidConfig("Name a model (a catalog id, a Hub id, a folder or trained/<run>).")
        if self.task not in BUILT_IN and not self.task.lower().endswith(".csv"):
            raise InvalidConfig(f"Unknown task {self.task[:60]!r}.", "Use wic, supersense or a path to a .csv file.")
        check_run_name(self.run_name)
        return self

    @property
    def task_name(self) -> str:
        return self.task if self.task in BUILT_IN else Path(self.task).stem[:30] or "csv"

    @property
    def run_name(self) -> str:
        if self.run:
            return self.run
        short = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model.rsplit("/", 1)[-1])[:24].strip("-.") or "model"
        return f"ft-{short}-{re.sub(r'[^A-Za-z0-9._-]+', '-', self.task_name)}-{self.mode}-s{self.seed}"


@dataclass
class FineTuneResult:
    """Scores (with bootstrap 95% intervals over the test set), the curves, and what fine-tuning changed."""

    config: FineTuneConfig
    accuracy: float = float("nan")
    accuracy_interval: tuple[float, float] = (float("nan"), float("nan"))
    macro_f1: float = float("nan")
    macro_f1_interval: tuple[float, float] = (float("nan"), float("nan"))
    majority_baseline: float = float("nan")
    train_examples: int = 0
    test_examples: int = 0
    labels: tuple[str, ...] = ()
    trainable_parameters: int = 0
    seconds: float = 0.0
    tokens: int = 0
    checkpoint: str = ""
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, training loss)
    epochs: list[dict[str, float]] = field(default_factory=list)  # {epoch, train_loss, validation_accuracy}
    layer_change: list[dict[str, Any]] = field(default_factory=list)  # {layer, weight_change, cka}
    correct: list[int] = field(default_factory=list)  # per test item, 1 = right (for paired comparisons)
    items: list[str] = field(default_factory=list)  # the test items' ids, in the order of ``correct``
    clusters: list[str] = field(default_factory=list)  # their clusters (a built-in task's lemma), for the intervals
    stopped: str = ""

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        """The result as the command line prints it (JSON-ready)."""
        return {"model": self.config.model, "task": self.config.task_name, "mode": self.config.mode, "seed": self.config.seed,
                "accuracy": self.accuracy, "accuracy_interval": list(self.accuracy_interval),
                "macro_f1": self.macro_f1, "macro_f1_interval": list(self.macro_f1_interval),
                "majority_baseline": self.majority_baseline, "train_examples": self.train_examples,
                "test_examples": self.test_examples, "trainable_parameters": self.trainable_parameters,
                "seconds": round(self.seconds, 2), "checkpoint": self.checkpoint, "epochs": self.epochs,
                "layer_change": self.layer_change, "stopped": self.stopped}


def run_label(group: str, model: str, mode: str, seed: int) -> str:
    """A run name ``<group>-<model>-<mode>-s<seed>`` that is a valid folder name (at most 60 characters)."""
    short = re.sub(r"[^A-Za-z0-9._-]+", "-", model.rsplit("/", 1)[-1]).strip("-.")[:20] or "model"
    tail = f"-{short}-{mode}-s{seed}"
    return (group[: 60 - len(tail)] + tail).strip("-.")


def default_lr(parameters: int) -> float:
    """The slide's range (2e-5 to 5e-5, for BERT-base and -large) by model size: 2e-5 above 200M parameters, 3e-5 up
    to 200M, 5e-5 up to 60M; and 1e-4 up to 30M, because smaller models take larger rates. Chosen for MiniLM (22M)
    on the validation split of WiC and supersense: 1e-4 is the rate that serves both (bench/results/finetune-lr.txt)."""
    if parameters <= 30_000_000:
        return 1e-4
    return 5e-5 if parameters <= 60_000_000 else 3e-5 if parameters <= 200_000_000 else 2e-5
