"""The model backend's request handlers: the pages' model calls, served (by Gradio: :mod:`app.backend`) on the
machine with the GPU.

Why Gradio and not Ray Serve or a server of our own: Gradio's server, queue and client are what a ZeroGPU Space runs
(``@spaces.GPU`` works only for Gradio Spaces), its queue batches concurrent requests to one endpoint
(``batch=True``: a function gets the requests waiting at that moment as a list), and ``gradio_client`` already handles
its queue protocol, retries and streaming. The app already serves its Gradio API with the same pinned version. Ray Serve
would bring a cluster runtime for one process, and cannot run on ZeroGPU.

Three endpoints, all through Gradio's queue (``/gradio_api/...``):

- ``call``: one model function of the allow-list (:data:`services.routing.ROUTED`, the model process's: read-only
  functions of model ids and plain values). A request is JSON text (:mod:`services.backend.wire`, never pickle):
  ``{"v": [app version, wire version], "module": ..., "name": ..., "args": [...]}``. An answer (:data:`Answer`) is
  JSON text and the raw ``.npy`` bytes of its large arrays (:func:`services.backend.wire.dumps_split`), which the
  server hands out as a file.
- ``attention``: ``models.attention.extract_attention`` requests, batched: what waits in the queue when the model is
  free (up to :data:`MAX_BATCH`) goes through :func:`models.attention.extract_attention_batch`, one padded forward
  pass per model and bounded batch of tokens and memory. A class's sentences cost a few passes, not one each.
- ``info``: the app and wire versions, where the models run (device, GPU, memory), the model cache, the batch sizes
  seen; a front end reads it first and refuses a backend of another version.

Every request must carry the token (``BFE_BACKEND_TOKEN``) in the ``X-BFE-Token`` header, compared in constant time;
without a token the server listens on the loopback interface only. A request is bounded (:data:`MAX_REQUEST_CHARS`)
before it is parsed; the first argument of every call, the model id, is checked by the loader's rules (no paths), and
every argument against the served function's signature and annotations, before any work starts. ``python -m app.backend --port PORT`` starts it.
"""

from __future__ import annotations

import collections.abc
import dataclasses
import functools
import importlib
import inspect
import json
import logging
import threading
import time
import types
import typing
from collections import Counter
from collections.abc import Callable
from typing import Any

from core.errors import BackendMismatch, BackendRefused, ExplorerError
from core.version import app_version
from services.backend import wire
from services.routing import backend_serves, pack_error

log = logging.getLogger("bert_family_explorer")

TOKEN_ENV = "BFE_BACKEND_TOKEN"
#: The largest request the backend reads (JSON text): the longest input is a few thousand characters of text.
MAX_REQUEST_CHARS = 256 * 1024
#: The most attention requests one batch takes from the queue (each batch is cut further by tokens and memory).
MAX_BATCH = 32
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
_stats_lock = threading.Lock()
_batch_sizes: Counter[int] = Counter()
_calls: Counter[str] = Counter()


def allowed(module: str, name: str) -> bool:
    """Whether ``module.name`` is a function the backend serves (:func:`services.routing.backend_serves`)."""
    return backend_serves(module, name)


