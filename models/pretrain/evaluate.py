"""What a pre-training run learned: held-out loss, fill-mask probes, NSP/SOP accuracy on held-out pairs, and a
linear part-of-speech probe on frozen vectors (against the same shape with random weights)."""

from __future__ import annotations

import functools
import gzip
import hashlib
import math
import random
import re
from dataclasses import replace
from typing import Any

import numpy as np
import torch

from models.pretrain.config import EXAMPLES, PROBES, TrainConfig
from models.pretrain.corpus import sentence_pairs
from models.pretrain.data import Batches
from models.pretrain.loss import loss_of
from models.pretrain.model import build_model, main_model


def _on_device(model: torch.nn.Module, batch: dict[str, Any]) -> dict[str, Any]:
    """A sampled batch (built on the CPU) on the device of ``model`` (or of ELECTRA's (generator, discriminator)), as
    the training loop moves its batches: without this a run trained on a GPU failed at its evaluation."""
    from accelerate.utils import send_to_device  # the loop's own library (models.training); imported with it

    return send_to_device(batch, main_model(model).device)


def unigram_log_probs(examples: list[dict[str, Any]], vocab_size: int, special_ids: list[int]) -> np.ndarray:
    """Log-probabilities of each vocabulary entry by its count in the training examples (add-one smoothed; special
    tokens, never a masked-LM target, get none of the mass): a model that ignores every token around a mask."""
    ids = np.concatenate([np.asarray(e["input_ids"], dtype=np.int64).reshape(-1) for e in examples]) if examples else \
        np.zeros(0, np.int64)
    counts = np.bincount(ids[(ids >= 0) & (ids < vocab_size)], minlength=vocab_size).astype(np.float64) + 1.0
    counts[[i for i in special_ids if 0 <= i < vocab_size]] = 0.0
    with np.errstate(divide="ignore"):  # a special token: log 0 = −inf, never a target
        return np.log(counts / counts.sum())


def evaluate(config: TrainConfig, model: torch.nn.Module, tok: Any, held_out: list[str],
             unigram: np.ndarray | None = None) -> dict[str, Any]:
    """Held-out loss (the objective's own, same masking recipe), fill-mask probes, and NSP/SOP accuracy on held-out pairs.
    ``unigram`` (:func:`unigram_log_probs`, masked-LM runs): also, on the held-out positions whose input is [MASK]
    (BERT's 80%: the 10% left as they are could be copied, the 10% replaced hint at nothing), ``mask_loss``, the model's
    loss there, and ``unigram_loss``, the loss there of predicting each word from the training corpus's token counts
    alone. Only context tells the word at a [MASK]: a model below the counts there uses it."""
    out: dict[str, Any] = {}
    batches = Batches(replace(config, masking="dynamic", batch=min(config.batch, len(held_out))), held_out, tok)
    batches.rng = random.Random(12345)
    held = [batches.sample() for _ in range(4)]
    with torch.no_grad():
        losses = [float(loss_of(config, model, _on_device(model, b))) for b in held]
    out["held_out_loss"] = sum(losses) / len(losses)
    if unigram is not None and config.objective == "mlm":
        model_loss, counts_loss = [], []
        for b in held:
            at_mask = (b["labels"] != -100) & (b["input_ids"] == tok.mask_token_id)
            if not bool(at_mask.any()):
                continue
            with torch.no_grad():  # the objective's own loss, its targets cut to the [MASK] inputs
                model_loss.append(float(loss_of(config, model, _on_device(model, {**b, "labels": b["labels"].masked_fill(
                    ~at_mask, -100)}))))
            counts_loss.append(float(-unigram[b["labels"][at_mask].cpu().numpy()].mean()))
        if model_loss:  # averaged as held_out_loss is: per batch, then over the batches
            out["mask_loss"] = sum(model_loss) / len(model_loss)
            out["unigram_loss"] = sum(counts_loss) / len(counts_loss)
    if config.objective in ("mlm", "mlm+nsp", "mlm+sop"):
        out["perplexity"] = math.exp(min(out["held_out_loss"] if config.objective == "mlm" else _mlm_only(config, model, batches), 50))
        out["probes"] = probes(model, tok)
    if config.objective == "distil":
        from models.pretrain.distil import held_out_parts

        out.update(held_out_parts(model, [_on_device(model, batches.sample()) for _ in range(4)]))
        out["probes"] = probes(model, tok)
    if config.objective in ("mlm+nsp", "mlm+sop"):
        for kind in ("nsp", "sop"):
            pairs = sentence_pairs(held_out, kind, 999)
            enc = tok([a for a, _, _ in pairs], [b for _, b, _ in pairs], padding=True, truncation=True,
                      max_length=config.seq_len, return_tensors="pt", return_token_type_ids=True)
            with torch.no_grad():
                logits = model(**{k: v.to(model.device) for k, v in enc.items()}).seq_relationship_logits
            right = (logits.argmax(-1).cpu() == torch.tensor([lab for _, _, lab in pairs])).int()
            out[f"{kind}_accuracy"] = float(right.float().mean())
            out[f"{kind}_correct"] = right.tolist()  # per held-out pair, for the verdict's item term; the held-out texts
            # are drawn with the seed, so a pair is named by its text (two seeds share a pair only if they hold its text)
            out[f"{kind}_items"] = [hashlib.sha1(f"{a}\x1f{b}".encode()).hexdigest()[:12] for a, b, _ in pairs]
    out.update(pos_probe(config, main_model(model), tok))
    return out


POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


@functools.lru_cache(maxsize=1)
def _usable_examples() -> tuple[tuple[tuple[str, str, str], ...], ...]:
    """Per part of speech (in :data:`POS_NAMES` order), every WordNet example sentence whose synset's one-word lemma
    appears in it as written, in the file's order. Read once per process: the scan (a regular expression per line of
    the bundled file) takes about a second, and every trained run's evaluation asks twice (its probe, and the probe
    of each step it kept)."""
    by_pos: dict[str, list[tuple[str, str, str]]] = {p: [] for p in POS_NAMES}
    with gzip.open(EXAMPLES, "rt", encoding="utf-8") as f:
        for line in f:
            lemma, pos, sentence = line.rstrip("\n").split("\t", 2)
            pos = "a" if pos == "s" else pos
            if pos in by_pos and " " not in lemma and re.search(rf"\b{re.escape(lemma)}\b", sentence, re.IGNORECASE):
                by_pos[pos].append((sentence, lemma, pos))
    return tuple(tuple(rows) for rows in by_pos.values())


def pos_examples(per_class: int = 150, seed: int = 0) -> list[tuple[str, str, str]]:
    """(sentence, word, part of speech) from WordNet's example sentences, ``per_class`` of each part of speech,
    where the synset's one-word lemma appears as written (so the probe knows which token to read)."""
    rng = random.Random(seed)
    out = []
    for usable in _usable_examples():
        rows = list(usable)  # shuffled as a new list: the cached scan stays in the file's order
        rng.shuffle(rows)
        out += rows[:per_class]
    rng.shuffle(out)
    return out


def _word_vectors(model: torch.nn.Module, tok: Any, rows: list[tuple[str, str, str]], seq_len: int) -> Any:
    """The last layer's vector at the first sub-token of each row's word (frozen features for the probe). Read from
    the model's encoder (``base_model``): the same hidden states without the head, whose vocabulary-sized output
    was most of the arithmetic for a lab-sized model (8,192 words against a hidden size of 32 to 256)."""
    model = getattr(model, "base_model", model)
    feats = []
    for i in range(0, len(rows), 64):
        chunk = rows[i: i + 64]
        enc = tok([r[0] for r in chunk], truncation=True, max_length=seq_len, padding=True, return_tensors="pt",
                  return_offsets_mapping=True)
        offsets = enc.pop("offset_mapping")
        enc.pop("token_type_ids", None)  # one segment; GPT-2 would look its type ids up in the word embeddings
        with torch.no_grad():
            hidden = model(**{k: v.to(model.device) for k, v in enc.items()}, output_hidden_states=True).hidden_states[-1]
        for j, (sentence, word, _) in enumerate(chunk):
            start = re.search(rf"\b{re.escape(word)}\b", sentence, re.IGNORECASE).start()
            hits = [t for t, (a, b) in enumerate(offsets[j].tolist()) if a <= start < b]
            feats.append(hidden[j, hits[0] if hits else 0].float().cpu().numpy())
    return np.stack(feats)


