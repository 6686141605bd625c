"""Which parts of a model matter: heads masked, ablated and ranked, and what every layer would predict.

- :class:`HeadMask`: while it is active, each attention head's output is multiplied by ``mask[layer, head]`` (a tensor
  that may require a gradient) or, for a mean ablation, replaced by that head's mean output. It hooks the module whose
  *input* is the heads' concatenated outputs (the attention output projection), so it works on every architecture
  listed in :func:`head_projections` without touching the attention code. transformers 5 dropped the ``head_mask``
  argument these models once took, so there is no library path to reuse; the hook multiplies exactly what
  ``head_mask`` multiplied (a head's context vectors), and ``tests/test_interventions.py`` checks it against weight
  surgery on the output projection (what ``prune_heads`` did).
- :func:`head_importance`: Michel, Levy & Neubig 2019 ("Are Sixteen Heads Really Better than One?"): the importance of
  head h is the expected absolute gradient of the loss with respect to its mask variable ξ_h, summed over batches as
  the paper's released code does (one backward pass per batch), then normalised per layer (L2), as the paper.
- :func:`pruning_curve`: the masked-LM accuracy as heads are removed in order of importance, against random orders
  (several seeds, a t interval per point). Heads are ranked once, on one half of the texts, and scored on the other.
- :func:`logit_lens`: for each ``[MASK]``, the top-k tokens the model's own masked-LM head reads from every layer's
  hidden state, and the probability of the final answer by layer; its last layer is the model's fill-mask output.

The loss is the masked-LM loss on a fixed, seeded choice of 15% of each text's tokens (at least one per text), all
replaced by the mask token: an evaluation, not BERT's 80/10/10 training recipe.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from core.errors import ExplorerError, InvalidConfig, InvalidText, UnsupportedArchitecture, UnsupportedTask, check_text_length

#: Texts a call takes at most (each is one row of a batch; importance runs one backward pass per batch).
MAX_TEXTS = 64
#: Rows per forward/backward pass.
BATCH = 16
#: Points of a pruning curve at most, and random orders at most.
MAX_STEPS = 24
MAX_SEEDS = 10
#: Forward passes a pruning curve may cost ((steps + 1) × (seeds + 1) × batches of scored texts): about a minute for
#: BERT-base on 2 CPU cores.
MAX_PRUNING_PASSES = 120
#: Batched forward passes causal tracing may cost (layers × tokens / :data:`BATCH`): 12 layers × 128 tokens for BERT-base.
MAX_PATCH_PASSES = 96
MASK_RATE = 0.15


# ------------------------------------------------------------------------------------------------ heads


def head_projections(net: Any) -> list[Any]:
    """Per layer (in the order the forward pass runs them), the module whose input is the heads' concatenated outputs
    (B, T, heads × head size). ALBERT shares one module across layers: it appears once per layer it serves.

    Raises:
        UnsupportedArchitecture: an architecture without such a module (XLNet computes its output in one einsum).
    """
    base = getattr(net, "base_model", net)
    cfg = net.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "deberta-v2", "camembert"):
        return [layer.attention.output.dense for layer in base.encoder.layer]
    if kind == "distilbert":
        return [layer.attention.out_lin for layer in base.transformer.layer]
    if kind == "mpnet":
        return [layer.attention.attn.o for layer in base.encoder.layer]
    if kind == "modernbert":
        return [layer.attn.Wo for layer in base.layers]
    if kind == "gpt2":
        return [block.attn.c_proj for block in base.h]
    if kind == "albert":
        if cfg.inner_group_num != 1:
            raise UnsupportedArchitecture("This ALBERT has several layers per group; head masking takes one.")
        groups = base.encoder.albert_layer_groups
        per_group = cfg.num_hidden_layers / cfg.num_hidden_groups
        return [groups[int(i / per_group)].albert_layers[0].attention.dense for i in range(cfg.num_hidden_layers)]
    raise UnsupportedArchitecture(f"Head masking does not know where {kind}'s heads meet.",
                                  "Supported: BERT, RoBERTa, XLM-R, ELECTRA, DeBERTa-v3, DistilBERT, MPNet, ModernBERT, "
                                  "ALBERT, GPT-2 and XLNet (XLNet through its post_attention: see xlnet_attentions).")


def xlnet_attentions(net: Any) -> list[Any]:
    """XLNet's attention modules, per layer. XLNet has no module whose input is the heads' outputs: it projects them
    with an einsum over its parameter ``o`` inside ``post_attention``, so :class:`HeadMask` wraps that method
    (on the instance, for the duration of the block) where it hooks a module elsewhere."""
    base = getattr(net, "base_model", net)
    return [layer.rel_attn for layer in base.layer]


def head_shape(net: Any) -> tuple[int, int]:
    """(layers, heads per layer)."""
    cfg = net.config
    if cfg.model_type == "xlnet":
        return cfg.n_layer, cfg.n_head
    layers = len(head_projections(net))
    heads = getattr(cfg, "num_attention_heads", None) or getattr(cfg, "n_head", None) or cfg.n_heads
    return layers, int(heads)


class _LayerCalls:
    """Which layer a hooked module's call belongs to. ``modules`` lists one module per layer in forward order (ALBERT's
    shared one once per layer it serves); within one forward pass, the n-th call of a module is the n-th layer it
    serves. :meth:`reset` starts a new pass."""

    def __init__(self, modules: list[Any]) -> None:
        self._where: dict[int, list[int]] = {}
        for layer, m in enumerate(modules):
            self._where.setdefault(id(m), []).append(layer)
        self.unique = list({id(m): m for m in modules}.values())  # each module once, to hook
        self._calls: dict[int, int] = {}

    def reset(self, *_: Any) -> None:
        self._calls.clear()

    def layer(self, module: Any) -> int:
        n = self._calls.get(id(module), 0)
        self._calls[id(module)] = n + 1
        layers = self._where[id(module)]
        return layers[n % len(layers)]


class HeadMask:
    """``with HeadMask(net, mask): net(...)``: each head's output times ``mask[layer, head]`` ((layers, heads), ones
    keep a head, zeros remove it; it may require a gradient). With ``means`` ((layers, heads, head size), from
    :func:`head_means`), a removed head's output is replaced by its mean instead of zero (mean ablation):
    ``mask·x + (1 − mask)·mean``."""

    def __init__(self, net: Any, mask: Any, means: Any = None) -> None:
        self.net, self.mask, self.means = net, mask, means
        self.layers, self.heads = head_shape(net)
        if tuple(mask.shape) != (self.layers, self.heads):
            raise ValueError(f"mask must be ({self.layers}, {self.heads}), not {tuple(mask.shape)}")
        self._handles: list[Any] = []

    def _apply(self, layer: int, split: Any) -> Any:
        """``split`` (…, heads, head size) with each head kept, zeroed or replaced by its mean."""
        keep = self.mask[layer].to(split.dtype).view(*([1] * (split.dim() - 2)), self.heads, 1)
        out = split * keep
        if self.means is not None:
            out = out + (1 - keep) * self.means[layer].to(split.dtype)
        return out

    def __enter__(self) -> HeadMask:
        if self.net.config.model_type == "xlnet":
            for layer, attention in enumerate(xlnet_attentions(self.net)):
                original = attention.post_attention

                def wrapped(h: Any, attn_vec: Any, *args: Any, layer: int = layer, original: Any = original, **kw: Any) -> Any:
                    return original(h, self._apply(layer, attn_vec), *args, **kw)  # attn_vec: (T, B, heads, size)

                attention.post_attention = wrapped
                self._handles.append(_Unwrap(attention, "post_attention"))
            return self
        calls = _LayerCalls(head_projections(self.net))

        def hook(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:
            x = args[0]
            split = x.view(*x.shape[:-1], self.heads, x.shape[-1] // self.heads)
            return (self._apply(calls.layer(module), split).reshape(x.shape), *args[1:])

        self._handles.append(self.net.register_forward_pre_hook(calls.reset))
        self._handles += [m.register_forward_pre_hook(hook) for m in calls.unique]
        return self

    def __exit__(self, *exc: Any) -> None:
        for h in self._handles:
            h.remove()
        self._handles.clear()


class _Unwrap:
    """A handle that removes an instance attribute set over a class method (the method shows through again)."""

    def __init__(self, owner: Any, name: str) -> None:
        self.owner, self.name = owner, name

    def remove(self) -> None:
        self.owner.__dict__.pop(self.name, None)


def head_means(net: Any, batch: dict[str, Any]) -> Any:
    """Each head's mean output over the real tokens of ``batch`` (layers, heads, head size): what a mean ablation puts
    in a removed head's place."""
    import torch

    layers, heads = head_shape(net)
    sums: list[Any] = [None] * layers
    real = batch["attention_mask"].bool()
    if net.config.model_type == "xlnet":
        return _xlnet_head_means(net, batch, sums, real)
    calls = _LayerCalls(head_projections(net))

    def hook(module: Any, args: tuple[Any, ...]) -> None:
        x = args[0][real]  # (real tokens, heads × size)
        sums[calls.layer(module)] = x.view(x.shape[0], heads, -1).mean(0).detach()

    handles = [m.register_forward_pre_hook(hook) for m in calls.unique]
    try:
        with torch.inference_mode():
            net(**batch)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(sums)


