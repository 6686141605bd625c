"""A headless Streamlit client over Streamlit's own websocket protocol (no browser), for load benches and tests.

It speaks what the browser speaks: it opens ``/_stcore/stream``, sends ``BackMsg.rerun_script``
with a ``ClientState`` (page, query string, widget states) and reads ``ForwardMsg`` until
``script_finished``. Widgets are found by their key (Streamlit's element id ends in ``-<key>``),
and a widget change sends that widget's new value as the browser does (number inputs as
``double_value``, select boxes as the shown option's text, multiselects as a list of them).
Only 127.0.0.1/localhost are allowed as targets.

A student session: :meth:`StreamlitSession.open` then :meth:`run` for each action; each returns a
:class:`RunResult` with the seconds from sending the rerun to ``script_finished``. A fragment with ``run_every``
(the server's ``auto_rerun`` message) is rerun by :meth:`StreamlitSession.auto_rerun`, as the browser's timer does,
and a page the server switched to (``st.switch_page``, the ``navigation`` message) becomes the session's page.
"""

from __future__ import annotations

import asyncio
import time
import urllib.request
from dataclasses import dataclass, field
from urllib.parse import urlencode, urlparse

from streamlit.proto.BackMsg_pb2 import BackMsg
from streamlit.proto.ForwardMsg_pb2 import ForwardMsg

LOCAL_HOSTS = ("127.0.0.1", "localhost")
#: A widget value meaning "click": a button's (or form submit button's) trigger.
CLICK = object()
RUN_TIMEOUT_S = 300.0


class ClientError(Exception):
    """The session could not do what was asked (no such widget, a closed socket, a timeout)."""


@dataclass
class RunResult:
    seconds: float
    status: str  # ScriptFinishedStatus name, or "timeout"/"closed"
    errors: list[str] = field(default_factory=list)  # exceptions and error alerts the page showed

    @property
    def ok(self) -> bool:
        return self.status == "FINISHED_SUCCESSFULLY" and not self.errors


@dataclass
class _Widget:
    id: str
    kind: str
    options: list[str]
    fragment: str = ""  # the fragment it is drawn in ("" outside any)


