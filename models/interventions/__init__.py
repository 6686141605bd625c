"""Which parts of a model matter: heads masked, ablated and ranked, and what every layer would predict.

- :class:`HeadMask`: while it is active, each attention head's output is multiplied by ``mask[layer, head]`` (a tensor
  that may require a gradient) or, for a mean ablation, replaced by that head's mean output. It hooks the module whose
  *input* is the heads' concatenated outputs (the attention output projection), so it works on every architecture
  listed in :func:`head_projections` without touching the attention code. transformers 5 dropped the ``head_mask``
  argument these models once took, so there is no library path to reuse; the hook multiplies exactly what
  ``head_mask`` multiplied (a head's context vectors), and ``tests/models/test_interventions.py`` checks it against weight
  surgery on the output projection (what ``prune_heads`` did).
- :func:`head_importance`: Michel, Levy & Neubig 2019 ("Are Sixteen Heads Really Better than One?"): the importance of
  head h is the expected absolute gradient of the loss with respect to its mask variable ξ_h, summed over batches as
  the paper's released code does (one backward pass per batch), then normalised per layer (L2), as the paper.
- :func:`pruning_curve`: the masked-LM accuracy as heads are removed in order of importance, against random orders
  (several seeds, a t interval per point). Heads are ranked once, on one half of the texts, and scored on the other.
- :func:`logit_lens`: for each ``[MASK]``, the top-k tokens the model's own masked-LM head reads from every layer's
  hidden state, and the probability of the final answer by layer; its last layer is the model's fill-mask output.
- :func:`ablate_heads`: named heads removed (zeroed, or replaced by their mean output) and the target scored with and
  without them.
- :func:`activation_patching`: causal tracing of a masked prediction, a layer's output or a head's copied from a clean
  run into a corrupted one.

What a removal is scored by (:func:`make_target`): the masked-LM loss on seeded masks of the texts, a fine-tuned
classifier's task loss, or a linear probe's.

Where to look: :mod:`.heads` (where heads meet, :class:`HeadMask`, :func:`head_means`), :mod:`.targets` (the masked
batch and the targets), :mod:`.importance`, :mod:`.ablation`, :mod:`.pruning` (the curve and its verdict),
:mod:`.lens` (the logit lens), :mod:`.patching` (causal tracing). Importing this package is cheap: torch is imported
inside the functions that use it.
"""

from __future__ import annotations

from models.interventions.ablation import Ablation, ablate_heads, check_heads, parse_heads
from models.interventions.heads import (
    HeadMask,
    head_means,
    head_projections,
    head_shape,
    wrap_post_attention,
    xlnet_attentions,
)
from models.interventions.importance import Importance, head_importance, importance_of
from models.interventions.lens import LensRow, LogitLens, logit_lens, mlm_head
from models.interventions.patching import MAX_PATCH_PASSES, Patching, activation_patching, layer_modules
from models.interventions.pruning import (
    MAX_PRUNING_PASSES,
    MAX_SEEDS,
    MAX_STEPS,
    PRUNING_CLAIM,
    PruningCurve,
    pruning_curve,
    pruning_verdict,
)
from models.interventions.targets import (
    BATCH,
    MASK_RATE,
    MAX_ITEMS,
    MAX_SENTENCES,
    PROBE_TRAIN,
    TARGETS,
    Chunk,
    ClassifierTarget,
    MaskedBatch,
    MaskedLMTarget,
    ProbeTarget,
    Target,
    make_target,
    masked_batch,
    mlm_score,
    needs_labelled_lines,
    parse_labelled,
)

__all__ = ["BATCH", "MASK_RATE", "MAX_ITEMS", "MAX_PATCH_PASSES", "MAX_PRUNING_PASSES", "MAX_SEEDS", "MAX_SENTENCES",
           "MAX_STEPS", "PROBE_TRAIN", "PRUNING_CLAIM", "TARGETS", "Ablation", "Chunk", "ClassifierTarget", "HeadMask",
           "Importance", "LensRow", "LogitLens", "MaskedBatch", "MaskedLMTarget", "Patching", "ProbeTarget",
           "PruningCurve", "Target", "ablate_heads", "activation_patching", "check_heads", "head_importance",
           "head_means", "head_projections", "head_shape", "importance_of", "layer_modules", "logit_lens", "make_target",
           "masked_batch", "mlm_head", "mlm_score", "needs_labelled_lines", "parse_heads", "parse_labelled", "pruning_curve",
           "pruning_verdict", "wrap_post_attention", "xlnet_attentions"]
