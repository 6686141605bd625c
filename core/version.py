"""The app's version, as ``pyproject.toml`` states it: a front end and a model backend compare theirs before talking."""

from __future__ import annotations

import tomllib
from functools import lru_cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@lru_cache(maxsize=1)
def app_version() -> str:
    """``project.version`` from ``pyproject.toml`` beside the code (``unknown`` where the file is missing)."""
    try:
        return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return "unknown"
