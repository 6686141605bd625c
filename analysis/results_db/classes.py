"""A class that follows its teacher, in the results database (so every replica behind a proxy sees the same class).

A teacher starts a class and gets its join code (six letters and digits that cannot be misread) and a teacher key
(only its SHA-256 is stored). Students join with the code and get an anonymous member id. The teacher's page and its
address are stored on the class with a version number that grows with every change (and with every question), so a
follower polls one row. A question is about what one page will show (its ``context``: a digest of the page's
inputs); students answer it once each (editable until the reveal), as plain text.

Bounded so that one visitor cannot fill the database: at most :data:`MAX_ACTIVE_CLASSES` classes at once (past it,
classes idle for :data:`IDLE` are ended), each for :data:`MIN_HOURS` to :data:`MAX_HOURS` hours, :data:`MAX_MEMBERS`
members (past it, members gone for :data:`GONE` make room), :data:`MAX_QUESTIONS` questions and
:data:`MAX_ANSWERS` answers a question; a member acts (answers, stops or starts following) at most
:data:`ACTIONS_PER_MINUTE` times a minute; addresses, prompts, choices and answers are length-bounded. A class ends
when its teacher ends it or when it expires, and goes with everything it stored (foreign keys cascade); expired
classes are swept whenever a class starts. Nothing of a class is readable without its code, and nothing is changed
in its name without its teacher key.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import re
import secrets
import time
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine, delete, func, select, update

from analysis.class_rules import (
    ACTIONS_PER_MINUTE,
    CODE_ALPHABET,
    CODE_LENGTH,
    DEFAULT_HOURS,
    MAX_ACTIVE_CLASSES,
    MAX_ANSWER_CHARS,
    MAX_ANSWERS,
    MAX_CHOICES,
    MAX_HOURS,
    MAX_MEMBERS,
    MAX_PROMPT_CHARS,
    MAX_QUERY_BYTES,
    MAX_QUESTIONS,
    MIN_HOURS,
    ClassFull,
    ClassNotFound,
    ClassRateLimited,
    NotTheTeacher,
    normalise_code,
)
from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import ClassAnswer, ClassMember, ClassQuestion, Classroom
from analysis.results_db.seeding import ensure_seeded
from core.errors import InvalidData

#: A member seen within this long counts as in the class (its page polls every second or two).
PRESENT = dt.timedelta(seconds=15)
#: A member not seen for this long gives its place up to a newcomer when the class is full.
GONE = dt.timedelta(minutes=2)
#: At the bound of classes, a class nobody used for this long (no change by its teacher, no member seen) is ended.
IDLE = dt.timedelta(hours=1)
#: A poll writes the member's "last seen" at most this often.
SEEN_EVERY = dt.timedelta(seconds=5)
KINDS = ("word", "choice")
_MEMBER = re.compile(r"[A-Za-z0-9_-]{8,32}")


@dataclass(frozen=True)
class Started:
    """A new class: its code (for the join link), the teacher key (for the teacher's browser only), its end (UTC)."""

    code: str
    key: str
    expires_at: dt.datetime


@dataclass(frozen=True)
class QuestionState:
    """The class's current question as one member (or the teacher) sees it: the class's answers are counted
    (``counts``) only once it is revealed."""

    id: int
    kind: str
    context: str
    prompt: str
    choices: tuple[str, ...]
    status: str  # "open" | "revealed"
    answers: int
    mine: str | None = None
    counts: dict[str, int] | None = None


@dataclass(frozen=True)
class ClassState:
    """What a follower's poll reads: the teacher's page and address, the version that changes with them, how many
    are in the class and following, and the current question."""

    code: str
    page: str
    query: dict[str, str]
    version: int
    expires_at: dt.datetime
    members: int
    following: int
    question: QuestionState | None = None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None)


def _hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8", "replace")).hexdigest()


