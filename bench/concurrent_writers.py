"""Concurrent writer *processes* on the results database: attempted, stored, refused, latency.

    python bench/concurrent_writers.py                 # SQLite (fresh file, seeded file) and a local PostgreSQL
    python bench/concurrent_writers.py --processes 16 --rounds 10

Each round, every process adds a different result citing one brand-new source at the same moment
(a barrier): the case where one new source is created by many writers at once. Prints one line per backend: writes attempted,
stored, refused, errors, p50 and p95 latency of an add, and the slowest first start.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import results_db as db
from tests.helpers import db_stress
from tests.helpers.postgres import PostgresMissing, postgres_server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--processes", type=int, default=8)
    ap.add_argument("--rounds", type=int, default=10)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bfe-bench-writers-"))
    fresh = f"sqlite:///{tmp / 'fresh.db'}"
    print("SQLite, fresh file:  ", db_stress.run(fresh, args.processes, args.rounds).summary(), flush=True)
    seeded = f"sqlite:///{tmp / 'seeded.db'}"
    db.ensure_seeded(db.get_engine(seeded))
    db.dispose_engines()
    print("SQLite, seeded file: ", db_stress.run(seeded, args.processes, args.rounds).summary(), flush=True)
    try:
        with postgres_server() as url:
            print("PostgreSQL, empty:   ", db_stress.run(url, args.processes, args.rounds).summary(), flush=True)
    except PostgresMissing as err:
        print(f"PostgreSQL: skipped ({err})")


if __name__ == "__main__":
    main()
