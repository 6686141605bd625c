"""The class-at-once machinery: the bounded model queue (single-flight, give-up) and the background warm-up.

Speed itself is measured by the benches (bench/startup.py, bench/attention.py, bench/classroom.py);
these tests check the behaviour the numbers rest on, with slow fakes instead of models.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from streamlit.testing.v1 import AppTest

from core.errors import ModelUnavailable
from models import warmup
from models.gate import CallCancelled, ModelGate
from tests.helpers import ENTRY
from tests.helpers.servers import home_and_calculator_draw


class SlowModel:
    """Counts how many calls run at the same moment, and how many ran in all."""

    def __init__(self, seconds: float = 0.2) -> None:
        self.seconds, self.now, self.peak, self.calls = seconds, 0, 0, 0
        self._lock = threading.Lock()

    def __call__(self, x: int) -> int:
        with self._lock:
            self.now += 1
            self.calls += 1
            self.peak = max(self.peak, self.now)
        time.sleep(self.seconds)
        with self._lock:
            self.now -= 1
        return x * 2


def test_the_queue_bounds_concurrency_and_serves_everyone() -> None:
    gate, model = ModelGate(2), SlowModel(0.15)
    with ThreadPoolExecutor(12) as pool:
        results = list(pool.map(lambda i: gate.run(("m", i), lambda i=i: model(i)), range(12)))
    assert results == [2 * i for i in range(12)]
    assert model.peak == 2 and model.calls == 12
    info = gate.info()
    assert info.running == info.waiting == 0 and info.computed == 12


def test_identical_calls_in_flight_are_computed_once() -> None:
    gate, model = ModelGate(4), SlowModel(0.3)
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda _: gate.run(("same",), lambda: model(21)), range(10)))
    assert results == [42] * 10 and model.calls == 1
    assert gate.info().shared == 9
    # after it finished, the same call runs again (single-flight is not a cache)
    assert gate.run(("same",), lambda: model(21)) == 42 and model.calls == 2


def test_a_failure_reaches_every_caller_of_the_same_call() -> None:
    gate = ModelGate(1)

    def broken() -> None:
        time.sleep(0.2)
        raise ModelUnavailable("no weights")

    with ThreadPoolExecutor(3) as pool:
        futures = [pool.submit(gate.run, ("b",), broken) for _ in range(3)]
    for f in futures:
        with pytest.raises(ModelUnavailable, match="no weights"):
            f.result()
    assert gate.info().running == 0


def test_a_caller_that_leaves_gives_its_place_up() -> None:
    gate, model = ModelGate(1), SlowModel(0.6)
    gone = threading.Event()
    with ThreadPoolExecutor(3) as pool:
        busy = pool.submit(gate.run, ("a",), lambda: model(1))
        time.sleep(0.05)
        leaver = pool.submit(gate.run, ("b",), lambda: model(2), gone.is_set)
        time.sleep(0.05)
        assert gate.info().waiting == 1
        gone.set()  # its browser tab closed
        with pytest.raises(CallCancelled):
            leaver.result(timeout=2)
        assert gate.info().waiting == 0
        after = pool.submit(gate.run, ("c",), lambda: model(3))
        assert busy.result() == 2 and after.result() == 6
    assert model.calls == 2  # the leaver's call never ran


def test_followers_of_a_leader_that_left_run_the_call_themselves() -> None:
    gate, model = ModelGate(1), SlowModel(0.4)
    gone = threading.Event()
    with ThreadPoolExecutor(3) as pool:
        pool.submit(gate.run, ("busy",), lambda: model(0))
        time.sleep(0.05)
        leader = pool.submit(gate.run, ("x",), lambda: model(5), gone.is_set)
        time.sleep(0.05)
        follower = pool.submit(gate.run, ("x",), lambda: model(5))
        time.sleep(0.05)
        gone.set()
        with pytest.raises(CallCancelled):
            leader.result(timeout=2)
        assert follower.result(timeout=3) == 10


def test_warm_up_runs_in_the_background_and_reports_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_WARMUP", "1")
    release = threading.Event()
    t0 = time.perf_counter()
    w = warmup.start(steps=[("waiting", release.wait), ("failing", lambda: (_ for _ in ()).throw(ModelUnavailable("gone")))])
    assert time.perf_counter() - t0 < 0.5 and w.busy and w.step == "waiting"
    assert warmup.start() is w  # once per process
    assert not w.wait(timeout=0.2)
    release.set()
    assert w.wait(timeout=5) and w.state == "failed" and isinstance(w.error, ModelUnavailable)


def test_warm_up_off_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_WARMUP", "0")
    w = warmup.start(steps=[("never", lambda: pytest.fail("ran"))])
    assert w.state == "idle" and w.wait(timeout=0)


def test_home_draws_while_the_warm_up_is_slow(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm-up stuck for 30 s (holding the model's cache slot) does not hold up Home or the calculator."""
    monkeypatch.setenv("BFE_WARMUP", "1")
    release = threading.Event()
    w = warmup.start(steps=[("stuck", lambda: release.wait(30))])
    try:
        at = home_and_calculator_draw(ENTRY, within=15)
        assert w.busy
        assert any("warming up (stuck)" in c.value for c in at.sidebar.caption)
    finally:
        release.set()
        w.wait(5)


