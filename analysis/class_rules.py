"""The bounds of a class that follows its teacher (:mod:`analysis.results_db.classes` enforces them) and how a question
names what it is about, apart so that a page can use them without importing the database layer (SQLAlchemy) on pages
that need none."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from core.errors import ExplorerError

#: The letters and digits of a code: no 0/O, 1/I/L, which a class reads off a projector wrongly.
CODE_ALPHABET = "ABCDEFGHJKMNPQRSTUVWXYZ23456789"
CODE_LENGTH = 6
MIN_HOURS, MAX_HOURS, DEFAULT_HOURS = 1, 12, 3
MAX_ACTIVE_CLASSES = 200
MAX_MEMBERS = 500
MAX_QUESTIONS = 200
MAX_ANSWERS = 500
MAX_ANSWER_CHARS = 40
MAX_PROMPT_CHARS = 300
MAX_CHOICES = 64
MAX_QUERY_BYTES = 4096
ACTIONS_PER_MINUTE = 30
_CODE = re.compile(f"[{CODE_ALPHABET}]{{{CODE_LENGTH}}}")


class ClassNotFound(ExplorerError, LookupError):
    """No class has this code now: mistyped, ended by its teacher, or expired."""


class NotTheTeacher(ExplorerError, PermissionError):
    """A teacher's action without the class's teacher key."""


class ClassFull(ExplorerError):
    """A bound of the classes (classes at once, members, questions, answers) is reached."""


class ClassRateLimited(ExplorerError):
    """A member acted more than :data:`ACTIONS_PER_MINUTE` times in a minute."""


def normalise_code(text: Any) -> str:
    """A typed code as stored: upper case, spaces and dashes dropped. Raises :class:`ClassNotFound` for anything
    that cannot be a code (wrong length or letters), so a malformed code reads like an unknown one."""
    if not isinstance(text, str) or len(text) > 40:
        raise ClassNotFound("That is not a class code.", f"A class code is {CODE_LENGTH} letters and digits, e.g. K7MQ2X.")
    code = re.sub(r"[\s-]", "", text).upper()
    if not _CODE.fullmatch(code):
        raise ClassNotFound(f"{code[:12]!r} is not a class code.",
                            f"A class code is {CODE_LENGTH} letters and digits (no 0, O, 1, I or L), e.g. K7MQ2X.")
    return code


def context(*parts: Any) -> str:
    """A question's context: a short digest of what the page's answer depends on (the page, the model, the input), so
    a question is shown only where its answer is on the page."""
    text = json.dumps([str(p) for p in parts], ensure_ascii=False)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
