"""Two arms compared over seeds (:func:`verdict`): Student's t over the seeds' scores, paired or Welch, with the
shared test items' covariance added from per-item scores (:class:`Items`), and how many seeds or items would
resolve a "cannot tell". The method is set out in the package's docstring (:mod:`analysis.verdicts`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
from scipy import special

from analysis.verdicts.labels import (
    CANNOT_TELL,
    CLAIMS,
    DESCRIPTIVE,
    LEVEL,
    MIN_SEEDS,
    NO_VERDICT,
    label_for,
)
from core.errors import InvalidData

MAX_SEEDS = 1000
MAX_ITEMS = 100_000
_SEP = "\x1f"  # between an item's task and its cluster in a residual's key


@dataclass(frozen=True)
class Verdict:
    """The decision on one claim: the label, the effect (mean of a − mean of b) and its interval, and why."""

    label: str
    claim: str
    margin: float
    effect: float
    low: float
    high: float
    method: str
    mean_a: float
    mean_b: float
    std_a: float
    std_b: float
    seeds_a: int
    seeds_b: int
    seeds_needed: int | None = None  # when it cannot tell: an estimate of the seeds per arm that would resolve it
    reason: str = ""
    level: float | None = LEVEL  # the interval's confidence (below 1 − 0.05/family for an exploratory measure)
    family: int | None = 1  # comparisons in the Bonferroni family (1: a primary measure)
    df: float | None = None  # the t interval's degrees of freedom (Satterthwaite's with the item term)
    item_share: float | None = None  # the part of the effect's variance that the shared test items add (0–1)
    items_needed: int | None = None  # when it cannot tell: an estimate of the test items per seed that would resolve it
    single_cluster_strata: tuple[str, ...] = ()  # tasks whose shared items form one cluster: they add no item term
    no_spread: bool = False  # every seed read the same difference (within the score's resolution): no decisive label

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["single_cluster_strata"] = list(self.single_cluster_strata)  # as JSON stores it
        return out

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Verdict:
        fields = {k: raw.get(k) for k in cls.__dataclass_fields__ if k in raw}
        if fields.get("single_cluster_strata") is not None:
            fields["single_cluster_strata"] = tuple(fields["single_cluster_strata"])
        return cls(**{"reason": "", **fields})

    @property
    def sentence(self) -> str:
        """One line for the page: the label, the effect and its interval, and what would resolve a "cannot tell"."""
        if self.label == NO_VERDICT:
            return f"No verdict: {self.reason}"
        level = self.level or LEVEL
        name = f"{level * 100:.4g}%"
        family = f", Bonferroni over {self.family} exploratory comparisons" if (self.family or 1) > 1 else ""
        line = (f"{self.label.capitalize()}: effect {self.effect:+.3f} ({name} interval {self.low:+.3f} to {self.high:+.3f}; "
                f"{self.method}{family})")
        if self.no_spread:
            return line + f". {self.reason[:1].upper()}{self.reason[1:]}"
        if self.label == CANNOT_TELL:
            hints = []
            if self.seeds_needed:
                hints.append(f"about {self.seeds_needed} seeds per arm")
            if self.items_needed:
                hints.append(f"about {self.items_needed:,} test items per seed")
            line += (". Estimated from the observed spread, an effect this size would need " + " or ".join(hints)
                     + " (a half-width equal to the effect's distance from the claim's boundary: about even odds of a "
                       "decisive label if the true effect is the one observed)"
                     if hints else f". {self.reason[:1].upper()}{self.reason[1:]}")
        return line


@dataclass(frozen=True)
class Items:
    """One seed's per-item scores. ``ids``: the same id is the same test item in every seed; ``clusters``: items of
    one cluster (one lemma) are not independent (default: each item its own); ``strata``: the task of each item
    (residuals are centred per task); ``weights``: the seed's score is Σ weight × value (default: the mean)."""

    values: np.ndarray
    ids: tuple[str, ...]
    clusters: tuple[str, ...]
    strata: tuple[str, ...]
    weights: np.ndarray

    @property
    def residuals(self) -> dict[str, float]:
        """Per (task, cluster): the weighted sum of the items' deviations from their task's mean in this seed."""
        strata, task = _factorize(self.strata)
        wv = np.bincount(task, self.weights * self.values, len(strata))
        w = np.bincount(task, self.weights, len(strata))
        centre = np.divide(wv, w, out=np.zeros_like(wv), where=w > 0)
        names, cluster = _factorize([f"{s}{_SEP}{c}" for s, c in zip(self.strata, self.clusters, strict=True)])
        sums = np.bincount(cluster, self.weights * (self.values - centre[task]), len(names))
        return dict(zip(names, sums.tolist(), strict=True))


