"""One route for a model call: where the pages' model work runs, chosen once from the settings.

- :data:`BACKEND` (``BFE_BACKEND`` set): on a model backend (:mod:`services.backend`), for the functions both sides
  allow (:mod:`services.routing`); its models serve every front end.
- :data:`MODEL_PROCESS` (``BFE_MODEL_PROCESS=1``, the default): in the model process (:mod:`services.runtime`), for
  the same functions; the web process never imports torch.
- :data:`IN_PROCESS` (``BFE_MODEL_PROCESS=0``, or a setting that cannot be read): here, on this process's model cache.

A function outside :data:`services.routing.ROUTED` runs here under any of the three. The pages reach this through
``app.ui.calls`` (the model call, the cache, the warm-up), the sidebar's status and ``python -m app.serve``; nothing
else asks which route is in force.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from core.errors import ExplorerError
from models.warmup import Warmup, WarmupState


@dataclass(frozen=True)
class RuntimeStatus:
    """What the sidebar says about the models: memory in use, the warm-up, the queue."""

    memory: str
    state: str
    queue: str


def warmup_text(state: str, step: str, seconds: float) -> str:
    """How the sidebar says a warm-up's state (:class:`models.warmup.WarmupState`); "" for one not started."""
    return {WarmupState.STARTING: "model process starting", WarmupState.RUNNING: f"warming up ({step})",
            WarmupState.READY: f"warmed up in {seconds:.1f} s",
            WarmupState.FAILED: "warm-up failed (see the model's page)"}.get(state, "")


IN_PROCESS = "in process"
MODEL_PROCESS = "model process"
BACKEND = "model backend"


@dataclass(frozen=True)
class Executor:
    """Where the pages' model calls run: one protocol (call, the folder's questions, cache, status, warm-up, free,
    launch, warm), three implementations (:class:`InProcess`, :class:`ModelProcess`, :class:`Backend`), one chosen
    from the settings by :func:`executor`. ``kind`` names it (:data:`IN_PROCESS`, :data:`MODEL_PROCESS`,
    :data:`BACKEND`): what the pages say and how they wait; two executors of one class are equal (a dataclass of no
    fields)."""

    kind: ClassVar[str]
    #: Whether routed calls are answered by another process (a page needs no interpreter while it waits).
    remote: ClassVar[bool] = True
    #: Whether the models, their folder and their cache are on another machine (a model backend): what the pages say
    #: about where models are, and whether asking about them is a wait on the network.
    elsewhere: ClassVar[bool] = False

    def routes(self, fn: Any) -> bool:
        """Whether ``fn`` runs away from this process: a remote route and one of :data:`services.routing.ROUTED`."""
        if not self.remote:
            return False
        from services.routing import routable

        return routable(fn)

    def call(self, fn: Any, *args: Any, on_restart: Callable[[int | None], Any] | None = None) -> Any:
        """``fn(*args)`` where it runs (``on_restart``: told the exit code when the model process died during the call
        and was restarted; the call then ran once more)."""
        return self._remote_call(fn, *args, on_restart=on_restart) if self.routes(fn) else fn(*args)

    def _remote_call(self, fn: Any, *args: Any, on_restart: Callable[[int | None], Any] | None) -> Any:
        raise NotImplementedError

    def on_model_folder(self, fn: Any, *args: Any) -> Any:
        """``fn(*args)`` where the model folder is: on the backend, which serves these questions beside the model
        calls (:data:`services.routing.BACKEND_ONLY`), else here (the model process shares this machine's folder). For
        the questions about the folder itself: which models are here, whether an id can be loaded, a lab run's
        checkpoints."""
        return fn(*args)

    def cache_info(self) -> Any:
        """What the model cache holds (``models.cache.CacheInfo``) where the models run; an empty one while the model
        process is not running. Raises :class:`~core.errors.BackendError` when the backend does not answer."""
        raise NotImplementedError

    def status(self) -> RuntimeStatus:
        """The model memory and warm-up where the models run (the backend, the model process or this process), and
        this process's model queue. A backend that does not answer is said in words, not raised."""
        raise NotImplementedError

    def warmup(self) -> Warmup | None:
        """This process's warm-up (``models.warmup.Warmup``: its state, step, model and error, and a wait for it) when
        the models run here; None under the model process or a backend, whose warm-up is theirs (:meth:`status`,
        :mod:`services.runtime`)."""
        return None

    def free(self) -> None:
        """Empty the model cache where the models run (a backend's serves every front end: not a page's to free)."""

    def launch(self, warm: bool) -> str:
        """At server start, before the first page (``python -m app.serve``): start the model process, or the warm-up's
        imports here (``warm``: ``BFE_WARMUP``). What to print, if anything."""
        return ""

    def warm(self, warm: bool) -> None:
        """Once a page is drawn: let the model process load the model (started here if a plain ``streamlit run``
        started the server), or start the warm-up in this process; nothing with a backend (it preloads its models)."""


