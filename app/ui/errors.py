"""Error display: the one place where library exceptions become messages, each saying what went wrong and how to fix it.

:func:`show_error` turns an :class:`core.errors.ExplorerError` into one kind of friendly message (never a
traceback); :func:`friendly_errors` does it for a block, so the rest of the page still draws.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import streamlit as st

from core.errors import ExplorerError, InvalidCheckpoint, ModelUnavailable

log = logging.getLogger("bert_family_explorer")


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


@contextmanager
def friendly_errors() -> Iterator[None]:
    """Run a block; any exception becomes a friendly message and the rest of the page still draws.

    Streamlit's own control flow (``st.stop``, ``st.rerun``) derives from BaseException and passes.
    """
    try:
        yield
    except Exception as err:
        show_error(err)
