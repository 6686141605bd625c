"""Display text the pages share: a lab run's status for its stored code (``services.lab.RunStatus``, a str enum whose
members equal these codes), and a table cell as text. The database keeps the code; the pages show this text, defined once here (the
pre-training and fine-tuning labs both list runs). Plain strings as keys: the page layer imports no run machinery
for a label."""

from __future__ import annotations

#: A run's status as the run tables show it.
RUN_STATUS_TEXT = {"queued": "⏳ queued", "running": "▶ running", "finished": "✔ finished", "failed": "✖ failed",
                   "cancelled": "■ cancelled", "interrupted": "⚠ interrupted"}


def cell_text(value: object) -> str:
    """A value of a column that mixes numbers and text, as one text (Arrow takes one type per column): a fraction to
    three decimals, a missing value (None, NaN) empty, anything else as ``str`` gives it."""
    import numbers

    if value is None or (isinstance(value, numbers.Real) and value != value):
        return ""
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        return f"{float(value):.3f}"
    return str(value)
