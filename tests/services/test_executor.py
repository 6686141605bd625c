"""One route for a model call (services/executor.py): chosen once from the settings, the same for every call, and what
each route does with a function it does not route. The routes themselves run in tests/services/test_runtime.py (the
model process) and tests/services/test_backend.py (a model backend)."""

from __future__ import annotations

import pytest

from services import executor as ex
from services.routing import ROUTED


def _route(monkeypatch: pytest.MonkeyPatch, backend: str = "", model_process: str = "1") -> ex.Executor:
    monkeypatch.setenv("BFE_BACKEND", backend)
    monkeypatch.setenv("BFE_MODEL_PROCESS", model_process)
    return ex.executor()


def test_the_route_comes_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _route(monkeypatch).kind == ex.MODEL_PROCESS
    assert _route(monkeypatch, model_process="0").kind == ex.IN_PROCESS
    assert _route(monkeypatch, backend="http://127.0.0.1:9", model_process="0").kind == ex.BACKEND  # the backend wins
    assert _route(monkeypatch, model_process="maybe").kind == ex.IN_PROCESS  # unreadable: here (the page says why)
    assert ex.EXECUTORS[ex.BACKEND]().remote and ex.EXECUTORS[ex.MODEL_PROCESS]().remote and not ex.EXECUTORS[ex.IN_PROCESS]().remote


def test_only_the_allowed_model_functions_leave_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib

    routed = importlib.import_module("models.attention").extract_attention
    assert "extract_attention" in ROUTED["models.attention"]

    def here(x: int) -> int:
        return x + 1

    for kind in (ex.BACKEND, ex.MODEL_PROCESS):
        route = ex.EXECUTORS[kind]()
        assert route.routes(routed) and not route.routes(here)
        assert route.call(here, 1) == 2  # not routed: it runs here under every route, nothing is asked of the others
    assert not ex.EXECUTORS[ex.IN_PROCESS]().routes(routed)
    assert ex.EXECUTORS[ex.MODEL_PROCESS]().on_model_folder(here, 41) == 42  # the model process shares this folder


def test_in_this_process_the_cache_is_this_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    from models.cache import default_cache

    route = _route(monkeypatch, model_process="0")
    info = route.cache_info()
    assert info == default_cache().info()
    route.free()
    assert route.cache_info().entries == ()


def test_a_backend_that_does_not_answer_says_so_from_every_route_call(monkeypatch: pytest.MonkeyPatch) -> None:
    from core.errors import BackendStarting
    from models.loader import can_locate
    from services.backend import client
    from tests.helpers.servers import free_port

    monkeypatch.setattr(client, "_default", None)
    route = _route(monkeypatch, backend=f"http://127.0.0.1:{free_port()}")
    with pytest.raises(BackendStarting):  # nothing listens: it may be starting (a page waits for it: app.ui.calls)
        route.on_model_folder(can_locate, "bert-base-uncased")
    with pytest.raises(BackendStarting):
        route.cache_info()
    route.free()  # a backend's cache is not a page's to free: nothing is asked
    assert not client.default().wait_ready(0.3, every=0.1)


def test_each_route_is_its_own_implementation_of_one_protocol(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three classes, one protocol: each implements what differs (the remote call, the cache, the status) itself, so no
    method asks which route it is; equal by kind, and the settings choose the class."""
    import inspect

    assert set(ex.EXECUTORS) == {ex.IN_PROCESS, ex.MODEL_PROCESS, ex.BACKEND}
    for kind, cls in ex.EXECUTORS.items():
        assert issubclass(cls, ex.Executor) and cls.kind == kind and cls() == cls(), kind
        assert all(name in vars(cls) for name in ("cache_info", "status")), kind  # its own, not a switch in the base
        for source in (inspect.getsource(cls), inspect.getsource(ex.Executor)):  # its methods and those it inherits
            assert ".kind ==" not in source and ".kind !=" not in source, kind
    assert ex.InProcess() != ex.ModelProcess() and len({ex.Backend(), ex.Backend()}) == 1
    assert ex.EXECUTORS[ex.MODEL_PROCESS]._remote_call is not ex.EXECUTORS[ex.BACKEND]._remote_call
    assert type(_route(monkeypatch, backend="http://127.0.0.1:9")) is ex.Backend
