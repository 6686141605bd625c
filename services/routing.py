"""What runs where: the model functions the pages may run in the model process (:data:`ROUTED`), those only a model
backend serves beside them (:data:`BACKEND_ONLY`), one lookup for both (:func:`served`), and how an exception
crosses a process or the network (:func:`pack_error`, :func:`unpack_error`).

One table for the model process (:mod:`services.runtime`) and the model backend (:mod:`services.backend`): both sides
of each check it, and a function missing here runs in the caller's process or is refused.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any

from core.errors import ModelProcessFailed


def pack_error(err: BaseException) -> tuple[str, str, tuple[Any, ...], dict[str, Any], str]:
    """An exception as (module, class, args, attributes, text): many of ours take other arguments than their
    ``args`` (``UnknownModel(model_id, suggestions)``), so pickle's ``cls(*args)`` would fail to rebuild them."""
    attrs = {k: v for k, v in vars(err).items() if isinstance(v, str | int | float | bool | list | tuple | type(None))}
    return type(err).__module__, type(err).__qualname__, tuple(a for a in err.args if isinstance(a, str | int | float)), attrs, str(err)


def unpack_error(packed: tuple[str, str, tuple[Any, ...], dict[str, Any], str]) -> BaseException:
    """The exception again, as its own class where this process has that class loaded without importing anything
    heavy (our ``core.errors``, Python's built-ins), else as :class:`~core.errors.ModelProcessFailed`."""
    module, name, args, attrs, text = packed
    cls = getattr(sys.modules.get(module), name, None) if module in ("builtins", "core.errors") else None
    if isinstance(cls, type) and issubclass(cls, BaseException):
        err = cls.__new__(cls)
        err.args = args
        for k, v in attrs.items():
            setattr(err, k, v)
        return err
    return ModelProcessFailed(f"The model process failed: {name}: {text[:500]}")


# What the pages may run in the model process: read-only model functions of the library that take model ids and
# plain values and return plain values (numpy arrays, dataclasses, pandas frames: nothing that needs torch to
# unpickle). Checked on both sides: the client runs anything else in its own process, the server refuses it.
ROUTED: dict[str, frozenset[str]] = {
    "models.attention": frozenset({"extract_attention"}),
    "models.neuron_view": frozenset({"query_key"}),
    "models.representations": frozenset({"hidden_states", "nearest_contexts"}),
    "models.attribution": frozenset({"similarity", "fill_mask", "sentence_relation", "replaced_token"}),
    "models.objectives": frozenset({"fill_mask", "pseudo_log_likelihood", "sentence_relation", "electra_round",
                                    "discriminate", "generate", "bert_generate", "word_tokens"}),
    "models.permutation": frozenset({"predict_last_k", "self_check", "new_york", "segment_recurrence", "tokens_for"}),
    "models.loader": frozenset({"load_summary"}),
    "models.interventions": frozenset({"logit_lens", "head_importance", "pruning_curve", "activation_patching",
                                       "ablate_heads"}),
}


def _resolve(module: str, name: str) -> Any:
    """The routed function ``module.name`` (:data:`ROUTED`), or :class:`~core.errors.ModelProcessFailed`."""
    if name not in ROUTED.get(module, ()):
        raise ModelProcessFailed(f"{str(module)[:80]}.{str(name)[:80]} is not a model function the pages may call.")
    return getattr(importlib.import_module(module), name)


def route(fn: Any) -> tuple[str, str] | None:
    """(public module, name) under which ``fn`` is one of :data:`ROUTED`, or None. Looked up by what the public module
    exports, not by ``fn.__module__``: a package keeps its functions in submodules (``models.interventions.lens``) and
    names them in its ``__init__``, and the model process imports the public name."""
    name = getattr(fn, "__name__", None)
    for module, names in ROUTED.items():
        if name in names and getattr(sys.modules.get(module), name, None) is fn:
            return module, name
    return None


def routable(fn: Any) -> bool:
    """Whether ``fn`` runs in the model process: one of :data:`ROUTED`."""
    return route(fn) is not None


#: Functions only a model backend serves beside :data:`ROUTED`: what a front end without models asks about them
#: (which catalog models are here, whether an id can be loaded here, the lab's checkpoints in the backend's folder).
BACKEND_ONLY: dict[str, frozenset[str]] = {
    "models.loader": frozenset({"catalog_availability", "can_locate"}),
    "models.inspection": frozenset({"inspect"}),
    "models.locate": frozenset({"run_steps"}),
    "services.lab.checkpoints": frozenset({"trained_models_here", "run_info_here"}),
}


def served(fn: Any) -> tuple[str, str] | None:
    """(public module, name) under which a model backend serves ``fn``: one of :data:`ROUTED` or :data:`BACKEND_ONLY`,
    looked up as :func:`route` does (by what the public module exports), or None."""
    name = getattr(fn, "__name__", None)
    for table in (ROUTED, BACKEND_ONLY):
        for module, names in table.items():
            if name in names and getattr(sys.modules.get(module), name, None) is fn:
                return module, name
    return None


def backend_serves(module: str, name: str) -> bool:
    """Whether ``module.name`` is a function a model backend serves."""
    return name in ROUTED.get(module, ()) or name in BACKEND_ONLY.get(module, ())
