"""Model-side library of BERT Family Explorer.

Importing this package is cheap: torch and transformers are imported only by the modules that
run models (``models.loader`` and what builds on it), never by ``models.registry``,
``models.settings``, ``models.errors`` or ``models.device``.
"""