def _function(request: Any) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The allow-listed function and arguments ``request`` names, checked before anything is imported or loaded."""
    if not isinstance(request, dict) or set(request) != {"v", "module", "name", "args"}:
        raise BackendRefused("The request is not a model call.")
    if request["v"] != [app_version(), wire.WIRE_VERSION]:
        raise BackendMismatch(f"The front end runs version {str(request['v'])[:40]}; this backend runs "
                              f"{[app_version(), wire.WIRE_VERSION]}.", "Update one so both run the same version.")
    module, name, args = request["module"], request["name"], request["args"]
    if not (isinstance(module, str) and isinstance(name, str) and allowed(module, name)):
        raise BackendRefused(f"{str(module)[:60]}.{str(name)[:60]} is not a function the backend serves.")
    args = wire.decode(args)  # only now: after the version check (another wire version may encode differently)
    if not isinstance(args, list | tuple) or len(args) > 12:
        raise BackendRefused("The call's arguments are not a short list.")
    fn = getattr(importlib.import_module(module), name)
    _check_arguments(fn, tuple(args))
    return fn, tuple(args)


#: The parameters of served functions that name a model (annotated ``Any``: in-process they may be a loaded model):
#: over the wire each is an id, checked by the loader's rules (no paths) before any work.
MODEL_PARAMETERS = frozenset({"model", "model_id", "generator", "discriminator", "bert", "xlnet"})


def _check_arguments(fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
    """BackendRefused unless ``args`` bind to ``fn``'s parameters and each is of its annotated type: a request from a
    front end of this version always is, so anything else is refused before the function runs (it would fail inside
    with whatever a wrong type raises there, after loading a model). Hand-written: the served functions take plain
    values, and a validation library would need a model of each signature that the annotations already are."""
    signature, hints = _signature(fn)
    try:
        bound = signature.bind(*args)
    except TypeError:
        raise BackendRefused(f"{fn.__name__} takes {_arity(signature)}; the request sent {len(args)}.") from None
    for param, value in bound.arguments.items():
        if param in MODEL_PARAMETERS:
            if not isinstance(value, str):
                raise BackendRefused(f"{fn.__name__}: {param} is not a model id (text).")
            from services.requests import model_id

            model_id(value)
            continue
        hint = hints.get(param)
        many = signature.parameters[param].kind is inspect.Parameter.VAR_POSITIONAL  # *args: each against the hint
        if hint is not None and not all(_fits(v, hint) for v in (value if many else (value,))):
            raise BackendRefused(f"{fn.__name__}: {param} is not {_named(hint)}.")


@functools.cache
def _signature(fn: Callable[..., Any]) -> tuple[inspect.Signature, dict[str, Any]]:
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # an annotation that names what only type checkers import: check the arguments' number only
        log.warning("backend: %s's annotations do not resolve; only its arguments' number is checked", fn.__name__)
        hints = {}
    return inspect.signature(fn), hints


def _arity(signature: inspect.Signature) -> str:
    params = [p for p in signature.parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    least = sum(p.default is p.empty for p in params)
    return f"{least} arguments" if least == len(params) else f"{least} to {len(params)} arguments"


def _fits(value: Any, hint: Any) -> bool:
    """Whether ``value`` (as the wire decodes it: lists for tuples) is of the annotated type ``hint``; a kind of hint
    not known here passes (the function checks it)."""
    origin, parts = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return True
    if hint is None or hint is type(None):
        return value is None
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, part) for part in parts)
    if origin is typing.Literal:
        return value in parts
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if origin in (list, tuple, collections.abc.Sequence, collections.abc.Iterable):
        if not isinstance(value, list | tuple):
            return False
        if origin is tuple and parts and parts[-1] is not Ellipsis:
            return len(value) == len(parts) and all(_fits(v, h) for v, h in zip(value, parts, strict=True))
        return not parts or all(_fits(v, parts[0]) for v in value)
    if origin in (dict, collections.abc.Mapping):
        return isinstance(value, dict) and (not parts or all(_fits(k, parts[0]) and _fits(v, parts[1]) for k, v in value.items()))
    return True


def _named(hint: Any) -> str:
    return "of the type " + (hint.__name__ if isinstance(hint, type) else str(hint).replace("typing.", ""))


#: What a handler answers: JSON text (``{"ok": ...}`` or ``{"error": ...}``) and the blob its array references point
#: into (empty when none: an error, a result without large arrays).
Answer = tuple[str, bytes]


def _answer(value: Any) -> Answer:
    blob = bytearray()
    return json.dumps({"ok": wire.encode(value, blob=blob)}, separators=(",", ":"), allow_nan=False), bytes(blob)


def _failure(err: BaseException) -> Answer:
    if not isinstance(err, ExplorerError):
        log.exception("backend: a call failed")
    module, name, args, attrs, text = pack_error(err)
    # only the attributes that travel (a list of paths would raise TypeError here, outside any handler's try)
    attrs = {k: v for k, v in attrs.items() if _sendable(v)}
    return json.dumps({"error": wire.encode([module, name, args, attrs, text])}, separators=(",", ":"), allow_nan=False), b""


def _sendable(value: Any) -> bool:
    try:
        wire.encode(value)
    except TypeError:
        return False
    return True


def _parse(text: Any) -> Any:
    """A request's JSON text as a value (bounded first); BackendRefused for anything else."""
    if not isinstance(text, str) or len(text) > MAX_REQUEST_CHARS:
        raise BackendRefused(f"A request over {MAX_REQUEST_CHARS:,} characters is refused.")
    try:
        raw = json.loads(text)
    except (ValueError, RecursionError):
        raise BackendRefused("The request is not JSON.") from None
    if not isinstance(raw, dict):
        raise BackendRefused("The request is not a model call.")
    return raw  # its arguments are decoded by _function, once the versions and the function are checked


