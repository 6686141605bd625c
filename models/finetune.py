"""BERT's second half: fine-tune any model on a downstream task, against the frozen encoder and against the same
architecture from random initialisation, and measure what fine-tuning changed, layer by layer.

Usage::

    from models.finetune import FineTuneConfig, finetune
    r = finetune(FineTuneConfig(model="sentence-transformers/all-MiniLM-L6-v2", task="wic", mode="finetune"))
    r.accuracy, r.accuracy_interval, r.macro_f1, r.majority_baseline, r.layer_change

    python -m models.finetune --model trained/my-bert --task supersense --mode frozen --seed 0

Modes (Peters, Ruder & Smith 2019, "To tune or not to tune?"; the BERT lectures' "fine-tune instead of freeze"):

- ``finetune``: every weight trains, with transformers' ``AutoModelForSequenceClassification`` (a text or a pair,
  read at [CLS]) or ``AutoModelForTokenClassification`` (the marked word's first sub-token), on the loop the
  pre-training lab uses (:mod:`models.training`: accelerate, AdamW, linear warm-up and decay). Defaults are the
  slide's recipe: 3 epochs, batch 16 (the slide: 2–32), learning rate from 2e-5 (large models) to 5e-5, and 1e-4 for
  models under 30M parameters (:func:`default_lr`).
- ``frozen``: the encoder is fixed and a linear classifier (scikit-learn's logistic regression) reads one layer,
  or the concatenation of the last four (BERT's best feature-based variant, Devlin et al. 2019, Table 7): the
  mean of a text's tokens, or the marked word's first sub-token.
- ``random``: ``finetune`` on the same architecture with freshly initialised weights: what pre-training bought.

The marked word of a task (WiC's target in both sentences, the supersense word) is put between quotes in the
text, so a [CLS] read-out knows which word is asked about.

What changed (Merchant et al. 2020, "What happens to BERT embeddings during fine-tuning?"): per layer, the
relative weight change ‖W_after − W_before‖ / ‖W_before‖ over the layer's tensors, and linear CKA between the
layer's token representations before and after, on the task's test sentences.
"""

from __future__ import annotations

import json
import math
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from analysis.tasks import BUILT_IN, Example, Task, load_task, parse_task_csv
from core.errors import ExplorerError, InvalidConfig, InvalidData, UnsupportedArchitecture
from models.run_config import check_run_name, check_whole_numbers, from_stored

MODES = {"finetune": "fine-tuned (all weights)", "frozen": "frozen encoder + linear classifier",
         "random": "random initialisation, fine-tuned (the control)"}
LAYERS = {"last": "the last layer", "last4": "the last four layers, concatenated (BERT's best frozen variant)"}
LIMITS = {"epochs": (1, 20), "batch": (1, 256), "max_len": (16, 512), "max_train": (10, 100_000), "max_test": (10, 20_000),
          "seed": (0, 10**6)}
#: test sentences whose tokens the before/after CKA compares (bounded: CKA is O(tokens × hidden²))
CKA_SENTENCES = 200
#: BERT's token-classification convention: positions that are not the marked word do not count in the loss
IGNORE = -100


