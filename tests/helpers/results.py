"""The results database's test data: rows a user would import, the CSV file that carries them, one value looked up in
a frame, and how many results a database holds."""

from __future__ import annotations

import csv
import io

import pandas as pd


# ----------------------------------------------------------------------------- import and export
def csv_of(rows: list[dict], header: list[str] | None = None) -> bytes:
    """``rows`` as a CSV file's bytes (the header from the first row unless given)."""
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=header or list(rows[0]), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return out.getvalue().encode()


ROWS = [dict(model="Student BERT", task="MNLI", metric="acc_m", split="dev", value="80.1", source="Doe et al. 2026, course report",
             variant="", setting="single", table="Table 1", note="3 epochs", parameters="110000000"),
        dict(model="Student BERT", task="MNLI", metric="acc_mm", split="dev", value="80.9", source="Doe et al. 2026, course report",
             variant="", setting="single", table="Table 1", note="", parameters=""),
        dict(model="RoBERTa-large", task="RTE", metric="acc", split="test", value="88.2", source="Liu et al. 2019, class re-run", variant="re-run",
             setting="ensemble", table="Table 5", note="", parameters="")]


def value(df: pd.DataFrame, **where) -> float:
    """The one value of ``df`` whose columns equal ``where`` (fails unless exactly one row matches)."""
    rows = df
    for k, v in where.items():
        rows = rows[rows[k] == v]
    assert len(rows) == 1, (where, rows[["model", "variant", "task", "metric", "split", "source", "table"]])
    return float(rows["value"].iloc[0])


def count_results(engine, **where) -> int:
    """How many results ``engine``'s database holds, optionally only those whose columns equal ``where``."""
    from sqlalchemy import func, select

    from analysis import results_db as db

    with db.session(engine) as s:
        stmt = select(func.count()).select_from(db.Result)
        for k, v in where.items():
            stmt = stmt.where(getattr(db.Result, k) == v)
        return s.scalar(stmt)
