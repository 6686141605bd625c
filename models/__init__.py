"""Model-side library of BERT Family Explorer.

Importing this package is cheap: torch and transformers are imported only by the modules that
run models (``models.loader`` and what builds on it), never by ``core.registry``,
``core.settings``, ``core.errors`` or ``models.device``.
"""
