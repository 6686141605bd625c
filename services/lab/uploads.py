"""Files a user gives the labs (a pre-training corpus, a fine-tuning task's CSV), stored beside the checkpoints by
their content's hash: the same file is stored once, and no user-given name reaches the disk."""

from __future__ import annotations

import hashlib
import os

from core.errors import InvalidData
from models.pretrain.config import MAX_USER_CORPUS_BYTES
from services.lab.checkpoints import lab_folder


def save_corpus(raw: bytes) -> str:
    """Store an uploaded text file beside the checkpoints (content-addressed, written atomically) and return its
    path, for ``TrainConfig(corpus=...)``. Check it with :func:`models.pretrain.read_corpus` before use.

    Raises:
        InvalidData: larger than :data:`models.pretrain.MAX_USER_CORPUS_BYTES`.
    """
    if len(raw) > MAX_USER_CORPUS_BYTES:
        raise InvalidData(f"The file is {len(raw) / 2**20:.0f} MB; the lab takes at most {MAX_USER_CORPUS_BYTES // 2**20} MB.")
    return _store_upload(raw, ".corpora", ".txt")


def check_corpus(path: str) -> str:
    """Read a stored corpus once as training would (:func:`models.pretrain.read_corpus`) and return its path.

    Raises:
        InvalidData: a binary, non-UTF-8 or empty file.
    """
    from models.pretrain.config import TrainConfig
    from models.pretrain.corpus import read_corpus

    read_corpus(TrainConfig(corpus=path))
    return path


def save_task_file(raw: bytes) -> str:
    """Check a user's task CSV whole (:func:`analysis.tasks.parse_task_csv`), then store it beside the checkpoints
    (content-addressed, written atomically) and return its path, for ``FineTuneConfig(task=...)``.

    Raises:
        InvalidTaskFile: what is wrong with the file, by line.
    """
    from analysis.tasks import parse_task_csv

    parse_task_csv(raw)
    return _store_upload(raw, ".tasks", ".csv")


def _store_upload(raw: bytes, folder_name: str, suffix: str) -> str:
    """Write ``raw`` under the lab's folder, named by its hash, through a temporary file and a rename, so a reader
    never sees half of it."""
    folder = lab_folder() / folder_name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{hashlib.sha256(raw).hexdigest()[:20]}{suffix}"
    if not path.exists():
        tmp = path.with_suffix(f".partial-{os.getpid()}")
        tmp.write_bytes(raw)
        tmp.replace(path)
    return str(path)