def _probe_right(model: torch.nn.Module, tok: Any, rows: list[tuple[str, str, str]], cut: int, seq_len: int) -> Any:
    """Per test row (``rows[cut:]``), 1 where the probe fitted on ``rows[:cut]`` tags its part of speech right."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    labels = [r[2] for r in rows]
    x = _word_vectors(model, tok, rows, seq_len)
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=0.5))
    clf.fit(x[:cut], labels[:cut])
    return (clf.predict(x[cut:]) == np.asarray(labels[cut:])).astype(int)


def over_training(config: TrainConfig, model: torch.nn.Module, tok: Any, snapshots: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    """At each step a run kept (``snapshots``: step → weights), what the end-of-run evaluation measures on words: the
    POS probe's accuracy (same words, same probe recipe) and, for a masked-LM objective, the fill-mask probes. The
    model's own weights are put back afterwards. Rows ``{step, pos_probe_accuracy, probes?}`` by step."""
    rows = pos_examples(seed=config.seed)
    cut = len(rows) - 200
    final = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = []
    try:
        for step in sorted(snapshots):
            model.load_state_dict(snapshots[step])
            model.eval()
            row: dict[str, Any] = {"step": step, "pos_probe_accuracy": float(_probe_right(model, tok, rows, cut, config.seq_len).mean())}
            if config.objective in ("mlm", "mlm+nsp", "mlm+sop"):
                row["probes"] = probes(model, tok)
            out.append(row)
    finally:
        model.load_state_dict(final)
    return out


def pos_probe(config: TrainConfig, model: torch.nn.Module, tok: Any) -> dict[str, Any]:
    """A linear probe (logistic regression on frozen vectors) for a word's part of speech in WordNet's example
    sentences (held out from training: the corpus is the glosses), for the trained model and for the same
    shape with random weights. Accuracy on 200 test words, four balanced classes (chance 0.25). The words are drawn
    from the seed (each seed its own test words, so seeds replicate the items' noise too), and the per-word
    correctness, the words' ids and their lemmas (clusters) are kept for the verdict's interval."""
    rows = pos_examples(seed=config.seed)
    cut = len(rows) - 200
    torch.manual_seed(config.seed + 1)
    # A distilled student's control is its shape at random weights, not a student cut from the teacher again.
    shape = replace(config, objective="mlm", teacher="") if config.objective == "distil" else config
    untrained = main_model(build_model(shape, len(tok), tok)).to(model.device).eval()
    out = {}
    for name, m in (("pos_probe_accuracy", model), ("pos_probe_random_init", untrained)):
        right = _probe_right(m, tok, rows, cut, config.seq_len)
        out[name] = float(right.mean())
        if name == "pos_probe_accuracy":
            out["pos_probe_correct"] = right.tolist()
    test = rows[cut:]
    out["pos_probe_items"] = [f"pos:{w}:{hashlib.sha1(s.encode()).hexdigest()[:10]}" for s, w, _ in test]
    out["pos_probe_clusters"] = [f"pos:{w.lower()}" for _, w, _ in test]
    return out


def _mlm_only(config: TrainConfig, model: torch.nn.Module, batches: Batches) -> float:
    with torch.no_grad():
        b = _on_device(model, batches.sample())
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"]).prediction_logits
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), b["labels"].reshape(-1), ignore_index=-100))


def probes(model: torch.nn.Module, tok: Any, top_k: int = 5) -> list[dict[str, Any]]:
    """Top-``top_k`` fill-mask predictions on :data:`PROBES` (text from the corpus's own style)."""
    rows = []
    for text in PROBES:
        enc = tok(text.replace("[MASK]", tok.mask_token), return_tensors="pt")
        pos = int((enc["input_ids"][0] == tok.mask_token_id).nonzero()[0])
        with torch.no_grad():
            out = model(**{k: v.to(model.device) for k, v in enc.items()})
        logits = out.logits if hasattr(out, "logits") else out.prediction_logits
        top = torch.topk(logits[0, pos].softmax(-1), top_k)
        rows.append({"probe": text, "top": [tok.convert_ids_to_tokens(int(i)) for i in top.indices]})
    return rows

