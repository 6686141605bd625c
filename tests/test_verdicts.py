"""The verdict rule on score sets with known answers, its interval's coverage on simulated data, and the fitted
exponents' verdicts."""

import math

import numpy as np
import pytest

from analysis import verdicts as V
from core.errors import InvalidData


def test_a_clear_win_agrees_a_clear_loss_disagrees_and_an_overlap_cannot_tell():
    win = V.verdict([0.80, 0.82, 0.81], [0.60, 0.61, 0.59], ">")
    assert win.label == V.AGREES and win.low > 0 and win.method == "paired t over seeds"
    assert win.effect == pytest.approx(0.21)
    loss = V.verdict([0.60, 0.61, 0.59], [0.80, 0.82, 0.81], ">")
    assert loss.label == V.DISAGREES and loss.high < 0
    overlap = V.verdict([0.70, 0.60, 0.66], [0.64, 0.66, 0.62], ">")
    assert overlap.label == V.CANNOT_TELL and overlap.low < 0 < overlap.high
    assert overlap.seeds_needed is None or overlap.seeds_needed > 3
    assert "Cannot tell" in overlap.sentence


def test_at_least_as_good_within_a_margin():
    # a is 0.005 worse, tightly: agrees with "a >= b within 0.02", disagrees with "a > b" only if clearly below 0
    close = V.verdict([0.700, 0.701, 0.699, 0.700], [0.705, 0.706, 0.704, 0.705], ">=", margin=0.02)
    assert close.label == V.AGREES
    assert V.verdict([0.700, 0.701, 0.699, 0.700], [0.705, 0.706, 0.704, 0.705], ">").label == V.DISAGREES
    far = V.verdict([0.60, 0.61, 0.59], [0.70, 0.71, 0.69], ">=", margin=0.02)
    assert far.label == V.DISAGREES


def test_one_seed_gives_no_verdict_and_says_why():
    v = V.verdict([0.8], [0.6], ">")
    assert v.label == V.NO_VERDICT and "2 seeds" in v.reason and math.isnan(v.low)
    assert v.sentence.startswith("No verdict")


def test_unequal_seeds_fall_back_to_welch():
    v = V.verdict([0.80, 0.82, 0.81], [0.60, 0.61], ">")
    assert v.method == "Welch t over seeds" and v.label == V.AGREES


def test_seeds_needed_shrinks_the_interval_to_the_effect():
    v = V.verdict([0.62, 0.66, 0.64], [0.60, 0.65, 0.61], ">")
    assert v.label == V.CANNOT_TELL and v.seeds_needed and v.seeds_needed > 3
    rng = np.random.default_rng(1)
    d = np.array([0.62, 0.66, 0.64]) - np.array([0.60, 0.65, 0.61])
    n = v.seeds_needed
    more = rng.normal(d.mean(), d.std(ddof=1), n)  # that many seeds with the same mean and spread
    more = (more - more.mean()) / more.std(ddof=1) * d.std(ddof=1) + d.mean()
    assert V.verdict(0.5 + more, np.full(n, 0.5), ">", paired=True).label == V.AGREES


@pytest.mark.parametrize("paired", [True, False])
def test_the_interval_covers_the_true_effect_about_95_percent_of_the_time(paired):
    rng = np.random.default_rng(7)
    true, hits, draws, k, items = 0.03, 0, 600, 3, 300
    for _ in range(draws):
        seed_effect = rng.normal(0, 0.02, k)  # what a seed does to both arms (data order, test subset)
        pa = 0.60 + true + (seed_effect if paired else rng.normal(0, 0.02, k)) + rng.normal(0, 0.01, k)
        pb = 0.60 + seed_effect + rng.normal(0, 0.01, k)
        a = rng.binomial(items, np.clip(pa, 0, 1)) / items
        b = rng.binomial(items, np.clip(pb, 0, 1)) / items
        v = V.verdict(a, b, ">", paired=paired)
        hits += v.low <= true <= v.high
    assert 0.92 <= hits / draws <= 0.98