def _xlnet_head_means(net: Any, batch: dict[str, Any], sums: list[Any], real: Any) -> Any:
    import torch

    handles = []
    for layer, attention in enumerate(xlnet_attentions(net)):
        original = attention.post_attention

        def capture(h: Any, attn_vec: Any, *args: Any, layer: int = layer, original: Any = original, **kw: Any) -> Any:
            sums[layer] = attn_vec.transpose(0, 1)[real].mean(0).detach()  # (T, B, n, d) → real tokens → (n, d)
            return original(h, attn_vec, *args, **kw)

        attention.post_attention = capture
        handles.append(_Unwrap(attention, "post_attention"))
    try:
        with torch.inference_mode():
            net(**batch)
    finally:
        for h in handles:
            h.remove()
    return torch.stack(sums)


# ------------------------------------------------------------------------------------------------ the masked-LM target


def _masked_lm(model: Any) -> Any:
    from models.loader import LoadedModel, load

    lm = model if isinstance(model, LoadedModel) else load(model, task="masked-lm")
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
    if len(kept) > MAX_TEXTS:
        raise InvalidText(f"{len(kept)} sentences; at most {MAX_TEXTS} are taken.", "Use fewer sentences.")
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


# ------------------------------------------------------------------------------------------------ targets

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
        from models.finetune import encode

        self.lm, self.task, self.items, self.examples = lm, task, len(examples), list(examples)
        self.measure = f"{task.name} accuracy"
        self.enc = encode(lm.tokenizer, task, examples, min(lm.max_tokens, 128))
        self.token_task = task.kind == "token"

    def chunks(self, part: slice, seed: int) -> list[Chunk]:
        import torch

        from models.finetune import collate

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

        from models.finetune import encode, features, pair_words

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

        from models.finetune import encoder_of

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


