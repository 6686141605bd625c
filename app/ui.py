"""Shared UI helpers: friendly errors, the sidebar status panel, presentation mode.

The one place where library exceptions become messages (:func:`show_error`), and the one place
where Streamlit caches library objects (:func:`model_cache`). Nothing here imports torch.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from typing import Any

import streamlit as st

from core.errors import ExplorerError, InvalidCheckpoint, ModelUnavailable

log = logging.getLogger("bert_family_explorer")

# Material icons ship with Streamlit, so they render offline and in any browser font setup.
STATUS_ICONS = {"ready": ":material/check_circle:", "download": ":material/cloud_download:",
                "broken": ":material/warning:", "catalog-only": ":material/menu_book:"}
STATUS_LABELS = {
    "ready": "ready",
    "download": "downloads on first use",
    "broken": "local copy is broken",
    "catalog-only": "catalog only (no weights)",
}


def show_error(err: BaseException) -> None:
    """Show ``err`` as a friendly message: what went wrong, and how to fix it. Never a traceback."""
    if isinstance(err, ModelUnavailable) and not isinstance(err, InvalidCheckpoint):
        # A model not fetched yet is a normal state of an offline classroom machine, not a mistake.
        st.info(f"**{err.message}**" + (f"\n\n{err.hint}" if err.hint else ""), icon=":material/cloud_download:")
    elif isinstance(err, ExplorerError):
        st.error(f"**{err.message}**" + (f"\n\n{err.hint}" if err.hint else ""), icon=":material/error:")
    else:
        log.exception("unexpected error on a page", exc_info=err)
        st.error(f"**Something unexpected went wrong** ({type(err).__name__}). "
                 "The details are in the server log; try again, or pick another model or input.", icon=":material/error:")


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


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Run a block; any exception becomes a friendly message and the rest of the page still draws.

    Streamlit's own control flow (``st.stop``, ``st.rerun``) derives from BaseException and passes.
    """
    try:
        yield
    except Exception as err:
        show_error(err)


@st.cache_resource(show_spinner=False)
def model_cache():
    """The process-wide model cache (shared by every session; see ``models.loader.ModelCache``)."""
    from models.loader import default_cache

    return default_cache()


@st.cache_data(ttl=30, show_spinner=False)
def catalog_availability() -> dict[str, tuple[str, str]]:
    """catalog id -> (status, message), re-checked every 30 s (file checks only, no network)."""
    from core import registry
    from core.settings import get_settings
    from models.loader import availability

    settings = get_settings()
    return {c.id: (a.status, a.message) for c in registry.all_models() for a in [availability(c, settings)]}


@st.cache_data(ttl=300, show_spinner=False)
def device_label() -> str:
    from models.device import describe_device

    return describe_device().label()


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
    info = model_cache().info()
    sb.markdown("**Model memory**")
    sb.caption(f"{info.total_bytes / 2**20:,.0f} MB of {info.budget_bytes / 2**20:,.0f} MB budget, "
               f"{len(info.entries)} model(s) loaded")
    from models import warmup
    from models.gate import default_gate

    gate = default_gate().info()
    w = warmup.current()
    state = {"running": f"warming up ({w.step})", "ready": f"warmed up in {w.seconds:.1f} s",
             "failed": "warm-up failed (see the model's page)"}.get(w.state, "")
    sb.caption(f"Model queue: {gate.running} running, {gate.waiting} waiting (at most {gate.limit} at once)"
               + (f" · {state}" if state else ""))


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
        if value == default:
            if key in st.query_params:
                del st.query_params[key]
        elif st.query_params.get(key) != _format(value):
            st.query_params[key] = _format(value)