def test_the_attention_page_waits_for_the_warm_up_then_draws(monkeypatch: pytest.MonkeyPatch) -> None:
    from core import registry
    from models.loader import load

    monkeypatch.setenv("BFE_WARMUP", "1")
    bundled = registry.bundled_id()
    w = warmup.start(steps=[("loading", lambda: (time.sleep(1.0), load(bundled, attentions=True)))])
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.switch_page("views/attention.py").run()
    assert not at.exception and not at.error
    assert w.state == "ready" and len(at.get("plotly_chart")) == 1


def test_a_failed_warm_up_is_reported_on_the_page_that_needs_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BFE_WARMUP", "1")

    def broken() -> None:
        raise ModelUnavailable("the disk went away")

    w = warmup.start(steps=[("loading", broken)])
    assert w.wait(5) and w.state == "failed"
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.switch_page("views/attention.py").run()
    assert not at.exception
    assert any("the disk went away" in x.value and "trying again" in x.value for x in at.warning)
    assert len(at.get("plotly_chart")) == 1  # the page loaded the model itself


def test_page_slots_bound_the_runs_and_a_leaver_gives_up() -> None:
    from models.gate import Slots

    slots, model = Slots(3), SlowModel(0.15)

    def page(i: int) -> int:
        with slots.hold():
            return model(i)

    with ThreadPoolExecutor(10) as pool:
        assert list(pool.map(page, range(10))) == [2 * i for i in range(10)]
    assert model.peak == 3 and slots.busy == slots.waiting == 0
    one = Slots(1)
    gone = threading.Event()
    with ThreadPoolExecutor(2) as pool, one.hold():
        waiter = pool.submit(lambda: one.hold(gone.is_set).__enter__())
        time.sleep(0.15)
        assert one.waiting == 1
        gone.set()
        with pytest.raises(CallCancelled):
            waiter.result(timeout=2)
    assert one.waiting == 0 and one.busy == 0



def test_a_page_waiting_on_a_model_call_lends_its_slot_and_takes_one_back() -> None:
    """With one slot, a page that waits for its model call lets another page run meanwhile, and continues only once a
    slot is free again; a thread that holds no slot (a worker, a test) lends nothing. (Every wait here gives up when
    the test ends, so a regression fails instead of hanging.)"""
    from models.gate import Slots

    one, order, stop = Slots(1), [], threading.Event()
    lending, other_done, other_may_end = threading.Event(), threading.Event(), threading.Event()

    def long_call_page() -> None:
        with one.hold(stop.is_set):
            order.append("long: before")
            with one.lent(cancelled=stop.is_set):
                lending.set()
                assert other_done.wait(2)  # the other page ran while this one waited
                order.append("long: answer")
            order.append("long: after")  # only once the other page gave its slot back

    def light_page() -> None:
        assert lending.wait(2)
        with one.hold(stop.is_set):
            order.append("light")
            other_done.set()
            assert other_may_end.wait(2)

    with ThreadPoolExecutor(2) as pool:
        try:
            long, light = pool.submit(long_call_page), pool.submit(light_page)
            assert other_done.wait(2)
            time.sleep(0.1)
            assert order == ["long: before", "light", "long: answer"] and one.busy == 1 and one.waiting == 1
            other_may_end.set()
            long.result(timeout=2), light.result(timeout=2)
        finally:
            stop.set()
            other_may_end.set()
    assert order[-1] == "long: after" and one.busy == one.waiting == 0
    with one.lent():  # no slot held here: nothing to lend, nothing taken
        assert one.busy == 0
    assert one.busy == 0 and one._sem.acquire(blocking=False) and not one._sem.acquire(blocking=False)
    two = Slots(2)  # a thread holding two (nested) gives each back, lent-and-not-taken-back or not
    with two.hold(), two.hold():
        assert two.busy == 2
        with two.lent(take_back=False):
            assert two.busy == 1
    assert two.busy == 0 and two._sem.acquire(blocking=False) and two._sem.acquire(blocking=False)
    assert not two._sem.acquire(blocking=False)


