"""``python -m models.pretrain --objective mlm+sop --steps 300 --run my-albert-like``: train one run from a shell."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict

from core.errors import ExplorerError
from models.pretrain.config import TrainConfig


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.pretrain", description=__doc__.split("\n\n")[0])
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        flag = f"--{name.replace('_', '-')}"
        if isinstance(value, bool):  # type=bool would read "--pack False" as True (any non-empty string)
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=value)
        else:
            parser.add_argument(flag, type=type(value), default=value)
    args = parser.parse_args(argv)
    config = TrainConfig(**{k: getattr(args, k) for k in asdict(defaults)})
    try:
        config.validate()  # the whole config, the run's name included, before torch is even imported
    except ExplorerError as err:
        print(err, file=sys.stderr)
        return 2
    from models.pretrain.loop import train

    try:
        result = train(config, on_progress=lambda s, loss, t: print(f"step {s:6d}  loss {loss:8.4f}  {t:7.1f} s", flush=True)
                       if s % max(1, config.steps // 20) == 0 else None)
    except ExplorerError as err:
        print(err, file=sys.stderr)
        return 1
    if result.rank:
        return 0  # the main process reports
    print(json.dumps({"checkpoint": result.checkpoint, "processes": result.processes, "evaluation": result.evaluation, "seconds": round(result.seconds, 1),
                      "tokens_per_second": round(result.tokens_per_second), "parameters": result.parameters,
                      "stopped": result.stopped}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
