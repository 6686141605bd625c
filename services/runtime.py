"""The model process: the Streamlit pages' model calls run in a process of their own, which imports torch and
transformers and warms the bundled model once the web process has drawn its first page.

Why a process: the web process needs neither torch nor transformers to draw Home, and importing them there costs
one core's time with the GIL held, which either delays the server's start (imported before it listens) or slows
the first pages (imported while they are drawn). In a process of its own that work waits until the first page is
drawn (or a page asks for a model), then runs on a core of its own: Home is served as by a bare Streamlit app, and
the model is ready soon after (measured: ``bench/startup.py``, bench/results/README.md). A model that crashes or runs
out of memory kills this process only: the next call restarts it and runs again once (the page says so).

The cost is moving results between the processes: each call's arguments and result are pickled over a Unix socket
(an attention tensor of a 6-layer model at 512 tokens, 72 MB in float32, takes longer to move than to compute:
``bench/startup.py --transfer``, docs/benchmarks.md); pages cache what they get, so a second view of the same input
does not move it again.

- :class:`Runtime`: the client the web process holds (one per process, :func:`default`): :meth:`Runtime.start` spawns
  ``python -m services.runtime_server`` (it binds its socket before any heavy import, so its status answers at once),
  :meth:`Runtime.call` runs ``models.<module>.<function>(*args)`` there, :meth:`Runtime.status` says how the warm-up
  goes. The socket is private to this user (mode 0600 in a 0700 folder) and every connection proves a random key
  (``multiprocessing.connection``'s HMAC handshake); only the read-only model functions in :data:`ROUTED` can be
  called.
- :func:`services.runtime_server.serve`: the process itself, in a module of its own (as the backend's client and
  handlers are apart). It exits within half a second of its parent (a watchdog), however the parent
  ended, so stopping the server (SIGTERM, a container stop, ``kill -9``) leaves no process behind.

The library's functions are unchanged: the Gradio app, the benches and the tests call them in their own process;
``BFE_MODEL_PROCESS=0`` runs the pages' calls in the web process too.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from multiprocessing.connection import Client, Connection
from pathlib import Path
from typing import Any

from core.errors import ModelProcessFailed
from models.warmup import WarmupState
from services.routing import ROUTED, pack_error, routable, route, unpack_error  # noqa: F401 (ROUTED, routable, pack_error: this module's API too)

log = logging.getLogger("bert_family_explorer")

KEY_ENV = "BFE_RUNTIME_KEY"
CONNECT_TIMEOUT_S = 30.0  # a fresh process binds its socket before any heavy import; an overloaded machine gets slack
ROOT = Path(__file__).resolve().parent.parent
GO_TIMEOUT_S = 20.0  # a warming process starts this long after it was spawned if no page has been drawn by then
AFTER_GO_S = 0.5  # after the web process's first page run: the browser paints it meanwhile


@dataclass(frozen=True)
class Status:
    """The model process's state: ``state`` is ``starting`` (no answer yet), ``idle`` (no warm-up asked), ``running``
    (warming: ``step``), ``ready``, ``failed`` (``error``) or ``down`` (not running)."""

    state: str
    step: str = ""
    seconds: float = 0.0
    error: str = ""
    model_id: str = ""
    pid: int = 0
    cache_bytes: int = 0
    cache_budget: int = 0
    models_loaded: int = 0
    restarts: int = 0


class _Remote(Exception):
    """The model process answered with an error (as opposed to the exchange failing)."""

    def __init__(self, packed: tuple[str, str, tuple[Any, ...], dict[str, Any], str]) -> None:
        super().__init__(packed[4])
        self.packed = packed


# --- the client (the web process) -------------------------------------------------------------------------------


class Runtime:
    """The web process's handle on its model process. Thread-safe; every request opens its own connection.

    A process that dies is replaced on demand, by the next call (never by a page that only looks at the status),
    and a replacement does not warm up: after a crash the call that needs the model loads it, and nothing else
    competes with it for memory.
    """

    def __init__(self, warm: bool = True, command: list[str] | None = None) -> None:
        self.warm = warm
        self.command = command or [sys.executable, "-m", "services.runtime_server"]
        self.key = secrets.token_bytes(32)
        self._dir = Path(tempfile.mkdtemp(prefix="bfe-rt-"))  # mode 0700; short: a socket path has 107 bytes at most
        self.address = str(self._dir / "s")
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0
        self._went: int | None = None  # the pid of the process told "go"
        self._lock = threading.Lock()
        self._status = Status("down")
        self._poller: threading.Thread | None = None

    # lifecycle
    def start(self, dead: subprocess.Popen[bytes] | None = None) -> bool:
        """Spawn the process if there is none yet, or replace ``dead`` (a process this caller saw die) if it is
        still the current one. Returns True when this call replaced a dead process. Returns at once: the process
        warms up on its own."""
        with self._lock:
            if self.proc is not None and (dead is None or self.proc is not dead):
                return False
            replaced = self.proc is not None
            if replaced:
                self.restarts += 1
            self._dir.mkdir(mode=0o700, exist_ok=True)  # a tmp cleaner may have removed it from a long-lived server
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.address)
            env = {**os.environ, KEY_ENV: self.key.hex(), "PYTHONPATH": os.pathsep.join(
                p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)}
            warm = self.warm and not replaced
            self.proc = subprocess.Popen([*self.command, self.address, str(os.getpid()), "1" if warm else "0"],
                                         env=env, cwd=str(ROOT), stdin=subprocess.DEVNULL)
            if self._poller is None:
                self._poller = threading.Thread(target=self._poll, name="bfe-runtime-status", daemon=True)
                self._poller.start()
            return replaced

    def alive(self) -> bool:
        proc = self.proc
        return proc is not None and proc.poll() is None

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the process (SIGTERM, then SIGKILL after ``timeout``), wait for it, remove its socket's folder."""
        with self._lock:
            proc, self.proc = self.proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with self._lock:  # a call on another thread may have started a new process meanwhile: its socket lives there
            if self.proc is None:
                shutil.rmtree(self._dir, ignore_errors=True)

    # requests
    def _connect(self, deadline: float) -> Connection:
        while True:
            try:
                return Client(self.address, family="AF_UNIX", authkey=self.key)
            except (FileNotFoundError, ConnectionRefusedError):
                if not self.alive() or time.monotonic() > deadline:
                    raise
                time.sleep(0.02)

    def _ask(self, message: tuple[Any, ...], timeout: float | None, wait_for_socket: bool = True) -> Any:
        """Send ``message``, return the answer. Raises :class:`_Remote` for an error the process answered with,
        and OSError, EOFError or TimeoutError when the exchange itself fails."""
        deadline = time.monotonic() + (CONNECT_TIMEOUT_S if timeout is None else timeout)
        with self._connect(deadline if wait_for_socket else 0.0) as conn:
            conn.send(message)
            while not conn.poll(0.5):  # a call may take minutes; a dead process must not hang the page
                if not self.alive():
                    raise EOFError("the model process exited")
                if timeout is not None and time.monotonic() > deadline:
                    raise TimeoutError("the model process did not answer")
            kind, value = conn.recv()
        if kind == "error":
            raise _Remote(value)
        return value

    def request(self, message: tuple[Any, ...], timeout: float = 10.0) -> Any:
        """A small request (``cache_info``, ``cache_clear``) to a running process; errors come back as themselves,
        a process that is not running raises :class:`~core.errors.ModelProcessFailed`."""
        try:
            return self._ask(message, timeout)
        except _Remote as err:
            raise unpack_error(err.packed) from None
        except (OSError, EOFError, TimeoutError) as err:
            raise ModelProcessFailed(f"The model process is not answering ({type(err).__name__}).",
                                     "It starts with the server; reload the page in a few seconds.") from None

    def go(self, now: bool = False) -> None:
        """Tell the process that the web process has drawn its first page (once per process): it may import torch
        and load the model. ``now``: a page is waiting for the model, so it starts at once (every time asked)."""
        proc = self.proc
        if proc is None or proc.poll() is not None or (self._went == proc.pid and not now):
            return
        self._went = proc.pid

        def send() -> None:
            with contextlib.suppress(Exception):
                self._ask(("now" if now else "go",), 10.0)

        threading.Thread(target=send, name="bfe-runtime-go", daemon=True).start()

    def _poll(self) -> None:
        """Keep :meth:`status` current, twice a second while a process runs (pages read it; they never wait)."""
        while True:
            self._status = self.ask_status()
            time.sleep(0.5 if self.alive() else 2.0)

    def ask_status(self, timeout: float = 1.0) -> Status:
        """Ask the process how it is (one round trip; never raises)."""
        if not self.alive():
            code = None if self.proc is None else self.proc.returncode
            return Status("down", error="" if code is None else f"exit code {code}", restarts=self.restarts)
        try:
            out = self._ask(("status",), timeout, wait_for_socket=False)
        except Exception:  # not bound yet, busy past the timeout, or answering with an error
            return Status(WarmupState.STARTING, pid=self.proc.pid if self.proc else 0, restarts=self.restarts)
        return Status(**out, restarts=self.restarts)

    def status(self) -> Status:
        """The latest status the background poller saw (at most half a second old; never blocks)."""
        if not self.alive():
            return Status("down", restarts=self.restarts)
        return self._status if self._status.pid == (self.proc.pid if self.proc else -1) else Status(
            WarmupState.STARTING, pid=self.proc.pid if self.proc else 0, restarts=self.restarts)

    def call(self, fn: Any, *args: Any, on_restart: Any = None) -> Any:
        """``fn(*args)`` in the model process (started if needed). A process that had died since the last call, or
        dies during this one, is replaced, ``on_restart(exit_code)`` is called, and the call runs (once more); a
        second death raises :class:`~core.errors.ModelProcessFailed`. Errors ``fn`` raises come back as themselves
        (and never count as a death)."""
        where = route(fn)
        if where is None:
            raise ModelProcessFailed(f"{getattr(fn, '__qualname__', fn)!r} cannot run in the model process.")
        message = ("call", *where, args)
        told = False
        for attempt in (1, 2):
            self.start()  # the first process (a no-op once there is one)
            proc = self.proc
            if proc is not None and proc.poll() is not None:  # it died while idle: replace it, and say so
                self.start(dead=proc)
                if on_restart is not None and not told:
                    on_restart(proc.returncode)
                    told = True
                proc = self.proc
            try:
                return self._ask(message, None)
            except _Remote as err:
                raise unpack_error(err.packed) from None
            except (OSError, EOFError) as err:
                code = self._reap(proc)
                log.warning("model process stopped (exit code %s) during %s: %s", code, fn.__qualname__, err)
                if attempt == 2:
                    raise ModelProcessFailed(f"The model process stopped twice (exit code {code}) while running "
                                             f"{fn.__qualname__}.", "It may have run out of memory: try a shorter "
                                             "input or a smaller model.") from None
                self.start(dead=proc)
                if on_restart is not None and not told:
                    on_restart(code)
                    told = True
        raise AssertionError("unreachable")

    @staticmethod
    def _reap(proc: subprocess.Popen[bytes] | None) -> int | None:
        """After a failed exchange with ``proc``: its exit code (alive but not answering: it is killed first)."""
        if proc is None:
            return None
        try:
            return proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()


_default: Runtime | None = None
_default_lock = threading.Lock()


def default(create: bool = True) -> Runtime | None:
    """This process's runtime (created, not started, on first use unless ``create`` is False)."""
    global _default
    with _default_lock:
        if _default is None and create:
            from core.settings import get_settings

            _default = Runtime(warm=get_settings().warmup)
            import atexit

            atexit.register(_default.stop)
        return _default
