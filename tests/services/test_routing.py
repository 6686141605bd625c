"""The use cases in services/: every model function a use case runs goes to the model process (a function the runtime
does not route would load models in the web process), and a use case refuses a bad request before any model runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from core.errors import ExplorerError


class _Ran(Exception):
    """The use case reached its model call."""


def _recorder(seen: list[Any]) -> Callable[..., Any]:
    def call(fn: Any, *args: Any) -> Any:
        seen.append(fn)
        raise _Ran

    return call


def _cases() -> list[tuple[str, Callable[..., Any]]]:
    from services import attention, models, objectives, parts, permutation, representations

    mid = "bert-base-uncased"
    return [
        ("attention.run", lambda call: attention.run(mid, "The cat sat.", call=call)),
        ("attention.query_key", lambda call: attention.query_key(mid, "The cat sat.", 0, 0, call=call)),
        ("attention.rollout_row", lambda call: attention.rollout_row(mid, "The cat sat.", "", 0, call=call)),
        ("objectives.fill_mask", lambda call: objectives.fill_mask("The [MASK] sat.", [mid], call=call)),
        ("objectives.pseudo_perplexity", lambda call: objectives.pseudo_perplexity(mid, "The cat sat.", call=call)),
        ("objectives.sentence_relation", lambda call: objectives.sentence_relation(mid, "A.", "B.", call=call)),
        ("objectives.electra_round", lambda call: objectives.electra_round("g", "d", "The cat sat.", call=call)),
        ("objectives.discriminate", lambda call: objectives.discriminate("d", "The dog sat.", "The cat sat.", call=call)),
        ("objectives.generate", lambda call: objectives.generate("gpt2", "Hello", call=call)),
        ("objectives.bert_generate", lambda call: objectives.bert_generate(mid, "Hello", call=call)),
        ("objectives.masking_tokens", lambda call: objectives.masking_tokens(mid, "The cat sat.", call=call)),
        ("permutation.tokens", lambda call: permutation.tokens("New York is a city .", "xlnet-base-cased", call=call)),
        ("permutation.predictions", lambda call: permutation.predictions("x", "New York", [0, 1], 1, call=call)),
        ("permutation.self_check", lambda call: permutation.self_check("x", "New York", [0, 1], 1, call=call)),
        ("permutation.new_york", lambda call: permutation.new_york(mid, "x", "New York is", "New", "York", call=call)),
        ("permutation.segments", lambda call: permutation.segments("x", "A long text.", 8, 8, call=call)),
        ("representations.states", lambda call: representations.states(mid, "The bank.\nA bat.", call=call)),
        ("representations.nearest", lambda call: representations.nearest(mid, "The bank.", 1, call=call)),
        *[(f"representations.explain:{out}", lambda call, out=out: representations.explain(out, mid, "A [MASK].", "B.", call=call))
          for out in representations.OUTPUTS],
        ("parts.lens", lambda call: parts.lens(mid, "The [MASK] sat.", call=call)),
        ("parts.head_importance", lambda call: parts.head_importance(mid, "a b.\nc d.\ne f.\ng h.", call=call)),
        ("parts.ablate", lambda call: parts.ablate(mid, "1.1", "a b.\nc d.\ne f.\ng h.", call=call)),
        ("parts.patch", lambda call: parts.patch(mid, "a [MASK].", "b [MASK].", "x", "y", call=call)),
        ("models.load", lambda call: models.load(mid, call=call)),
    ]


@pytest.mark.parametrize(("name", "case"), _cases(), ids=[n for n, _ in _cases()])
def test_every_model_call_of_a_use_case_runs_in_the_model_process(name: str, case: Callable[..., Any]) -> None:
    from services import routing, runtime

    seen: list[Any] = []
    with pytest.raises(_Ran):
        case(_recorder(seen))
    assert len(seen) == 1 and runtime.routable(seen[0]), f"{name} runs {seen[0]!r}, which the model process does not take"
    module, attr = runtime.route(seen[0])
    assert routing._resolve(module, attr) is seen[0]  # the model process finds the same function by that name


@pytest.mark.parametrize(("case", "message"), [
    (lambda call: __import__("services.attention").attention.run("bert-base-uncased", "   ", call=call), "is empty"),
    (lambda call: __import__("services.attention").attention.run("../../etc", "The cat.", call=call), "model"),
    (lambda call: __import__("services.objectives").objectives.fill_mask("[MASK]", "a, b, c, d, e, f", call=call), "At most 5"),
    (lambda call: __import__("services.representations").representations.states("m", "a\n" * 101, call=call), "At most 100"),
    (lambda call: __import__("services.parts").parts.head_importance("m", "a", steps=99, call=call), "steps"),
    (lambda call: __import__("services.parts").parts.patch("m", "a", "b", "c", "d", unit="neuron", call=call), "unit"),
])
def test_a_bad_request_is_refused_before_any_model_runs(case: Callable[..., Any], message: str) -> None:
    seen: list[Any] = []
    with pytest.raises(ExplorerError, match=message):
        case(_recorder(seen))
    assert seen == []


def test_a_head_is_checked_against_the_model_and_its_view_is_what_the_api_sends() -> None:
    import numpy as np

    from services import attention

    weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 3, 4)).astype(np.float32)
    tokens = ("[CLS]", "a", "b", "[SEP]")
    result = attention.AttentionResult(model_id="m", tokens=tokens, raw_tokens=tokens, segments=(0, 0, 0, 0),
                                       special=(True, False, False, True), words=(None, 0, 1, None), word_texts=("a", "b"),
                                       weights=weights)
    view = attention.head(result, 1, 2)
    assert np.array_equal(view.weights, weights[1, 2]) and view.to_json()["weights"][0][0] == round(float(weights[1, 2, 0, 0]), 6)
    with pytest.raises(ExplorerError, match="layers 0–1 and heads 0–2"):
        attention.head(result, 2, 0)
