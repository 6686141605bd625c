"""What keeps the queue moving with no page open: a web server's supervisor thread, and the headless worker of a
training machine. Both only call :func:`services.lab.run_queue.dispatch` on a timer, so queued runs start after a
restart and a dead worker's run is marked interrupted whether or not anyone watches."""

from __future__ import annotations

import logging
import os
import signal
import threading

from core.errors import ExplorerError, InvalidConfig
from services.lab.run_queue import dispatch

logger = logging.getLogger("bert_family_explorer")
_supervisor: threading.Thread | None = None
_stop = threading.Event()


def supervise(interval: float = 5.0) -> bool:
    """Start, once per process, a daemon thread that calls :func:`dispatch` every ``interval`` seconds: queued runs
    start after a server restart and a dead worker's run is marked interrupted, whether or not a page is open.
    Returns True when this call started it."""
    global _supervisor
    if _supervisor is not None and _supervisor.is_alive():
        return False
    _stop.clear()

    def loop() -> None:
        # Sleep first: the supervisor starts right after a server's first page run, while the browser is still
        # painting it; its first look at the database (which may seed it) waits until that is done.
        while not _stop.wait(interval):
            try:
                dispatch()
            except Exception as err:  # a database or disk outage must not end the supervisor; it tries again
                logger.warning("lab supervisor: %s", err)

    _supervisor = threading.Thread(target=loop, daemon=True, name="lab-supervisor")
    _supervisor.start()
    return True


def stop_supervisor(timeout: float = 10.0) -> None:
    """Stop this process's supervisor thread, if one runs (a process that is not a server: tests, a shell)."""
    global _supervisor
    _stop.set()
    if _supervisor is not None:
        _supervisor.join(timeout)
    _supervisor = None


def serve_worker(slots: int, interval: float = 5.0, once: bool = False) -> int:
    """A training machine with no web server: claim queued runs from the shared database into ``slots`` local
    worker processes, every ``interval`` seconds, until SIGTERM or SIGINT (``once``: a single dispatch). The web
    replicas can then run with ``BFE_LAB_CONCURRENCY=0`` and every run trains here, on this machine's device; its
    checkpoints go to this machine's ``BFE_MODEL_DIR`` (a backend on the same machine serves them to the pages).
    Returns the number of runs it started."""
    if not (type(slots) is int and 1 <= slots <= 64):
        raise InvalidConfig(f"--slots must be a whole number from 1 to 64, not {slots!r}.")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    started = 0
    logger.info("lab worker: %d slot(s) on %s", slots, os.uname().nodename)
    while True:
        try:
            started += len(dispatch(slots=slots))
        except ExplorerError as err:
            raise SystemExit(f"lab worker: {err}") from None
        except Exception as err:  # a database outage: try again, as the web supervisor does
            logger.warning("lab worker: %s", err)
        if once or stop.wait(interval):
            return started
