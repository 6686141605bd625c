"""The foundation of BERT Family Explorer: what every layer above may use, and which imports nothing of ours.

- :mod:`core.errors`: the exception hierarchy (every error a user can cause, with a hint).
- :mod:`core.settings`: the ``BFE_*`` settings, declared once and read from the environment.
- :mod:`core.registry`: the family catalog (``data/catalog.json``) as frozen dataclasses.

No torch, no streamlit, no SQLAlchemy: importing this package costs milliseconds.
"""
