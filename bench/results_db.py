"""The results database: seeding, the page's queries, imports and concurrent writers, on SQLite and PostgreSQL.

    python bench/results_db.py            # SQLite, plus PostgreSQL when its server binaries are installed
    BFE_TEST_POSTGRES_URL=postgresql://... python bench/results_db.py
"""

from __future__ import annotations

import csv
import io
import sys
import tempfile
import threading
import time
from contextlib import nullcontext
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import glue, glue_plots
from analysis import results_db as db
from bench.timing import timed


def _import_file(n: int, tag: str) -> bytes:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["model", "variant", "task", "metric", "split", "value", "source"])
    for i in range(n):
        w.writerow([f"bench-{tag}", f"run {i}", "SST-2", "acc", "dev", 80 + (i % 100) / 10, "Liu et al. 2019, bench"])
    return out.getvalue().encode()


def run(label: str, url: str, fresh) -> None:
    db.dispose_engines()
    eng = db.get_engine(url)
    fresh(eng)
    t0 = time.perf_counter()
    report = db.ensure_seeded(eng)
    first = time.perf_counter() - t0
    reseed = timed(lambda: db.ensure_seeded(eng, force=True), runs=3)
    frame = timed(lambda: db.results_frame(eng))
    df = db.results_frame(eng)
    dev = df[(df["split"] == "dev") & (df["variant"] == "") & df["task"].isin(["MNLI", "QNLI", "QQP", "RTE", "SST-2", "MRPC", "CoLA", "STS-B"])]
    comp = timed(lambda: glue.compare(dev))
    chk = timed(lambda: glue.score_check(df))
    html = timed(lambda: glue_plots.to_html(glue.compare(dev)))
    t0 = time.perf_counter()
    db.import_csv(_import_file(1000, "imp"), eng)
    imp = time.perf_counter() - t0
    errors: list[BaseException] = []
    barrier = threading.Barrier(8)

    def writer(t: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                db.add_result(db.NewResult(model=f"bench-w{t}", variant=f"run {i}", task="SST-2", metric="acc", split="dev", value=90.0,
                              source="Liu et al. 2019, class re-run"), eng)
        except BaseException as err:
            errors.append(err)

    threads = [threading.Thread(target=writer, args=(t,)) for t in range(8)]
    t0 = time.perf_counter()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    conc = time.perf_counter() - t0
    print(f"\n{label}: {report.inserted} seed rows")
    print(f"  {'first seeding (create tables, insert the rows)':<50}{first * 1000:8.1f} ms")
    print(f"  {'re-seeding check (force, nothing changes)':<50}{reseed * 1000:8.1f} ms")
    print(f"  {'results_frame (all rows, joined)':<50}{frame * 1000:8.1f} ms")
    print(f"  {f'compare (GLUE dev, {len(dev)} rows)':<50}{comp * 1000:8.1f} ms")
    print(f"  {'compare + HTML table':<50}{html * 1000:8.1f} ms")
    print(f"  {'score_check (all aggregates)':<50}{chk * 1000:8.1f} ms")
    print(f"  {'import 1,000 rows (validated, one transaction)':<50}{imp * 1000:8.1f} ms")
    print(f"  {'8 threads x 50 add_result':<50}{conc * 1000:8.1f} ms  ({400 / conc:.0f} writes/s, errors: {len(errors)})")
    db.dispose_engines()


def main() -> None:
    tmp = Path(tempfile.mkdtemp(prefix="bfe-bench-"))
    run("SQLite (WAL, file)", f"sqlite:///{tmp / 'bench.db'}", lambda eng: None)
    try:
        from tests.helpers.postgres import PostgresMissing, postgres_server
        ctx = postgres_server()
    except ImportError:
        ctx = nullcontext(None)
    try:
        with ctx as url:
            if url:
                run("PostgreSQL (localhost)", url, db.drop_tables)
    except PostgresMissing as err:
        print(f"\nPostgreSQL skipped: {err}")


if __name__ == "__main__":
    main()
