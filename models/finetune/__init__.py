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

Where to look:

- :mod:`.config` (no torch): modes, layers, limits, :class:`FineTuneConfig` (checked whole before any work starts),
  :class:`FineTuneResult`, :func:`default_lr`, :func:`run_label`.
- :mod:`.data`: :func:`load_config_task`, :func:`encode` (the marked word's sub-token found), :func:`collate`.
- :mod:`.model`: :func:`build` (pre-trained or random), :func:`encoder_of`.
- :mod:`.frozen`: the frozen read-out, :func:`features` and :func:`read_out`.
- :mod:`.loop`: :func:`finetune` (one run, request to result) and :func:`train_all_weights` (the full fine-tuning).
- :mod:`.evaluate`: predictions, scores with intervals, what changed per layer (:func:`layer_change`).
- :mod:`.save`: :func:`save_run`, :func:`stored_config`. :mod:`.downstream`: the lab presets' downstream suite.
- :mod:`.cli` (``__main__``): the command line.

Importing this package is cheap: torch, transformers and scikit-learn are imported inside the functions that use
them, so the fine-tuning page and the lab's planner never pay for them.
"""

from __future__ import annotations

from analysis.tasks import Example, Task
from models.finetune.cli import main
from models.finetune.config import LAYERS, LIMITS, TRAINING_MODES, FineTuneConfig, FineTuneResult, default_lr, run_label
from models.finetune.data import (
    IGNORE,
    VALIDATION_MAX,
    Encoded,
    collate,
    encode,
    encode_splits,
    load_config_task,
    marked,
)
from models.finetune.downstream import DOWNSTREAM_DEFAULTS, check_downstream, downstream
from models.finetune.evaluate import (
    CKA_SENTENCES,
    hidden_states,
    layer_change,
    predict,
    score,
    weight_change,
    weight_snapshot,
)
from models.finetune.frozen import features, pair_features, pair_words, read_out
from models.finetune.loop import finetune, train_all_weights
from models.finetune.model import build, encoder_of, source_folder
from models.finetune.save import save_run, stored_config

__all__ = ["CKA_SENTENCES", "DOWNSTREAM_DEFAULTS", "IGNORE", "LAYERS", "LIMITS", "TRAINING_MODES", "VALIDATION_MAX", "Encoded",
           "Example", "FineTuneConfig", "FineTuneResult", "Task", "build", "check_downstream", "collate", "default_lr",
           "downstream", "encode", "encode_splits", "encoder_of", "features", "finetune", "hidden_states", "layer_change",
           "load_config_task", "main", "marked", "pair_features", "pair_words", "predict", "read_out", "run_label",
           "save_run", "score", "source_folder", "stored_config", "train_all_weights", "weight_change", "weight_snapshot"]
