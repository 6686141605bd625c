"""The lab's folder and the checkpoints trained in it: ``BFE_MODEL_DIR/trained/<run>``, which every model picker
lists as *trained here*."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from core.errors import ExplorerError
from models.pretrain.config import trained_dir


def lab_folder() -> Path:
    """The lab's writable folder (the checkpoints, the queue's lock, uploads and worker logs live there).

    Raises:
        ExplorerError: the folder cannot be created or written, with how to point the lab elsewhere.
    """
    folder = trained_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        if not os.access(folder, os.W_OK):
            raise PermissionError(13, "not writable")
    except OSError as err:
        raise ExplorerError(f"The lab cannot write to {folder} ({err.strerror or type(err).__name__}).",
                            "Point BFE_MODEL_DIR at a writable folder: trained models and the queue's lock live there.") from None
    return folder


def trained_models(task: str | None = None) -> list[str]:
    """``trained/<run>`` ids of the lab's checkpoints where the models are: this machine's model folder, or the model
    backend's (``BFE_BACKEND``: its model folder is the one the GPU machine's lab worker writes to)."""
    from services.executor import executor

    try:
        return executor().on_model_folder(trained_models_here, task)
    except ExplorerError:  # a backend that does not answer: no lab checkpoint to offer now (the sidebar says why)
        return []


def run_info(model_id: str) -> dict[str, Any]:
    """What a lab checkpoint's ``bfe_run.json`` says (config, evaluation), where the models are; or {}."""
    from services.executor import executor

    if not isinstance(model_id, str) or not model_id.startswith("trained/"):
        return {}
    try:
        return executor().on_model_folder(run_info_here, model_id)
    except ExplorerError:
        return {}


def trained_models_here(task: str | None = None) -> list[str]:
    """``trained/<run>`` ids of the checkpoints trained here (complete folders only), newest first; with ``task``,
    only those whose tensors hold that head (:func:`models.inspection.inspect`)."""
    root = trained_dir()
    if not root.is_dir():
        return []
    folders = sorted((p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and (p / "bfe_run.json").is_file()),
                     key=lambda p: p.stat().st_mtime, reverse=True)
    out = []
    for p in folders[:200]:
        mid = f"trained/{p.name}"
        if task is not None:
            try:
                from models.inspection import inspect

                if task not in inspect(mid).heads:
                    continue
            except ExplorerError:
                continue
        out.append(mid)
    return out


def run_info_here(model_id: str) -> dict[str, Any]:
    """What ``trained/<run>/bfe_run.json`` says about a checkpoint trained here (config, evaluation), or {}."""
    if not model_id.startswith("trained/"):
        return {}
    path = trained_dir() / model_id.split("/", 1)[1] / "bfe_run.json"
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}