def _factorize(values: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """The distinct strings in sorted order and each value's index among them: ``np.unique(values,
    return_inverse=True)`` in plain Python, because numpy's unique on strings copies them into fixed-width UCS4
    arrays and sorts those, most of a verdict's time in the coverage simulations (thousands of verdicts of hundreds
    of items). Same order (code points), same indices."""
    names = sorted(set(values))
    if len(names) == 1:
        return names, np.zeros(len(values), dtype=np.intp)
    index = {name: i for i, name in enumerate(names)}
    return names, np.fromiter(map(index.__getitem__, values), dtype=np.intp, count=len(values))


def _t_quantile(p: float, df: Any) -> Any:
    """Student's t quantile: what ``scipy.stats.t.ppf(p, df)`` returns for df > 0 (it calls this same ``stdtrit``),
    without its argument checks and broadcasting, which cost 50× the quantile; a verdict takes a dozen."""
    return special.stdtrit(df, p)


def _floats(values: Any) -> np.ndarray:
    """A float array from an array as it is (``list()`` of an array builds a Python object per element) or from
    any other iterable."""
    return np.asarray(values if isinstance(values, np.ndarray) else list(values), dtype=float)


def _scores(name: str, values: Sequence[float]) -> np.ndarray:
    try:
        x = _floats(values)
    except (TypeError, ValueError):
        raise InvalidData(f"{name} must be numbers, one per seed.") from None
    if x.ndim != 1 or len(x) > MAX_SEEDS:
        raise InvalidData(f"{name} must be a flat list of at most {MAX_SEEDS:,} per-seed scores.")
    if not np.all(np.isfinite(x)):
        raise InvalidData(f"{name} holds a missing or infinite score.", "Drop the seeds that failed before deciding.")
    return x


def _texts(values: Any) -> tuple[str, ...]:
    """Ids, clusters or strata as strings (an array converted at once: a simulation passes thousands per verdict)."""
    if isinstance(values, np.ndarray):
        return tuple(values.astype(str).tolist())
    return tuple(map(str, values))


def items_of(name: str, raw: Any) -> Items:
    """One seed's :class:`Items` from a list of scores (item j is the same item in every seed) or a mapping with
    ``values`` (or ``correct``) and optional ``ids`` (or ``items``), ``clusters``, ``strata`` and ``weights``.

    Raises:
        InvalidData: lengths that differ, non-finite or negative numbers, more than :data:`MAX_ITEMS` items.
    """
    if isinstance(raw, Items):
        return raw
    spec = raw if isinstance(raw, dict) else {"values": raw}
    try:
        def given(*keys: str) -> Any:
            return next((spec[k] for k in keys if spec.get(k) is not None), None)

        values = _floats(given("values", "correct") if given("values", "correct") is not None else [])
        n = len(values)
        ids = _texts(given("ids", "items") if given("ids", "items") is not None else range(n))
        clusters = _texts(given("clusters")) if given("clusters") is not None else ids
        strata = _texts(given("strata") if given("strata") is not None else [""] * n)
        weights = _floats(spec["weights"]) if spec.get("weights") is not None else np.full(n, 1.0 / max(n, 1))
    except (TypeError, ValueError):
        raise InvalidData(f"{name} must hold numbers per test item (and optional ids, clusters, strata, weights).") from None
    if not 1 <= n <= MAX_ITEMS or values.ndim != 1 or weights.ndim != 1 or not np.all(np.isfinite(values)) or not np.all(np.isfinite(weights)) \
            or np.any(weights < 0) or not len(ids) == len(clusters) == len(strata) == len(weights) == n:
        raise InvalidData(f"{name} must hold 1 to {MAX_ITEMS:,} finite item scores, with ids, clusters, strata and "
                          "non-negative weights of the same length.")
    return Items(values, ids, clusters, strata, weights)


def _seed_items(name: str, rows: Sequence[Any] | None, seeds: int) -> list[Items] | None:
    if rows is None:
        return None
    if isinstance(rows, str | bytes) or not hasattr(rows, "__len__") or len(rows) != seeds:
        raise InvalidData(f"{name} must hold one entry of per-item scores per seed ({seeds}).")
    return [items_of(f"{name}[{i}]", r) for i, r in enumerate(rows)]


def _cross(a: list[dict[Any, float]], b: list[dict[Any, float]] | None = None) -> dict[Any, float]:
    """Per cluster, its part of the mean over seed pairs of Σ_clusters e_s·e_t (pairs s ≠ t within one list; every
    pair across two lists). Only clusters seen on both sides of a pair appear."""
    out: dict[Any, float] = {}
    if b is None:
        if len(a) < 2:
            return out
        total: dict[Any, float] = {}
        squares: dict[Any, float] = {}
        seen: dict[Any, int] = {}
        for e in a:
            for c, r in e.items():
                total[c] = total.get(c, 0.0) + r
                squares[c] = squares.get(c, 0.0) + r * r
                seen[c] = seen.get(c, 0) + 1
        pairs = len(a) * (len(a) - 1)
        return {c: (total[c] ** 2 - squares[c]) / pairs for c, k in seen.items() if k > 1}
    sum_a: dict[Any, float] = {}
    sum_b: dict[Any, float] = {}
    for e in a:
        for c, r in e.items():
            sum_a[c] = sum_a.get(c, 0.0) + r
    for e in b:
        for c, r in e.items():
            sum_b[c] = sum_b.get(c, 0.0) + r
    return {c: sum_a[c] * sum_b[c] / (len(a) * len(b)) for c in sum_a if c in sum_b}


def _item_term(parts: dict[str, float]) -> tuple[float, float, tuple[str, ...], int]:
    """The shared items' covariance term from its per-cluster parts, its degrees of freedom, and the strata (tasks)
    of one cluster. Residuals are centred per task (stratum), which costs each stratum one cluster's worth: its parts
    are scaled by G_k/(G_k−1). A stratum with one cluster has residuals of 0 and adds nothing to the term: it is
    returned by name so the verdict can say so.

    The df is Satterthwaite's 2·C² / Var(C), Var(C) from the spread of the clusters' independent parts, capped at
    G − 1 (G: the clusters that enter): a variance estimated from G independent parts has at most G − 1 degrees of
    freedom, and with 3–5 clusters the uncapped estimate overstated them (coverage 0.83 at 3 clusters, 0.90 at 5 in
    simulation). Returns (C × G/(G−1), df, one-cluster strata, G)."""
    strata: dict[str, list[float]] = {}
    for key, value in parts.items():
        strata.setdefault(key.split(_SEP, 1)[0], []).append(value)
    single = tuple(sorted(k for k, vs in strata.items() if len(vs) == 1))
    scaled = [v * len(vs) / (len(vs) - 1) for vs in strata.values() if len(vs) > 1 for v in vs]
    g = len(scaled)
    if g < 2:
        return 0.0, 0.0, single, g
    x = np.asarray(scaled, dtype=float)
    value = float(x.sum())
    spread = float(g / (g - 1) * ((x - value / g) ** 2).sum())
    df = 2 * value * value / spread if spread > 0 and value > 0 else float(g - 1)
    # CR1's small-sample factor G/(G−1) (as Stata's cluster-robust variance): the sum of G cross-products around
    # estimated centres understates the covariance by about (G−1)/G; with the df capped at G − 1 below, the interval
    # covers ≥ 0.93 at 3 and 5 clusters (0.83 and 0.90 without either).
    return value * g / (g - 1), min(df, float(g - 1)), single, g


@dataclass(frozen=True)
class _Variance:
    """The effect's variance in parts: per arm (or for the paired differences) the seeds' sample variance s² and
    count S (the term s²/S, with S − 1 degrees of freedom), and the shared items' covariance term over G clusters."""

    seed_terms: tuple[tuple[float, int], ...]  # (s², S)
    item: float
    item_df: float
    items_per_seed: float
    clusters: int = 0  # G, the clusters the item term was estimated from

    def total(self, seeds: int | None = None, item_factor: float = 1.0) -> tuple[float, float]:
        """(variance, Satterthwaite df), as measured or for ``seeds`` per arm and ``item_factor`` × the test items."""
        terms = [(s2 / (seeds or n), (seeds or n) - 1) for s2, n in self.seed_terms]
        if self.item > 0 and self.item_df > 0:
            terms.append((self.item / item_factor, self.item_df))
        var = sum(v for v, _ in terms)
        denom = sum(v * v / df for v, df in terms if df > 0)
        df = var * var / denom if denom > 0 else float("inf")
        # Where the items add a term, the whole interval's df is at most G − 1: Satterthwaite's blend assumes each
        # part is a scaled χ², which a cluster-robust sum over 3–10 clusters is not; capped, the two-level interval
        # keeps its coverage at 3 and 5 clusters (tests/analysis/test_verdicts.py; figures: bench/results/README.md).
        return var, (min(df, self.clusters - 1) if self.item > 0 and self.clusters > 1 else df)

    def seeds_for(self, target: float, level: float, start: int) -> int | None:
        """The fewest seeds per arm (from ``start`` to :data:`MAX_SEEDS`) whose interval's half-width is below
        ``target``, this spread and item term assumed; None if none. Every count is tried (vectorised): the half-width
        need not fall monotonically (with a small item df, Satterthwaite's df sinks towards it as seeds grow)."""
        n = np.arange(max(start, MIN_SEEDS), MAX_SEEDS + 1, dtype=float)
        parts = [(s2 / n, n - 1) for s2, _ in self.seed_terms]
        if self.item > 0 and self.item_df > 0:
            parts.append((np.full_like(n, self.item), np.full_like(n, self.item_df)))
        var = sum(v for v, _ in parts)
        denom = sum(v * v / df for v, df in parts)
        df = np.divide(var * var, denom, out=np.full_like(n, np.inf), where=denom > 0)
        if self.item > 0 and self.clusters > 1:
            df = np.minimum(df, self.clusters - 1)  # as in total()
        half = _t_quantile(0.5 + level / 2, df) * np.sqrt(var)
        hits = np.flatnonzero(half < target)
        return int(n[hits[0]]) if len(hits) else None


def _half(var: _Variance, level: float, seeds: int | None = None, item_factor: float = 1.0) -> float:
    v, df = var.total(seeds, item_factor)
    return float(_t_quantile(0.5 + level / 2, df) * math.sqrt(v)) if v > 0 and df > 0 else 0.0


def seeds_needed(spread: float, target: float, paired: bool = True, start: int = MIN_SEEDS, level: float = LEVEL) -> int | None:
    """Seeds per arm at which a t interval's half-width drops below ``target``, for the observed ``spread`` (the
    standard deviation of the paired differences, or of one arm's scores for two independent arms), when the test
    items add nothing; None when no count up to :data:`MAX_SEEDS` does. An estimate: the spread itself is uncertain."""
    if not (target > 0 and math.isfinite(spread)):
        return None
    if spread == 0:
        return max(start, MIN_SEEDS)
    for n in range(max(start, MIN_SEEDS), MAX_SEEDS + 1):
        se = spread / math.sqrt(n) if paired else spread * math.sqrt(2 / n)
        if _t_quantile(0.5 + level / 2, (n - 1) if paired else 2 * (n - 1)) * se < target:
            return n
    return None


def verdict(scores_a: Sequence[float], scores_b: Sequence[float], claim: str = ">", margin: float = 0.0, *,
            items_a: Sequence[Any] | None = None, items_b: Sequence[Any] | None = None, method: str = "t",
            paired: bool | None = None, family: int = 1, resolution: float | None = None) -> Verdict:
    """Decide ``claim`` (``">"``: a beats b; ``">="``: a is at least as good as b within ``margin``) from per-seed
    scores. ``scores_a[i]`` and ``scores_b[i]`` are paired by seed when both arms have the same number of seeds
    (``paired=None``). ``items_*`` (per seed: per-item scores, see :func:`items_of`) add the shared test items'
    noise to the interval (the package's docstring, :mod:`analysis.verdicts`); ``family`` > 1 makes it a Bonferroni interval at
    1 − 0.05/family (an exploratory measure). Fewer than :data:`MIN_SEEDS` seeds on an arm give ``no verdict``.

    No decisive label from no spread: where every seed read the same difference (paired; unpaired: each arm the same
    score) to within half the score's ``resolution`` (default: one test item's weight where items are given, else
    1e-9) and the items add no term, a zero-width interval would "decide" on nothing (models at chance read 0.500 on
    most seeds); the label is
    :data:`CANNOT_TELL` with that reason. Not floored by the items' binomial term instead: that term assumes the
    items are independent draws, and a tie on every seed is evidence that the two arms answer alike, not a
    measurement of how much they differ.

    Raises:
        InvalidData: an unknown claim or method, a negative margin, a family out of 1–100, missing or non-finite
            scores, items that do not match the seeds.
    """
    if claim not in CLAIMS:
        raise InvalidData(f"Unknown claim {claim!r}.", "Use '>' (a beats b) or '>=' (a at least as good as b, within a margin).")
    if method != "t":
        raise InvalidData(f"Unknown method {method!r}.", "Use 't' (Student's t over seeds, with the items' term where given).")
    if not (isinstance(margin, int | float) and math.isfinite(margin) and 0 <= margin < 1e6):
        raise InvalidData(f"The margin must be a finite number ≥ 0, not {margin!r}.")
    if not (type(family) is int and 1 <= family <= 100):
        raise InvalidData(f"The family must be a whole number of comparisons from 1 to 100, not {family!r}.")
    a, b = _scores("scores_a", scores_a), _scores("scores_b", scores_b)
    ia, ib = _seed_items("items_a", items_a, len(a)), _seed_items("items_b", items_b, len(b))
    if (ia is None) != (ib is None):
        raise InvalidData("Per-item scores must be given for both arms or for neither.")
    for name, scores, rows in (("a", a, ia), ("b", b, ib)):
        if rows is not None and any(abs(x - float((r.weights * r.values).sum())) > 1e-6 for x, r in zip(scores, rows, strict=True)):
            raise InvalidData(f"Arm {name}'s per-seed scores are not the weighted means of its per-item scores.",
                              "Give the items each score was computed from (a score is Σ weight × item value).")
    paired = (len(a) == len(b)) if paired is None else paired
    if paired and len(a) != len(b):
        raise InvalidData(f"Paired seeds need the same count on both arms ({len(a)} vs {len(b)}).")
    level = 1 - (1 - LEVEL) / family
    effect = float(a.mean() - b.mean()) if len(a) and len(b) else float("nan")
    base = {"claim": claim, "margin": float(margin), "effect": effect, "mean_a": float(a.mean()) if len(a) else float("nan"),
            "mean_b": float(b.mean()) if len(b) else float("nan"), "std_a": float(a.std(ddof=1)) if len(a) > 1 else float("nan"),
            "std_b": float(b.std(ddof=1)) if len(b) > 1 else float("nan"), "seeds_a": len(a), "seeds_b": len(b),
            "level": level, "family": family}
    if min(len(a), len(b)) < MIN_SEEDS:
        return Verdict(NO_VERDICT, low=float("nan"), high=float("nan"), method="", **base,
                       reason=f"a verdict needs at least {MIN_SEEDS} seeds per arm (this has {len(a)} and {len(b)}); "
                              "one seed measures the seed, not the method.")
    parts: dict[Any, float] = {}
    if paired:
        seed_terms: tuple[tuple[float, int], ...] = ((float((a - b).var(ddof=1)), len(a)),)
        name = "paired t over seeds"
        if ia is not None and ib is not None:
            diffs = []
            for x, y in zip(ia, ib, strict=True):
                e = x.residuals
                for c, r in y.residuals.items():
                    e[c] = e.get(c, 0.0) - r
                diffs.append(e)
            parts = _cross(diffs)
    else:
        seed_terms = ((base["std_a"] ** 2, len(a)), (base["std_b"] ** 2, len(b)))
        name = "Welch t over seeds"
        if ia is not None and ib is not None:
            ea, eb = [x.residuals for x in ia], [y.residuals for y in ib]
            for sign, part in ((1, _cross(ea)), (1, _cross(eb)), (-2, _cross(ea, eb))):
                for c, value in part.items():
                    parts[c] = parts.get(c, 0.0) + sign * value
    item, item_df, single, clusters = _item_term(parts)
    item = max(item, 0.0)  # a covariance estimate below 0 is noise: shared items cannot make the effect less variable
    per_seed = float(np.mean([len(x.values) for x in ia + ib])) if ia is not None and ib is not None else 0.0
    if ia is not None and ib is not None:
        name += (" + shared test items (cluster-robust, Satterthwaite df capped at clusters − 1)" if item > 0 else
                 " (shared test items add no measurable variance)" if parts else " (no test items shared between seeds)")
        if single:
            name += f"; {', '.join(single)}: one cluster of shared items, so no item term from it"
    else:
        name += " (no per-item scores: the items' noise counts only where each seed drew its own)"
    var = _Variance(seed_terms, item, item_df, per_seed, clusters)
    total, df = var.total()
    half = _half(var, level)
    low, high = effect - half, effect + half
    label = label_for(claim, float(margin), low, high)
    target = abs(effect) if claim == ">" else abs(effect + margin)
    need_seeds = need_items = None
    reason = ""
    if label == CANNOT_TELL:
        start = max(len(a), len(b)) + 1
        need_seeds = var.seeds_for(target, level, start) if target > 0 else None
        if item > 0 and per_seed and target > 0:
            # More items per seed shrink the item term as 1/items: true for independent items; where items come in
            # clusters (a lemma's WiC pairs) only new clusters help, so for clustered items this is a lower bound.
            factor = next((k for k in (1.5, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 100) if _half(var, level, None, k) < target), None)
            need_items = math.ceil(per_seed * factor) if factor else None
        if not (need_seeds or need_items):
            reason = ("the observed effect is too close to the claim's boundary for more seeds or test items alone to "
                      "resolve it; a larger budget per run (longer pre-training, more fine-tuning data) may")
    if resolution is None:
        weights = [float(x.weights[x.weights > 0].min()) for x in ia + ib if np.any(x.weights > 0)] if ia and ib else []
        resolution = min(weights) if weights else 1e-9
    seed_range = float(np.ptp(a - b)) if paired else max(float(np.ptp(a)), float(np.ptp(b)))
    no_spread = item <= 0 and not seed_range >= resolution / 2
    if no_spread:
        label, need_seeds, need_items = CANNOT_TELL, None, None
        reason = (f"no measurable spread: every seed read the same {'difference' if paired else 'scores'} (to within half "
                  f"the score's resolution, {resolution:.2g}) and the shared test items add no variance, so the interval "
                  "has no width to decide on (models at chance read the same score on most seeds)")
    return Verdict(label, low=low, high=high, method=name, seeds_needed=need_seeds, items_needed=need_items, reason=reason,
                   df=float(df) if math.isfinite(df) else None, item_share=(item / total if total > 0 else 0.0),
                   single_cluster_strata=single, no_spread=no_spread, **base)


def effect_interval(scores_a: Sequence[float], scores_b: Sequence[float], *, paired: bool | None = None) -> dict[str, Any]:
    """The effect mean(a) − mean(b) with its 95% t interval over seeds, labelled :data:`DESCRIPTIVE`: for a
    comparison shown beside a verdict (pre-trained against random initialisation) that is not itself tested, so it
    joins no family-wise correction and no label of it can be read as a finding. Per-item noise is not counted (the
    random-init controls keep no per-item scores), which the method says."""
    out = verdict(scores_a, scores_b, ">", paired=paired).to_dict()
    out.update(label=DESCRIPTIVE, seeds_needed=None, items_needed=None, reason="descriptive: no claim is decided on it")
    return out
