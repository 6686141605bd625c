"""How a use case runs a model function, and how its result becomes JSON.

A use case in ``services/`` validates its whole request, then runs the library's model functions through ``call``:
:func:`direct` (the Gradio app, the CLI, tests) or the Streamlit app's ``app.ui.model_call``, which queues the call,
computes identical calls in flight once and runs ``models.*`` functions in the model process. The use case does not
know which: the decisions (what is valid, what is computed, what comes back) live once, here, for both front ends.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Callable
from typing import Any

#: ``call(fn, *args) -> fn(*args)``, however it gets there.
Call = Callable[..., Any]


def direct(fn: Callable[..., Any], *args: Any) -> Any:
    """Run ``fn(*args)`` here and now."""
    return fn(*args)


def jsonable(value: Any) -> Any:
    """``value`` with numpy numbers and arrays, tuples, dates and DataFrames made JSON, and NaN/inf as null
    (JSON has no NaN; a client would otherwise receive an invalid document)."""
    import numpy as np

    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return jsonable(value.tolist())
    if isinstance(value, np.generic):
        return jsonable(value.item())
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dt.datetime | dt.date):
        return value.isoformat()
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a DataFrame: its records
        return jsonable(value.to_dict("records"))
    return value
