"""The common kinds of claim and how each is read off an experiment's finished runs: two arms compared on one measure
(:class:`ArmClaim`, :func:`arm_claim`: the per-seed scores and the verdict), the direction of a fitted exponent
(:class:`TrendClaim`, :func:`trend_claim`), a ratio of two arms (:class:`RatioClaim`, :func:`ratio_claim`), each with
what it rests on. A preset's file declares its claims with them (:mod:`services.lab.presets`; μTransfer's and the
tuned protocol's own kinds live in their presets' files); :mod:`services.lab.experiments` gathers the runs and asks
each claim for its entries. The decisions themselves are :mod:`analysis.verdicts` (numpy and scipy: imported when a
report is read).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from core.errors import ExplorerError
from services.lab.claims import (
    CHANCE,
    DATA_LIMITED_TOKENS_PER_PARAMETER,
    DOWNSTREAM_LABELS,
    INTRINSIC_LABELS,
    RATIO_MEASURES,
    Claim,
    Entry,
    Reading,
    precondition_of,
)
from services.lab.entries import decided, undecided

#: Measures on which a lower value is better: a claim "a > b" on them means a's value is lower than b's (">=": not
#: higher by more than the margin). The verdict is computed on the negated values; the report shows the raw ones.
LOWER_IS_BETTER = frozenset({"held_out_loss"})


def measure_label(measure: str, tasks: list[str] | None = None) -> str:
    """How the page heads a measure. ``tasks``: the suite's, where known: an average over a suite of one task is named
    as that task (a class reads "supersense accuracy", not an average of one)."""
    if measure == "downstream:average" and tasks and len(tasks) == 1:
        return measure_label(f"downstream:{tasks[0]}") + ", the suite's one task"
    if measure.startswith("downstream:"):
        name = measure.split(":", 1)[1]
        label = DOWNSTREAM_LABELS.get(name, measure)
        if "{classes}" in label:
            from analysis.tasks import class_count

            label = label.format(classes=class_count(name))
        return "Downstream: " + label
    if measure == "probe:pos":
        return "Frozen probe: part of speech (4 classes, chance 0.25)"
    return INTRINSIC_LABELS.get(measure, measure)


def _suite_tasks(run: dict[str, Any]) -> list[str]:
    """The downstream tasks a run was given (its config's suite; else those it has scores for)."""
    suite = (run.get("config") or {}).get("downstream") or {}
    return list(suite.get("tasks") or ((run.get("evaluation") or {}).get("downstream") or {}))


def score_of(run: dict[str, Any], measure: str, control: bool = False) -> float | None:
    """A finished run's score on ``measure`` (``downstream:<task>``, ``downstream:average`` over the run's suite,
    ``probe:pos``, an evaluation key); ``control``: the random-init control's score, where this run measured it."""
    ev = run.get("evaluation") or {}
    if measure == "downstream:average":
        tasks = _suite_tasks(run)
        values = [score_of(run, f"downstream:{t}", control) for t in tasks]
        return float(sum(values) / len(values)) if values and all(v is not None for v in values) else None
    if measure.startswith("downstream:"):
        row = (ev.get("downstream") or {}).get(measure.split(":", 1)[1]) or {}
        value = row.get("random_accuracy" if control else "accuracy")
    elif measure == "probe:pos":
        value = ev.get("pos_probe_random_init" if control else "pos_probe_accuracy")
    else:
        value = None if control else ev.get(measure)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def run_items(run: dict[str, Any], measure: str) -> dict[str, Any] | None:
    """A finished run's per-item scores on ``measure`` for the verdict's item term (the shape :func:`analysis.verdicts.items_of` reads):
    values, ids, clusters, strata and weights (an average weights each task equally); None where the run did not keep
    them (runs from before they were kept)."""
    ev = run.get("evaluation") or {}
    if measure == "downstream:average":
        tasks = _suite_tasks(run)
        parts = [run_items(run, f"downstream:{t}") for t in tasks]
        if not parts or any(p is None for p in parts):
            return None
        out: dict[str, list[Any]] = {"values": [], "ids": [], "clusters": [], "strata": [], "weights": []}
        for p in parts:
            n = len(p["values"])
            for k in ("values", "ids", "clusters", "strata"):
                out[k] += list(p[k])
            out["weights"] += [1.0 / (n * len(parts))] * n
        return out
    if measure.startswith("downstream:"):
        task = measure.split(":", 1)[1]
        row = (ev.get("downstream") or {}).get(task) or {}
        values, ids, clusters = row.get("correct"), row.get("items"), row.get("clusters")
    elif measure == "probe:pos":
        task, values, ids, clusters = "pos", ev.get("pos_probe_correct"), ev.get("pos_probe_items"), ev.get("pos_probe_clusters")
    elif measure in ("sop_accuracy", "nsp_accuracy"):
        task = measure.split("_")[0]
        values, ids, clusters = ev.get(f"{task}_correct"), ev.get(f"{task}_items"), None
    else:
        return None
    if not values or not ids or len(ids) != len(values):
        return None  # without the items' names, which items two seeds share is unknown: no item term
    score = score_of(run, measure)
    if score is None or abs(score - sum(values) / len(values)) > 1e-6:
        return None  # items that do not add up to the score are not this score's items
    ids = [f"{task}:{i}" for i in ids]
    clusters = [f"{task}:{c}" for c in clusters] if clusters and len(clusters) == len(values) and all(clusters) else ids
    return {"values": list(values), "ids": ids, "clusters": clusters, "strata": [task] * len(values),
            "weights": [1.0 / len(values)] * len(values)}


def arm_claim(claim: Claim, measure: str, finished: list[dict[str, Any]], state: str, primary: bool = True,
               family: int = 1) -> dict[str, Any]:
    from analysis import verdicts  # numpy and scipy: imported when a report is read, not with the page

    scores: dict[str, dict[int, float]] = {}
    items: dict[str, dict[int, dict[str, Any] | None]] = {}
    controls: dict[tuple[str, int], float] = {}
    kinds: dict[str, str] = {}
    for r in finished:
        value = score_of(r, measure)
        if value is not None:
            scores.setdefault(r["arm"], {})[r["replicate"]] = value
            items.setdefault(r["arm"], {})[r["replicate"]] = run_items(r, measure)
            kinds[r["arm"]] = r["kind"]
        control = score_of(r, measure, control=True)
        if control is not None:
            controls[(r["kind"], r["replicate"])] = control
    a, b = scores.get(claim.a, {}), scores.get(claim.b, {})
    key = claim.key if primary or claim.measure != "downstream" else f"{claim.key}:{measure.split(':', 1)[1]}"
    out: dict[str, Any] = {"key": key, "claim": asdict(claim), "figure": claim.figure, "measure": measure,
                           "label": measure_label(measure, _suite_tasks(finished[0]) if finished else None),
                           "primary": primary, "family": family,
                           "scores": {arm: sorted(v.items()) for arm, v in scores.items()}, "chance": CHANCE.get(measure),
                           "controls": {}, "control_effects": {}, "verdict": None,
                           "run_ids": [int(r["id"]) for r in finished]}
    several = len(set(kinds.values())) > 1
    for arm, values in scores.items():
        ctrl = {rep: controls[(kinds[arm], rep)] for rep in values if (kinds[arm], rep) in controls}
        if ctrl:  # one control per architecture and seed, shared by the arms of that architecture
            out["controls"]["random init" + (f" ({kinds[arm]})" if several else "")] = sorted(ctrl.items())
            common = sorted(set(ctrl) & set(values))
            if len(common) >= 1:
                out["control_effects"][arm] = verdicts.effect_interval([values[k] for k in common], [ctrl[k] for k in common])
    if undecided(out, state):
        return out
    if not (a and b):
        out["why_none"] = f"no scores for {claim.a if not a else claim.b}"
        return out
    common = sorted(set(a) & set(b))
    paired = len(common) == len(a) == len(b)
    ia, ib = [items[claim.a][k] for k in sorted(a)], [items[claim.b][k] for k in sorted(b)]
    given = all(x is not None for x in ia + ib)
    sign = -1.0 if measure in LOWER_IS_BETTER else 1.0  # a loss: decided on −loss, so "a beats b" is "a's loss is lower"
    v = verdicts.verdict([sign * a[k] for k in sorted(a)], [sign * b[k] for k in sorted(b)], claim.op, claim.margin,
                         paired=paired, items_a=ia if given and sign > 0 else None,
                         items_b=ib if given and sign > 0 else None, family=family)
    reference = _context_reference(claim, finished) if measure == "held_out_loss" else None
    checked, why = precondition(claim, measure, finished, scores, controls, kinds)
    if checked:
        out["precondition"] = checked
    if why and v.label != verdicts.NO_VERDICT:  # the scores are decided, but say nothing about the claim yet
        v = replace(v, label=verdicts.CANNOT_TELL, seeds_needed=None, items_needed=None,
                    reason=f"{why}. On the scores alone the rule would read “{v.label}”")
    out["verdict"] = v.to_dict()
    out["sentence"] = v.sentence
    if primary and family > 1:  # a primary adjusted with the preset's others (services.lab.experiments._holm), not Bonferroni
        out["sentence"] = out["sentence"].replace(f", Bonferroni over {family} exploratory comparisons", "")
    if sign < 0:
        out["verdict"].update(mean_a=-v.mean_a, mean_b=-v.mean_b, lower_is_better=True)
        out["sentence"] = (f"Lower is better: the effect is {claim.b}'s mean {out['label'].lower()} minus {claim.a}'s "
                           f"({v.mean_b * sign:.3f} − {v.mean_a * sign:.3f}; positive: {claim.a}'s is lower). {v.sentence}")
    if reference:
        out["context_reference"] = reference
    if reference and not why:
        out["sentence"] += (f". At the [MASK] inputs, where only context tells the word, {claim.b} scores "
                            f"{reference['mask_loss']:.3f} and the corpus's token counts {reference['unigram_loss']:.3f}")
    if not primary:
        out["sentence"] = "Exploratory (not the paper's measure; Bonferroni within the preset's exploratory family). " \
                          + out["sentence"]
    if facts := _arm_facts(finished, (claim.a, claim.b)):
        out["arm_facts"] = facts
        out["sentence"] += ". Per run: " + "; ".join(
            f"{arm} {', '.join(f'{v:,.4g} {k}' if k != 'optimizer state MB' else f'{v:.2f} {k}' for k, v in f.items())}"
            for arm, f in facts.items())
    return out


def _context_reference(claim: Claim, finished: list[dict[str, Any]]) -> dict[str, Any] | None:
    """What the reference arm ``b`` scores at the held-out positions whose input is [MASK] (each run's ``mask_loss``)
    against the corpus's token counts there (``unigram_loss``, :func:`models.pretrain.evaluate.evaluate`), shown
    beside a held-out-loss verdict; None where no run recorded them."""
    evs = [r["evaluation"] or {} for r in finished if r["arm"] == claim.b]
    pairs = [(e["mask_loss"], e["unigram_loss"]) for e in evs
             if isinstance(e.get("mask_loss"), int | float) and isinstance(e.get("unigram_loss"), int | float)]
    if not pairs:
        return None
    return {"arm": claim.b, "mask_loss": sum(m for m, _ in pairs) / len(pairs),
            "unigram_loss": sum(u for _, u in pairs) / len(pairs)}


_FLOOR_NAMES = {"counts": "a loss at the [MASK] inputs against the token counts", "control": "a random-init control",
                "chance": "a score"}


def precondition(claim: Claim, measure: str, finished: list[dict[str, Any]], scores: dict[str, dict[int, float]],
                 controls: dict[tuple[str, int], float], kinds: dict[str, str]) -> tuple[dict[str, Any], str]:
    """Whether the arms a claim rests on learnt something (:data:`services.lab.claims.PRECONDITIONS`): per arm, the
    gain over the measure's floor per seed with its paired 95% interval, and why the claim cannot be decided ("" where
    it can). Both arms of a "≥" claim (two models at their floor "match" whatever their method), arm ``a`` of a ">"
    claim. An arm whose floor was not recorded (runs from before it was kept) cannot show it learnt: cannot tell."""
    from analysis.verdicts.ratios import gain_interval

    pre = precondition_of(measure)
    if pre is None:
        return {}, ""
    arms = (claim.a, claim.b) if claim.op == ">=" else (claim.a,)
    checked: dict[str, Any] = {}
    failing = []
    for arm in arms:
        gains = []
        for r in finished:
            if r["arm"] != arm:
                continue
            ev, rep = r["evaluation"] or {}, r["replicate"]
            if pre.floor == "counts":
                m, u = ev.get("mask_loss"), ev.get("unigram_loss")
                gains.append(float(u) - float(m) if isinstance(m, int | float) and isinstance(u, int | float) else None)
            elif pre.floor == "control":
                value, ctrl = scores.get(arm, {}).get(rep), controls.get((kinds.get(arm, ""), rep))
                gains.append(value - ctrl if value is not None and ctrl is not None else None)
            else:
                value = scores.get(arm, {}).get(rep)
                gains.append(value - CHANCE[measure] if value is not None else None)
        if not gains or None in gains:
            checked[arm] = {"floor": pre.floor, "checked": False, "holds": False}
            failing.append(f"{arm}'s runs did not record {_FLOOR_NAMES[pre.floor]} (trained before it was kept)")
            continue
        if len(gains) < 2:
            mean, low, high = gains[0], float("nan"), float("nan")
        else:
            mean, low, high = gain_interval(gains, [0.0] * len(gains))
        holds = bool(low > 0 and mean >= pre.min_gain)
        checked[arm] = {"floor": pre.floor, "checked": True, "gain": mean, "low": low, "high": high, "holds": holds,
                        "min_gain": pre.min_gain}
        if not holds:
            failing.append(f"{arm} by {mean:+.3f} (95% interval {low:+.3f} to {high:+.3f})")
    if not failing:
        return checked, ""
    unit = " nats" if pre.floor == "counts" else ""
    return checked, (f"a claim is decided only where {' and '.join(arms)} {'score' if len(arms) > 1 else 'scores'} "
                     f"{pre.why} measurably and by at least {pre.min_gain:g}{unit}; not met: {'; '.join(failing)}. A model "
                     "at its floor has learnt nothing this measure can compare; a larger budget per run may tell")


def _arm_facts(finished: list[dict[str, Any]], arms: tuple[str, ...]) -> dict[str, dict[str, float]]:
    """Per arm, the mean over its runs of what the optimizer presets put beside a loss, where the two arms differ in
    it: the parameter updates made (growing batch: the same tokens in fewer updates) and the optimizer state measured
    at the end (Lion: one state per parameter against AdamW's two). Empty where no run recorded them or they agree."""
    out: dict[str, dict[str, float]] = {arm: {} for arm in arms}
    for key, name, scale in (("parameter_updates", "parameter updates", 1), ("optimizer_state_bytes", "optimizer state MB", 2**20)):
        means = {}
        for arm in arms:
            evs = [r["evaluation"] or {} for r in finished if r["arm"] == arm]
            values = [float(e[key]) / scale for e in evs if isinstance(e.get(key), int | float)]
            if values and len(values) == len(evs):
                means[arm] = sum(values) / len(values)
        if len(means) == len(arms) and len({round(m, 6) for m in means.values()}) > 1:
            for arm, m in means.items():
                out[arm][name] = m
    return out if any(out.values()) else {}


def trend_claim(claim: TrendClaim, finished: list[dict[str, Any]], state: str) -> dict[str, Any]:
    points, limited, flagged = [], [], set()
    for r in finished:
        loss = (r["evaluation"] or {}).get("held_out_loss")
        n = r["non_embedding"]  # the calculator's, read once per run by _run_rows: Kaplan's N, what the law counts
        if not n or not isinstance(loss, int | float) or not r["tokens"]:
            continue
        ratio = r["tokens"] / max(r["parameters"] or n, 1)  # Chinchilla's 20 tokens per parameter counts all of them
        if ratio < DATA_LIMITED_TOKENS_PER_PARAMETER:
            limited.append({"run": r["name"], "tokens per parameter": round(ratio, 1)})
            flagged.add(len(points))
        points.append(claim.point(r, n, float(loss)))
    out: dict[str, Any] = {"key": claim.key, "claim": asdict(claim), "figure": claim.figure, "measure": claim.measure, "points": points,
                           "label": measure_label(claim.measure), "primary": True,
                           "data_limited": limited, "data_limited_why": claim.data_limited_why, "verdict": None,
                           "run_ids": [int(r["id"]) for r in finished]}
    if undecided(out, state):
        return out
    if decided(out, lambda: claim.decide(points)) is None:
        return out
    if limited and not claim.refit_without_data_limited:
        out["sentence"] += (f". {len(limited)} of {len(points)} runs are data-limited (fewer than "
                            f"{DATA_LIMITED_TOKENS_PER_PARAMETER} tokens per parameter): {claim.data_limited_why[0].lower()}"
                            f"{claim.data_limited_why[1:].rstrip('.')}")
    elif limited:
        out["sentence"] += (f". {len(limited)} of {len(points)} runs are data-limited (fewer than "
                            f"{DATA_LIMITED_TOKENS_PER_PARAMETER} tokens per parameter, Chinchilla's compute-optimal ratio): "
                            "they sit above a law fitted to converged models")
        try:
            without = claim.decide([p for i, p in enumerate(points) if i not in flagged])
        except ExplorerError as err:
            out["without_data_limited"] = {"why_none": str(err)}
        else:
            out["without_data_limited"] = without.to_dict()
            out["sentence"] += f"; without them: {without.sentence[0].lower()}{without.sentence[1:]}"
    return out


def _ratio_value(run: dict[str, Any], measure: str, arm_a: bool) -> float | None:
    """One side of a ratio claim from one run: its downstream average (retention), or (speed-up, the distilled run's
    own measurement of both encoders) the fastest inference time of the teacher (``arm_a``) or of the student
    (:func:`models.pretrain.distil.inference_timing`)."""
    if measure == "retention":
        return score_of(run, "downstream:average")
    timing = (run.get("evaluation") or {}).get("inference") or {}
    seconds = timing.get("teacher_seconds" if arm_a else "student_seconds") or []
    return float(min(seconds)) if seconds else None


def ratio_claim(claim: RatioClaim, finished: list[dict[str, Any]], state: str, family: int = 1) -> dict[str, Any]:
    """A ratio of two arms per seed (:func:`analysis.verdicts.ratios.ratio_verdict`): retention, arm ``a``'s downstream
    average over arm ``b``'s; speed-up, the teacher's inference time over the student's, both timed by arm ``a``'s run."""
    from analysis.verdicts.ratios import ratio_verdict

    quantity, reference = RATIO_MEASURES[claim.measure]
    by_arm = {(r["arm"], r["replicate"]): r for r in finished}
    pairs, baseline = [], []
    for (arm, rep), run in sorted(by_arm.items(), key=lambda kv: kv[0][1]):
        if arm != claim.a:
            continue
        if claim.measure == "speedup":
            top, bottom = _ratio_value(run, claim.measure, True), _ratio_value(run, claim.measure, False)
        else:
            other = by_arm.get((claim.b, rep))
            top, bottom = _ratio_value(run, claim.measure, True), _ratio_value(other, claim.measure, False) if other else None
            if other is not None and top is not None and bottom:  # the teacher's random-init control on its seed
                baseline.append(score_of(other, "downstream:average", control=True))
        if top is not None and bottom:
            pairs.append((rep, top, bottom))
    out: dict[str, Any] = {"key": claim.key, "claim": asdict(claim), "figure": claim.figure, "measure": claim.measure, "label": quantity.capitalize(),
                           "primary": True, "points": pairs, "verdict": None, "run_ids": [int(r["id"]) for r in finished]}
    if undecided(out, state):
        return out
    if not pairs:
        out["why_none"] = f"no seed has both sides of the ratio ({claim.a}, {claim.b})"
        return out
    # a score ratio is decided only where the teacher is measurably above random initialisation (ratios.py)
    controls = baseline if claim.measure == "retention" and baseline and None not in baseline else None
    if claim.measure == "retention" and controls is None:
        out["why_none"] = f"the teacher's runs ({claim.b}) measured no random-init control to show they learnt anything"
        return out
    v = ratio_verdict([p[1] for p in pairs], [p[2] for p in pairs], quantity, claim.margin, reference, claim.source,
                      baseline=controls, band=claim.band, level=1 - 0.05 / family,
                      min_gain=precondition_of("downstream:average").min_gain)
    out["family"] = family
    out["verdict"] = v.to_dict()
    out["sentence"] = v.sentence
    return out


# ------------------------------------------------------------------------------------------ the kinds of claim


@dataclass(frozen=True)
class ArmClaim(Claim):
    """Arm ``a`` ``op`` arm ``b`` on one measure (``op`` ">": beats; ">=": at most ``margin`` worse), per seed, with
    the precondition that the arms learnt something (:data:`services.lab.claims.PRECONDITIONS`). ``downstream``
    expands to the suite's measures: the average accuracy is primary; each task of a suite of several and the frozen
    part-of-speech probe (no paper's measure: a linear read-out of what pre-training put in the vectors) are
    exploratory."""

    def measures(self, suite: dict[str, Any] | None) -> list[tuple[str, bool]]:
        if self.measure != "downstream":
            return [(self.measure, True)]
        tasks = list((suite or {}).get("tasks", []))
        return [("downstream:average", True)] + [(f"downstream:{t}", False) for t in tasks if len(tasks) > 1] + [("probe:pos", False)]

    def entries(self, reading: Reading) -> list[Entry]:
        return [self.entry(measure, primary, reading.finished, reading) for measure, primary in self.measures(reading.suite)]

    def entry(self, measure: str, primary: bool, runs: list[dict[str, Any]], reading: Reading) -> Entry:
        """One measure's entry from ``runs``; a primary one can be decided again in a Holm family of k."""
        out = arm_claim(self, measure, runs, reading.state, primary, 1 if primary else max(reading.family, 1))
        return Entry(out, (lambda k: arm_claim(self, measure, runs, reading.state, True, k)) if primary else None)


@dataclass(frozen=True)
class TrendClaim(Claim):
    """The direction of a fitted exponent over the runs' sizes, with the data-limited runs named; not adjusted with
    other claims. As written here, Kaplan's α_N of L(N): a point per run (seed, N, loss), and the fit also without the
    data-limited runs; a trend of another shape (IsoFLOP's, in its preset's file) says its own points, its fit, and
    whether its data-limited runs are refitted without (:attr:`refit_without_data_limited`)."""

    figure: ClassVar[str] = "trend"
    #: What the page says under the names of the data-limited runs (fewer tokens per parameter than Chinchilla's ratio).
    data_limited_why: ClassVar[str] = ("Kaplan's L(N) holds for models trained near convergence, so these points sit "
                                       "above the law; the verdict above also says what the fit gives without them.")
    refit_without_data_limited: ClassVar[bool] = True

    def point(self, run: dict[str, Any], n: int, loss: float) -> tuple:
        """A finished run's point (``n``: its non-embedding parameters, what Kaplan's law counts)."""
        return (run["replicate"], n, loss)

    def decide(self, points: list[tuple]) -> Any:
        """The verdict on the points (:mod:`analysis.verdicts`; raises ExplorerError where it cannot decide)."""
        from analysis import verdicts

        return verdicts.scaling_verdict(points)

    def entries(self, reading: Reading) -> list[Entry]:
        return [Entry(trend_claim(self, reading.finished, reading.state))]


@dataclass(frozen=True)
class RatioClaim(Claim):
    """A ratio of two arms per seed (``measure`` a key of :data:`services.lab.claims.RATIO_MEASURES`) against the floor
    ``margin``; the paper's value is matched only when the whole interval lies within ``band`` of it (relative: 0.25
    is ±25%)."""

    band: float = 0.0
    figure: ClassVar[str] = "ratio"

    def entries(self, reading: Reading) -> list[Entry]:
        return [Entry(ratio_claim(self, reading.finished, reading.state), lambda k: ratio_claim(self, reading.finished, reading.state, k))]
