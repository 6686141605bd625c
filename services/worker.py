"""The lab's worker process: ``python -m services.worker <run id>``, started by :func:`services.lab.dispatch`.

It trains the claimed run (:func:`services.lab.work`: pre-training, with the downstream suite where the preset
asks for one, or fine-tuning), then settles the experiment's verdicts once its last run has ended
(:func:`services.lab.experiments.settle`), so a verdict is stored even if nobody has the page open.
"""

from __future__ import annotations

import logging
import sys

from core.errors import ExplorerError
from services import lab
from services.lab import experiments

log = logging.getLogger("bert_family_explorer")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or not args[0].isdigit():
        print("usage: python -m services.worker <run id>   (started by the lab's queue; see python -m models.pretrain)",
              file=sys.stderr)
        return 2
    run_id = int(args[0])
    print(lab.work(run_id), flush=True)
    try:
        from analysis.results_db import runs

        experiments.settle(runs.get_run(run_id)["group"])
    except ExplorerError as err:  # the run itself is closed; a verdict that cannot be stored now is stored by the next settle
        log.warning("Could not settle the verdicts after run %s: %s", run_id, err)
    return 0


if __name__ == "__main__":
    sys.exit(main())
