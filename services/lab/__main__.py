"""``python -m services.lab worker --slots N``: the labs' headless training worker (:func:`serve_worker`)."""

from __future__ import annotations

import logging
import sys

from core.errors import InvalidConfig
from services.lab.supervisor import serve_worker


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the worker until it is stopped, and return the exit status (2: bad arguments)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m services.lab", description="The labs' headless training worker.")
    commands = parser.add_subparsers(dest="command", required=True)
    worker = commands.add_parser("worker", help="claim queued runs from the shared database and train them on this machine")
    worker.add_argument("--slots", type=int, default=1, help="runs trained at once on this machine (1-64)")
    worker.add_argument("--interval", type=float, default=5.0, help="seconds between looks at the queue")
    worker.add_argument("--once", action="store_true", help="dispatch once and exit (the started runs go on)")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    try:
        started = serve_worker(args.slots, max(0.5, min(args.interval, 3600.0)), args.once)
    except InvalidConfig as err:
        print(err, file=sys.stderr)
        return 2
    print(f"lab worker: started {started} run(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
