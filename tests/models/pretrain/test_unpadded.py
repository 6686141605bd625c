"""The faster pre-training step trains the same model: the unpadded encoder against transformers' own
padded forward (same loss, gradients and dropout draws), a run's loss curve against a plain loop written with
transformers' pieces, and the cheaper batches against the collator fed as before."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest
import torch
from transformers import DataCollatorForLanguageModeling, get_linear_schedule_with_warmup

from models.pretrain import Batches, TrainConfig, build_model, read_corpus, tokenizer, train, unpadded
from models.pretrain.loss import loss_of

TINY = TrainConfig(layers=2, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=8, lr=3e-3, corpus_lines=120)


def _padded_loss(config: TrainConfig, model, batch) -> torch.Tensor:
    """The masked-LM (+ NSP/SOP) loss through transformers' own forward and heads, over the padded batch."""
    kwargs = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
    if config.objective == "mlm":
        return model(**kwargs).loss
    return model(**kwargs, token_type_ids=batch["token_type_ids"], next_sentence_label=batch["next_sentence_label"]).loss


@pytest.mark.parametrize("objective", ["mlm", "mlm+sop"])
def test_the_unpadded_encoder_gives_transformers_loss_gradients_and_dropout_draws(objective: str) -> None:
    config = replace(TINY, objective=objective)
    tok = tokenizer(config.vocab)
    torch.manual_seed(0)
    model = build_model(config, len(tok), tok).train()
    assert unpadded.supports(model.bert)
    batch = Batches(config, read_corpus(config)[0], tok).sample()
    lengths = batch["attention_mask"].sum(1)
    assert lengths.min() < lengths.max() == batch["input_ids"].shape[1]  # padding to unpad

    def run(loss_fn) -> tuple[float, dict[str, torch.Tensor], float]:
        model.zero_grad(set_to_none=True)
        torch.manual_seed(1)  # the same dropout draws, if they are drawn the same way
        loss = loss_fn(config, model, batch)
        loss.backward()
        return float(loss.detach()), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}, float(torch.rand(1))

    ref_loss, ref_grads, ref_next = run(_padded_loss)
    loss, grads, after = run(loss_of)
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert after == ref_next  # the same number of random draws
    for name, g in ref_grads.items():
        if name in grads:
            torch.testing.assert_close(grads[name], g, rtol=1e-4, atol=1e-6, msg=name)
        else:  # transformers' head scores every position; here only the masked ones reach the loss
            assert not g.any(), name
    with torch.no_grad():  # a different draw would change the loss by far more than rounding
        torch.manual_seed(2)
        assert abs(float(_padded_loss(config, model, batch)) - ref_loss) > 1e-3
        model.eval()  # no dropout: transformers' own attention function, as the evaluation after a run uses it
        assert float(loss_of(config, model, batch)) == pytest.approx(float(_padded_loss(config, model, batch)), rel=1e-5)


def _plain_loop_curve(config: TrainConfig) -> list[float]:
    """A run written with transformers' pieces as they come: the collator on ``{"input_ids": ...}`` rows, the
    masked LM's own padded forward and loss, unfused AdamW with BERT's schedule, clipping at 1.0."""
    torch.manual_seed(config.seed)
    tok = tokenizer(config.vocab)
    examples = [tok(t, truncation=True, max_length=config.seq_len)["input_ids"] for t in read_corpus(config)[0]]
    model = build_model(config, len(tok), tok).train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01, fused=False, foreach=False)
    schedule = get_linear_schedule_with_warmup(optimizer, int(config.warmup * config.steps), config.steps)
    rng, collator = random.Random(config.seed), DataCollatorForLanguageModeling(tok, seed=config.seed)
    curve = []
    for _ in range(config.steps):
        batch = collator([{"input_ids": examples[rng.randrange(len(examples))]} for _ in range(config.batch)])
        loss = model(**batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        curve.append(float(loss.detach()))
    return curve


@pytest.mark.parametrize("draws", ["as detected", "bernoulli_"])
def test_a_run_gives_the_curve_of_a_plain_loop_with_transformers_forward(draws: str, monkeypatch) -> None:
    if draws == "bernoulli_":  # the way taken where uniform draws differ from bernoulli_'s (an Intel CPU with MKL)
        monkeypatch.setattr(unpadded, "_uniform_draws_bernoulli", lambda: False)
    ours = [loss for _, loss in train(TINY, save=False).curve]
    plain = _plain_loop_curve(TINY)
    assert ours == pytest.approx(plain, rel=1e-5)
    assert max(plain) - min(plain) > 0.1  # it trains: a curve that moved, not eight copies of the first loss


@pytest.mark.parametrize("objective", ["mlm", "clm"])
def test_batches_are_what_the_collator_makes_of_the_rows(objective: str) -> None:
    config = replace(TINY, objective=objective, batch=16)
    tok = tokenizer(config.vocab)
    texts = read_corpus(config)[0]
    examples = [tok(t, truncation=True, max_length=config.seq_len)["input_ids"] for t in texts]
    rng = random.Random(config.seed)
    collator = DataCollatorForLanguageModeling(tok, mlm=objective == "mlm", seed=config.seed)
    batches = Batches(config, texts, tok)
    for _ in range(5):
        ref = collator([{"input_ids": examples[rng.randrange(len(examples))]} for _ in range(config.batch)])
        got = batches.sample()
        for key in ("input_ids", "attention_mask", "labels"):
            assert torch.equal(got[key], ref[key]) and got[key].dtype == ref[key].dtype, key
