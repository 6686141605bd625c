"""What travels between a front end and the model backend: JSON text, with arrays as ``.npy`` bytes.

Never pickle across the network: unpickling runs whatever the sender chose. Here every value is rebuilt from plain
JSON by this module's own rules, and the only classes rebuilt are dataclasses defined in the library's ``models`` and
``analysis`` packages (the model functions' results: ``AttentionResult``, ``FillResult``, ...), plus numpy arrays
read with ``allow_pickle=False`` (an object array is refused on both sides) and pandas frames rebuilt from columns.

A float32 array whose values are bfloat16 (a model run in bf16 on a GPU, its attention cast to float32) travels as
its upper 16 bits (``$bf``): the same values exactly, in half the bytes.

Why ``.npy`` and not safetensors: a result holds arrays of many dtypes beside strings and nested records, one at a
time; ``.npy`` is numpy's own self-describing format, one array per blob, with no code in it (numpy reads it with
``allow_pickle=False``).

Where the arrays go: small ones as base64 inside the JSON text (``{"$nd": "<base64>"}``). Given a ``blob``
(:func:`dumps_split`, what the backend answers with), an array of :data:`BLOB_MIN_BYTES` or more goes as raw ``.npy``
bytes appended to it, the text holding its place (``{"$nd": [offset, length]}``); the backend serves the blob as a
file of its answer, which the front end downloads as it is. Base64 in JSON made an attention call slower than the
local model process (encoding, escaping into Gradio's event stream, parsing and decoding megabytes of text: the
"Model backend" section of bench/results/README.md; now ``bench/results/backend-pages-cpu.txt``); raw bytes are
copied, not parsed.
"""

from __future__ import annotations

import base64
import dataclasses
import enum
import importlib
import io
import json
import math
from typing import Any

import numpy as np

from core.errors import BackendMismatch, BackendRefused

#: Bumped whenever the encoding changes; a front end and a backend that disagree refuse to talk (a clear message).
WIRE_VERSION = 3
#: The header that carries the shared token (HTTP header names are case-insensitive; ASGI hands them over lower-case).
TOKEN_HEADER = "x-bfe-token"
#: Arrays at least this large go into the blob when there is one (smaller ones are cheaper inline than as a reference).
BLOB_MIN_BYTES = 64 * 1024
#: Packages whose dataclasses and enums a message may name (the model functions' results live there).
RESULT_PACKAGES = ("models.", "analysis.")
#: The deepest nesting a message may have (a result is a handful of levels deep).
MAX_DEPTH = 24


def _name(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _result_class(name: Any) -> type:
    """The dataclass or enum ``module:qualname`` names, if it lives in :data:`RESULT_PACKAGES`; else BackendRefused."""
    if not isinstance(name, str) or name.count(":") != 1:
        raise BackendRefused("A message named no class.")
    module, qualname = name.split(":")
    parts = (*module.split("."), *qualname.split("."))
    if not module.startswith(RESULT_PACKAGES) or not all(p.isidentifier() and not p.startswith("_") for p in parts):
        raise BackendRefused(f"A message named a class outside the library's results: {name[:80]!r}.")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError):
        raise BackendMismatch(f"{name[:80]} is not known here.", "The front end and the backend run different versions "
                              "of the app: update one so both match.") from None
    if not (isinstance(obj, type) and (dataclasses.is_dataclass(obj) or issubclass(obj, enum.Enum))):
        raise BackendRefused(f"{name[:80]} is not a result class.")
    if not obj.__module__.startswith(RESULT_PACKAGES):  # reached through a module's import (models.attention:re.RegexFlag)
        raise BackendRefused(f"A message named a class outside the library's results: {name[:80]!r}.")
    return obj


