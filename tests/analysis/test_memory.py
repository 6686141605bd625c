"""Memory, batch-fit and compute calculators: published examples, hand-computed cases, a real AdamW step."""

from __future__ import annotations

import math

import pytest

from analysis import memory
from analysis.memory import GiB, TrainingSetup, max_batch_size, model_state_bytes, training_memory
from analysis.params import parameter_breakdown
from core import registry
from core.errors import InvalidConfig
from tests.helpers import ROOT

TINY_BERT = {"model_type": "bert", "vocab_size": 99, "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 4,
             "intermediate_size": 37, "max_position_embeddings": 64}


def test_the_slides_headline_16_bytes_per_parameter_is_14_90_gib() -> None:
    m = training_memory(10**9)  # mixed precision Adam, the defaults
    assert m.components == {"weights": 2 * 10**9, "gradients": 2 * 10**9, "master weights (fp32)": 4 * 10**9,
                            "optimizer states": 8 * 10**9}
    assert f"{m.total / GiB:.2f}" == "14.90"


@pytest.mark.parametrize(("stage", "gb"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_papers_example_7_5b_parameters_on_64_gpus(stage: int, gb: float) -> None:
    """ZeRO paper Figure 1: Ψ = 7.5B, N_d = 64, K = 12 → 120 / 31.4 / 16.6 / 1.9 GB per GPU."""
    m = training_memory(7.5e9, setup=TrainingSetup(zero_stage=stage, data_parallel=64))
    assert round(m.total / 1e9, 1) == gb


def test_tensor_parallelism_divides_model_states() -> None:
    one = training_memory(7.5e9).total
    eight = training_memory(7.5e9, setup=TrainingSetup(tensor_parallel=8)).total
    assert eight == pytest.approx(one / 8, rel=1e-9)


@pytest.mark.parametrize(("optimizer", "precision", "per_param"), [
    ("sgd", "fp32", 8), ("momentum", "fp32", 12), ("adamw", "fp32", 16), ("lion", "fp32", 12), ("adam8bit", "fp32", 10),
    ("sgd", "mixed", 8), ("adamw", "mixed", 16), ("lion", "mixed", 12), ("adam8bit", "mixed", 10),
    ("adamw", "bf16", 8), ("lion", "bf16", 6), ("momentum", "bf16", 6),
])
def test_bytes_per_parameter_by_optimizer_and_precision(optimizer: str, precision: str, per_param: int) -> None:
    assert training_memory(10**6, setup=TrainingSetup(precision=precision, optimizer=optimizer)).total == per_param * 10**6


def test_adafactor_state_is_factored_per_matrix() -> None:
    bd = parameter_breakdown(TINY_BERT)
    states = model_state_bytes(bd, TrainingSetup(precision="fp32", optimizer="adafactor")).components["optimizer states"]
    expected = 4 * sum((t.shape[0] + t.shape[1]) * t.copies if len(t.shape) == 2 else t.numel for t in bd.tensors)
    assert states == expected < 4 * bd.total


def test_activation_formula_on_a_hand_computed_case() -> None:
    """s=2048, b=1, h=4096, a=32 (the paper's GPT-3-like layer): s·b·h·(34 + 5·a·s/h) bytes."""
    s, b, h, a = 2048, 1, 4096, 32
    assert memory.activation_bytes_per_layer(s, b, h, a) == s * b * h * (34 + 5 * a * s // h) == 956_301_312
    # selective recomputation and FlashAttention both drop the 5·a·s²·b term
    assert memory.activation_bytes_per_layer(s, b, h, a, setup=TrainingSetup(recompute="selective")) == 34 * s * b * h
    assert memory.activation_bytes_per_layer(s, b, h, a, setup=TrainingSetup(flash_attention=True)) == 34 * s * b * h
    assert memory.activation_bytes_per_layer(s, b, h, a, setup=TrainingSetup(recompute="full")) == 2 * s * b * h
    t = 8
    tp = memory.activation_bytes_per_layer(s, b, h, a, setup=TrainingSetup(tensor_parallel=t))
    assert tp == s * b * h * 10 + (24 * s * b * h + 5 * a * s * s * b) // t  # 10 + 24/t + 5as/(ht)
    sp = memory.activation_bytes_per_layer(s, b, h, a, setup=TrainingSetup(tensor_parallel=t, sequence_parallel=True))
    assert sp == s * b * h * (34 + 5 * a * s // h) // t


def test_training_memory_adds_activations_and_logits_for_a_real_config() -> None:
    bd = parameter_breakdown(registry.get("bert-base-uncased").config, "masked-lm")
    m = training_memory(bd, 8, 128)
    assert m.components["activations"] == 12 * 128 * 8 * 768 * (34 + 5 * 12 * 128 // 768)
    assert m.components["logits (fp32, for the loss)"] == 4 * 128 * 8 * 30522
    assert "activations" not in m.exact and "weights" in m.exact
    assert training_memory(bd, 16, 128).total > m.total


def test_fp32_adamw_state_matches_a_real_optimizer_step() -> None:
    """One AdamW step on a tiny BERT: params, grads, exp_avg/exp_avg_sq and step counters, byte for byte."""
    from models.measure import adamw_step_bytes

    for head in ("base", "pretraining"):
        measured = adamw_step_bytes(TINY_BERT, head)
        predicted = model_state_bytes(parameter_breakdown(TINY_BERT, head), TrainingSetup(precision="fp32")).components
        assert {k: measured[k] for k in predicted} == predicted
        assert measured["parameters"] == parameter_breakdown(TINY_BERT, head).total


def test_inference_memory_has_a_kv_cache_only_for_decoders() -> None:
    gpt = memory.inference_memory(registry.get("gpt2").config, 4, 1024, "fp16")
    assert gpt.components["KV cache"] == 2 * 12 * 4 * 1024 * 768 * 2
    assert gpt.components["weights"] == registry.get("gpt2").parameters * 2
    assert "KV cache" not in memory.inference_memory(registry.get("bert-base-uncased").config, 4, 128).components


def test_max_batch_size_is_the_largest_that_fits() -> None:
    bd = parameter_breakdown(registry.get("bert-base-uncased").config, "pretraining")
    setup = TrainingSetup(precision="fp32")
    fit = max_batch_size(bd, memory.custom_gpu(12), 128, setup)
    cap = 12 * GiB - GiB
    assert fit.max_batch > 0
    assert training_memory(bd, fit.max_batch, 128, setup).total <= cap < training_memory(bd, fit.max_batch + 1, 128, setup).total
    # longer sequences fit fewer; a bigger GPU fits more; BERT-large at 512 tokens on a small card fits none
    assert max_batch_size(bd, memory.custom_gpu(12), 512, setup).max_batch < fit.max_batch
    assert max_batch_size(bd, "A100 80 GB", 128, setup).max_batch > fit.max_batch
    large = parameter_breakdown(registry.get("bert-large-uncased").config, "pretraining")
    assert max_batch_size(large, memory.custom_gpu(6), 512, setup).max_batch == 0


def test_flops_time_and_cost() -> None:
    flops = memory.training_flops(110e6, 1e6 * 256 * 512)
    assert flops == 6 * 110e6 * 1e6 * 256 * 512
    assert memory.pf_days(1e15 * 86400) == 1
    secs = memory.training_time(8 * 1e15, "A100 80 GB", n_gpus=8, utilisation=0.5)
    assert secs == pytest.approx(8e15 / (8 * 312e12 * 0.5))
    assert memory.training_cost(3600, 8, 2.0) == 16.0
    bd = parameter_breakdown(registry.get("gpt2").config)
    assert memory.forward_flops_per_token(bd, 1024) == 2 * bd.non_embedding + 2 * 12 * 1024 * 768


@pytest.mark.parametrize(("call", "words"), [
    (lambda: training_memory(0), "between"),
    (lambda: training_memory(-5), "between"),
    (lambda: training_memory(1.5), "whole number"),
    (lambda: training_memory(10**15), "between"),
    (lambda: training_memory(registry.get("bert-base-uncased").config, 8, 1024), "longer than the model's 512 positions"),
    (lambda: training_memory(registry.get("bert-base-uncased").config, 0, 128), "batch size"),
    (lambda: training_memory(10**9, 8, 128), "need the model.s shape"),
    (lambda: training_memory(10**9, setup=TrainingSetup(zero_stage=4)), "ZeRO stage"),
    (lambda: training_memory(10**9, setup=TrainingSetup(optimizer="adagrad")), "Unknown optimizer"),
    (lambda: training_memory(10**9, setup=TrainingSetup(data_parallel=0)), "data parallel"),
    (lambda: training_memory(10**9, setup=TrainingSetup(sequence_parallel=True)), "needs tensor parallelism"),
    (lambda: memory.max_batch_size(registry.get("gpt2").config, "Z100", 128), "Unknown GPU"),
    (lambda: memory.custom_gpu(-1), "GPU memory"),
    (lambda: memory.training_time(1e18, "T4 16 GB", utilisation=1.5), "fraction"),
    (lambda: memory.training_flops(0, 1e9), "positive"),
])
def test_bad_inputs_raise_clear_errors(call, words: str) -> None:
    with pytest.raises(InvalidConfig, match=words):
        call()


def test_every_gpu_and_optimizer_has_a_source() -> None:
    for opt in memory.OPTIMIZERS.values():
        assert opt.source
    assert all(g.memory_bytes > 10 * GiB and g.peak_16bit > g.peak_fp32 for g in memory.GPUS.values())
    assert {"slides", "zero", "korthikanti", "kaplan", "bert_cost"} <= set(memory.SOURCES)
    assert math.isclose(memory.BERT_COST_EXAMPLE[0]["slides_usd"], 500)


@pytest.mark.parametrize("readme", ["data/results/README.md", "data/reference/README.md"])
def test_the_data_readmes_point_only_to_data_that_exists(readme: str) -> None:
    import re
    folder = (ROOT / readme).parent
    named = set(re.findall(r"`([^`<>]+\.(?:csv|json|py))`", (ROOT / readme).read_text(encoding="utf-8")))
    assert named
    for name in named:
        assert (folder / name).exists() or (ROOT / name).exists(), f"{readme} names {name}, which does not exist"