@dataclass(frozen=True)
class FineTuneConfig:
    """One fine-tuning run. ``task``: ``wic``, ``supersense`` or a path to a CSV (``text`` or ``text_a,text_b``, and
    ``label``). ``lr`` None: the recipe's rate for the model's size (:func:`default_lr`)."""

    model: str = "sentence-transformers/all-MiniLM-L6-v2"
    task: str = "wic"
    mode: str = "finetune"
    seed: int = 0
    epochs: int = 3
    batch: int = 16
    lr: float | None = None
    warmup: float = 0.1
    max_len: int = 128
    max_train: int = 2000
    max_test: int = 500
    layer: str = "last"  # frozen mode: "last", "last4" or a layer number ("0" = embeddings)
    run: str = ""

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> FineTuneConfig:
        return from_stored(cls, stored)

    def validate(self) -> FineTuneConfig:
        """Check the whole request (names included) before any work starts.

        Raises:
            InvalidConfig: an unknown mode or layer, a size out of bounds, a run name that cannot be a folder.
        """
        if self.mode not in MODES:
            raise InvalidConfig(f"Unknown mode {self.mode!r}.", "Use one of: " + ", ".join(MODES) + ".")
        check_whole_numbers(self, LIMITS)
        if self.lr is not None and not (isinstance(self.lr, int | float) and 0 < self.lr < 1):
            raise InvalidConfig(f"The learning rate must be in (0, 1), not {self.lr!r}.")
        if not 0 <= self.warmup < 1:
            raise InvalidConfig(f"Warm-up is a share of the steps in [0, 1), not {self.warmup!r}.")
        if self.layer not in LAYERS and not (self.layer.isdigit() and int(self.layer) <= 128):
            raise InvalidConfig(f"Unknown layer {self.layer!r}.", "Use last, last4 or a layer number (0 = embeddings).")
        if not isinstance(self.model, str) or not self.model or len(self.model) > 200:
            raise InvalidConfig("Name a model (a catalog id, a Hub id, a folder or trained/<run>).")
        if self.task not in BUILT_IN and not self.task.lower().endswith(".csv"):
            raise InvalidConfig(f"Unknown task {self.task[:60]!r}.", "Use wic, supersense or a path to a .csv file.")
        check_run_name(self.run_name)
        return self

    @property
    def task_name(self) -> str:
        return self.task if self.task in BUILT_IN else Path(self.task).stem[:30] or "csv"

    @property
    def run_name(self) -> str:
        if self.run:
            return self.run
        short = re.sub(r"[^A-Za-z0-9._-]+", "-", self.model.rsplit("/", 1)[-1])[:24].strip("-.") or "model"
        return f"ft-{short}-{re.sub(r'[^A-Za-z0-9._-]+', '-', self.task_name)}-{self.mode}-s{self.seed}"


@dataclass
class FineTuneResult:
    """Scores (with bootstrap 95% intervals over the test set), the curves, and what fine-tuning changed."""

    config: FineTuneConfig
    accuracy: float = float("nan")
    accuracy_interval: tuple[float, float] = (float("nan"), float("nan"))
    macro_f1: float = float("nan")
    macro_f1_interval: tuple[float, float] = (float("nan"), float("nan"))
    majority_baseline: float = float("nan")
    train_examples: int = 0
    test_examples: int = 0
    labels: tuple[str, ...] = ()
    trainable_parameters: int = 0
    seconds: float = 0.0
    tokens: int = 0
    checkpoint: str = ""
    curve: list[tuple[int, float]] = field(default_factory=list)  # (step, training loss)
    epochs: list[dict[str, float]] = field(default_factory=list)  # {epoch, train_loss, validation_accuracy}
    layer_change: list[dict[str, Any]] = field(default_factory=list)  # {layer, weight_change, cka}
    correct: list[int] = field(default_factory=list)  # per test item, 1 = right (for paired comparisons)
    items: list[str] = field(default_factory=list)  # the test items' ids, in the order of ``correct``
    clusters: list[str] = field(default_factory=list)  # their clusters (a built-in task's lemma), for the intervals
    stopped: str = ""

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0

    def summary(self) -> dict[str, Any]:
        """The result as the command line prints it (JSON-ready)."""
        return {"model": self.config.model, "task": self.config.task_name, "mode": self.config.mode, "seed": self.config.seed,
                "accuracy": self.accuracy, "accuracy_interval": list(self.accuracy_interval),
                "macro_f1": self.macro_f1, "macro_f1_interval": list(self.macro_f1_interval),
                "majority_baseline": self.majority_baseline, "train_examples": self.train_examples,
                "test_examples": self.test_examples, "trainable_parameters": self.trainable_parameters,
                "seconds": round(self.seconds, 2), "checkpoint": self.checkpoint, "epochs": self.epochs,
                "layer_change": self.layer_change, "stopped": self.stopped}


def run_label(group: str, model: str, mode: str, seed: int) -> str:
    """A run name ``<group>-<model>-<mode>-s<seed>`` that is a valid folder name (at most 60 characters)."""
    short = re.sub(r"[^A-Za-z0-9._-]+", "-", model.rsplit("/", 1)[-1]).strip("-.")[:20] or "model"
    tail = f"-{short}-{mode}-s{seed}"
    return (group[: 60 - len(tail)] + tail).strip("-.")


