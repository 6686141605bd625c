"""bench/mfu.py's FLOP count against the model itself: 6 FLOPs per weight per token for the encoder's
linear layers and per masked position for the output layer, plus attention over each text's own length."""

from __future__ import annotations

from dataclasses import replace

import torch

from bench.mfu import DEFAULT, step_flops
from models.pretrain import build_model, tokenizer


def test_the_count_is_six_flops_per_weight_per_token_plus_attention_on_the_real_tokens() -> None:
    config = replace(DEFAULT, layers=2, hidden=32, heads=2, ffn=64)
    tok = tokenizer(config.vocab)
    model = build_model(config, len(tok), tok)
    encoder = sum(m.weight.numel() for m in model.bert.encoder.modules() if isinstance(m, torch.nn.Linear))
    head = model.cls.predictions.transform.dense.weight.numel() + model.cls.predictions.decoder.weight.numel()
    lengths = [5, 3, 2]
    mask = torch.tensor([[1] * n + [0] * (5 - n) for n in lengths])  # (B, W) = (3, 5)
    labels = torch.full((3, 5), -100)
    labels[0, 1] = labels[0, 4] = labels[1, 0] = labels[2, 1] = 7  # 4 masked
    ids = torch.where(mask.bool(), 5, tok.pad_token_id)

    f = step_flops(config, ids, mask, labels)

    pairs, padded_pairs = sum(n * n for n in lengths), 3 * 5 * 5
    per_pair = 3 * config.layers * 2 * 2 * config.hidden  # q·k and weights·v, forward + backward
    assert (f.tokens, f.positions, f.masked) == (10, 15, 4)
    assert f.model == 6 * encoder * 10 + per_pair * pairs + 6 * head * 4
    assert f.padded == 6 * encoder * 15 + per_pair * padded_pairs + 6 * head * 4
    no_padding = step_flops(config, ids[:1], mask[:1], labels[:1])
    assert no_padding.model == no_padding.padded
