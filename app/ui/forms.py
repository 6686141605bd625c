"""What the two lab pages' forms share: a number input bounded by its field's limits, and the Start button that
queues the planned runs and says so."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st


def bounded_number(where: Any, label: str, key: str, bounds: tuple[float, float], **kwargs: Any) -> None:
    """A number input whose bounds are its field's (the use case's limits, the same the URL state is checked against)."""
    low, high = bounds
    where.number_input(label, low, high, key=key, **kwargs)


def start_runs(count: int, group: str, start: Callable[[], list[int]], show_key: str) -> None:
    """The Start button for ``count`` planned runs: ``start()`` queues them, the page then shows ``group``
    (``show_key``), a toast says where they went, and the page reruns to list them."""
    if not st.button(f"Start {count} run{'s' if count > 1 else ''}", type="primary", icon=":material/play_arrow:"):
        return
    ids = start()
    st.session_state[show_key] = group
    st.toast(f"Queued {len(ids)} run(s) as '{group}'. They train in the background: you can close this tab.",
             icon=":material/schedule:")
    st.rerun()