def default_lr(parameters: int) -> float:
    """The slide's range (2e-5 to 5e-5, for BERT-base and -large) by model size: 2e-5 above 200M parameters, 3e-5 up
    to 200M, 5e-5 up to 60M; and 1e-4 up to 30M, because smaller models take larger rates. Chosen for MiniLM (22M)
    on the validation split (``bench/finetune.py lr``, bench/results/finetune-lr.txt): on WiC 1e-4 ties 5e-5 and
    2e-4 collapses to chance; on supersense 2e-4 is best and 1e-4 second; 1e-4 is the rate that serves both."""
    if parameters <= 30_000_000:
        return 1e-4
    return 5e-5 if parameters <= 60_000_000 else 3e-5 if parameters <= 200_000_000 else 2e-5


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


# ------------------------------------------------------------------------------------------ inputs


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


# ------------------------------------------------------------------------------------------ models


def source_folder(model_id: str) -> tuple[str, bool]:
    """(where the checkpoint is, whether it is local), after the loader's checks (safetensors, supported
    architecture, size budget, no custom code)."""
    from models.inspection import inspect
    from models.locate import locate

    source = locate(model_id)
    inspect(model_id)  # config and tensor headers: refused by name before any weight is read
    return source.location, source.kind != "hub"


def build(config: FineTuneConfig, task: Task) -> tuple[Any, Any]:
    """(classification model, tokenizer) for ``config.mode``: pre-trained weights with a new head, or the same
    architecture freshly initialised (``random``)."""
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
    folder, local = source_folder(config.model)
    tok = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=False, local_files_only=local)
    cls = (transformers.AutoModelForTokenClassification if task.kind == "token"
           else transformers.AutoModelForSequenceClassification)
    labels = {"num_labels": len(task.labels), "id2label": dict(enumerate(task.labels)),
              "label2id": {name: i for i, name in enumerate(task.labels)}}
    if config.mode == "random":
        cfg = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=False, local_files_only=local, **labels)
        torch.manual_seed(config.seed)
        model = cls.from_config(cfg)
    else:
        torch.manual_seed(config.seed)  # the new head's initialisation
        model = cls.from_pretrained(folder, use_safetensors=True, trust_remote_code=False, local_files_only=local, **labels)
    if model.config.pad_token_id is None and tok.pad_token_id is not None:
        model.config.pad_token_id = tok.pad_token_id
    return model, tok


def encoder_of(model: Any) -> Any:
    """The pre-trained body under a classification head (``model.bert``, ``model.roberta`` ...)."""
    return getattr(model, model.base_model_prefix, model)


def _layer_modules(model: Any) -> list[tuple[str, list[Any]]]:
    """(name, parameters) per layer: the embeddings, each transformer layer (the ModuleList as long as the model's
    layer count), then the task head (everything outside the pre-trained body)."""
    import torch

    body = encoder_of(model)
    n = int(getattr(model.config, "num_hidden_layers", 0) or getattr(model.config, "n_layer", 0))
    layers = next((m for m in body.modules() if isinstance(m, torch.nn.ModuleList) and len(m) == n), None)
    in_layers = {id(p) for p in layers.parameters()} if layers is not None else set()
    in_body = {id(p) for p in body.parameters()}
    out = [("embeddings", [p for name, p in body.named_parameters() if id(p) not in in_layers and "embed" in name])]
    if layers is not None:
        out += [(f"layer {i + 1}", list(m.parameters())) for i, m in enumerate(layers)]
    out.append(("head", [p for p in model.parameters() if id(p) not in in_body]))
    return out


def weight_snapshot(model: Any) -> list[tuple[str, list[Any]]]:
    """A copy of every layer's tensors (for :func:`weight_change`)."""
    return [(name, [p.detach().clone() for p in ps]) for name, ps in _layer_modules(model)]


def weight_change(model: Any, before: list[tuple[str, list[Any]]]) -> list[tuple[str, float]]:
    """(layer, ‖W_after − W_before‖ / ‖W_before‖) over each layer's tensors together (Frobenius norms)."""
    out = []
    for (name, now), (_, then) in zip(_layer_modules(model), before, strict=True):
        if not then:
            continue
        # the snapshot is taken before accelerate moves the model (to a GPU, where there is one): compare on its device
        diff = math.sqrt(sum(float((a.detach().float() - b.to(a.device).float()).pow(2).sum()) for a, b in zip(now, then, strict=True)))
        base = math.sqrt(sum(float(b.float().pow(2).sum()) for b in then))
        out.append((name, diff / base if base else float("nan")))
    return out