def _member_id(member: Any) -> str:
    if not isinstance(member, str) or not _MEMBER.fullmatch(member):
        raise InvalidData("Not a member of this class.", "Join the class again with its code.")
    return member


def _class(s: Any, code: str, now: dt.datetime) -> Classroom:
    row = s.get(Classroom, code)
    if row is None or row.expires_at <= now:
        raise ClassNotFound(f"There is no class {code} now.", "It may have ended or expired; ask the teacher for the code.")
    return row


def _teacher(s: Any, code: str, key: Any, now: dt.datetime) -> Classroom:
    row = _class(s, code, now)
    if not isinstance(key, str) or not hmac.compare_digest(row.teacher, _hash(key)):
        raise NotTheTeacher("Only the class's teacher can do that.", "The teacher's browser holds the key it was started with.")
    return row


def _bump(row: Classroom, now: dt.datetime) -> None:
    row.version += 1
    row.updated_at = now


def sweep(engine: Engine | None = None) -> int:
    """Delete every class past its end, with everything it stored; how many went."""
    engine = engine or get_engine()
    ensure_seeded(engine)
    return write(engine, lambda s: _sweep(s, _now()))


def _drop_idle_classes(s: Any, now: dt.datetime) -> None:
    """At the bound of classes, end those idle for :data:`IDLE`: no change by their teacher and no member seen."""
    seen = select(ClassMember.code).where(ClassMember.last_seen >= now - IDLE)
    idle = s.scalars(select(Classroom.code).where(Classroom.updated_at < now - IDLE, Classroom.code.not_in(seen))).all()
    if idle:
        s.execute(update(Classroom).where(Classroom.code.in_(idle)).values(expires_at=now))
        s.flush()
        _sweep(s, now)


def _sweep(s: Any, now: dt.datetime) -> int:
    codes = s.scalars(select(Classroom.code).where(Classroom.expires_at <= now)).all()
    if codes:  # children first: a database without ON DELETE CASCADE (or with foreign keys off) keeps no orphans
        qids = select(ClassQuestion.id).where(ClassQuestion.code.in_(codes))
        s.execute(delete(ClassAnswer).where(ClassAnswer.question_id.in_(qids)))
        s.execute(delete(ClassQuestion).where(ClassQuestion.code.in_(codes)))
        s.execute(delete(ClassMember).where(ClassMember.code.in_(codes)))
        s.execute(delete(Classroom).where(Classroom.code.in_(codes)))
    return len(codes)


def start_class(hours: Any = DEFAULT_HOURS, engine: Engine | None = None) -> Started:
    """A new class for ``hours`` (whole hours, :data:`MIN_HOURS` to :data:`MAX_HOURS`).

    Raises:
        InvalidData: hours out of range or not a whole number.
        ClassFull: :data:`MAX_ACTIVE_CLASSES` classes are running.
    """
    if type(hours) is not int or not MIN_HOURS <= hours <= MAX_HOURS:
        raise InvalidData(f"A class lasts {MIN_HOURS} to {MAX_HOURS} whole hours, not {hours!r}.")
    engine = engine or get_engine()
    ensure_seeded(engine)
    key = secrets.token_urlsafe(24)

    def go(s: Any) -> Started:
        now = _now()
        _sweep(s, now)
        if s.scalar(select(func.count()).select_from(Classroom)) >= MAX_ACTIVE_CLASSES:
            _drop_idle_classes(s, now)
        if s.scalar(select(func.count()).select_from(Classroom)) >= MAX_ACTIVE_CLASSES:
            raise ClassFull(f"This server already runs {MAX_ACTIVE_CLASSES} classes.", "Try again when one has ended.")
        for _ in range(20):
            code = "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))
            if s.get(Classroom, code) is None:
                break
        else:  # pragma: no cover - 887 million codes, at most 200 in use
            raise ClassFull("No free class code was found.", "Try again.")
        expires = now + dt.timedelta(hours=hours)
        s.add(Classroom(code=code, teacher=_hash(key), created_at=now, expires_at=expires, updated_at=now))
        return Started(code, key, expires)

    return write(engine, go)