def _queue() -> str:
    """This process's model queue, in words (every executor's status ends with it)."""
    from models.gate import default_gate

    gate = default_gate().info()
    return f"Model queue: {gate.running} running, {gate.waiting} waiting (at most {gate.limit} at once)"


class InProcess(Executor):
    """Here, on this process's model cache (``BFE_MODEL_PROCESS=0``, or a setting that cannot be read)."""

    kind = IN_PROCESS
    remote = False

    def cache_info(self) -> Any:
        from models.cache import default_cache

        return default_cache().info()

    def status(self) -> RuntimeStatus:
        from models.cache import default_cache

        info, w = default_cache().info(), self.warmup()
        return RuntimeStatus(f"{info.total_bytes / 2**20:,.0f} MB of {info.budget_bytes / 2**20:,.0f} MB budget, "
                             f"{len(info.entries)} model(s) loaded", warmup_text(w.state, w.step, w.seconds), _queue())

    def warmup(self) -> Warmup | None:
        from models import warmup

        return warmup.current()

    def free(self) -> None:
        from models.cache import default_cache

        default_cache().clear()

    def launch(self, warm: bool) -> str:
        if warm:
            from models import warmup

            warmup.start(in_foreground=1)  # the imports before the server listens, the model load in the background
        return ""

    def warm(self, warm: bool) -> None:
        from models import warmup

        warmup.start()


class ModelProcess(Executor):
    """In the model process (:mod:`services.runtime`; ``BFE_MODEL_PROCESS=1``, the default): the web process never
    imports torch."""

    kind = MODEL_PROCESS

    def _remote_call(self, fn: Any, *args: Any, on_restart: Callable[[int | None], Any] | None) -> Any:
        from services import runtime

        return runtime.default().call(fn, *args, on_restart=on_restart)

    def cache_info(self) -> Any:
        from models.cache import CacheInfo
        from services import runtime

        rt = runtime.default()
        if not rt.alive():
            from core.settings import get_settings

            return CacheInfo((), 0, get_settings().cache_bytes, 0)
        return rt.request(("cache_info",))

    def status(self) -> RuntimeStatus:
        from services import runtime

        rt = runtime.default(create=False)
        now = rt.status() if rt is not None else runtime.Status("down")
        memory = (f"{now.cache_bytes / 2**20:,.0f} MB of {now.cache_budget / 2**20:,.0f} MB budget, "
                  f"{now.models_loaded} model(s) loaded in the model process" if now.cache_budget else
                  "No model loaded yet (models run in a process of their own).")
        state = warmup_text(now.state, now.step, now.seconds)
        return RuntimeStatus(memory, state + (f" · model process restarted {now.restarts}×" if now.restarts else ""), _queue())

    def free(self) -> None:
        from services import runtime

        if runtime.default().alive():
            runtime.default().request(("cache_clear",))

    def launch(self, warm: bool) -> str:
        if warm:
            from services import runtime

            runtime.default().start()  # it warms up once this process has drawn its first page
        return ""

    def warm(self, warm: bool) -> None:
        if warm:
            from services import runtime

            rt = runtime.default()
            if rt.proc is None:  # once: a process that died later is replaced by the next call, not here
                rt.start()
            rt.go()


class Backend(Executor):
    """On a model backend (:mod:`services.backend`; ``BFE_BACKEND`` set): its models serve every front end."""

    kind = BACKEND
    elsewhere = True

    def _remote_call(self, fn: Any, *args: Any, on_restart: Callable[[int | None], Any] | None) -> Any:
        from services.backend import client as backend

        return backend.default().call(fn, *args)

    def on_model_folder(self, fn: Any, *args: Any) -> Any:
        return self._remote_call(fn, *args, on_restart=None)

    def cache_info(self) -> Any:
        from models.cache import CacheEntry, CacheInfo
        from services.backend import client as backend

        info = backend.default().info(fresh=True)
        return CacheInfo(tuple(CacheEntry(**e) for e in info.entries), info.cache_bytes, info.cache_budget, info.evictions)

    def status(self) -> RuntimeStatus:
        from services.backend import client as backend

        try:
            info = backend.default().info(status=True)
        except ExplorerError as err:
            return RuntimeStatus("Model backend not answering.", err.message, _queue())
        return RuntimeStatus(f"{info.cache_bytes / 2**20:,.0f} MB of {info.cache_budget / 2**20:,.0f} MB budget, "
                             f"{info.models_loaded} model(s) loaded on the model backend", "model backend answering", _queue())

    def launch(self, warm: bool) -> str:
        from core.settings import get_settings

        return f"Models run on the model backend at {get_settings().backend}: no local model process."


#: Each executor by its kind.
EXECUTORS: dict[str, type[Executor]] = {e.kind: e for e in (InProcess, ModelProcess, Backend)}


def executor() -> Executor:
    """The route in force now, from the settings (a setting that cannot be read: :data:`IN_PROCESS`; the page that
    reads it shows the message)."""
    from core.settings import get_settings

    try:
        settings = get_settings()
    except ExplorerError:
        return InProcess()
    return Backend() if settings.backend else ModelProcess() if settings.model_process else InProcess()