def hidden_states(model: Any, enc: dict[str, Any], idx: Sequence[int], pad_id: int, batch: int = 32) -> list[Any]:
    """Per layer (embeddings first), the vectors of every real token of the examples ``idx``: (tokens, hidden)
    float32 numpy arrays, in the same order for any model over the same input."""
    import numpy as np
    import torch

    body = encoder_of(model)
    dev = next(model.parameters()).device
    per_layer: list[list[Any]] = []
    with torch.no_grad():
        for s in range(0, len(idx), batch):
            b = collate(enc, idx[s: s + batch], pad_id, False)
            kwargs = {k: v.to(dev) for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            hs = body(**kwargs, output_hidden_states=True).hidden_states
            keep = b["attention_mask"].bool()
            if not per_layer:
                per_layer = [[] for _ in hs]
            for i, h in enumerate(hs):
                per_layer[i].append(h.float().cpu()[keep].numpy())
    return [np.concatenate(chunks) for chunks in per_layer]


def pair_features(u: Any, v: Any) -> Any:
    """The standard features of a pair of vectors, [u, v, |u − v|, u ⊙ v] (Conneau et al. 2017, InferSent; SentEval),
    for (B, H) arrays or tensors: a linear classifier on them can compare the two, which it cannot on u and v alone."""
    import numpy as np

    return np.concatenate([u, v, np.abs(u - v), u * v], axis=-1)


def pair_words(enc: dict[str, Any]) -> bool:
    """Whether a pair task's features are its two marked words (every example's words survived truncation), or each
    text's mean. Decided once, on the training split, for every split: a split that decided for itself could build
    features of another width than the probe was fitted on (WiC at 32 tokens: one training pair truncated, none in
    validation, and the frozen run failed)."""
    n = len(enc["input_ids"])
    return "word_index_b" in enc and all(enc["word_index"][i] >= 0 and enc["word_index_b"][i] >= 0 for i in range(n))


def features(model: Any, enc: dict[str, Any], layer: str, pad_id: int, token_task: bool, batch: int = 64,
             pairs: bool | None = None) -> Any:
    """Frozen features, one row per example, at the chosen layer(s): the marked word's first sub-token (a token
    task); for a pair, :func:`pair_features` of the two marked words' vectors (WiC) or, where the texts mark no word,
    of each text encoded alone and averaged over its tokens (SentEval's convention: a joined pair's mean would blur
    the two texts into one vector); otherwise the mean of the text's real tokens. ``pairs``: the training split's
    :func:`pair_words` (by default this split's own); a word truncation cut off is read at position 0."""
    import numpy as np
    import torch

    if "alone" in enc:
        u, v = (features(model, side, layer, pad_id, False, batch) for side in enc["alone"])
        return pair_features(u, v)
    body = encoder_of(model)
    dev = next(model.parameters()).device
    rows = []
    n = len(enc["input_ids"])
    pairs = pair_words(enc) if pairs is None else pairs
    with torch.no_grad():
        for s in range(0, n, batch):
            idx = list(range(s, min(s + batch, n)))
            b = collate(enc, idx, pad_id, False)
            kwargs = {k: v.to(dev) for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            hs = body(**kwargs, output_hidden_states=True).hidden_states
            chosen = (hs[-4:] if layer == "last4" else [hs[-1]] if layer == "last" else [hs[min(int(layer), len(hs) - 1)]])
            h = torch.cat([x.float() for x in chosen], dim=-1).cpu()  # (B, T, k·H)
            if token_task:
                pos = torch.tensor([max(enc["word_index"][i], 0) for i in idx])
                rows.append(h[torch.arange(len(idx)), pos].numpy())
            elif pairs and "word_index_b" in enc:
                u = h[torch.arange(len(idx)), torch.tensor([max(enc["word_index"][i], 0) for i in idx])]
                v = h[torch.arange(len(idx)), torch.tensor([max(enc["word_index_b"][i], 0) for i in idx])]
                rows.append(pair_features(u.numpy(), v.numpy()))
            else:
                m = b["attention_mask"].unsqueeze(-1).float()
                rows.append(((h * m).sum(1) / m.sum(1)).numpy())
    return np.concatenate(rows)


# ------------------------------------------------------------------------------------------ the run


def _predict(model: Any, enc: dict[str, Any], pad_id: int, token_task: bool, batch: int = 64) -> list[int]:
    import torch

    dev = next(model.parameters()).device
    out = []
    with torch.no_grad():
        for s in range(0, len(enc["input_ids"]), batch):
            idx = list(range(s, min(s + batch, len(enc["input_ids"]))))
            b = collate(enc, idx, pad_id, token_task)
            kwargs = {k: v.to(dev) for k, v in b.items() if k in ("input_ids", "attention_mask", "token_type_ids")}
            logits = model(**kwargs).logits.float().cpu()
            if token_task:
                pos = torch.tensor([max(enc["word_index"][i], 0) for i in idx])
                logits = logits[torch.arange(len(idx)), pos]
            out += logits.argmax(-1).tolist()
    return out


def finetune(config: FineTuneConfig, on_progress: Callable[[int, float, float], None] | None = None,
             on_epoch: Callable[[dict[str, float]], None] | None = None, should_stop: Callable[[], bool] | None = None,
             save: bool = True) -> FineTuneResult:
    """Fine-tune (or freeze, or train from scratch) ``config.model`` on ``config.task``, score it on the test split
    once, at the end, and measure the per-layer change. ``on_progress(step, loss, seconds)`` and ``on_epoch({epoch,
    train_loss, validation_accuracy})`` report as it goes (accuracy on the validation split, NaN where the task has
    none: the test split is never looked at before the end); ``should_stop()`` cancels between steps (the result says
    so, no checkpoint).

    Raises:
        InvalidConfig, InvalidData, InvalidTaskFile, UnknownTask (the request, checked before any work);
        ModelUnavailable, UnsupportedArchitecture (the model); TrainingFailed (a save that cannot be written).
    """
    import numpy as np
    import torch

    from analysis.representations import linear_cka
    from analysis.stats import bootstrap_interval, macro_f1
    from models import training

    config.validate()
    task = load_config_task(config)
    if len(task.train) < 2 or len(task.test) < 1:
        raise InvalidData(f"{task.name} has {len(task.train)} training and {len(task.test)} test examples after the limits.")
    random.seed(config.seed)
    torch.manual_seed(config.seed)
    model, tok = build(config, task)
    token_task = task.kind == "token"
    pad = tok.pad_token_id
    train_enc = encode(tok, task, task.train, config.max_len)
    test_enc = encode(tok, task, task.test, config.max_len)
    val_enc = encode(tok, task, task.validation, config.max_len) if task.validation else None
    y_val = np.array([e.label for e in task.validation])
    result = FineTuneResult(config, majority_baseline=task.majority_baseline(), train_examples=len(task.train),
                            test_examples=len(task.test), labels=task.labels)
    cka_idx = list(range(min(CKA_SENTENCES, len(task.test))))
    before_states = hidden_states(model, test_enc, cka_idx, pad)
    before_weights = weight_snapshot(model)
    start = time.perf_counter()
    y_test = np.array([e.label for e in task.test])

    if config.mode == "frozen":
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        model.eval()
        pairs = pair_words(train_enc)
        x_train = features(model, train_enc, config.layer, pad, token_task, pairs=pairs)
        x_test = features(model, test_enc, config.layer, pad, token_task, pairs=pairs)
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=config.seed))
        clf.fit(x_train, [e.label for e in task.train])
        pred = np.asarray(clf.predict(x_test))
        val_acc = float((np.asarray(clf.predict(features(model, val_enc, config.layer, pad, token_task, pairs=pairs))) == y_val).mean()) \
            if val_enc is not None else float("nan")
        result.trainable_parameters = int(x_train.shape[1] * (len(task.labels) if len(task.labels) > 2 else 1)
                                          + (len(task.labels) if len(task.labels) > 2 else 1))
        result.tokens = sum(map(len, train_enc["input_ids"])) + sum(map(len, test_enc["input_ids"]))
        result.epochs = [{"epoch": 1, "train_loss": float("nan"), "validation_accuracy": val_acc}]
    else:
        accelerator = training.make_accelerator()
        params = [p for p in model.parameters() if p.requires_grad]
        result.trainable_parameters = sum(p.numel() for p in params)
        lr = config.lr or default_lr(sum(p.numel() for p in encoder_of(model).parameters()))
        steps_per_epoch = math.ceil(len(task.train) / config.batch)
        optimizer, scheduler = training.optimizer_and_schedule(params, lr, steps_per_epoch * config.epochs, config.warmup)
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
        rng = random.Random(config.seed)
        n = 0
        for epoch in range(1, config.epochs + 1):
            model.train()
            order = list(range(len(task.train)))
            rng.shuffle(order)
            losses = []
            for s in range(0, len(order), config.batch):
                if should_stop is not None and should_stop():
                    result.stopped = f"cancelled at step {n}"
                    break
                b = {k: v.to(accelerator.device) for k, v in collate(train_enc, order[s: s + config.batch], pad, token_task).items()}
                loss = model(**b).loss
                value = float(loss.detach())
                if not math.isfinite(value):
                    result.stopped = f"the loss became {value} at step {n + 1}"
                    break
                training.step(accelerator, loss, params, optimizer, scheduler)
                n += 1
                losses.append(value)
                result.curve.append((n, value))
                result.tokens += int(b["attention_mask"].sum())
                if on_progress is not None:
                    on_progress(n, value, time.perf_counter() - start)
            if result.stopped:
                break
            model.eval()
            acc = float((np.array(_predict(model, val_enc, pad, token_task)) == y_val).mean()) if val_enc is not None else float("nan")
            row = {"epoch": epoch, "train_loss": float(np.mean(losses)) if losses else float("nan"), "validation_accuracy": acc}
            result.epochs.append(row)
            if on_epoch is not None:
                on_epoch(row)
        model = accelerator.unwrap_model(model)
        model.eval()
        pred = np.array(_predict(model, test_enc, pad, token_task))
    result.seconds = time.perf_counter() - start
    correct = (pred == y_test).astype(int)
    result.correct = correct.tolist()
    result.items, result.clusters = [e.item for e in task.test], [e.cluster for e in task.test]
    clusters = result.clusters if all(result.clusters) else None  # a lemma's items are not independent: resample lemmas
    result.accuracy = float(correct.mean())
    result.accuracy_interval = bootstrap_interval(y_test, pred, "accuracy", seed=config.seed, clusters=clusters)
    result.macro_f1 = macro_f1(y_test, pred, len(task.labels))
    result.macro_f1_interval = bootstrap_interval(y_test, pred, "macro_f1", seed=config.seed, n_labels=len(task.labels),
                                                  clusters=clusters)
    after_states = hidden_states(model, test_enc, cka_idx, pad)
    changes = dict(weight_change(model, before_weights))
    names = ["embeddings"] + [f"layer {i}" for i in range(1, len(after_states))]
    result.layer_change = [{"layer": name, "weight_change": changes.get(name, float("nan")),
                            "cka": float(linear_cka(b, a)) if len(b) > 1 else float("nan")}
                           for name, b, a in zip(names, before_states, after_states, strict=True)]
    if "head" in changes:
        result.layer_change.append({"layer": "head", "weight_change": changes["head"], "cka": float("nan")})
    if save and config.mode != "frozen" and not result.stopped:
        result.checkpoint = save_run(config, model, tok, result)
    return result


