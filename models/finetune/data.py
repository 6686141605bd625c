"""A run's data: its task (built in, or a user's CSV), tokenized with the marked word located, and batched."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.tasks import BUILT_IN, Example, Task, load_task, parse_task_csv
from core.errors import InvalidData, UnsupportedArchitecture
from models.finetune.config import FineTuneConfig

#: BERT's token-classification convention: positions that are not the marked word do not count in the loss
IGNORE = -100
#: The most validation examples a run scores after each epoch (a built-in task's validation split has up to 1,000).
VALIDATION_MAX = 500


def load_config_task(config: FineTuneConfig) -> Task:
    """The task of a run: a built-in one, or a user's CSV read from its path (checked)."""
    if config.task in BUILT_IN:
        return load_task(config.task, max_train=config.max_train, max_test=config.max_test, seed=config.seed,
                         max_validation=min(config.max_test, VALIDATION_MAX))
    path = Path(config.task)
    if not path.is_file():
        raise InvalidData(f"No task file {path.name!r}.")
    task = parse_task_csv(path.read_bytes(), name=config.task_name, seed=config.seed)
    return Task(task.name, task.kind, task.labels, task.train[: config.max_train], task.test[: config.max_test], task.source,
                task.validation[:VALIDATION_MAX])


def marked(text: str, span: tuple[int, int] | None) -> tuple[str, tuple[int, int] | None]:
    """``text`` with the word at ``span`` put between quotes, and the word's new span."""
    if span is None:
        return text, None
    a, b = span
    return f'{text[:a]}"{text[a:b]}"{text[b:]}', (a + 1, b + 1)


def encode(tok: Any, task: Task, examples: Sequence[Example], max_len: int) -> dict[str, Any]:
    """Tokenize a split: input ids (lists), the label per example, and the index of the marked word's first
    sub-token (``word_index``; for a pair, ``word_index_b`` in the second text too; -1 when truncation cut it off
    or the task marks no word)."""
    if tok.pad_token is None or (tok.cls_token is None and task.kind != "token" and tok.bos_token is None):
        raise UnsupportedArchitecture("This model's tokenizer has no padding or [CLS]-like token, so it cannot be "
                                      "fine-tuned for classification here.", "Pick an encoder (BERT, RoBERTa, ELECTRA ...).")
    a = [marked(e.text, e.span) for e in examples]
    kwargs = {"truncation": True, "max_length": max_len, "return_offsets_mapping": True}
    if task.kind == "pair":
        b = [marked(e.text_b or "", e.span_b)[0] for e in examples]
        enc = tok([t for t, _ in a], b, **kwargs)
    else:
        enc = tok([t for t, _ in a], **kwargs)
    out: dict[str, Any] = {"input_ids": enc["input_ids"], "labels": [e.label for e in examples]}
    if "token_type_ids" in enc:
        out["token_type_ids"] = enc["token_type_ids"]

    def first_token(i: int, span: tuple[int, int] | None, segment: int) -> int:
        if span is None:
            return -1
        ids = enc.sequence_ids(i)
        hits = [t for t, (st, en) in enumerate(enc["offset_mapping"][i]) if ids[t] == segment and en > st and st <= span[0] < en]
        return hits[0] if hits else -1

    if task.kind in ("token", "pair"):
        out["word_index"] = [first_token(i, span, 0) for i, (_, span) in enumerate(a)]
    if task.kind == "pair":
        out["word_index_b"] = [first_token(i, marked(e.text_b or "", e.span_b)[1], 1) for i, e in enumerate(examples)]
        if not any(e.span is not None and e.span_b is not None for e in examples):
            # No word marked in the texts (a user's text_a,text_b CSV): a frozen read-out encodes each text alone.
            single = [Example(e.text, e.label) for e in examples], [Example(e.text_b or "", e.label) for e in examples]
            text_task = Task(task.name, "single", task.labels, (), (), task.source)
            out["alone"] = tuple(encode(tok, text_task, side, max_len) for side in single)
    return out


def collate(enc: dict[str, Any], idx: Sequence[int], pad_id: int, token_task: bool) -> dict[str, Any]:
    """The examples ``idx`` of an :func:`encode`d split as one padded batch: ids, padding mask, token types where the
    tokenizer makes them, and labels (per token for a token task: the marked word only, -100 elsewhere)."""
    import torch

    width = max(len(enc["input_ids"][i]) for i in idx)
    ids = torch.full((len(idx), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(idx), width), dtype=torch.long)
    out: dict[str, Any] = {}
    for r, i in enumerate(idx):
        n = len(enc["input_ids"][i])
        ids[r, :n] = torch.tensor(enc["input_ids"][i])
        mask[r, :n] = 1
    out["input_ids"], out["attention_mask"] = ids, mask
    if "token_type_ids" in enc:
        tt = torch.zeros((len(idx), width), dtype=torch.long)
        for r, i in enumerate(idx):
            tt[r, : len(enc["token_type_ids"][i])] = torch.tensor(enc["token_type_ids"][i])
        out["token_type_ids"] = tt
    if token_task:
        labels = torch.full((len(idx), width), IGNORE, dtype=torch.long)
        for r, i in enumerate(idx):
            if enc["word_index"][i] >= 0:
                labels[r, enc["word_index"][i]] = enc["labels"][i]
        out["labels"] = labels
    else:
        out["labels"] = torch.tensor([enc["labels"][i] for i in idx])
    return out


@dataclass(frozen=True)
class Encoded:
    """A task's splits, each :func:`encode`d once for the whole run (``validation`` None where the task has none)."""

    train: dict[str, Any]
    test: dict[str, Any]
    validation: dict[str, Any] | None
    pad_id: int
    token_task: bool


def encode_splits(tok: Any, task: Task, max_len: int) -> Encoded:
    """Every split of ``task`` :func:`encode`d with ``tok``."""
    return Encoded(train=encode(tok, task, task.train, max_len), test=encode(tok, task, task.test, max_len),
                   validation=encode(tok, task, task.validation, max_len) if task.validation else None,
                   pad_id=tok.pad_token_id, token_task=task.kind == "token")
