"""Objectives lab timings on a bert-base-sized masked LM (random weights; timing only).

    python bench/objectives.py

- single-mask fill_mask against a bare forward pass plus tokenization (target ratio ≤ 1.15), and
  against transformers' pipeline("fill-mask") on the same model;
- pseudo-perplexity of a 20-token sentence: one batched pass against 20 separate passes (target ≥ 3×);
- three models side by side (bert-base, distilbert-base and albert-base sized).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.timing import timed  # noqa: E402

TEXT = "the man went to the [MASK] to buy a gallon of milk ."
PLL_TEXT = "the man went to the store to buy a gallon of milk because the cat was tired and the boy"  # 20 tokens


def loaded(model_id: str):
    import torch

    from core.registry import get
    from models.loader import LoadedModel, Source
    from models.measure import build
    from tests.helpers.tiny import wordpiece_tokenizer

    model = build(get(model_id).config, "masked-lm").eval()
    tok = wordpiece_tokenizer()
    return LoadedModel(model_id, "masked-lm", model, tok, torch.device("cpu"), torch.float32, Source("local", "bench"), "sdpa",
                       sum(p.numel() * 4 for p in model.parameters()), 0.0)



def main() -> None:
    import torch
    from transformers import pipeline

    from models import objectives

    torch.set_num_threads(2)
    lm = loaded("bert-base-uncased")
    text = TEXT.replace("[MASK]", lm.tokenizer.mask_token)

    def bare() -> None:
        enc = lm.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            lm.model(**enc)

    pipe = pipeline("fill-mask", model=lm.model, tokenizer=lm.tokenizer, device="cpu")
    t_bare = timed(bare)
    t_ours = timed(lambda: objectives.fill_mask(lm, TEXT, top_k=5))
    t_pipe = timed(lambda: pipe(text, top_k=5))
    print(f"fill-mask, bert-base size, {len(lm.tokenizer(text)['input_ids'])} tokens:")
    print(f"  bare forward + tokenization {1000 * t_bare:7.1f} ms")
    print(f"  fill_mask                   {1000 * t_ours:7.1f} ms   ratio {t_ours / t_bare:.2f} (target ≤ 1.15)")
    print(f"  pipeline('fill-mask')       {1000 * t_pipe:7.1f} ms   ours / pipeline {t_ours / t_pipe:.2f}")

    n = len(objectives.pseudo_log_likelihood(lm, PLL_TEXT).tokens)
    t_batch = timed(lambda: objectives.pseudo_log_likelihood(lm, PLL_TEXT), runs=3)
    t_loop = timed(lambda: objectives.pseudo_log_likelihood(lm, PLL_TEXT, batched=False), runs=3)
    print(f"pseudo-perplexity of a {n}-token sentence: batched {1000 * t_batch:.0f} ms, {n} separate passes {1000 * t_loop:.0f} ms"
          f" → {t_loop / t_batch:.1f}× (target ≥ 3×)")

    models = [lm, loaded("distilbert-base-uncased"), loaded("albert-base-v2")]
    t_side = timed(lambda: [objectives.fill_mask(m, TEXT, top_k=5) for m in models], runs=5)
    print(f"three models side by side (bert-base, distilbert-base, albert-base sizes): {1000 * t_side:.0f} ms")


if __name__ == "__main__":
    main()
