"""Verdicts on a ratio of two arms measured on the same seeds: DistilBERT's "the student keeps 97% of the teacher's
score" and "runs 60% faster" (Sanh et al. 2019, Tables 1 and 3).

The ratio of the means R = ā / b̄ over S paired seeds, with a t interval from the delta method: the seed-level
residuals d_s = a_s − R·b_s have mean zero at the true ratio, and Var(R̂) ≈ s²_d / (S·b̄²), so

    R̂ ± t_{S−1, 0.975} · s_d / (√S · |b̄|).

Why the delta method and not Fieller's theorem: Fieller's interval is exact for normal means but becomes unbounded
(or two disjoint rays) when the denominator's mean is not clearly away from zero; here the denominator is a teacher's
accuracy or an inference time, many standard errors from zero, where the two intervals agree to the first order and
the delta method's is always finite.

A ratio of scores has a second condition: the teacher must have learnt something. A student and a teacher that both
score at their random initialisation's level have a ratio near 1 (the share of chance a model at chance keeps), which
would read as "keeps 100%". Given the denominator's random-init controls (``baseline``), the ratio is decided only
where the denominator is measurably above them (its paired t interval over seeds wholly above zero); otherwise the
label is "cannot tell" with that reason. Pairing by seed (a student and the teacher it learned from
share the seed) is what makes d_s one observation per seed. As with :func:`analysis.verdicts.verdict` without
per-item scores, the interval covers the seeds' noise on the test items the seeds drew: an interval for those items.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from scipy import stats

from analysis.verdicts.arms import verdict
from analysis.verdicts.labels import AGREES, AGREES_ON_DIRECTION, CANNOT_TELL, LEVEL, MIN_SEEDS, NO_VERDICT, label_for
from analysis.verdicts.trends import TrendVerdict, band_reason, in_band
from core.errors import InvalidData

METHOD = "ratio of means over paired seeds, delta-method t interval"


def ratio_interval(a: Sequence[float], b: Sequence[float], level: float = LEVEL) -> tuple[float, float, float]:
    """(ā / b̄, low, high) over paired seeds (``a[s]`` and ``b[s]`` from seed s); low and high are NaN with fewer than
    2 seeds, and equal to the ratio when the residuals do not vary.

    Raises:
        InvalidData: unpaired, non-finite, or a denominator whose mean is zero.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape or x.ndim != 1 or not len(x) or not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise InvalidData("A ratio needs two equally long lists of finite scores, one pair per seed.")
    if y.mean() == 0:
        raise InvalidData("The denominator's mean is zero: the ratio is undefined.")
    ratio = float(x.mean() / y.mean())
    if len(x) < MIN_SEEDS:
        return ratio, float("nan"), float("nan")
    residuals = x - ratio * y  # (S,)
    se = float(residuals.std(ddof=1)) / (math.sqrt(len(x)) * abs(float(y.mean())))
    half = float(stats.t.ppf(0.5 + level / 2, len(x) - 1)) * se
    return ratio, ratio - half, ratio + half


def gain_interval(scores: Sequence[float], baseline: Sequence[float]) -> tuple[float, float, float]:
    """The mean of ``scores − baseline`` over paired seeds with its 95% interval: the arms' paired t
    (:func:`analysis.verdicts.arms.verdict`, no per-item term); low and high NaN with fewer than 2 seeds. Raises
    InvalidData for unpaired or non-finite values."""
    if len(scores) != len(baseline):
        raise InvalidData("A gain needs two equally long lists of finite scores, one pair per seed.")
    if len(scores) < MIN_SEEDS:
        return float(np.mean(np.asarray(scores, float) - np.asarray(baseline, float))), float("nan"), float("nan")
    v = verdict(scores, baseline, ">", paired=True)
    return v.effect, v.low, v.high


def ratio_verdict(a: Sequence[float], b: Sequence[float], quantity: str, floor: float, reference: float,
                  source: str, baseline: Sequence[float] | None = None, band: float = 0.0,
                  level: float = LEVEL, min_gain: float = 0.0) -> TrendVerdict:
    """A ratio claim decided by the one labelling rule (:func:`label_for`): **agrees** when the interval lies wholly
    above ``floor``, **disagrees** when wholly below, else **cannot tell**. Where the paper's value ``reference``
    differs from the floor (a speed-up: faster at all is the floor, the paper's 1.63× the value) an interval above
    the floor that leaves the value out **agrees on direction only**. ``baseline``: the denominator's random-init
    control per seed (a score ratio); where ``b`` is not measurably above it, **cannot tell** (the module's
    docstring). ``band`` > 0: the value is matched only when the whole interval lies within ±band of it (an
    equivalence test; :func:`analysis.verdicts.trends.in_band`). ``level``: below 95% for a claim adjusted with others
    (Holm). Fewer than 2 seeds: no verdict."""
    estimate, low, high = ratio_interval(a, b, level)
    if not (math.isfinite(low) and math.isfinite(high)):
        return TrendVerdict(NO_VERDICT, quantity, estimate, low, high, reference, source, False, len(a), METHOD,
                            f"a verdict needs at least {MIN_SEEDS} seeds with both arms measured ({len(a)} had).")
    inside = in_band(low, high, reference, band) if band else low <= reference <= high
    if baseline is not None:
        gain, gain_low, gain_high = gain_interval(b, baseline)
        if not (gain_low > 0 and gain >= min_gain):
            return TrendVerdict(CANNOT_TELL, quantity, estimate, low, high, reference, source, inside, len(a), METHOD,
                                level=level, reason=f"the denominator does not score measurably and materially (by "
                                f"{min_gain:g} or more) above its random initialisation (by "
                                f"{gain:+.3f}, 95% interval {gain_low:+.3f} to {gain_high:+.3f}): a share of a score "
                                "at chance says nothing about what was kept; a larger budget per run may tell")

    label, reason = label_for(">", 0.0, low - floor, high - floor), ""
    if high - low <= 1e-9 * max(1.0, abs(estimate)):  # no spread (to rounding)
        label, reason = CANNOT_TELL, "no measurable spread: every seed read the same ratio, so the interval has no width"
    if label == AGREES and reference != floor and not inside:
        label = AGREES_ON_DIRECTION
        reason = (band_reason(low, high, reference, band) if band else
                  f"above {floor:g}, as claimed, but the paper's {reference:.3g} lies outside the interval")
    return TrendVerdict(label, quantity, estimate, low, high, reference, source, inside, len(a), METHOD, reason, level=level)
