"""Presentation mode and the sidebar's status panel (compute device, models on this machine, model memory, the model queue)."""

from __future__ import annotations

import streamlit as st

from app.ui.caches import STATUS_ICONS, catalog_availability, device_label, model_cache

PRESENTATION_CSS = """
<style>
html, body, [data-testid="stAppViewContainer"] { font-size: 22px; }
[data-testid="stAppViewContainer"] { background: #ffffff; color: #000000; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { font-size: 1.15rem; line-height: 1.5; }
h1 { font-size: 3rem !important; } h2 { font-size: 2.3rem !important; } h3 { font-size: 1.8rem !important; }
a { color: #0040a0 !important; text-decoration: underline; }
[data-testid="stCaptionContainer"] { color: #222 !important; font-size: 1rem; }
</style>
"""


def _sync_presentation_url() -> None:
    if st.session_state.get("present"):
        st.query_params["present"] = "1"
    else:
        st.query_params.pop("present", None)


def presentation_mode() -> bool:
    """The sidebar's presentation toggle, kept in the URL (``?present=1``) so a shared link keeps it."""
    if "present" not in st.session_state:
        st.session_state["present"] = st.query_params.get("present") == "1"
    on = st.sidebar.toggle("Presentation mode", key="present", on_change=_sync_presentation_url,
                           help="Larger type and higher contrast for a projector.")
    if on:
        st.markdown(PRESENTATION_CSS, unsafe_allow_html=True)
    return on


def sidebar_status() -> None:
    """Compute device, which catalog models are available now, and what the model cache holds."""
    sb = st.sidebar
    sb.markdown("**Compute**")
    sb.caption(device_label())
    avail = catalog_availability()
    ready = [m for m, (s, _) in avail.items() if s == "ready"]
    loadable = [m for m, (s, _) in avail.items() if s != "catalog-only"]
    sb.markdown("**Models**")
    sb.caption(f"{len(ready)} of {len(loadable)} downloadable models are on this machine.")
    with sb.expander("Which ones"):
        for mid, (status, _) in avail.items():
            if status != "catalog-only":
                st.caption(f"{STATUS_ICONS[status]} {mid}")
    from models.gate import default_gate
    from services import runtime

    gate = default_gate().info()
    if runtime.enabled():
        rt = runtime.default(create=False)
        st_ = rt.status() if rt is not None else runtime.Status("down")
        sb.markdown("**Model memory**")
        sb.caption(f"{st_.cache_bytes / 2**20:,.0f} MB of {st_.cache_budget / 2**20:,.0f} MB budget, "
                   f"{st_.models_loaded} model(s) loaded in the model process" if st_.cache_budget else
                   "No model loaded yet (models run in a process of their own).")
        state = {"starting": "model process starting", "running": f"warming up ({st_.step})",
                 "ready": f"warmed up in {st_.seconds:.1f} s", "failed": "warm-up failed (see the model's page)",
                 "down": ""}.get(st_.state, "")
        if st_.restarts:
            state += f" · model process restarted {st_.restarts}×"
    else:
        from models import warmup

        info = model_cache().info()
        sb.markdown("**Model memory**")
        sb.caption(f"{info.total_bytes / 2**20:,.0f} MB of {info.budget_bytes / 2**20:,.0f} MB budget, "
                   f"{len(info.entries)} model(s) loaded")
        w = warmup.current()
        state = {"running": f"warming up ({w.step})", "ready": f"warmed up in {w.seconds:.1f} s",
                 "failed": "warm-up failed (see the model's page)"}.get(w.state, "")
    sb.caption(f"Model queue: {gate.running} running, {gate.waiting} waiting (at most {gate.limit} at once)"
               + (f" · {state}" if state else ""))
