"""Scale-out as documented: two replicas behind Debian's nginx (sticky sessions), one PostgreSQL.

Sessions opened through the proxy spread over both replicas and each stays on its replica; a
result added through the page on one replica shows on the other's page at its next rerun.
Talks Streamlit's websocket protocol (bench/st_client.py), 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from bench.scaleout import cluster
from bench.st_client import CLICK, StreamlitSession
from tests.helpers.postgres import fresh_pg

pytestmark = [pytest.mark.slow, pytest.mark.machine]  # two replicas, nginx and PostgreSQL: a server's share of the cores


async def _settled(counts, total: int, timeout: float = 15) -> list[int]:
    """The replicas' connection counts once they add up to ``total`` open websockets.

    A plain HTTP request through the proxy (the health check, each session's first GET) holds a
    connection on its replica for a moment after its answer; counted then, it hides or fakes a
    websocket (CI, stop 69: a baseline of [1, 0] before any session was open)."""
    deadline = time.monotonic() + timeout
    now = counts()
    while sum(now) != total and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        now = counts()
    return now


async def _open_until_both(url: str, counts, most: int = 24) -> tuple[list[StreamlitSession], dict[int, StreamlitSession]]:
    """Open sessions through the proxy until one sits on each replica; return all and one per replica."""
    sessions, where = [], {}
    before = await _settled(counts, 0)
    for _ in range(most):
        s = StreamlitSession(url)
        await s.open()
        r = await s.run(page="results")
        assert r.ok, r
        sessions.append(s)
        after = await _settled(counts, len(sessions))
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
        before = await _settled(c.sessions_per_replica, len(sessions))
        for s in (a, b):
            assert (await s.run(widgets={"gl_split": ["test"]})).ok
        assert await _settled(c.sessions_per_replica, len(sessions)) == before and sum(before) == len(sessions)
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


async def _poll_until(s: StreamlitSession, done, timeout: float = 20) -> bool:
    """Rerun ``s``'s polling fragment as its browser would until ``done(s)``."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        if done(s):
            return True
        r = await s.auto_rerun()
        assert r is None or r.ok, r
        await asyncio.sleep(min(s.auto.values()) if s.auto else 0.5)
    return done(s)


def test_a_class_across_two_replicas_follows_and_keeps_its_answers_when_a_replica_stops(pg_url: str, tiny_dir) -> None:
    """Students on both replicas follow one teacher (the class is in PostgreSQL), answer, and a replica that stops
    mid-question loses none of the answers its students gave."""
    import re

    from analysis import results_db
    from analysis.results_db import classes

    url = fresh_pg(pg_url)
    env = {**os.environ, "DATABASE_URL": url, "BFE_MODEL_DIR": str(tiny_dir), "HF_HUB_OFFLINE": "1", "BFE_WARMUP": "0"}

    async def scenario(c) -> None:
        teacher = StreamlitSession(c.url)
        await teacher.open()
        await teacher.run(page="")
        assert (await teacher.run(widgets={"class_start": CLICK})).ok
        code = next(m.group(1) for t in teacher.texts if (m := re.search(r"Join code: \*\*`([A-Z2-9]{6})`", t)))
        teacher_on = await _settled(c.sessions_per_replica, 1)
        assert (await teacher.run(page="calculator", query={"sz_tab": "Training memory"})).ok
        students, where, before = [], {}, await _settled(c.sessions_per_replica, 1)
        for _ in range(24):  # through the proxy until both replicas hold students
            s = StreamlitSession(c.url)
            await s.open()
            assert (await s.run(page="", query={"class": code})).ok
            after = await _settled(c.sessions_per_replica, 2 + len(students))  # the teacher, those before, this one
            where.setdefault(next(i for i, (a, b) in enumerate(zip(before, after, strict=True)) if b > a), []).append(s)
            students.append(s)
            before = after
            if len(where) == 2 and len(students) >= 4:
                break
        assert set(where) == {0, 1} and all(s.page == "calculator" for s in students)  # joined: on the teacher's page
        assert (await teacher.run(widgets={"sz_batch": 77})).ok
        for s in students:  # every follower, on either replica, reaches the teacher's state
            assert await _poll_until(s, lambda s: "sz_batch=77" in s.query_string), s.query_string
        assert (await teacher.run(widgets={"sz_fit_q_ask": CLICK})).ok
        for i, s in enumerate(students):
            assert await _poll_until(s, lambda s: "sz_fit_q_answer" in s.widgets)
            r = await s.run(widgets={"sz_fit_q_answer": ("fits", "does not fit")[i % 2], "sz_fit_q_send": CLICK})
            assert r.ok, r
        engine = results_db.get_engine(url)
        assert classes.class_state(code, engine=engine).question.answers == len(students)
        gone = 1 if teacher_on[1] == 0 else 0  # a replica without the teacher stops mid-question
        c.replicas[gone].kill()
        c.replicas[gone].wait(timeout=10)
        assert classes.class_state(code, engine=engine).question.answers == len(students)  # none lost
        survivor = where[1 - gone][0]
        assert (await survivor.auto_rerun()).ok  # the class goes on on the other replica
        for s in [teacher, *students]:
            await s.close()

    with cluster(2, env) as c:
        asyncio.run(scenario(c))
