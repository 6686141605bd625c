"""The classification model of a run: a pre-trained body with a new head, or the same architecture freshly
initialised, through the loader's checks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analysis.tasks import Task
from models.finetune.config import FineTuneConfig

if TYPE_CHECKING:
    import torch


def source_folder(model_id: str) -> tuple[str, bool]:
    """(where the checkpoint is, whether it is local), after the loader's checks (safetensors, supported
    architecture, size budget, no custom code)."""
    from models.inspection import inspect
    from models.locate import locate

    source = locate(model_id)
    inspect(model_id)  # config and tensor headers: refused by name before any weight is read
    return source.location, source.kind != "hub"


def build(config: FineTuneConfig, task: Task) -> tuple[Any, Any]:
    """(classification model, tokenizer) for ``config.mode``: pre-trained weights with a new head, or the same
    architecture freshly initialised (``random``)."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    folder, local = source_folder(config.model)
    tok = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=local)
    cls = (transformers.AutoModelForTokenClassification if task.kind == "token"
           else transformers.AutoModelForSequenceClassification)
    labels = {"num_labels": len(task.labels), "id2label": dict(enumerate(task.labels)),
              "label2id": {name: i for i, name in enumerate(task.labels)}}
    if config.mode == "random":
        cfg = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=local, **labels)
        torch.manual_seed(config.seed)
        model = cls.from_config(cfg)
    else:
        torch.manual_seed(config.seed)  # the new head's initialisation
        model = cls.from_pretrained(folder, use_safetensors=True, trust_remote_code=False, local_files_only=local, **labels)
    if model.config.pad_token_id is None and tok.pad_token_id is not None:
        model.config.pad_token_id = tok.pad_token_id
    return model, tok


def encoder_of(model: torch.nn.Module) -> Any:
    """The pre-trained body under a classification head (``model.bert``, ``model.roberta`` ...)."""
    return getattr(model, model.base_model_prefix, model)
