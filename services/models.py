"""The Models page's use cases and what every page asks about models: which catalog models are on this machine,
whether one can run now, loading one as a check, downloading one, a lab run's kept steps, the device, and the state
of the model queue, cache and warm-up that the sidebar reports.

The app reaches ``models.*`` only through ``services/``: the runtime pieces it needs (the model queue, the page slots,
the warm-up's states) are named here so that one module says what the front ends may touch; the warm-up itself is the
executor's (:meth:`services.executor.Executor.warmup`), which knows where the models run.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from core.errors import ExplorerError, InvalidModelId
from models.cache import CacheEntry, CacheInfo
from models.gate import CallCancelled
from models.locate import ModelStatus
from models.warmup import WarmupState
from services.calls import Call, direct

if TYPE_CHECKING:
    from models.gate import ModelGate, Slots

__all__ = ["CacheEntry", "CacheInfo", "CallCancelled", "ModelStatus", "WarmupState", "availability", "default_gate", "device_label", "download",
           "inspect", "load", "on_backend", "page_slot_lent", "page_slots", "ready", "steps", "valid_id"]


def default_gate() -> ModelGate:
    """The model queue every model call of this process joins, the pages' and the sidebar's alike: at most
    ``BFE_MODEL_CONCURRENCY`` at once, identical calls in flight computed once, a caller that leaves giving its place up
    (:func:`models.gate.default_gate`)."""
    from models.gate import default_gate as gate

    return gate()


def page_slots() -> Slots:
    """The page-run slots of this process: at most ``BFE_PAGE_CONCURRENCY`` script runs at once, all sessions
    together; a run waits for one before it draws (:func:`models.gate.page_slots`)."""
    from models.gate import page_slots as slots

    return slots()


def page_slot_lent(take_back: bool = True, cancelled: Callable[[], bool] = lambda: False) -> AbstractContextManager[None]:
    """Around a wait on something outside this interpreter (a model call answered elsewhere, a download, the warm-up):
    this page run's slot goes to the next run meanwhile and, with ``take_back``, is taken back after (``cancelled``:
    polled while it waits for it); nothing for a thread that holds no slot (:func:`models.gate.page_slot_lent`)."""
    from models.gate import page_slot_lent as lent

    return lent(take_back, cancelled)


def availability() -> dict[str, tuple[ModelStatus, str]]:
    """Catalog id → (status, message): ready, download, broken or catalog-only (file checks only, no network), on the
    machine where the models run (the model backend's, with ``BFE_BACKEND``; while it does not answer, every
    loadable model is ``download`` with the reason)."""
    from core.errors import BackendError
    from models.loader import catalog_availability
    from services.executor import executor

    try:
        return executor().on_model_folder(catalog_availability)
    except BackendError as err:
        from core import registry

        return {c.id: (ModelStatus.CATALOG_ONLY if not c.loadable else ModelStatus.DOWNLOAD, f"Model backend: {err.message}")
                for c in registry.all_models()}


def ready(model_id: str, known: dict[str, tuple[ModelStatus, str]] | None = None) -> bool:
    """Whether ``model_id`` can run now: on this machine, or downloadable because the Hub answers. ``known``:
    :func:`availability`, when the caller has it at hand."""
    from models.loader import is_online, locate
    from services.executor import executor

    known = availability() if known is None else known
    if on_backend():  # the backend's disk and network decide; its own errors say why when it is used
        if model_id in known:
            return known[model_id][0] in (ModelStatus.READY, ModelStatus.DOWNLOAD)
        from models.loader import can_locate

        try:
            return "/" in model_id or bool(executor().on_model_folder(can_locate, model_id))
        except ExplorerError:
            return False
    if model_id not in known:  # another model: a folder here, or a Hub id
        try:
            locate(model_id, network=False)
            return True
        except ExplorerError:
            return "/" in model_id and is_online()
    status = known[model_id][0]
    return is_online() if status == ModelStatus.DOWNLOAD else status == ModelStatus.READY


def valid_id(value: Any) -> bool:
    """Whether ``value`` is a model id the loader would accept (no path tricks, at most 200 characters)."""
    from models.loader import validate_model_id

    try:
        return isinstance(value, str) and len(value) <= 200 and bool(validate_model_id(value))
    except InvalidModelId:
        return False


def on_backend() -> bool:
    """Whether the models run on a model backend (``BFE_BACKEND``) rather than on this machine (:mod:`services.executor`)."""
    from services.executor import executor

    return executor().elsewhere


def device_label() -> str:
    """Where the models run, in words (device, GPU name, memory): the model backend's device with ``BFE_BACKEND``."""
    from models.device import describe_device

    if on_backend():
        from services.backend import client as backend

        try:
            return f"Model backend ({backend.default().url}): {backend.default().info(status=True).device}"
        except ExplorerError as err:
            return f"Model backend ({backend.default().url}): not answering ({err.message})"
    return describe_device().label()


def inspect(model_id: str) -> Any:
    """A checkpoint's config and tensor headers, nothing loaded (``models.inspection.Inspection``)."""
    from models.inspection import inspect as read
    from services.executor import executor

    return executor().on_model_folder(read, model_id)


def download(hub_id: str, progress: Callable[[int, int], None]) -> Any:
    """Download a Hub checkpoint into the shared cache, reporting (bytes done, bytes in all)."""
    from models.fetch import download as fetch

    return fetch(hub_id, on_progress=progress)


def steps(model_id: str) -> list[int]:
    """The training steps a lab run kept checkpoints at (its last included)."""
    from models.locate import run_steps
    from services.executor import executor

    return executor().on_model_folder(run_steps, model_id)


def load(model_id: str, *, call: Call = direct) -> dict[str, Any]:
    """Load ``model_id`` as a check: where from, how long, its bytes, device and dtype."""
    from models.loader import load_summary

    return call(load_summary, model_id)
