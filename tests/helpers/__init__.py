"""What several test modules share, in one place (tests import helpers from here, never from one another):

- :mod:`tests.helpers.tiny`: the tiny checkpoints of every architecture the suite builds for itself;
- :mod:`tests.helpers.servers`: the app started as the README starts it, headless Chromium, free ports, waiting;
- :mod:`tests.helpers.pages`: a page drawn by Streamlit's AppTest and the text it shows;
- :mod:`tests.helpers.lab`: the labs' queue seeded with finished experiments, and a run's status;
- :mod:`tests.helpers.results`: rows and CSV files for the results database, and counting what it holds;
- :mod:`tests.helpers.postgres`: a throwaway PostgreSQL server from Debian's binaries;
- :mod:`tests.helpers.db_stress`: writer processes for the database's concurrency and kill tests;
- :mod:`tests.helpers.crawl`: the state crawl's engine (every widget of every page);
- :mod:`tests.helpers.container`: the container image built and started without Docker;
- :mod:`tests.helpers.verdicts`: simulated arms with known seed and test-item noise.

Fixtures live in ``tests/conftest.py`` (pytest finds them there); test modules are laid out like the packages they
test (``tests/models/pretrain/`` tests ``models/pretrain/``), plus ``tests/deploy/`` (the deployments) and
``tests/repo/`` (the repository's own contracts: layers, docs)."""

from __future__ import annotations

from pathlib import Path

#: The repository's root.
ROOT = Path(__file__).resolve().parents[2]
#: The Streamlit entry script, as ``python -m app.serve`` runs it.
ENTRY = str(ROOT / "app" / "streamlit_app.py")

#: Lines a test wants in the run's summary (how many states a crawl tried, how many cases a fuzzer ran): printed by
#: conftest.py's ``pytest_terminal_summary``.
SUMMARY: list[str] = []