#: What the lab's presets fine-tune a pre-trained checkpoint with (tiny models from scratch need a larger rate
#: than BERT's 2e-5–5e-5: the lab pre-trains at 1e-3, and at 1e-4 a 2 × 128 model stays at the majority class).
DOWNSTREAM_DEFAULTS: dict[str, Any] = {"tasks": ["supersense"], "epochs": 3, "max_train": 2000, "max_test": 500,
                                       "lr": 1e-3, "max_len": 128, "batch": 16}


def check_downstream(spec: dict[str, Any]) -> dict[str, Any]:
    """The downstream suite of a lab preset, completed with :data:`DOWNSTREAM_DEFAULTS` and checked whole.

    Raises:
        InvalidConfig: an unknown key or task, or a size out of :data:`LIMITS`.
    """
    if not isinstance(spec, dict):
        raise InvalidConfig("The downstream suite must be a mapping of settings.")
    unknown = set(spec) - set(DOWNSTREAM_DEFAULTS)
    if unknown:
        raise InvalidConfig(f"Unknown downstream setting(s): {', '.join(sorted(map(str, unknown)))[:200]}.",
                            "Use: " + ", ".join(DOWNSTREAM_DEFAULTS) + ".")
    out = {**DOWNSTREAM_DEFAULTS, **spec}
    tasks = out["tasks"]
    if not (isinstance(tasks, list | tuple) and 1 <= len(tasks) <= len(BUILT_IN) and all(t in BUILT_IN for t in tasks)):
        raise InvalidConfig(f"Downstream tasks must be some of {', '.join(BUILT_IN)}, not {str(tasks)[:80]!r}.")
    out["tasks"] = list(dict.fromkeys(tasks))
    for t in out["tasks"]:  # the same bounds as a fine-tuning run of the page
        FineTuneConfig(model="trained/x", task=t, epochs=out["epochs"], batch=out["batch"], lr=out["lr"], max_len=out["max_len"],
                       max_train=out["max_train"], max_test=out["max_test"], run="x").validate()
    return out


