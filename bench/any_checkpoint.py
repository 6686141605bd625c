"""Any checkpoint: time from a typed id to the refusal, or to the first attention view.

    python bench/any_checkpoint.py

Refusals (offline Hub id, unsupported architecture, a config over the size budget, custom code) are
decided from config.json alone: target well under 2 s, reported in ms. The first attention view of a
checkpoint of one's own (inspect + load with eager attention + extraction, on an empty model cache)
is compared with the bare minimum transformers needs for the same picture: AutoModel.from_pretrained
(eager) + AutoTokenizer + one forward pass with output_attentions, interleaved so both see the same
load. Uses a BERT-base-sized random checkpoint written here (no network) and the tiny test models.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

os.environ["HF_HUB_OFFLINE"] = "1"
MODEL_DIR = Path(tempfile.mkdtemp())
os.environ["BFE_MODEL_DIR"] = str(MODEL_DIR)

TEXT = "The animal didn't cross the street because it was too tired."


def build() -> None:
    """A BERT-base-shaped checkpoint of one's own (random weights, the tiny WordPiece tokenizer), and broken copies."""
    import torch
    import transformers

    from tests.helpers.tiny import build_all, wordpiece_tokenizer

    tiny = MODEL_DIR / "_tiny"
    build_all(tiny)
    torch.manual_seed(0)
    tok = wordpiece_tokenizer()
    config = transformers.BertConfig(vocab_size=len(tok))  # 12 layers, 768 wide: BERT-base without its vocabulary
    folder = MODEL_DIR / "students" / "my-bert-base"
    transformers.BertForMaskedLM(config).save_pretrained(folder)
    tok.save_pretrained(folder)
    for name, change in (("unsupported", {"model_type": "t5"}), ("huge-vocab", {"vocab_size": 10**9}),
                         ("remote-code", {"auto_map": {"AutoModel": "x.Y"}})):
        dst = MODEL_DIR / "students" / name
        shutil.copytree(tiny / "bert-base-uncased", dst)
        cfg = json.loads((dst / "config.json").read_text())
        (dst / "config.json").write_text(json.dumps({**cfg, **change}))


def refusals() -> None:
    from core.errors import ExplorerError
    from models import cache
    from models.loader import load

    print(f"{'typed id':34s} {'median ms':>10s}  refusal")
    for mid in ("someone/not-on-this-machine", "students/unsupported", "students/huge-vocab", "students/remote-code", "../../etc"):
        times, message = [], ""
        for _ in range(9):
            cache._default_cache = None
            t0 = time.perf_counter()
            try:
                load(mid, attentions=True)
            except ExplorerError as err:
                message = f"{type(err).__name__}: {err.message[:70]}"
            times.append(time.perf_counter() - t0)
        print(f"{mid:34s} {statistics.median(times) * 1e3:10.1f}  {message}")


def first_view() -> None:
    import gc

    import torch
    import transformers

    from models import cache
    from models.attention import extract_attention
    from models.inspection import inspect

    folder = MODEL_DIR / "students" / "my-bert-base"

    def ours() -> None:
        cache._default_cache = None
        gc.collect()
        inspect("students/my-bert-base")
        extract_attention("students/my-bert-base", TEXT)

    def bare() -> None:
        gc.collect()
        model = transformers.AutoModel.from_pretrained(folder, attn_implementation="eager").eval()
        tok = transformers.AutoTokenizer.from_pretrained(folder)
        with torch.inference_mode():
            model(**tok(TEXT, return_tensors="pt"), output_attentions=True)

    from bench.timing import interleaved

    t_ours, t_bare = interleaved(ours, bare, runs=7)
    print("\nfirst attention view of a BERT-base-sized folder of one's own (cold model cache), medians of 7 interleaved runs:")
    print(f"  bare transformers (load eager + tokenizer + forward): {t_bare * 1e3:8.0f} ms")
    print(f"  the app's path (inspect + checked load + extraction): {t_ours * 1e3:8.0f} ms   ratio {t_ours / t_bare:.2f}")


if __name__ == "__main__":
    import transformers

    transformers.logging.set_verbosity_error()
    build()
    refusals()
    first_view()
