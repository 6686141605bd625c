"""The model backend against the local model process, and a class's requests batched against one at a time.

    python bench/backend.py pages [--repeats 7] [--tokens 128]
    python bench/backend.py class [--sessions 30] [--repeats 5] [--tokens 128] [--model ID] [--device cpu|cuda]
    python bench/backend.py gpu-model DIR        # a BERT-base-sized checkpoint (random weights) for a GPU machine

``pages`` starts two front ends as the README does (``python -m app.serve``), one with its own model process and one
with ``BFE_BACKEND`` pointing at a backend (``python -m app.backend``) in a process of its own, both on the bundled
model, and opens the attention page in a new session of each, interleaved: the first visit after the server is up,
then warm visits (each a new sentence: one model call each). It prints the medians from the click (the session's
rerun request) to the page's ``script_finished`` and their ratio, and the bytes one attention call moves over the
network at ``--tokens`` tokens (request and answer).

``class`` starts a backend (or uses ``--url``) and sends ``--sessions`` attention requests at once, each its own
sentence, from as many threads (each a page session's model call): through the batching endpoint, and one at a time
(``batched=False``: the same backend's unbatched endpoint), interleaved ``--repeats`` times. It prints the medians of
the whole class's time and the per-request p50/p95 of each, their ratio, and the batch sizes the backend formed.

Ratios within one run, medians over the repeats; this machine is shared and noisy.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from bench.scaleout import free_port, start_replica, wait_healthy  # noqa: E402

TOKEN = "bench-" + os.urandom(8).hex()
WORDS = ["the", "student", "read", "about", "attention", "heads", "and", "masked", "language", "models", "in",
         "the", "library", "before", "the", "lecture", "on", "pre-training", "objectives", "began"]


def text(i: int, tokens: int) -> str:
    """A sentence of about ``tokens`` word pieces, different for each ``i`` (its own forward pass, no cache hit)."""
    words = [f"{WORDS[(i * 7 + k) % len(WORDS)]}" for k in range(tokens)]
    return f"Request {i}: " + " ".join(words)


def start_backend(env: dict[str, str], port: int, preload: list[str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", "app.backend", "--port", str(port), "--preload", *preload],
                                cwd=ROOT, env={**env, "BFE_BACKEND_TOKEN": TOKEN}, stdout=out, stderr=subprocess.STDOUT)


def wait_backend(url: str, proc: subprocess.Popen, timeout: float = 300) -> object:
    from services.backend.client import Backend

    backend = Backend(url, TOKEN)
    if not backend.wait_ready(timeout, cancelled=lambda: proc.poll() is not None, every=0.5):
        raise RuntimeError(f"the backend did not start (exit {proc.poll()})")
    return backend


def pythonpath() -> str:
    """This checkout first, then what the caller's PYTHONPATH holds (a GPU machine's carried packages)."""
    return os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


# --- pages ------------------------------------------------------------------------------------------------------


async def visit(url: str, sentence: str) -> float:
    from bench.st_client import StreamlitSession

    s = StreamlitSession(url)
    await s.open()
    try:
        r = await s.run(page="attention", query={"at_text": sentence})
        if r.status != "FINISHED_SUCCESSFULLY" or r.errors:
            raise RuntimeError(f"attention page: {r.status} {r.errors[:2]}")
        return r.seconds
    finally:
        await s.close()


def pages(repeats: int, tokens: int) -> None:
    from models.attention import extract_attention

    work = Path(tempfile.mkdtemp(prefix="bfe-bench-backend-"))
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "BFE_MODEL_DIR": str(work / "models"), "PYTHONPATH": pythonpath(),
            "DATABASE_URL": f"sqlite:///{work}/results.db"}
    from core import registry

    model = registry.bundled_id()
    bport, lport, rport = free_port(), free_port(), free_port()
    backend_proc = start_backend(base, bport, [model], work / "backend.log")
    local = start_replica(lport, base, work / "local.log")
    remote = start_replica(rport, {**base, "BFE_BACKEND": f"http://127.0.0.1:{bport}", "BFE_BACKEND_TOKEN": TOKEN},
                           work / "remote.log")
    try:
        backend = wait_backend(f"http://127.0.0.1:{bport}", backend_proc)
        for port in (lport, rport):
            wait_healthy(f"http://127.0.0.1:{port}/_stcore/health", timeout=120)
        time.sleep(8)  # the local model process warms the bundled model after its first page (as for a user)
        urls = {"local model process": f"http://127.0.0.1:{lport}", "model backend": f"http://127.0.0.1:{rport}"}
        first = {k: asyncio.run(visit(u, text(1000 + j, tokens))) for j, (k, u) in enumerate(urls.items())}
        warm: dict[str, list[float]] = {k: [] for k in urls}
        for r in range(repeats):
            order = list(urls.items()) if r % 2 == 0 else list(urls.items())[::-1]
            for k, u in order:
                warm[k].append(asyncio.run(visit(u, text(r * 10 + (k == "model backend"), tokens))))
        before = (backend.sent_chars, backend.received_chars, backend.received_blob_bytes)
        result = backend.call(extract_attention, model, text(5000, tokens), None, tokens)
        sent, got, blob = (backend.sent_chars - before[0], backend.received_chars - before[1],
                           backend.received_blob_bytes - before[2])
        print(f"attention page, {model}, {result.weights.shape[-1]} tokens, {repeats} warm visits each (new sentence each)")
        for k in urls:
            print(f"  {k:22s} first visit {first[k]:.3f} s   warm median {statistics.median(warm[k]):.3f} s "
                  f"(min {min(warm[k]):.3f}, max {max(warm[k]):.3f})")
        ratio_first = first["model backend"] / first["local model process"]
        ratio_warm = statistics.median(warm["model backend"]) / statistics.median(warm["local model process"])
        print(f"  backend / local: first visit {ratio_first:.2f}x, warm {ratio_warm:.2f}x (goal <= 1.2x)")
        print(f"  one attention call over the network: request {sent:,} B, answer {got:,} B, of which {blob:,} B the "
              f"file of raw .npy arrays (weights {result.weights.nbytes:,} B as float32)")
    finally:
        for p in (backend_proc, local, remote):
            p.terminate()
        for p in (backend_proc, local, remote):
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()


# --- a class ----------------------------------------------------------------------------------------------------


FAILURES: list[str] = []


def one_class(backend: object, model: str, n: int, tokens: int, batched: bool, offset: int) -> tuple[float, list[float]]:
    from models.attention import extract_attention

    barrier = threading.Barrier(n)

    def one(i: int) -> float:
        barrier.wait()
        t0 = time.perf_counter()
        try:
            backend.call(extract_attention, model, text(offset + i, tokens), None, tokens, batched=batched)
        except Exception as err:  # counted and shown, so one failure does not hide the other numbers
            FAILURES.append(f"{'batched' if batched else 'alone'}: {type(err).__name__}: {str(err)[:300]}")
        return time.perf_counter() - t0

    t0 = time.perf_counter()
    with ThreadPoolExecutor(n) as pool:
        each = list(pool.map(one, range(n)))
    return time.perf_counter() - t0, each


def a_class(sessions: int, repeats: int, tokens: int, model: str | None, device: str, url: str | None) -> None:
    from core import registry

    model = model or registry.bundled_id()
    proc = None
    work = Path(tempfile.mkdtemp(prefix="bfe-bench-class-"))
    if url is None:
        port = free_port()
        env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": pythonpath(), "BFE_DEVICE": device}
        proc = start_backend(env, port, [model], work / "backend.log")
        url = f"http://127.0.0.1:{port}"
    try:
        backend = wait_backend(url, proc) if proc else None
        if backend is None:
            from services.backend.client import Backend

            backend = Backend(url, os.environ.get("BFE_BACKEND_TOKEN", ""))
        info = backend.info(fresh=True)
        print(f"model backend on {info.device}; {model}; {sessions} requests at once, {tokens} tokens each, "
              f"{repeats} repeats (interleaved)")
        one_class(backend, model, min(sessions, 4), tokens, True, 90_000)  # the first passes (allocations, kernels)
        one_class(backend, model, min(sessions, 4), tokens, False, 91_000)
        totals: dict[bool, list[float]] = {True: [], False: []}
        each: dict[bool, list[float]] = {True: [], False: []}
        sizes: dict[str, int] = {}
        for r in range(repeats):
            for batched in ((True, False) if r % 2 == 0 else (False, True)):
                before = dict(backend.info(fresh=True).batch_sizes)
                total, times = one_class(backend, model, sessions, tokens, batched, r * 1000 + batched * 500)
                totals[batched].append(total)
                each[batched].extend(times)
                if batched:
                    after = backend.info(fresh=True).batch_sizes
                    for k, v in after.items():
                        if v - before.get(k, 0):
                            sizes[k] = sizes.get(k, 0) + v - before.get(k, 0)
        for batched, name in ((True, "batched"), (False, "one at a time")):
            print(f"  {name:14s} class {statistics.median(totals[batched]):.3f} s (median of {repeats}; "
                  f"min {min(totals[batched]):.3f}, max {max(totals[batched]):.3f})   per request p50 "
                  f"{pct(each[batched], 0.5):.3f} s, p95 {pct(each[batched], 0.95):.3f} s")
        print(f"  one at a time / batched: {statistics.median(totals[False]) / statistics.median(totals[True]):.2f}x "
              "(goal >= 2x on a CPU)")
        where_time(model, sessions, tokens, device)
        print(f"  failed requests: {len(FAILURES)}" + (f"; first: {FAILURES[0]}" if FAILURES else ""))
        print(f"  batch sizes formed (size: count): {json.dumps(dict(sorted(sizes.items(), key=lambda kv: int(kv[0]))))}")
    finally:
        if proc is not None:
            proc.terminate()
            proc.wait(10)


def where_time(model: str, n: int, tokens: int, device: str) -> None:
    """In this process, on the backend's device: the class's sentences in one batched call, and the wire's encoding and
    decoding of their results (what the backend and the front end do besides the forward pass)."""
    import json as json_

    os.environ["BFE_DEVICE"] = device
    from models.attention import extract_attention_batch
    from services.backend import wire

    items = [(text(70_000 + i, tokens), None, tokens) for i in range(n)]
    extract_attention_batch(model, items[:2])
    forward, encode, decode, size = [], [], [], 0
    for r in range(3):
        t0 = time.perf_counter()
        results = extract_attention_batch(model, [(f"{r} {t}", p, m) for t, p, m in items])
        forward.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        texts = [json_.dumps({"ok": wire.encode(x)}) for x in results]
        encode.append(time.perf_counter() - t0)
        size = sum(len(t) for t in texts)
        t0 = time.perf_counter()
        for t in texts:
            wire.decode(json_.loads(t)["ok"])
        decode.append(time.perf_counter() - t0)
    print(f"  in one process on {device}: {n} sentences batched {statistics.median(forward):.3f} s (forward, results "
          f"as numpy), wire encode {statistics.median(encode):.3f} s, decode {statistics.median(decode):.3f} s, "
          f"{size / 1e6:.1f} MB of JSON for the class")


def gpu_model(folder: Path) -> None:
    """A BERT-base-sized checkpoint (12 layers, 768 wide, random weights) named ``bert-base-uncased`` in ``folder``,
    with the tests' tiny tokenizer: the compute of BERT-base, for a GPU machine that cannot download one."""
    from transformers import BertConfig, BertForMaskedLM

    from tests.helpers.tiny import build_all

    build_all(folder)
    target = folder / "bert-base-uncased"
    tiny = BertConfig.from_pretrained(target)
    config = BertConfig(vocab_size=tiny.vocab_size, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                        intermediate_size=3072, max_position_embeddings=512, pad_token_id=tiny.pad_token_id)
    BertForMaskedLM(config).save_pretrained(target, safe_serialization=True)
    print(f"wrote {target} (BERT-base shape, random weights, vocabulary {tiny.vocab_size})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", choices=["pages", "class", "gpu-model"])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--sessions", type=int, default=30)
    ap.add_argument("--model")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--url")
    args = ap.parse_args()
    if args.what == "pages":
        pages(args.repeats, args.tokens)
    elif args.what == "class":
        a_class(args.sessions, args.repeats, args.tokens, args.model, args.device, args.url)
    else:
        gpu_model(Path(args.folder))


if __name__ == "__main__":
    main()
