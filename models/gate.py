"""One bounded queue for model calls from every browser session of a process, and single-flight.

Streamlit runs each session's script in its own thread, so thirty students pressing "run" at once
would start thirty forward passes, each allocating its activations (attention alone is
layers × heads × T² floats): memory grows with the class and every call slows down. Gradio has its
own queue (``BFE_GRADIO_CONCURRENCY``); Streamlit has none, so this is a small one:

- at most ``limit`` calls run at once (``BFE_MODEL_CONCURRENCY``); the others wait, first come
  first served (a ``threading.Semaphore`` wakes waiters in order);
- a caller whose session has gone (or has asked for a new run) gives its place up: ``cancelled``
  is polled while it waits and :class:`CallCancelled` is raised;
- identical calls (same ``key``) in flight at the same moment are computed once and share the
  result (single-flight); the followers wait without taking a place.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Iterator
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TypeVar

from core.errors import ExplorerError

T = TypeVar("T")
POLL_S = 0.1


class CallCancelled(ExplorerError):
    """The caller stopped waiting for its turn (its browser session closed, or it asked for a new run)."""


class _LeaderGone(Exception):
    """The call that followers were waiting on was cancelled before it ran: they try again."""


@dataclass(frozen=True)
class GateInfo:
    limit: int
    running: int
    waiting: int
    computed: int
    shared: int  # calls answered by an identical call in flight


class ModelGate:
    """At most ``limit`` calls at once; identical calls in flight are computed once."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._slots = Slots(limit)
        self._lock = threading.Lock()
        self._inflight: dict[Hashable, Future] = {}
        self._computed = self._shared = 0

    def run(self, key: Hashable, fn: Callable[[], T], cancelled: Callable[[], bool] = lambda: False) -> T:
        """``fn()`` when a place is free, or the result of an identical call (``key``) already running.

        Raises:
            CallCancelled: ``cancelled()`` became true while this call waited.
            whatever ``fn`` raises (followers of the same key get the same exception).
        """
        while True:
            with self._lock:
                future = self._inflight.get(key)
                leader = future is None
                if leader:
                    future = self._inflight[key] = Future()
            if leader:
                return self._lead(key, future, fn, cancelled)
            try:
                value = self._follow(future, cancelled)
            except _LeaderGone:
                continue
            with self._lock:
                self._shared += 1
            return value

    def _follow(self, future: Future, cancelled: Callable[[], bool]) -> T:
        while True:
            try:
                return future.result(timeout=POLL_S)
            except FutureTimeout:
                if cancelled():
                    raise CallCancelled("Stopped waiting: the page was closed or changed.") from None

    def _lead(self, key: Hashable, future: Future, fn: Callable[[], T], cancelled: Callable[[], bool]) -> T:
        try:
            with self._slots.hold(cancelled):
                try:
                    value = fn()
                finally:
                    with self._lock:
                        self._computed += 1
        except CallCancelled:  # it left while waiting: the followers run the call themselves
            self._finish(key)
            future.set_exception(_LeaderGone())
            raise
        except BaseException as err:
            self._finish(key)
            future.set_exception(err)
            raise
        self._finish(key)
        future.set_result(value)
        return value

    def _finish(self, key: Hashable) -> None:
        with self._lock:
            self._inflight.pop(key, None)

    def info(self) -> GateInfo:
        with self._lock:
            return GateInfo(self.limit, self._slots.busy, self._slots.waiting, self._computed, self._shared)


class Slots:
    """At most ``limit`` holders at once, first come first served; a waiter can give up (``cancelled``).

    The app runs each page's script under one of these (``BFE_PAGE_CONCURRENCY``): Python runs one
    thread at a time, so thirty scripts interleaved finish no sooner than thirty in turn, but pay for
    the switching (measured: ``bench/classroom.py``, bench/results/README.md).
    """

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._sem = threading.Semaphore(limit)
        self._lock = threading.Lock()
        self.busy = self.waiting = 0
        self._holders: dict[int, int] = {}  # thread → slots it holds now (not while it lends one)

    @contextmanager
    def hold(self, cancelled: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """Hold a slot for the block. Raises CallCancelled if ``cancelled()`` turns true while waiting."""
        with self._lock:
            self.waiting += 1
        try:
            while not self._sem.acquire(timeout=POLL_S):
                if cancelled():
                    raise CallCancelled("Stopped waiting: the page was closed or changed.")
        finally:
            with self._lock:
                self.waiting -= 1
        me = threading.get_ident()
        with self._lock:
            self.busy += 1
            self._holders[me] = self._holders.get(me, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                held = self._holders.get(me, 0) > 0  # not after a lent() that went on without taking a slot back
                if held:
                    self.busy -= 1
                    self._take(me)
            if held:
                self._sem.release()

    def _take(self, me: int) -> None:
        """One slot fewer held by thread ``me`` (under ``self._lock``)."""
        left = self._holders[me] - 1
        if left:
            self._holders[me] = left
        else:
            del self._holders[me]

    @contextmanager
    def lent(self, take_back: bool = True, cancelled: Callable[[], bool] = lambda: False) -> Iterator[None]:
        """Give this thread's slot to the next waiter for the block (a wait that needs no interpreter here: a model
        call answered by the model process or a backend, a chart drawn by Chromium, a download), then take one back,
        first come first served like :meth:`hold`.

        Without ``take_back`` (or once ``cancelled()`` turns true while waiting) the thread goes on without a slot:
        a caller that may hold a lock another page waits on while holding a slot (Streamlit's per-key lock inside a
        cached function) must not wait for a slot, or the two would wait for each other for ever. A thread that holds
        no slot runs the block as it is."""
        me = threading.get_ident()
        with self._lock:
            holding = self._holders.get(me, 0) > 0
            if holding:
                self._take(me)
                self.busy -= 1
        if not holding:
            yield
            return
        self._sem.release()
        try:
            yield
        finally:
            if take_back:
                with self._lock:
                    self.waiting += 1
                got = False
                try:
                    while not (got := self._sem.acquire(timeout=POLL_S)) and not cancelled():
                        pass
                finally:
                    with self._lock:
                        self.waiting -= 1
                        if got:
                            self.busy += 1
                            self._holders[me] = self._holders.get(me, 0) + 1


_instances: dict[str, ModelGate | Slots] = {}
_instances_lock = threading.Lock()


def _process_wide(name: str, make: Callable[[], ModelGate | Slots]) -> ModelGate | Slots:
    with _instances_lock:
        if name not in _instances:
            _instances[name] = make()
        return _instances[name]


def default_gate() -> ModelGate:
    """The process-wide model queue, sized by ``BFE_MODEL_CONCURRENCY`` when first used."""
    from core.settings import get_settings

    return _process_wide("models", lambda: ModelGate(get_settings().model_concurrency))


def page_slots() -> Slots:
    """The process-wide page-run slots, sized by ``BFE_PAGE_CONCURRENCY`` when first used."""
    from core.settings import get_settings

    return _process_wide("pages", lambda: Slots(get_settings().page_concurrency))


@contextmanager
def page_slot_lent(take_back: bool = True, cancelled: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """:meth:`Slots.lent` on the page-run slots, if this thread holds one (a page's script); else nothing."""
    slots = _instances.get("pages")
    if isinstance(slots, Slots):
        with slots.lent(take_back, cancelled):
            yield
    else:
        yield


def pages_active() -> int:
    """Page runs executing or waiting now (0 before the first page), without creating the slots."""
    slots = _instances.get("pages")
    return 0 if slots is None else slots.busy + slots.waiting
