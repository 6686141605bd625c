"""The pre-training loop's cost: tokens per second of ``models.pretrain.train`` against a plain PyTorch loop.

    python bench/pretrain.py

Target (issue 17): the lab's bookkeeping (accelerate, the loss curve, snapshots of the last good state,
progress callbacks) costs at most 20%: train's tokens/s ≥ 0.8 × a plain loop's on the same model, the
same batches (the same collator) and the same steps. Runs interleaved, medians of 3. CPU here; on a
GPU the same script reports the same ratio.
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("BFE_MODEL_DIR", tempfile.mkdtemp())


def main() -> None:
    import torch
    import transformers

    from models import pretrain as P

    transformers.logging.set_verbosity_error()
    config = P.TrainConfig(objective="mlm", layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=32, steps=60,
                           corpus_lines=2_000)
    tok = P.tokenizer()
    texts, _ = P.read_corpus(config)

    def ours() -> float:
        r = P.train(config, save=False, on_progress=lambda *a: None)
        return r.tokens / r.seconds

    def plain() -> float:
        torch.manual_seed(config.seed)
        model = P.build_model(config, len(tok), tok)
        batches = P.Batches(config, texts, tok)
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
        sched = transformers.get_linear_schedule_with_warmup(opt, int(config.warmup * config.steps), config.steps)
        model.train()
        tokens, t0 = 0, time.perf_counter()
        for _ in range(config.steps):
            b = batches.sample()
            loss = model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            tokens += int(b["attention_mask"].sum())
        return tokens / (time.perf_counter() - t0)

    a, b = [], []
    for _ in range(3):
        a.append(ours())
        b.append(plain())
    mine, ref = statistics.median(a), statistics.median(b)
    n = P.parameter_count(P.build_model(config, len(tok), tok))
    print(f"model: BERT {config.layers} × {config.hidden} ({n:,} parameters, 30,522-token vocabulary), batch {config.batch} × "
          f"{config.seq_len}, {config.steps} steps, {torch.get_num_threads()} threads")
    print(f"  plain PyTorch loop:        {ref:9,.0f} tokens/s")
    print(f"  models.pretrain.train:     {mine:9,.0f} tokens/s   ratio {mine / ref:.2f} (target ≥ 0.8)")


if __name__ == "__main__":
    main()
