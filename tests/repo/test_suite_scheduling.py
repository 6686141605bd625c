"""The suite's own machinery (tests/helpers/parallel.py, tests/helpers/container.py): where a test whose slow part
started at collection is handed out, and how that part is taken, fails, and is cleaned up when nobody takes it."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.helpers import container, parallel


class _Item:
    def __init__(self, nodeid: str, *markers: str) -> None:
        self.nodeid, self._markers, self._fixtureinfo = nodeid, set(markers), SimpleNamespace(name2fixturedefs={})

    def get_closest_marker(self, name: str):
        return object() if name in self._markers else None


def test_an_early_started_test_is_handed_out_after_a_share_of_the_run_and_machine_tests_still_come_first(tmp_path, monkeypatch) -> None:
    weights = {f"t{k}": 100 - k for k in range(10)} | {"early": 500, "machine": 1}
    monkeypatch.setattr(parallel, "WEIGHTS", tmp_path / "w.json")
    (tmp_path / "w.json").write_text(json.dumps(weights))
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    items = [_Item(f"t{k}") for k in range(10)] + [_Item("early", parallel.EARLY), _Item("machine", parallel.MACHINE)]
    parallel.order(items)
    order = [i.nodeid for i in items]
    assert order[0] == "machine"  # alone, first
    rest = [n for n in order[1:] if n != "early"]
    assert rest == [f"t{k}" for k in range(10)]  # longest first, as before
    before = sum(weights[n] for n in order[1:order.index("early")])
    total = sum(weights[n] for n in rest)
    # handed out once EARLY_AFTER of the others' weight is, not first for its own 500 s
    assert parallel.EARLY_AFTER * total <= before < parallel.EARLY_AFTER * total + 100


def _fake_build(where: Path, seconds: float, ok: bool) -> list[str]:
    body = (f"import json, time, pathlib; time.sleep({seconds}); w = pathlib.Path({str(where)!r}); "
            + ("(w / 'p').write_text(json.dumps(dict(image='img', seconds=1.5, size_bytes=7))); (w / 'p').replace(w / 'build.json')"
               if ok else "raise SystemExit('apt failed: no space left on device')"))
    return [sys.executable, "-c", body]


def test_a_build_started_at_collection_is_started_once_and_taken_when_done(tmp_path) -> None:
    where = tmp_path / "container"
    assert container.start_early(where, _fake_build(where, 1.0, ok=True))
    assert not container.start_early(where, _fake_build(where, 0, ok=True))  # the second worker's collection: not again
    assert not (where / "taken").is_file()
    built = container.take_early(where, timeout=60)
    assert built == container.Build("img", 1.5, 7) and (where / "taken").is_file()  # the test owns it now
    container.clean_early(where, images=())  # a taken build is not the run's to stop or remove
    assert (where / "build.json").is_file()


def test_a_failed_early_build_fails_its_test_with_the_builds_own_output(tmp_path) -> None:
    where = tmp_path / "container"
    container.start_early(where, _fake_build(where, 0.2, ok=False))
    with pytest.raises(RuntimeError, match="no space left on device"):
        container.take_early(where, timeout=60)


def test_an_early_build_nobody_took_is_stopped_at_the_end_of_the_run(tmp_path) -> None:
    where = tmp_path / "container"
    container.start_early(where, _fake_build(where, 600, ok=True))
    pid = int((where / "pid").read_text().split()[0])
    assert container._alive(pid)
    container.clean_early(where, images=())  # the run ended (-x, a crash) before the container test took it
    # (no podman here: the suite's own container test may be using the real image beside this test)
    assert not container._alive(pid)


def test_an_early_build_is_stopped_when_the_run_ends_while_its_test_waits(tmp_path) -> None:
    """Ctrl-C or a timeout while the container test waits: the test never took the image, so the run's end stops the build."""
    import threading

    where = tmp_path / "container"
    container.start_early(where, _fake_build(where, 600, ok=True))
    seen: list[BaseException] = []

    def wait() -> None:
        try:
            container.take_early(where, 120)
        except RuntimeError as err:
            seen.append(err)

    waiting = threading.Thread(target=wait, daemon=True)
    waiting.start()
    time.sleep(1)
    pid = int((where / "pid").read_text().split()[0])
    container.clean_early(where, images=())
    assert not container._alive(pid) and not (where / "taken").is_file()
    waiting.join(30)
    assert not waiting.is_alive() and "failed" in str(seen[0])  # the waiting test saw its build end without an image
