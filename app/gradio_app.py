"""Gradio: each demo as an embeddable widget and a JSON API, over the same use cases as the Streamlit app.

    python -m app.gradio_app [--host 127.0.0.1] [--port 7860]

Endpoints (``gradio_client.Client(url).predict(..., api_name=...)``), each returning one JSON object; each function's
docstring in :mod:`app.gradio_api.endpoints` gives its arguments and keys, and the MCP tools are the same functions:

- ``/fill_mask``, ``/pseudo_perplexity``: the pre-training objectives (``services.objectives``)
- ``/attention``: one head's weights and statistics (``services.attention``)
- ``/permutation_masks``: XLNet's two-stream masks for an order (``services.permutation``)
- ``/calculator``: parameters, training memory and the largest batch on a GPU (``services.calculator``)
- ``/hidden_states``, ``/cka``, ``/nearest_contexts``, ``/attribution``: representations (``services.representations``)
- ``/scaling_fit``: a scaling law with bootstrap intervals (``services.scaling``)
- ``/results``: the published results with their sources (``services.results``)
- ``/lab_runs``, ``/verdicts``: the labs' finished runs and the ablations' verdicts, read-only (``services.lab``,
  ``services.lab.experiments``)
- ``/logit_lens``, ``/head_importance``, ``/activation_patching``: which parts of a model matter (``services.parts``)

The package :mod:`app.gradio_api` holds the endpoints (JSON in, one use case, JSON out; a library error becomes a
``gradio.Error`` with its message and hint, never a traceback), the page (``layout.build``) and the server (body-size
limits, a 404 for unknown endpoints, the MCP server's JSON). The queue runs at most ``BFE_GRADIO_CONCURRENCY``
(default 2) model calls at a time; the model-free endpoints share a second queue of ``LIGHT_CONCURRENCY``, so a flood
of cheap calls never starves the model calls.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
os.environ.setdefault("GRADIO_ANALYTICS_ENABLED", "False")

from app.gradio_api import endpoints  # noqa: E402
from app.gradio_api.endpoints import *  # noqa: E402, F403 (the endpoints, named once in endpoints.__all__)
from app.gradio_api.layout import LIGHT_CONCURRENCY, build  # noqa: E402
from app.gradio_api.server import API_NAMES, MAX_BODY_BYTES, UnknownEndpoint404, launch_options, main, mcp_json_text  # noqa: E402
from services.calls import jsonable  # noqa: E402

__all__ = [
    *endpoints.__all__,
    "API_NAMES",
    "LIGHT_CONCURRENCY",
    "MAX_BODY_BYTES",
    "UnknownEndpoint404",
    "build",
    "jsonable",
    "launch_options",
    "main",
    "mcp_json_text",
]

if __name__ == "__main__":
    main()
