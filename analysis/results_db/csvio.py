"""The import and export format of the results database: CSV, bounded on the way in, inert on the way out.

:func:`parse_csv` checks an upload's size, encoding, header and row count before anything is
validated (limits: :data:`MAX_IMPORT_BYTES`, :data:`MAX_IMPORT_ROWS`). :func:`export_rows` writes
results in exactly the import format, with spreadsheet formulas neutralised
(:func:`analysis.safe_text.csv_bytes`); :func:`parse_csv` undoes that, so an export imports back as it was.
"""

from __future__ import annotations

import csv
import io

from analysis.safe_text import csv_bytes, restore_cell
from core.errors import InvalidResult

MAX_IMPORT_BYTES = 1_000_000
MAX_IMPORT_ROWS = 5_000
IMPORT_COLUMNS = ("model", "task", "metric", "split", "value", "source")
OPTIONAL_COLUMNS = ("variant", "setting", "table", "snapshot", "note", "parameters", "family")
EXPORT_COLUMNS = ("model", "variant", "task", "metric", "split", "setting", "value", "source", "table", "slides", "snapshot", "note",
                  "parameters", "family")


def parse_csv(raw: bytes) -> list[dict[str, str]]:
    """An import file as rows, after the size, encoding and header checks. Raises :class:`InvalidResult`."""
    if not isinstance(raw, bytes | bytearray):
        raise InvalidResult("An import must be the bytes of a CSV file.", "Upload a .csv file.")
    if len(raw) > MAX_IMPORT_BYTES:
        raise InvalidResult(f"The file is {len(raw) / 1e6:.1f} MB; imports are limited to {MAX_IMPORT_BYTES / 1e6:.0f} MB.",
                            "Split it into smaller files.")
    if not raw.strip():
        raise InvalidResult("The file is empty.", "Export a CSV from the page to see the expected columns.")
    try:
        decoded = bytes(raw).decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise InvalidResult(f"The file is not UTF-8 text (byte {err.start} cannot be read).",
                            "Save it as CSV UTF-8 (in Excel: File → Save As → CSV UTF-8).") from None
    if "\x00" in decoded:
        raise InvalidResult("The file contains NUL bytes; it is not a text CSV.", "Save it as CSV UTF-8.")
    try:
        reader = csv.DictReader(io.StringIO(decoded, newline=""))
        header = [h.strip().lower() for h in (reader.fieldnames or [])]
        rows = []
        for i, row in enumerate(reader):
            if i >= MAX_IMPORT_ROWS:
                raise InvalidResult(f"The file has more than {MAX_IMPORT_ROWS:,} rows.", "Split it into smaller files.")
            rows.append(row)
    except csv.Error as err:
        raise InvalidResult(f"The file is not a well-formed CSV ({err}).", "Save it as comma-separated values with a header row.") from None
    missing = [c for c in IMPORT_COLUMNS if c not in header]
    if missing:
        raise InvalidResult(f"Missing column(s): {', '.join(missing)}. The header reads: {', '.join(h[:30] for h in header[:20]) or '(nothing)'}.",
                            f"Required: {', '.join(IMPORT_COLUMNS)}; optional: {', '.join(OPTIONAL_COLUMNS)}.")
    unknown = [c for c in header if c not in IMPORT_COLUMNS + OPTIONAL_COLUMNS + ("slides",)]
    if unknown:
        raise InvalidResult(f"Unknown column(s): {', '.join(c[:30] for c in unknown[:20])}.",
                            f"Required: {', '.join(IMPORT_COLUMNS)}; optional: {', '.join(OPTIONAL_COLUMNS)}.")
    if not rows:
        raise InvalidResult("The file has a header but no rows.", "Add one row per result.")
    out = []
    for row in rows:
        if None in row:  # more cells than header columns
            out.append({"__extra__": "1"})
            continue
        out.append({k.strip().lower(): restore_cell(v or "") for k, v in row.items() if k is not None})
    return out


def export_rows(df) -> bytes:
    """Results in the import format (UTF-8 CSV, formulas neutralised): exporting and importing again round-trips."""
    out = df.assign(snapshot=df["snapshot"].map(lambda d: d.isoformat() if hasattr(d, "isoformat") else ""),
                    source=[t if k.startswith("user:") else k for k, t in zip(df["source"], df["title"], strict=True)],
                    parameters=[str(int(p)) if p == p and p is not None else "" for p in df["parameters"]])
    return csv_bytes(out.loc[:, list(EXPORT_COLUMNS)])
