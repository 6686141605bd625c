"""Start the Streamlit app the way `streamlit run app/streamlit_app.py` does, with the model process started first.

    python -m app.serve [streamlit options, e.g. --server.port 8501]

`streamlit run` runs no code of ours until the first browser session opens a page, so a plain
`streamlit run` starts the model process (:mod:`services.runtime`) only after that first visit. This
entry point spawns it before Streamlit's own command line takes over (a fork and exec: milliseconds);
it binds its socket and waits. Once the first page is drawn (or a page asks for a model) it imports
torch and transformers and loads the bundled model on a core of its own. The web process never
imports torch for the pages' model calls, so the server answers health and draws Home as fast as a
bare Streamlit app, and a student opening the Attention page a few seconds later finds the model loaded.

With ``BFE_MODEL_PROCESS=0`` the model calls run in this process: then torch and transformers are
imported here before the server listens, and the model loads in a background thread that waits while
pages are being drawn (:mod:`models.warmup`).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main(argv: list[str] | None = None) -> None:
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from streamlit.web import cli

    from core.errors import ExplorerError
    from core.settings import get_settings
    from services.executor import executor

    try:
        said = executor().launch(get_settings().warmup)
        if said:
            print(said, flush=True)
    except ExplorerError as err:  # a bad BFE_* setting: the pages show it too
        print(f"Not warming up: {err}", file=sys.stderr)
    sys.argv = ["streamlit", "run", str(ROOT / "app" / "streamlit_app.py"), *(sys.argv[1:] if argv is None else argv)]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
