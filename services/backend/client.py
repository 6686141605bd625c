"""The front end's side of the model backend: the pages' model calls sent to ``BFE_BACKEND`` through Gradio's HTTP API.

:class:`Backend` holds one pooled ``httpx.Client`` (made on first use, remade after the backend went away), reads the
backend's ``info`` first and refuses one of another version, then sends each call as JSON text
(:mod:`services.backend.wire`) to ``attention`` (batched with other callers' requests on the backend) or ``call``.
An answer is its JSON text and, when it holds large arrays, a file of their raw ``.npy`` bytes, downloaded at once.

Faults, each a :class:`~core.errors.BackendError` with a message the page shows:

- down or restarting: :class:`~core.errors.BackendUnavailable`; nothing is remembered, so the next call (a rerun of
  the page) connects again and works once the backend is back;
- slow: each call kind has a time limit (:data:`TIMEOUTS`), past which the page stops waiting
  (:class:`~core.errors.BackendTimeout`; the backend finishes the job and its answer is dropped);
- wrong or missing token: :class:`~core.errors.BackendRefused`;
- another version: :class:`~core.errors.BackendMismatch`;
- a request over the bounds (:data:`MAX_REQUEST_CHARS`): refused here, before anything is sent;
- an answer over :data:`MAX_ANSWER_BYTES` (a backend that sends without end): refused as it arrives.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from core.errors import (
    BackendError,
    BackendMismatch,
    BackendRefused,
    BackendStarting,
    BackendTimeout,
    BackendUnavailable,
    ModelProcessFailed,
)
from core.version import app_version
from services.backend import wire

log = logging.getLogger("bert_family_explorer")

#: The largest request sent (JSON text), as the backend takes it (services.backend.handlers.MAX_REQUEST_CHARS).
MAX_REQUEST_CHARS = 256 * 1024
#: The largest answer read, its event stream and its array file each. The largest real one is a 512-token attention
#: result of a 24-layer, 16-head model: 24·16·512² float32 values, 403 MB; a backend sending more is refused as the
#: bytes arrive (nothing past the bound is held).
MAX_ANSWER_BYTES = 1 << 30
#: Seconds a call kind may take on the backend (queue wait included) before the page is told it is too slow.
TIMEOUTS: dict[str, float] = {"extract_attention": 60.0, "query_key": 60.0, "fill_mask": 60.0, "load_summary": 300.0,
                              "head_importance": 600.0, "pruning_curve": 600.0, "activation_patching": 300.0,
                              "nearest_contexts": 300.0}
DEFAULT_TIMEOUT_S = 120.0
#: Attention requests whose texts (sentence A and B) are at most this long go through the batching endpoint; longer
#: ones go alone: batching speeds a class up on short sentences and slows it down on long ones, where a batch computes
#: no faster than one at a time and every request waits for the whole batch (bench/results/backend-class-cpu.txt).
#: 400 characters: about 90 tokens.
BATCH_MAX_CHARS = 400
CONNECT_TIMEOUT_S = 10.0
#: How long a connection may stay silent. The queue's event stream carries nothing while a call runs but Gradio's
#: heartbeat (every 15 s, GRADIO_HEARTBEAT_INTERVAL on the backend); a read timeout under that ended every call that
#: took longer (httpx.ReadTimeout in gradio_client's stream: "failed the request"), whatever its own time limit.
READ_TIMEOUT_S = 60.0
#: How long an ``info`` answer is reused (the sidebar asks on every page run), and how long the sidebar reuses a failed
#: ask: a backend that does not answer costs the class one connect timeout every few seconds, not one per student per
#: page run.
INFO_TTL_S = 5.0


@dataclass(frozen=True)
class BackendInfo:
    """What the backend says about itself: versions, where its models run, its model cache and batches."""

    url: str
    app: str
    wire: int
    device: str
    kind: str
    gpu: str
    memory_bytes: int | None
    cache_bytes: int
    cache_budget: int
    models_loaded: int
    batch_sizes: dict[str, int]
    calls: dict[str, int]
    entries: tuple[dict[str, Any], ...] = ()  # the backend's model cache (models.cache.CacheEntry's fields)
    evictions: int = 0


class Backend:
    """A model backend at ``url``. Thread-safe: the pages of every session share one."""

    def __init__(self, url: str, token: str = "", timeouts: dict[str, float] | None = None) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeouts = {**TIMEOUTS, **(timeouts or {})}
        self._client: Any = None
        self._lock = threading.Lock()
        self._info: tuple[float, BackendInfo] | None = None
        self._info_failed: tuple[float, BackendError] | None = None
        self._status_lock = threading.Lock()
        self.sent_chars = 0  # what went over the network, both ways (the benches report it per call)
        self.received_chars = 0
        self.received_blob_bytes = 0  # of which: answers' array files

    # connection
    def _connect(self) -> Any:
        """The pooled ``httpx.Client`` every call shares (made once, remade after the backend went away)."""
        with self._lock:
            if self._client is None:
                import httpx

                headers = {wire.TOKEN_HEADER: self.token} if self.token else {}
                self._client = httpx.Client(base_url=self.url, headers=headers, timeout=httpx.Timeout(
                    CONNECT_TIMEOUT_S, read=READ_TIMEOUT_S), limits=httpx.Limits(max_connections=64))
            return self._client

    def _forget(self) -> None:
        with self._lock:
            client, self._client, self._info = self._client, None, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _status_error(self, status: int) -> BackendError:
        if status == 401:
            return BackendRefused("The model backend refused this app's token.", "Set BFE_BACKEND_TOKEN to the backend's token.")
        if status == 413:
            return BackendRefused("The model backend refused a request over its size limit.", "Use a shorter input.")
        if status == 404:
            return BackendMismatch(f"The model backend at {self.url} has no such endpoint.", "Run the same version of the "
                                   "app on both, and check that BFE_BACKEND names the backend, not another server.")
        if status in (502, 503):  # a proxy (or a Space) in front of a backend that is not up yet
            return BackendStarting(f"The model backend at {self.url} answered {status}: it is not up yet.",
                                   "It may be starting or restarting: rerun the page in a few seconds.")
        return BackendUnavailable(f"The model backend at {self.url} answered {status}.",
                                  "It may be starting or restarting: rerun the page in a few seconds.")

    def _submit(self, api_name: str, payload: tuple[Any, ...], timeout: float) -> tuple[str, bytes]:
        """One job through Gradio's queue, by its documented HTTP API: ``POST /gradio_api/call/<api>`` puts the job in
        the queue (where the ``attention`` endpoint batches it with others), ``GET /gradio_api/call/<api>/<event>``
        streams its result as server-sent events; a file output is then read from ``GET /gradio_api/file=<path>``.
        Why not ``gradio_client``: it moved each answer slower than plain HTTP (measured: ``bench/backend.py``,
        bench/results/README.md). Returns the text output and the file's bytes
        (empty without one). Connection failures forget the pooled client (the next call reconnects)."""
        import httpx

        client = self._connect()
        deadline = time.monotonic() + timeout
        api = api_name.strip("/")
        try:
            r = client.post(f"/gradio_api/call/{api}", json={"data": list(payload)})
            if r.status_code != 200:
                raise self._status_error(r.status_code)
            event = r.json().get("event_id")
            if not isinstance(event, str) or not event.isalnum():
                raise BackendMismatch("The model backend's queue answered in a form this front end does not read.",
                                      "Run the same version of the app on both.")
            answer, blob_path = self._stream(client, f"/gradio_api/call/{api}/{event}", deadline, timeout)
            blob = self._download(client, blob_path, deadline) if blob_path else b""
        except (TimeoutError, httpx.ReadTimeout) as err:
            if isinstance(err, httpx.ReadTimeout) and time.monotonic() < deadline - 0.05:  # silent, not slow: gone
                self._forget()
                raise BackendUnavailable(f"The model backend at {self.url} stopped answering: the connection ended "
                                         "(ReadTimeout).", "It may be restarting: rerun the page in a few seconds.") from None
            raise BackendTimeout(f"The model backend took more than {timeout:.3g} s.", "It may be busy with a class's "
                                 "requests or a long call: try again, or a shorter input.") from None
        except (httpx.ConnectError, httpx.ConnectTimeout) as err:
            self._forget()
            raise BackendStarting(f"The model backend at {self.url} does not answer ({type(err).__name__}).",
                                  "It may be starting or restarting: rerun the page in a few seconds.") from None
        except (httpx.HTTPError, OSError, ValueError) as err:  # it went away during the call
            self._forget()
            raise BackendUnavailable(f"The model backend at {self.url} stopped answering: the connection ended "
                                     f"({type(err).__name__}).", "It may be restarting: rerun the page in a few seconds.") from None
        self.received_chars += len(answer) + len(blob)
        self.received_blob_bytes += len(blob)
        return answer, blob

    def _download(self, client: Any, path: str, deadline: float) -> bytes:
        """The answer's array file (a path the backend named in its answer), read whole up to :data:`MAX_ANSWER_BYTES`;
        TimeoutError past ``deadline``."""
        with client.stream("GET", f"/gradio_api/file={path}",
                           timeout=max(0.001, min(READ_TIMEOUT_S, deadline - time.monotonic()))) as r:
            if r.status_code != 200:
                raise self._status_error(r.status_code)
            if int(r.headers.get("content-length") or 0) > MAX_ANSWER_BYTES:
                raise _too_large()
            chunks: list[bytes] = []
            for chunk in _bounded(r.iter_bytes(), MAX_ANSWER_BYTES):
                if time.monotonic() > deadline:
                    raise TimeoutError
                chunks.append(chunk)
        return b"".join(chunks)

    def _stream(self, client: Any, path: str, deadline: float, timeout: float) -> tuple[str, str]:
        """The ``complete`` event's text answer from a job's event stream, and the path of its array file ("" without
        one); TimeoutError past ``deadline``."""
        event = ""
        with client.stream("GET", path, timeout=max(0.001, min(READ_TIMEOUT_S, timeout))) as r:
            if r.status_code != 200:
                raise self._status_error(r.status_code)
            for line in _lines(_bounded(r.iter_bytes(), MAX_ANSWER_BYTES)):
                if time.monotonic() > deadline:
                    raise TimeoutError
                if line.startswith("event:"):
                    event = line[6:].strip()
                elif line.startswith("data:") and event in ("complete", "error"):
                    data = json.loads(line[5:])
                    if event == "error":
                        raise BackendUnavailable(f"The model backend failed the request ({str(data)[:200] or 'no detail'}).",
                                                 "Rerun the page in a few seconds.")
                    if not (isinstance(data, list) and data and isinstance(data[0], str)):
                        raise BackendMismatch("The model backend answered in a form this front end does not read.",
                                              "Run the same version of the app on both.")
                    return data[0], _blob_path(data[1] if len(data) > 1 else None)
        raise BackendUnavailable(f"The model backend at {self.url} stopped answering: the request ended without an "
                                 "answer.", "It may be restarting: rerun the page in a few seconds.")

    # what the pages use
    def info(self, fresh: bool = False, status: bool = False) -> BackendInfo:
        """The backend's versions and device (reused for :data:`INFO_TTL_S`); BackendMismatch for another version.

        ``status``: for a status line (the sidebar asks on every page run of every student), so why the backend did
        not answer is reused for :data:`INFO_TTL_S` too. A call's version check asks again: the backend may be back."""
        cached = self._info
        if cached is not None and not fresh and time.monotonic() - cached[0] < INFO_TTL_S:
            return cached[1]
        if not status:
            return self._ask_and_keep()
        # A status ask: one at a time, so thirty sidebars waiting on a backend that does not accept connections send
        # one probe, not thirty; the others wait for it (their page slot lent) and read what it found.
        asked_at = time.monotonic()

        def usable(kept: tuple[float, Any] | None) -> bool:  # recent, and for ``fresh`` come after this ask began
            return kept is not None and (not fresh or kept[0] >= asked_at) and time.monotonic() - kept[0] < INFO_TTL_S

        with self._status_lock:
            cached, failed = self._info, self._info_failed
            if usable(cached):
                return cached[1]
            if usable(failed):
                raise copy.copy(failed[1])  # a copy: re-raising one object grows its traceback
            return self._ask_and_keep()

    def wait_ready(self, timeout: float, cancelled: Callable[[], bool] | None = None, every: float = 1.0) -> bool:
        """Wait until the backend answers (its info, asked afresh every ``every`` seconds) while it is starting
        (:class:`BackendStarting`), for at most ``timeout`` seconds or until ``cancelled()``. Whether it answers; any
        other failure ends the wait at once (False: the next call says what it is)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.info(fresh=True)
                return True
            except BackendStarting:
                pass
            except BackendError:
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0 or (cancelled is not None and cancelled()):
                return False
            time.sleep(min(every, remaining))

    def _ask_and_keep(self) -> BackendInfo:
        """Ask, and keep the answer or why there was none, with the time it came (a slow failing ask does not replace
        an answer that came after it started)."""
        asked_at = time.monotonic()
        try:
            got = self._ask_info()
        except BackendError as err:
            with self._lock:
                if self._info is None or self._info[0] < asked_at:
                    self._info_failed = (time.monotonic(), copy.copy(err))  # no traceback: it would hold the page's frames
            raise
        with self._lock:
            self._info, self._info_failed = (time.monotonic(), got), None
        return got

    def _ask_info(self) -> BackendInfo:
        raw, _ = self._submit("/info", (), CONNECT_TIMEOUT_S)
        try:
            data = json.loads(raw)
            got = BackendInfo(url=self.url, **{k: data[k] for k in BackendInfo.__dataclass_fields__ if k != "url" and k in data})
            got = dataclasses.replace(got, entries=tuple(got.entries))
        except (ValueError, KeyError, TypeError):
            raise BackendMismatch("The model backend's info is not in a form this front end reads.",
                                  "Run the same version of the app on both.") from None
        if (got.app, got.wire) != (app_version(), wire.WIRE_VERSION):
            raise BackendMismatch(f"The model backend runs version {got.app} (wire {got.wire}); this front end runs "
                                  f"{app_version()} (wire {wire.WIRE_VERSION}).", "Update one so both run the same version.")
        return got

    def request_text(self, module: str, name: str, args: tuple[Any, ...]) -> str:
        """The JSON text a call is sent as; BackendRefused if it is over :data:`MAX_REQUEST_CHARS` (nothing is sent)."""
        text = json.dumps({"v": [app_version(), wire.WIRE_VERSION], "module": module, "name": name,
                           "args": wire.encode(list(args))}, separators=(",", ":"), allow_nan=False)
        if len(text) > MAX_REQUEST_CHARS:
            raise BackendRefused(f"This request is {len(text):,} characters; the model backend takes at most "
                                 f"{MAX_REQUEST_CHARS:,}.", "Use a shorter input.")
        return text

    def call(self, fn: Any, *args: Any, batched: bool | None = None) -> Any:
        """``fn(*args)`` on the backend: one of the model process's allow-list (:data:`services.routing.ROUTED`) or the
        backend's own (catalog checks). Errors ``fn`` raised come back as themselves (our ``core.errors`` classes).

        ``batched``: whether attention goes through the batching endpoint; by default when its texts are short
        (:data:`BATCH_MAX_CHARS`), the benches force either way."""
        from services.routing import served

        where = served(fn)
        if where is None:
            raise ModelProcessFailed(f"{getattr(fn, '__qualname__', fn)!r} is not a function the model backend serves.")
        text = self.request_text(*where, args)  # before anything goes out
        self.info()  # the version check (cached)
        if batched is None:
            batched = sum(len(a) for a in args[1:3] if isinstance(a, str)) <= BATCH_MAX_CHARS
        api = "/attention" if batched and where == ("models.attention", "extract_attention") else "/call"
        self.sent_chars += len(text)
        answer, blob = self._submit(api, (text,), self.timeouts.get(where[1], DEFAULT_TIMEOUT_S))
        try:
            envelope = json.loads(answer)
        except ValueError:
            raise BackendMismatch("The model backend's answer is not JSON.", "Run the same version of the app on both.") from None
        if "error" in envelope:
            from services.routing import unpack_error

            raise unpack_error(tuple(wire.decode(envelope["error"]))) from None
        return wire.decode(envelope.get("ok"), blob)


def _too_large() -> BackendRefused:
    return BackendRefused(f"The model backend's answer is over {MAX_ANSWER_BYTES:,} bytes: not read.",
                          "Use a shorter input or a smaller model; check that BFE_BACKEND names this app's backend.")


def _bounded(chunks: Iterable[bytes], limit: int) -> Iterator[bytes]:
    """``chunks`` as they come, :class:`BackendRefused` once more than ``limit`` bytes have come."""
    total = 0
    for chunk in chunks:
        total += len(chunk)
        if total > limit:
            raise _too_large()
        yield chunk


def _lines(chunks: Iterable[bytes]) -> Iterator[str]:
    """An event stream's lines from its bytes (httpx's ``iter_lines`` reads from an unbounded ``iter_text``; this
    reads from :func:`_bounded`). Linear in the bytes: a line's pieces are joined once, when it ends."""
    pending: list[bytes] = []
    for chunk in chunks:
        parts = chunk.split(b"\n")
        if len(parts) == 1:
            pending.append(chunk)
            continue
        pending.append(parts[0])
        yield b"".join(pending).rstrip(b"\r").decode()
        for part in parts[1:-1]:
            yield part.rstrip(b"\r").decode()
        pending = [parts[-1]]
    if rest := b"".join(pending):
        yield rest.rstrip(b"\r").decode()


def _blob_path(output: Any) -> str:
    """The server path of an answer's array file from Gradio's file output (``{"path": ..., "url": ...}``; None: no
    file), or ""; BackendMismatch for anything else. Only the path is used: the file is fetched from this backend."""
    if output is None:
        return ""
    path = output.get("path") if isinstance(output, dict) else None
    if not (isinstance(path, str) and path.endswith(".npyblob") and ".." not in path and len(path) < 1000):
        raise BackendMismatch("The model backend answered in a form this front end does not read.",
                              "Run the same version of the app on both.")
    return path


_default: Backend | None = None
_default_lock = threading.Lock()


def default() -> Backend:
    """This process's backend (``BFE_BACKEND``, ``BFE_BACKEND_TOKEN``); remade when the settings change."""
    global _default
    from core.settings import get_settings

    settings = get_settings()
    with _default_lock:
        if _default is None or (_default.url, _default.token) != (settings.backend, settings.backend_token):
            _default = Backend(settings.backend, settings.backend_token)
        return _default
