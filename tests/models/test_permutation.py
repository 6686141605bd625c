"""XLNet permutation LM: masks against an independent construction, invariance, partial prediction, memory."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from core.errors import InvalidOrder, InvalidText
from models import permutation as P
from tests.helpers import ROOT

XLNET = "xlnet-base-cased"
TEXT = "new york is a city ."


def reference_query_mask(order: list[int], n_special: int = 2) -> np.ndarray:
    """Built from the definition, independently: with every position a target, i sees j iff j comes earlier."""
    full = order + list(range(len(order), len(order) + n_special))
    rank = {p: r for r, p in enumerate(full)}
    t = len(full)
    return np.array([[rank[j] < rank[i] for j in range(t)] for i in range(t)])


@pytest.mark.parametrize("order", [[0, 1, 2, 3], [3, 2, 1, 0], [2, 0, 3, 1], [1, 3, 0, 2, 4]])
def test_masks_match_an_independent_construction(order: list[int]) -> None:
    pi = P.permutation_inputs(order, None, specials=[len(order), len(order) + 1])
    q = reference_query_mask(order)
    assert np.array_equal(P.query_mask(pi), q)
    assert np.array_equal(P.content_mask(pi), q | np.eye(len(q), dtype=bool))
    assert pi.perm_mask.shape == (1, len(q), len(q)) and pi.perm_mask.dtype == np.float32


def test_left_to_right_order_is_causal_masking() -> None:
    pi = P.permutation_inputs(list(range(5)))
    assert np.array_equal(P.query_mask(pi), np.tril(np.ones((5, 5), dtype=bool), k=-1))
    assert np.array_equal(P.content_mask(pi), np.tril(np.ones((5, 5), dtype=bool)))


@pytest.mark.parametrize("k", [1, 2, 4, 6])
def test_partial_prediction_targets_the_last_k_and_context_is_seen_by_all(k: int) -> None:
    order = [4, 1, 5, 0, 2, 3]
    pi = P.permutation_inputs(order, k, specials=[6, 7])
    assert pi.target_mapping.shape == (1, k, 8)
    assert list(pi.targets) == order[-k:]
    assert [int(np.argmax(row)) for row in pi.target_mapping[0]] == order[-k:]
    context = order[:-k]
    q = P.query_mask(pi)
    for t in pi.targets:
        assert all(q[t, c] for c in context)  # every target sees the whole context
        assert sorted(P.conditioned_on(pi, t)) == sorted(context + order[len(context):order.index(t)])
    for a, b in itertools.permutations(context, 2):
        assert q[a, b]  # context tokens see each other (bidirectional), as in XLNet's training


@pytest.mark.parametrize(("order", "words"), [
    ([0, 1, 1], "repeated: [1]"), ([0, 1], "missing: [2]"), ([0, 1, 5], "out of range"), (["a", 1, 2], "whole numbers"),
])
def test_bad_orders(order, words: str) -> None:
    with pytest.raises(InvalidOrder, match=words.replace("[", r"\[").replace("]", r"\]")):
        P.check_order(order, 3)


def test_parse_and_make_orders() -> None:
    assert P.parse_order("2, 0 ,1", 3) == [2, 0, 1]
    with pytest.raises(InvalidOrder, match="not a position"):
        P.parse_order("2, x, 1", 3)
    with pytest.raises(InvalidOrder, match="empty"):
        P.parse_order(" , ", 3)
    assert P.make_order("right-to-left", 3) == [2, 1, 0]
    assert sorted(P.make_order("random", 10, seed=3)) == list(range(10))
    assert P.make_order("random", 10, seed=3) == P.make_order("random", 10, seed=3) != P.make_order("random", 10, seed=4)
    with pytest.raises(InvalidOrder, match="K = 9"):
        P.permutation_inputs([0, 1, 2], 9)


def test_predictions_for_the_last_k() -> None:
    from models.loader import load

    lm = load(XLNET, task="xlnet-lm")
    ids, toks = P.xlnet_tokens(lm.tokenizer, TEXT)
    n = len(ids) - 2
    order = P.make_order("random", n, seed=1)
    preds = P.predict_last_k(lm, TEXT, order, 3, top_k=4)
    assert [p.position for p in preds] == order[-3:]
    for p in preds:
        assert len(p.top) == 4 and p.top[0][1] >= p.top[-1][1] and 0 < p.true_probability < 1
        assert p.token == toks[p.position]


def test_invariance_later_tokens_do_not_move_a_prediction_earlier_ones_do() -> None:
    from models.loader import load

    lm = load(XLNET, task="xlnet-lm")
    ids, _ = P.xlnet_tokens(lm.tokenizer, TEXT)
    n = len(ids) - 2
    order = P.make_order("random", n, seed=2)
    target = order[n // 2]
    check = P.self_check(lm, TEXT, order, target)
    assert check.later is not None and check.earlier is not None
    assert check.change_later == 0.0
    assert check.change_earlier > 1e-6


def test_memory_carries_across_segments() -> None:
    text = " ".join(["the cat sat on the mat because it was tired ."] * 3)
    with_mem = P.segment_recurrence(XLNET, text, segment_length=6, memory_length=6)
    assert len(with_mem) >= 3 and with_mem[0].memory == 0 and with_mem[1].memory == 6
    assert np.all(with_mem[1].into_memory > 0)
    assert with_mem[1].weights.shape[-1] == 6 + len(with_mem[1].tokens)
    assert np.allclose(with_mem[1].weights.sum(-1), 1, atol=1e-4)
    vanilla = P.segment_recurrence(XLNET, text, segment_length=6, memory_length=0)
    assert all(s.memory == 0 and not s.into_memory.any() for s in vanilla)


def test_bad_text() -> None:
    from models.loader import load

    tok = load(XLNET, task="xlnet-lm").tokenizer
    with pytest.raises(InvalidText, match="empty"):
        P.xlnet_tokens(tok, "   ")
    with pytest.raises(InvalidText, match="at most"):
        P.xlnet_tokens(tok, "the cat " * 200)


def test_masks_need_no_torch() -> None:
    import subprocess
    import sys

    code = "import sys, models.permutation as p; p.permutation_inputs([1,0,2], 2); sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_new_york_contrast_runs_both_models() -> None:
    ny = P.new_york("bert-base-uncased", XLNET, "new york is a city .", "is", "a")
    assert ny["bert_pair"] == pytest.approx(ny["bert_first"] + ny["bert_second"])
    assert ny["xlnet_pair"] == pytest.approx(ny["xlnet_first"] + ny["xlnet_second_given_first"])
    assert all(v < 0 for v in ny.values())
    with pytest.raises(InvalidText, match="does not occur"):
        P.new_york("bert-base-uncased", XLNET, "new york is a city .", "a", "is")


def test_word_tokens_refuse_long_and_empty_sentences_by_name() -> None:
    """The page's tokens without torch: a 1,200-character sentence of words is past the lab's token bound and refused
    with the count; one long word is one position (the page then has no K to choose); empty is refused."""
    assert P.word_tokens("New York is a city") == ["New", "York", "is", "a", "city", "<sep>", "<cls>"]
    long = ("the cat sat on the mat " * 60)[:1200]
    with pytest.raises(InvalidText, match=r"has \d+ tokens .* at most 128"):
        P.word_tokens(long)
    assert P.word_tokens("x" * 400) == ["x" * 400, "<sep>", "<cls>"]
    for empty in ("", "   \t\n"):
        with pytest.raises(InvalidText, match="empty"):
            P.word_tokens(empty)
    with pytest.raises(InvalidText):
        P.word_tokens(None)  # type: ignore[arg-type]
