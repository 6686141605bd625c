"""The bounds a use case declares (its ``BOUNDS``) are the ones it enforces, and the ones its page and Gradio tab offer
(the layer contract, tests/repo/test_layers.py, keeps pages from writing bounds of their own)."""

from __future__ import annotations

import pytest

from core.errors import InvalidConfig
from services import objectives, parts, permutation, representations, scaling


def test_the_attribution_bounds_are_the_library_s() -> None:
    """Written out in the service so that a page does not import torch; the library's are the ones that hold."""
    from models import attribution

    assert representations.BOUNDS["steps"] == (1, attribution.MAX_STEPS)
    assert representations.BOUNDS["replaced_position"] == (0, attribution.MAX_TOKENS)


@pytest.mark.parametrize(("call", "bounds", "field"), [
    (lambda v: representations.explain("replaced_token", "google/electra-small-discriminator", "a b c", position=v),
     representations.BOUNDS, "replaced_position"),
    (lambda v: representations.explain("similarity", "x", "a", "b", steps=v), representations.BOUNDS, "steps"),
    (lambda v: representations.nearest("x", "a b", 1, k=v), representations.BOUNDS, "k"),
    (lambda v: parts.lens("x", "a [MASK]", top_k=v), parts.BOUNDS, "top_k"),
    (lambda v: parts.patch("x", "a [MASK]", "b [MASK]", "a", "b", "head", position=v), parts.BOUNDS, "position"),
    (lambda v: objectives.fill_mask("a [MASK]", ["x"], top_k=v), objectives.BOUNDS, "top_k"),
    (lambda v: permutation.segments("x", "a b c", v, 0), permutation.BOUNDS, "segment"),
    (lambda v: scaling.fit("power", [1, 2, 3, 4], [4, 3, 2, 1], bootstrap=v), scaling.BOUNDS, "bootstrap"),
])
def test_a_use_case_refuses_one_past_its_declared_bound_before_any_model_runs(call, bounds: dict, field: str) -> None:
    high = bounds[field][1]
    with pytest.raises(InvalidConfig, match=f"between .* and {high:,}"):
        call(high + 1)