def end_class(code: str, key: str, engine: Engine | None = None) -> None:
    """End a class now and delete everything it stored. Raises :class:`ClassNotFound`, :class:`NotTheTeacher`."""
    code = normalise_code(code)
    engine = engine or get_engine()
    ensure_seeded(engine)

    def go(s: Any) -> None:
        now = _now()
        row = _teacher(s, code, key, now)
        row.expires_at = now
        s.flush()
        _sweep(s, now)

    try:
        write(engine, go)
    finally:
        _forget(engine, code)


def is_teacher(code: str, key: Any, engine: Engine | None = None) -> bool:
    """Whether ``key`` is the teacher key of the running class ``code``."""
    try:
        code = normalise_code(code)
        engine = engine or get_engine()
        ensure_seeded(engine)
        with session(engine) as s:
            _teacher(s, code, key, _now())
        return True
    except (ClassNotFound, NotTheTeacher):
        return False


def join_class(code: str, engine: Engine | None = None) -> str:
    """Join a running class; a new anonymous member id. Raises :class:`ClassNotFound`, :class:`ClassFull`."""
    code = normalise_code(code)
    engine = engine or get_engine()
    ensure_seeded(engine)
    member = secrets.token_urlsafe(12)

    def go(s: Any) -> str:
        now = _now()
        _class(s, code, now)
        members = select(func.count()).select_from(ClassMember).where(ClassMember.code == code)
        if s.scalar(members) >= MAX_MEMBERS:  # browsers gone for a while make room (their answers stay)
            s.execute(delete(ClassMember).where(ClassMember.code == code, ClassMember.last_seen < now - GONE))
        if s.scalar(members) >= MAX_MEMBERS:
            raise ClassFull(f"Class {code} already has {MAX_MEMBERS} members.")
        s.add(ClassMember(code=code, member=member, joined_at=now, last_seen=now, window_start=now))
        return member

    try:
        return write(engine, go)
    finally:
        _forget(engine, code)


def _query(query: Any) -> str:
    if not isinstance(query, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in query.items()):
        raise InvalidData("A page's address state must map names to texts.")
    text = json.dumps(dict(sorted(query.items())), ensure_ascii=False)
    if len(text.encode()) > MAX_QUERY_BYTES:
        raise InvalidData(f"The page's address is longer than {MAX_QUERY_BYTES:,} bytes: the class keeps following the "
                          "last shorter one.")
    return text


def lead(code: str, key: str, page: str, query: dict[str, str], engine: Engine | None = None) -> int:
    """The teacher shows ``page`` with ``query``: followers go there. Returns the class's version (changed only when
    the page or address did). Raises :class:`ClassNotFound`, :class:`NotTheTeacher`, :class:`InvalidData`."""
    code = normalise_code(code)
    if not isinstance(page, str) or not re.fullmatch(r"[a-z0-9_-]{0,64}", page):
        raise InvalidData(f"{str(page)[:40]!r} is not a page of the app.")
    text = _query(query)
    engine = engine or get_engine()
    ensure_seeded(engine)

    def go(s: Any) -> int:
        now = _now()
        row = _teacher(s, code, key, now)
        if (row.page, row.query) != (page, text):
            row.page, row.query = page, text
            _bump(row, now)
        return row.version

    try:
        return write(engine, go)
    finally:
        _forget(engine, code)


def _counts(s: Any, qid: int) -> dict[str, int]:
    rows = s.execute(select(ClassAnswer.answer, func.count()).where(ClassAnswer.question_id == qid)
                     .group_by(ClassAnswer.answer)).all()
    return dict(sorted(((a, n) for a, n in rows), key=lambda kv: (-kv[1], kv[0])))


