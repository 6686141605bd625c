"""The frozen read-out: the encoder stays fixed and a linear classifier reads one layer (or the last four) at the
marked word, the pair of marked words, or the mean of a text's tokens."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from analysis.tasks import Task
from models.finetune.config import FineTuneConfig, FineTuneResult
from models.finetune.data import Encoded, collate
from models.finetune.model import encoder_of

if TYPE_CHECKING:
    import torch


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


def features(model: torch.nn.Module, enc: dict[str, Any], layer: str, pad_id: int, token_task: bool, batch: int = 64,
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


def read_out(config: FineTuneConfig, model: torch.nn.Module, task: Task, enc: Encoded, result: FineTuneResult) -> Any:
    """The frozen mode: fit scikit-learn's logistic regression (on standardised features) to the training split's
    :func:`features` at ``config.layer``, score the validation split, and return the test split's predictions (a
    numpy array). Fills ``result``'s trainable parameters (the classifier's weights and biases), tokens read, and
    its one "epoch" row."""
    import numpy as np
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model.eval()
    pairs = pair_words(enc.train)

    def read(split: dict[str, Any]) -> Any:
        return features(model, split, config.layer, enc.pad_id, enc.token_task, pairs=pairs)

    x_train = read(enc.train)
    x_test = read(enc.test)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=config.seed))
    clf.fit(x_train, [e.label for e in task.train])
    pred = np.asarray(clf.predict(x_test))
    y_val = np.array([e.label for e in task.validation])
    val_acc = float((np.asarray(clf.predict(read(enc.validation))) == y_val).mean()) \
        if enc.validation is not None else float("nan")
    outputs = len(task.labels) if len(task.labels) > 2 else 1  # a binary logistic regression has one weight row
    result.trainable_parameters = int(x_train.shape[1] * outputs + outputs)
    result.tokens = sum(map(len, enc.train["input_ids"])) + sum(map(len, enc.test["input_ids"]))
    result.epochs = [{"epoch": 1, "train_loss": float("nan"), "validation_accuracy": val_acc}]
    return pred
