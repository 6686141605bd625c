"""Verdicts: does a measured ablation agree with the paper's claim, at this budget?

The papers decide a claim the same way: a downstream score, over several seeds, compared between arms. This
module makes that decision from numbers alone (no torch), so that the lab's presets, the page, the database and
the tests share one rule:

- :func:`verdict` compares two arms' per-seed scores against a claim ``">"`` (a beats b) or ``">="`` (a is at
  least as good as b, within ``margin``) and returns one of three labels, computed, never written by hand:
  **agrees** (the 95% interval of the effect excludes the paper's "no" side), **cannot tell at this budget** (the
  interval straddles it; :attr:`Verdict.seeds_needed` says how many seeds the observed spread would need), or
  **disagrees** (the interval lies wholly on the other side). With fewer than 2 seeds on an arm there is no
  verdict, by design: one seed measures the seed, not the method.
- :func:`scaling_verdict` and :func:`isoflop_verdict` do the same for a fitted exponent (the scaling preset's α, the
  IsoFLOP optimum's exponent). The claim quotes a value, so the value decides too: **agrees** when the interval has
  the paper's sign and holds the paper's value (Kaplan's α_N ≈ 0.076, Chinchilla's a ≈ 0.5), **agrees on direction
  only** when it has the sign but leaves the value out, and an IsoFLOP optimum at the edge of the widths tried (the
  parabola's minimum clipped to them) makes it **cannot tell**.

The interval: two levels of noise, analytic. A verdict generalises over two things a run draws: the seed (data
order, initialisation) and the test items (a task's test set is a sample of the sentences it could have held).
Seeds are the replicates, so each seed's difference of scores D_s is one paired observation; when the seeds drew
their test items independently, the spread of D_s already holds the items' noise and Student's t over seeds is
the whole answer. When seeds score shared items (a test split smaller than ``max_test``, the SOP pairs), an item
that is easy for arm a and hard for b moves every D_s the same way: the spread over seeds cannot see it, and the
paired t answers "on this test set". The variance of the mean difference is then

    Var(D̄) = s²_D / S + C,   C = mean over seed pairs s ≠ t of Cov(D_s, D_t),

and C, the covariance that shared items (and items of one cluster, e.g. one lemma's WiC pairs) put between two
seeds, is estimated from the per-item scores: for seeds s ≠ t, the sum over clusters of the product of the two
seeds' centred, weighted item residuals (a cluster-robust cross-product; seeds that share no cluster add 0). The
interval is Student's t with Satterthwaite's degrees of freedom for the two terms (the item term's own from the
spread of the clusters' independent parts). It is analytic rather than
a bootstrap because with 3–5 seeds a bootstrap over seeds has 10–126 distinct resamples and is too narrow by
(S−1)/S, while the analytic form is exact for the seed term and deterministic; its coverage with both kinds of
noise is checked on simulated data in ``tests/analysis/test_verdicts.py``. Without per-item scores the method says so.

Several measures per claim. Each claim has one primary measure (the paper's own); the others (each task of a
downstream average, the part-of-speech probe) are exploratory and get Bonferroni intervals at a family-wise 95%
(``family``: the number of exploratory comparisons), so six null comparisons do not make a spurious decisive
label likely.

Where to look: :mod:`.labels` (the claims, the labels and :func:`label_for`), :mod:`.arms` (:func:`verdict`,
:class:`Items`, the interval's parts), :mod:`.trends` (:func:`scaling_verdict`, :func:`isoflop_verdict`).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from analysis.verdicts.labels import (
    AGREES,
    AGREES_ON_DIRECTION,
    CANNOT_TELL,
    CLAIMS,
    DESCRIPTIVE,
    DISAGREES,
    LABEL_TEXT,
    LABELS,
    LEVEL,
    MIN_SEEDS,
    NO_VERDICT,
    Label,
    label_for,
)

if TYPE_CHECKING:
    from analysis.verdicts.arms import MAX_ITEMS, MAX_SEEDS, Items, Verdict, effect_interval, items_of, seeds_needed, verdict
    from analysis.verdicts.trends import TrendVerdict, isoflop_optima, isoflop_optimum, isoflop_verdict, scaling_verdict

#: Where the deciding names live. They are loaded on first use (PEP 562), not with the package: :mod:`.arms` and
#: :mod:`.trends` import scipy (its cost: bench/results/README.md), and the labels alone are read on the path to the
#: first page drawn (the lab package's import, which the server's warm-up makes before it starts the model process).
_LAZY = {**dict.fromkeys(("MAX_ITEMS", "MAX_SEEDS", "Items", "Verdict", "effect_interval", "items_of", "seeds_needed",
                          "verdict"), "arms"),
         **dict.fromkeys(("TrendVerdict", "isoflop_optima", "isoflop_optimum", "isoflop_verdict", "scaling_verdict"), "trends")}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(import_module(f"analysis.verdicts.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["AGREES", "AGREES_ON_DIRECTION", "CANNOT_TELL", "CLAIMS", "DESCRIPTIVE", "DISAGREES", "LABELS", "LABEL_TEXT", "LEVEL",
           "MAX_ITEMS", "MAX_SEEDS", "MIN_SEEDS", "NO_VERDICT", "Items", "Label", "TrendVerdict", "Verdict",
           "effect_interval", "isoflop_optima", "isoflop_optimum", "isoflop_verdict", "items_of", "label_for",
           "scaling_verdict", "seeds_needed", "verdict"]
