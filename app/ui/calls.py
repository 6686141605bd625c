"""Model calls and warm-up: a page's model work goes through the process's model queue, each script run
waits for a page slot, and the background warm-up is started and awaited here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext, suppress
from typing import Any

import streamlit as st

from core.errors import BackendStarting, ExplorerError

log = logging.getLogger("bert_family_explorer")


def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _run_abandoned() -> bool:
    """Whether this script run is no longer wanted: the session closed, or a newer run was asked for that ends this
    one. A fragment's timer (``st.fragment(run_every=...)``, as the class panel's poll) asks for its fragment to run
    *after* this run and does not end it (Streamlit's own rule, ``_fragment_run_should_not_preempt_script``): a page
    waiting for a slot that gave up then would stop before drawing its fragments, and their timers with them.

    Streamlit keeps that in the run's ``ScriptRequests`` state (no public accessor: read defensively,
    so a Streamlit that renames it only means a waiting call is not abandoned early).
    """
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    requests = getattr(ctx, "script_requests", None)
    state = getattr(getattr(requests, "_state", None), "name", "CONTINUE")
    if state == "RERUN":
        wanted = getattr(requests, "_rerun_data", None)
        return not (getattr(wanted, "fragment_id_queue", None) and not getattr(wanted, "is_fragment_scoped_rerun", True))
    return state != "CONTINUE"


def model_call(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` through the process's model queue (``BFE_MODEL_CONCURRENCY`` at once, identical
    calls in flight computed once). A session that leaves while waiting gives its place up.

    ``fn`` is a named function (its module, name and the arguments are the identity of the call). It runs where
    :func:`services.executor.executor` says: on the model backend, in the model process (if that process dies during
    the call it is restarted, the call runs once more, and the page says so) or here. A backend that is starting is
    waited for (:func:`await_backend`).
    """
    from services.executor import executor
    from services.models import default_gate

    route = executor()
    restarts: list[int | None] = []
    lend = route.routes(fn)  # answered by another process: this page needs no interpreter meanwhile
    if route.remote and not lend:
        log.info("model call %s.%s runs in the web process (not routed to the %s)", fn.__module__, fn.__qualname__,
                 route.kind)

    def work() -> Any:
        return route.call(fn, *args, on_restart=restarts.append)

    # While it waits for its turn and another process's answer the page needs no interpreter: its page slot goes to
    # the next page run meanwhile (BFE_PAGE_CONCURRENCY), so one student's long call does not stop the class.
    key = (fn.__module__, fn.__qualname__, _freeze(args))
    try:
        with slot_lent() if lend else nullcontext():
            out = default_gate().run(key, work, cancelled=_run_abandoned)
    except BackendStarting as err:
        if not await_backend():  # it did not come up: say so, with what to check
            from services.backend import client as backend

            raise BackendStarting(f"The model backend at {backend.default().url} did not answer within "
                                  f"{BACKEND_WAIT_S:.0f} s ({err.message.rsplit('(', 1)[-1].rstrip(').')}).",
                                  "Check that it runs (`python -m app.backend`) and that BFE_BACKEND names it; then rerun "
                                  "the page.") from None
        with slot_lent():
            out = default_gate().run(key, work, cancelled=_run_abandoned)
    if restarts:  # shown after the page (this may run inside a cached function, whose elements are replayed)
        st.session_state["_bfe_model_restart"] = (
            f"The model process stopped (exit code {restarts[0]}) while working on this page; it was restarted and "
            "the request ran again.")
    return out


def loaded_models() -> Any:
    """What the model cache holds (``models.cache.CacheInfo``) where the models run (:mod:`services.executor`).
    Raises :class:`~core.errors.ModelProcessFailed` when the model process does not answer."""
    from services.executor import executor

    return executor().cache_info()


def free_model_memory() -> None:
    """Empty the model cache where the models run (a backend's is not a page's to free)."""
    from services.executor import executor

    executor().free()


def restart_notice() -> None:
    """After a page: say so if its model process had to be restarted during this run."""
    note = st.session_state.pop("_bfe_model_restart", None)
    if note:
        st.toast(note, icon=":material/restart_alt:")
        st.warning(note, icon=":material/restart_alt:")


@contextmanager
def slot_lent() -> Iterator[None]:
    """Around a wait on something outside this process's interpreter (a model call, Chromium, a download, the
    warm-up): this page's slot goes to the next page run, and it takes one back after. Inside a cached function it
    goes on without one: Streamlit holds that call's per-key lock, which a page holding the slot may be waiting on,
    and the two would wait for each other for ever."""
    from services.models import page_slot_lent

    try:
        from streamlit.runtime.scriptrunner_utils.script_run_context import in_cached_function

        cached = in_cached_function.get()
    except ImportError:  # another Streamlit: assume the lock may be held
        cached = True
    with page_slot_lent(take_back=not cached, cancelled=_run_abandoned):
        yield


