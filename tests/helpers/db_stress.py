"""Several *processes* writing to one results database at once: the probe behind the tests and the bench.

Threads share one engine and one Python lock-step; real deployments run several worker processes
(a Procfile host's workers, the classroom replicas), each with its own connections. :func:`run`
starts ``processes`` processes that meet at a barrier before each round, so all of them create the
database (a fresh SQLite file, an empty PostgreSQL schema) and then write at the same moment; in
every round every process adds a *different* result citing one brand-new source: all of them must
succeed, the source created once. It returns what was attempted, stored and refused, and the latencies.

Used by ``tests/analysis/results_db/test_abuse.py`` and ``bench/concurrent_writers.py``.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from dataclasses import dataclass, field
from typing import Any


@dataclass
class StressReport:
    """What the writers did: counts, refusals by message, and latency of each add in seconds."""

    processes: int
    rounds: int
    attempted: int = 0
    stored: int = 0
    refused: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    setup_seconds: list[float] = field(default_factory=list)

    def quantile(self, q: float) -> float:
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))]

    def summary(self) -> str:
        return (f"{self.processes} processes × {self.rounds} rounds: attempted {self.attempted}, stored {self.stored}, "
                f"refused {sum(self.refused.values())}, errors {len(self.errors)}; latency p50 {self.quantile(0.5) * 1e3:.0f} ms, "
                f"p95 {self.quantile(0.95) * 1e3:.0f} ms; slowest first start {max(self.setup_seconds, default=0) * 1e3:.0f} ms")


def _worker(url: str, index: int, rounds: int, barrier: Any, out: Any, same: bool = False) -> None:
    from analysis import results_db as db
    from core.errors import ExplorerError

    records: list[tuple[str, Any]] = []
    try:
        barrier.wait(timeout=120)
        start = time.perf_counter()
        try:
            db.ensure_seeded(db.get_engine(url))
            records.append(("setup", time.perf_counter() - start))
        except ExplorerError as err:
            records.append(("error", f"setup: {type(err).__name__}: {err}"))
        for r in range(rounds):
            barrier.wait(timeout=120)
            start = time.perf_counter()
            try:
                db.add_result(db.NewResult(model="Writer" if same else f"Writer {index}", task="RTE", metric="acc", split="dev",
                                           value=50 + r % 40 + (0 if same else index / 100),
                                           source=f"Concurrent round {r} et al. 2026, new source", table=f"round {r}"), db.get_engine(url))
                records.append(("stored", time.perf_counter() - start))
            except ExplorerError as err:
                records.append(("refused", f"{type(err).__name__}: {err.message}"))
            except Exception as err:
                records.append(("error", f"{type(err).__name__}: {err}"))
    except Exception as err:
        records.append(("error", f"{type(err).__name__}: {err}"))
    finally:
        out.put((index, records))


def run(url: str, processes: int = 8, rounds: int = 5, timeout_s: float = 240.0, same: bool = False) -> StressReport:
    """Start ``processes`` writer processes against ``url`` and collect what they did (bounded by ``timeout_s``).

    ``same=True`` makes every process add the *same* result each round: exactly one must be stored
    and the others refused as duplicates.
    """
    ctx = mp.get_context("spawn")  # fresh interpreters: no engine or connection inherited from this one
    barrier, out = ctx.Barrier(processes), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(url, i, rounds, barrier, out, same), daemon=True) for i in range(processes)]
    for p in procs:
        p.start()
    report = StressReport(processes, rounds)
    deadline = time.monotonic() + timeout_s
    for _ in procs:
        try:
            _, records = out.get(timeout=max(1.0, deadline - time.monotonic()))
        except Exception:
            report.errors.append("a writer process did not finish in time")
            break
        for kind, value in records:
            if kind == "setup":
                report.setup_seconds.append(value)
            elif kind == "stored":
                report.attempted += 1
                report.stored += 1
                report.latencies.append(value)
            elif kind == "refused":
                report.attempted += 1
                report.refused[value] = report.refused.get(value, 0) + 1
            else:
                report.errors.append(value)
    for p in procs:
        p.join(timeout=5)
        if p.is_alive():
            p.kill()
    return report
