"""Objectives lab on tiny models: fill-mask against the pipeline oracle, the masking recipe, PLL, NSP/SOP, ELECTRA, GPT-2."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from core.errors import InvalidText, MaskMissing, UnsupportedTask
from models import objectives as O

MLM_MODELS = ["bert-base-uncased", "roberta-base", "distilbert-base-uncased", "albert-base-v2", "google/electra-small-generator",
              "bert-base-multilingual-cased", "xlm-roberta-base", "mpnet-base", "modernbert-base"]


@pytest.mark.parametrize("model_id", MLM_MODELS)
@pytest.mark.parametrize("text", ["the cat sat on the [MASK] .", "[MASK] boy plays in the snow .", "new york is a [MASK]"])
def test_single_mask_equals_the_fill_mask_pipeline(model_id: str, text: str) -> None:
    from transformers import pipeline

    from models.loader import load

    lm = load(model_id, task="masked-lm")
    ours = O.fill_mask(lm, text, top_k=5)
    assert len(ours) == 1 and len(ours[0]) == 5
    oracle = pipeline("fill-mask", model=lm.model, tokenizer=lm.tokenizer, device="cpu")(
        text.replace("[MASK]", lm.tokenizer.mask_token), top_k=5)
    for mine, theirs in zip(ours[0], oracle, strict=True):
        assert mine.id == theirs["token"] and mine.token_str == theirs["token_str"] and mine.sequence == theirs["sequence"]
        assert mine.probability == pytest.approx(theirs["score"], abs=1e-5)


def test_several_masks_independent_and_sequential() -> None:
    text = "john visited [MASK] yesterday and really [MASK] it ."
    ind = O.fill_mask("bert-base-uncased", text, top_k=3)
    seq = O.fill_mask("bert-base-uncased", text, top_k=3, mode="sequential")
    assert len(ind) == len(seq) == 2 and all(len(r) == 3 for r in ind + seq)
    assert sorted(r[0].step for r in seq) == [1, 2]  # every mask filled, one per step
    assert "[MASK]" not in seq[0][0].sequence or "[MASK]" not in seq[1][0].sequence  # the last fill leaves none
    first = min(seq, key=lambda r: r[0].step)
    assert first[0].probability == pytest.approx(max(ind[0][0].probability, ind[1][0].probability), abs=1e-6)


def test_side_by_side_table_and_errors() -> None:
    from services.objectives import fill_mask

    result = fill_mask("the cat sat on the [MASK] .", ["bert-base-uncased", "roberta-base", "gpt2"], top_k=2)
    df = result.table()
    assert set(df["model"]) == {"bert-base-uncased", "roberta-base"} and len(df) == 4
    assert list(df.columns) == ["model", "mask", "rank", "token", "probability", "step", "sequence"]
    assert "gpt2" in result.errors


@pytest.mark.parametrize(("text", "error", "words"), [
    ("the cat sat on the mat .", MaskMissing, "no \\[MASK\\]"),
    ("   ", InvalidText, "empty"),
    ("[MASK] " * 9, MaskMissing, "limit is 8"),
    ("the cat [MASK] " + "sat " * 80, InvalidText, "takes at most"),
])
def test_fill_mask_bad_input(text: str, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        O.fill_mask("bert-base-uncased", text)


def test_models_without_the_head_are_refused() -> None:
    with pytest.raises(UnsupportedTask):
        O.fill_mask("gpt2", "the [MASK] sat")
    with pytest.raises(UnsupportedTask):
        O.fill_mask("sentence-transformers/all-MiniLM-L6-v2", "the [MASK] sat")


def test_masking_recipe_proportions_over_many_draws() -> None:
    words = list(range(100))
    counts: Counter[str] = Counter()
    rng = random.Random(0)
    for _ in range(400):
        counts.update(O.mask_pattern(words, rng))
    chosen = counts["mask"] + counts["random"] + counts["same"]
    assert chosen == 400 * 15  # exactly round(15%) per sequence
    # 80 / 10 / 10 within ±3 standard deviations of a binomial over 6000 draws
    assert abs(counts["mask"] / chosen - 0.8) < 3 * (0.8 * 0.2 / chosen) ** 0.5
    assert abs(counts["random"] / chosen - 0.1) < 3 * (0.1 * 0.9 / chosen) ** 0.5
    assert abs(counts["same"] / chosen - 0.1) < 3 * (0.1 * 0.9 / chosen) ** 0.5


def test_whole_word_masking_and_specials() -> None:
    words = [None, 0, 0, 0, 1, 2, 2, 3, 4, 5, None]  # a 3-piece word, a 2-piece word
    for seed in range(50):
        acts = O.mask_pattern(words, random.Random(seed), rate=0.3, whole_word=True)
        assert acts[0] == acts[-1] == "kept"
        picked = {words[i] for i, a in enumerate(acts) if a != "kept"}
        for w in picked:  # a chosen word is chosen whole
            assert all(acts[i] != "kept" for i, x in enumerate(words) if x == w)


def test_static_masking_repeats_and_dynamic_does_not() -> None:
    tokens = [f"t{i}" for i in range(40)]
    words = list(range(40))
    static = O.masking_epochs(tokens, words, ["x", "y"], epochs=4, seed=1, dynamic=False)
    dynamic = O.masking_epochs(tokens, words, ["x", "y"], epochs=4, seed=1, dynamic=True)
    pattern = lambda epoch: [a for a, _ in epoch]  # noqa: E731
    assert all(pattern(e) == pattern(static[0]) for e in static)
    assert len({tuple(pattern(e)) for e in dynamic}) > 1


@pytest.mark.parametrize("model_id", MLM_MODELS)
def test_pseudo_likelihood_batched_equals_the_naive_loop(model_id: str) -> None:
    """The batched pass applies each architecture's MLM head to the masked positions only: same numbers."""
    a = O.pseudo_log_likelihood(model_id, "the cat sat on the mat .")
    b = O.pseudo_log_likelihood(model_id, "the cat sat on the mat .", batched=False)
    assert a.tokens == b.tokens and len(a.log_probs) >= 6
    assert a.log_probs == pytest.approx(b.log_probs, abs=1e-4)
    assert a.pppl == pytest.approx(2.718281828459045 ** (-a.pll / len(a.log_probs)), rel=1e-9) and a.pll < 0