def _question_state(s: Any, q: ClassQuestion) -> QuestionState:
    n = s.scalar(select(func.count()).select_from(ClassAnswer).where(ClassAnswer.question_id == q.id))
    return QuestionState(q.id, q.kind, q.context, q.prompt, tuple(json.loads(q.choices)), q.status, n, None,
                         _counts(s, q.id) if q.status == "revealed" else None)


#: A class's class-wide state as this process last read it, shared by every page of the process that polls it:
#: ``(engine url, code)`` -> (when read, monotonic; the state without the member's own answer). Writes made here drop
#: their class's entry at once; a write made by another replica reaches a poll within the poll's ``max_age``.
_NEWS: dict[tuple[str, str], tuple[float, ClassState]] = {}
#: Bumped when an entry is dropped, so a read that began before a write cannot store what it read after it.
_NEWS_GEN: dict[tuple[str, str], int] = {}
#: When this process last recorded each member's sighting, and with which ``following``.
_SEEN: dict[tuple[str, str, str], tuple[float, bool | None]] = {}
_NEWS_MOST = 512


def _forget(engine: Engine, code: str) -> None:
    key = (str(engine.url), code)
    _NEWS_GEN[key] = _NEWS_GEN.get(key, 0) + 1
    _NEWS.pop(key, None)


def _sighting(engine: Engine, code: str, member: str, following: bool | None, now: dt.datetime) -> bool:
    """Record that ``member`` polled (its last sighting, and ``following`` when given), at most every
    :data:`SEEN_EVERY` from this process unless ``following`` changed; whether it wrote. Raises
    :class:`ClassNotFound` for a member no longer in the class."""
    key = (str(engine.url), code, member)
    clock = time.monotonic()
    last = _SEEN.get(key)
    if last is not None and clock - last[0] < SEEN_EVERY.total_seconds() and (following is None or last[1] == following):
        return False

    def seen(s: Any) -> int:
        values: dict[str, Any] = {"last_seen": now}
        if following is not None:
            values["following"] = following
        return s.execute(update(ClassMember).where(ClassMember.code == code, ClassMember.member == member)
                         .values(**values)).rowcount

    if not write(engine, seen):
        _SEEN.pop(key, None)
        raise ClassNotFound(f"This browser is not in class {code} any more.", "Join the class again with its code.")
    if len(_SEEN) > 50 * _NEWS_MOST:
        _SEEN.clear()
    _SEEN[key] = (clock, following if following is not None else (last[1] if last else None))
    return True


def _class_wide(engine: Engine, code: str, now: dt.datetime, max_age: float) -> ClassState:
    """The class's state as every member sees it (no member's own answer), read at most ``max_age`` seconds ago."""
    key = (str(engine.url), code)
    clock = time.monotonic()
    cached = _NEWS.get(key)
    if cached is not None and clock - cached[0] <= max_age and cached[1].expires_at > now:
        return cached[1]
    gen = _NEWS_GEN.get(key, 0)
    with session(engine) as s:
        row = _class(s, code, now)
        recent = select(func.count()).select_from(ClassMember).where(ClassMember.code == code, ClassMember.last_seen > now - PRESENT)
        members = s.scalar(recent)
        following_n = s.scalar(recent.where(ClassMember.following.is_(True)))
        q = s.scalars(select(ClassQuestion).where(ClassQuestion.code == code, ClassQuestion.status != "closed")
                      .order_by(ClassQuestion.id.desc()).limit(1)).first()
        state = ClassState(code, row.page, json.loads(row.query), row.version, row.expires_at, members, following_n,
                           _question_state(s, q) if q else None)
    if max_age > 0 and _NEWS_GEN.get(key, 0) == gen:
        if len(_NEWS) >= _NEWS_MOST:
            _NEWS.clear()
        _NEWS[key] = (clock, state)
    return state


