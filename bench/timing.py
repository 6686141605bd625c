"""Shared timing helper for the bench scripts."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable


def timed(fn: Callable[[], object], runs: int = 7) -> float:
    """Median seconds of ``runs`` calls of ``fn``, after one warm-up call."""
    fn()
    out = []
    for _ in range(runs):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return statistics.median(out)