def call(text: str) -> Answer:
    """Serve one request (the ``call`` endpoint): JSON text in, an :data:`Answer` out."""
    try:
        return _run(*_function(_parse(text)))
    except BaseException as err:  # carried back to the caller as itself; never ends the server
        return _failure(err)


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> Answer:
    """A checked call, counted, its :data:`Answer` (errors: :func:`_failure`)."""
    try:
        with _stats_lock:
            _calls[fn.__name__] += 1
        return _answer(fn(*args))
    except BaseException as err:
        return _failure(err)


def attention_batch(texts: list[str]) -> list[Answer]:
    """Serve the requests waiting on the ``attention`` endpoint together: one padded pass per model and bounded batch
    (:func:`models.attention.extract_attention_batch`). Any other call in the batch runs alone, as by :func:`call`."""
    from models.attention import extract_attention, extract_attention_batch

    answers: list[Answer | None] = [None] * len(texts)
    groups: dict[str, list[tuple[int, tuple[str, str | None, int | None]]]] = {}
    for i, text in enumerate(texts):
        try:
            fn, args = _function(_parse(text))
            if fn is not extract_attention or not 2 <= len(args) <= 4:
                answers[i] = _run(fn, args)  # checked once, above
                continue
            text_a, pair, max_tokens = (*args[1:], None, None)[:3]  # their types checked by _function
            groups.setdefault(args[0], []).append((i, (text_a, pair, max_tokens)))
        except BaseException as err:
            answers[i] = _failure(err)
    with _stats_lock:
        _batch_sizes[len(texts)] += 1
        if groups:  # not a zero count for a batch refused whole
            _calls["extract_attention"] += sum(len(g) for g in groups.values())
    for model, items in groups.items():
        try:
            results = extract_attention_batch(model, [item for _, item in items])
        except BaseException as err:  # the model did not load: every request for it gets the error
            results = [err] * len(items)
        for (i, _), result in zip(items, results, strict=True):
            answers[i] = _failure(result) if isinstance(result, BaseException) else _answer(result)
    return [a if a is not None else _failure(BackendRefused("Not served.")) for a in answers]


def info() -> str:
    """The backend's versions, device, model cache and the batch sizes it has served (JSON text)."""
    from models.device import describe_device
    from models.loader import default_cache

    device = describe_device()
    cache = default_cache().info()
    with _stats_lock:
        batches = dict(sorted(_batch_sizes.items()))
        calls = dict(_calls)
    return json.dumps({"app": app_version(), "wire": wire.WIRE_VERSION, "device": device.label(), "kind": device.kind,
                       "gpu": device.name if device.kind != "cpu" else "", "memory_bytes": device.memory_bytes,
                       "cache_bytes": cache.total_bytes, "cache_budget": cache.budget_bytes,
                       "models_loaded": len(cache.entries), "batch_sizes": batches, "calls": calls,
                       "entries": [dataclasses.asdict(e) for e in cache.entries], "evictions": cache.evictions,
                       "started": _STARTED})


_STARTED = time.time()


def preload(model_ids: list[str] | None) -> None:
    """Load ``model_ids`` (default: the bundled model) with attention, before the first request; a model that does
    not load is logged and skipped (the request that needs it gets the error)."""
    from core import registry
    from models.loader import load

    for model_id in model_ids if model_ids is not None else [registry.bundled_id()]:
        try:
            load(model_id, attentions=True)
        except ExplorerError as err:
            log.warning("not preloaded: %s: %s", model_id, err)
