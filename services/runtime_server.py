"""The model process's side (:mod:`services.runtime` is the web process's): ``python -m services.runtime_server
<socket> <parent pid> <warm>`` binds its socket before any heavy import, imports torch and transformers once the web
process has drawn its first page, warms the bundled model, and answers each connection in a thread of its own: the
handshake, then one request (a routed call, the status, the model cache). It exits within half a second of its parent,
however the parent ended."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection, Listener, answer_challenge, deliver_challenge
from typing import Any

from core.errors import ExplorerError, ModelProcessFailed
from models.warmup import WarmupState
from services.routing import _resolve, pack_error
from services.runtime import AFTER_GO_S, GO_TIMEOUT_S, KEY_ENV

log = logging.getLogger("bert_family_explorer")


def _die_with_parent(parent: int) -> None:
    """Exit within half a second of the web process, however it ended (SIGTERM, ``kill -9``, a crash).

    Not Linux's parent-death signal: it fires when the *thread* that spawned the child ends, and a restart is spawned
    from a page's script thread, which ends with the page run."""
    if os.getppid() != parent:  # it died before this ran
        os._exit(0)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(0)

    threading.Thread(target=watch, name="bfe-runtime-watchdog", daemon=True).start()


_imported = threading.Event()
_go = threading.Event()
_called = threading.Event()


def _import_heavy() -> None:
    """torch and transformers, before any call runs: transformers' lazy modules are not safe to import from two
    threads at once (a call racing the warm-up saw ``transformers`` without ``AutoModel``)."""
    try:
        from models.warmup import import_heavy

        import_heavy()
    finally:
        _imported.set()


def _status() -> dict[str, Any]:
    out: dict[str, Any] = {"state": WarmupState.IDLE, "pid": os.getpid()}
    if not _imported.is_set():
        return {**out, "state": WarmupState.RUNNING, "step": "importing torch and transformers" if _go.is_set() else
                "waiting for the first page to be drawn"}
    warmup = sys.modules.get("models.warmup")
    if warmup is not None:
        w = warmup.current()
        out.update(state=w.state, step=w.step, seconds=round(w.seconds, 2), model_id=w.model_id,
                   error="" if w.error is None else f"{type(w.error).__name__}: {str(w.error)[:300]}")
    loader = sys.modules.get("models.loader")
    if loader is not None:
        info = loader.default_cache().info()
        out.update(cache_bytes=info.total_bytes, cache_budget=info.budget_bytes, models_loaded=len(info.entries))
    return out


def _handle(conn: Connection, key: bytes) -> None:
    with conn:
        try:  # the handshake here, not in the accept loop: a slow client holds up nobody else
            deliver_challenge(conn, key)
            answer_challenge(conn, key)
            message = conn.recv()
        except Exception as err:  # a wrong key (AuthenticationError), or a client that went away
            log.debug("model process: refused a connection: %s", err)
            return
        try:
            kind = message[0]
            if kind in ("go", "now"):
                if kind == "now":
                    _called.set()
                _go.set()
                reply: tuple[str, Any] = ("ok", None)
            elif kind == "status":
                reply = ("ok", _status())
            elif kind == "cache_info":
                from models.loader import default_cache

                reply = ("ok", default_cache().info())
            elif kind == "cache_clear":
                from models.loader import default_cache

                default_cache().clear()
                reply = ("ok", None)
            elif kind == "call":
                _, module, name, args = message
                fn = _resolve(module, name)  # refused before anything is imported or loaded
                _called.set()  # a page needs a model now: the warm-up holds back no longer
                _go.set()
                _imported.wait()
                reply = ("ok", fn(*args))
            else:
                raise ModelProcessFailed(f"Unknown request {str(kind)[:40]!r}.")
        except BaseException as err:  # carried back to the page that asked (SystemExit too); never ends the process
            if not isinstance(err, ExplorerError):
                log.exception("model process: %s failed", str(message[:3])[:200])
            reply = ("error", pack_error(err))
        try:
            conn.send(reply)
        except (OSError, EOFError):  # the asking page went away
            pass
        except Exception as err:  # a result that does not pickle
            with contextlib.suppress(Exception):
                conn.send(("error", pack_error(ModelProcessFailed(f"The result could not be sent back: {err}"))))


def serve(address: str, parent: int, warm: bool) -> None:
    """Run the model process: bind ``address`` first (so a status answers at once), then warm up in the
    background and answer each connection in a thread of its own until the parent exits."""
    _die_with_parent(parent)
    key = bytes.fromhex(os.environ.pop(KEY_ENV))
    old = os.umask(0o177)
    try:
        # No authkey here: each handler thread does the handshake (:func:`_handle`). A backlog for a class's worth
        # of pages asking at once.
        listener = Listener(address, family="AF_UNIX", backlog=64)
    finally:
        os.umask(old)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal: the server stops us (no traceback here)

    def imports() -> None:
        # Importing torch and transformers takes a core's time; done while the web process serves its first page (and
        # a browser on the same machine paints it) it slowed Home (bench/startup.py, bench/results/README.md). So a
        # warming process waits until the web process has drawn its first page (it says "go") and the browser has had
        # a moment to paint it, or until a page calls a model, or GO_TIMEOUT_S when nobody visits. (A lower CPU
        # priority for this thread, nice 10 or 19 or SCHED_IDLE, made no difference that bench/startup.py could measure.)
        if warm and _go.wait(GO_TIMEOUT_S) and not _called.is_set():
            time.sleep(AFTER_GO_S)
        try:
            _import_heavy()
        except Exception as err:  # a broken install: each call then reports its own import error
            log.warning("importing torch and transformers failed: %s", err)

    def warm_up() -> None:
        _imported.wait()
        from models import warmup

        try:
            warmup.start()  # the bundled model, in a thread (its import step is done)
        except ExplorerError as err:  # a bad setting: shown by the page that needs the model
            log.warning("not warming up: %s", err)

    threading.Thread(target=imports, name="bfe-runtime-imports", daemon=True).start()
    if warm:
        threading.Thread(target=warm_up, name="bfe-runtime-warm", daemon=True).start()
    while True:
        try:
            conn = listener.accept()
        except OSError as err:  # a client that went away
            log.debug("model process: accept failed: %s", err)
            continue
        threading.Thread(target=_handle, args=(conn, key), name="bfe-runtime-call", daemon=True).start()


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="model process: %(message)s")
    serve(sys.argv[1], int(sys.argv[2]), sys.argv[3] == "1")
