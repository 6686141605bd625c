"""A fine-tuned model on disk: saved atomically with its run's config and scores, and that config read back."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from models.finetune.config import FineTuneConfig, FineTuneResult

if TYPE_CHECKING:
    import torch


def save_run(config: FineTuneConfig, model: torch.nn.Module, tok: Any, result: FineTuneResult) -> str:
    """Save the fine-tuned model with its tokenizer under ``BFE_MODEL_DIR/trained/<run>`` (atomically, as the
    pre-training lab saves), with the run's config and scores in ``bfe_run.json``; returns ``trained/<run>``.

    Raises:
        TrainingFailed: the folder cannot be written; nothing half-written is left.
    """
    from models.locate import validate_model_id
    from models.pretrain.config import trained_dir
    from models.training import atomic_save

    name = f"trained/{config.run_name}"
    validate_model_id(name)

    def write(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tok.save_pretrained(folder)
        (folder / "bfe_run.json").write_text(json.dumps({"kind": "finetune", "config": asdict(config),
                                                         "evaluation": result.summary()}, default=str))

    atomic_save(trained_dir() / config.run_name, write)
    return name


def stored_config(model_id: str) -> FineTuneConfig | None:
    """The config a fine-tuning lab run was trained with (its ``bfe_run.json``), or None for any other model."""
    from models.locate import local_folder, validate_model_id

    mid = validate_model_id(model_id)
    if not mid.startswith("trained/") or "@" in mid:
        return None
    try:
        info = json.loads((local_folder(mid) / "bfe_run.json").read_text(encoding="utf-8"))
        if info.get("kind") != "finetune":
            return None
        return FineTuneConfig.from_stored(info["config"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
