"""The class's use cases: a teacher starts a class and projects its join link and QR code, students join and follow the
teacher's page, and the teacher asks the class what a page will show before revealing it beside the model's answer.

The class itself (codes, keys, members, questions, answers, their bounds) lives in the results database
(:mod:`analysis.results_db.classes`), so every replica behind a proxy sees the same class; this module adds what a
page needs around it: the join link and its QR code, the page a follower should be on, a question's context
digest, and the reveal's figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from analysis.class_rules import (
    DEFAULT_HOURS,
    MAX_ANSWER_CHARS,
    MAX_HOURS,
    MIN_HOURS,
    ClassFull,
    ClassNotFound,
    ClassRateLimited,
    NotTheTeacher,
)
from core.errors import InvalidData

if TYPE_CHECKING:
    from analysis.results_db.classes import ClassState, QuestionState

__all__ = ["DEFAULT_HOURS", "MAX_ANSWER_CHARS", "MAX_HOURS", "MIN_HOURS", "ClassFull", "ClassNotFound", "ClassRateLimited",
           "Follow", "NotTheTeacher", "answer", "ask", "class_state", "close_question", "context", "end_class",
           "follow_target", "is_teacher", "join_class", "join_link", "lead", "normalise_code", "qr_svg", "reveal",
           "reveal_figure", "start_class", "teacher_query"]

# The class's reads and writes are the results database's (analysis.results_db.classes, which documents them and
# their exceptions); each is imported on first use, so a page outside a class does not load the database layer.
def _stored() -> Any:
    from analysis.results_db import classes

    return classes


def normalise_code(code: Any) -> str:
    """A class code as a student typed it (any case, with spaces or dashes), as the class stores it: the code a seat
    keeps and a join link carries. :class:`ClassNotFound` for anything that cannot be a code, so a malformed code
    reads like an unknown one (:func:`analysis.class_rules.normalise_code`)."""
    from analysis.class_rules import normalise_code as normalise

    return normalise(code)


def context(*parts: Any) -> str:
    """A question's context: a short digest of what the page's answer depends on (the page, the model, the input), so
    that a class's question is shown only on a page whose answer it is about (:func:`analysis.class_rules.context`)."""
    from analysis.class_rules import context as digest

    return digest(*parts)


def start_class(hours: int = DEFAULT_HOURS) -> Any:
    """A new class for ``hours``: its code, teacher key and end (:func:`analysis.results_db.classes.start_class`)."""
    return _stored().start_class(hours)


def end_class(code: str, key: str) -> None:
    """End a class now, with everything it stored."""
    _stored().end_class(code, key)


def is_teacher(code: str, key: Any) -> bool:
    """Whether ``key`` leads the running class ``code``."""
    return _stored().is_teacher(code, key)


def join_class(code: str) -> str:
    """Join a running class: a new anonymous member id."""
    return _stored().join_class(code)


def class_state(code: str, member: str | None = None, following: bool | None = None, max_age: float = 0.0) -> ClassState:
    """The class as a member's (or the teacher's) poll reads it; ``max_age``: how many seconds old the class-wide
    part may be when another page of this process read it (:func:`analysis.results_db.classes.class_state`)."""
    return _stored().class_state(code, member, following, max_age=max_age)


def lead(code: str, key: str, page: str, query: dict[str, str]) -> int:
    """The teacher shows ``page`` with ``query``; the class's version."""
    return _stored().lead(code, key, page, query)


def ask(code: str, key: str, kind: str, context_digest: str, prompt: str, choices: list[str] | tuple[str, ...] = ()) -> int:
    """The teacher asks the class; the question's id."""
    return _stored().ask(code, key, kind, context_digest, prompt, choices)


def reveal(code: str, key: str, question: int) -> None:
    """The teacher reveals a question: answers closed and counted for all."""
    _stored().reveal(code, key, question)


def close_question(code: str, key: str, question: int) -> None:
    """The teacher puts a question away."""
    _stored().close_question(code, key, question)


def answer(code: str, member: str, question: int, text: str) -> str:
    """A member's answer to the open question, as stored."""
    return _stored().answer(code, member, question, text)


#: Address parameters that belong to one viewer and never travel to followers: presentation mode, the class itself.
PRIVATE_PARAMS = frozenset({"present", "class"})
#: The longest address a QR code carries (a join link is about 60 characters).
MAX_LINK_CHARS = 300


def join_link(page_url: str, code: str) -> str:
    """The link that joins class ``code`` from any page: the app's address (scheme, host, path's root) with
    ``?class=CODE``. ``page_url``: the address the teacher's browser shows ("" in tests: a relative link)."""
    code = normalise_code(code)
    parts = urlsplit(page_url or "")
    if not parts.scheme or not parts.netloc:
        return f"/?class={code}"
    return urlunsplit((parts.scheme, parts.netloc, "/", f"class={code}", ""))


def qr_svg(link: str) -> str:
    """The join link as a QR code, an inline SVG (segno: pure Python, no image library) scaled for a projector."""
    import segno

    if not isinstance(link, str) or not 0 < len(link) <= MAX_LINK_CHARS:
        raise InvalidData("A join link is a short address.")
    return segno.make(link, error="m").svg_inline(scale=6, border=2, dark="#000000", light="#ffffff")


def teacher_query(query: dict[str, Any]) -> dict[str, str]:
    """What of the teacher's address followers get: every parameter but the viewer's own (:data:`PRIVATE_PARAMS`)."""
    return {str(k): str(v) for k, v in query.items() if k not in PRIVATE_PARAMS}


@dataclass(frozen=True)
class Follow:
    """Where a follower goes: the teacher's page (its url path, "" for the home page) and address."""

    page: str
    query: dict[str, str]


def follow_target(state: ClassState, page: str, query: dict[str, Any]) -> Follow | None:
    """Where a follower on ``page`` with ``query`` must go to show what the teacher shows (None: it is there, or the
    teacher has shown no page yet)."""
    if not state.version and not state.page and not state.query:
        return None
    mine = teacher_query(query)
    if state.page == page and state.query == mine:
        return None
    return Follow(state.page, dict(state.query))


def reveal_figure(question: QuestionState, model: dict[str, float] | None = None, *, model_label: str = "model",
                  value_label: str = "probability") -> Any:
    """The revealed question's chart: the class's answers beside the model's (:func:`analysis.class_plots.reveal_figure`)."""
    from analysis.class_plots import reveal_figure as figure

    return figure(question.counts or {}, model, title=question.prompt, model_label=model_label, value_label=value_label)