@contextmanager
def page_run() -> Iterator[None]:
    """Around a script run: wait for a page slot (``BFE_PAGE_CONCURRENCY`` runs at once, all sessions);
    a run abandoned while it waits ends at once. The background warm-up waits while slots are in use."""
    from services.models import CallCancelled, page_slots

    try:
        slots = page_slots()
    except ExplorerError:  # a bad BFE_* setting: the page runs and shows the message itself
        yield
        return
    try:
        with slots.hold(cancelled=_run_abandoned):
            yield
    except CallCancelled:
        st.stop()


def start_warmup() -> None:
    """Start the server's background work, once per process (``BFE_WARMUP=0`` turns it off): the model process (or,
    with ``BFE_MODEL_PROCESS=0``, the warm-up in this process), and the lab queue's supervisor, which starts queued
    runs after a restart and frees a dead worker's slot. ``python -m app.serve`` has started the model process
    already; a plain ``streamlit run`` starts it here, after the first page is drawn."""
    from core.settings import get_settings
    from services.executor import executor

    with suppress(ExplorerError):  # a bad BFE_* setting, which the page has already shown
        executor().warm(get_settings().warmup)  # first: the model process loads while the lab package is imported
        if get_settings().warmup:
            from services import lab

            lab.supervise()


WARMUP_WAIT_S = 300.0
#: How long a page waits for a model backend that is starting (nothing answers at its address yet) before it says so.
BACKEND_WAIT_S = 120.0
#: When this process last gave up waiting for the backend: for :data:`BACKEND_WAIT_S` after, pages fail at once.
_gave_up: list[float] = []


def await_backend() -> bool:
    """While the model backend is starting (:class:`~core.errors.BackendStarting`: nothing answers at its address yet),
    wait for it with a spinner, as for the warm-up, at most :data:`BACKEND_WAIT_S` (the page slot lent meanwhile).
    Whether it answers now; without a backend, or when it answers or fails otherwise, at once."""
    import time

    from services.backend import client as backend
    from services.executor import executor

    if not executor().elsewhere:
        return True
    remote = backend.default()
    try:
        remote.info(status=True)  # reused for a few seconds: free once it answered
        return True
    except BackendStarting:
        pass
    except ExplorerError:
        return True  # another failure: the page's call says what it is
    if _gave_up and time.monotonic() - _gave_up[-1] < BACKEND_WAIT_S:
        return False
    with st.spinner(f"Waiting for the model backend to start (up to {BACKEND_WAIT_S:.0f} s)…"), slot_lent():
        ready = remote.wait_ready(BACKEND_WAIT_S, cancelled=_run_abandoned)
    if not ready:
        _gave_up[:] = [time.monotonic()]
    return ready


def await_warmup(model_ids: list[str]) -> None:
    """Before a page runs ``model_ids``: if the server is still warming one of them, say so and wait.

    A warm-up that failed is reported here (the page then tries the load itself and shows its error).
    """
    from services.executor import BACKEND, MODEL_PROCESS, executor
    from services.models import WarmupState

    route = executor()
    if route.kind == BACKEND:  # the backend preloads its models before it listens: wait only while it is starting
        await_backend()
        return
    if route.kind == MODEL_PROCESS:
        _await_model_process(model_ids)
        return
    w = route.warmup()
    if w is None or w.model_id not in model_ids:
        return
    if w.busy:
        with st.spinner(f"Getting the model ready: the server has just started ({w.step})…"), slot_lent():
            w.wait(timeout=WARMUP_WAIT_S)
    if w.state == WarmupState.FAILED and w.error is not None:
        st.warning(f"Preparing **{w.model_id}** in the background failed ({type(w.error).__name__}: "
                   f"{str(w.error)[:300]}); trying again now.", icon=":material/warning:")


def _await_model_process(model_ids: list[str]) -> None:
    import time

    from core import registry
    from services import runtime
    from services.models import WarmupState

    rt = runtime.default()
    if rt is None or not rt.alive() or registry.bundled_id() not in model_ids:
        return
    status = rt.status()
    waiting = (WarmupState.STARTING, WarmupState.RUNNING)
    if status.state in waiting:
        rt.go(now=True)  # a page needs the model: the process stops waiting for the first page to be painted
        with st.spinner(f"Getting the model ready: the server has just started ({status.step or 'starting'})…"), \
                slot_lent():
            deadline = time.monotonic() + WARMUP_WAIT_S
            while status.state in waiting and time.monotonic() < deadline and not _run_abandoned():
                time.sleep(0.2)  # asked, not the poller's (up to 0.5 s old), so the page goes on once the model is ready
                status = rt.ask_status(0.5)
    if status.state == WarmupState.FAILED and status.error:
        st.warning(f"Preparing **{status.model_id}** in the background failed ({status.error}); trying again now.",
                   icon=":material/warning:")
