"""Saved presentation packs: links, the byte budget, the rate limit (analysis/results_db/packs.py)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from analysis import results_db as db
from tests.helpers import ROOT

SEEDS = ROOT.parent / "shared" / "seeds"


# ------------------------------------------------------------------------------- saved packs
def test_packs_saved_as_links(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    from analysis.export import PackItem
    from analysis.results_db import packs

    items = [PackItem(title="Ünïcode 🙂", caption="c", sources=("s",), table=({"a": 1},), link="/results")]
    token = db.save_pack(items, "Deck", engine)
    assert len(token) >= 22 and db.load_pack(token, engine) == ("Deck", items)
    for bad in ("", "../../etc/passwd", "x" * 500, "'; DROP TABLE bfe_packs; --", token[:-1] + "?"):
        with pytest.raises(db.PackNotFound):
            db.load_pack(bad, engine)
    monkeypatch.setattr(packs, "MAX_SAVED_PACKS", 3)
    tokens = [db.save_pack(items, f"D{i}", engine) for i in range(4)]
    with db.session(engine) as s:
        # the oldest packs nobody opened went; "Deck", opened above, stays though it is the oldest
        assert sorted(s.scalars(select(db.SavedPack.title))) == ["D2", "D3", "Deck"]
    with pytest.raises(db.PackNotFound, match="deleted"):
        db.load_pack(tokens[0], engine)


def _heavy_items(kib: int, seed: int) -> list:
    """A pack that compresses to about ``kib`` KiB (random hex: gzip halves it)."""
    import random

    from analysis.export import PackItem

    rng = random.Random(seed)
    rows = tuple({"x": f"{rng.getrandbits(4096):x}"} for _ in range(kib * 2))  # 1 KiB of hex each
    return [PackItem(title=f"heavy {seed}", table=rows)]


def test_a_flood_of_saves_stays_within_the_byte_budget_and_evicts_itself_first(engine, monkeypatch) -> None:
    from analysis.results_db import packs

    monkeypatch.setenv("BFE_PACK_BUDGET_MB", "16")
    monkeypatch.setattr(packs, "SAVES_PER_MINUTE", 10**6)  # the flood below is one session, as fast as it can
    teacher_old = db.save_pack(_heavy_items(1024, 0), "for next week", engine, saver="teacher")
    teacher = db.save_pack(_heavy_items(1024, 1), "today's lesson", engine, saver="teacher")
    db.load_pack(teacher, engine)  # opened in the last hour
    for i in range(40):  # ~40 MB into a 16 MB budget
        db.save_pack(_heavy_items(1024, 100 + i), f"flood {i}", engine, saver="flood")
    with db.session(engine) as s:
        total = s.scalar(select(func.sum(db.SavedPack.nbytes)))
        sizes = list(s.scalars(select(func.length(db.SavedPack.data))))
        flood_left = s.scalar(select(func.count()).select_from(db.SavedPack).where(db.SavedPack.saver == "flood"))
    assert total <= 16 * 2**20 and total == sum(sizes) and 5 <= flood_left < 40
    assert db.load_pack(teacher, engine)[0] == "today's lesson"
    assert db.load_pack(teacher_old, engine)[0] == "for next week"  # the flood evicted its own oldest first
    # a flood from a new session each time (one pack each): the least recently used go, the opened pack stays
    for i in range(30):
        db.save_pack(_heavy_items(1024, 200 + i), f"spread {i}", engine, saver=f"visitor-{i}")
    with db.session(engine) as s:
        assert s.scalar(select(func.sum(db.SavedPack.nbytes))) <= 16 * 2**20
    assert db.load_pack(teacher, engine)[0] == "today's lesson"


def test_one_session_saves_at_most_a_few_packs_a_minute(engine) -> None:
    from analysis.export import PackItem
    from analysis.results_db import packs

    items = [PackItem(title="t", table=({"a": 1},))]
    for _ in range(packs.SAVES_PER_MINUTE):
        db.save_pack(items, "ok", engine, saver="eager")
    with pytest.raises(db.PackRateLimited, match="last minute"):
        db.save_pack(items, "one too many", engine, saver="eager")
    assert db.load_pack(db.save_pack(items, "another browser", engine, saver="calm"), engine)[0] == "another browser"
    with db.session(engine) as s:
        assert s.scalar(select(func.count()).select_from(db.SavedPack).where(db.SavedPack.saver == "eager")) == 6
