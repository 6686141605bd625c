"""Presentation packs saved as links: a pack's compressed JSON stored under a random, unguessable token.

The pack itself belongs to a browser session (Streamlit's session state); saving it here gives it
a URL (``/pack?saved=<token>``) that reopens it in any browser, on any replica sharing the database.

Bounded, so that one visitor of a public server cannot fill the database or evict everyone's links:
- a saved pack is at most :data:`analysis.export.MAX_SAVED_BYTES` compressed;
- all of them together take at most ``BFE_PACK_BUDGET_MB`` (default 256) and number at most :data:`MAX_SAVED_PACKS`;
- one browser session saves at most :data:`SAVES_PER_MINUTE` a minute (:class:`PackRateLimited`);
- past a bound, packs are deleted in this order: first those nobody opened in the last :data:`KEEP_OPENED`, the
  oldest of the session that saved the most bytes first (a flood of saves evicts itself), then the least recently
  used; a pack opened within the hour goes only when nothing else is left.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import secrets
from typing import Any

from sqlalchemy import Engine, and_, delete, func, or_, select, update

from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import SavedPack
from analysis.results_db.seeding import ensure_seeded
from core.errors import DatabaseUnavailable, ExplorerError

MAX_SAVED_PACKS = 1_000
SAVES_PER_MINUTE = 6
KEEP_OPENED = dt.timedelta(hours=1)
_TOKEN = re.compile(r"[A-Za-z0-9_-]{16,32}")


class PackNotFound(ExplorerError, LookupError):
    """No saved pack has this token (mistyped, or deleted as one of the oldest)."""


class PackRateLimited(ExplorerError):
    """This browser session has saved :data:`SAVES_PER_MINUTE` packs in the last minute."""


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _victim(s: Any, keep: str, now: dt.datetime) -> str | None:
    """The token of the pack to delete next (never ``keep``, the one being saved): see the module's docstring."""
    last_used = func.coalesce(SavedPack.opened_at, SavedPack.created_at)
    stale = and_(SavedPack.token != keep, or_(SavedPack.opened_at.is_(None), SavedPack.opened_at < now - KEEP_OPENED))
    heaviest = s.execute(select(SavedPack.saver, func.count()).where(stale).group_by(SavedPack.saver)
                         .order_by(func.sum(SavedPack.nbytes).desc(), SavedPack.saver).limit(1)).first()
    if heaviest is not None and heaviest[0] and heaviest[1] > 1:  # one session's many saves: its oldest
        return s.scalar(select(SavedPack.token).where(stale, SavedPack.saver == heaviest[0])
                        .order_by(last_used, SavedPack.token).limit(1))
    for where in (stale, SavedPack.token != keep):  # then the least recently used, opened-this-hour ones last
        token = s.scalar(select(SavedPack.token).where(where).order_by(last_used, SavedPack.token).limit(1))
        if token is not None:
            return token
    return None


def _check_rate(s: Any, saver: str, now: dt.datetime) -> None:
    """:class:`PackRateLimited` if ``saver`` (a browser session; empty: a script) saved too often in the last minute."""
    if not saver:
        return
    recent = s.scalar(select(func.count()).select_from(SavedPack).where(
        SavedPack.saver == saver, SavedPack.created_at > now - dt.timedelta(minutes=1)))
    if recent >= SAVES_PER_MINUTE:
        raise PackRateLimited(f"This browser has saved {recent} packs in the last minute.",
                              "Wait a minute and save again; each link keeps working.")


def save_pack(items: list, title: str = "BERT Family Explorer", engine: Engine | None = None, saver: str = "") -> str:
    """Store a pack and return its token; ``load_pack(token)`` gives it back. ``saver`` names the browser session
    that saves it (for the rate limit and the eviction order; empty for scripts).

    Raises:
        ExportTooLarge: the pack is past the bounds (see :func:`analysis.export.pack_to_bytes`).
        PackRateLimited: ``saver`` has saved :data:`SAVES_PER_MINUTE` packs in the last minute.
        DatabaseUnavailable: the database cannot be written.
    """
    from analysis.export import pack_to_bytes
    from core.settings import get_settings

    budget = get_settings().pack_budget_mb * 2**20
    engine = engine or get_engine()
    ensure_seeded(engine)
    saver = str(saver)[:64]
    with session(engine) as s:  # refused before the pack is serialised and compressed (up to 8 MB of work)
        _check_rate(s, saver, _now())
    data = pack_to_bytes(items, title)
    token = secrets.token_urlsafe(16)

    def store(s) -> str:
        now = _now()
        _check_rate(s, saver, now)  # again inside the write: another process may have saved meanwhile
        s.add(SavedPack(token=token, title=title[:200], items=len(items), data=data, nbytes=len(data), saver=saver,
                        created_at=now))
        s.flush()
        count, total = s.execute(select(func.count(), func.coalesce(func.sum(SavedPack.nbytes), 0))).one()
        while count > MAX_SAVED_PACKS or total > budget:
            victim = _victim(s, token, now)
            if victim is None:
                break
            size = s.scalar(select(SavedPack.nbytes).where(SavedPack.token == victim)) or 0
            s.execute(delete(SavedPack).where(SavedPack.token == victim))
            count, total = count - 1, total - size
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
                           "It may have been mistyped, or deleted: the server keeps a bounded number of packs, "
                           "and those opened recently longest.")
    with contextlib.suppress(DatabaseUnavailable):  # opened now: kept longest (a read-only database still opens it)
        write(engine, lambda s: s.execute(update(SavedPack).where(SavedPack.token == token).values(opened_at=_now())))
    try:
        return pack_from_bytes(data)
    except ValueError as err:  # includes ExportTooLarge: a row written by something else
        raise PackNotFound(f"The saved pack under this link cannot be read ({err}).") from None
