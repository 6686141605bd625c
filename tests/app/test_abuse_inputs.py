"""Adversarial probes of the model-free inputs: absurd calculator configs and XLNet orders, and the
request limits of the Streamlit server. Each asserts the specific error and a time bound that the
old quadratic or per-tensor code broke (80 s reruns, half a minute per order, MemoryError)."""

from __future__ import annotations

import time
import tomllib

import pytest

from analysis import calculator, memory
from analysis.params import LIMITS, MAX_PARAMETERS, count_parameters, parameter_breakdown
from core.errors import InvalidConfig, InvalidOrder, UnsupportedArchitecture
from models import permutation as P
from tests.helpers import ENTRY, ROOT

BERT = {"model_type": "bert", "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 1000}


def _fast(fn, bound: float = 1.0):
    t0 = time.perf_counter()
    out = fn()
    assert time.perf_counter() - t0 < bound, f"took {time.perf_counter() - t0:.2f} s"
    return out


def test_albert_with_a_thousand_groups_of_a_hundred_layers_counts_in_milliseconds() -> None:
    cfg = {"model_type": "albert", "num_hidden_layers": 1000, "num_hidden_groups": 1000, "inner_group_num": 100,
           "hidden_size": 64, "num_attention_heads": 4, "intermediate_size": 256, "embedding_size": 32, "vocab_size": 1000}
    bd = _fast(lambda: parameter_breakdown(cfg, "pretraining"), 0.1)
    one = count_parameters({**cfg, "num_hidden_layers": 1, "num_hidden_groups": 1, "inner_group_num": 1})
    layer = count_parameters({**cfg, "num_hidden_layers": 2, "num_hidden_groups": 2, "inner_group_num": 1}) - one
    assert count_parameters(cfg) == one + (1000 * 100 - 1) * layer  # 100,000 stored layers, counted by arithmetic
    assert bd.tensor_count > 1_000_000 and len(bd.tensors) < 100


@pytest.mark.parametrize("change", [{"num_hidden_layers": 10**7}, {"hidden_size": 10**6, "num_attention_heads": 1},
                                    {"vocab_size": 10**9}, {"intermediate_size": 10**8}, {"max_position_embeddings": 10**8},
                                    {"type_vocab_size": 10**5}])
def test_configs_past_the_sanity_bounds_are_refused_in_milliseconds(change) -> None:
    with pytest.raises(InvalidConfig, match="sanity bounds"):
        _fast(lambda: count_parameters({**BERT, **change}), 0.05)


@pytest.mark.parametrize("value", [float("inf"), float("nan"), 1e400, True, "12", [12], 2.5, -3, 0])
def test_sizes_that_are_not_positive_whole_numbers_are_refused(value) -> None:
    with pytest.raises((InvalidConfig, UnsupportedArchitecture)) as info:
        count_parameters({**BERT, "num_hidden_layers": value})
    assert " at 0x" not in str(info.value)


def test_every_limit_is_the_pages_input_limit_and_one_past_it_is_refused() -> None:
    from streamlit.testing.v1 import AppTest

    from services.calculator_form import FORM_FIELDS

    assert {limit for _, _, limit, _, _ in FORM_FIELDS.values()} == set(LIMITS)  # every bound is a form field's maximum
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.switch_page("views/calculator.py")
    at.query_params["sz_preset"] = "albert-base-v2"  # ALBERT's form shows every field
    at.run()
    assert not at.exception
    for field, (_, lo, limit, _, _) in FORM_FIELDS.items():
        box = at.number_input(key=f"sz_{field}")
        assert (box.min, box.max) == (lo, LIMITS[limit]), field
    keys = {"vocabulary size": "vocab_size", "hidden size": "hidden_size", "layers": "num_hidden_layers",
            "feed-forward size": "intermediate_size", "positions": "max_position_embeddings", "token types": "type_vocab_size"}
    for name, key in keys.items():
        with pytest.raises(InvalidConfig, match=name):
            count_parameters({**BERT, key: LIMITS[name] + 1})


def test_the_largest_config_the_page_allows_answers_within_a_second() -> None:
    """Every field at its page maximum: refused or computed, always under a second, never a MemoryError."""
    worst = {"model_type": "albert", "vocab_size": LIMITS["vocabulary size"], "hidden_size": 1024, "num_attention_heads": 16,
             "intermediate_size": LIMITS["feed-forward size"], "max_position_embeddings": LIMITS["positions"],
             "type_vocab_size": LIMITS["token types"], "embedding_size": 1024, "num_hidden_layers": LIMITS["layers"],
             "num_hidden_groups": LIMITS["hidden groups"], "inner_group_num": LIMITS["layers per group"]}
    with pytest.raises(InvalidConfig, match="10\\^13"):
        _fast(lambda: parameter_breakdown(worst, "masked-lm"))
    allowed = {**worst, "num_hidden_groups": 1, "inner_group_num": 1}  # sharing: deep but small enough to count
    bd = _fast(lambda: parameter_breakdown(allowed, "masked-lm"))
    assert 0 < bd.total < MAX_PARAMETERS

    def everything():
        setup = memory.TrainingSetup(optimizer="adafactor").validate()
        memory.training_memory(bd, 100_000, 1_000_000, setup)
        memory.max_batch_size(bd, "A100 80 GB", 1_000_000, setup)
        calculator.params_treemap(bd)

    _fast(everything)


# ------------------------------------------------------------------------------------------ orders
def test_a_thirty_thousand_position_order_is_refused_at_once() -> None:
    text = ",".join(str(i) for i in range(30_000))
    with pytest.raises(InvalidOrder, match="characters long"):
        _fast(lambda: P.parse_order(text, 5), 0.05)
    with pytest.raises(InvalidOrder, match="30,000 positions"):
        _fast(lambda: P.check_order(list(range(30_000)), 5), 0.05)


def test_the_order_check_is_linear_at_its_limit() -> None:
    n = P.MAX_ORDER_LENGTH
    assert _fast(lambda: P.check_order(list(range(n))[::-1], n), 0.05) == list(range(n))[::-1]
    bad = list(range(n))
    bad[5] = 7
    with pytest.raises(InvalidOrder, match=r"repeated: \[7\]; missing: \[5\]"):
        _fast(lambda: P.check_order(bad, n), 0.05)


@pytest.mark.parametrize(("text", "message"), [
    ("9" * 5000, "characters long|not a position"), ("1" * 7, "not a position"), ("0,1,²", "not a position"),
    ("0,1,٣", "not a position"), ("0, 0, 1", "repeated"), ("-1, 0, 1", "out of range"), ("", "empty"),
])
def test_malformed_orders_get_a_message_not_an_exception(text: str, message: str) -> None:
    with pytest.raises(InvalidOrder, match=message):
        _fast(lambda: P.parse_order(text, 3), 0.05)


@pytest.mark.parametrize("n", [0, -1, 10**9, True, 2.5])
def test_absurd_order_lengths_are_refused(n) -> None:
    with pytest.raises(InvalidOrder):
        _fast(lambda: P.make_order("random", n), 0.05)


def test_orders_with_booleans_or_fractions_are_refused() -> None:
    for order in ([True, False], [0.5, 1], [0, 1.0000001]):
        with pytest.raises(InvalidOrder, match="whole numbers"):
            P.check_order(order, 2)


# ----------------------------------------------------------------------------- Streamlit's limits
def test_streamlit_request_limits_fit_what_the_app_needs() -> None:
    from analysis import results_db, scaling

    server = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())["server"]
    largest_upload_mb = max(results_db.MAX_IMPORT_BYTES, scaling.MAX_CSV_BYTES) / 2**20
    assert largest_upload_mb <= server["maxUploadSize"] <= 2 * largest_upload_mb + 1
    assert 10 <= server["maxMessageSize"] <= 64  # enough for a 512-token heatmap, far below the 200 MB default


