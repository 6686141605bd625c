"""Caches: the one place where Streamlit caches library values, and the catalog's availability statuses.

``st.cache_data`` for plain values re-read on a timer: which catalog models are on this machine, the compute device,
a checkpoint's config. (The model cache is process-wide already: ``models.cache.default_cache``, reached through
``services.executor``.) Nothing here imports torch at import time.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from services.models import ModelStatus

# Material icons ship with Streamlit, so they render offline and in any browser font setup.
AVAILABILITY_ICONS = {ModelStatus.READY: ":material/check_circle:", ModelStatus.DOWNLOAD: ":material/cloud_download:",
                      ModelStatus.BROKEN: ":material/warning:", ModelStatus.CATALOG_ONLY: ":material/menu_book:"}

STATUS_LABELS = {
    ModelStatus.READY: "ready",
    ModelStatus.DOWNLOAD: "downloads on first use",
    ModelStatus.BROKEN: "local copy is broken",
    ModelStatus.CATALOG_ONLY: "catalog only (no weights)",
}


@st.cache_data(ttl=30, show_spinner=False)
def catalog_availability() -> dict[str, tuple[ModelStatus, str]]:
    """catalog id -> (status, message), re-checked every 30 s (file checks only, no network)."""
    from services import models

    return models.availability()


def ready_here(model_id: str) -> bool:
    """Whether a catalog model's weights are on this machine (or on the model backend): no download needed."""
    return catalog_availability().get(model_id, ("",))[0] == ModelStatus.READY


@st.cache_data(ttl=300, show_spinner=False)
def device_label() -> str:
    from services import models

    return models.device_label()


@st.cache_data(ttl=60, max_entries=64, show_spinner="Reading the checkpoint's config…")
def inspect_checkpoint(model_id: str) -> Any:
    """``models.inspection.inspect``: config and tensor headers only, nothing loaded (cached a minute)."""
    from services import models

    return models.inspect(model_id)
