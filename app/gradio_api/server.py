"""Serving the Gradio app: request-size limits, a 404 for unknown endpoints, the MCP server's JSON, and the command line."""

from __future__ import annotations

import argparse
import json
import os
import re
from typing import Any

#: The largest request body (and upload) the API takes: its longest input is a 128-token sentence.
MAX_BODY_BYTES = 256 * 1024
API_NAMES = frozenset({"fill_mask", "attention", "pseudo_perplexity", "permutation_masks", "calculator", "hidden_states", "cka",
                       "nearest_contexts", "attribution", "scaling_fit", "results", "lab_runs", "verdicts", "logit_lens",
                       "head_importance", "activation_patching", "sparse_attention"})


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


def mcp_json_text() -> None:
    """Make the MCP server send each tool's JSON object as JSON text.

    Gradio's MCP server (``gradio.mcp.GradioMCPServer.postprocess_output_data``) sends a dict as ``str(dict)``: a
    Python repr (``None``, ``True``, single quotes) that an assistant's JSON parser rejects. This wraps it so that
    dicts and lists go out as ``json.dumps`` and files and images as before. Gradio is pinned; the MCP test checks
    that every tool's text parses as JSON, so a Gradio that changes this method fails it.
    """
    from gradio.mcp import GradioMCPServer

    original = GradioMCPServer.postprocess_output_data
    if getattr(original, "_bfe_json", False):
        return

    def postprocess(self: Any, data: Any, root_url: str) -> list[Any]:
        if all(isinstance(item, dict | list) and not (isinstance(item, dict) and "path" in item and "meta" in item) for item in data):
            return [self.types.TextContent(type="text", text=json.dumps(item, ensure_ascii=False)) for item in data]
        return original(self, data, root_url)

    postprocess._bfe_json = True  # type: ignore[attr-defined]
    GradioMCPServer.postprocess_output_data = postprocess  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> None:
    import gradio as gr

    parser = argparse.ArgumentParser(description="BERT Family Explorer: Gradio widgets and API")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"))
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", os.environ.get("PORT", "7860"))))
    args = parser.parse_args(argv)
    theme = gr.themes.Default(font=["ui-sans-serif", "system-ui", "sans-serif"], font_mono=["ui-monospace", "monospace"])
    from core.settings import get_settings

    mcp = get_settings().gradio_mcp
    if mcp:
        mcp_json_text()
    from app.gradio_api.layout import build

    build().launch(server_name=args.host, server_port=args.port, show_error=True, theme=theme, footer_links=["api"],
                   mcp_server=mcp, **launch_options())
