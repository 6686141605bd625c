"""The model backend as a Hugging Face ZeroGPU Space (``sdk: gradio``): the pages' model calls, served on ZeroGPU's
GPU to a front end elsewhere (the Streamlit Docker Space with ``BFE_BACKEND=https://<user>-<space>.hf.space``).

``deploy/zerogpu/assemble.sh OUT_DIR`` puts this file beside the app's code; the walkthrough is in docs/deploy.md.
The Space runs ``python app.py``; ``import app.backend`` below still finds the package ``app/`` beside this file
(a package wins over a module of the same name in one folder).

Settings (the Space's *Variables and secrets*):

- ``BFE_BACKEND_TOKEN`` (a **secret**, required): the front end sends it in ``X-BFE-Token``. The Space is public on
  the internet, so this file refuses to start without it.
- ``BFE_BACKEND_PRELOAD``: the models to serve, comma-separated (default: the bundled model). ``MODEL`` loads it as the
  Attention page asks for it; ``MODEL:TASK`` with the head another page asks for (:func:`preload_all`).
- ``BFE_ZEROGPU_SECONDS`` (default 20) and ``BFE_ZEROGPU_LONG_SECONDS`` (default 120): the GPU time a call asks
  ZeroGPU for; the long one is for the sweeps (head importance, pruning, patching, nearest contexts).
- ``BFE_BACKEND_CONCURRENCY`` (default 2): model calls at once besides the attention batches.
- Any ``BFE_*`` setting of the app (docs/settings.md); ``BFE_DEVICE`` is ``cuda`` unless set.
"""

from __future__ import annotations

import json
import logging
import os
import sys

# ZeroGPU patches torch's CUDA when `spaces` is imported, so it comes before anything that imports torch.
try:
    import spaces
except ImportError:  # not on a Space (a laptop trying this file): GPU(...) leaves the functions as they are
    from types import SimpleNamespace

    spaces = SimpleNamespace(GPU=lambda fn=None, **_options: fn if callable(fn) else (lambda f: f))


TOKEN_ENV = "BFE_BACKEND_TOKEN"
PORT = int(os.environ.get("GRADIO_SERVER_PORT") or 7860)  # the Space's port; another only for a trial elsewhere
#: Calls that may take minutes (the client's own time limits for them are 300-600 s).
LONG_CALLS = frozenset({"head_importance", "pruning_curve", "activation_patching", "nearest_contexts", "load_summary"})


def _seconds(name: str, default: int) -> int:
    try:
        return max(1, int(os.environ.get(name) or default))
    except ValueError:
        return default


SECONDS, LONG_SECONDS = _seconds("BFE_ZEROGPU_SECONDS", 20), _seconds("BFE_ZEROGPU_LONG_SECONDS", 120)


def gpu_seconds(request: str | list[str]) -> int:
    """The GPU time a call asks ZeroGPU for (its dynamic ``duration``: the decorated function's own arguments). A
    shorter request is scheduled sooner and is not refused while the caller's quota still holds that much."""
    name = _parsed(request).get("name") if isinstance(request, str) else None
    return LONG_SECONDS if isinstance(name, str) and name in LONG_CALLS else SECONDS


def _parsed(request: str) -> dict:
    """A request's JSON object, or {} for anything else (the handler then refuses it with its own message)."""
    from services.backend.handlers import MAX_REQUEST_CHARS

    if len(request) > MAX_REQUEST_CHARS:
        return {}
    try:
        parsed = json.loads(request)
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}


def _model_free(request: str) -> bool:
    """Whether ``request`` asks one of the backend's own questions about the model folder (which catalog models are
    here, a checkpoint's description, a lab run's steps): no model runs, so no GPU is taken (nor quota spent)."""
    from services.routing import BACKEND_ONLY

    parsed = _parsed(request) if isinstance(request, str) else {}
    module, name = parsed.get("module"), parsed.get("name")
    return isinstance(module, str) and isinstance(name, str) and name in BACKEND_ONLY.get(module, ())


def preload_all(entries: list[str]) -> None:
    """Load what ``BFE_BACKEND_PRELOAD`` names. ``MODEL``: with its attention weights, as the Attention page asks
    (:func:`services.backend.handlers.preload`); ``MODEL:TASK``: with that head, as the other pages ask: ``base``
    (Representations, attributions), ``masked-lm`` (fill-mask, pseudo-perplexity, logit lens, patching, head
    importance), ``pretraining`` (NSP/SOP, ELECTRA's discriminator), ``causal-lm`` (GPT-2), ``xlnet-lm`` (XLNet).
    Nothing named: the bundled model. A model that does not load is logged and skipped."""
    from core.errors import ExplorerError
    from models.loader import load
    from services.backend.handlers import preload

    preload([e for e in entries if ":" not in e] if entries else None)
    for entry in (e for e in entries if ":" in e):
        model, task = (part.strip() for part in entry.split(":", 1))
        try:
            load(model, task)
        except ExplorerError as err:
            logging.getLogger("bert_family_explorer").warning("not preloaded: %s: %s", entry, err)


def on_gpu(fn):
    """``build``'s ``gpu`` wrapper: ``fn`` runs under ``@spaces.GPU`` (ZeroGPU attaches a GPU for the call), except a
    model-free question, which ``call`` answers at once."""
    from services.backend.handlers import call

    decorated = spaces.GPU(duration=gpu_seconds)(fn)
    if fn is not call:
        return decorated

    def routed(request: str) -> tuple[str, bytes]:
        return fn(request) if _model_free(request) else decorated(request)

    return routed


def main() -> int:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        print(f"The model backend will not start without a token: set the secret {TOKEN_ENV} in the Space's settings "
              "(Settings -> Variables and secrets -> New secret), and the same value on the front end. This Space is "
              "public on the internet.", file=sys.stderr, flush=True)
        return 2
    os.environ.setdefault("BFE_DEVICE", "cuda")
    logging.basicConfig(level=logging.INFO, format="backend: %(message)s")

    from app.backend import build, launch

    # The models are loaded here, at start-up in the Space's own process and outside any GPU call (what ZeroGPU's
    # docs call module scope): ZeroGPU keeps the CUDA placements made here and replays them on the GPU it attaches to
    # each call. A model loaded *inside* a @spaces.GPU call lives in that call's worker and does not persist to the
    # next call: every model the front end will ask for belongs in BFE_BACKEND_PRELOAD.
    ids = [m.strip() for m in os.environ.get("BFE_BACKEND_PRELOAD", "").split(",") if m.strip()]
    preload_all(ids)
    host = os.environ.get("SPACE_HOST")  # <user>-<space>.hf.space on a Space
    print(f"model backend for BFE_BACKEND={'https://' + host if host else f'http://<this host>:{PORT}'}; "
          f"preloaded: {', '.join(ids) or 'the bundled model'}", flush=True)
    concurrency = max(1, min(_seconds("BFE_BACKEND_CONCURRENCY", 2), 16))
    launch(build(gpu=on_gpu, concurrency=concurrency), "0.0.0.0", PORT, token)
    return 0


if __name__ == "__main__":
    sys.exit(main())