def class_state(code: str, member: str | None = None, following: bool | None = None,
                engine: Engine | None = None, max_age: float = 0.0) -> ClassState:
    """The class as a poll reads it (``member``: the polling student, whose last sighting and ``following`` are
    recorded, at most every :data:`SEEN_EVERY` unless ``following`` changed). Raises :class:`ClassNotFound`.

    ``max_age``: seconds for which this process may answer from the class-wide state it read last (its version, page,
    counts and open question), so that the 30 pages of a class polling every second cost about one read a
    ``max_age`` instead of 30 a second. A change written by this process is seen at once; one written by another
    replica within ``max_age``. The member's own answer is always read fresh. 0 (the default): read it all now."""
    code = normalise_code(code)
    if member is not None:
        member = _member_id(member)
    engine = engine or get_engine()
    ensure_seeded(engine)
    now = _now()
    state = _class_wide(engine, code, now, max_age)
    if member is None:
        return state
    if _sighting(engine, code, member, following, now) and max_age == 0:
        _forget(engine, code)  # the counts include this member as it is now
        state = _class_wide(engine, code, now, max_age)
    if state.question is None:
        return state
    with session(engine) as s:
        mine = s.scalar(select(ClassAnswer.answer).where(ClassAnswer.question_id == state.question.id,
                                                         ClassAnswer.member == member))
    return replace(state, question=replace(state.question, mine=mine))


def _text(value: Any, what: str, bound: int) -> str:
    if not isinstance(value, str):
        raise InvalidData(f"The {what} must be text.")
    text = " ".join(value.split())  # one line: no control characters reach a chart or a cell
    if not text:
        raise InvalidData(f"The {what} is empty.")
    if len(text) > bound or any(not ch.isprintable() for ch in text):
        raise InvalidData(f"The {what} must be printable text of at most {bound} characters.")
    return text


def ask(code: str, key: str, kind: str, context: str, prompt: str, choices: list[str] | tuple[str, ...] = (),
        engine: Engine | None = None) -> int:
    """The teacher asks the class (the open question, if any, is closed). ``kind``: ``word`` (a free word) or
    ``choice`` (one of ``choices``). Returns the question's id. Raises :class:`NotTheTeacher`, :class:`ClassFull`,
    :class:`InvalidData`."""
    code = normalise_code(code)
    if kind not in KINDS:
        raise InvalidData(f"Unknown kind of question {kind!r}.", f"Use one of {', '.join(KINDS)}.")
    if not isinstance(context, str) or not re.fullmatch(r"[A-Za-z0-9:_-]{1,64}", context):
        raise InvalidData("A question's context must be a short digest.")
    prompt = _text(prompt, "question", MAX_PROMPT_CHARS)
    options = list(dict.fromkeys(_text(c, "choice", MAX_ANSWER_CHARS) for c in choices))
    if (kind == "choice") != bool(options) or len(options) > MAX_CHOICES:
        raise InvalidData(f"A choice question has 1 to {MAX_CHOICES} choices; a word question none.")
    engine = engine or get_engine()
    ensure_seeded(engine)

    def go(s: Any) -> int:
        now = _now()
        row = _teacher(s, code, key, now)
        if s.scalar(select(func.count()).select_from(ClassQuestion).where(ClassQuestion.code == code)) >= MAX_QUESTIONS:
            raise ClassFull(f"Class {code} has asked {MAX_QUESTIONS} questions.", "Start a new class to ask more.")
        s.execute(update(ClassQuestion).where(ClassQuestion.code == code, ClassQuestion.status != "closed").values(status="closed"))
        q = ClassQuestion(code=code, kind=kind, context=context, prompt=prompt, choices=json.dumps(options), created_at=now)
        s.add(q)
        _bump(row, now)
        s.flush()
        return q.id

    try:
        return write(engine, go)
    finally:
        _forget(engine, code)


def _teacher_question(s: Any, code: str, key: str, qid: Any, now: dt.datetime) -> tuple[Classroom, ClassQuestion]:
    row = _teacher(s, code, key, now)
    q = s.get(ClassQuestion, qid) if type(qid) is int else None
    if q is None or q.code != code:
        raise ClassNotFound("That question is not in this class.")
    return row, q


