"""Representations: projection time, nearest-context search, and Captum's overhead for integrated gradients.

    python bench/representations.py

Targets: PCA of 2,000 token vectors ≤ 0.5 s (UMAP and t-SNE reported); nearest contexts over
≥ 50,000 token vectors ≤ 100 ms per query once the index is built; integrated gradients with 50 steps,
batched, ≤ 2 × one batched forward + backward over the 50 interpolation points done by hand (so
Captum's bookkeeping is small), at 16 and 128 tokens. Medians; IG and its reference interleaved.
All on the bundled MiniLM (real weights, offline).
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

from bench.timing import interleaved  # noqa: E402

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


def projections() -> None:
    import numpy as np

    from analysis.representations import project
    from models.representations import corpus, hidden_states

    sentences = list(corpus(500))
    x = np.concatenate([hidden_states(MINILM, sentences[i:i + 250]).layer_matrix(3)[0] for i in (0, 250)])[:2000]
    print(f"projection of {x.shape[0]:,} token vectors ({x.shape[1]} dims), median of 3 runs (one warm-up):")
    for method in ("pca", "tsne", "umap"):
        project(x, method)  # warm-up: imports, numba's compilation for UMAP
        times = []
        for _ in range(3):
            t0 = time.perf_counter()
            project(x, method)
            times.append(time.perf_counter() - t0)
        print(f"  {method:5s} {statistics.median(times):7.2f} s" + ("   (target ≤ 0.5 s)" if method == "pca" else ""))
    assert np.isfinite(x).all()


def nearest() -> None:
    from analysis.representations import nearest as scan
    from models.loader import load
    from models.representations import corpus_index, hidden_states, nearest_contexts

    lm = load(MINILM)
    t0 = time.perf_counter()
    index = corpus_index(lm, 3)
    build = time.perf_counter() - t0
    t0 = time.perf_counter()
    corpus_index(lm, 3)
    load_s = time.perf_counter() - t0
    query = hidden_states(lm, ["We sat on the river bank."]).items[0].hidden[3, 6]
    search = []
    for _ in range(21):
        t0 = time.perf_counter()
        scan(query, index.vectors, 10, normalized=True)
        search.append(time.perf_counter() - t0)
    full = []
    for _ in range(7):
        t0 = time.perf_counter()
        nearest_contexts(lm, "We sat on the river bank.", 6, 10, 3)
        full.append(time.perf_counter() - t0)
    print(f"\nnearest contexts over {index.vectors.shape[0]:,} token vectors ({len(index.sentences):,} WordNet sentences), layer 3:")
    print(f"  index build (once per model and layer): {build:6.1f} s; loading it from disk: {load_s * 1e3:.0f} ms")
    print(f"  search alone:        {statistics.median(search) * 1e3:6.1f} ms   (target ≤ 100 ms)")
    print(f"  a page's query (forward of the sentence + index from disk + search): {statistics.median(full) * 1e3:6.1f} ms")


def attribution() -> None:
    import torch
    from captum.attr import LayerIntegratedGradients

    from models.loader import load

    lm = load(MINILM)
    net, tok, _ = lm
    emb = net.get_input_embeddings()
    steps = 50
    print(f"\nintegrated gradients, {steps} steps in one batch, against the same work by hand (medians of 7, interleaved):")
    print(f"  {'tokens':>6s} {'by hand ms':>11s} {'Captum ms':>10s} {'ratio':>6s}")
    for n in (16, 128):
        words = ("the cat sat on the mat because it was tired and " * 40).split()
        text = " ".join(words[: n - 2])
        enc = tok(text, return_tensors="pt")
        assert enc["input_ids"].shape[1] == n, enc["input_ids"].shape
        ids, mask = enc["input_ids"], enc["attention_mask"]
        special = torch.zeros_like(ids, dtype=torch.bool)
        special[:, 0] = special[:, -1] = True
        baseline = torch.where(special, ids, torch.full_like(ids, tok.pad_token_id))

        def f(input_ids, attention_mask):
            am = attention_mask.expand_as(input_ids)
            h = net(input_ids=input_ids, attention_mask=am).last_hidden_state
            return h[:, 0].norm(dim=-1)

        def captum(ids=ids, baseline=baseline, mask=mask) -> None:
            LayerIntegratedGradients(f, emb).attribute(ids, baselines=baseline, additional_forward_args=(mask,), n_steps=steps,
                                                       internal_batch_size=steps)

        def by_hand(ids=ids, baseline=baseline, mask=mask) -> None:
            # the same interpolation on the word-embedding layer's output: 50 points, one batch, one backward
            with torch.no_grad():
                x, b = emb(ids), emb(baseline)
            alphas = torch.linspace(0, 1, steps).view(-1, 1, 1)
            points = (b + alphas * (x - b)).requires_grad_(True)
            handle = emb.register_forward_hook(lambda m, i, o: points)
            try:
                out = f(ids.expand(steps, -1), mask)
                (grads,) = torch.autograd.grad(out.sum(), points)
            finally:
                handle.remove()
            ((x - b) * grads.mean(0)).sum(-1)

        with torch.enable_grad():
            hand, ours = interleaved(by_hand, captum, runs=7)
        print(f"  {n:6d} {hand * 1e3:11.0f} {ours * 1e3:10.0f} {ours / hand:6.2f}   (target ≤ 2)")


if __name__ == "__main__":
    import transformers

    transformers.logging.set_verbosity_error()
    projections()
    nearest()
    attribution()
