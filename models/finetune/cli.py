"""BERT's second half: fine-tune any model on a downstream task, against the frozen encoder and against the same
architecture from random initialisation, and measure what fine-tuning changed, layer by layer.

The command line, ``python -m models.finetune``: one run, its scores printed as JSON (the first paragraph above is
its ``--help`` description).
"""

from __future__ import annotations

import json

from core.errors import ExplorerError
from models.finetune.config import TRAINING_MODES, FineTuneConfig
from models.finetune.loop import finetune


def main(argv: list[str] | None = None) -> int:
    """``python -m models.finetune --model ID --task wic|supersense|file.csv --mode finetune|frozen|random --seed N``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m models.finetune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=FineTuneConfig.model)
    parser.add_argument("--task", default=FineTuneConfig.task)
    parser.add_argument("--mode", default=FineTuneConfig.mode, choices=list(TRAINING_MODES))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=FineTuneConfig.epochs)
    parser.add_argument("--lr", type=float, default=None)
    parser.add_argument("--batch", type=int, default=FineTuneConfig.batch)
    parser.add_argument("--max-train", type=int, default=FineTuneConfig.max_train)
    parser.add_argument("--max-test", type=int, default=FineTuneConfig.max_test)
    parser.add_argument("--max-len", type=int, default=FineTuneConfig.max_len)
    parser.add_argument("--layer", default=FineTuneConfig.layer)
    parser.add_argument("--run", default="")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args(argv)
    config = FineTuneConfig(model=args.model, task=args.task, mode=args.mode, seed=args.seed, epochs=args.epochs, lr=args.lr,
                            batch=args.batch, max_train=args.max_train, max_test=args.max_test, max_len=args.max_len,
                            layer=args.layer, run=args.run)
    try:
        config.validate()
        result = finetune(config, on_epoch=lambda r: print(f"epoch {r['epoch']}: train loss {r['train_loss']:.4f}, "
                                                             f"validation accuracy {r['validation_accuracy']:.3f}", file=sys.stderr, flush=True),
                          save=not args.no_save)
    except ExplorerError as err:
        print(err, file=sys.stderr)
        return 2
    print(json.dumps(result.summary(), indent=1, default=str))
    return 0