class StreamlitSession:
    """One browser-like session against a Streamlit server on this machine."""

    def __init__(self, base_url: str) -> None:
        host = urlparse(base_url).hostname
        if host not in LOCAL_HOSTS:
            raise ClientError(f"refusing to send traffic to {host!r}: benches talk to 127.0.0.1 only")
        self.base_url = base_url.rstrip("/")
        self.ws = None
        self.cookie = ""
        self.widgets: dict[str, _Widget] = {}
        self.page = ""
        self.query = ""
        self.session_id = ""
        self.texts: list[str] = []  # markdown and alert texts the last run showed
        self.query_string = ""  # the page's URL query after the last run (pages keep their state there)
        self.auto: dict[str, float] = {}  # fragment id -> its run_every (seconds), as the server asked
        self.pages: dict[str, str] = {}  # page script hash -> url path

    async def open(self) -> None:
        """GET the page first (a proxy's sticky cookie comes with it), then open the websocket."""
        import websockets

        def get_cookie() -> str:
            with urllib.request.urlopen(self.base_url + "/", timeout=30) as r:
                return "; ".join(c.split(";", 1)[0] for c in r.headers.get_all("Set-Cookie") or [])

        self.cookie = await asyncio.to_thread(get_cookie)
        url = self.base_url.replace("http://", "ws://", 1) + "/_stcore/stream"
        headers = {"Origin": self.base_url}
        if self.cookie:
            headers["Cookie"] = self.cookie
        self.ws = await websockets.connect(url, subprotocols=["streamlit"], additional_headers=headers,
                                           max_size=64 * 2**20, open_timeout=30, ping_interval=None)

    async def close(self) -> None:
        if self.ws is not None:
            await self.ws.close()

    async def run(self, page: str | None = None, query: dict[str, str] | None = None,
                  widgets: dict[str, object] | None = None) -> RunResult:
        """Rerun on ``page`` (default: the current one) with ``widgets`` (key -> new value) changed."""
        if page is not None and page != self.page:
            self.page, self.widgets = page, {}
            self.query = ""  # as the browser's page links do: another page starts from its own address
        if query is not None:
            self.query = urlencode(query)
        msg = BackMsg()
        state = msg.rerun_script
        state.query_string = self.query
        state.page_name = self.page
        for key, value in (widgets or {}).items():
            w = self.widgets.get(key)
            if w is None:
                raise ClientError(f"no widget with key {key!r} on page {self.page or 'home'!r}")
            if w.fragment:  # as the browser does: a widget inside a fragment reruns that fragment only
                state.fragment_id = w.fragment
            ws = state.widget_states.widgets.add()
            ws.id = w.id
            if value is CLICK:
                ws.trigger_value = True
            elif isinstance(value, bool):
                ws.bool_value = value
            elif isinstance(value, (int, float)):
                ws.double_value = float(value)
            elif isinstance(value, (list, tuple)):
                ws.string_array_value.data.extend(str(v) for v in value)
            else:
                ws.string_value = str(value)
        self.texts = []
        t0 = time.perf_counter()
        await self.ws.send(msg.SerializeToString())
        return await self._read_until_finished(t0)

    async def auto_rerun(self) -> RunResult | None:
        """Rerun the page's auto-rerunning fragments once, as the browser's timer does (None: there are none)."""
        if not self.auto:
            return None
        result = None
        for fragment in list(self.auto):
            msg = BackMsg()
            state = msg.rerun_script
            state.query_string = self.query_string
            state.page_name = self.page
            state.fragment_id = fragment
            state.is_auto_rerun = True
            t0 = time.perf_counter()
            await self.ws.send(msg.SerializeToString())
            result = await self._read_until_finished(t0)
        return result

    def options(self, key: str) -> list[str]:
        """The options a select box or multiselect shows (as their text), from the last run."""
        if key not in self.widgets:
            raise ClientError(f"no widget with key {key!r} on page {self.page or 'home'!r}")
        return self.widgets[key].options

    async def _read_until_finished(self, t0: float) -> RunResult:
        errors: list[str] = []
        deadline = t0 + RUN_TIMEOUT_S
        while True:
            try:
                raw = await asyncio.wait_for(self.ws.recv(), timeout=max(0.1, deadline - time.perf_counter()))
            except TimeoutError:
                return RunResult(time.perf_counter() - t0, "timeout", errors)
            except Exception as err:  # the socket closed
                return RunResult(time.perf_counter() - t0, "closed", [*errors, f"{type(err).__name__}: {err}"])
            fwd = ForwardMsg()
            fwd.ParseFromString(raw)
            kind = fwd.WhichOneof("type")
            if kind == "new_session":
                self.session_id = fwd.new_session.initialize.session_id
            elif kind == "delta":
                self._note_element(fwd, errors)
            elif kind == "page_info_changed":
                self.query_string = fwd.page_info_changed.query_string
                self.query = self.query_string
            elif kind == "auto_rerun":
                self.auto[fwd.auto_rerun.fragment_id] = fwd.auto_rerun.interval
            elif kind == "stop_auto_rerun":
                self.auto.clear()
            elif kind == "navigation":  # the page this run is on (st.switch_page on the server moves it)
                self.pages.update({p.page_script_hash: p.url_pathname for p in fwd.navigation.app_pages})
                page = self.pages.get(fwd.navigation.page_script_hash)
                if page is not None and page != self.page:
                    self.page, self.widgets = page, {}
            elif kind == "script_finished":
                status = ForwardMsg.ScriptFinishedStatus.Name(fwd.script_finished)
                if status == "FINISHED_EARLY_FOR_RERUN":
                    continue
                if status == "FINISHED_FRAGMENT_RUN_SUCCESSFULLY":
                    status = "FINISHED_SUCCESSFULLY"  # a fragment's rerun finished: for the caller, the run did
                return RunResult(time.perf_counter() - t0, status, errors)

    def _note_element(self, fwd: ForwardMsg, errors: list[str]) -> None:
        delta = fwd.delta
        if delta.WhichOneof("type") != "new_element":
            return
        el = delta.new_element
        kind = el.WhichOneof("type")
        if kind == "exception":
            errors.append(f"exception: {el.exception.type}: {el.exception.message[:200]}")
            return
        if kind == "alert" and el.alert.format == el.alert.ERROR:
            errors.append(f"error alert: {el.alert.body[:200]}")
            return
        if kind in ("markdown", "alert"):
            self.texts.append(getattr(el, kind).body)
        proto = getattr(el, kind, None) if kind else None
        wid = getattr(proto, "id", "") if proto is not None else ""
        if wid.startswith("$$ID-") and "-" in wid[5:]:
            key = wid.split("-", 2)[2]
            options = list(getattr(proto, "options", []) or [])
            self.widgets[key] = _Widget(wid, kind, [getattr(o, "label", o) for o in options], delta.fragment_id)
