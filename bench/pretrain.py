"""The pre-training loop's cost: tokens per second of ``models.pretrain.train`` against a plain PyTorch loop.

    python bench/pretrain.py

Target: the lab's bookkeeping (accelerate, the loss curve, snapshots of the last good state,
progress callbacks) costs at most 20%: train's tokens/s ≥ 0.8 × a plain loop's on the same model, the
same batches (the same collator) and the same steps. Runs interleaved, medians of 3. CPU here; on a
GPU the same script reports the same ratio.

Also: the lab's 8,192-token vocabulary against BERT's 30,522 (same model otherwise), and one run through
the lab's queue (``services.lab.submit``: a background worker process, curve written to the database every
second) against calling ``train`` in-process: wall time to the finished run, and time to the first
point of the curve (what a class waits for before the chart moves).
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("BFE_MODEL_DIR", tempfile.mkdtemp())
os.environ.setdefault("DATABASE_URL", f"sqlite:///{tempfile.mkdtemp()}/bench.db")


def main() -> None:
    import torch
    import transformers

    from models import pretrain

    transformers.logging.set_verbosity_error()
    config = pretrain.TrainConfig(objective="mlm", layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=32, steps=60,
                           corpus_lines=2_000, vocab="bert")
    tok = pretrain.tokenizer("bert")
    texts, _ = pretrain.read_corpus(config)

    def ours() -> float:
        r = pretrain.train(config, save=False, on_progress=lambda *a: None)
        return r.tokens / r.seconds

    def plain(full_head: bool = False) -> float:
        """A bare loop: the same model and batches; the same loss (masked positions scored), or with ``full_head``
        transformers' own head, which scores every position."""
        torch.manual_seed(config.seed)
        model = pretrain.build_model(config, len(tok), tok)
        batches = pretrain.Batches(config, texts, tok)
        opt = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
        sched = transformers.get_linear_schedule_with_warmup(opt, int(config.warmup * config.steps), config.steps)
        model.train()
        tokens, t0 = 0, time.perf_counter()
        for _ in range(config.steps):
            b = batches.sample()
            loss = (model(input_ids=b["input_ids"], attention_mask=b["attention_mask"], labels=b["labels"]).loss if full_head
                    else pretrain.loss_of(config, model, b))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            sched.step()
            opt.zero_grad(set_to_none=True)
            tokens += int(b["attention_mask"].sum())
        return tokens / (time.perf_counter() - t0)

    small = replace(config, vocab="wordnet-8k")

    def small_vocab() -> float:
        r = pretrain.train(small, save=False)
        return r.tokens / r.seconds

    a, b, c, d = [], [], [], []
    for _ in range(3):
        a.append(ours())
        b.append(plain())
        c.append(small_vocab())
        d.append(plain(full_head=True))
    mine, ref, fast, full = statistics.median(a), statistics.median(b), statistics.median(c), statistics.median(d)
    n = pretrain.parameter_count(pretrain.build_model(config, len(tok), tok))
    tok8 = pretrain.tokenizer("wordnet-8k")
    n8 = pretrain.parameter_count(pretrain.build_model(small, len(tok8), tok8))
    print(f"model: BERT {config.layers} × {config.hidden} ({n:,} parameters, 30,522-token vocabulary), batch {config.batch} × "
          f"{config.seq_len}, {config.steps} steps, {torch.get_num_threads()} threads")
    print(f"  plain PyTorch loop:        {ref:9,.0f} tokens/s")
    print(f"  the same, transformers' head scoring every position: {full:,.0f} tokens/s "
          f"(scoring the masked positions only: {ref / full:.2f}×)")
    print(f"  models.pretrain.train:     {mine:9,.0f} tokens/s   ratio {mine / ref:.2f} (target ≥ 0.8)")
    print(f"  the lab's 8,192 vocabulary: {fast:8,.0f} tokens/s   {fast / mine:.2f}× BERT's vocabulary ({n8:,} parameters)")
    queue(small)


def queue(config) -> None:
    """A run through the lab's queue (worker process) against the library call in this process (warm imports)."""
    from analysis.results_db import runs
    from analysis.run_status import ACTIVE, RunStatus
    from models import pretrain
    from services import lab

    cfg = replace(config, steps=120)
    direct, queued, first = [], [], []
    for i in range(3):
        t0 = time.perf_counter()
        pretrain.train(cfg, save=True)
        direct.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        (rid,) = lab.submit("single", cfg, f"bench-{os.getpid()}-{i}")
        seen = None
        while (row := runs.get_run(rid))["status"] in ACTIVE:
            if seen is None and row["curve"]:
                seen = time.perf_counter() - t0
            time.sleep(0.05)
        assert row["status"] == RunStatus.FINISHED, row["message"]
        queued.append(time.perf_counter() - t0)
        first.append(seen or float("nan"))
    d, q = statistics.median(direct), statistics.median(queued)
    print(f"one run of {cfg.steps} steps, train + evaluate + save (medians of 3, interleaved):")
    print(f"  in this process (imports warm): {d:6.1f} s")
    print(f"  through the lab's queue:        {q:6.1f} s   ratio {q / d:.2f}; first curve point after "
          f"{statistics.median(first):.1f} s (a fresh worker imports torch and transformers, and trains on "
          f"{lab.WORKER_THREADS} thread(s): it leaves a core to the web server)")


if __name__ == "__main__":
    main()