def _array_bytes(a: np.ndarray, blob: bytearray | None) -> str | list[int]:
    """``a`` as ``.npy`` bytes: base64 text, or appended to ``blob`` (when given and ``a`` is large) as [offset, length]."""
    buf = io.BytesIO()
    # as it is (np.save writes any layout; ascontiguousarray would make a 0-d array 1-d); an object array raises ValueError
    np.save(buf, a, allow_pickle=False)
    data = buf.getbuffer()
    if blob is not None and len(data) >= BLOB_MIN_BYTES:
        blob += data
        return [len(blob) - len(data), len(data)]
    return base64.b64encode(data).decode("ascii")


def encode(value: Any, depth: int = 0, blob: bytearray | None = None) -> Any:
    """``value`` as plain JSON values (see the module's docstring), its large arrays appended to ``blob`` when one is
    given. Raises TypeError for what cannot travel."""
    if depth > MAX_DEPTH:
        raise TypeError("The value is nested too deeply to send.")
    if isinstance(value, enum.Enum):  # before str and int: a StrEnum or IntEnum is one, and would lose its class
        return {"$e": _name(type(value)), "v": encode(value.value, depth + 1, blob)}
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"$f": repr(value)}
    if isinstance(value, np.generic):
        return encode(value.item(), depth + 1, blob)
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:  # item by item, with its shape (tolist() would nest a 2-D array into lists)
            return {"$l": [encode(v, depth + 1, blob) for v in value.reshape(-1)], "shape": list(value.shape)}
        if value.dtype == np.float32 and value.size >= 1024:
            bits = np.ascontiguousarray(value).view(np.uint32)
            if not np.any(bits & 0xFFFF):  # bfloat16 values (a GPU's): their upper halves hold them exactly
                return {"$bf": _array_bytes((bits >> 16).astype(np.uint16), blob)}
        return {"$nd": _array_bytes(value, blob)}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {"$dc": _name(type(value)),
                "f": {f.name: encode(getattr(value, f.name), depth + 1, blob) for f in dataclasses.fields(value)}}
    if isinstance(value, tuple):
        return {"$t": [encode(v, depth + 1, blob) for v in value]}
    if isinstance(value, list):
        return [encode(v, depth + 1, blob) for v in value]
    if isinstance(value, dict):
        return {"$d": [[encode(k, depth + 1, blob), encode(v, depth + 1, blob)] for k, v in value.items()]}
    if isinstance(value, set | frozenset):
        return {"$s": [encode(v, depth + 1, blob) for v in value], "frozen": isinstance(value, frozenset)}
    if type(value).__name__ == "DataFrame" and type(value).__module__.startswith("pandas"):
        return {"$df": {"columns": [encode(c, depth + 1, blob) for c in value.columns],
                        "data": [encode(value[c].to_numpy(), depth + 1, blob) for c in value.columns],
                        "index": encode(value.index.to_numpy(), depth + 1, blob)}}
    raise TypeError(f"A {type(value).__name__} cannot be sent to or from the model backend.")


def decode(obj: Any, blob: bytes | None = None) -> Any:
    """The value :func:`encode` made ``obj`` (and ``blob``) from. Raises BackendRefused for a message it did not make
    (also one whose markers hold the wrong kind of value: ``{"$d": 5}``, an unhashable key, a record missing fields, a
    reference outside the blob)."""
    try:
        return _decode(obj, 0, memoryview(blob or b""))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as err:
        raise BackendRefused(f"A message held something this app does not send ({type(err).__name__}).") from None