def make_target(model: Any, target: str = "masked-lm", texts: Sequence[str] = (), task: str = "", seed: int = 0,
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
        from models.loader import LoadedModel, load

        lm = model if isinstance(model, LoadedModel) else load(model, task="base")
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
    from models.finetune import stored_config

    try:
        stored = stored_config(model_id)
    except ExplorerError:
        return True
    return stored is None or stored.task not in BUILT_IN


def _classifier(model: Any) -> tuple[Any, Any]:
    """(the loaded classifier, its fine-tuning lab config or None)."""
    from models.finetune import stored_config
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


# ------------------------------------------------------------------------------------------------ importance


@dataclass(frozen=True)
class Importance:
    """Head importance (layers × heads): ``raw`` the summed absolute gradients, ``scores`` normalised per layer (L2)."""

    model_id: str
    raw: Any  # numpy (layers, heads)
    scores: Any  # numpy (layers, heads)
    loss: float
    texts: int
    masked: int
    target: str = "masked-lm"
    measure: str = "masked-word accuracy"
    #: ∂L/∂ξ_h of the mean loss over every scored place (signed): −gradient is the first-order estimate of what
    #: removing head h does to the loss, which ablating it measures.
    gradient: Any = None

    def order(self) -> list[tuple[int, int]]:
        """Heads from the least to the most important (the order the paper prunes them in)."""
        import numpy as np

        flat = np.argsort(self.scores, axis=None, kind="stable")
        return [(int(i // self.scores.shape[1]), int(i % self.scores.shape[1])) for i in flat]


def importance_of(target: Target, chunks: list[Chunk]) -> Importance:
    """Michel et al.'s importance of every head for ``target``'s loss over ``chunks``: |∂L/∂ξ_h| summed over batches
    (one backward pass each), normalised per layer by its L2 norm."""
    import torch

    net = target.lm.model
    layers, heads = head_shape(net)
    mask = torch.ones(layers, heads, device=target.lm.device, requires_grad=True)
    raw = torch.zeros(layers, heads, device=target.lm.device)
    signed = torch.zeros(layers, heads, device=target.lm.device)
    loss_sum, count = 0.0, 0
    was_training = net.training
    net.eval()
    try:
        with HeadMask(net, mask):
            for inputs, labels, extra in chunks:
                logits, gold = target.outputs(inputs, labels, extra)
                loss = torch.nn.functional.cross_entropy(logits.float(), gold)
                mask.grad = None
                loss.backward()
                raw += mask.grad.abs().detach()
                signed += mask.grad.detach() * int(gold.numel())
                loss_sum += float(loss.detach()) * int(gold.numel())
                count += int(gold.numel())
    finally:
        net.zero_grad(set_to_none=True)
        net.train(was_training)
    norm = raw.pow(2).sum(-1, keepdim=True).sqrt()
    scores = raw / (norm + 1e-20)
    ranked = sum(int(inputs["input_ids"].shape[0]) for inputs, _, _ in chunks)
    return Importance(target.lm.model_id, raw.cpu().numpy(), scores.cpu().numpy(), loss_sum / count, ranked, count,
                      target.kind, target.measure, (signed / count).cpu().numpy())


def head_importance(model: Any, texts: Sequence[str] = (), seed: int = 0, target: str = "masked-lm", task: str = "",
                    items: int = 128) -> Importance:
    """Michel et al.'s importance of every head for ``target``'s loss (:func:`make_target`; the masked-LM loss on
    ``texts`` by default): |∂L/∂ξ_h| summed over batches (one backward pass each), normalised per layer by its L2
    norm.

    Raises:
        InvalidText: fewer than 2 or more than :data:`MAX_TEXTS` texts, a text too long.
        InvalidConfig: an unknown target or task.
        UnsupportedTask: a model without the head the target needs.
        UnsupportedArchitecture: see :func:`head_projections`.
    """
    made = make_target(model, target, texts, task, seed, items)
    return importance_of(made, made.chunks(slice(None), seed))


@dataclass(frozen=True)
class Ablation:
    """The target's loss and accuracy with every head, and with ``heads`` removed."""

    model_id: str
    heads: list[tuple[int, int]]
    mode: str
    measure: str
    full_loss: float
    full_accuracy: float
    loss: float
    accuracy: float
    scored: int


def _head_pairs(heads: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """``heads`` as (layer, head) pairs of whole numbers ≥ 0, at most 1,000, none twice; shape not yet checked.

    Raises:
        InvalidConfig: not a list of pairs, a pair that is not two whole numbers ≥ 0, more than 1,000 pairs.
    """
    if isinstance(heads, str | bytes) or not hasattr(heads, "__len__"):
        raise InvalidConfig("Name the heads as (layer, head) pairs.")
    if len(heads) > 1000:
        raise InvalidConfig(f"{len(heads):,} heads named; at most 1,000 are read.")
    out = []
    for pair in heads:
        if isinstance(pair, str | bytes) or not hasattr(pair, "__len__") or len(pair) != 2 or \
                not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in pair):
            raise InvalidConfig(f"{str(pair)[:30]} is not a (layer, head) pair of whole numbers.")
        out.append((int(pair[0]), int(pair[1])))
    return sorted(set(out))


def check_heads(net: Any, heads: Sequence[Sequence[int]]) -> list[tuple[int, int]]:
    """``heads`` ((layer, head) pairs counted from 0) as sorted distinct pairs, each in the model.

    Raises:
        InvalidConfig: what :func:`_head_pairs` refuses; a head outside the model (named counted from 1, as the
            heatmap labels it, with the model's shape); all heads at once.
    """
    pairs = _head_pairs(heads)
    layers, per_layer = head_shape(net)
    for layer, head in pairs:
        if not (layer < layers and head < per_layer):
            raise InvalidConfig(f"Head {layer + 1}.{head + 1} (layer.head, counted from 1) is not in this model: it has "
                                f"{layers} layers × {per_layer} heads.")
    if len(pairs) >= layers * per_layer:
        raise InvalidConfig("Removing every head leaves nothing to attend with.", "Keep at least one head.")
    return pairs


def parse_heads(text: str) -> list[tuple[int, int]]:
    """``"1.3, 6.12"`` (layer.head, counted from 1 as the heatmap labels them) as (layer, head) pairs from 0.

    Raises:
        InvalidConfig: an entry that is not ``layer.head``, or more than 1,000 entries.
    """
    entries = [e.strip() for e in str(text).replace(";", ",").replace(" ", ",").split(",") if e.strip()]
    if len(entries) > 1000:
        raise InvalidConfig(f"{len(entries):,} heads named; at most 1,000 are read.")
    out = []
    for e in entries:
        layer, dot, head = e.partition(".")
        if not (dot and layer.isdigit() and head.isdigit() and int(layer) >= 1 and int(head) >= 1):
            raise InvalidConfig(f"{e[:20]!r} is not a head.", "Write layer.head, counted from 1: e.g. 1.3, 6.12.")
        out.append((int(layer) - 1, int(head) - 1))
    return out


def ablate_heads(model: Any, heads: Sequence[Sequence[int]], texts: Sequence[str] = (), mode: str = "zero",
                 target: str = "masked-lm", task: str = "", items: int = 128, seed: int = 0) -> Ablation:
    """Remove ``heads`` ((layer, head) pairs, from 0) — their outputs zeroed, or replaced by their mean output over the
    scored items (``mode="mean"``) — and score ``target`` (:func:`make_target`) with and without them.

    Raises:
        InvalidConfig: heads outside the model or all of them (:func:`check_heads`), an unknown mode; as
            :func:`make_target` for the rest.
    """
    import torch

    if mode not in ("zero", "mean"):
        raise InvalidConfig("A removed head outputs zeros ('zero') or its mean ('mean').")
    _head_pairs(heads)  # the request's form, before any model loads or probe is fitted
    made = make_target(model, target, texts, task, seed, items)
    removed = check_heads(made.lm.model, heads)
    chunks = made.chunks(slice(None), seed)
    layers, per_layer = head_shape(made.lm.model)
    mask = torch.ones(layers, per_layer, device=made.lm.device)
    for layer, head in removed:
        mask[layer, head] = 0.0
    means = head_means(made.lm.model, _merged_inputs(chunks)) if mode == "mean" else None
    full = made.per_item(chunks)
    cut = made.score(chunks, mask, means)
    return Ablation(made.lm.model_id, removed, mode, made.measure, *_summed(full), *cut, len(full[0]))


# ------------------------------------------------------------------------------------------------ pruning


@dataclass(frozen=True)
class PruningCurve:
    """The target's accuracy (and loss) against the share of heads removed: in importance order, and over random
    orders (mean and 95% t interval over ``seeds``). ``correct`` holds, per point, the per-item correctness in
    importance order and in each random order (``{"importance": [...], "random": [[...], ...]}``), for paired
    comparisons."""

    model_id: str
    removed: list[int]  # heads removed at each point
    total: int
    by_importance: list[float]
    random_mean: list[float]
    random_low: list[float]
    random_high: list[float]
    loss_by_importance: list[float]
    seeds: int
    mode: str
    importance: Importance
    note: str = field(default="")
    measure: str = "masked-word accuracy"
    scored: int = 0
    correct: list[dict[str, Any]] = field(default_factory=list, repr=False)
    item_ids: list[str] = field(default_factory=list, repr=False)  # each scored place's name, in ``correct``'s order
    item_clusters: list[str] = field(default_factory=list, repr=False)  # and its cluster (a lemma, a sentence)
    seed: int = 0  # the seed its masks and random orders were drawn with


def pruning_curve(model: Any, texts: Sequence[str] = (), steps: int = 10, seeds: int = 3, mode: str = "zero",
                  seed: int = 0, target: str = "masked-lm", task: str = "", items: int = 128,
                  max_passes: int = MAX_PRUNING_PASSES) -> PruningCurve:
    """Remove heads ``steps`` times in equal shares (0 up to all but one head), least important first, and in
    ``seeds`` random orders; score the target's accuracy after each. Importance is measured on items 1, 3, 5, … and
    the curve scored on items 2, 4, 6, …, so the order is not fitted to the score (the curve carries that importance).

    Raises:
        InvalidText: see :func:`head_importance` (at least 4 texts here: 2 to rank, 2 to score).
        InvalidConfig: steps, seeds, mode, target or task out of range, or more than ``max_passes`` forward passes.
    """
    import numpy as np
    import torch
    from scipy import stats

    if not (isinstance(steps, int) and 2 <= steps <= MAX_STEPS) or not (isinstance(seeds, int) and 2 <= seeds <= MAX_SEEDS):
        raise InvalidConfig(f"Steps must be 2 to {MAX_STEPS} and seeds 2 to {MAX_SEEDS}.")
    if mode not in ("zero", "mean"):
        raise InvalidConfig("A removed head outputs zeros ('zero') or its mean ('mean').")
    if not (isinstance(items, int) and not isinstance(items, bool) and 8 <= items <= MAX_ITEMS):
        raise InvalidConfig(f"Items must be a whole number from 8 to {MAX_ITEMS}.")
    if target == "masked-lm":
        kept = _texts(texts)
        if len(kept) < 4:
            raise InvalidText("A pruning curve needs at least 4 sentences (half rank the heads, half score them).")
        scored_items = len(kept[1::2])
    else:
        scored_items = (items + 1) // 2
    passes = (steps + 1) * (seeds + 1) * math.ceil(scored_items / BATCH)
    if passes > max_passes:
        raise InvalidConfig(f"This curve would take {passes} forward passes; at most {max_passes} are run.",
                            "Use fewer steps, fewer random orders, or fewer sentences or items.")
    made = make_target(model, target, texts, task, seed, items)
    importance = importance_of(made, made.chunks(slice(0, None, 2), seed))
    scored = made.chunks(slice(1, None, 2), seed + 1)
    places = made.places(slice(1, None, 2), scored)
    net = made.lm.model
    layers, heads = head_shape(net)
    total = layers * heads
    means = head_means(net, _merged_inputs(scored)) if mode == "mean" else None
    counts = sorted({round(i * (total - 1) / steps) for i in range(steps + 1)})

    def curve(order: list[tuple[int, int]]) -> tuple[list[float], list[float], list[list[int]]]:
        acc, loss, right = [], [], []
        for k in counts:
            mask = torch.ones(layers, heads, device=made.lm.device)
            for layer, head in order[:k]:
                mask[layer, head] = 0.0
            item_loss, item_right = made.per_item(scored, mask, means)
            lo, ac = _summed((item_loss, item_right))
            acc.append(ac)
            loss.append(lo)
            right.append(item_right)
        return acc, loss, right

    by_importance, loss_by_importance, right_importance = curve(importance.order())
    randoms, right_random = [], []
    for s in range(seeds):
        order = [(i // heads, i % heads) for i in range(total)]
        random.Random(seed + 1000 + s).shuffle(order)
        acc, _, right = curve(order)
        randoms.append(acc)
        right_random.append(right)
    r = np.array(randoms)
    mean = r.mean(0)
    half = stats.t.ppf(0.975, seeds - 1) * r.std(0, ddof=1) / math.sqrt(seeds)
    correct = [{"importance": right_importance[i], "random": [rr[i] for rr in right_random]} for i in range(len(counts))]
    unit = "sentences" if made.kind == "masked-lm" else "items"
    return PruningCurve(made.lm.model_id, counts, total, by_importance, mean.tolist(), (mean - half).tolist(),
                        (mean + half).tolist(), loss_by_importance, seeds, mode, importance,
                        f"Heads ranked once on {unit} 1, 3, 5, …; {made.measure} scored on {unit} 2, 4, 6, … "
                        f"({len(right_importance[0])} scored places).", made.measure, len(right_importance[0]), correct,
                        [i for i, _ in places], [c for _, c in places], seed)


#: The claim a pruning verdict decides, with its source.
PRUNING_CLAIM = ("Removing the least important heads first keeps more accuracy than removing heads in a random order: "
                 "at test time a large share of heads can go with little loss, if the important ones stay.",
                 "Michel, Levy & Neubig 2019, Are Sixteen Heads Really Better than One?, Section 4 and Figure 3 "
                 "(BERT on MNLI, importance-ordered pruning)")


def pruning_verdict(curves: Sequence[PruningCurve], clusters: Sequence[Sequence[str]] | None = None,
                    ids: Sequence[Sequence[str]] | None = None, share: float = 0.5) -> Any:
    """Does importance-ordered pruning keep more accuracy than random orders when ``share`` of the heads are removed?
    ``curves``: one per replicate (a fine-tuning seed: each its own model and importance, and its random orders drawn
    with its own ``seed``), paired by replicate; the random arm of a replicate is the mean over its random orders.
    ``clusters`` (by default each curve's ``item_clusters``, a built-in task's lemma) group the scored items whose
    noise is shared across replicates: the labs' verdict (:func:`analysis.verdicts.verdict`) adds it by cluster, so
    ``ids`` (by default ``item_ids``) matter only where no clusters are given.

    Raises:
        InvalidData: fewer than 2 curves, two curves drawn with the same seed (their random orders would be the same
            orders, which a paired t over replicates does not allow for), clusters or ids that do not match.
    """
    import numpy as np

    from analysis.verdicts import verdict
    from core.errors import InvalidData

    if len(curves) < 2:
        raise InvalidData("A pruning verdict needs at least 2 replicates (fine-tuning seeds).")
    if len({c.seed for c in curves}) < len(curves):
        raise InvalidData("Two curves were drawn with the same seed: their random orders are the same orders.",
                          "Draw each replicate's curve with its own seed (pruning_curve(..., seed=...)).")
    a, b, items_a, items_b = [], [], [], []
    for n, curve in enumerate(curves):
        point = min(range(len(curve.removed)), key=lambda i: abs(curve.removed[i] / curve.total - share))
        by_importance = np.asarray(curve.correct[point]["importance"], dtype=float)
        by_random = np.asarray(curve.correct[point]["random"], dtype=float).mean(0)
        named = list(clusters[n]) if clusters is not None else (curve.item_clusters or None)
        names = list(ids[n]) if ids is not None else (curve.item_ids or None)
        if any(x is not None and len(x) != len(by_importance) for x in (named, names)):
            raise InvalidData(f"Curve {n + 1} scored {len(by_importance)} items; its clusters or ids do not match.")
        a.append(float(by_importance.mean()))
        b.append(float(by_random.mean()))
        items_a.append({"values": by_importance.tolist(), "clusters": named, "ids": names})
        items_b.append({"values": by_random.tolist(), "clusters": named, "ids": names})
    return verdict(a, b, ">", items_a=items_a, items_b=items_b)


def _merged_inputs(chunks: list[Chunk]) -> dict[str, Any]:
    """The chunks' inputs as one padded batch (for :func:`head_means`)."""
    import torch

    width = max(c[0]["input_ids"].shape[1] for c in chunks)
    out: dict[str, Any] = {}
    for key in chunks[0][0]:
        parts = [torch.nn.functional.pad(c[0][key], (0, width - c[0][key].shape[1])) for c in chunks]
        out[key] = torch.cat(parts)
    return out


# ------------------------------------------------------------------------------------------------ logit lens


def mlm_head(net: Any) -> Any:
    """The masked-LM head as a function of hidden states (B, T, H) → logits, per architecture.

    Raises:
        UnsupportedTask: a model without one.
    """
    from models.objectives import _head

    head = _head(net)
    if head is not None:
        return head
    if hasattr(net, "lm_head"):  # XLM-R, MPNet
        return net.lm_head
    if net.config.model_type == "modernbert" and hasattr(net, "head"):
        return lambda h: net.decoder(net.head(h))
    raise UnsupportedTask(f"No masked-LM head to read the layers of {net.config.model_type}.",
                          "Pick a masked-LM model (BERT, RoBERTa, ALBERT, DistilBERT, an ELECTRA generator, a lab model).")


@dataclass(frozen=True)
class LensRow:
    """One mask at one layer: the top-k (token, probability) and the probability of the final answer."""

    layer: int  # 0: the embeddings; L: the last layer
    top: list[tuple[str, float]]
    final_probability: float


@dataclass(frozen=True)
class LogitLens:
    model_id: str
    tokens: list[str]
    positions: list[int]  # the masks' token positions
    rows: list[list[LensRow]]  # per mask, one row per layer (embeddings first)
    answers: list[str]  # per mask, the last layer's top token


def logit_lens(model: Any, text: str, top_k: int = 5) -> LogitLens:
    """For each ``[MASK]`` in ``text``: what the model's own masked-LM head reads from every layer's hidden state (the
    embeddings and each layer's output), its top ``top_k`` tokens and the probability of the final answer; the last
    layer's row is the model's fill-mask output (tested).

    Raises:
        InvalidText, MaskMissing: the text (see :func:`models.objectives.to_model_text`); top_k outside 1 to 20.
        UnsupportedTask: a model without a masked-LM head (use the Attention or Representations page instead).
    """
    import torch

    from models.objectives import _encode, to_model_text

    if not (isinstance(top_k, int) and 1 <= top_k <= 20):
        raise InvalidText("top_k must be a whole number from 1 to 20.")
    lm = _masked_lm(model)
    net, tok = lm.model, lm.tokenizer
    head = mlm_head(net)
    enc = _encode(lm, to_model_text(text, tok))
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
    with torch.inference_mode():
        out = net.base_model(input_ids=ids, attention_mask=enc.get("attention_mask"), output_hidden_states=True)
        states = list(out.hidden_states)
        final_norm = getattr(net.base_model, "final_norm", None)
        if final_norm is not None:  # a pre-LN model's head reads normalised states: every layer goes through the norm
            states = [final_norm(h) for h in states[:-1]] + [out.last_hidden_state]
        else:
            states[-1] = out.last_hidden_state
        probs = [head(h[0, positions]).float().softmax(-1) for h in states]  # per layer (masks, V)
    rows, answers = [], []
    for m in range(len(positions)):
        answer = int(probs[-1][m].argmax())
        answers.append(tok.convert_ids_to_tokens(answer))
        per_layer = []
        for layer, p in enumerate(probs):
            values, idx = p[m].topk(top_k)
            per_layer.append(LensRow(layer, [(tok.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(values, idx, strict=True)],
                                     float(p[m, answer])))
        rows.append(per_layer)
    return LogitLens(lm.model_id, tok.convert_ids_to_tokens(ids[0].tolist()), positions, rows, answers)


# ------------------------------------------------------------------------------------------------ activation patching


def layer_modules(net: Any) -> list[Any]:
    """Per layer, in the order the forward pass runs them, the module whose output is that layer's hidden states (ALBERT's
    shared group appears once per layer it serves).

    Raises:
        UnsupportedArchitecture: see :func:`head_projections`.
    """
    base = getattr(net, "base_model", net)
    cfg = net.config
    kind = cfg.model_type
    if kind in ("bert", "roberta", "xlm-roberta", "electra", "deberta-v2", "camembert", "mpnet"):
        return list(base.encoder.layer)
    if kind == "distilbert":
        return list(base.transformer.layer)
    if kind == "modernbert":
        return list(base.layers)
    if kind == "albert":
        per_group = cfg.num_hidden_layers / cfg.num_hidden_groups
        return [base.encoder.albert_layer_groups[int(i / per_group)] for i in range(cfg.num_hidden_layers)]
    head_projections(net)  # raises for what it does not know
    raise UnsupportedArchitecture(f"Activation patching takes encoders; {kind} is not one.")


@dataclass(frozen=True)
class Patching:
    """Causal tracing of one masked prediction: ``effects[layer, position]`` is the change in the logit difference
    (answer − foil) at the mask of the corrupted sentence when that layer's output at that position is copied from the
    clean run; ``restored`` is the same as a share of the clean − corrupted gap (1: fully restored)."""

    model_id: str
    clean_tokens: list[str]
    corrupted_tokens: list[str]
    mask_position: int
    answer: str
    foil: str
    clean_difference: float
    corrupted_difference: float
    effects: Any  # numpy (layers, positions), or (layers, heads) for unit "head"
    restored: Any  # the same shape
    passes: int
    unit: str = "layer"
    position: int | None = None  # unit "head": the one position patched, None for every position


def activation_patching(model: Any, clean: str, corrupted: str, answer: str, foil: str, unit: str = "layer",
                        position: int | None = None) -> Patching:
    """Meng et al. 2022's causal tracing (Vig et al. 2020 for BERT), for a masked LM: ``clean`` and ``corrupted`` are
    sentences of the same token length with one ``[MASK]`` at the same place (e.g. "Paris is the capital of [MASK]." and
    "Rome is the capital of [MASK]."); the target is the mask's logit for ``answer`` minus that for ``foil`` (one
    vocabulary token each). :data:`BATCH` patched copies run per forward pass.

    ``unit="layer"``: every layer × position, the layer's output there copied from the clean run. ``unit="head"``:
    every layer × head, that head's output (its context vectors, where they enter the output projection) copied at
    ``position``, or at every position when ``position`` is None (as Vig et al. patch a head).

    Raises:
        InvalidText: texts of different token lengths, masks that differ or are not one, an answer or foil that is not
            one token, a position outside the sentence, more than :data:`MAX_PATCH_PASSES` forward passes.
        InvalidConfig: an unknown unit.
        UnsupportedTask, UnsupportedArchitecture: as :func:`logit_lens` and :func:`layer_modules`.
    """
    if unit not in ("layer", "head"):
        raise InvalidConfig(f"Unknown unit {str(unit)[:20]!r}.", "Patch a layer's output ('layer') or a head's ('head').")
    import torch

    from models.objectives import _encode, to_model_text

    lm = _masked_lm(model)
    net, tok = lm.model, lm.tokenizer
    enc_c, enc_x = _encode(lm, to_model_text(clean, tok)), _encode(lm, to_model_text(corrupted, tok))
    ids_c, ids_x = enc_c["input_ids"], enc_x["input_ids"]
    if ids_c.shape != ids_x.shape:
        raise InvalidText(f"The sentences are {ids_c.shape[1]} and {ids_x.shape[1]} tokens; patching needs the same length.",
                          "Change one word for another of the same token length.")
    masks_c, masks_x = (ids_c[0] == tok.mask_token_id).nonzero().flatten(), (ids_x[0] == tok.mask_token_id).nonzero().flatten()
    if len(masks_c) != 1 or not torch.equal(masks_c, masks_x):
        raise InvalidText("Both sentences need one [MASK], at the same place.")
    pos = int(masks_c[0])
    targets = []
    for word in (answer, foil):
        pieces = tok(word, add_special_tokens=False)["input_ids"] if isinstance(word, str) and word.strip() else []
        if len(pieces) != 1:
            raise InvalidText(f"{word!r} is {len(pieces)} tokens for {lm.model_id}; the answer and the foil must be one each.")
        targets.append(pieces[0])
    layers = layer_modules(net)
    if position is not None and not (isinstance(position, int) and not isinstance(position, bool)
                                     and 0 <= position < ids_c.shape[1]):
        raise InvalidText(f"Position {str(position)[:20]} is outside the sentence (0 to {ids_c.shape[1] - 1}).")
    n_units = head_shape(net)[1] if unit == "head" else ids_c.shape[1]
    needed = math.ceil(len(layers) * n_units / BATCH)
    if needed > MAX_PATCH_PASSES:
        what = f"{n_units} heads" if unit == "head" else f"{ids_c.shape[1]} tokens"
        raise InvalidText(f"Tracing {what} through {len(layers)} layers takes {needed} forward passes; at most "
                          f"{MAX_PATCH_PASSES} are run.", "Use a shorter sentence." if unit == "layer" else "Patch layers.")
    head = mlm_head(net)

    def difference(hidden: Any) -> Any:  # hidden (B, T, H) → (B,): the answer − foil logits at the mask
        logits = head(hidden[:, pos]).float()
        return logits[:, targets[0]] - logits[:, targets[1]]

    if unit == "head":
        return _patch_heads(lm, ids_c, ids_x, pos, difference, position, answer, foil)
    with torch.inference_mode():
        clean = net.base_model(input_ids=ids_c, output_hidden_states=True)
        clean_states = clean.hidden_states[1:]  # each layer's output
        d_clean = float(difference(clean.last_hidden_state)[0])
        d_corrupt = float(difference(net.base_model(input_ids=ids_x).last_hidden_state)[0])
    calls = _LayerCalls(layers)

    def patcher(chunk: list[tuple[int, int]]) -> Any:
        def patch(module: Any, _args: Any, output: Any) -> Any:  # a forward hook: the layer's output
            layer = calls.layer(module)
            hidden = output[0] if isinstance(output, tuple) else output
            hidden = hidden.clone()
            for row, (target_layer, p) in enumerate(chunk):
                if target_layer == layer:
                    hidden[row, p] = clean_states[layer][0, p]
            return (hidden, *output[1:]) if isinstance(output, tuple) else hidden
        return patch

    effects, passes = _sweep(net, ids_x, (len(layers), ids_c.shape[1]), calls, patcher, "register_forward_hook",
                             difference, d_corrupt)
    return _traced(lm, ids_c, ids_x, pos, answer, foil, d_clean, d_corrupt, effects, passes)


def _sweep(net: Any, ids_x: Any, shape: tuple[int, int], calls: _LayerCalls, patcher: Any, register: str,
           difference: Any, d_corrupt: float) -> tuple[Any, int]:
    """Every cell (i, j) of ``shape``, :data:`BATCH` per forward pass of the corrupted input: ``patcher(chunk)`` is the
    hook (registered with ``register`` on each of ``calls``' modules) that patches row r for the chunk's r-th cell.
    Returns (each cell's change in the logit difference, passes run)."""
    import numpy as np
    import torch

    cells = [(i, j) for i in range(shape[0]) for j in range(shape[1])]
    effects = np.zeros(shape)
    passes = 0
    for start in range(0, len(cells), BATCH):
        chunk = cells[start:start + BATCH]
        calls.reset()
        hook = patcher(chunk)
        handles = [getattr(m, register)(hook) for m in calls.unique]
        try:
            with torch.inference_mode():
                diffs = difference(net.base_model(input_ids=ids_x.expand(len(chunk), -1)).last_hidden_state).tolist()
        finally:
            for h in handles:
                h.remove()
        passes += 1
        for (i, j), d in zip(chunk, diffs, strict=True):
            effects[i, j] = d - d_corrupt
    return effects, passes


def _traced(lm: Any, ids_c: Any, ids_x: Any, pos: int, answer: str, foil: str, d_clean: float, d_corrupt: float,
            effects: Any, passes: int, unit: str = "layer", position: int | None = None) -> Patching:
    """A :class:`Patching` from a sweep's effects (the share restored: each effect over the clean − corrupted gap)."""
    import numpy as np

    tok = lm.tokenizer
    gap = d_clean - d_corrupt
    restored = effects / gap if abs(gap) > 1e-9 else np.full_like(effects, np.nan)
    return Patching(lm.model_id, tok.convert_ids_to_tokens(ids_c[0].tolist()), tok.convert_ids_to_tokens(ids_x[0].tolist()), pos,
                    answer, foil, d_clean, d_corrupt, effects, restored, passes, unit, position)


def _patch_heads(lm: Any, ids_c: Any, ids_x: Any, pos: int, difference: Any, position: int | None,
                 answer: str, foil: str) -> Patching:
    """:func:`activation_patching` per head: each head's context vectors, read where they enter its layer's output
    projection in the clean run, written there in the corrupted run (at ``position``, or everywhere)."""
    import torch

    net = lm.model
    n_layers, n_heads = head_shape(net)
    where = slice(None) if position is None else slice(position, position + 1)
    clean_in: list[Any] = [None] * n_layers
    calls = _LayerCalls(head_projections(net))

    def record(module: Any, args: tuple[Any, ...]) -> None:
        clean_in[calls.layer(module)] = args[0].detach().clone()

    handles = [net.register_forward_pre_hook(calls.reset)] + [m.register_forward_pre_hook(record) for m in calls.unique]
    try:
        with torch.inference_mode():
            d_clean = float(difference(net.base_model(input_ids=ids_c).last_hidden_state)[0])
    finally:
        for h in handles:
            h.remove()
    with torch.inference_mode():
        d_corrupt = float(difference(net.base_model(input_ids=ids_x).last_hidden_state)[0])

    def patcher(chunk: list[tuple[int, int]]) -> Any:
        def patch(module: Any, args: tuple[Any, ...]) -> tuple[Any, ...]:  # a pre-hook: the heads' context vectors
            layer = calls.layer(module)
            x = args[0].clone()
            size = x.shape[-1] // n_heads
            for row, (target_layer, h) in enumerate(chunk):
                if target_layer == layer:
                    x[row, where, h * size:(h + 1) * size] = clean_in[layer][0, where, h * size:(h + 1) * size]
            return (x, *args[1:])
        return patch

    effects, passes = _sweep(net, ids_x, (n_layers, n_heads), calls, patcher, "register_forward_pre_hook", difference,
                             d_corrupt)
    return _traced(lm, ids_c, ids_x, pos, answer, foil, d_clean, d_corrupt, effects, passes, "head", position)
