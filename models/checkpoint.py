"""What a checkpoint is, read from its files before any weight moves.

:func:`read_config` parses ``config.json`` (bounded in size and depth), :func:`check_checkpoint`
checks a folder holds a supported, safe (safetensors only), complete checkpoint, and :func:`preflight`
counts its parameters from the config (:mod:`analysis.params`, exact) and from the safetensors
headers (memory-mapped, nothing read), refusing a model over the size budget (``BFE_MAX_PARAMS``) or
one whose weights do not cover its architecture. :func:`display_name` names folders to users
relative to ``BFE_MODEL_DIR``, never by a server path.

No torch here.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from analysis.architectures import ARCHITECTURES
from core.errors import InvalidCheckpoint, ModelTooLarge, UnsafeCheckpoint
from core.settings import get_settings

if TYPE_CHECKING:
    from analysis.params import Breakdown

#: ``model_type`` values of the architectures this app knows how to show (one record each: analysis.architectures).
SUPPORTED_MODEL_TYPES = frozenset(ARCHITECTURES)
#: A config.json larger than this is not a model config (real ones are a few kB).
MAX_CONFIG_BYTES = 1_000_000
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


def display_name(folder: Path) -> str:
    """How a checkpoint folder is named to users: relative to ``BFE_MODEL_DIR``, never a server path."""
    try:
        return "BFE_MODEL_DIR/" + folder.resolve().relative_to(get_settings().model_dir.resolve()).as_posix()
    except (ValueError, OSError):
        return folder.name or "the model folder"


def _scrub(text: str, *folders: Path | str) -> str:
    """``text`` with server paths (model folders, the model directory, the home folder) replaced by neutral names."""
    for folder in folders:
        text = text.replace(str(folder), display_name(Path(folder)))
    text = text.replace(str(get_settings().model_dir), "BFE_MODEL_DIR")
    home = os.path.expanduser("~")
    return text.replace(home, "~") if len(home) > 1 else text


def read_config(folder: Path) -> dict[str, Any]:
    """The parsed ``config.json`` of ``folder``, bounded in size and depth.

    Raises:
        InvalidCheckpoint: missing, oversized, not JSON, nested too deeply, or not a JSON object.
    """
    label = display_name(folder)
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        raise InvalidCheckpoint(f"{label} has no config.json.",
                                "Save the model with save_pretrained() or fetch it with `python -m models.fetch`.")
    if cfg_path.stat().st_size > MAX_CONFIG_BYTES:
        raise InvalidCheckpoint(f"{label}/config.json is {cfg_path.stat().st_size / 1e6:.1f} MB; a model config is a few kB.",
                                "Fetch the model again.")
    try:
        config = json.loads(cfg_path.read_text(encoding="utf-8"))
    except RecursionError:
        raise InvalidCheckpoint(f"{label}/config.json is nested too deeply to be a model config.", "Fetch the model again.") from None
    except (ValueError, UnicodeDecodeError) as err:
        raise InvalidCheckpoint(f"{label}/config.json is corrupt ({type(err).__name__}).", "Fetch the model again.") from None
    if not isinstance(config, dict):
        raise InvalidCheckpoint(f"{label}/config.json is corrupt (not a JSON object).", "Fetch the model again.")
    return config


def check_files(files: list[str], label: str) -> None:
    """Refuse a file list without safetensors weights (pickle only: :class:`UnsafeCheckpoint`) or without a tokenizer."""
    names = [f.rsplit("/", 1)[-1] for f in files]
    if not any(f.endswith(".safetensors") for f in names):
        if any(f.endswith(_PICKLE_SUFFIXES) for f in names):
            raise UnsafeCheckpoint(
                f"{label} has only pickle weights ({', '.join(f for f in names if f.endswith(_PICKLE_SUFFIXES))[:200]}); "
                "pickle files can run code when loaded, so they are never loaded here.",
                "Convert them once with `model.save_pretrained(folder, safe_serialization=True)` "
                "on a trusted machine, or fetch the safetensors version.")
        raise InvalidCheckpoint(f"{label} has no weights (*.safetensors).",
                                "Fetch the model again with `python -m models.fetch`.")
    if not any(f in names for f in _TOKENIZER_FILES):
        raise InvalidCheckpoint(f"{label} has no tokenizer files.",
                                "Save the tokenizer next to the model with tokenizer.save_pretrained().")


def check_kind(config: dict[str, Any], label: str) -> None:
    """Refuse a config that asks for custom code (``auto_map``) or names an architecture this app does not support."""
    if "auto_map" in config:
        raise UnsafeCheckpoint(f"{label} declares custom model code (auto_map in its config.json); "
                               "code from a checkpoint is never run here (trust_remote_code stays off).",
                               "Use a checkpoint of a supported architecture that transformers implements itself.")
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise InvalidCheckpoint(f"{label}: architecture {str(model_type)[:40]!r} is not supported.",
                                "Supported: " + ", ".join(sorted(SUPPORTED_MODEL_TYPES)) + ".")


def check_config(config: dict[str, Any], label: str, max_params: int | None = None) -> Breakdown:
    """Check a parsed ``config.json`` alone and count the base model it describes (exact, no allocation).

    Raises:
        UnsafeCheckpoint: the config asks for custom code (``auto_map``); ``trust_remote_code`` is never enabled.
        InvalidCheckpoint: an architecture this app does not support (named, with the supported list), or
            sizes that describe no model.
        ModelTooLarge: more parameters than ``max_params`` (default ``BFE_MAX_PARAMS``), including configs so
            large (a vocabulary of 10⁹) that they are past the calculators' sanity bounds.
    """
    from analysis.params import parameter_breakdown
    from core.errors import InvalidConfig, UnsupportedArchitecture

    check_kind(config, label)
    budget = max_params or get_settings().max_params
    try:
        bd = parameter_breakdown(config, "base")
    except (InvalidConfig, UnsupportedArchitecture) as err:
        rough = _rough_size(config)
        if rough > budget:
            raise ModelTooLarge(f"{label} declares at least {rough:,} parameters; this server loads models up to "
                                f"{budget:,} (BFE_MAX_PARAMS).", "Pick a smaller model.") from None
        raise InvalidCheckpoint(f"{label}: its config.json does not describe a model that can be loaded ({err.message})",
                                "Fetch the model again.") from None
    if bd.total > budget:
        raise ModelTooLarge(f"{label} has {bd.total:,} parameters; this server loads models up to {budget:,} (BFE_MAX_PARAMS).",
                            "Pick a smaller model, or raise BFE_MAX_PARAMS on a machine with the memory for it.")
    return bd


def _rough_size(config: dict[str, Any]) -> int:
    """The word-embedding table's size alone (vocabulary × width) from raw config numbers: a lower bound."""
    def num(*keys: str) -> int:
        for k in keys:
            v = config.get(k)
            if isinstance(v, int) and not isinstance(v, bool) and v > 0:
                return v
        return 0

    return num("vocab_size") * num("embedding_size", "hidden_size", "dim", "d_model", "n_embd")


