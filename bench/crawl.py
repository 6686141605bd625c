"""The whole state crawl (tests/helpers/crawl.py), page by page, with the states tried and the time each page took.

    python bench/crawl.py                      # every page: defaults, single moves, pairs, URL keys
    python bench/crawl.py scaling results      # the pages whose file name contains one of these words
    python bench/crawl.py --sample 4 --no-pairs

It builds the tiny models of the test suite in a temporary folder and gives each page a world of its own, as the
slow test does: a SQLite database with the labs seeded (finished experiments with verdicts, ``tests.helpers.lab.seed_lab``),
a copy of the tiny models, and a fresh copy of that world for each state that writes (``tests.helpers.crawl.Worlds``); the
pack page is crawled after a chart and a table were added elsewhere (``tests.helpers.crawl.preludes``). It runs the pages'
model calls in this process (as the AppTests do) and starts no lab worker (``BFE_LAB_CONCURRENCY=0``: a pressed Start
queues its runs). Prints one line per page and every failing state; exits 1 if any state failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def environment(root: Path) -> None:
    """The test suite's offline environment, in ``root`` (the tiny models in ``root/models``)."""
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf"), "BFE_MODEL_PROCESS": "0", "BFE_WARMUP": "0",
                       "BFE_LAB_CONCURRENCY": "0"})
    for k in ("BFE_ONLINE", "BFE_DEVICE"):
        os.environ.pop(k, None)
    from tests.helpers.tiny import build_all

    build_all(root / "models")


def page_world(root: Path, page: str) -> Any:
    """A world of the page's own under ``root``: a seeded database and a copy of the tiny models; returns its
    :class:`tests.helpers.crawl.Worlds` (a fresh copy for each state that writes)."""
    import shutil

    from analysis import results_db
    from tests.helpers import crawl
    from tests.helpers.lab import seed_lab

    here = root / Path(page).stem
    here.mkdir()
    results_db.dispose_engines()
    os.environ["DATABASE_URL"] = f"sqlite:///{here / 'results.db'}"
    os.environ["BFE_MODEL_DIR"] = str(here / "models")
    shutil.copytree(root / "models", here / "models")
    seed_lab()
    return crawl.Worlds(here / "worlds")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pages", nargs="*", help="only the pages whose file name contains one of these")
    ap.add_argument("--sample", type=int, default=None, help="every n-th single move, no pairs")
    ap.add_argument("--no-pairs", action="store_true")
    ap.add_argument("--pair-cap", type=int, default=3)
    ap.add_argument("--verbose", "-v", action="store_true", help="print every state")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bfe-crawl-") as tmp:
        environment(Path(tmp))
        from tests.helpers import crawl

        chosen = [p for p in crawl.pages() if not args.pages or any(w in p for w in args.pages)]
        t0, total, failures = time.perf_counter(), 0, []
        for page in chosen:
            fresh = page_world(Path(tmp), page)
            result = crawl.crawl_page(page, pairs=not args.no_pairs, pair_cap=args.pair_cap, sample=args.sample,
                                      log=print if args.verbose else None, prelude=crawl.preludes(page), fresh=fresh)
            print(result.line(), flush=True)
            for f in result.failures:
                print("  FAIL", f, flush=True)
            total += result.states
            failures += result.failures
        print(f"all: {total} states on {len(chosen)} pages, {len(failures)} failing, {time.perf_counter() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
