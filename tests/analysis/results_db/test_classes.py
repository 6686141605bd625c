"""A class that follows its teacher, in the results database (analysis/results_db/classes.py): codes, keys,
following, questions and answers, the bounds, hostile input, and several processes answering at once."""

from __future__ import annotations

import datetime as dt
import multiprocessing as mp
from collections import Counter

import pytest
from sqlalchemy import update

from analysis import results_db as db
from analysis.results_db import classes as cl
from core.errors import InvalidData


def test_a_class_from_start_to_end(engine) -> None:
    started = cl.start_class(2, engine)
    assert len(started.code) == cl.CODE_LENGTH and set(started.code) <= set(cl.CODE_ALPHABET)
    assert not set(started.code) & set("01OIL")
    assert cl.is_teacher(started.code.lower(), started.key, engine) and not cl.is_teacher(started.code, "guess", engine)
    student = cl.join_class(f" {started.code[:3].lower()}-{started.code[3:]} ", engine)  # typed loosely
    state = cl.class_state(started.code, student, engine=engine)
    assert (state.page, state.query, state.version, state.members, state.following) == ("", {}, 0, 1, 1)
    v = cl.lead(started.code, started.key, "attention", {"at_layer": "5"}, engine)
    assert v == 1 and cl.lead(started.code, started.key, "attention", {"at_layer": "5"}, engine) == 1  # no change, no bump
    assert cl.class_state(started.code, engine=engine).query == {"at_layer": "5"}
    cl.end_class(started.code, started.key, engine)
    assert cl.stats(engine) == {"classes": 0, "members": 0, "questions": 0, "answers": 0}
    with pytest.raises(cl.ClassNotFound):
        cl.class_state(started.code, engine=engine)


def test_predict_then_reveal_counts_one_editable_answer_per_student(engine) -> None:
    c = cl.start_class(engine=engine)
    students = [cl.join_class(c.code, engine) for _ in range(5)]
    qid = cl.ask(c.code, c.key, "word", "ctx1", "What goes in [MASK]?", engine=engine)
    for s, word in zip(students, ["Paris", "paris", "Lyon", "<b>x</b>", "=1+1"], strict=True):
        cl.answer(c.code, s, qid, word, engine)
    assert cl.answer(c.code, students[2], qid, "  PARIS ", engine) == "paris"  # changed its mind: still one answer
    q = cl.class_state(c.code, students[0], engine=engine).question
    assert (q.status, q.answers, q.mine, q.counts) == ("open", 5, "paris", None)  # counts hidden until the reveal
    with pytest.raises(cl.NotTheTeacher):
        cl.reveal(c.code, "not-the-key", qid, engine)
    cl.reveal(c.code, c.key, qid, engine)
    q = cl.class_state(c.code, engine=engine).question
    assert q.counts == {"paris": 3, "<b>x</b>": 1, "=1+1": 1}  # stored as typed (lower case), plain text
    with pytest.raises(InvalidData, match="closed"):
        cl.answer(c.code, students[0], qid, "Rome", engine)
    cl.close_question(c.code, c.key, qid, engine)
    assert cl.class_state(c.code, engine=engine).question is None


def test_a_choice_question_takes_only_its_choices(engine) -> None:
    c = cl.start_class(engine=engine)
    s = cl.join_class(c.code, engine)
    qid = cl.ask(c.code, c.key, "choice", "ctx", "Does it fit?", ["fits", "does not fit"], engine)
    with pytest.raises(InvalidData, match="choices"):
        cl.answer(c.code, s, qid, "maybe", engine)
    assert cl.answer(c.code, s, qid, "does not fit", engine) == "does not fit"
    with pytest.raises(InvalidData):
        cl.ask(c.code, c.key, "choice", "ctx", "No choices?", [], engine)
    with pytest.raises(InvalidData):
        cl.ask(c.code, c.key, "word", "ctx", "Choices on a word?", ["a"], engine)


MALFORMED = ["", "K7MQ2", "K7MQ2XX", "K7MQ2O", "../../etc", "'; DROP TABLE bfe_classes; --", "Ｋ７ＭＱ２Ｘ", "k7mq2x\x00", None,
             123456, "x" * 10_000]


