"""A class follows its teacher: N students' pages follow one teacher's, then answer a question, over Streamlit's
websocket protocol (no browser: bench/st_client.py, which reruns the pages' polling fragments as a browser's timer
does).

    python bench/class_follow.py [--students 30] [--changes 8] [--replicas 1]

Starts the app as the README does (``python -m app.serve``, offline, a fresh SQLite database; ``--replicas 2``:
two replicas behind nginx sharing one PostgreSQL), then:

1. the teacher alone: opens the calculator and changes the batch ``--changes`` times (the teacher's floor);
2. a class: the teacher starts a class, N students open its join link (their pages go where the teacher is) and
   poll as their browsers would (each page's fragment as often as it asks, the students' timers spread over the interval);
   the teacher changes the batch ``--changes`` times, one every 4 s; for each change and student, the time from the
   teacher's click to the student's page showing the teacher's batch in its address;
3. the teacher asks whether the model fits; every student answers at once; the answers counted in the database
   must be N exactly; the teacher reveals.

Prints p50/p95/max of the follow latency (goal: p95 <= 3 s), errors, the answers counted, and the teacher's own
click-to-finished times with the class against alone (p95 ratio).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.classroom import MEMORY_TAB, p95  # noqa: E402
from bench.scaleout import cluster, warm_server  # noqa: E402
from bench.st_client import CLICK, StreamlitSession  # noqa: E402

POLL_S = 1.0  # until the page's own interval (its fragment's run_every, app/ui/classroom.py) is known
GAP_S = 4.0
CODE = re.compile(r"Join code: \*\*`([A-Z2-9]{6})`\*\*")


async def teacher_alone(url: str, changes: int) -> list[float]:
    t = StreamlitSession(url)
    await t.open()
    await t.run(page="calculator", query={"sz_tab": MEMORY_TAB})
    times = []
    for k in range(changes):
        await asyncio.sleep(0.5)
        r = await t.run(widgets={"sz_batch": 200 + k})
        times.append(r.seconds)
    await t.close()
    return times


async def one_class(url: str, n: int, changes: int, pids: list[int]) -> dict:
    import psutil

    from analysis.results_db import classes

    servers = [psutil.Process(p) for p in pids]

    def server_cpu() -> float:
        return sum(t.user + t.system for q in servers for t in [q.cpu_times()])

    errors: list[str] = []
    teacher = StreamlitSession(url)
    await teacher.open()
    await teacher.run(page="")
    r = await teacher.run(widgets={"class_start": CLICK})
    errors += r.errors
    code = next((m.group(1) for text in teacher.texts if (m := CODE.search(text))), None)
    if code is None:
        raise RuntimeError(f"no class code on the teacher's page: {teacher.texts[:5]}")
    await teacher.run(page="calculator", query={"sz_tab": MEMORY_TAB})
    students = [StreamlitSession(url) for _ in range(n)]
    await asyncio.gather(*(s.open() for s in students))
    joined = await asyncio.gather(*(s.run(page="", query={"class": code}) for s in students))
    errors += [e for r in joined for e in r.errors]
    where = [s.page for s in students]
    if where.count("calculator") != n:
        errors.append(f"after joining, {n - where.count('calculator')} students were not on the teacher's page: {where[:5]}")
    target: dict[str, float | int] = {"value": -1, "sent": 0.0}
    latency: list[float] = []
    seen: set[tuple[int, int]] = set()
    stop = asyncio.Event()

    async def poll(i: int, s: StreamlitSession) -> None:
        await asyncio.sleep(random.uniform(0, POLL_S))
        while not stop.is_set():
            t0 = time.perf_counter()
            r = await s.auto_rerun()
            if r is not None and not r.ok:
                errors.append(f"student {i}: {r.status} {r.errors[:2]}")
            value = target["value"]
            if value >= 0 and (i, value) not in seen and f"sz_batch={value}" in s.query_string:
                seen.add((i, value))
                latency.append(time.perf_counter() - target["sent"])
            every = min(s.auto.values()) if s.auto else POLL_S  # the interval the page asked for, as a browser keeps it
            await asyncio.sleep(max(0.0, every - (time.perf_counter() - t0)))

    pollers = [asyncio.create_task(poll(i, s)) for i, s in enumerate(students)]
    await asyncio.sleep(2 * POLL_S)
    c0, t0 = server_cpu(), time.perf_counter()
    await asyncio.sleep(10)  # the class at rest: every page polling, nothing changing
    idle_cpu = (server_cpu() - c0) / (time.perf_counter() - t0)
    led: list[float] = []
    missed = 0
    for k in range(changes):
        await asyncio.sleep(GAP_S)
        target["value"], target["sent"] = 100 + k, time.perf_counter()
        r = await teacher.run(widgets={"sz_batch": 100 + k})
        led.append(r.seconds)
        errors += r.errors
        deadline = time.perf_counter() + 15
        while time.perf_counter() < deadline and sum(1 for i in range(n) if (i, 100 + k) in seen) < n:
            await asyncio.sleep(0.05)
        missed += n - sum(1 for i in range(n) if (i, 100 + k) in seen)
    # a question, answered by every student at once
    r = await teacher.run(widgets={"sz_fit_q_ask": CLICK})
    errors += r.errors
    deadline = time.perf_counter() + 15
    while time.perf_counter() < deadline and not all("sz_fit_q_answer" in s.widgets for s in students):
        await asyncio.sleep(0.05)
    stop.set()
    await asyncio.gather(*pollers)
    lacking = sum("sz_fit_q_answer" not in s.widgets for s in students)
    if lacking:
        errors.append(f"{lacking} students never saw the question")

    async def answer(i: int, s: StreamlitSession) -> float:
        t0 = time.perf_counter()
        # one rerun, as the browser sends it: the choice and the click together (each rerun carries every widget's state)
        r = await s.run(widgets={"sz_fit_q_answer": ("fits", "does not fit")[i % 2], "sz_fit_q_send": CLICK})
        if not r.ok:
            errors.append(f"student {i} answering: {r.status} {r.errors[:2]}")
        return time.perf_counter() - t0

    answer_times = await asyncio.gather(*(answer(i, s) for i, s in enumerate(students) if "sz_fit_q_answer" in s.widgets))
    state = classes.class_state(code)
    counted = state.question.answers if state.question else 0
    r = await teacher.run(widgets={"sz_fit_q_reveal": CLICK})
    errors += r.errors
    revealed = classes.class_state(code).question
    total = sum((revealed.counts or {}).values()) if revealed else 0
    await asyncio.gather(*(s.close() for s in [teacher, *students]), return_exceptions=True)
    every = min(students[0].auto.values()) if students[0].auto else float("nan")
    return {"latency": latency, "missed": missed, "idle_cpu": idle_cpu, "every": every, "errors": errors, "counted": counted, "revealed": total, "led": led,
            "answer_times": list(answer_times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=30)
    parser.add_argument("--changes", type=int, default=8)
    parser.add_argument("--replicas", type=int, default=1)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bfe-follow-"))
    (tmp / "models").mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BFE_MODEL_DIR": str(tmp / "models"),
           "DATABASE_URL": f"sqlite:///{tmp / 'results.db'}"}

    def measure(url: str, pids: list[int]) -> tuple[list[float], dict]:
        alone = asyncio.run(teacher_alone(url, args.changes))
        return alone, asyncio.run(one_class(url, args.students, args.changes, pids))

    if args.replicas == 1:
        with warm_server(env, tmp / "server.log") as (url, proc):
            os.environ["DATABASE_URL"] = env["DATABASE_URL"]
            alone, result = measure(url, [proc.pid])
    else:
        from tests.helpers.postgres import postgres_server

        with postgres_server() as pg, cluster(args.replicas, {**env, "DATABASE_URL": pg}) as c:
            time.sleep(15)
            os.environ["DATABASE_URL"] = pg
            alone, result = measure(c.url, [p.pid for p in c.replicas])
    lat = sorted(result["latency"])
    n, k = args.students, args.changes
    print(f"\n{os.cpu_count()} cores, {args.replicas} replica(s), {n} students following, {k} changes, polls as the page asks "
          f"(every {result['every']:g} s)")
    if lat:
        print(f"follow latency (teacher's click -> the student's page at the teacher's state): p50 {statistics.median(lat):.2f} s, "
              f"p95 {p95(lat):.2f} s, max {lat[-1]:.2f} s over {len(lat)} of {n * k} (missed {result['missed']}); goal p95 <= 3 s")
    print(f"teacher's change, click to finished: alone p50 {statistics.median(alone):.3f} s p95 {p95(alone):.3f} s; with the "
          f"class p50 {statistics.median(result['led']):.3f} s p95 {p95(result['led']):.3f} s "
          f"(p95 ratio {p95(result['led']) / p95(alone):.2f})")
    print(f"answers: {result['counted']} counted before the reveal, {result['revealed']} in the reveal, of {n}; answering "
          f"(all at once) p50 {statistics.median(result['answer_times']):.2f} s p95 {p95(result['answer_times']):.2f} s")
    print(f"the class at rest ({n} pages polling): the server used {result['idle_cpu']:.2f} of a core")
    print(f"errors: {len(result['errors'])}")
    for e in result["errors"][:8]:
        print(f"   {e}")


if __name__ == "__main__":
    main()