def download_buttons(df, name: str, key: str, markdown: str | None = None) -> None:
    """CSV and Markdown download buttons for a data frame (Markdown from ``analysis.calculator.to_markdown``)."""
    from analysis.calculator import to_markdown
    from analysis.safe_text import csv_bytes

    # Built when clicked, not on every rerun of the page (Streamlit calls a callable `data` on download).
    c1, c2 = st.columns(2)
    c1.download_button("Download CSV", lambda: csv_bytes(df, index=df.index.name is not None), f"{name}.csv", "text/csv",
                       key=f"{key}_csv", icon=":material/download:")
    c2.download_button("Download Markdown", lambda: (markdown or to_markdown(df)).encode(), f"{name}.md", "text/markdown",
                       key=f"{key}_md", icon=":material/download:")


def warn_ignored(ignored: list[str], prefix: str) -> None:
    """Say which values of a shared link were invalid and reset (keys as returned by restore_url_state)."""
    if ignored:
        st.warning("Some values in this link were not valid and were reset: "
                   + ", ".join(k.removeprefix(prefix) for k in ignored) + ".", icon=":material/link_off:")


def model_ready(model_id: str) -> bool:
    """Whether ``model_id`` can run now: on this machine, or downloadable because the Hub answers."""
    if model_id not in catalog_availability():  # another model: a folder here, or a Hub id
        from core.errors import ExplorerError
        from models.loader import is_online, locate

        try:
            locate(model_id, network=False)
            return True
        except ExplorerError:
            return "/" in model_id and is_online()
    status = catalog_availability()[model_id][0]
    if status == "download":
        from models.loader import is_online

        return is_online()
    return status == "ready"


def explain_missing(model_ids: list[str], what: str = "") -> list[str]:
    """Show one note for the models among ``model_ids`` that cannot run here, with the command that
    fetches them; return those missing (a page then skips them instead of showing an error each)."""
    missing = [m for m in dict.fromkeys(model_ids) if not model_ready(m)]
    if missing:
        st.info(f"{what or 'This needs'} {', '.join(f'**{m}**' for m in missing)}, not on this machine. On a machine with "
                f"internet run `python -m models.fetch {' '.join(missing)}` and copy the model folder here "
                "(see the Models page).", icon=":material/cloud_download:")
    return missing


# ----------------------------------------------------------------------------- model calls and warm-up

