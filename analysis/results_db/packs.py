"""Presentation packs saved as links: a pack's compressed JSON stored under a random, unguessable token.

The pack itself belongs to a browser session (Streamlit's session state); saving it here gives it
a URL (``/pack?saved=<token>``) that reopens it in any browser, on any replica sharing the database.
Bounded: a saved pack is at most :data:`analysis.export.MAX_SAVED_BYTES` compressed, and only the
newest :data:`MAX_SAVED_PACKS` are kept (the oldest are deleted when a new one is saved).
"""

from __future__ import annotations

import re
import secrets

from sqlalchemy import Engine, delete, func, select

from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import SavedPack
from analysis.results_db.seeding import ensure_seeded
from core.errors import ExplorerError

MAX_SAVED_PACKS = 1_000
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,32}")


class PackNotFound(ExplorerError, LookupError):
    """No saved pack has this token (mistyped, or deleted as one of the oldest)."""


def save_pack(items: list, title: str = "BERT Family Explorer", engine: Engine | None = None) -> str:
    """Store a pack and return its token; ``load_pack(token)`` gives it back.

    Raises:
        ExportTooLarge: the pack is past the bounds (see :func:`analysis.export.pack_to_bytes`).
        DatabaseUnavailable: the database cannot be written.
    """
    from analysis.export import pack_to_bytes

    engine = engine or get_engine()
    ensure_seeded(engine)
    data = pack_to_bytes(items, title)
    token = secrets.token_urlsafe(16)

    def store(s) -> str:
        s.add(SavedPack(token=token, title=title[:200], items=len(items), data=data))
        s.flush()
        count = s.scalar(select(func.count()).select_from(SavedPack))
        if count > MAX_SAVED_PACKS:
            oldest = select(SavedPack.token).order_by(SavedPack.created_at, SavedPack.token).limit(count - MAX_SAVED_PACKS)
            s.execute(delete(SavedPack).where(SavedPack.token.in_(oldest)))
        return token

    return write(engine, store)


def load_pack(token: str, engine: Engine | None = None) -> tuple[str, list]:
    """The title and items of a saved pack.

    Raises:
        PackNotFound: the token is malformed or unknown.
        DatabaseUnavailable: the database cannot be read.
    """
    from analysis.export import pack_from_bytes

    if not isinstance(token, str) or not _TOKEN.fullmatch(token):
        raise PackNotFound("This is not a saved-pack link.", "Copy the whole link the pack page gave you.")
    engine = engine or get_engine()
    ensure_seeded(engine)
    with session(engine) as s:
        row = s.get(SavedPack, token)
        data = row.data if row is not None else None
    if data is None:
        raise PackNotFound("No saved pack has this link.",
                           f"It may have been mistyped, or deleted: the server keeps the newest {MAX_SAVED_PACKS:,} packs.")
    try:
        return pack_from_bytes(data)
    except ValueError as err:  # includes ExportTooLarge: a row written by something else
        raise PackNotFound(f"The saved pack under this link cannot be read ({err}).") from None