def _move_question(code: str, key: str, question: int, to: str, engine: Engine | None) -> None:
    """The teacher moves a question on: ``open`` → ``revealed`` → ``closed`` (never back)."""
    code = normalise_code(code)
    engine = engine or get_engine()
    ensure_seeded(engine)

    def go(s: Any) -> None:
        now = _now()
        row, q = _teacher_question(s, code, key, question, now)
        if q.status == "open" or (q.status == "revealed" and to == "closed"):
            q.status = to
            if to == "revealed":
                q.revealed_at = now
            _bump(row, now)

    try:
        write(engine, go)
    finally:
        _forget(engine, code)


def reveal(code: str, key: str, question: int, engine: Engine | None = None) -> None:
    """The teacher reveals a question: answers are closed and counted for all to see."""
    _move_question(code, key, question, "revealed", engine)


def close_question(code: str, key: str, question: int, engine: Engine | None = None) -> None:
    """The teacher puts a question away (its answers stay until the class ends)."""
    _move_question(code, key, question, "closed", engine)


def answer(code: str, member: str, question: int, text: str, engine: Engine | None = None) -> str:
    """A member's answer to the open question (replacing its earlier one), stored as plain text; returns it as stored.

    Raises:
        ClassNotFound: no such class, member or question.
        InvalidData: an empty, multi-line-only, overlong answer, or one that is not among the choices.
        ClassRateLimited: more than :data:`ACTIONS_PER_MINUTE` actions this minute.
        ClassFull: the question has :data:`MAX_ANSWERS` answers.
    """
    code = normalise_code(code)
    member = _member_id(member)
    given = _text(text, "answer", MAX_ANSWER_CHARS)
    engine = engine or get_engine()
    ensure_seeded(engine)

    def go(s: Any) -> str:
        now = _now()
        _class(s, code, now)
        me = s.get(ClassMember, (code, member))
        q = s.get(ClassQuestion, question) if type(question) is int else None
        if me is None or q is None or q.code != code:
            raise ClassNotFound("That question or member is not in this class.", "Join the class again with its code.")
        if q.status != "open":
            raise InvalidData("Answers to this question are closed: the teacher has revealed it.")
        choices = json.loads(q.choices)
        stored = given.lower() if q.kind == "word" else given
        if choices and stored not in choices:
            raise InvalidData("Pick one of the question's choices.")
        _act(me, now)
        row = s.get(ClassAnswer, (q.id, member))
        if row is None:
            if s.scalar(select(func.count()).select_from(ClassAnswer).where(ClassAnswer.question_id == q.id)) >= MAX_ANSWERS:
                raise ClassFull(f"This question already has {MAX_ANSWERS} answers.")
            s.add(ClassAnswer(question_id=q.id, member=member, answer=stored, updated_at=now))
        else:
            row.answer, row.updated_at = stored, now
        return stored

    try:
        return write(engine, go)
    finally:
        _forget(engine, code)


def _act(me: ClassMember, now: dt.datetime) -> None:
    if now - me.window_start >= dt.timedelta(minutes=1):
        me.window_start, me.actions = now, 0
    if me.actions >= ACTIONS_PER_MINUTE:
        raise ClassRateLimited(f"{ACTIONS_PER_MINUTE} answers in a minute is the most a browser can send.",
                               "Wait a moment and answer again.")
    me.actions += 1
    me.last_seen = now


def stats(engine: Engine | None = None) -> dict[str, int]:
    """How many classes, members, questions and answers the database holds (for tests and the docs' bounds)."""
    engine = engine or get_engine()
    ensure_seeded(engine)
    with session(engine) as s:
        return {name: s.scalar(select(func.count()).select_from(table)) for name, table in
                (("classes", Classroom), ("members", ClassMember), ("questions", ClassQuestion), ("answers", ClassAnswer))}
