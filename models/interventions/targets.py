"""What a head's removal is scored by: a masked-LM loss on seeded masks of the user's texts, a fine-tuned classifier's
task loss, or a linear probe's loss, each as a :class:`Target` that turns items into batches and batches into
(logits, labels).

The masked-LM loss is on a fixed, seeded choice of 15% of each text's tokens (at least one per text), all replaced by
the mask token: an evaluation, not BERT's 80/10/10 training recipe.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from core.errors import ExplorerError, InvalidConfig, InvalidText, UnsupportedTask, check_text_length
from models.interventions.heads import HeadMask, head_shape
from models.loader import ModelRef

#: Texts a call takes at most (each is one row of a batch; importance runs one backward pass per batch).
MAX_SENTENCES = 64
#: Rows per forward/backward pass.
BATCH = 16
MASK_RATE = 0.15


def _masked_lm(model: ModelRef) -> Any:
    from models.loader import as_loaded

    lm = as_loaded(model, task="masked-lm")
    if lm.tokenizer.mask_token is None or not hasattr(lm.model, "get_output_embeddings") or lm.model.get_output_embeddings() is None:
        raise UnsupportedTask(f"{lm.model_id} has no masked-LM head.",
                              "Pick a masked-LM model (BERT, RoBERTa, ALBERT, DistilBERT, an ELECTRA generator, a lab model).")
    return lm


def _texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, str) or not all(isinstance(t, str) for t in texts):
        raise InvalidText("Give the texts as a list of sentences.")
    kept = [t.strip() for t in texts if t.strip()]
    if len(kept) < 2:
        raise InvalidText("Give at least 2 sentences.", "One sentence per line.")
    if len(kept) > MAX_SENTENCES:
        raise InvalidText(f"{len(kept)} sentences; at most {MAX_SENTENCES} are taken.", "Use fewer sentences.")
    for t in kept:
        check_text_length(t, "sentence")
    return kept


@dataclass
class MaskedBatch:
    """Texts tokenised together, with a seeded choice of positions replaced by the mask token; ``labels`` hold the
    original ids there and −100 elsewhere."""

    inputs: dict[str, Any]
    labels: Any
    texts: list[str]


def masked_batch(lm: Any, texts: Sequence[str], seed: int = 0, rate: float = MASK_RATE) -> MaskedBatch:
    """``texts`` with ``rate`` of each text's tokens (at least one; special tokens never) masked, chosen with ``seed``."""
    import torch

    tok = lm.tokenizer
    enc = tok(list(texts), return_tensors="pt", padding=True, truncation=True, max_length=min(lm.max_tokens, 128))
    ids = enc["input_ids"].clone()
    labels = torch.full_like(ids, -100)
    rng = random.Random(seed)
    special = set(tok.all_special_ids)
    for row in range(ids.shape[0]):
        candidates = [j for j in range(ids.shape[1]) if enc["attention_mask"][row, j] and int(ids[row, j]) not in special]
        if not candidates:
            raise InvalidText(f"Sentence {row + 1} has no word to mask.")
        for j in rng.sample(candidates, max(1, round(rate * len(candidates)))):
            labels[row, j] = ids[row, j]
            ids[row, j] = tok.mask_token_id
    # Single sentences: token types are all 0, the default, so only ids and the padding mask go in (DistilBERT takes no
    # token types at all).
    inputs = {"input_ids": ids.to(lm.device), "attention_mask": enc["attention_mask"].to(lm.device)}
    return MaskedBatch(inputs, labels.to(lm.device), list(texts))


def _chunks(batch: MaskedBatch, size: int = BATCH) -> list[tuple[dict[str, Any], Any]]:
    n = batch.labels.shape[0]
    return [({k: v[i:i + size] for k, v in batch.inputs.items()}, batch.labels[i:i + size]) for i in range(0, n, size)]


