"""What users write: one result (:func:`add_result`), a CSV of them (:func:`import_csv`), a deletion.

Every write runs in one transaction through :func:`analysis.results_db.engine.write`, so it is stored
whole or not at all and survives concurrent writers: a source or model that another process creates
at the same moment is reused (insert-or-get: ``INSERT … ON CONFLICT DO NOTHING`` then a select), and a
transaction that still loses a race is run again, after which a true duplicate is reported as one,
with the value already stored.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import asdict, dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from analysis.results_db.csvio import parse_csv
from analysis.results_db.engine import get_engine, session, write
from analysis.results_db.schema import Model, Result, Source
from analysis.results_db.seeding import ensure_seeded
from analysis.results_db.validation import _YEAR, Lookup, Row, validate
from core.errors import DuplicateResult, InvalidResult


def _source_key(citation: str) -> str:
    """A stable key for a user's citation: a readable slug plus a hash of the whole text (no two citations share one)."""
    norm = citation.lower()
    slug = re.sub(r"[^a-z0-9]+", "-", norm).strip("-")[:40]
    return f"user:{slug}-{hashlib.sha256(norm.encode()).hexdigest()[:10]}"


def _insert_or_get(s: Session, cls: type, column: str, values: dict[str, Any]) -> int:
    """The id of the row of ``cls`` whose unique ``column`` equals ``values[column]``, inserting it if absent.

    Safe under concurrency: when another transaction inserts the same key first, this one waits for it
    and then reuses its row instead of failing on the unique constraint.
    """
    dialect = s.get_bind().dialect.name
    if dialect in ("sqlite", "postgresql"):
        if dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        else:
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        s.execute(dialect_insert(cls).values(**values).on_conflict_do_nothing(index_elements=[column]))
    else:  # any other database: a savepoint keeps the outer transaction usable after a clash
        try:
            with s.begin_nested():
                s.add(cls(**values))
        except IntegrityError:
            pass
    found = s.scalar(select(cls.id).where(getattr(cls, column) == values[column]))
    if found is None:  # pragma: no cover - the insert or the winner's row must be there
        raise IntegrityError("insert-or-get found no row", None, Exception(column))
    return found


def _source_id(s: Session, look: Lookup, citation: str) -> int:
    if citation.lower() in look.user_sources:
        return look.user_sources[citation.lower()]
    year = _YEAR.search(citation)
    found = _insert_or_get(s, Source, "key", dict(key=_source_key(citation), title=citation,
                                                  year=int(year.group(0)) if year else None, origin="user"))
    look.user_sources[citation.lower()] = found
    return found


def _model_id(s: Session, look: Lookup, row: Row) -> int:
    if row.model.lower() in look.models:
        return look.models[row.model.lower()]
    found = _insert_or_get(s, Model, "name", dict(name=row.model, family=row.family, parameters=row.parameters, origin="user"))
    look.models[row.model.lower()] = found
    return found


def _store(s: Session, look: Lookup, row: Row) -> Result:
    obj = Result(model_id=_model_id(s, look, row), variant=row.variant, metric_id=row.metric_id, split=row.split,
                 setting=row.setting, value=row.value, source_id=_source_id(s, look, row.source), source_table=row.table,
                 snapshot=row.snapshot, note=row.note, origin="user")
    s.add(obj)
    return obj


def _stored_value(s: Session, look: Lookup, row: Row) -> float | None:
    """The value already stored under ``row``'s natural key, or None (a new model or source has nothing stored)."""
    model_id, source_id = look.models.get(row.model.lower()), look.user_sources.get(row.source.lower())
    if model_id is None or source_id is None:
        return None
    return s.scalar(select(Result.value).where(
        Result.model_id == model_id, Result.variant == row.variant, Result.metric_id == row.metric_id, Result.split == row.split,
        Result.setting == row.setting, Result.source_id == source_id, Result.source_table == row.table))


def _duplicate_message(row: Row, stored: float) -> str:
    return f"{row.label} from {row.source} {row.table}".strip() + f" is already stored (value {stored:g})"


@dataclass(frozen=True)
class StoredResult:
    """A stored result's id, and a warning when its value looks like a fraction on a percent scale."""

    id: int
    warning: str = ""


@dataclass(frozen=True)
class NewResult:
    """One result a user reports, as typed (:func:`add_result` checks every field: the types say what is expected,
    not what was checked). ``setting``: single or ensemble; ``snapshot``: a leaderboard date, YYYY-MM-DD;
    ``parameters``: the model's size, a whole count (110000000)."""

    model: str
    task: str
    metric: str
    split: str
    value: float | str
    source: str
    variant: str = ""
    setting: str = ""
    table: str = ""
    snapshot: str = ""
    note: str = ""
    parameters: int | str = ""
    family: str = ""