def downstream(checkpoint: str, spec: dict[str, Any], seed: int, control: bool = False,
               should_stop: Callable[[], bool] | None = None, on_phase: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Fine-tune a pre-trained ``checkpoint`` on each task of ``spec`` (:func:`check_downstream`) with ``seed`` and,
    with ``control``, the same architecture from random initialisation: the lab presets' downstream measure.

    Returns ``{task: {accuracy, interval, baseline, correct, items, clusters, seconds, [random_accuracy, random_correct,
    random_seconds]}}`` (``correct``: 1 per right test item, ``items`` their ids and ``clusters`` their lemmas; the test
    subset is drawn from the seed, so two arms with the same seed are scored on the same items, and two seeds on
    different ones where the split is larger than ``max_test``). A cancelled fine-tune stops the loop; what finished
    is returned.
    """
    spec = check_downstream(spec)
    out: dict[str, Any] = {}
    for task in spec["tasks"]:
        row: dict[str, Any] = {}
        for mode in ("finetune", "random") if control else ("finetune",):
            if should_stop is not None and should_stop():
                return out
            if on_phase is not None:
                on_phase(f"downstream: {task}, {'from random initialisation' if mode == 'random' else 'fine-tuning'}")
            cfg = FineTuneConfig(model=checkpoint, task=task, mode=mode, seed=seed, epochs=spec["epochs"], batch=spec["batch"],
                                 lr=spec["lr"], max_len=spec["max_len"], max_train=spec["max_train"], max_test=spec["max_test"],
                                 run="downstream")
            r = finetune(cfg, should_stop=should_stop, save=False)
            if r.stopped:
                return out
            prefix = "random_" if mode == "random" else ""
            row.update({f"{prefix}accuracy": r.accuracy, f"{prefix}correct": r.correct, f"{prefix}seconds": round(r.seconds, 2)})
            if mode == "finetune":
                row.update(interval=list(r.accuracy_interval), baseline=r.majority_baseline, test_examples=r.test_examples,
                           items=r.items, clusters=r.clusters)
        out[task] = row
    return out


def save_run(config: FineTuneConfig, model: Any, tok: Any, result: FineTuneResult) -> str:
    """Save the fine-tuned model with its tokenizer under ``BFE_MODEL_DIR/trained/<run>`` (atomically, as the
    pre-training lab saves), with the run's config and scores in ``bfe_run.json``; returns ``trained/<run>``.

    Raises:
        TrainingFailed: the folder cannot be written; nothing half-written is left.
    """
    from models.locate import validate_model_id
    from models.pretrain.config import trained_dir
    from models.training import atomic_save

    name = f"trained/{config.run_name}"
    validate_model_id(name)

    def write(folder: Path) -> None:
        model.save_pretrained(folder, safe_serialization=True)
        tok.save_pretrained(folder)
        (folder / "bfe_run.json").write_text(json.dumps({"kind": "finetune", "config": asdict(config),
                                                         "evaluation": result.summary()}, default=str))

    atomic_save(trained_dir() / config.run_name, write)
    return name


def stored_config(model_id: str) -> FineTuneConfig | None:
    """The config a fine-tuning lab run was trained with (its ``bfe_run.json``), or None for any other model."""
    from models.locate import local_folder, validate_model_id

    mid = validate_model_id(model_id)
    if not mid.startswith("trained/") or "@" in mid:
        return None
    try:
        info = json.loads((local_folder(mid) / "bfe_run.json").read_text(encoding="utf-8"))
        if info.get("kind") != "finetune":
            return None
        return FineTuneConfig.from_stored(info["config"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def main(argv: list[str] | None = None) -> int:
    """``python -m models.finetune --model ID --task wic|supersense|file.csv --mode finetune|frozen|random --seed N``."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m models.finetune", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=FineTuneConfig.model)
    parser.add_argument("--task", default=FineTuneConfig.task)
    parser.add_argument("--mode", default=FineTuneConfig.mode, choices=list(MODES))
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


if __name__ == "__main__":
    import sys

    sys.exit(main())
