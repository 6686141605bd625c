"""Checking a request's values before any work starts: each helper takes one value as a caller sent it (a widget's
value, a JSON field, an MCP argument) and returns it as the use case needs it, or raises the library's error with a
message that names the field and says what it takes.

JSON and Gradio hand over whatever a client sends: ``None`` for an empty number box, a list for a dropdown, NaN, a
bool where a number belongs. These helpers are the one place where such values are turned away, so that every
front end refuses them the same way, by name.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from typing import Any

from core.errors import InvalidConfig, InvalidData, InvalidText


def whole(name: str, value: Any, lo: int, hi: int) -> int:
    """A whole number in ``[lo, hi]`` (ints, and floats without a fraction); :class:`InvalidConfig` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidConfig(f"{name} must be a whole number, not {str(value)[:30]!r}.")
    if not lo <= value <= hi:
        raise InvalidConfig(f"{name} must be between {lo:,} and {hi:,}, not {value:,.0f}."[:200])
    return int(value)


def bounded(name: str, value: Any, bounds: Mapping[str, tuple[int, int]]) -> int:
    """A whole number within ``bounds[name]``: a use case's table of the numbers its request takes (``BOUNDS``), the
    same table its page's widgets, its links and its Gradio tab are bounded by."""
    low, high = bounds[name]
    return whole(name, value, low, high)


def number(name: str, value: Any, lo: float, hi: float) -> float:
    """A finite number in ``[lo, hi]``; :class:`InvalidConfig` naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidConfig(f"{name} must be a finite number, not {str(value)[:30]!r}.")
    if not lo <= value <= hi:
        raise InvalidConfig(f"{name} must be between {lo:g} and {hi:g}, not {value:g}.")
    return float(value)


def flag(name: str, value: Any) -> bool:
    """A true/false value (a bool, or 0/1); :class:`InvalidConfig` naming ``name``."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    raise InvalidConfig(f"{name} must be true or false, not {str(value)[:30]!r}.")


def choice(name: str, value: Any, options: Iterable[str]) -> str:
    """One of ``options`` (strings); :class:`InvalidConfig` listing them."""
    options = list(options)
    if not isinstance(value, str) or value not in options:
        raise InvalidConfig(f"{name} must be one of {', '.join(options)}, not {str(value)[:30]!r}.")
    return value


def text(name: str, value: Any, max_chars: int, *, empty_ok: bool = False, example: str = "") -> str:
    """A text of at most ``max_chars`` characters (stripped), not empty unless ``empty_ok``; :class:`InvalidText`."""
    if value is None and empty_ok:
        return ""
    if not isinstance(value, str):
        raise InvalidText(f"{name} must be text, not {type(value).__name__}.")
    value = value.strip()
    if not value and not empty_ok:
        raise InvalidText(f"{name} is empty.", f"For example: {example}" if example else "")
    if len(value) > max_chars:
        raise InvalidText(f"{name} is {len(value):,} characters long; at most {max_chars:,} are taken.", "Shorten it.")
    return value


def texts(value: Any, max_texts: int, max_chars: int, example: str = "") -> list[str]:
    """Texts, one per line of a string (or a list of strings); blank lines dropped; at least one, at most
    ``max_texts`` of at most ``max_chars`` characters each; :class:`InvalidText`."""
    if isinstance(value, str):
        value = value.splitlines()
    if not isinstance(value, list) or not all(isinstance(t, str) for t in value):
        raise InvalidText("Give the texts as one string, one text per line.")
    lines = [t.strip() for t in value if t.strip()]
    if not lines:
        raise InvalidText("No text given.", f"Write one sentence per line, e.g. '{example}'." if example else "")
    if len(lines) > max_texts:
        raise InvalidText(f"At most {max_texts} texts at once, not {len(lines):,}.")
    if (longest := max(len(t) for t in lines)) > max_chars:
        raise InvalidText(f"A text may be at most {max_chars:,} characters (one has {longest:,}).")
    return lines


#: The longest model id a picker takes (a catalog id, a Hub id or a folder name).
MAX_MODEL_ID_CHARS = 200


def model_id(value: Any, name: str = "model") -> str:
    """A model id as the pickers take it (catalog id, Hub id or folder name; at most :data:`MAX_MODEL_ID_CHARS`), stripped and
    checked as the loader checks it (no path tricks), so that a bad id is refused before any work starts.
    :class:`InvalidConfig`, or the loader's :class:`~core.errors.InvalidModelId`."""
    from models.locate import validate_model_id

    if not isinstance(value, str) or not value.strip() or len(value) > MAX_MODEL_ID_CHARS:
        raise InvalidConfig(f"{str(value)[:40]!r} is not a {name} id.", "For example: bert-base-uncased")
    return validate_model_id(value)


def numbers(name: str, value: Any, max_count: int = 100_000) -> list[float]:
    """Numbers separated by commas, spaces, semicolons or new lines (or a list of numbers); :class:`InvalidData`."""
    if isinstance(value, list):
        items = value
    elif isinstance(value, str):
        if len(value) > 40 * max_count:
            raise InvalidData(f"{name} is {len(value):,} characters long: more than {max_count:,} numbers.")
        items = [t for t in re.split(r"[\s,;]+", value) if t]
    else:
        raise InvalidData(f"{name} must be numbers separated by commas, not {type(value).__name__}.")
    if len(items) > max_count:
        raise InvalidData(f"{name} holds {len(items):,} numbers; at most {max_count:,} are taken.")
    if any(isinstance(t, bool) for t in items):
        raise InvalidData(f"{name} holds true/false where a number belongs.")
    try:
        return [float(t) for t in items]
    except (TypeError, ValueError, OverflowError):
        raise InvalidData(f"{name} holds something that is not a number.", "Write numbers like 1e6, 2.5e7.") from None


def names(value: Any, limit: int = 200) -> list[str] | None:
    """Comma-separated names (or a list), or None (all) for an empty field; at most ``limit`` of them."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str | list):
        raise InvalidConfig(f"Names must be text separated by commas, not {type(value).__name__}.")
    items = value if isinstance(value, list) else value.split(",")
    return [str(t).strip()[:200] for t in items if str(t).strip()][:limit]
