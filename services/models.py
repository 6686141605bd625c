"""The Models page's use cases and what every page asks about models: which catalog models are on this machine,
whether one can run now, loading one as a check, downloading one, a lab run's kept steps, the device, and the state
of the model queue, cache and warm-up that the sidebar reports.

The app reaches ``models.*`` only through ``services/``: the runtime pieces it needs (the model queue, the page slots,
the warm-up) are named here so that one module says what the front ends may touch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from core.errors import ExplorerError, InvalidModelId
from models import warmup
from models.cache import CacheInfo
from models.gate import CallCancelled, default_gate, page_slots
from services.calls import Call, direct

__all__ = ["CacheInfo", "CallCancelled", "availability", "default_cache", "default_gate", "device_label", "download",
           "inspect", "load", "page_slots", "ready", "runtime_status", "steps", "valid_id", "warmup"]


def availability() -> dict[str, tuple[str, str]]:
    """Catalog id → (status, message): ready, download, broken or catalog-only (file checks only, no network)."""
    from core import registry
    from core.settings import get_settings
    from models.loader import availability as check

    settings = get_settings()
    return {c.id: (a.status, a.message) for c in registry.all_models() for a in [check(c, settings)]}


def ready(model_id: str, known: dict[str, tuple[str, str]] | None = None) -> bool:
    """Whether ``model_id`` can run now: on this machine, or downloadable because the Hub answers. ``known``:
    :func:`availability`, when the caller has it at hand."""
    from models.loader import is_online, locate

    known = availability() if known is None else known
    if model_id not in known:  # another model: a folder here, or a Hub id
        try:
            locate(model_id, network=False)
            return True
        except ExplorerError:
            return "/" in model_id and is_online()
    status = known[model_id][0]
    return is_online() if status == "download" else status == "ready"


def valid_id(value: Any) -> bool:
    """Whether ``value`` is a model id the loader would accept (no path tricks, at most 200 characters)."""
    from models.loader import validate_model_id

    try:
        return isinstance(value, str) and len(value) <= 200 and bool(validate_model_id(value))
    except InvalidModelId:
        return False


def device_label() -> str:
    """Where the models run, in words (device, GPU name, memory)."""
    from models.device import describe_device

    return describe_device().label()


def inspect(model_id: str) -> Any:
    """A checkpoint's config and tensor headers, nothing loaded (``models.inspection.Inspection``)."""
    from models.inspection import inspect as read

    return read(model_id)


def download(hub_id: str, progress: Callable[[int, int], None]) -> Any:
    """Download a Hub checkpoint into the shared cache, reporting (bytes done, bytes in all)."""
    from models.fetch import download as fetch

    return fetch(hub_id, on_progress=progress)


def steps(model_id: str) -> list[int]:
    """The training steps a lab run kept checkpoints at (its last included)."""
    from models.locate import run_steps

    return run_steps(model_id)


def load(model_id: str, *, call: Call = direct) -> dict[str, Any]:
    """Load ``model_id`` as a check: where from, how long, its bytes, device and dtype."""
    from models.loader import load_summary

    return call(load_summary, model_id)


def default_cache() -> Any:
    """This process's model cache (``models.loader.ModelCache``)."""
    from models.loader import default_cache as cache

    return cache()


@dataclass(frozen=True)
class RuntimeStatus:
    """What the sidebar says about the models: memory in use, the warm-up, the queue."""

    memory: str
    state: str
    queue: str


def runtime_status(local_cache: Any | None = None) -> RuntimeStatus:
    """The model memory and warm-up of the model process (or of this process, with ``local_cache``, when models run
    in the web process), and the model queue."""
    from services import runtime

    gate = default_gate().info()
    if local_cache is None:
        rt = runtime.default(create=False)
        status = rt.status() if rt is not None else runtime.Status("down")
        memory = (f"{status.cache_bytes / 2**20:,.0f} MB of {status.cache_budget / 2**20:,.0f} MB budget, "
                  f"{status.models_loaded} model(s) loaded in the model process" if status.cache_budget else
                  "No model loaded yet (models run in a process of their own).")
        state = {"starting": "model process starting", "running": f"warming up ({status.step})",
                 "ready": f"warmed up in {status.seconds:.1f} s", "failed": "warm-up failed (see the model's page)",
                 "down": ""}.get(status.state, "")
        if status.restarts:
            state += f" · model process restarted {status.restarts}×"
    else:
        info = local_cache.info()
        memory = (f"{info.total_bytes / 2**20:,.0f} MB of {info.budget_bytes / 2**20:,.0f} MB budget, "
                  f"{len(info.entries)} model(s) loaded")
        w = warmup.current()
        state = {"running": f"warming up ({w.step})", "ready": f"warmed up in {w.seconds:.1f} s",
                 "failed": "warm-up failed (see the model's page)"}.get(w.state, "")
    queue = f"Model queue: {gate.running} running, {gate.waiting} waiting (at most {gate.limit} at once)"
    return RuntimeStatus(memory, state, queue)
