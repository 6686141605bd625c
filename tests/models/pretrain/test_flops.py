"""Training FLOPs as the lab's loop performs them (models.pretrain.flops): counted on the batches the loop draws, the
ELECTRA preset's arms spend the same compute, and the plan's expectation is what the batches hold."""

from __future__ import annotations

from dataclasses import replace

import pytest

from models.pretrain import flops
from models.pretrain.config import TrainConfig
from services import lab

TINY = TrainConfig(layers=2, hidden=64, heads=2, ffn=256, seq_len=32, batch=16, steps=240, lr=3e-3, corpus_lines=400)


def performed(config: TrainConfig) -> float:
    """The FLOPs of ``config.steps`` batches as the loop draws them (the same texts, masks and lengths), counted from each
    batch's real lengths and masked positions."""
    from models.pretrain.corpus import read_corpus, tokenizer
    from models.pretrain.data import Batches

    texts, _ = read_corpus(config)
    batches = Batches(config, texts, tokenizer(config.vocab))
    total = 0.0
    for _ in range(config.steps):
        b = batches.sample()
        lengths = [int(n) for n in b["attention_mask"].sum(1)]
        total += flops.step_flops(config, sum(lengths), sum(n * n for n in lengths), int((b["labels"] != -100).sum()),
                                  len(lengths))
    return total


def test_the_electra_arms_perform_the_same_compute_within_one_percent() -> None:
    (_, electra), (_, mlm) = lab.plan("electra", TINY, "g")
    spent = {"electra": performed(electra), "mlm": performed(mlm)}
    assert mlm.steps != electra.steps  # the MLM arm trains longer: ELECTRA's steps cost more
    assert abs(spent["electra"] - spent["mlm"]) / spent["mlm"] < 0.01, spent


@pytest.mark.parametrize("objective", ["mlm", "mlm+sop", "electra"])
def test_the_plans_expectation_is_what_the_batches_hold(objective: str) -> None:
    config = replace(TINY, objective=objective, steps=120)
    z = lab.size(config)
    assert performed(config) == pytest.approx(z.flops_per_step * config.steps, rel=0.03)


def test_the_output_layer_is_counted_where_the_loss_reads_it() -> None:
    """A masked LM's output layer over 8,192 words costs per masked position, not per token: Kaplan's convention (every
    position) would make it most of the count; the discriminator's one logit is per position."""
    config = replace(TINY, hidden=128, ffn=512, seq_len=64)
    tokens, masked, h, v = 1000, 150, 128, 8192
    body = flops.step_flops(config, tokens, tokens * 20, 0)
    assert flops.step_flops(config, tokens, tokens * 20, masked) - body == 3 * masked * 2 * (h * h + h * v)
    everywhere = 3 * tokens * 2 * (h * h + h * v)
    assert everywhere / (body + everywhere) > 0.6  # the head over every position would be about 70% of the step
    electra = replace(config, objective="electra")
    disc_head = flops.step_flops(electra, tokens, tokens * 20, 0) - flops.step_flops(electra, 0, 0, 0)
    assert disc_head > 3 * tokens * 2 * (h * h + h)  # the generator's layers and the discriminator's logit per position
    # Kaplan et al.'s reference: 6N + 6·n_layer·n_ctx·d per token, N the non-embedding parameters
    n = 2 * h * config.layers * (2 * h + config.ffn)
    assert flops.kaplan_per_token(config) == 6 * n + 6 * config.layers * config.seq_len * h


@pytest.mark.parametrize(("objective", "seq_len", "vocab"), [("mlm", 16, "wordnet-8k"), ("mlm+nsp", 16, "wordnet-8k"),
                                                             ("mlm+sop", 64, "wordnet-8k"), ("plm", 32, "wordnet-8k"),
                                                             ("mlm+nsp", 32, "bert")])
def test_the_length_statistics_are_those_of_the_texts_tokenized_as_the_batches_are(objective: str, seq_len: int, vocab: str,
                                                                                    tmp_path) -> None:
    """The plan's length statistics come from token counts kept per corpus line (each line tokenized once, for every
    seed and arm): they equal counting each seed's own texts (or NSP/SOP pairs) encoded whole and truncated, as the
    batches are, on WordNet and on a user's file, and a changed file is read again."""
    from models.pretrain.corpus import read_corpus, sentence_pairs

    own = tmp_path / "own.txt"
    own.write_text("\n".join(f"line {i} says " + "word " * (i % 37) + "end" for i in range(300)), encoding="utf-8")
    for corpus in ("wordnet", str(own)):
        for seed in (0, 5):
            config = replace(TINY, objective=objective, seq_len=seq_len, vocab=vocab, seed=seed, corpus=corpus, corpus_lines=250)
            texts, _ = read_corpus(config)
            tok = flops._tokenizer(vocab)
            tok.enable_truncation(seq_len)
            try:
                pair = objective in ("mlm+nsp", "mlm+sop")
                encoded = tok.encode_batch([(a, b) for a, b, _ in sentence_pairs(texts, objective[-3:], seed)] if pair else texts)
            finally:
                tok.no_truncation()
            n = [len(e.ids) for e in encoded]
            got = flops.length_stats(config)
            assert got.tokens_per_sequence == pytest.approx(sum(n) / len(n), rel=1e-12)
            if objective != "plm":
                assert got.pairs_per_token == pytest.approx(sum(x * x for x in n) / sum(n), rel=1e-12)
                assert got.masked_per_token == pytest.approx(flops.MASK_RATE * sum(x - (3 if pair else 2) for x in n) / sum(n), rel=1e-12)
    before = flops.length_stats(replace(TINY, corpus=str(own), corpus_lines=250))
    own.write_text("\n".join("a much longer line than before " * 8 for _ in range(300)), encoding="utf-8")
    assert flops.length_stats(replace(TINY, corpus=str(own), corpus_lines=250)).tokens_per_sequence > before.tokens_per_sequence
