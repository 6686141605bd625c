"""Text that users type, made safe to store and to export (no torch, no streamlit).

Two jobs, one per direction:

- **In**: :func:`clean_name` and :func:`clean_note` normalise what a user enters (Unicode NFKC, so
  full-width or ligature look-alikes become the plain letters) and refuse what would let one name
  pass for another or break an export: control characters, line breaks in names, and invisible or
  bidirectional formatting characters (zero-width spaces, right-to-left overrides: Unicode categories
  Cc, Cf, Co, Cs, Zl, Zp). They raise ``ValueError`` with the reason; callers wrap it in their own error.
- **Out**: every CSV the app produces goes through :func:`csv_bytes`, which applies OWASP's CSV
  injection rule: a text cell that starts with ``=``, ``+``, ``-``, ``@``, a tab or a carriage return
  is prefixed with ``'`` so a spreadsheet shows it as text instead of running it as a formula.
  Numbers (numeric columns, and text that is a plain number such as ``-1.5``) stay numbers.
  :func:`restore_cell` undoes the prefix on import, so an exported file imports back unchanged.
  :func:`markdown_text` escapes a value for a Markdown table cell (pipes, line breaks, raw HTML,
  Markdown's emphasis and link characters).

Why hand-written: pandas and the csv module quote for CSV syntax only; neither knows spreadsheet
formulas (pandas has no such option), and no maintained library does this small job.
"""

from __future__ import annotations

import html
import re
import unicodedata
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

#: Characters that make a spreadsheet treat a cell as a formula (OWASP "CSV Injection").
FORMULA_TRIGGERS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?$")
_REFUSED_CATEGORIES = frozenset({"Cc", "Cf", "Co", "Cs", "Zl", "Zp"})
_MD_SPECIAL = re.compile(r"([\\`*_\[\]|#~])")


def _bad_char(text: str, allow: str = "") -> str | None:
    for ch in text:
        if ch in allow:
            continue
        if unicodedata.category(ch) in _REFUSED_CATEGORIES:
            return ch
    return None


def _describe(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" {name.lower()}" if name else "")


def _text(value: Any, field: str) -> str:
    """Text, or a number written as text; anything else (an object, a list, a bool) is refused."""
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"{field} must be text, not {type(value).__name__}")


def clean_name(value: Any, field: str, limit: int = 200, required: bool = False) -> str:
    """A name as stored: NFKC-normalised and stripped; refuses line breaks, control and invisible characters.

    Raises:
        ValueError: with the reason (which character, which field), or when empty but ``required``,
            or longer than ``limit`` characters.
    """
    text = "" if value is None else unicodedata.normalize("NFKC", _text(value, field))
    if (ch := _bad_char(text)) is not None:
        what = "a line break" if ch in "\r\n\u2028\u2029\x85" else f"an invisible or control character ({_describe(ch)})"
        raise ValueError(f"{field} contains {what}; names must be one line of visible text")
    text = text.strip()
    if required and not text:
        raise ValueError(f"{field} is required")
    if len(text) > limit:
        raise ValueError(f"{field} is longer than {limit} characters")
    return text


def clean_note(value: Any, field: str = "note", limit: int = 1000) -> str:
    """Free text (a note): like :func:`clean_name`, but line breaks and tabs are allowed."""
    text = "" if value is None else unicodedata.normalize("NFKC", _text(value, field)).replace("\r\n", "\n")
    if (ch := _bad_char(text, allow="\n\t")) is not None:
        raise ValueError(f"{field} contains an invisible or control character ({_describe(ch)})")
    text = text.strip()
    if len(text) > limit:
        raise ValueError(f"{field} is longer than {limit} characters")
    return text


def neutralise_cell(value: Any) -> Any:
    """A text cell made inert for spreadsheets (``'`` before a formula trigger); numbers and other values unchanged."""
    if not isinstance(value, str) or not value or not value.startswith(FORMULA_TRIGGERS):
        return value
    if _NUMBER.match(value.strip()):
        return value
    return "'" + value


def restore_cell(value: str) -> str:
    """Undo :func:`neutralise_cell` on a cell read back from an exported CSV."""
    if len(value) >= 2 and value[0] == "'" and value[1:].startswith(FORMULA_TRIGGERS):
        return value[1:]
    return value


def safe_frame(df: pd.DataFrame) -> pd.DataFrame:
    """A copy of ``df`` whose text cells, column names and index labels are neutralised (numeric columns untouched)."""
    import pandas as pd

    out = df.copy()
    for col in out.columns:
        if out[col].dtype == object or str(out[col].dtype) in ("string", "str"):
            # each distinct value neutralised once (a long-form export repeats a few hundred tokens millions of times)
            values = out[col].astype(object)
            try:
                distinct = pd.unique(values)
                out[col] = values.map(dict(zip(distinct, map(neutralise_cell, distinct), strict=True))).astype(object)
            except TypeError:  # unhashable cells (lists): one by one
                out[col] = values.map(neutralise_cell).astype(object)
    out.columns = [neutralise_cell(c) for c in out.columns]
    if out.index.dtype == object:
        out.index = out.index.map(neutralise_cell)
    return out


def csv_bytes(df: pd.DataFrame, index: bool = False) -> bytes:
    """``df`` as UTF-8 CSV with every text cell neutralised against formula injection."""
    return safe_frame(df).to_csv(index=index).encode("utf-8")


def markdown_text(value: Any) -> str:
    """A value escaped for one cell of a Markdown table: one line, no raw HTML, no accidental emphasis or links."""
    text = re.sub(r"[\r\n\u2028\u2029]+", " ", str(value))
    text = html.escape(text, quote=False)
    return _MD_SPECIAL.sub(r"\\\1", text)
