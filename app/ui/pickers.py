"""The model picker: catalog models, checkpoints trained in the pre-training lab, and "another model…" (a Hub id
or a folder under ``BFE_MODEL_DIR``, inspected before use); and which models can run on this machine.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from app.ui.caches import STATUS_LABELS, catalog_availability, inspect_checkpoint
from app.ui.errors import friendly_errors, show_error
from services.requests import MAX_MODEL_ID_CHARS

#: The last option of every model picker: a Hub id or a folder under BFE_MODEL_DIR, typed in.
OTHER = "(another model)"


def valid_model_id(value: Any) -> bool:
    """For URL state: empty, or a model id the loader would accept (no path tricks, at most 200 characters)."""
    from services import models

    return value == "" or models.valid_id(value)


@st.cache_data(ttl=5, max_entries=16, show_spinner=False)
def trained_here(task: str | None = None) -> list[str]:
    """``trained/<run>`` checkpoints of the pre-training lab (with ``task``'s head), newest first (re-read every 5 s)."""
    from services.lab import trained_models

    return trained_models(task)


@st.cache_data(ttl=5, max_entries=256, show_spinner=False)
def _trained_label(mid: str) -> str:
    """A checkpoint trained here, with its objective and size from its run record (read once per 5 s, not per option
    on every rerun)."""
    from services.lab import run_info

    info = run_info(mid)
    cfg = info.get("config", {})
    if info.get("kind") == "finetune" and cfg:  # a fine-tuning lab run: what it was fine-tuned from, on what
        what = f"{cfg.get('model', '?').rsplit('/', 1)[-1]} on {cfg.get('task', '?')}, {cfg.get('mode', '?')}"
    else:
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


def _download_with_progress(hub_id: str) -> None:
    """Download a Hub checkpoint into the shared cache, once, with a progress bar (config, tokenizer, safetensors)."""
    from services import models

    bar = st.progress(0.0, text=f"Downloading {hub_id} from the Hugging Face Hub…")

    def progress(done: int, total: int) -> None:
        bar.progress(min(1.0, done / total) if total else 0.0,
                     text=f"Downloading {hub_id}: {done / 2**20:,.0f} of {total / 2**20:,.0f} MB")

    from app.ui.calls import slot_lent

    with friendly_errors(), slot_lent():  # minutes of network: the class's pages run meanwhile
        models.download(hub_id, progress)
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
    if st.session_state.get(key, "").startswith("trained/") and st.session_state[key] not in [*models, *trained]:
        box.warning(f"**{st.session_state[key]}** is not among the checkpoints trained here (deleted, or still training).",
                    icon=":material/warning:")
        st.session_state[key] = models[0] if models else OTHER
    box.selectbox(label, [*models, *trained, OTHER], key=key, format_func=model_label, help=help)
    if st.session_state[key] != OTHER:
        return st.session_state[key]
    return other_model(f"{key}_other", task=task, where=where)


#: URL default of a step slider: the run's last step (the run's own checkpoint).
LAST_STEP = -1


def step_picker(model_id: str | None, key: str, *, where: Any = None) -> str | None:
    """For a lab run that kept checkpoints over its training, a slider over those steps; returns the id to load:
    ``trained/<run>@<step>``, or the run's own id at its last step. Any other model (or a run that kept only its last
    checkpoint) passes through with no slider. The page adds ``<key>: LAST_STEP`` to its URL defaults and
    ``(LAST_STEP, 10**9)`` to the allowed values.
    """
    from services import models

    if not model_id or not model_id.startswith("trained/") or "@" in model_id:
        return model_id
    steps = models.steps(model_id)
    if len(steps) < 2:
        return model_id
    if st.session_state.get(key) not in steps:  # the URL's -1, or a step of another run: the last
        st.session_state[key] = steps[-1]
    box = where if where is not None else st
    box.select_slider("Training step", steps, key=key, format_func=lambda s: f"{s:,}",
                      help="The run kept its weights at these steps of its training (log-spaced: the model changes "
                           "fastest early; 0 is its random initialisation). Slide to watch heads specialise and "
                           "predictions form (MultiBERTs; Clark et al. 2019).")
    step = st.session_state[key]
    return model_id if step == steps[-1] else f"{model_id}@{step}"


def other_model(key: str, *, task: str = "base", where: Any = None, label: str = "Model id", optional: bool = False) -> str | None:
    """A text box for any checkpoint (Hub id or folder under ``BFE_MODEL_DIR``), inspected before use.

    Returns the id when it is on this machine and has the ``task`` head; otherwise shows why (or offers
    the download, with a progress bar) and returns None. An empty box returns None quietly.
    """
    from core.errors import ExplorerError

    box = where if where is not None else st
    box.text_input(label, key=key, max_chars=MAX_MODEL_ID_CHARS, placeholder="owner/name (Hub) or a folder under BFE_MODEL_DIR",
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


def model_ready(model_id: str) -> bool:
    """Whether ``model_id`` can run now: on this machine, or downloadable because the Hub answers."""
    from services import models

    return models.ready(model_id, catalog_availability())


def explain_missing(model_ids: list[str], what: str = "") -> list[str]:
    """Show one note for the models among ``model_ids`` that cannot run here, with the command that
    fetches them; return those missing (a page then skips them instead of showing an error each)."""
    missing = [m for m in dict.fromkeys(model_ids) if not model_ready(m)]
    if missing:
        st.info(f"{what or 'This needs'} {', '.join(f'**{m}**' for m in missing)}, not on this machine. On a machine with "
                f"internet run `python -m models.fetch {' '.join(missing)}` and copy the model folder here "
                "(see the Models page).", icon=":material/cloud_download:")
    return missing