def check_checkpoint(folder: Path) -> dict[str, Any]:
    """Check that ``folder`` holds a loadable checkpoint and return its parsed ``config.json``.

    Raises:
        InvalidCheckpoint: no or corrupt config, unsupported architecture, no weights, no tokenizer.
        UnsafeCheckpoint: weights exist only as pickle files, or the config asks for custom code.
    """
    config = read_config(folder)
    label = display_name(folder)
    check_kind(config, label)
    check_files([p.name for p in folder.iterdir() if p.is_file()], label)
    return config


#: Tensor-name prefixes (after any base-model prefix) that show a checkpoint carries a head.
_HEAD_MARKS: dict[str, tuple[str, ...]] = {
    "masked-lm": ("cls.predictions.", "lm_head.", "predictions.", "generator_predictions.", "vocab_transform.",
                  "vocab_projector.", "lm_predictions.", "head.dense."),
    "nsp": ("cls.seq_relationship.",),
    "sop": ("sop_classifier.",),
    "discriminator": ("discriminator_predictions.",),
    "xlnet-lm": ("lm_loss.",),
    "classification": ("classifier.", "score.", "logits_proj.", "pre_classifier."),
}


def heads_from_names(model_type: str, names: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The heads (``models.loader.load`` tasks) a checkpoint has trained weights for, from its tensor names.

    A tied LM decoder has no tensor of its own, so the transform in front of it (``cls.predictions``,
    ``lm_head``...) marks an MLM head; GPT-2's LM head is its tied word embeddings, always there.
    """
    found = {kind for kind, marks in _HEAD_MARKS.items() for n in names
             if (n.startswith(marks) or any(f".{m}" in n for m in marks))
             and not (kind == "classification" and n.startswith("sop_classifier."))}  # ALBERT's SOP head is no classifier
    heads = ["base"]
    if "masked-lm" in found and model_type not in ("gpt2", "xlnet"):
        heads.append("masked-lm")
    if model_type == "gpt2":
        heads.append("causal-lm")
    if model_type == "xlnet" and "xlnet-lm" in found:
        heads += ["causal-lm", "pretraining", "xlnet-lm"]
    pretraining = {"bert": {"masked-lm", "nsp"}, "albert": {"masked-lm", "sop"}, "electra": {"discriminator"}}.get(model_type)
    if pretraining and pretraining <= found:
        heads.append("pretraining")
    elif model_type in ("roberta", "xlm-roberta", "distilbert", "deberta-v2", "mpnet") and "masked-lm" in found:
        heads.append("pretraining")  # AutoModelForPreTraining is the masked-LM class for these
    if "classification" in found:  # a fine-tuned model (models.finetune): one linear layer reads [CLS] or each token
        heads += ["sequence-classification", "token-classification"]
    return tuple(heads)


@dataclass(frozen=True)
class Preflight:
    """What a checkpoint declares, read from its config and tensor headers without loading a weight."""

    config: dict[str, Any]
    expected: int  # parameters of the base model its config describes (analysis.params, exact)
    stored: int  # parameters its safetensors headers declare, all files together
    heads: tuple[str, ...] = ("base",)  # heads with trained weights, from the tensor names


def _stored_tensors(folder: Path, label: str) -> tuple[int, list[str]]:
    """Parameters and tensor names declared by the headers of every ``*.safetensors`` file (memory-mapped, nothing read)."""
    from safetensors import safe_open

    total, names = 0, []
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    total += math.prod(f.get_slice(key).get_shape())
                    names.append(key)
        except Exception as err:
            raise InvalidCheckpoint(f"{label}: the weights file {path.name} is corrupt or truncated ({type(err).__name__}).",
                                    "Fetch the model again with `python -m models.fetch`.") from None
    return total, names


def check_coverage(bd: Breakdown, stored: int, label: str) -> None:
    # Checkpoints saved from a masked-LM model have no pooler; every other base tensor must be there.
    required = bd.total - bd.by_part().get("pooler", 0)
    if stored < required:
        raise InvalidCheckpoint(f"{label}: its weights hold {stored:,} parameters, but its architecture needs {required:,}; "
                                "the missing layers would be random.", "Fetch the model again with `python -m models.fetch`.")


def preflight(folder: Path, max_params: int | None = None) -> Preflight:
    """Check a checkpoint folder from its ``config.json`` and tensor headers alone, before any weight moves.

    Raises:
        InvalidCheckpoint: what :func:`check_checkpoint` and :func:`check_config` refuse; a corrupt or
            truncated weights file; weights holding fewer parameters than the architecture needs (a
            model passed off as loaded with random layers).
        ModelTooLarge: the config or the headers declare more than ``max_params`` (default ``BFE_MAX_PARAMS``).
    """
    config = check_checkpoint(folder)
    label = display_name(folder)
    budget = max_params or get_settings().max_params
    bd = check_config(config, label, budget)
    stored, names = _stored_tensors(folder, label)
    if stored > budget:
        raise ModelTooLarge(f"{label} has {stored:,} parameters; this server loads models up to {budget:,} (BFE_MAX_PARAMS).",
                            "Pick a smaller model, or raise BFE_MAX_PARAMS on a machine with the memory for it.")
    check_coverage(bd, stored, label)
    return Preflight(config, bd.total, stored, heads_from_names(config["model_type"], names))


# --------------------------------------------------------------------------- any checkpoint, before download

@dataclass(frozen=True)
class CheckpointInfo:
    """Any checkpoint, described from its config and tensor headers before a weight is loaded or downloaded."""

    model_id: str
    where: str  # "local folder BFE_MODEL_DIR/x", "Hugging Face cache", "Hugging Face Hub (owner/name)"
    model_type: str
    parameters: int  # the base model, exact (analysis.params)
    heads: tuple[str, ...]
    config: dict[str, Any]
    downloaded: bool  # weights already on this machine

    def summary(self) -> str:
        """One line for a page: architecture, size, heads, where."""
        return (f"{self.model_id}: {self.model_type}, {self.parameters:,} parameters, heads: {', '.join(self.heads)}; "
                f"{self.where}" + ("" if self.downloaded else " (downloads on first use)"))
