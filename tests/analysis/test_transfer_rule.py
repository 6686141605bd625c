"""The μTransfer rule (analysis.verdicts.transfer) on planted curves: flat curves, curves at the token counts, and a
true 3-step SP shift with μP held still, at the thorough grid's shape (6 rates a factor 2 apart, widths 32 and 256,
2 seeds) and the noise measured on the H100 grid (one run's held-out loss ±0.03 nats about its curve)."""

import math

import numpy as np
import pytest

from analysis.verdicts import labels as L
from analysis.verdicts.transfer import MIN_GAIN, transfer_verdict
from tests.helpers.verdicts import planted, shifted


def test_flat_curves_cannot_tell_at_least_95_percent_of_the_time():
    rng = np.random.default_rng(1)
    draws = 400
    flat_learnt = [transfer_verdict(*planted(rng, shifted(), curvature=0.0)).label for _ in range(draws)]
    at_counts = [transfer_verdict(*planted(rng, shifted(), curvature=0.0, gain=0.0)).label for _ in range(draws)]
    assert flat_learnt.count(L.CANNOT_TELL) / draws >= 0.95, flat_learnt.count(L.CANNOT_TELL) / draws
    assert at_counts.count(L.CANNOT_TELL) == draws  # nothing learnt beyond the token counts: never decided


def test_a_true_3_step_shift_agrees_at_least_80_percent_of_the_time():
    rng = np.random.default_rng(2)
    draws = 400
    labels = [transfer_verdict(*planted(rng, shifted())).label for _ in range(draws)]
    assert labels.count(L.AGREES) / draws >= 0.80, labels.count(L.AGREES) / draws
    assert labels.count(L.DISAGREES) / draws <= 0.02


def test_a_reversed_claim_disagrees_and_is_never_read_as_agreement():
    rng = np.random.default_rng(3)
    both_move = [transfer_verdict(*planted(rng, {("mup", 32): 3.3, ("mup", 256): 0.3, ("sp", 32): 3.3,
                                                 ("sp", 256): 0.3})).label for _ in range(200)]
    assert both_move.count(L.AGREES) == 0 and both_move.count(L.DISAGREES) / 200 >= 0.8
    neither = [transfer_verdict(*planted(rng, shifted(shift=0))).label for _ in range(200)]
    assert neither.count(L.AGREES) == 0 and neither.count(L.DISAGREES) / 200 >= 0.8


def test_the_verdict_says_its_sets_interval_and_noise():
    v = transfer_verdict(*planted(np.random.default_rng(4), shifted(), noise=0.005))
    assert v.label == L.AGREES and v.shift == {"sp": -3, "mup": 0}
    assert v.shift_interval["sp"][1] <= -2 and v.shift_interval["mup"][0] >= -1 and v.shift_interval["mup"][1] <= 1
    assert v.best_sets["mup"][32] == [3] and 0.005 > v.noise > 0 and v.delta >= 0.01
    assert "within δ" in v.sentence and "one run's noise" in v.sentence


def test_runs_at_the_token_counts_cannot_tell_and_say_their_gains():
    v = transfer_verdict(*planted(np.random.default_rng(5), shifted(), noise=0.005, gain=MIN_GAIN / 2))
    assert v.label == L.CANNOT_TELL and "token counts" in v.reason and "+0.0" in v.reason


def test_widths_spanning_less_than_8x_give_no_verdict():
    pts, gains = planted(np.random.default_rng(6), {("mup", 32): 3.3, ("mup", 128): 3.3, ("sp", 32): 3.3,
                                                     ("sp", 128): 1.3}, widths=(32, 128))
    v = transfer_verdict(pts, gains)
    assert v.label == L.NO_VERDICT and "4×" in v.reason and "8×" in v.reason


def test_an_optimum_at_the_grid_edge_leaves_its_side_open():
    v = transfer_verdict(*planted(np.random.default_rng(7), shifted(mup=5.0, sp=5.0), noise=0.005))
    assert "mup" in v.edges and v.shift_interval["mup"][1] == math.inf and v.label == L.CANNOT_TELL
    assert "edge" in v.reason


def test_a_diverged_run_is_never_best_and_one_seed_gives_no_verdict():
    pts, gains = planted(np.random.default_rng(8), shifted(), noise=0.005)
    pts = [(p, s, w, r, math.inf if (p == "sp" and w == 256 and r > 2 ** -9) else x) for p, s, w, r, x in pts]
    v = transfer_verdict(pts, gains)
    assert v.best["sp"][256] <= 2 ** -10 and v.label == L.AGREES
    one = transfer_verdict(*planted(np.random.default_rng(9), shifted(), seeds=1))
    assert one.label == L.NO_VERDICT and "2 seeds" in one.sentence


@pytest.mark.parametrize("bad", [[("ntk", 0, 32, 1e-3, 3.0)], [("sp", 0, 32, 1e-3, 3.0), ("sp", 0, 64, 1e-3, 3.0)],
                                 [("sp", "x", 32, 1e-3, 3.0)]])
def test_malformed_points_are_refused(bad):
    from core.errors import InvalidData

    with pytest.raises(InvalidData):
        transfer_verdict(bad)
