"""Start the Streamlit app the way `streamlit run app/streamlit_app.py` does, with the warm-up begun first.

    python -m app.serve [streamlit options, e.g. --server.port 8501]

`streamlit run` runs no code of ours until the first browser session opens a page, so a plain
`streamlit run` warms the model pages only after that first visit. This entry point warms them
in the server process before Streamlit's own command line takes over: torch and transformers are
imported before the server listens (about 2.5 s on 2 cores; done concurrently, the imports
would halve the speed at which the first visitors' pages are served), and the bundled model loads
in a background thread that waits while pages are being drawn (:mod:`models.warmup`). The first
student to open the Attention page finds the model loaded.
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
    from models import warmup

    try:
        # The imports before the server listens (no page can be slowed by them); the model load in the background.
        warmup.start(in_foreground=1)
    except ExplorerError as err:  # a bad BFE_* setting: the pages show it too
        print(f"Not warming up: {err}", file=sys.stderr)
    sys.argv = ["streamlit", "run", str(ROOT / "app" / "streamlit_app.py"), *(sys.argv[1:] if argv is None else argv)]
    cli.main(prog_name="streamlit")


if __name__ == "__main__":
    main()
