"""URL state: widget values kept in the page's address, so a shared link restores the page; the address itself,
and whether the viewer is on this machine.

A page calls :func:`restore_url_state` before its widgets and :func:`save_url_state` at its end (and before
any ``st.stop()``); :func:`warn_ignored` says which values of a link were invalid.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

#: The most characters a text box whose value travels in the page's link may take: past about this a link (and a
#: reload) can exceed a server's 64 KB header limit. A box's bound is the smaller of this and its use case's.
MAX_LINK_TEXT_CHARS = 20_000


def _parse(raw: str, default: Any) -> Any:
    """A query-parameter string as the type of ``default``; ValueError when it is not one."""
    if isinstance(default, bool):
        if raw not in ("0", "1", "true", "false"):
            raise ValueError(raw)
        return raw in ("1", "true")
    if isinstance(default, int):
        return int(raw)
    if isinstance(default, float):
        value = float(raw)
        if value != value or value in (float("inf"), float("-inf")):
            raise ValueError(raw)
        return value
    if isinstance(default, list):
        return [type(default[0])(x) if default else x for x in raw.split(",") if x] if raw else []
    return raw


def _format(value: Any) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    return str(value)


def restore_url_state(defaults: dict[str, Any], allowed: dict[str, Any] | None = None) -> list[str]:
    """Seed ``st.session_state`` for each widget key from the URL (else its default), before the widgets.

    ``allowed`` maps a key to its permitted values (a list, a ``(low, high)`` tuple for numbers, or a
    function that says whether a value is acceptable).
    A value in the URL that does not parse or is not allowed is ignored; its key is returned so the
    page can say so. Widgets must then be built with ``key=`` and no ``value=``.
    """
    allowed = allowed or {}
    ignored = []
    shadow = st.session_state.setdefault("_url_shadow", {})
    for key, default in defaults.items():
        if key in st.session_state:
            # Re-assigning marks the value as set by the app, so a widget that comes back after a run
            # that did not draw it (an early st.stop(), another page) shows it instead of its default.
            st.session_state[key] = st.session_state[key]
            continue
        value = default
        if key in shadow:
            # Streamlit forgets a widget's value when a run ends without drawing it (an early st.stop()):
            # the shadow copy, which is not a widget key, brings it back.
            st.session_state[key] = shadow[key]
            continue
        if key in st.query_params:
            try:
                value = _parse(st.query_params[key], default)
                rule = allowed.get(key)
                if isinstance(rule, tuple) and not rule[0] <= value <= rule[1]:
                    raise ValueError(value)
                if isinstance(rule, (list, dict)) and (set(value) - set(rule) if isinstance(value, list) else value not in rule):
                    raise ValueError(value)
                if callable(rule) and not rule(value):
                    raise ValueError(value)
            except (ValueError, TypeError):
                ignored.append(key)
                value = default
        st.session_state[key] = value
    return ignored


def save_url_state(defaults: dict[str, Any]) -> None:
    """Write the widgets' values that differ from their defaults into the URL, so a link restores the page.

    Call it at the end of the page and before any ``st.stop()``; it also keeps the shadow copy
    :func:`restore_url_state` uses.
    """
    shadow = st.session_state.setdefault("_url_shadow", {})
    for key, default in defaults.items():
        value = st.session_state.get(key, default)
        shadow[key] = value
        if value == default or value is None:  # None: a segmented control clicked off; "None" in a link would not restore
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != _format(value):
            st.query_params[key] = _format(value)


def warn_ignored(ignored: list[str], prefix: str) -> None:
    """Say which values of a shared link were invalid and reset (keys as returned by restore_url_state)."""
    if ignored:
        st.warning("Some values in this link were not valid and were reset: "
                   + ", ".join(k.removeprefix(prefix) for k in ignored) + ".", icon=":material/link_off:")


#: Tabs whose open tab is in the address (:func:`url_tabs`): their key and default (first) label. Streamlit keeps such a
#: parameter itself (``bind="query-params"``): it is changed through the widget's session state, never st.query_params.
URL_TABS: dict[str, str] = {}


def url_tabs(labels: list[str], key: str) -> Any:
    """``st.tabs`` whose open tab is kept in the address under ``key`` (a link, and a class following its teacher,
    open the same tab)."""
    URL_TABS[key] = labels[0]
    return st.tabs(labels, key=key, bind="query-params")


def context_url() -> str:
    """The address the browser shows for this page ("" where Streamlit cannot tell, as in AppTest)."""
    try:
        return st.context.url or ""
    except Exception:
        return ""


def local_viewer() -> bool:
    """Whether the browser reached the server as localhost: only then do pages show server paths.

    On a public Space or a classroom server, folder and database paths tell visitors nothing they
    can use and something they should not know; a teacher running the app on a laptop sees them.
    """
    try:
        host = (st.context.headers.get("Host") or "").rsplit(":", 1)[0].strip("[]").lower()
    except Exception:
        return True
    return host in ("", "localhost", "127.0.0.1", "::1")
