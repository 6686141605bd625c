"""Describe any checkpoint before a weight moves: where it is (:mod:`models.locate`), then what its config and
tensor headers say (:mod:`models.checkpoint`). Above both, so that neither imports the other."""

from __future__ import annotations

import tempfile
from pathlib import Path

from core.errors import ExplorerError, InvalidCheckpoint, ModelTooLarge, ModelUnavailable
from core.settings import get_settings
from models import locate as where
from models.checkpoint import CheckpointInfo, check_config, check_coverage, check_files, heads_from_names, preflight, read_config


def inspect(model_id: str, *, network: bool = True, max_params: int | None = None) -> CheckpointInfo:
    """Describe any checkpoint (catalog id, Hub id ``owner/name``, or folder under ``BFE_MODEL_DIR``) from its
    ``config.json`` and tensor headers alone: nothing is loaded, and from the Hub only the config (a few kB)
    and the safetensors headers are read.

    Raises:
        InvalidModelId, UnknownModel, ModelUnavailable (offline: with the fetch command), InvalidCheckpoint,
        UnsafeCheckpoint, ModelTooLarge.
    """
    source = where.locate(model_id, network=network)
    if source.kind != "hub":
        pf = preflight(Path(source.location), max_params)
        return CheckpointInfo(model_id, source.describe(), pf.config["model_type"], pf.expected, pf.heads, pf.config, True)
    return inspect_hub(model_id, source.location, max_params)


def inspect_hub(model_id: str, hub_id: str, max_params: int | None) -> CheckpointInfo:
    """Config, file list and safetensors headers of a Hub repository: three small requests, no weights."""
    label = f"{hub_id} (Hugging Face Hub)"
    if not where.hub_answers(hub_id):
        where.note_hub_failure()
        raise ModelUnavailable(f"{hub_id} is not on this machine and the Hugging Face Hub did not answer within "
                               f"{where.HUB_ANSWER_TIMEOUT_S:.0f} s.", where.how_to_get(model_id))
    try:
        from huggingface_hub import get_safetensors_metadata, hf_hub_download, list_repo_files

        files = list_repo_files(hub_id)
        if "config.json" not in files:
            raise InvalidCheckpoint(f"{label} has no config.json.", "Is this a transformers model repository?")
        check_files(files, label)
        with tempfile.TemporaryDirectory() as tmp:  # the config is read, not kept: the weights download keeps its own
            cfg_file = hf_hub_download(hub_id, "config.json", local_dir=tmp)
            config = read_config(Path(cfg_file).parent)
        bd = check_config(config, label, max_params)
        meta = get_safetensors_metadata(hub_id)
    except ExplorerError:
        raise
    except Exception as err:  # the Hub client raises many unrelated types; all mean "could not inspect"
        if where.looks_like_no_network(err):
            where.note_hub_failure()
        raise ModelUnavailable(f"Could not read {hub_id} from the Hub ({type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}).",
                               "Check the id (owner/name, as on huggingface.co).") from None
    names = [n for fm in meta.files_metadata.values() for n in fm.tensors]
    stored = sum(meta.parameter_count.values())
    budget = max_params or get_settings().max_params
    if stored > budget:
        raise ModelTooLarge(f"{label} has {stored:,} parameters; this server loads models up to {budget:,} (BFE_MAX_PARAMS).",
                            "Pick a smaller model.")
    check_coverage(bd, stored, label)
    return CheckpointInfo(model_id, f"Hugging Face Hub ({hub_id})", config["model_type"], bd.total,
                          heads_from_names(config["model_type"], names), config, False)