def add_result(new: NewResult, engine: Engine | None = None) -> StoredResult:
    """Validate and store one result a user reports (:class:`NewResult`); returns its id and the validation's warning
    (the one way to add a result: :func:`services.results.add` and the page call it). A new model name creates a
    model; the source is a citation with a year (a published source's key is refused: a user's row never passes for a
    published one).

    Raises:
        InvalidResult: unknown task or metric, value out of range, no source, malformed field.
        DuplicateResult: the same result is already stored.
        DatabaseUnavailable: the database is read-only, locked or unreachable (nothing is saved).
    """
    engine = engine or get_engine()
    ensure_seeded(engine)

    def store(s: Session) -> StoredResult:
        look = Lookup.read(s)
        try:
            row = validate(asdict(new), look)
        except ValueError as err:
            raise InvalidResult(f"Not saved: {err}.", "Fix the field and try again.", [(None, str(err))]) from None
        stored = _stored_value(s, look, row)
        if stored is not None:
            raise DuplicateResult(f"Not saved: {_duplicate_message(row, stored)}.",
                                  "Change the variant, split or table if this is a different result.")
        obj = _store(s, look, row)
        s.flush()
        return StoredResult(obj.id, row.warning)

    try:
        return write(engine, store)
    except IntegrityError:  # still clashing after every retry: report it, nothing was stored
        raise DuplicateResult("Not saved: this result was stored by someone else a moment ago.", "Reload to see it.") from None


@dataclass
class ImportReport:
    """What :func:`import_csv` stored."""

    rows: int
    ids: list[int]


def import_csv(raw: bytes, engine: Engine | None = None) -> ImportReport:
    """Import results from CSV bytes: every row is validated first and all are stored in one transaction, or none.

    Raises:
        InvalidResult: with ``errors`` = [(line, message), ...] (line 1 is the header) when any row fails;
            also for an empty, oversized, non-UTF-8 or malformed file, or wrong columns.
        DatabaseUnavailable: the database is read-only, locked or unreachable (nothing is saved).
    """
    engine = engine or get_engine()
    rows = parse_csv(raw)
    ensure_seeded(engine)

    def store(s: Session) -> ImportReport:
        look = Lookup.read(s)
        errors: list[tuple[int | None, str]] = []
        checked: list[Row] = []
        seen: dict[tuple, int] = {}
        for line, raw_row in enumerate(rows, start=2):
            if "__extra__" in raw_row:
                errors.append((line, "more cells than columns (a comma inside a value needs quotes)"))
                continue
            try:
                row = validate(raw_row, look)
            except ValueError as err:
                errors.append((line, str(err)))
                continue
            if row.key() in seen:
                errors.append((line, f"the same result as line {seen[row.key()]}"))
            elif (stored := _stored_value(s, look, row)) is not None:
                errors.append((line, _duplicate_message(row, stored)))
            seen.setdefault(row.key(), line)
            checked.append(row)
        if errors:
            raise InvalidResult(f"Nothing imported: {len(errors)} of {len(rows)} row(s) have problems.",
                                "Fix the lines listed and import the file again.", errors)
        stored_rows = [_store(s, look, row) for row in checked]
        s.flush()
        return ImportReport(len(stored_rows), [o.id for o in stored_rows])

    try:
        return write(engine, store)
    except IntegrityError:
        raise DuplicateResult("Nothing imported: some of these results were stored by someone else meanwhile.",
                              "Reload and import again; the duplicates will be listed by line.") from None


def delete_result(result_id: int, engine: Engine | None = None) -> None:
    """Delete a result a user added. Seed results cannot be deleted (they come back with the data).

    Raises:
        InvalidResult: not an id, no such result, or a seed result.
    """
    if isinstance(result_id, bool) or not isinstance(result_id, int | str) or not re.fullmatch(r"\d{1,18}", str(result_id).strip()):
        raise InvalidResult(f"{str(result_id)[:40]!r} is not a result id.", "Pick a row of the table.")
    rid = int(str(result_id).strip())
    engine = engine or get_engine()
    with session(engine, write=True) as s:
        obj = s.get(Result, rid)
        if obj is None:
            raise InvalidResult(f"There is no result with id {rid}.", "Reload the table.")
        if obj.origin != "user":
            raise InvalidResult("Published results from the slides cannot be deleted.", "Only results you added can be.")
        s.delete(obj)