def test_malformed_codes_read_as_unknown(engine) -> None:
    for code in MALFORMED:  # one database for all of them: each is refused before any query
        with pytest.raises(cl.ClassNotFound):
            cl.join_class(code, engine)
        with pytest.raises(cl.ClassNotFound):
            cl.class_state(code, engine=engine)
    assert cl.stats(engine)["members"] == 0


def test_hostile_answers_and_members_are_refused(engine) -> None:
    c = cl.start_class(engine=engine)
    s = cl.join_class(c.code, engine)
    qid = cl.ask(c.code, c.key, "word", "ctx", "Which word?", engine=engine)
    for bad in ("", "   ", "x" * (cl.MAX_ANSWER_CHARS + 1), "a\u200bb", "bell\x07", None, 5, ["a"]):
        with pytest.raises(InvalidData):
            cl.answer(c.code, s, qid, bad, engine)
    assert cl.answer(c.code, s, qid, "two\nlines\tjoined", engine) == "two lines joined"
    for member in ("", "../x", "a" * 100, None, "'; --"):
        with pytest.raises((InvalidData, cl.ClassNotFound)):
            cl.answer(c.code, member, qid, "ok", engine)
    with pytest.raises(cl.ClassNotFound):  # a well-formed id that never joined
        cl.answer(c.code, "A" * 16, qid, "ok", engine)
    other = cl.start_class(engine=engine)
    with pytest.raises(cl.ClassNotFound):  # a question of another class, with its own code
        cl.answer(other.code, cl.join_class(other.code, engine), qid, "ok", engine)
    with pytest.raises(cl.NotTheTeacher):  # one class's key does not lead another
        cl.lead(other.code, c.key, "attention", {}, engine)
    for page, query in (("../etc", {}), ("x" * 100, {}), ("attention", {"a": 1}), ("attention", {"a": "x" * 5000})):
        with pytest.raises(InvalidData):
            cl.lead(c.code, c.key, page, query, engine)
    for hours in (0, 13, 2.5, "3", True, -1, 10**9):
        with pytest.raises(InvalidData):
            cl.start_class(hours, engine)


def test_the_bounds_hold(engine, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cl, "MAX_ACTIVE_CLASSES", 2)
    monkeypatch.setattr(cl, "MAX_MEMBERS", 2)
    monkeypatch.setattr(cl, "MAX_ANSWERS", 2)
    monkeypatch.setattr(cl, "ACTIONS_PER_MINUTE", 3)
    a, idle = cl.start_class(engine=engine), cl.start_class(engine=engine)
    with pytest.raises(cl.ClassFull):
        cl.start_class(engine=engine)
    s1, s2 = cl.join_class(a.code, engine), cl.join_class(a.code, engine)
    with pytest.raises(cl.ClassFull):
        cl.join_class(a.code, engine)
    long_ago = dt.datetime(2000, 1, 1)
    with db.session(engine) as s:  # one class idle for hours, one of a's members gone for minutes
        s.execute(update(db.schema.Classroom).where(db.schema.Classroom.code == idle.code).values(updated_at=long_ago))
        s.execute(update(db.schema.ClassMember).where(db.schema.ClassMember.member == s2).values(last_seen=long_ago))
        s.commit()
    cl.start_class(engine=engine)  # the idle class made room
    assert not cl.is_teacher(idle.code, idle.key, engine) and cl.is_teacher(a.code, a.key, engine)
    s3 = cl.join_class(a.code, engine)  # the member gone for minutes made room
    qid = cl.ask(a.code, a.key, "word", "ctx", "?", engine=engine)
    for word in ("a", "b", "c"):
        cl.answer(a.code, s1, qid, word, engine)
    with pytest.raises(cl.ClassRateLimited):
        cl.answer(a.code, s1, qid, "d", engine)
    assert cl.class_state(a.code, s1, engine=engine).question.mine == "c"  # the refused one changed nothing
    cl.answer(a.code, s3, qid, "x", engine)
    with db.session(engine) as s:  # a third member's answer, past the bound: refused
        s.add(db.schema.ClassMember(code=a.code, member="third-member-id", following=True))
        s.commit()
    with pytest.raises(cl.ClassFull):
        cl.answer(a.code, "third-member-id", qid, "y", engine)


