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


def interleaved(*fns: Callable[[], object], runs: int = 9) -> list[float]:
    """Median seconds of each of ``fns``, run in turn ``runs`` times (after one warm-up call each),
    so that a reference and the measured code see the same load on a shared, noisy machine."""
    for fn in fns:
        fn()
    times: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for fn, out in zip(fns, times, strict=True):
            t0 = time.perf_counter()
            fn()
            out.append(time.perf_counter() - t0)
    return [statistics.median(t) for t in times]
