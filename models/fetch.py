"""The classroom kit: download checkpoints once, run offline later.

    python -m models.fetch --list                   # what is available here, and from where
    python -m models.fetch bert-base-uncased gpt2   # download (needs internet) into BFE_MODEL_DIR
    python -m models.fetch --kit                    # the small models every page can use
    python -m models.fetch someone/her-fine-tuned-bert   # any Hub checkpoint of a supported architecture

Only configs, tokenizer files and safetensors weights are downloaded (never pickle files). A Hub id
that is not in the catalog is inspected first (its config and tensor headers: supported architecture,
no custom code, within ``BFE_MAX_PARAMS``) and saved as ``BFE_MODEL_DIR/owner/name``. Copy
``BFE_MODEL_DIR`` to the classroom machines, or point their ``BFE_MODEL_DIR`` at a shared folder.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from core import registry
from core.errors import ExplorerError, ModelUnavailable, UnknownModel
from core.settings import get_settings
from models.loader import availability, check_checkpoint, is_online, local_folder, validate_model_id

#: Small enough for a laptop, and together they cover every page.
KIT: tuple[str, ...] = (
    "bert-base-uncased", "roberta-base", "distilbert-base-uncased", "albert-base-v2", "xlnet-base-cased",
    "google/electra-small-generator", "google/electra-small-discriminator", "distilgpt2", "gpt2",
)

ALLOW_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model"]


def download(hub_id: str, *, local_dir: Path | None = None,
             on_progress: Callable[[int, int], None] | None = None) -> str:
    """Download a Hub repository's config, tokenizer and safetensors files (never pickle), reporting bytes.

    ``local_dir`` None: into the shared Hugging Face cache (where :func:`models.locate.locate` finds it);
    ``on_progress(done, total)`` is called as bytes arrive. Returns the folder.
    """
    from huggingface_hub import hf_hub_download, snapshot_download
    from tqdm.auto import tqdm

    plan = snapshot_download(hub_id, allow_patterns=ALLOW_PATTERNS, local_dir=local_dir, dry_run=True)
    total = sum(f.file_size or 0 for f in plan)
    done = 0

    class Progress(tqdm):  # hf_hub_download's byte counter, forwarded to the caller
        def __init__(self, *args, **kwargs) -> None:
            kwargs["disable"] = True
            super().__init__(*args, **kwargs)

        def update(self, n: float | None = 1) -> bool | None:
            self.n += n or 0
            if on_progress is not None:
                on_progress(min(total, done + int(self.n)), total)
            return None

    folder = ""
    for f in plan:
        path = hf_hub_download(hub_id, f.filename, local_dir=local_dir, tqdm_class=Progress)
        done += f.file_size or 0
        if on_progress is not None:
            on_progress(done, total)
        folder = str(Path(path).parent) if "/" not in f.filename else folder
    return str(local_dir) if local_dir is not None else folder


def fetch(model_id: str, on_progress: Callable[[int, int], None] | None = None) -> str:
    """Download one catalog model, or any Hub checkpoint of a supported architecture, into the model directory.

    Returns the folder (``BFE_MODEL_DIR/<catalog id>`` or ``BFE_MODEL_DIR/owner/name``).

    Raises:
        InvalidModelId, UnknownModel, ModelUnavailable (offline, or the Hub refused), UnsafeCheckpoint,
        InvalidCheckpoint, ModelTooLarge (a Hub id outside the catalog, inspected before it downloads).
    """
    settings = get_settings()
    mid = validate_model_id(model_id)
    card = registry.find(mid)
    if card is None and "/" not in mid:
        raise UnknownModel(mid, registry.suggest(mid))
    if card is not None and not card.loadable:
        raise ModelUnavailable(f"{card.id} is catalog-only: there is nothing to download.")
    if not is_online(settings):
        raise ModelUnavailable("The Hugging Face Hub cannot be reached from this machine.",
                               "Run the fetch on a machine with internet and copy the model folder here.")
    if card is None:
        from models.inspection import inspect_hub

        inspect_hub(mid, mid, None)  # config and headers first: refused before any weight downloads
    hub_id, name = (card.hub_id, card.id) if card is not None else (mid, mid)
    folder = local_folder(name, settings.model_dir)
    try:
        download(hub_id, local_dir=folder, on_progress=on_progress)
    except Exception as err:  # the hub client raises many unrelated types; all mean "not downloaded"
        raise ModelUnavailable(f"Downloading {hub_id} failed: {str(err)[:300]}") from err
    check_checkpoint(folder)
    return str(folder)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.fetch", description=__doc__.split("\n\n")[0])
    parser.add_argument("ids", nargs="*", help="catalog ids, or any Hub id owner/name of a supported architecture")
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