def test_the_server_neither_collects_nor_watches_sources_after_each_run() -> None:
    """Both cost every session CPU under the GIL on each rerun (bench/classroom.py: a class of 30 waited 3.7x the
    floor on its first click after opening the Attention page, 85% of it in Streamlit's source watcher)."""
    from streamlit import config

    settings = tomllib.loads((ROOT / ".streamlit" / "config.toml").read_text())
    assert settings["server"]["fileWatcherType"] == "none" and settings["runner"]["postScriptGC"] is False
    for option in ("server.fileWatcherType", "runner.postScriptGC"):  # names this Streamlit still reads
        config.get_option(option)


# ------------------------------------------------------------ library entry points, wrong types
def _entry_points():
    from analysis import results_db as db
    from analysis import scaling
    from core import registry

    return {
        "count_parameters(None)": lambda: count_parameters(None),
        "count_parameters([1, 2])": lambda: count_parameters([1, 2]),
        "training_memory('abc')": lambda: memory.training_memory("abc"),
        "training_memory(None)": lambda: memory.training_memory(None),
        "results_frame(models=5)": lambda: db.results_frame(models=5),
        "add_result(model=object())": lambda: db.add_result(db.NewResult(model=object(), task="RTE", metric="acc", split="dev", value=5,
                                                            source="X et al. 2020, y")),
        "import_csv(None)": lambda: db.import_csv(None),
        "permutation_inputs(None)": lambda: P.permutation_inputs(None),
        "permutation_inputs(targets=['x'])": lambda: P.permutation_inputs([0, 1], targets=["x"]),
        "registry.get(5)": lambda: registry.get(5),
        "scaling.fit(None)": lambda: scaling.fit("power", None, None),
    }


@pytest.mark.parametrize("name", list(_entry_points()))
def test_library_entry_points_raise_the_projects_errors_for_wrong_types(name: str) -> None:
    from core.errors import ExplorerError

    with pytest.raises(ExplorerError) as info:
        _entry_points()[name]()
    assert info.value.hint or info.value.message
    assert " at 0x" not in str(info.value) and "/tmp" not in str(info.value)