def _freeze(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    return value


def _run_abandoned() -> bool:
    """Whether this script run is no longer wanted: the session closed, or a newer run was asked for.

    Streamlit keeps that in the run's ``ScriptRequests`` state (no public accessor: read defensively,
    so a Streamlit that renames it only means a waiting call is not abandoned early).
    """
    from streamlit.runtime.scriptrunner_utils.script_run_context import get_script_run_ctx

    ctx = get_script_run_ctx(suppress_warning=True)
    requests = getattr(ctx, "script_requests", None)
    state = getattr(requests, "_state", None)
    return state is not None and getattr(state, "name", "CONTINUE") != "CONTINUE"


def model_call(fn: Any, *args: Any) -> Any:
    """``fn(*args)`` through the process's model queue (``BFE_MODEL_CONCURRENCY`` at once, identical
    calls in flight computed once). A session that leaves while waiting gives its place up.

    ``fn`` is a named function (its module, name and the arguments are the identity of the call).
    """
    from models.gate import default_gate

    return default_gate().run((fn.__module__, fn.__qualname__, _freeze(args)), lambda: fn(*args),
                              cancelled=_run_abandoned)


@contextmanager
def page_run() -> Iterator[None]:
    """Around a script run: wait for a page slot (``BFE_PAGE_CONCURRENCY`` runs at once, all sessions);
    a run abandoned while it waits ends at once. The background warm-up waits while slots are in use."""
    from models.gate import CallCancelled, page_slots

    try:
        slots = page_slots()
    except ExplorerError:  # a bad BFE_* setting: the page runs and shows the message itself
        yield
        return
    try:
        with slots.hold(cancelled=_run_abandoned):
            yield
    except CallCancelled:
        st.stop()


def start_warmup() -> None:
    """Start warming the model pages in the background (once per process; ``BFE_WARMUP=0`` turns it off)."""
    from models import warmup

    with suppress(ExplorerError):  # a bad BFE_* setting, which the page has already shown
        warmup.start()


def await_warmup(model_ids: list[str]) -> None:
    """Before a page runs ``model_ids``: if the server is still warming one of them, say so and wait.

    A warm-up that failed is reported here (the page then tries the load itself and shows its error).
    """
    from models import warmup

    w = warmup.current()
    if w.model_id not in model_ids:
        return
    if w.busy:
        with st.spinner(f"Getting the model ready: the server has just started ({w.step})…"):
            w.wait(timeout=300)
    if w.state == "failed" and w.error is not None:
        st.warning(f"Preparing **{w.model_id}** in the background failed ({type(w.error).__name__}: "
                   f"{str(w.error)[:300]}); trying again now.", icon=":material/warning:")


# ----------------------------------------------------------------------------- charts and the presentation pack

#: The plotly toolbar's camera: a PNG at twice the size, named after the app (SVG and the pack: below the chart).
PLOTLY_CONFIG = {"toImageButtonOptions": {"format": "png", "scale": 2, "filename": "bert-family-explorer"},
                 "displaylogo": False}


def context_url() -> str:
    """The address the browser shows for this page ("" where Streamlit cannot tell, as in AppTest)."""
    try:
        return st.context.url or ""
    except Exception:
        return ""


def _page_link() -> str:
    """This page's path and state (its URL query), to reopen what a pack item shows."""
    path = context_url()
    query = "&".join(f"{k}={v}" for k, v in st.query_params.items())
    return path.split("?", 1)[0] + (f"?{query}" if query else "")


def _add_to_pack(fig: Any, title: str, caption: str, sources: tuple[str, ...], link: str, table: Any = None) -> None:
    from analysis.export import MAX_ITEMS, MAX_PACK_BYTES, MAX_TABLE_ROWS, ExportTooLarge, PackItem, check_figure, pack_bytes

    pack = st.session_state.setdefault("pack", [])
    try:
        if table is not None:
            if len(table) > MAX_TABLE_ROWS:
                raise ExportTooLarge(f"This table has {len(table):,} rows; the pack takes tables of up to {MAX_TABLE_ROWS:,}.")
            records = tuple(table.reset_index().to_dict("records") if table.index.name else table.to_dict("records"))
            spec, size = None, 200 * len(records)
        else:
            spec = check_figure(fig.to_json())  # serialised only when added: a 512-token heatmap is megabytes
            records, size = None, len(spec)
    except ExportTooLarge as err:
        st.session_state["pack_refused"] = err.message
        return
    if len(pack) >= MAX_ITEMS or pack_bytes(pack) + size > MAX_PACK_BYTES:
        st.session_state["pack_full"] = True
        return
    pack.append(PackItem(title=title[:200], caption=caption[:2000], sources=tuple(sources), figure=spec, table=records,
                         link=link))
    st.session_state["pack_added"] = title


def table_to_pack(df: Any, key: str, *, title: str, caption: str = "", sources: tuple[str, ...] = (), where: Any = None) -> None:
    """An "Add table to pack" button: the table goes into the presentation pack with its caption and sources."""
    (where if where is not None else st).button(
        "Add table to pack", key=f"{key}_pack", icon=":material/playlist_add:", on_click=_add_to_pack,
        args=(None, title, caption, sources, _page_link(), df),
        help="Collect this table, with its caption and sources, for slides (see the Presentation pack page).")


def chart(fig: Any, key: str, *, title: str, caption: str = "", sources: tuple[str, ...] = (), where: Any = None,
          compact: bool = False) -> None:
    """A plotly chart with its exports: the toolbar's PNG, server-side PNG (2x) and SVG, and "Add to pack".

    ``title``, ``caption`` and ``sources`` travel with the chart into the presentation pack. Nothing is
    serialised or rendered until a button asks for it, so a chart costs its page nothing more.
    ``compact``: for small charts side by side, the buttons share the chart's width and the
    downloads go below them.
    """
    from analysis import export

    box = where if where is not None else st
    box.plotly_chart(fig, width="stretch", key=key, config=PLOTLY_CONFIG)
    if compact:
        c1, c2 = box.columns(2)
        c3 = box
    else:
        c1, c2, c3 = box.columns([1, 1, 3])
    c1.button("Add to pack" if not compact else "To pack", key=f"{key}_pack", icon=":material/playlist_add:",
              on_click=_add_to_pack, args=(fig, title, caption, sources, _page_link()),
              help="Collect this chart, with its caption and sources, for slides (see the Presentation pack page).")
    if export.chromium_path() is None:
        c3.caption("PNG/SVG downloads need Chromium on the server; the chart's camera icon saves a PNG.")
    elif c2.button("PNG / SVG", key=f"{key}_render", icon=":material/image:", help="Render this chart as PNG (2x) and SVG"):
        with friendly_errors(), st.spinner("Rendering…"):
            png, svg = export.to_png(fig), export.to_svg(fig)
            d1, d2 = c3.columns([1, 2] if not compact else [1, 1])
            d1.download_button("PNG", png, f"{key}.png", "image/png", key=f"{key}_png", icon=":material/download:",
                               on_click="ignore")
            d2.download_button("SVG", svg, f"{key}.svg", "image/svg+xml", key=f"{key}_svg", icon=":material/download:",
                               on_click="ignore")


def pack_notice() -> None:
    """Say once that a chart went into the pack (or that the pack is full)."""
    if title := st.session_state.pop("pack_added", None):
        st.toast(f"Added to the presentation pack: {title}", icon=":material/playlist_add_check:")
    if refused := st.session_state.pop("pack_refused", None):
        st.warning(f"Not added to the pack: {refused}", icon=":material/warning:")
    if st.session_state.pop("pack_full", False):
        st.warning("The presentation pack is full (100 items or 50 MB of charts): remove some on its page.",
                   icon=":material/warning:")


# ----------------------------------------------------------------------------- any checkpoint: "another model…"

#: The last option of every model picker: a Hub id or a folder under BFE_MODEL_DIR, typed in.
OTHER = "(another model)"


def valid_model_id(value: Any) -> bool:
    """For URL state: empty, or a model id the loader would accept (no path tricks, at most 200 characters)."""
    from core.errors import InvalidModelId
    from models.loader import validate_model_id

    if value == "":
        return True
    try:
        return isinstance(value, str) and len(value) <= 200 and bool(validate_model_id(value))
    except InvalidModelId:
        return False


@st.cache_data(ttl=5, max_entries=16, show_spinner=False)
def trained_here(task: str | None = None) -> list[str]:
    """``trained/<run>`` checkpoints of the pre-training lab (with ``task``'s head), newest first (re-read every 5 s)."""
    from models.lab import trained_models

    return trained_models(task)


@st.cache_data(ttl=5, max_entries=256, show_spinner=False)
def _trained_label(mid: str) -> str:
    """A checkpoint trained here, with its objective and size from its run record (read once per 5 s, not per option
    on every rerun)."""
    from models.lab import run_info

    cfg = run_info(mid).get("config", {})
    what = f"{cfg.get('objective', '?')}, {cfg.get('layers', '?')}×{cfg.get('hidden', '?')}" if cfg else "its run record is missing"
    return f"{mid.split('/', 1)[1]} · trained here ({what})"


def picker_values(models: list[str]) -> Any:
    """The URL rule of a :func:`model_picker` key: its catalog models, :data:`OTHER`, or a checkpoint trained here."""
    allowed = {*models, OTHER}
    return lambda v: isinstance(v, str) and (v in allowed or (v.startswith("trained/") and valid_model_id(v)))


def model_label(mid: str) -> str:
    """A catalog model with its availability, for pickers."""
    if mid == OTHER:
        return "another model… (a Hub id or your own folder)"
    if mid.startswith("trained/"):
        return _trained_label(mid)
    status = catalog_availability().get(mid, ("download", ""))[0]
    return f"{mid} · {STATUS_LABELS[status]}"


@st.cache_data(ttl=60, max_entries=64, show_spinner="Reading the checkpoint's config…")
def inspect_checkpoint(model_id: str) -> Any:
    """``models.checkpoint.inspect``: config and tensor headers only, nothing loaded (cached a minute)."""
    from models.checkpoint import inspect

    return inspect(model_id)


def _download_with_progress(hub_id: str) -> None:
    """Download a Hub checkpoint into the shared cache, once, with a progress bar (config, tokenizer, safetensors)."""
    from models.fetch import download

    bar = st.progress(0.0, text=f"Downloading {hub_id} from the Hugging Face Hub…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 0.0,
                     text=f"Downloading {hub_id}: {done / 2**20:,.0f} of {total / 2**20:,.0f} MB")

    with friendly_errors():
        download(hub_id, on_progress=progress)
        inspect_checkpoint.clear()
        catalog_availability.clear()
    bar.empty()


def model_picker(label: str, key: str, models: list[str], *, task: str = "base", where: Any = None,
                 help: str | None = None) -> str | None:
    """A model selectbox over ``models``, the checkpoints trained in the pre-training lab (with the ``task``
    head), and "another model…": any Hub id (``owner/name``) or a folder under ``BFE_MODEL_DIR``, typed in
    and kept in the URL as ``<key>_other``.

    Another model is inspected from its config before anything loads (architecture, size budget, the
    heads its tensors hold); a refusal is shown here and None returned. A Hub checkpoint not yet on the
    machine offers a download with a progress bar. The page adds ``<key>_other: ""`` to its URL
    defaults and :data:`OTHER` to the key's allowed values.
    """
    box = where if where is not None else st
    trained = [m for m in trained_here(task if task != "base" else None) if m not in models]
    if st.session_state.get(key, "").startswith("trained/") and st.session_state[key] not in trained:
        box.warning(f"**{st.session_state[key]}** is not among the checkpoints trained here (deleted, or still training).",
                    icon=":material/warning:")
        st.session_state[key] = models[0] if models else OTHER
    box.selectbox(label, [*models, *trained, OTHER], key=key, format_func=model_label, help=help)
    if st.session_state[key] != OTHER:
        return st.session_state[key]
    return other_model(f"{key}_other", task=task, where=where)


def other_model(key: str, *, task: str = "base", where: Any = None, label: str = "Model id", optional: bool = False) -> str | None:
    """A text box for any checkpoint (Hub id or folder under ``BFE_MODEL_DIR``), inspected before use.

    Returns the id when it is on this machine and has the ``task`` head; otherwise shows why (or offers
    the download, with a progress bar) and returns None. An empty box returns None quietly.
    """
    from core.errors import ExplorerError

    box = where if where is not None else st
    box.text_input(label, key=key, max_chars=200, placeholder="owner/name (Hub) or a folder under BFE_MODEL_DIR",
                   help="Any checkpoint of a supported architecture: a Hugging Face Hub id such as "
                        "`microsoft/deberta-v3-base`, or a folder you saved with save_pretrained() under BFE_MODEL_DIR. "
                        "Its config is read first; nothing runs that is too large or not supported.")
    mid = (st.session_state.get(key) or "").strip()
    if not mid:
        if not optional:
            box.caption("Type a model id and press Enter.")
        return None
    try:
        info = inspect_checkpoint(mid)
    except ExplorerError as err:
        if where is None:
            show_error(err)
        else:
            with where:
                show_error(err)
        return None
    if task not in info.heads:
        box.error(f"**{mid}** has no trained {task} head: its tensors hold {', '.join(info.heads)}. "
                  "A head with random weights would give meaningless predictions.", icon=":material/block:")
        return None
    box.caption(info.summary())
    if not info.downloaded:
        if box.button(f"Download {mid}", key=f"{key}_download", icon=":material/cloud_download:",
                      help="Once, into the server's shared Hugging Face cache (config, tokenizer and safetensors only)."):
            _download_with_progress(mid)
            st.rerun()
        return None
    return mid