def mlm_score(lm: Any, batch: MaskedBatch, mask: Any = None, means: Any = None) -> tuple[float, float]:
    """(mean masked-LM loss, accuracy) over the masked positions of ``batch``, with heads masked by ``mask``."""
    target = MaskedLMTarget(lm, batch.texts)
    return target.score([(inputs, labels, {}) for inputs, labels in _chunks(batch)], mask, means)


#: What head importance and pruning can score.
TARGETS = {"masked-lm": "the masked-LM loss (a model with a masked-LM head)",
           "classifier": "a fine-tuned classifier's task loss (a fine-tuning lab run, any *ForSequenceClassification)",
           "probe": "a linear probe's loss (any encoder; the probe is fitted on the task's training split first)"}
#: Labelled items a classifier or probe target scores at most, and the training items a probe is fitted on at most.
MAX_ITEMS = 512
PROBE_TRAIN = 600

Chunk = tuple[dict[str, Any], Any, dict[str, Any]]  # (model inputs, labels, positions the read-out needs)


class Target:
    """What a head's removal is scored by: a loss and an accuracy over items, from one model. Subclasses say how
    items become batches (:meth:`chunks`) and how a batch becomes (logits, labels) at the scored places
    (:meth:`outputs`)."""

    kind = ""
    lm: Any
    items: int = 0
    #: What the accuracy is of, for captions ("masked-word accuracy", "supersense accuracy").
    measure = "accuracy"

    def chunks(self, part: slice, seed: int) -> list[Chunk]:
        raise NotImplementedError

    def outputs(self, inputs: dict[str, Any], labels: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
        raise NotImplementedError

    def places(self, part: slice, chunks: list[Chunk]) -> list[tuple[str, str]]:
        """(id, cluster) of each scored place of ``chunks`` (made from ``part``), in :meth:`per_item`'s order."""
        raise NotImplementedError

    def score(self, chunks: list[Chunk], mask: Any = None, means: Any = None) -> tuple[float, float]:
        """(mean loss, accuracy) over ``chunks`` with heads masked by ``mask``."""
        return _summed(self.per_item(chunks, mask, means))

    def per_item(self, chunks: list[Chunk], mask: Any = None, means: Any = None) -> tuple[list[float], list[int]]:
        """(loss, 1 if right) per scored place of ``chunks``, with heads masked by ``mask``."""
        import torch

        net = self.lm.model
        layers, heads = head_shape(net)
        mask = torch.ones(layers, heads, device=self.lm.device) if mask is None else mask
        losses: list[float] = []
        right: list[int] = []
        with torch.inference_mode(), HeadMask(net, mask, means):
            for inputs, labels, extra in chunks:
                logits, gold = self.outputs(inputs, labels, extra)
                logits = logits.to(torch.promote_types(logits.dtype, torch.float32))  # half → float; float64 stays
                losses += torch.nn.functional.cross_entropy(logits, gold, reduction="none").tolist()
                right += (logits.argmax(-1) == gold).int().tolist()
        return losses, right


def _summed(per_item: tuple[list[float], list[int]]) -> tuple[float, float]:
    losses, right = per_item
    return sum(losses) / len(losses), sum(right) / len(right)


class MaskedLMTarget(Target):
    """The masked-LM loss on a seeded choice of 15% of each text's tokens (:func:`masked_batch`)."""

    kind = "masked-lm"
    measure = "masked-word accuracy"

    def __init__(self, lm: Any, texts: Sequence[str]) -> None:
        self.lm, self.texts, self.items = lm, list(texts), len(texts)

    def chunks(self, part: slice, seed: int) -> list[Chunk]:
        return [(inputs, labels, {}) for inputs, labels in _chunks(masked_batch(self.lm, self.texts[part], seed))]

    def outputs(self, inputs: dict[str, Any], labels: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
        logits = self.lm.model(**inputs).logits
        chosen = labels != -100
        return logits[chosen], labels[chosen]

    def places(self, part: slice, chunks: list[Chunk]) -> list[tuple[str, str]]:
        rows = list(range(len(self.texts)))[part]
        out, offset = [], 0
        for _, labels, _ in chunks:
            for r, c in (labels != -100).nonzero().tolist():  # row-major: the order boolean indexing takes
                out.append((f"sentence {rows[offset + r] + 1}, token {c}", f"sentence {rows[offset + r] + 1}"))
            offset += labels.shape[0]
        return out


class _LabelledTarget(Target):
    """Labelled items of a task (:mod:`analysis.tasks`), encoded as the fine-tuning lab encodes them."""

    def __init__(self, lm: Any, task: Any, examples: Sequence[Any]) -> None:
        from models.finetune.data import encode

        self.lm, self.task, self.items, self.examples = lm, task, len(examples), list(examples)
        self.measure = f"{task.name} accuracy"
        self.enc = encode(lm.tokenizer, task, examples, min(lm.max_tokens, 128))
        self.token_task = task.kind == "token"

    def chunks(self, part: slice, seed: int) -> list[Chunk]:
        import torch

        from models.finetune.data import collate

        idx = list(range(self.items))[part]
        out = []
        for i in range(0, len(idx), BATCH):
            rows = idx[i:i + BATCH]
            b = collate(self.enc, rows, self.lm.tokenizer.pad_token_id, self.token_task)
            inputs = {k: b[k].to(self.lm.device) for k in ("input_ids", "attention_mask", "token_type_ids") if k in b}
            extra = {name: torch.tensor([max(self.enc[name][r], 0) for r in rows], device=self.lm.device)
                     for name in ("word_index", "word_index_b") if name in self.enc}
            if "word_index" in self.enc:  # where truncation cut the marked word off (a token task scores no place there)
                extra["found"] = torch.tensor([self.enc["word_index"][r] >= 0 for r in rows], device=self.lm.device)
            out.append((inputs, b["labels"].to(self.lm.device), extra))
        return out

    def places(self, part: slice, chunks: list[Chunk]) -> list[tuple[str, str]]:
        idx = list(range(self.items))[part]
        if self.token_task:  # an item whose marked word was cut off has no scored place
            idx = [i for i in idx if self.enc["word_index"][i] >= 0]
        return [(self.examples[i].item or f"item {i + 1}", self.examples[i].cluster or self.examples[i].item or f"item {i + 1}")
                for i in idx]


class ClassifierTarget(_LabelledTarget):
    """A fine-tuned classifier's own head and task loss (sequence or token classification)."""

    kind = "classifier"

    def outputs(self, inputs: dict[str, Any], labels: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
        logits = self.lm.model(**inputs).logits
        if self.token_task:
            chosen = labels != -100
            return logits[chosen], labels[chosen]
        return logits, labels


class ProbeTarget(_LabelledTarget):
    """A linear probe on the encoder's last layer, fitted (logistic regression, as the fine-tuning lab's frozen mode)
    on the task's training split with every head in place, then held fixed while heads are removed."""

    kind = "probe"

    def __init__(self, lm: Any, task: Any, examples: Sequence[Any], train: Sequence[Any]) -> None:
        import torch
        from sklearn.linear_model import LogisticRegression
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import StandardScaler

        from models.finetune.data import encode
        from models.finetune.frozen import features, pair_words

        super().__init__(lm, task, examples)
        self.measure = f"{task.name} probe accuracy"
        if "alone" in self.enc:
            raise UnsupportedTask("A probe target needs a task that marks its words (supersense, WiC).")
        train_enc = encode(lm.tokenizer, task, train, min(lm.max_tokens, 128))
        # a pair's two marked words, or each text's mean: decided on the training split, as the fine-tuning lab does,
        # so the read-out below builds the features the probe was fitted on
        self.pair_words = pair_words(train_enc)
        x = features(lm.model, train_enc, "last", lm.tokenizer.pad_token_id, self.token_task, pairs=self.pair_words)
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=0))
        clf.fit(x, [e.label for e in train])
        scaler, logistic = clf[0], clf[1]
        self.classes = [int(c) for c in logistic.classes_]
        f32 = {"device": lm.device, "dtype": torch.float32}
        self.mean = torch.tensor(scaler.mean_, **f32)
        self.scale = torch.tensor(scaler.scale_, **f32)
        self.weight = torch.tensor(logistic.coef_, **f32)
        self.bias = torch.tensor(logistic.intercept_, **f32)
        self.train_items = len(train)

    def outputs(self, inputs: dict[str, Any], labels: Any, extra: dict[str, Any]) -> tuple[Any, Any]:
        import torch

        from models.finetune.model import encoder_of

        hidden = encoder_of(self.lm.model)(**inputs, output_hidden_states=True).hidden_states[-1].float()
        rows = torch.arange(hidden.shape[0], device=hidden.device)
        if self.token_task:  # one place per item whose word survived truncation, as the labels have
            x = hidden[rows, extra["word_index"]][extra["found"]]
            labels = labels[labels != -100]
        elif self.pair_words:  # the fine-tuning lab's pair features, [u, v, |u − v|, u ⊙ v]
            u, v = hidden[rows, extra["word_index"]], hidden[rows, extra["word_index_b"]]
            x = torch.cat([u, v, (u - v).abs(), u * v], dim=-1)
        else:
            m = inputs["attention_mask"].unsqueeze(-1).float()
            x = (hidden * m).sum(1) / m.sum(1)
        z = ((x - self.mean) / self.scale) @ self.weight.T + self.bias
        if z.shape[-1] == 1:  # a binary logistic regression: the score of class 1 against 0
            z = torch.cat([torch.zeros_like(z), z], dim=-1)
        gold = torch.tensor([self.classes.index(int(g)) for g in labels], device=z.device) if self.classes != list(range(z.shape[-1])) \
            else labels
        return z, gold


def parse_labelled(lines: Sequence[str], labels: Sequence[str]) -> list[Any]:
    """``label | sentence`` lines, the label one of ``labels`` (a model's ``id2label`` names) or its index.

    Raises:
        InvalidText: a line without `` | ``, or an unknown label (named, with the ones that exist).
    """
    from analysis.tasks import Example

    out = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        if "|" not in line:
            raise InvalidText(f"Line {n} has no label: write `label | sentence`.", "Labels: " + ", ".join(labels[:20]) + ".")
        name, text = (part.strip() for part in line.split("|", 1))
        index = labels.index(name) if name in labels else int(name) if name.isdigit() and int(name) < len(labels) else None
        if index is None:
            raise InvalidText(f"Line {n}: unknown label {name[:40]!r}.", "Labels: " + ", ".join(labels[:20]) + ".")
        check_text_length(text, "sentence")
        out.append(Example(text, index, item=f"line{n}"))
    return out


def make_target(model: ModelRef, target: str = "masked-lm", texts: Sequence[str] = (), task: str = "", seed: int = 0,
                items: int = 128) -> Target:
    """The target ``target`` (a key of :data:`TARGETS`) for ``model``:

    - ``masked-lm``: ``texts``' masked words.
    - ``classifier``: a fine-tuning lab run scores its own task's test items (``task`` empty) or a built-in task
      named in ``task``; any other sequence classifier scores ``texts`` written as ``label | sentence``.
    - ``probe``: a probe fitted on ``task``'s training split (``supersense`` or ``wic``), scored on its test items.

    ``items``: labelled items to score at most (:data:`MAX_ITEMS`).

    Raises:
        InvalidConfig: an unknown target or task, ``items`` out of range; InvalidText: texts as for
        :func:`head_importance`; UnsupportedTask: a model without the head the target needs (named, with what to use).
    """
    from analysis.tasks import BUILT_IN, load_task

    if target not in TARGETS:
        raise InvalidConfig(f"Unknown target {str(target)[:40]!r}.", "Use one of: " + ", ".join(TARGETS) + ".")
    if not (isinstance(items, int) and not isinstance(items, bool) and 8 <= items <= MAX_ITEMS):
        raise InvalidConfig(f"Items must be a whole number from 8 to {MAX_ITEMS}.")
    if task and task not in BUILT_IN:
        raise InvalidConfig(f"Unknown task {str(task)[:40]!r}.", "Use one of: " + ", ".join(BUILT_IN) + ".")
    if target == "masked-lm":
        kept = _texts(texts)  # the texts before the model loads
        return MaskedLMTarget(_masked_lm(model), kept)
    if target == "probe":
        if not task:
            raise InvalidConfig("A probe needs a task to fit on.", "Use one of: " + ", ".join(BUILT_IN) + ".")
        from models.loader import as_loaded

        lm = as_loaded(model, task="base")
        data = load_task(task, max_train=PROBE_TRAIN, max_test=items, seed=seed)
        return ProbeTarget(lm, data, data.test, data.train)
    lm, stored = _classifier(model)
    name = task or (stored.task if stored is not None and stored.task in BUILT_IN else "")
    if name:
        data = load_task(name, max_train=1, max_test=items, seed=stored.seed if stored is not None else seed)
        if len(data.labels) != lm.model.config.num_labels:
            raise UnsupportedTask(f"{lm.model_id} has {lm.model.config.num_labels} labels; {name} has {len(data.labels)}.",
                                  "Score it on its own labelled sentences (label | sentence).")
        return ClassifierTarget(lm, data, data.test)
    from analysis.tasks import Task

    labels = [str(lm.model.config.id2label.get(i, i)) for i in range(lm.model.config.num_labels)]
    examples = parse_labelled(texts if not isinstance(texts, str) else [], labels)
    if len(examples) < 4 or len(examples) > items:
        raise InvalidText(f"{len(examples)} labelled sentences; give 4 to {items}.", "One `label | sentence` per line.")
    return ClassifierTarget(lm, Task("yours", "single", tuple(labels), (), tuple(examples), "your sentences"), examples)


def needs_labelled_lines(model_id: str) -> bool:
    """Whether a classifier target on ``model_id`` is scored on ``label | sentence`` lines: any classifier but a
    Fine-tuning lab run on a built-in task (which is scored on that task's own test items)."""
    from analysis.tasks import BUILT_IN
    from models.finetune.save import stored_config

    try:
        stored = stored_config(model_id)
    except ExplorerError:
        return True
    return stored is None or stored.task not in BUILT_IN


def _classifier(model: ModelRef) -> tuple[Any, Any]:
    """(the loaded classifier, its fine-tuning lab config or None)."""
    from models.finetune.save import stored_config
    from models.loader import LoadedModel, load

    if isinstance(model, LoadedModel):
        return model, stored_config(model.model_id)
    stored = stored_config(model)
    kind = "token-classification" if stored is not None and stored.task == "supersense" else "sequence-classification"
    try:
        return load(model, task=kind), stored
    except UnsupportedTask as err:
        raise UnsupportedTask(f"{model} has no classification head.",
                              "Pick a run of the Fine-tuning lab (or any *ForSequenceClassification checkpoint), or use "
                              "the probe target on this model.") from err


def _merged_inputs(chunks: list[Chunk]) -> dict[str, Any]:
    """The chunks' inputs as one padded batch (for :func:`head_means`)."""
    import torch

    width = max(c[0]["input_ids"].shape[1] for c in chunks)
    out: dict[str, Any] = {}
    for key in chunks[0][0]:
        parts = [torch.nn.functional.pad(c[0][key], (0, width - c[0][key].shape[1])) for c in chunks]
        out[key] = torch.cat(parts)
    return out