@pytest.mark.parametrize("model_id", ["bert-base-uncased", "albert-base-v2"])
def test_nsp_and_sop(model_id: str) -> None:
    r = O.sentence_relation(model_id, "a boy plays in the snow .", "a boy is outside .")
    assert r["head"] == ("NSP" if model_id.startswith("bert") else "SOP")
    assert 0 < r["p_follows"] < 1 and 0 < r["p_follows_swapped"] < 1
    swapped = O.sentence_relation(model_id, "a boy is outside .", "a boy plays in the snow .")
    assert swapped["p_follows"] == pytest.approx(r["p_follows_swapped"], abs=1e-6)
    with pytest.raises(UnsupportedTask):
        O.sentence_relation("roberta-base", "a", "b")


def test_electra_round_and_hand_replacement() -> None:
    _, det = O.electra_round("google/electra-small-generator", "google/electra-small-discriminator",
                                     "the cat sat on the mat because it was tired .", seed=3)
    assert len(det.tokens) == len(det.p_replaced) == len(det.replaced)
    assert all(0 <= p <= 1 for p in det.p_replaced)
    hand = O.discriminate("google/electra-small-discriminator", "the dog sat on the mat .", original="the cat sat on the mat .")
    assert sum(hand.replaced) == 1 and hand.replaced[2]


def test_generation_is_reproducible_with_a_seed() -> None:
    a = O.generate("gpt2", "the cat", max_new_tokens=8, sample=True, temperature=0.9, top_k=20, top_p=0.95, seed=7)
    b = O.generate("gpt2", "the cat", max_new_tokens=8, sample=True, temperature=0.9, top_k=20, top_p=0.95, seed=7)
    assert a.new_text == b.new_text and a.text.startswith("the cat")
    greedy = O.generate("gpt2", "the cat", max_new_tokens=5)
    assert greedy.new_text == O.generate("gpt2", "the cat", max_new_tokens=5).new_text
    bert = O.bert_generate("bert-base-uncased", "the cat", max_new_tokens=3)
    assert len(bert.new_text.split()) == 3 and bert.seconds > 0
    with pytest.raises(InvalidText, match="empty"):
        O.generate("gpt2", "  ")
    # the tiny GPT-2 has 64 positions: a prompt and its new tokens must fit them (past them there is no embedding)
    with pytest.raises(InvalidText, match="reads at most 64 tokens in all"):
        O.generate("gpt2", "the cat sat on the mat " * 10, max_new_tokens=20)
    assert O.generate("gpt2", "the cat sat on the mat " * 5, max_new_tokens=30).text
