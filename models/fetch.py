"""The classroom kit: download checkpoints once, run offline later.

    python -m models.fetch --list                   # what is available here, and from where
    python -m models.fetch bert-base-uncased gpt2   # download (needs internet) into BFE_MODEL_DIR
    python -m models.fetch --kit                    # the small models every page can use

Only configs, tokenizer files and safetensors weights are downloaded (never pickle files). Copy
``BFE_MODEL_DIR`` to the classroom machines, or point their ``BFE_MODEL_DIR`` at a shared folder.
"""

from __future__ import annotations

import argparse
import sys

from models import registry
from models.errors import ExplorerError, ModelUnavailable
from models.loader import availability, check_checkpoint, is_online, local_folder
from models.settings import get_settings

#: Small enough for a laptop, and together they cover every page.
KIT: tuple[str, ...] = (
    "bert-base-uncased", "roberta-base", "distilbert-base-uncased", "albert-base-v2", "xlnet-base-cased",
    "google/electra-small-generator", "google/electra-small-discriminator", "distilgpt2", "gpt2",
)

ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model"]


def fetch(model_id: str) -> str:
    """Download one catalog model into the model directory; return the folder.

    Raises:
        UnknownModel, ModelUnavailable (offline, or the Hub refused), UnsafeCheckpoint.
    """
    settings = get_settings()
    card = registry.get(model_id)
    if not card.loadable:
        raise ModelUnavailable(f"{card.id} is catalog-only: there is nothing to download.")
    if not is_online(settings):
        raise ModelUnavailable("The Hugging Face Hub cannot be reached from this machine.",
                               "Run the fetch on a machine with internet and copy the model folder here.")
    from huggingface_hub import snapshot_download

    folder = local_folder(card.id, settings.model_dir)
    try:
        snapshot_download(card.hub_id, local_dir=folder, allow_patterns=ALLOW_PATTERNS)
    except Exception as err:  # the hub client raises many unrelated types; all mean "not downloaded"
        raise ModelUnavailable(f"Downloading {card.hub_id} failed: {err}") from err
    check_checkpoint(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="catalog ids to download")
    parser.add_argument("--list", action="store_true", help="show every catalog model and whether it is here")
    parser.add_argument("--kit", action="store_true", help="download the classroom kit: " + ", ".join(KIT))
    args = parser.parse_args(argv)
    if args.list or not (args.ids or args.kit):
        settings = get_settings()
        print(f"model directory: {settings.model_dir}")
        for card in registry.all_models():
            a = availability(card, settings)
            where = a.source.describe() if a.source else ""
            print(f"{card.id:42s} {a.status:13s} {where}")
        return 0
    failed = 0
    for mid in list(args.ids) + (list(KIT) if args.kit else []):
        try:
            print(f"{mid}: saved in {fetch(mid)}")
        except ExplorerError as err:
            failed += 1
            print(f"{mid}: {err}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
