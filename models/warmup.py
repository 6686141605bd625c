"""Warm what the model pages need, in the background, when the server starts.

A cold Attention page costs the first visitor the torch and transformers imports and the bundled
model's load (its time on a 2-core machine: bench/results/README.md) before anything is drawn. :func:`start` does that
work once per process in a daemon thread, into the shared model cache, and returns at once: it
holds no lock that a page needs (the model cache's per-model lock is held only while the model
loads, exactly as a page's own load would hold it), so Home and every page that needs no model
draw as if it were not there. A page that needs the model while it warms calls :func:`wait` and
shows "getting the model ready"; a failure is kept and shown by the page that needs the model.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

log = logging.getLogger("bert_family_explorer")


class WarmupState(StrEnum):
    """Where a warm-up stands: not started (``idle``), the model process started but not yet answering
    (``starting``: :mod:`services.runtime`), loading (``running``), done (``ready``) or failed (``failed``). The value is
    what crosses the model process's wire."""

    IDLE = "idle"
    STARTING = "starting"
    RUNNING = "running"
    READY = "ready"
    FAILED = "failed"


@dataclass
class Warmup:
    """The state of one process's warm-up."""

    state: WarmupState = WarmupState.IDLE
    step: str = ""
    error: BaseException | None = None
    started: float = 0.0
    seconds: float = 0.0
    model_id: str = ""
    _done: threading.Event = field(default_factory=threading.Event, repr=False)

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the warm-up has finished (or failed); False on timeout. True when never started."""
        return self.state == WarmupState.IDLE or self._done.wait(timeout)

    @property
    def busy(self) -> bool:
        return self.state == WarmupState.RUNNING


def import_heavy() -> None:
    """Import torch and transformers, and the transformers modules the model pages use first."""
    import torch  # noqa: F401
    import transformers

    # transformers imports lazily: name the classes so their modules (the bulk of the cost) load now.
    for name in ("AutoModel", "AutoTokenizer", "PreTrainedTokenizerFast", "BertModel", "BertForMaskedLM"):
        getattr(transformers, name)


def default_steps(model_id: str) -> list[tuple[str, Callable[[], object]]]:
    """What the Attention page (the first model page a class opens) needs, in order."""

    def load() -> None:
        from models.attention import extract_attention
        from models.loader import load as load_model

        # attentions=True: the same cache key the Attention page asks for; one short run warms the kernels.
        extract_attention(load_model(model_id, attentions=True), "Warming up.")

    return [("importing torch and transformers", import_heavy), (f"loading {model_id}", load)]


_warmup = Warmup()
_lock = threading.Lock()


def current() -> Warmup:
    """This process's warm-up state."""
    return _warmup


POLITE_MAX_WAIT_S = 20.0


def _wait_until_quiet(max_wait: float = POLITE_MAX_WAIT_S) -> None:
    """Wait while pages are being drawn (the app's page slots say how many), at most ``max_wait``."""
    from models.gate import pages_active

    deadline = time.monotonic() + max_wait
    while pages_active() and time.monotonic() < deadline:
        time.sleep(0.05)


def start(steps: list[tuple[str, Callable[[], object]]] | None = None, model_id: str | None = None,
          in_foreground: int = 0) -> Warmup:
    """Start the warm-up unless it has started already (or ``BFE_WARMUP=0``); return once the first
    ``in_foreground`` steps are done (``python -m app.serve`` does the imports before the server
    listens), the rest running in a daemon thread that waits while pages are being drawn."""
    from core import registry
    from core.settings import get_settings

    with _lock:
        if _warmup.state != WarmupState.IDLE or not get_settings().warmup:
            return _warmup
        _warmup.model_id = model_id or registry.bundled_id()
        _warmup.state, _warmup.started = WarmupState.RUNNING, time.monotonic()
    plan = steps if steps is not None else default_steps(_warmup.model_id)
    if in_foreground and not _run(_warmup, plan[:in_foreground], last=False):
        return _warmup
    threading.Thread(target=_run, args=(_warmup, plan[in_foreground:]), name="bfe-warmup", daemon=True).start()
    return _warmup


def _run(w: Warmup, steps: list[tuple[str, Callable[[], object]]], last: bool = True) -> bool:
    """Run ``steps``; True if they all succeeded. ``last``: these end the warm-up (else only a failure does)."""
    try:
        for name, fn in steps:
            _wait_until_quiet()
            w.step = name
            fn()
        if not last:
            return True
        # Everything imported and loaded so far lives as long as the process: keep it out of the
        # collector's full passes (CPython's gc.freeze), so they scan the sessions' objects only.
        gc.collect()
        gc.freeze()
        w.state = WarmupState.READY
    except BaseException as err:  # kept for the page that needs the model; never lost
        w.error, w.state = err, WarmupState.FAILED
        log.warning("warm-up failed while %s: %s", w.step, err)
    if w.state != WarmupState.RUNNING or last:
        w.seconds = time.monotonic() - w.started
        w._done.set()
        if w.state == WarmupState.READY:
            log.info("warm-up ready in %.1f s", w.seconds)
            print(f"BFE warm-up ready in {w.seconds:.1f} s", flush=True)
    return w.state != WarmupState.FAILED


def reset() -> None:
    """Forget the warm-up (tests)."""
    global _warmup
    with _lock:
        _warmup = Warmup()
