"""Pre-train small family members here: BERT's masked LM (static or dynamic masking), with NSP or SOP,
ELECTRA's replaced-token detection, XLNet's permutation LM and GPT-2's causal LM.

Usage::

    from models.pretrain import TrainConfig, train
    result = train(TrainConfig(objective="mlm", masking="dynamic", steps=300), on_progress=print)
    result.curve          # [(step, loss), ...]; result.evaluation: held-out loss, probes, NSP/SOP accuracy
    result.checkpoint     # "trained/<run>": loads on every page (models.loader.load)

    python -m models.pretrain --objective mlm+sop --steps 300 --run my-albert-like

Where to look:

- :mod:`.config` (no torch): objectives, vocabularies, limits, :class:`TrainConfig` (validated whole, the run's name
  included, before any work starts), :class:`TrainResult`, :func:`hf_config`, :func:`trained_dir`.
- :mod:`.corpus` (no torch): the corpus, the tokenizer, NSP/SOP pairs.
- :mod:`.data`: :class:`Batches` (dynamic or static masking). :mod:`.model`: :func:`build_model`.
- :mod:`.unpadded`: BERT's encoder on the real tokens only, which the masked LM's loss runs on (the same
  loss and dropout draws as transformers' padded forward, more tokens/s; ``bench/mfu.py``, bench/results/README.md).
- :mod:`.loss`: each objective's loss. :mod:`.loop`: :func:`train` and :func:`save_run`.
- :mod:`.evaluate`: held-out loss, probes, NSP/SOP accuracy, the part-of-speech probe.
- ``__main__``: the command line.

What libraries do is used: transformers' model classes and heads (``BertForMaskedLM``,
``BertForPreTraining``, ``ElectraForMaskedLM`` / ``ElectraForPreTraining``, ``XLNetLMHeadModel``,
``GPT2LMHeadModel``), ``DataCollatorForLanguageModeling`` (BERT's 80/10/10 recipe, or the causal LM),
``DataCollatorForPermutationLanguageModeling``, and ``accelerate`` for the loop (:mod:`models.training`, shared
with the fine-tuning lab; one device here; several processes or GPUs under ``torchrun`` or ``accelerate
launch``). Written by hand, because no library has them: SOP pairs (a text's two halves, in order or swapped),
static masking (one pattern per example, drawn once), and ELECTRA's joint loss (generator MLM + 50 ×
discriminator, shared embeddings, the generator a quarter of the discriminator's width).

Corpus: WordNet 3.0's glosses (``data/corpus/wordnet_glosses.txt.gz``, 6.3 MB, licence recorded), 2%
held out; or a user's UTF-8 text file (bounded). Tokenizer (``vocab``): ``wordnet-8k``, an 8,192-token
uncased WordPiece trained on the glosses with ``tokenizers`` (``scripts/build_lab_tokenizer.py``), the
default because with BERT's 30,522 tokens the embeddings and the output layer are most of a small
model's parameters and compute; or ``bert``, the bundled MiniLM's WordPiece (BERT's own vocabulary).

Downstream evaluation: a linear probe (scikit-learn's logistic regression on frozen last-layer vectors)
that tags the part of speech of a word in WordNet's example sentences, which are not in the training
corpus; it is compared with the same probe on a randomly initialised model of the same shape.

Several processes: ``torchrun --nproc-per-node 2 -m models.pretrain -- ...`` on CPUs (gloo; accelerate takes
the process group torchrun sets up; ``accelerate launch`` itself needs MPI for several CPU processes), or
``accelerate launch --multi_gpu --num_processes N -m models.pretrain ...`` on GPUs (NCCL). Every process draws
the same global batch and masks it with the same seed, then trains on its slice; the masked-LM loss is weighted
by the global count of masked tokens, so two processes compute the gradient one process computes.

Importing this package is cheap: the torch-free names load at once, the rest (:func:`train`, :class:`Batches`,
:func:`build_model` ...) on first use (PEP 562), so the lab's page and planner never pay for torch.
"""

from __future__ import annotations

import importlib
from typing import Any

from core.errors import TrainingFailed
from models.pretrain.config import (
    CORPUS,
    EXAMPLES,
    HELD_OUT,
    LAB_VOCAB,
    LIMITS,
    MAX_USER_CORPUS_BYTES,
    OBJECTIVES,
    PROBES,
    VOCAB_SIZES,
    VOCABS,
    TrainConfig,
    TrainResult,
    hf_config,
    trained_dir,
)
from models.pretrain.corpus import read_corpus, sentence_pairs, tokenizer
from models.run_config import RUN_NAME

#: name -> submodule, for the names that need torch (imported on first use)
_LAZY = {"Batches": "data", "build_model": "model", "parameter_count": "model", "main_model": "model",
         "MODEL_CLASSES": "model", "loss_of": "loss", "train": "loop", "save_run": "loop", "evaluate": "evaluate",
         "pos_probe": "evaluate", "pos_examples": "evaluate", "probes": "evaluate", "POS_NAMES": "evaluate",
         "main": "__main__"}

__all__ = ["CORPUS", "EXAMPLES", "HELD_OUT", "LAB_VOCAB", "LIMITS", "MAX_USER_CORPUS_BYTES", "OBJECTIVES", "PROBES",
           "RUN_NAME", "VOCABS", "VOCAB_SIZES", "TrainConfig", "TrainResult", "TrainingFailed", "hf_config", "read_corpus",
           "sentence_pairs", "tokenizer", "trained_dir", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"models.pretrain.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'models.pretrain' has no attribute {name!r}")