def _decode(obj: Any, depth: int, blob: memoryview) -> Any:
    if depth > MAX_DEPTH:
        raise BackendRefused("A message is nested too deeply.")
    if obj is None or isinstance(obj, bool | int | float | str):
        return obj
    if isinstance(obj, list):
        return [_decode(v, depth + 1, blob) for v in obj]
    if not isinstance(obj, dict) or len(obj) > 2:
        raise BackendRefused("A message held something this app does not send.")
    if "$nd" in obj:
        data = obj["$nd"]
        if isinstance(data, list):  # [offset, length] in the blob
            if not (len(data) == 2 and all(type(n) is int and n >= 0 for n in data) and data[0] + data[1] <= len(blob)):
                raise BackendRefused("A message pointed outside its arrays.")
            data = blob[data[0]:data[0] + data[1]]
        else:
            data = base64.b64decode(data, validate=True)
        try:
            a = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, TypeError, OSError, MemoryError) as err:  # MemoryError: a header claiming terabytes
            raise BackendRefused(f"A message held an array that does not read: {str(err)[:120]}") from None
        return a
    if "$bf" in obj:
        halves = _decode({"$nd": obj["$bf"]}, depth + 1, blob)
        if halves.dtype != np.uint16:
            raise BackendRefused("A message held bfloat16 values that are not.")
        return (halves.astype(np.uint32) << 16).view(np.float32)
    if "$l" in obj:
        items = [_decode(v, depth + 1, blob) for v in obj["$l"]]
        out = np.empty(len(items), dtype=object)
        for i, item in enumerate(items):  # one by one: a slice assignment would spread list items over the array
            out[i] = item
        shape = obj.get("shape", [len(items)])
        if not (isinstance(shape, list) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in shape)):
            raise BackendRefused("A message held an array of no shape.")
        return out.reshape(shape)
    if "$t" in obj:
        return tuple(_decode(v, depth + 1, blob) for v in obj["$t"])
    if "$d" in obj:
        return {_key(_decode(k, depth + 1, blob)): _decode(v, depth + 1, blob) for k, v in obj["$d"]}
    if "$s" in obj:
        items = [_key(_decode(v, depth + 1, blob)) for v in obj["$s"]]
        return frozenset(items) if obj.get("frozen") else set(items)
    if "$f" in obj:
        if obj["$f"] not in ("nan", "inf", "-inf"):
            raise BackendRefused("A message held a number that is not one.")
        return float(obj["$f"])
    if "$e" in obj:
        return _result_class(obj["$e"])(_decode(obj.get("v"), depth + 1, blob))
    if "$dc" in obj:
        cls = _result_class(obj["$dc"])
        fields = obj.get("f")
        if not isinstance(fields, dict):
            raise BackendRefused("A message held a record without fields.")
        known = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= known:
            raise BackendMismatch(f"{obj['$dc'][:80]} has other fields here.", "The front end and the backend run "
                                  "different versions of the app: update one so both match.")
        return cls(**{k: _decode(v, depth + 1, blob) for k, v in fields.items()})
    if "$df" in obj:
        import pandas as pd

        frame = obj["$df"]
        columns = [_decode(c, depth + 1, blob) for c in frame["columns"]]
        data = [_decode(c, depth + 1, blob) for c in frame["data"]]
        return pd.DataFrame(dict(zip(columns, data, strict=True)), index=_decode(frame["index"], depth + 1, blob))
    raise BackendRefused("A message held something this app does not send.")


def _key(value: Any) -> Any:
    """A decoded dict key or set member: lists become tuples (hashable), arrays are refused."""
    if isinstance(value, list):
        return tuple(_key(v) for v in value)
    if isinstance(value, np.ndarray):
        raise BackendRefused("A message used an array as a key.")
    return value


def dumps(value: Any) -> str:
    """``value`` as JSON text (:func:`encode`)."""
    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False)


def dumps_split(value: Any) -> tuple[str, bytes]:
    """``value`` as JSON text and a blob of its large arrays' ``.npy`` bytes (empty when it has none)."""
    blob = bytearray()
    return json.dumps(encode(value, blob=blob), separators=(",", ":"), allow_nan=False), bytes(blob)


def loads(text: Any, max_chars: int | None = None) -> Any:
    """The value in JSON text made by :func:`dumps`; ``max_chars`` bounds the text before it is parsed."""
    if not isinstance(text, str):
        raise BackendRefused("A message was not text.")
    if max_chars is not None and len(text) > max_chars:
        raise BackendRefused(f"A message of {len(text):,} characters is over the limit of {max_chars:,}.")
    try:
        obj = json.loads(text)
    except (ValueError, RecursionError):
        raise BackendRefused("A message was not valid JSON.") from None
    return decode(obj)