def test_a_lender_that_may_hold_a_lock_goes_on_without_a_slot_and_nobody_waits_for_ever() -> None:
    """Inside a cached function Streamlit holds the call's per-key lock: the page lends its slot for the model call,
    another page takes the slot and waits on that lock. Taking a slot back there would wait for ever; without
    take_back the first page goes on, releases the lock, and both finish, the slot counted once. A lender whose page
    is closed while it waits to take a slot back goes on without one."""
    from models.gate import Slots

    one, key_lock, stop = Slots(1), threading.Lock(), threading.Event()
    lending, waiting_on_lock = threading.Event(), threading.Event()

    def first_page() -> None:  # a cache miss: computes under the key's lock
        with one.hold(stop.is_set), key_lock:
            with one.lent(take_back=False):
                lending.set()
                assert waiting_on_lock.wait(2)
            time.sleep(0.05)  # the rest of the cached function, without a slot

    def second_page() -> None:  # the same key: waits for the first page's value, holding the slot
        assert lending.wait(2)
        with one.hold(stop.is_set):
            waiting_on_lock.set()
            assert key_lock.acquire(timeout=3)
            key_lock.release()

    with ThreadPoolExecutor(2) as pool:
        try:
            for f in [pool.submit(first_page), pool.submit(second_page)]:
                f.result(timeout=5)
        finally:
            stop.set()
    assert one.busy == one.waiting == 0 and one._sem.acquire(blocking=False) and not one._sem.acquire(blocking=False)
    one._sem.release()

    gone, lent_now, holder_may_end = threading.Event(), threading.Event(), threading.Event()

    def closed_page() -> None:
        with one.hold(gone.is_set), one.lent(cancelled=gone.is_set):
            lent_now.set()
            assert holder_may_end.wait(2)

    with ThreadPoolExecutor(1) as pool:
        f = pool.submit(closed_page)
        try:
            assert lent_now.wait(2)
            with one.hold(gone.is_set):  # the slot the closed page lent: held until it gave up waiting
                gone.set()
                holder_may_end.set()
                f.result(timeout=2)
        finally:
            gone.set()
            holder_may_end.set()
    assert one.busy == one.waiting == 0 and one._sem.acquire(blocking=False) and not one._sem.acquire(blocking=False)


def test_a_page_lends_its_slot_without_taking_one_back_inside_a_cached_function(monkeypatch: pytest.MonkeyPatch) -> None:
    import contextlib

    import streamlit as st

    from app.ui import calls
    from services import models

    seen: list[bool] = []

    @contextlib.contextmanager
    def record(take_back: bool = True, cancelled=None):
        seen.append(take_back)
        yield

    monkeypatch.setattr(models, "page_slot_lent", record)

    @st.cache_data(show_spinner=False)
    def cached(x: int) -> int:
        with calls.slot_lent():
            return x

    cached.clear()
    with calls.slot_lent():
        pass
    assert cached(7) == 7 and seen == [True, False]


def test_settings_for_the_queue_and_warm_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.errors import InvalidSetting
    from core.settings import get_settings

    monkeypatch.setenv("BFE_MODEL_CONCURRENCY", "3")
    monkeypatch.setenv("BFE_PAGE_CONCURRENCY", "8")
    monkeypatch.setenv("BFE_WARMUP", "0")
    s = get_settings()
    assert (s.model_concurrency, s.page_concurrency, s.warmup) == (3, 8, False)
    for env, bad in (("BFE_MODEL_CONCURRENCY", "0"), ("BFE_PAGE_CONCURRENCY", "1e9"), ("BFE_WARMUP", "maybe")):
        monkeypatch.setenv(env, bad)
        with pytest.raises(InvalidSetting, match=env):
            get_settings()
        monkeypatch.delenv(env)


def test_a_closed_or_rerun_session_counts_as_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """app.ui reads Streamlit's own run state (no public accessor): checked against the installed Streamlit. A
    fragment's timer does not abandon the run (it runs after it), a fragment's own ``st.rerun`` and a page's do."""
    from types import SimpleNamespace

    from streamlit.runtime.scriptrunner_utils import script_run_context
    from streamlit.runtime.scriptrunner_utils.script_requests import RerunData, ScriptRequests

    from app.ui.calls import _run_abandoned

    requests = ScriptRequests()
    monkeypatch.setattr(script_run_context, "get_script_run_ctx", lambda suppress_warning=False: SimpleNamespace(script_requests=requests))
    assert not _run_abandoned()
    requests.request_rerun(RerunData(fragment_id="poll"))  # the class poll's timer fires while the page waits
    assert not _run_abandoned()
    requests.request_rerun(RerunData(fragment_id="poll", is_fragment_scoped_rerun=True))
    assert _run_abandoned()
    requests = ScriptRequests()
    monkeypatch.setattr(script_run_context, "get_script_run_ctx", lambda suppress_warning=False: SimpleNamespace(script_requests=requests))
    requests.request_rerun(RerunData(fragment_id="poll"))
    requests.request_rerun(RerunData())  # a click: the page reruns
    assert _run_abandoned()
    stopped = ScriptRequests()
    stopped.request_stop()
    monkeypatch.setattr(script_run_context, "get_script_run_ctx", lambda suppress_warning=False: SimpleNamespace(script_requests=stopped))
    assert _run_abandoned()


def test_the_load_client_talks_to_this_machine_only() -> None:
    from bench.st_client import ClientError, StreamlitSession

    for url in ("http://example.com:8501", "http://10.0.0.1:8501", "http://127.0.0.1.nip.io:8501"):
        with pytest.raises(ClientError, match=r"127\.0\.0\.1 only"):
            StreamlitSession(url)
    assert StreamlitSession("http://127.0.0.1:8501/").base_url == "http://127.0.0.1:8501"