def test_an_expired_class_is_gone_with_everything_it_stored(engine) -> None:
    c = cl.start_class(engine=engine)
    s = cl.join_class(c.code, engine)
    qid = cl.ask(c.code, c.key, "word", "ctx", "?", engine=engine)
    cl.answer(c.code, s, qid, "w", engine)
    with db.session(engine) as sess:
        sess.execute(update(db.schema.Classroom).values(expires_at=dt.datetime(2000, 1, 1)))
        sess.commit()
    with pytest.raises(cl.ClassNotFound):  # expired: unreadable at once, before any sweep
        cl.class_state(c.code, engine=engine)
    assert not cl.is_teacher(c.code, c.key, engine)
    cl.start_class(engine=engine)  # a start sweeps
    assert cl.stats(engine) == {"classes": 1, "members": 0, "questions": 0, "answers": 0}


def test_presence_counts_recent_polls_and_following(engine) -> None:
    c = cl.start_class(engine=engine)
    a, b = cl.join_class(c.code, engine), cl.join_class(c.code, engine)
    assert cl.class_state(c.code, b, following=False, engine=engine).following == 1
    with db.session(engine) as s:
        s.execute(update(db.schema.ClassMember).where(db.schema.ClassMember.member == a)
                  .values(last_seen=dt.datetime(2000, 1, 1)))
        s.commit()
    state = cl.class_state(c.code, engine=engine)
    assert (state.members, state.following) == (1, 0)


def test_polls_share_one_read_and_see_this_process_writes_at_once(engine) -> None:
    """``max_age``: the class-wide state is read once for all of a process's polls; a write made through this process
    is seen at once, one made behind its back (another replica) only after ``max_age``; the member's answer is fresh."""
    c = cl.start_class(engine=engine)
    a = cl.join_class(c.code, engine)
    first = cl.class_state(c.code, a, max_age=60, engine=engine)
    with db.session(engine) as s:  # as another replica writes: not through this process's functions
        s.execute(update(db.schema.Classroom).where(db.schema.Classroom.code == c.code).values(version=40, page="scaling"))
        s.commit()
    assert cl.class_state(c.code, a, max_age=60, engine=engine).version == first.version  # shared, not re-read
    assert cl.class_state(c.code, max_age=0, engine=engine).version == 40  # exact when asked
    assert cl.class_state(c.code, a, max_age=1e-9, engine=engine).page == "scaling"
    cl.lead(c.code, c.key, "attention", {"at_layer": "3"}, engine)  # through this process: seen at once
    led = cl.class_state(c.code, a, max_age=60, engine=engine)
    assert (led.page, led.query, led.version) == ("attention", {"at_layer": "3"}, 41)
    qid = cl.ask(c.code, c.key, "word", "ctx", "What goes in [MASK]?", engine=engine)
    assert cl.class_state(c.code, a, max_age=60, engine=engine).question.mine is None
    cl.answer(c.code, a, qid, "Paris", engine)
    polled = cl.class_state(c.code, a, max_age=60, engine=engine)
    assert (polled.question.id, polled.question.answers, polled.question.mine) == (qid, 1, "paris")
    cl.end_class(c.code, c.key, engine)
    with pytest.raises(cl.ClassNotFound):  # an ended class is not answered from what was read before
        cl.class_state(c.code, a, max_age=60, engine=engine)


def _answer_many(url: str, code: str, qid: int, members: list[str], barrier) -> list[str]:
    from analysis import results_db as rdb
    from analysis.results_db import classes

    rdb.dispose_engines()
    engine = rdb.get_engine(url)
    barrier.wait()
    errors = []
    for m in members:
        try:
            classes.answer(code, m, qid, f"w{m[-1]}", engine)
        except Exception as err:
            errors.append(repr(err))
    return errors


@pytest.mark.slow  # four processes started: as the database's other writer-process tests
def test_four_processes_answer_at_once_and_every_answer_counts(engine) -> None:
    c = cl.start_class(engine=engine)
    members = [cl.join_class(c.code, engine) for _ in range(40)]
    qid = cl.ask(c.code, c.key, "word", "ctx", "?", engine=engine)
    url = engine.url.render_as_string(hide_password=False)
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        barrier = manager.Barrier(4)
        with ctx.Pool(4) as pool:
            results = pool.starmap(_answer_many, [(url, c.code, qid, members[i::4], barrier) for i in range(4)])
    assert [e for r in results for e in r] == []
    cl.reveal(c.code, c.key, qid, engine)
    counts = cl.class_state(c.code, engine=engine).question.counts
    assert counts == dict(Counter(f"w{m[-1]}".lower() for m in members))  # a word answer is stored in lower case
