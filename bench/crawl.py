"""The whole state crawl (tests/crawl.py), page by page, with the states tried and the time each page took.

    python bench/crawl.py                      # every page: defaults, single moves, pairs, URL keys
    python bench/crawl.py scaling results      # the pages whose file name contains one of these words
    python bench/crawl.py --sample 4 --no-pairs

It builds the tiny models of the test suite in a temporary folder, uses a fresh SQLite database, runs the pages' model
calls in this process (as the AppTests do) and starts no lab worker (``BFE_LAB_CONCURRENCY=0``: a pressed Start queues
its runs). Prints one line per page and every failing state; exits 1 if any state failed.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def environment(root: Path) -> None:
    """The test suite's offline environment, in ``root``."""
    os.environ.update({"HF_HUB_OFFLINE": "1", "HF_HOME": str(root / "hf"), "BFE_MODEL_PROCESS": "0", "BFE_WARMUP": "0",
                       "BFE_LAB_CONCURRENCY": "0", "DATABASE_URL": f"sqlite:///{root / 'results.db'}",
                       "BFE_MODEL_DIR": str(root / "models")})
    for k in ("BFE_ONLINE", "BFE_DEVICE"):
        os.environ.pop(k, None)
    from tests.tiny import build_all

    build_all(root / "models")


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
        from tests import crawl

        chosen = [p for p in crawl.pages() if not args.pages or any(w in p for w in args.pages)]
        t0, total, failures = time.perf_counter(), 0, []
        for page in chosen:
            result = crawl.crawl_page(page, pairs=not args.no_pairs, pair_cap=args.pair_cap, sample=args.sample,
                                      log=print if args.verbose else None)
            print(result.line(), flush=True)
            for f in result.failures:
                print("  FAIL", f, flush=True)
            total += result.states
            failures += result.failures
        print(f"all: {total} states on {len(chosen)} pages, {len(failures)} failing, {time.perf_counter() - t0:.0f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