def test_the_bootstrap_over_seeds_and_items_uses_the_items():
    rng = np.random.default_rng(0)
    ia = rng.binomial(1, 0.8, (3, 400))
    ib = rng.binomial(1, 0.5, (3, 400))
    v = V.verdict(ia.mean(1), ib.mean(1), ">", items_a=ia, items_b=ib, method="bootstrap")
    assert v.label == V.AGREES and v.method.startswith("bootstrap") and v.low < v.effect < v.high
    with pytest.raises(InvalidData):
        V.verdict(ia.mean(1), ib.mean(1), ">", items_a=ia[:2], items_b=ib, method="bootstrap")


@pytest.mark.parametrize("bad", [dict(claim="<"), dict(margin=-1), dict(margin=float("nan")), dict(method="vote"),
                                 dict(scores_a=[0.5, float("nan")]), dict(scores_a="abc"), dict(scores_a=[0.1] * 2000)])
def test_bad_requests_are_refused_by_name(bad):
    args = {"scores_a": [0.5, 0.6], "scores_b": [0.4, 0.5], "claim": ">", **bad}
    with pytest.raises(InvalidData):
        V.verdict(**args)


def test_a_verdict_round_trips_through_a_dict():
    v = V.verdict([0.80, 0.82, 0.81], [0.60, 0.61, 0.59], ">")
    assert V.Verdict.from_dict(v.to_dict()) == v


def test_the_scaling_exponent_is_recovered_with_its_interval():
    rng = np.random.default_rng(3)
    sizes = (2.5e4, 1e5, 4e5, 1.6e6)
    pts = [(s, n, (1e8 / n) ** 0.076 * math.exp(rng.normal(0, 0.002))) for s in range(3) for n in sizes]
    v = V.scaling_verdict(pts)
    assert v.label == V.AGREES and v.low <= 0.076 <= v.high and v.reference_inside and v.points == 12
    rising = [(s, n, 5 * (n / 1e4) ** 0.05 * math.exp(rng.normal(0, 0.002))) for s in range(3) for n in sizes]
    assert V.scaling_verdict(rising).label == V.DISAGREES
    assert V.scaling_verdict([(0, n, 6.0) for n in sizes]).label == V.NO_VERDICT
    with pytest.raises(InvalidData):
        V.scaling_verdict([(0, 1e4, 6.0), (0, 1e5, 5.0)])
    with pytest.raises(InvalidData):
        V.scaling_verdict([(0, 1e4, -6.0), (0, 1e5, 5.0), (0, 1e6, 4.0)])


def test_a_flat_trend_cannot_tell_and_the_trend_interval_covers():
    rng = np.random.default_rng(5)
    sizes = (2.5e4, 1e5, 4e5, 1.6e6)
    hits, labels = 0, []
    for _ in range(300):
        pts = [(s, n, (1e8 / n) ** 0.03 * math.exp(rng.normal(0, 0.03))) for s in range(3) for n in sizes]
        v = V.scaling_verdict(pts)
        hits += v.low <= 0.03 <= v.high
        labels.append(v.label)
    assert 0.91 <= hits / 300 <= 0.99
    flat = [(s, n, 7.0 * math.exp(rng.normal(0, 0.05))) for s in range(3) for n in sizes]
    assert V.scaling_verdict(flat).label in (V.CANNOT_TELL, V.AGREES, V.DISAGREES)
    assert labels.count(V.CANNOT_TELL) > 0 and labels.count(V.DISAGREES) < 15


def test_the_isoflop_optimum_grows_with_the_budget():
    rng = np.random.default_rng(4)
    pts = []
    for s in range(3):
        for c in (1e12, 1e13, 1e14):
            best = 1e5 * (c / 1e12) ** 0.5
            for n in (best / 8, best / 2.8, best, best * 2.8, best * 8):
                pts.append((s, c, n, 3 + 0.2 * math.log(n / best) ** 2 + rng.normal(0, 0.002)))
    v = V.isoflop_verdict(pts)
    assert v.label == V.AGREES and v.estimate == pytest.approx(0.5, abs=0.08) and v.reference_inside
    opt = V.isoflop_optimum({(c, n): loss for s, c, n, loss in pts if s == 0})
    assert len(opt) == 3 and list(opt.values()) == sorted(opt.values())
