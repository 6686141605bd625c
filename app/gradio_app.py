"""Gradio: each demo as an embeddable widget and a JSON API, over the same library as the Streamlit app.

    python -m app.gradio_app [--host 127.0.0.1] [--port 7860]

Endpoints (``gradio_client.Client(url).predict(..., api_name=...)``), each returning one JSON object:

- ``/fill_mask`` (text, models: comma-separated ids, top_k, mode) → {"models": {id: [[prediction, ...] per mask]}, "errors": {id: message}}
- ``/attention`` (model, text, text_pair, layer, head) → {"model", "tokens", "segments", "layer", "head", "weights": T×T, "stats", "truncated", "notices"}
- ``/pseudo_perplexity`` (model, sentence) → {"tokens", "log_probs", "pll", "pppl"}
- ``/permutation_masks`` (sentence, order: comma-separated positions or left-to-right/right-to-left/random:SEED, k) →
  {"tokens", "order", "targets", "content_mask", "query_mask", "perm_mask", "target_mapping"}
- ``/calculator`` (model: catalog id, head, precision, optimizer, batch_size, seq_len, zero_stage, data_parallel, gpu) →
  {"parameters", "non_embedding", "parts", "memory_bytes", "memory_total_bytes", "max_batch"}

The functions below only translate between JSON and the library; every error a user can cause
comes back as a ``gradio.Error`` with the library's message and hint, never a traceback. Models are
loaded once per process through ``models.loader`` (the same cache and offline rules as Streamlit);
the queue runs at most ``BFE_GRADIO_CONCURRENCY`` (default 2) model calls at a time, and the two
model-free endpoints (masks, calculator) share a second queue of :data:`LIGHT_CONCURRENCY`, so every
call is queued and a flood of cheap calls never starves the model calls. Request bodies are limited
to :data:`MAX_BODY_BYTES`; an unknown endpoint is a 404.
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import re
import sys
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from core.errors import ExplorerError  # noqa: E402

log = logging.getLogger("bert_family_explorer.gradio")
MAX_MODELS = 4
#: The largest request body (and upload) the API takes: its longest input is a 128-token sentence.
MAX_BODY_BYTES = 256 * 1024
#: Model-free calls (masks, calculator) that may run at once, in their own queue.
LIGHT_CONCURRENCY = 4
API_NAMES = frozenset({"fill_mask", "attention", "pseudo_perplexity", "permutation_masks", "calculator"})


def friendly(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Library errors become gradio.Error (message + hint); anything else a generic message, logged."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        import gradio as gr

        try:
            return fn(*args, **kwargs)
        except ExplorerError as err:
            raise gr.Error(f"{err.message} {err.hint}".strip(), print_exception=False) from None
        except Exception as err:
            log.exception("unexpected error in %s", fn.__name__)
            raise gr.Error(f"Something unexpected went wrong ({type(err).__name__}); try other input.", print_exception=False) from None

    return wrapper


# ------------------------------------------------------------------------------------ the API functions


def _bounded(name: str, value: Any, lo: int, hi: int) -> int:
    """A whole number in [lo, hi] (the Streamlit page's limits), or :class:`InvalidConfig` saying so."""
    from core.errors import InvalidConfig

    if isinstance(value, bool) or not isinstance(value, int | float) or (isinstance(value, float) and not value.is_integer()):
        raise InvalidConfig(f"{name} must be a whole number, not {str(value)[:30]!r}.")
    if not lo <= value <= hi:
        raise InvalidConfig(f"{name} must be between {lo:,} and {hi:,}, not {value:,.0f}.")
    return int(value)


@friendly
def fill_mask(text: str, models: str, top_k: int = 5, mode: str = "independent") -> dict:
    from models import objectives

    ids = [m.strip() for m in (models or "").split(",") if m.strip()]
    if not ids:
        raise ExplorerError("Name at least one model.", "For example: bert-base-uncased, roberta-base")
    if len(ids) > MAX_MODELS:
        raise ExplorerError(f"At most {MAX_MODELS} models at once.")
    out, errors = {}, {}
    for mid in ids:
        try:
            out[mid] = [[asdict(p) for p in row] for row in objectives.fill_mask(mid, text, int(top_k), mode)]
        except ExplorerError as err:
            errors[mid] = str(err)
    if not out:
        raise ExplorerError(" ".join(f"{m}: {e}" for m, e in errors.items()))
    return {"models": out, "errors": errors}


@friendly
def attention(model: str, text: str, text_pair: str = "", layer: int = 0, head: int = 0) -> dict:
    from models.attention import extract_attention, result_stats

    r = extract_attention(model, text, text_pair or None)
    layer, head = int(layer), int(head)
    if not (0 <= layer < r.layers and 0 <= head < r.heads):
        raise ExplorerError(f"{r.model_id} has layers 0–{r.layers - 1} and heads 0–{r.heads - 1}.")
    stats = result_stats(r)
    return {"model": r.model_id, "tokens": list(r.tokens), "segments": list(r.segments), "layer": layer, "head": head,
            "weights": [[round(float(v), 6) for v in row] for row in r.weights[layer, head]],
            "stats": {k: (None if v[layer, head] != v[layer, head] else float(v[layer, head])) for k, v in stats.items()},
            "truncated": r.truncated, "notices": list(r.notices)}


@friendly
def pseudo_perplexity(model: str, sentence: str) -> dict:
    from models.objectives import pseudo_log_likelihood

    r = pseudo_log_likelihood(model, sentence)
    return {"tokens": list(r.tokens), "log_probs": list(r.log_probs), "pll": r.pll, "pppl": r.pppl}


@friendly
def permutation_masks(sentence: str, order: str = "left-to-right", k: int = 0) -> dict:
    from core.errors import InvalidText
    from models import permutation as P

    words = (sentence or "").split()
    if not words:
        raise InvalidText("The sentence is empty.", "Type a sentence, for example 'New York is a city'.")
    if len(words) > P.MAX_TOKENS:
        raise InvalidText(f"At most {P.MAX_TOKENS} words.")
    n = len(words)
    spec = (order or "left-to-right").strip()
    if spec in ("left-to-right", "right-to-left"):
        seq = P.make_order(spec, n)
    elif spec.startswith("random"):
        seed = spec.partition(":")[2] or "0"
        if not seed.isdigit():
            raise P.InvalidOrder("Write random:SEED with a whole-number seed, e.g. random:3.")
        seq = P.make_order("random", n, int(seed))
    else:
        seq = P.parse_order(spec, n)
    inputs = P.permutation_inputs(seq, int(k) or None, specials=[n, n + 1])
    return {"tokens": [*words, "<sep>", "<cls>"], "order": list(inputs.order), "targets": list(inputs.targets),
            "content_mask": P.content_mask(inputs).astype(int).tolist(), "query_mask": P.query_mask(inputs).astype(int).tolist(),
            "perm_mask": inputs.perm_mask[0].astype(int).tolist(), "target_mapping": inputs.target_mapping[0].astype(int).tolist()}


@friendly
def calculator(model: str, head: str = "base", precision: str = "mixed", optimizer: str = "adamw", batch_size: int = 8,
               seq_len: int = 128, zero_stage: int = 0, data_parallel: int = 1, gpu: str = "V100 16 GB") -> dict:
    from analysis import memory
    from analysis.params import parameter_breakdown
    from core import registry

    card = registry.find(model) if isinstance(model, str) else None
    if card is not None and not card.config:
        raise ExplorerError(f"{card.id} has no configuration in the catalog (it is catalog-only).", "Pick a downloadable model.")
    if card is not None:
        config = card.config
    else:  # any checkpoint: its config.json alone (a folder here, or a Hub id when online); no size limit, nothing loads
        from analysis.params import MAX_PARAMETERS
        from models.inspection import inspect

        config = inspect(model, max_params=MAX_PARAMETERS).config
    bd = parameter_breakdown(config, head or "base")
    batch_size, seq_len = _bounded("batch_size", batch_size, 1, 100_000), _bounded("seq_len", seq_len, 1, 1_000_000)
    zero_stage, data_parallel = _bounded("zero_stage", zero_stage, 0, 3), _bounded("data_parallel", data_parallel, 1, 100_000)
    setup = memory.TrainingSetup(precision, optimizer, zero_stage, data_parallel).validate()
    est = memory.training_memory(bd, batch_size, seq_len, setup)
    fit = memory.max_batch_size(bd, gpu, seq_len, setup)
    return {"parameters": bd.total, "non_embedding": bd.non_embedding, "parts": bd.by_part(), "memory_bytes": est.components,
            "memory_total_bytes": est.total, "max_batch": {"gpu": fit.gpu, "seq_len": fit.seq_len, "batch": fit.max_batch}}


# ------------------------------------------------------------------------------------ the Blocks app


def _heatmap(result: dict):
    import numpy as np

    from analysis.attention_plots import heatmap

    if not result:
        return None
    return heatmap(np.array(result["weights"]), result["tokens"], title=f"layer {result['layer']}, head {result['head']}")


def _heatmap_files(result: dict) -> list[str] | None:
    """The heatmap as PNG (2x) and SVG files for download; a warning (not an error) when the server has no browser."""
    import tempfile

    import gradio as gr

    from analysis import export
    from core.errors import ExplorerError

    fig = _heatmap(result)
    if fig is None:
        return None
    try:
        png, svg = export.to_png(fig), export.to_svg(fig)
    except ExplorerError as err:
        gr.Warning(f"{err.message} {err.hint}".strip())
        return None
    folder = Path(tempfile.mkdtemp(prefix="bfe-heatmap-"))
    name = f"attention-layer{result['layer']}-head{result['head']}"
    (folder / f"{name}.png").write_bytes(png)
    (folder / f"{name}.svg").write_bytes(svg)
    return [str(folder / f"{name}.png"), str(folder / f"{name}.svg")]


def build():
    """The Gradio Blocks app: one tab per demo, each with its JSON output (the API) and a view."""
    import gradio as gr

    from analysis import memory
    from analysis.params import HEADS
    from core import registry

    loadable = [c.id for c in registry.loadable()]
    mlm = [c.id for c in registry.loadable() if "masked-lm" in c.tasks]
    # delete_cache: the heatmap files of an hour ago go (every hour), so a class's downloads do not fill the disk
    with gr.Blocks(title="BERT Family Explorer — widgets", delete_cache=(3600, 3600)) as demo:
        gr.Markdown("## BERT Family Explorer — embeddable demos\nEach tab is also an API endpoint (see *Use via API* below).")
        with gr.Tab("Fill the mask"):
            t = gr.Textbox("Chickens cackle and [MASK] quack.", label="Text (write [MASK])")
            m = gr.Textbox("bert-base-uncased, roberta-base", label=f"Models (comma-separated, at most {MAX_MODELS})")
            k = gr.Slider(1, 20, 5, step=1, label="Top k")
            mode = gr.Radio(["independent", "sequential"], value="independent", label="Several masks")
            out = gr.JSON(label="Predictions")
            gr.Button("Fill", variant="primary").click(fill_mask, [t, m, k, mode], out, api_name="fill_mask")
        with gr.Tab("Attention"):
            am = gr.Dropdown(loadable, value=registry.bundled_id(), label="Model (or type a Hub id / your folder)",
                             allow_custom_value=True)
            at = gr.Textbox("The cat sat on the mat because it was tired.", label="Sentence A")
            ap = gr.Textbox("", label="Sentence B (optional)")
            al = gr.Number(0, precision=0, label="Layer")
            ah = gr.Number(0, precision=0, label="Head")
            aj = gr.JSON(label="Attention of this head")
            plot = gr.Plot(label="Heatmap")
            files = gr.File(label="The heatmap as PNG (2x) and SVG, for slides", file_count="multiple")
            gr.Button("Show", variant="primary").click(attention, [am, at, ap, al, ah], aj, api_name="attention").then(
                _heatmap, aj, plot, api_visibility="private").then(_heatmap_files, aj, files, api_visibility="private")
        with gr.Tab("Pseudo-perplexity"):
            pm = gr.Dropdown(mlm, value="bert-base-uncased", label="Model (or type a Hub id / your folder)",
                             allow_custom_value=True)
            ps = gr.Textbox("A boy plays in the snow.", label="Sentence")
            pj = gr.JSON(label="Pseudo-likelihood")
            gr.Button("Score", variant="primary").click(pseudo_perplexity, [pm, ps], pj, api_name="pseudo_perplexity")
        with gr.Tab("XLNet permutation masks"):
            xs = gr.Textbox("New York is a city", label="Sentence (words)")
            xo = gr.Textbox("random:0", label="Order: left-to-right, right-to-left, random:SEED, or positions 2,0,1,…")
            xk = gr.Number(2, precision=0, label="K (0 = predict all)")
            xj = gr.JSON(label="Masks")
            gr.Button("Build", variant="primary").click(permutation_masks, [xs, xo, xk], xj, api_name="permutation_masks",
                                                       concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
        with gr.Tab("Parameters & memory"):
            cm = gr.Dropdown(loadable, value="bert-base-uncased", label="Model (its real config; or type a Hub id / your folder)",
                             allow_custom_value=True)
            ch = gr.Dropdown(list(HEADS), value="base", label="Head")
            cp = gr.Dropdown(list(memory.PRECISIONS), value="mixed", label="Precision")
            co = gr.Dropdown(list(memory.OPTIMIZERS), value="adamw", label="Optimizer")
            cb = gr.Number(8, precision=0, label="Batch per GPU")
            cs = gr.Number(128, precision=0, label="Sequence length")
            cz = gr.Dropdown([0, 1, 2, 3], value=0, label="ZeRO stage")
            cd = gr.Number(1, precision=0, label="Data-parallel GPUs")
            cg = gr.Dropdown(list(memory.GPUS), value="V100 16 GB", label="GPU")
            cj = gr.JSON(label="Counts and bytes")
            gr.Button("Compute", variant="primary").click(calculator, [cm, ch, cp, co, cb, cs, cz, cd, cg], cj, api_name="calculator",
                                                          concurrency_limit=LIGHT_CONCURRENCY, concurrency_id="light")
    from core.settings import get_settings

    return demo.queue(default_concurrency_limit=get_settings().gradio_concurrency, max_size=256)


class UnknownEndpoint404:
    """ASGI middleware: a call to an API name the app does not have is a 404, not Gradio's 500.

    Gradio raises ``FnIndexInferError`` deep in its route for ``/gradio_api/call/<unknown>``, which
    reaches the client as "Internal Server Error"; this answers before the route runs.
    """

    _CALL = re.compile(r"^/gradio_api/(?:call|run)/(?:v2/)?([^/]+)/?$")

    def __init__(self, app: Any, names: frozenset[str] = API_NAMES) -> None:
        self.app, self.names = app, names

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http" and (m := self._CALL.match(scope.get("path", ""))) and m.group(1) not in self.names:
            body = json.dumps({"detail": f"No endpoint /{m.group(1)[:60]}; see /gradio_api/info."}).encode()
            await send({"type": "http.response.start", "status": 404,
                        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body})
            return
        await self.app(scope, receive, send)


def launch_options() -> dict[str, Any]:
    """What ``launch()`` needs beyond host and port: request-size limits and the 404 for unknown endpoints."""
    from starlette.middleware import Middleware

    return {"max_file_size": MAX_BODY_BYTES, "app_kwargs": {"max_body_size": MAX_BODY_BYTES, "middleware": [Middleware(UnknownEndpoint404)]}}


def main(argv: list[str] | None = None) -> None:
    import gradio as gr

    parser = argparse.ArgumentParser(description="BERT Family Explorer: Gradio widgets and API")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", os.environ.get("PORT", "7860"))))
    args = parser.parse_args(argv)
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
    build().launch(server_name=args.host, server_port=args.port, show_error=True, theme=theme, footer_links=["api"], **launch_options())


if __name__ == "__main__":
    main()
