"""Display text the pages share for stored codes: a lab run's status (``services.lab.RunStatus``, a str enum whose
members equal these codes). The database keeps the code; the pages show this text, defined once here (the
pre-training and fine-tuning labs both list runs). Plain strings as keys: the page layer imports no run machinery
for a label."""

from __future__ import annotations

#: A run's status as the run tables show it.
RUN_STATUS_TEXT = {"queued": "⏳ queued", "running": "▶ running", "finished": "✔ finished", "failed": "✖ failed",
                   "cancelled": "■ cancelled", "interrupted": "⚠ interrupted"}
