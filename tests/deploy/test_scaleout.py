"""Scale-out as documented: two replicas behind Debian's nginx (sticky sessions), one PostgreSQL.

Sessions opened through the proxy spread over both replicas and each stays on its replica; a
result added through the page on one replica shows on the other's page at its next rerun.
Talks Streamlit's websocket protocol (bench/st_client.py), 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import os

import pytest

from bench.scaleout import cluster
from bench.st_client import CLICK, StreamlitSession
from tests.helpers.postgres import fresh_pg

pytestmark = [pytest.mark.slow, pytest.mark.machine]  # two replicas, nginx and PostgreSQL: a server's share of the cores


async def _open_until_both(url: str, counts, most: int = 24) -> tuple[list[StreamlitSession], dict[int, StreamlitSession]]:
    """Open sessions through the proxy until one sits on each replica; return all and one per replica."""
    sessions, where = [], {}
    before = counts()
    for _ in range(most):
        s = StreamlitSession(url)
        await s.open()
        r = await s.run(page="results")
        assert r.ok, r
        sessions.append(s)
        after = counts()
        moved = [i for i, (a, b) in enumerate(zip(before, after, strict=True)) if b > a]
        assert len(moved) == 1, (before, after)
        where.setdefault(moved[0], s)
        before = after
        if len(where) == 2:
            break
    return sessions, where


def test_two_replicas_behind_nginx_share_one_postgres(pg_url: str, tiny_dir) -> None:
    env = {**os.environ, "DATABASE_URL": fresh_pg(pg_url), "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "BFE_WARMUP": "0"}

    async def scenario(c) -> None:
        sessions, where = await _open_until_both(c.url, c.sessions_per_replica)
        assert set(where) == {0, 1}, f"all {len(sessions)} sessions went to one replica"
        a, b = where[0], where[1]
        # each session stays on its replica: more reruns do not move any connection
        before = c.sessions_per_replica()
        for s in (a, b):
            assert (await s.run(widgets={"gl_split": ["test"]})).ok
        assert c.sessions_per_replica() == before and sum(before) == len(sessions)
        # add a result through the page on replica 0 ...
        assert (await a.run(widgets={"gl_view": ["Add results"]})).ok
        added = await a.run(widgets={"gl_add_model": "ReplicaBERT", "gl_add_value": "71.5",
                                     "gl_add_source": "Replica et al. 2024, Two servers, one database",
                                     "gl_add_table": "Table 1", "gl_add_submit": CLICK})
        assert added.ok, added
        assert any("Saved (id" in t for t in a.texts), a.texts
        # ... and replica 1, which had the table cached from before, shows it on its next rerun
        seen = await b.run()
        assert seen.ok and any("1 added by users" in t for t in b.texts), b.texts
        for s in sessions:
            await s.close()

    with cluster(2, env) as c:
        asyncio.run(scenario(c))
