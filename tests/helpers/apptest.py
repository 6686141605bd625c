"""Streamlit's ``AppTest`` with the costs a real server pays once paid once per test process.

A Streamlit server scans the installed packages for components once, at start-up, and compiles each page script
once (its ``ScriptCache`` lives as long as the server). ``AppTest`` builds both anew for every instance: the
component scan parses the metadata of every installed distribution (about 300 here) and the page scripts are read,
rewritten for "magic" and compiled on every run. The state crawl opens a new ``AppTest`` for every state it tries,
so on this machine a crawl spent about a quarter of its time there (py-spy, ``bench/results/suite-durations.txt``).

:func:`install` makes ``AppTest`` behave like the server in both respects; what a page does is unchanged. The
compiled scripts are keyed by path, size and modification time, so a script a test writes or rewrites is compiled
again.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, ClassVar

_installed = False


class _SharedScriptCache:
    """One bytecode cache for every ``AppTest`` run of this process (Streamlit's own ``ScriptCache`` per run)."""

    _lock: ClassVar[threading.Lock] = threading.Lock()
    _cache: ClassVar[dict[tuple[str, int, int], Any]] = {}

    def __init__(self) -> None:
        from streamlit.runtime.scriptrunner.script_cache import ScriptCache

        self._compiler = ScriptCache()

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()

    def get_bytecode(self, script_path: str) -> Any:
        path = os.path.abspath(script_path)
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        with self._lock:
            code = self._cache.get(key)
        if code is None:
            code = self._compiler.get_bytecode(path)
            with self._lock:
                self._cache[key] = code
        return code


def install() -> None:
    """Patch ``AppTest`` (idempotent): one component scan and one script cache per process."""
    global _installed
    if _installed:
        return
    from streamlit.components.v2 import manifest_scanner
    from streamlit.testing.v1 import app_test

    scan = manifest_scanner.scan_component_manifests
    once = functools.cache(lambda: tuple(scan()))
    manifest_scanner.scan_component_manifests = lambda max_workers=None: list(once())
    app_test.ScriptCache = _SharedScriptCache
    _installed = True
