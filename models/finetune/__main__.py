"""``python -m models.finetune --model ID --task wic --mode frozen``: one fine-tuning run from a shell (:mod:`.cli`)."""

import sys

from models.finetune.cli import main

if __name__ == "__main__":
    sys.exit(main())
