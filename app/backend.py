"""``python -m app.backend --port PORT``: the model backend, on the machine with the GPU (see docs/deploy.md).

The front end (``python -m app.serve`` with ``BFE_BACKEND=http://host:port``) sends the pages' model calls here. This
module is the Gradio server around the handlers of :mod:`services.backend.handlers` (why Gradio: see there): three
endpoints (``call``, ``attention`` batched, ``info``), the token check, and the command line. A model call's answer
is two outputs: its JSON text and a file with its large arrays' raw ``.npy`` bytes (Gradio's own file output: the
front end downloads it from ``/gradio_api/file=``, behind the same token), written into Gradio's cache folder, where
Gradio serves it without copying; Gradio's ``delete_cache`` removes files older than :data:`BLOB_TTL_S`.
"""

from __future__ import annotations

import argparse
import hmac
import json
import logging
import os
import sys
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.errors import InvalidConfig
from services.backend.handlers import (
    LOOPBACK,
    MAX_BATCH,
    MAX_REQUEST_CHARS,
    TOKEN_ENV,
    Answer,
    attention_batch,
    call,
    info,
    preload,
)
from services.backend.wire import TOKEN_HEADER


class TokenCheck:
    """ASGI middleware: every HTTP and websocket request must carry the backend's token (``X-BFE-Token``), compared
    in constant time (:func:`hmac.compare_digest`); others get a 401 before any route runs. One exception: the
    route Gradio's own ``launch()`` calls to start its queue, which serves nothing."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token.encode()

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        # Gradio's launch() asks its own startup-events route (no header; idempotent: starts the queue) before it returns.
        if scope.get("type") in ("http", "websocket") and scope.get("path") != "/gradio_api/startup-events":
            given = dict(scope.get("headers") or []).get(TOKEN_HEADER.encode(), b"")
            if not hmac.compare_digest(given, self.token):
                if scope["type"] == "websocket":
                    await send({"type": "websocket.close", "code": 1008})
                    return
                body = json.dumps({"detail": "The model backend needs its token (X-BFE-Token)."}).encode()
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)


#: Seconds an answer's array file is kept for its caller to download (a caller fetches it at once; a page that
#: stopped waiting never does), and how often Gradio's ``delete_cache`` looks for older ones.
BLOB_TTL_S, BLOB_SWEEP_S = 300, 60
BLOB_FOLDER = "bfe-answers"


def blob_file(cache: str | Path, blob: bytes) -> str | None:
    """``blob`` written as a new file in ``cache``/:data:`BLOB_FOLDER` (None when it is empty). In Gradio's cache
    folder Gradio serves it without a copy, and its ``delete_cache`` removes it after :data:`BLOB_TTL_S` (and forgets
    it: a file removed behind Gradio's back would stay in its list of files to delete)."""
    if not blob:
        return None
    folder = Path(cache) / BLOB_FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{uuid.uuid4().hex}.npyblob"
    path.write_bytes(blob)
    return str(path)


def build(gpu: Callable[[Callable[..., Any]], Callable[..., Any]] | None = None, concurrency: int = 1) -> Any:
    """The backend's Gradio app. ``gpu`` wraps the functions that run models (``spaces.GPU`` on ZeroGPU: each call
    holds a GPU slice while it runs); ``concurrency``: how many ``call`` requests run at once (batches run one at a
    time: a batch already uses the device fully)."""
    import gradio as gr

    wrap = gpu or (lambda fn: fn)
    served_call, served_batch = wrap(call), wrap(attention_batch)

    def outputs(answer: Answer) -> tuple[str, str | None]:
        text, blob = answer
        return text, blob_file(blob_out.GRADIO_CACHE, blob)

    def call_endpoint(request: str) -> tuple[str, str | None]:
        """One model call: JSON text in; JSON text and the file of its arrays out (see services.backend.wire)."""
        return outputs(served_call(request))

    def attention_endpoint(requests: list[str]) -> list[list[Any]]:
        """Attention requests, batched across callers: as ``call``, one answer each (Gradio's batch form: a list
        per output)."""
        answers = [outputs(a) for a in served_batch(requests)]
        return [[text for text, _ in answers], [path for _, path in answers]]

    def info_endpoint() -> str:
        """Versions, device, model cache and batch sizes (JSON text)."""
        return info()

    with gr.Blocks(title="BERT Family Explorer: model backend", analytics_enabled=False,
                   delete_cache=(BLOB_SWEEP_S, BLOB_TTL_S)) as demo:
        gr.Markdown("# BERT Family Explorer: model backend\nServes the Streamlit app's model calls (`BFE_BACKEND`). "
                    "It has no pages of its own; see docs/deploy.md.")
        # Events on hidden components, not gr.api: a file output needs a component (and batching an event).
        call_in, batch_in, text_out = gr.Textbox(visible=False), gr.Textbox(visible=False), gr.Textbox(visible=False)
        blob_out = gr.File(visible=False)
        call_in.submit(call_endpoint, call_in, [text_out, blob_out], api_name="call", concurrency_limit=concurrency,
                       api_visibility="undocumented")
        batch_in.submit(attention_endpoint, batch_in, [text_out, blob_out], api_name="attention", batch=True,
                        max_batch_size=MAX_BATCH, concurrency_limit=1, api_visibility="undocumented")
        gr.api(info_endpoint, api_name="info", queue=False, api_visibility="undocumented")
    return demo


def launch(demo: Any, host: str, port: int | None, token: str | None, **options: Any) -> Any:
    """Start ``demo`` on ``host:port``; refuses (InvalidConfig) to listen beyond the loopback interface without a
    token. The token check runs before any of Gradio's routes."""
    from starlette.middleware import Middleware

    if host not in LOOPBACK and not token:
        raise InvalidConfig(f"The model backend will not listen on {host} without a token.",
                            f"Set {TOKEN_ENV} (and the same value on the front end), or listen on 127.0.0.1.")
    middleware = [Middleware(TokenCheck, token=token)] if token else []
    return demo.launch(server_name=host, server_port=port, show_error=True, ssr_mode=False, quiet=True,
                       max_file_size=MAX_REQUEST_CHARS,
                       app_kwargs={"max_body_size": MAX_REQUEST_CHARS * 2, "middleware": middleware}, **options)


def main(argv: list[str] | None = None) -> int:
    """``python -m app.backend --port PORT [--host HOST] [--preload MODEL ...]``: serve the model calls."""
    parser = argparse.ArgumentParser(description="BERT Family Explorer: the model backend (serves the pages' model "
                                     "calls on this machine's GPU; the front end sets BFE_BACKEND to its address)")
    parser.add_argument("--host", default="127.0.0.1", help="127.0.0.1 (default); another address needs "
                        f"{TOKEN_ENV}")
    parser.add_argument("--port", type=int, default=7861)
    parser.add_argument("--preload", nargs="*", default=None, metavar="MODEL",
                        help="models to load before serving (default: the bundled model)")
    parser.add_argument("--concurrency", type=int, default=1, help="model calls at once besides the batches")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="backend: %(message)s")
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if args.host not in LOOPBACK and not token:
        print(f"The model backend will not listen on {args.host} without a token: set {TOKEN_ENV}.", flush=True)
        return 2
    preload(args.preload)
    print(f"model backend on http://{args.host}:{args.port} ({json.loads(info())['device']})", flush=True)
    launch(build(concurrency=max(1, min(args.concurrency, 16))), args.host, args.port, token)
    return 0




if __name__ == "__main__":
    sys.exit(main())
