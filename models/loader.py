"""Load a family member with the head a task needs, from wherever its weights are.

Usage::

    from models.loader import load
    lm = load("bert-base-uncased", task="masked-lm")
    model, tokenizer, device = lm          # or lm.model, lm.tokenizer, lm.device
    att = load("sentence-transformers/all-MiniLM-L6-v2", attentions=True)   # eager attention, checked

One job per module:

- :mod:`models.locate`: where the weights are (model directory, Hugging Face cache, the bundled
  model, the Hub when online), and whether a catalog model is available now;
- :mod:`models.checkpoint`: what a checkpoint is, read from its config and tensor headers before
  any weight moves (supported architecture, safetensors only, size budget, complete weights);
- :mod:`models.cache`: the process-wide model cache, shared by every session, bounded in memory;
- this module: loading (``from_pretrained`` with ``trust_remote_code`` never enabled), the head a
  task needs, eager attention checked.

Messages never show server paths: folders are named relative to ``BFE_MODEL_DIR``. The names of
the other three modules are re-exported here, so ``from models.loader import locate`` keeps working.
``locate``, ``availability`` and ``is_online`` do not import torch; :func:`load` does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from core import registry
from core.errors import (
    AttentionUnavailable,
    ExplorerError,
    InvalidCheckpoint,
    ModelTooLarge,
    ModelUnavailable,
    UnsupportedTask,
)
from core.registry import TASKS, ModelCard
from core.settings import get_settings
from models import locate as _where
from models.cache import CacheEntry, CacheInfo, CacheKey, ModelCache, default_cache
from models.checkpoint import (
    MAX_CONFIG_BYTES,
    SUPPORTED_MODEL_TYPES,
    Preflight,
    _scrub,
    check_checkpoint,
    display_name,
    preflight,
    read_config,
)
from models.locate import (
    HUB_ANSWER_TIMEOUT_S,
    HUB_FAILURE_TTL_S,
    PROBE_TIMEOUT_S,
    Availability,
    ModelStatus,
    Source,
    availability,
    how_to_get,
    hub_failed_recently,
    is_online,
    local_folder,
    locate,
    validate_model_id,
)

if TYPE_CHECKING:
    import torch

__all__ = [
    "HUB_ANSWER_TIMEOUT_S", "HUB_FAILURE_TTL_S", "MAX_CONFIG_BYTES", "PROBE_TIMEOUT_S", "SUPPORTED_MODEL_TYPES", "TASK_CLASSES",
    "UNLIMITED_CAP", "Availability", "CacheEntry", "CacheInfo", "CacheKey", "LoadedModel", "ModelCache", "ModelRef", "ModelStatus", "Preflight", "Source",
    "availability", "can_locate", "catalog_availability", "check_checkpoint", "default_cache", "display_name", "how_to_get", "hub_failed_recently", "is_online",
    "load", "local_folder", "locate", "preflight", "read_config", "validate_model_id",
]

#: transformers class that gives each task's head.
TASK_CLASSES: dict[str, str] = {
    "base": "AutoModel",
    "masked-lm": "AutoModelForMaskedLM",
    "causal-lm": "AutoModelForCausalLM",
    "pretraining": "AutoModelForPreTraining",
    "xlnet-lm": "XLNetLMHeadModel",
    "sequence-classification": "AutoModelForSequenceClassification",
    "token-classification": "AutoModelForTokenClassification",
}

#: Token cap for a model with no position limit (XLNet): attention is T² per head.
UNLIMITED_CAP = 512


@dataclass
class LoadedModel:
    """A model ready to run. Unpacks as ``model, tokenizer, device``.

    ``missing_weights`` lists tensors the checkpoint did not have (initialised at random);
    it is empty for every head this class hands out unless ``allow_untrained_head`` was given.
    """

    model_id: str
    task: str
    model: torch.nn.Module
    tokenizer: Any
    device: torch.device
    dtype: torch.dtype
    source: Source
    attn_implementation: str
    nbytes: int
    load_seconds: float
    card: ModelCard | None = None
    missing_weights: tuple[str, ...] = ()

    def __iter__(self) -> Iterator[Any]:
        return iter((self.model, self.tokenizer, self.device))

    @property
    def max_tokens(self) -> int:
        """The longest input this model takes, special tokens included: its positions (RoBERTa's, XLM-R's
        and MPNet's start after the padding index), capped by the tokenizer's limit; XLNet has relative
        positions and no limit of its own, so :data:`UNLIMITED_CAP` stands in."""
        cfg = self.model.config
        positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        if cfg.model_type == "xlnet" or (positions is not None and positions <= 0):
            positions = None  # XLNet's config reports -1
        if positions and cfg.model_type in ("roberta", "xlm-roberta", "mpnet"):  # positions start after the padding index
            positions -= 2
        tok_max = self.tokenizer.model_max_length
        limits = [x for x in (positions, tok_max if tok_max and tok_max < 10**6 else None) if x]
        return min(limits) if limits else UNLIMITED_CAP


def load(model_id: str, task: str = "base", *, attentions: bool = False, device: str | None = None,
         cache: ModelCache | None = None, allow_untrained_head: bool = False) -> LoadedModel:
    """Load ``model_id`` with the head ``task`` needs (see :data:`TASK_CLASSES`), cached.

    Args:
        model_id: a catalog id or Hub id (``bert-base-uncased``), or a folder name under the model directory.
        task: ``base``, ``masked-lm``, ``causal-lm``, ``pretraining`` (NSP/SOP/discriminator head) or ``xlnet-lm``.
        attentions: load with eager attention and check that attention weights come out.
        device: overrides the device setting (``auto``, ``cpu``, ``cuda``, ``cuda:N``, ``mps``).
        cache: the cache to use; the process-wide one by default.
        allow_untrained_head: accept a head the checkpoint has no weights for (random: for tests only).

    Raises:
        InvalidModelId, UnknownModel, ModelUnavailable (InvalidCheckpoint, UnsafeCheckpoint),
        UnsupportedTask, AttentionUnavailable, InvalidSetting.
    """
    from models.device import resolve_device

    if task not in TASKS:
        raise UnsupportedTask(f"Unknown task {task!r}.", "Use one of: " + ", ".join(TASKS) + ".")
    mid = validate_model_id(model_id)
    card = registry.find(mid)
    if card is not None:
        if not card.loadable:
            raise ModelUnavailable(f"{card.id} has no weights here.", how_to_get(card))
        if task not in card.tasks:
            raise UnsupportedTask(f"{card.id} has no trained {task} head.",
                                  f"Its checkpoint has: {', '.join(card.tasks)}.")
        mid = card.id
    dev = resolve_device(device)
    attn = "eager" if attentions else "default"  # default: transformers' fastest (SDPA where supported)
    key: CacheKey = (mid, task, attn, str(dev))
    return (cache or default_cache()).get_or_load(
        key, lambda: _load_uncached(mid, task, card, dev, attn, allow_untrained_head))


#: What the library's model functions take: a model id (a catalog id, a folder of ``BFE_MODEL_DIR``, ``trained/<run>``,
#: a Hub id) or a model already loaded (:func:`as_loaded` turns either into a :class:`LoadedModel`).
ModelRef: TypeAlias = str | LoadedModel


def as_loaded(model: ModelRef, task: str = "base", *, attentions: bool = False) -> LoadedModel:
    """``model`` itself when it is loaded already, else :func:`load` of it (the library's functions take either a
    model id or a loaded model: a test, a bench or a second call passes the model it holds). Raises as :func:`load`."""
    return model if isinstance(model, LoadedModel) else load(model, task, attentions=attentions)


def _load_uncached(mid: str, task: str, card: ModelCard | None, dev: torch.device, attn: str,
                   allow_untrained_head: bool) -> LoadedModel:
    import transformers

    from models.device import inference_dtype

    # Load reports and progress bars go to the server console, not to anyone who can act on them.
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    start = time.perf_counter()
    source = locate(mid)
    offline = source.kind != "hub"
    dtype = inference_dtype(dev)
    model_cls = getattr(transformers, TASK_CLASSES[task])
    if source.kind != "hub":
        checked = preflight(Path(source.location))
        model_type, heads = checked.config.get("model_type"), checked.heads
    elif card is not None:
        if card.parameters > get_settings().max_params:
            raise ModelTooLarge(f"{card.id} has {card.parameters:,} parameters; this server loads models up to "
                                f"{get_settings().max_params:,} (BFE_MAX_PARAMS).", "Pick a smaller model.")
        if not _where.hub_answers(source.location):
            _where.note_hub_failure()
            raise ModelUnavailable(f"{mid} is not on this machine and the Hugging Face Hub did not answer within "
                                   f"{HUB_ANSWER_TIMEOUT_S:.0f} s.", how_to_get(card))
        model_type, heads = card.model_type, card.tasks
    else:  # any Hub id: its config and tensor headers are checked before a weight downloads
        from models.inspection import inspect_hub

        inspected = inspect_hub(mid, source.location, None)
        model_type, heads = inspected.model_type, inspected.heads
    if task == "xlnet-lm" and model_type != "xlnet":
        raise UnsupportedTask(f"{mid} is a {model_type} model; the xlnet-lm head needs XLNet.")
    if card is None and task not in heads and not allow_untrained_head:
        raise UnsupportedTask(f"{mid}'s checkpoint has no trained weights for the {task} head (its tensors hold: "
                              f"{', '.join(heads)}).", "A head with random weights would give meaningless predictions; "
                              "pick a model that has it.")
    try:
        model, info = model_cls.from_pretrained(
            source.location, output_loading_info=True, use_safetensors=True, trust_remote_code=False,
            local_files_only=offline, dtype=dtype, **({"attn_implementation": "eager"} if attn == "eager" else {}))
        tokenizer = transformers.AutoTokenizer.from_pretrained(
            source.location, trust_remote_code=False, local_files_only=offline)
    except ExplorerError:
        raise
    except (OSError, ValueError, KeyError, TypeError, RuntimeError, RecursionError) as err:
        detail = _scrub(str(err).splitlines()[0][:300] if str(err) else "", source.location)
        if source.kind == "hub":
            if _where.looks_like_no_network(err):
                _where.note_hub_failure()
            raise ModelUnavailable(f"Could not download {mid} from the Hub ({type(err).__name__}: {detail}).",
                                   how_to_get(card) if card else "") from err
        raise InvalidCheckpoint(f"Could not load {mid} from {source.describe()} ({type(err).__name__}: {detail}).",
                                "Fetch the model again with `python -m models.fetch`.") from err
    missing = tuple(info.get("missing_keys", ()))
    if task == "base" and (absent := [k for k in missing if "pooler" not in k]):
        raise InvalidCheckpoint(f"{mid}'s checkpoint lacks {len(absent)} of the base model's tensors (e.g. {absent[0]}); "
                                "they would be random.", "Fetch the model again with `python -m models.fetch`.")
    if missing and task != "base" and not allow_untrained_head:
        raise UnsupportedTask(
            f"{mid}'s checkpoint has no trained weights for the {task} head "
            f"({len(missing)} tensors missing, e.g. {missing[0]}).",
            "A head with random weights would give meaningless predictions; pick a model that has it.")
    model.eval()
    model.to(dev)
    if attn == "eager":
        from models import capture

        # Same arithmetic as eager; lets extract_attention take the weights without a stacking copy.
        capture.enable(model)
        _check_attentions(model, tokenizer, dev, mid)
    nbytes = sum(t.numel() * t.element_size() for t in (*model.parameters(), *model.buffers()))
    return LoadedModel(mid, task, model, tokenizer, dev, dtype, source, model.config._attn_implementation, nbytes,
                       time.perf_counter() - start, card, missing)


def _check_attentions(model: torch.nn.Module, tokenizer: Any, dev: torch.device, mid: str) -> None:
    """Run two words through the model and raise unless one (B, heads, T, T) map per layer comes out."""
    import torch

    enc = tokenizer("hello world", return_tensors="pt").to(dev)
    with torch.inference_mode():
        out = model(**enc, output_attentions=True)
    att = getattr(out, "attentions", None)
    layers = model.config.num_hidden_layers
    heads = model.config.num_attention_heads
    t = enc["input_ids"].shape[1]
    if not att or len(att) != layers or any(a is None or tuple(a.shape) != (1, heads, t, t) for a in att):
        shape = [None if a is None else tuple(a.shape) for a in att or ()]
        raise AttentionUnavailable(
            f"{mid} returned no usable attention weights (got {shape}, wanted {layers} x (1, {heads}, {t}, {t})).",
            "Load it with attentions=True so eager attention is used.")


def catalog_availability() -> dict[str, tuple[ModelStatus, str]]:
    """Catalog id -> (status, message) on this machine (file checks only, no network): what a front end whose models
    run on a backend asks that backend (``services.models.availability``)."""
    from core import registry

    settings = get_settings()
    return {c.id: (a.status, a.message) for c in registry.all_models() for a in [availability(c, settings)]}


def can_locate(model_id: str) -> bool:
    """Whether ``model_id`` (a folder of ``BFE_MODEL_DIR``, a lab run ``trained/<run>``, a Hub id in the cache) can be
    loaded on this machine without the network."""
    try:
        locate(model_id, network=False)
        return True
    except ExplorerError:
        return False


def load_summary(model_id: str) -> dict[str, Any]:
    """Load ``model_id`` into the process-wide cache with its attention weights checked (as the Attention page
    loads it) and say what was loaded: ``source``, ``seconds``, ``nbytes``, ``device``, ``dtype``. A model id in,
    plain values out: the Models page calls it in the model process."""
    lm = load(model_id, attentions=True)
    return {"source": lm.source.describe(), "seconds": lm.load_seconds, "nbytes": lm.nbytes, "device": str(lm.device),
            "dtype": str(lm.dtype).replace("torch.", "")}
