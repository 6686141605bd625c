"""The suite on several pytest-xdist workers: tests that need the whole machine run alone, and the lines a test
wants in the run's summary reach the summary from whichever worker ran it.

**The whole machine.** A test marked ``machine`` (the container build, replicas behind nginx, classroom-sized loads,
anything that measures time against the machine) must not share the cores with another test. Every test holds a
lock for its whole run (setup, call, teardown): an ordinary test a shared one, a ``machine`` test an exclusive one,
so a ``machine`` test waits until the other workers' running tests end, and they start nothing new until it ends.
A turnstile taken before either lock keeps a waiting ``machine`` test from being overtaken by the next ordinary
tests (the kernel promises no order among waiters). The locks are POSIX record locks (``lockf``), which belong to
the worker process: a child it forks (a server, a model process) does not inherit them and cannot keep one held
after its test. Outside xdist (``-n 0``, ``-p no:xdist``) this does nothing.

**Summary lines.** :data:`tests.helpers.SUMMARY` is filled by the crawl and the fuzzers inside a worker; the worker
moves each new line into its test report's ``user_properties``, which xdist sends to the controller, and the
controller prints them after the results (``conftest.pytest_terminal_summary``).
"""

from __future__ import annotations

import fcntl
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

#: The marker of a test that needs the whole machine.
MACHINE = "machine"
#: The key under which a summary line travels in a report's ``user_properties``.
SUMMARY_KEY = "bfe-summary"


def run_dir(run: str) -> Path:
    """The folder the workers and the controller of test run ``run`` (xdist's testrunuid) share."""
    return Path(tempfile.gettempdir()) / f"bfe-tests-{run}"


def _lock_dir() -> Path | None:
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run or not os.environ.get("PYTEST_XDIST_WORKER"):
        return None
    return run_dir(run)


def _take(path: Path, how: int) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.lockf(fd, how)
    return fd


@contextmanager
def hold(exclusive: bool) -> Iterator[None]:
    """Hold the machine for one test: alone if ``exclusive``, else beside the other ordinary tests."""
    where = _lock_dir()
    if where is None:
        yield
        return
    where.mkdir(exist_ok=True)
    gate = _take(where / "turnstile", fcntl.LOCK_EX)  # nobody queues ahead of a waiting machine test
    try:
        fd = _take(where / "machine", fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
    finally:
        os.close(gate)
    try:
        yield
    finally:
        os.close(fd)  # closing the descriptor releases its lock


#: Seconds each test took in a recent whole run (``bench/suite_durations.py --weights``); a test not listed counts
#: as :data:`UNLISTED`. Only an order: a stale or missing entry costs balance, never a result.
WEIGHTS = Path(__file__).resolve().parents[1] / "durations.json"
UNLISTED = 0.5
#: The marker of a test whose slow part started at collection (the container build: tests/helpers/container.py):
#: it is handed out once about this share of the run's weight has been, so that its part has had time to finish.
EARLY = "early_start"
EARLY_AFTER = 0.4


def _unit(item: Any) -> str:
    """What must run on one worker, in one stretch: an ``xdist_group``, else the module of a test that uses a
    module- or class-scoped fixture (a server, a browser: set up once, not once per stretch), else the test itself."""
    mark = item.get_closest_marker("xdist_group")
    if mark is not None:
        return "group:" + str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
    if any(d.scope in ("module", "class", "package") for ds in defs.values() for d in ds):
        return f"module:{item.nodeid.split('::')[0]}"
    return item.nodeid


def order(items: list[Any]) -> None:
    """Order ``items`` for the workers in place: the ``machine`` tests first (they run alone, so at the start, before
    any long test they would wait for), then the rest longest first, a unit (:func:`_unit`) at a time and its tests in
    their collected order; an :data:`EARLY` test once :data:`EARLY_AFTER` of the weight is handed out. Handed out one
    unit at a time (:class:`Units`), longest first is the classic rule that keeps the last worker from finishing long
    after the first. In a worker, the units are also written down for the controller's scheduler."""
    weights: dict[str, float] = json.loads(WEIGHTS.read_text()) if WEIGHTS.is_file() else {}
    units: dict[str, list[Any]] = {}
    for item in items:
        units.setdefault(_unit(item), []).append(item)

    def key(members: list[Any]) -> tuple[int, float]:
        machine = any(i.get_closest_marker(MACHINE) for i in members)
        return (0 if machine else 1, -sum(weights.get(i.nodeid, UNLISTED) for i in members))

    ordered = sorted(units.values(), key=key)
    early = [m for m in ordered if any(i.get_closest_marker(EARLY) for i in m)]
    if early:  # after EARLY_AFTER of the weight of the rest, in their place longest first
        rest = [m for m in ordered if m not in early]
        total, done, at = sum(weights.get(i.nodeid, UNLISTED) for m in rest for i in m), 0.0, len(rest)
        for k, members in enumerate(rest):
            if done >= EARLY_AFTER * total:
                at = k
                break
            done += sum(weights.get(i.nodeid, UNLISTED) for i in members)
        ordered = rest[:at] + early + rest[at:]
    items[:] = [i for members in ordered for i in members]
    where = _lock_dir()
    if where is not None:  # every worker collects the same items: each writes the same map, whole or not at all
        where.mkdir(exist_ok=True)
        partial = where / f"units.{os.getpid()}"
        partial.write_text(json.dumps({i.nodeid: unit for unit, members in units.items() for i in members}))
        partial.replace(where / "units.json")


def scheduler(config: Any, log: Any) -> Any:
    """xdist's scheduler for this suite (``conftest.pytest_xdist_make_scheduler``): :class:`Units`."""
    from xdist.scheduler import LoadScopeScheduling

    class Units(LoadScopeScheduling):
        """xdist's scope scheduling (a unit is sent whole to one worker, the next unit to whichever worker runs dry,
        in the collected order) with this suite's units (:func:`_unit`), read from what the workers wrote down.

        xdist's own ``--dist loadgroup`` marks a group by appending ``@group`` to each node id from its workers'
        ``pytest_collection_modifyitems``, by assigning ``item._nodeid``; pytest 9 keeps node ids elsewhere, so
        that assignment is lost and every test was handed out alone (seen here: a crawl's two tests on two workers).
        """

        _units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._units is None:
                path = Path(tempfile.gettempdir()) / f"bfe-tests-{config.option.testrunuid}" / "units.json"
                self._units = json.loads(path.read_text()) if path.is_file() else {}
            return self._units.get(nodeid, nodeid)

    config.option.loadscopereorder = False  # keep the order the workers collected (order(): longest first)
    return Units(config, log)
