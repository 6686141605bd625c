"""The model backend: the pages' model calls served on another machine (a GPU box, a ZeroGPU Space).

- :mod:`services.backend.handlers`: what the backend does with a request (served by Gradio in :mod:`app.backend`), batching attention across callers;
- :mod:`services.backend.client`: the front end's side (``BFE_BACKEND``), used by the pages' model queue;
- :mod:`services.backend.wire`: what travels (JSON with ``.npy`` arrays; never pickle).
"""
