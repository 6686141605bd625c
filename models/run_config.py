"""What the labs' run configurations check alike, without torch: a run's name (it becomes the folder
``trained/<run>`` and a model id), whole-number settings within their bounds, and reading a stored config back."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

from core.errors import InvalidConfig

#: A run's name: letters, digits, '.', '_' and '-', at most MAX_NAME_CHARS, starting with a letter or digit.
MAX_NAME_CHARS = 60
RUN_NAME = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_NAME_CHARS - 1}}}$")
C = TypeVar("C")


def check_run_name(name: str) -> None:
    """Raises InvalidConfig unless ``name`` can be the folder ``trained/<name>``."""
    if not RUN_NAME.match(name or ""):
        raise InvalidConfig(f"{str(name)[:60]!r} is not a usable run name (it becomes the folder trained/<run>).",
                            "Use letters, digits, '.', '_' and '-' (at most 60), starting with a letter or digit; no '+'.")


def check_whole_numbers(config: Any, limits: Mapping[str, tuple[int, int]]) -> None:
    """Raises InvalidConfig for the first field of ``limits`` that is not a whole number within its bounds."""
    for name, (lo, hi) in limits.items():
        value = getattr(config, name)
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise InvalidConfig(f"{name} must be a whole number from {lo:,} to {hi:,}, not {value!r}.")


def from_stored(cls: type[C], stored: Mapping[str, Any]) -> C:
    """A config dataclass from its stored JSON (which may carry extra keys, such as the lab's preset or kind)."""
    known = {f.name for f in fields(cls)}
    return cls(**{k: v for k, v in stored.items() if k in known})
