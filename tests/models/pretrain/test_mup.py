"""μP for the lab's BERT (Tensor Programs V): its rules, its coordinate check, the μTransfer preset's plan, its
verdict on synthetic grids and from stored runs, and the slide's figure redrawn."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from analysis.verdicts import labels as L
from analysis.verdicts.transfer import transfer_verdict
from core.errors import InvalidConfig, InvalidData
from models.pretrain.config import TrainConfig

TINY = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=3, lr=3e-3, corpus_lines=200)


def test_the_parametrisation_is_validated_and_sp_stays_the_default() -> None:
    assert TrainConfig().parametrisation == "sp"
    with pytest.raises(InvalidConfig, match="parametrisation"):
        replace(TINY, parametrisation="ntk").validate()
    with pytest.raises(InvalidConfig, match="μP"):
        replace(TINY, objective="electra", parametrisation="mup").validate()
    with pytest.raises(InvalidConfig, match="mup_base_width"):
        replace(TINY, parametrisation="mup", mup_base_width=8).validate()
    replace(TINY, objective="mlm+sop", parametrisation="mup").validate()


def _model(cfg: TrainConfig, seed: int = 0):
    import torch

    from models.pretrain.model import build_model
    from models.pretrain.mup import apply_mup

    torch.manual_seed(seed)
    model = build_model(replace(cfg, dropout=0.0), 128, SimpleNamespace(pad_token_id=0))
    return apply_mup(model, cfg) if cfg.parametrisation == "mup" else model


def test_mup_at_its_base_width_is_sp_and_wider_follows_table_3() -> None:
    import torch

    from models.pretrain import mup

    ids = torch.randint(1, 128, (2, 8), generator=torch.Generator().manual_seed(1))
    sp, same = _model(TINY).eval(), _model(replace(TINY, parametrisation="mup", mup_base_width=32)).eval()
    assert torch.allclose(sp(input_ids=ids).logits, same(input_ids=ids).logits, atol=1e-6)

    wide = replace(TINY, hidden=128, ffn=256, parametrisation="mup", mup_base_width=32)  # m = 4
    m_sp, m_mup = _model(replace(wide, parametrisation="sp")), _model(wide)
    q_sp = m_sp.bert.encoder.layer[0].attention.self.query.weight
    q_mup = m_mup.bert.encoder.layer[0].attention.self.query.weight
    assert torch.allclose(q_mup, q_sp / 2)  # std ÷ √m, the same draw
    assert torch.equal(m_mup.bert.embeddings.word_embeddings.weight, m_sp.bert.embeddings.word_embeddings.weight)
    attn = m_mup.bert.encoder.layer[0].attention.self
    assert attn.scaling == pytest.approx(math.sqrt(16) / 64)  # 1/d × √d_base, not 1/√64
    with torch.no_grad():  # the 1/d scale is the one attention uses: changing it changes the output
        before = m_mup.eval()(input_ids=ids).logits.clone()
        attn.scaling = 64 ** -0.5
        assert not torch.allclose(before, m_mup(input_ids=ids).logits)
    assert m_mup.cls.predictions.decoder.weight is m_mup.bert.embeddings.word_embeddings.weight  # still tied
    groups = mup.param_groups([m_mup], wide, weight_decay=0.01)
    kinds = mup.classify(m_mup, wide)
    hidden = {id(p) for n, p in m_mup.named_parameters() if kinds[n] == "hidden"}
    assert {id(p) for p in groups[0]["params"]} == hidden and len(hidden) == 7  # Q, K, V, attn out, FFN ×2, MLM transform
    assert groups[0]["lr"] == pytest.approx(3e-3 / 4) and groups[0]["weight_decay"] == pytest.approx(0.04)
    assert groups[1]["lr"] == 3e-3 and sum(len(g["params"]) for g in groups) == len(list(m_mup.parameters()))
    with pytest.raises(InvalidConfig):
        mup.apply_mup(SimpleNamespace(config=SimpleNamespace(model_type="gpt2")), wide)


def test_coordinate_check_mup_stays_flat_across_widths_sp_grows() -> None:
    """Yang et al. 2022, Figure 5's check: after 3 Adam steps at one rate, every recorded layer's mean |activation| at
    width 256 is within 2× of width 32's under μP; under SP at least one layer is more than 4× larger."""
    from models.pretrain.mup import coord_check, width_ratios

    widths = (32, 64, 128, 256)
    mup = width_ratios(coord_check(widths, "mup", lr=1e-2, steps=3))
    sp = width_ratios(coord_check(widths, "sp", lr=1e-2, steps=3))
    assert set(mup) >= {"embeddings", "layer0.attention", "layer1.ffn_out", "logits"}
    assert all(0.5 <= r <= 2 for r in mup.values()), mup
    assert max(sp.values()) > 4, sp
    with pytest.raises(InvalidConfig):
        coord_check((32,), "mup", steps=50)


def test_a_mup_run_trains_through_the_loop_and_equals_sp_at_its_base_width() -> None:
    from models.pretrain import train

    sp = train(replace(TINY, run="mup-sp"), save=False)
    base = train(replace(TINY, run="mup-base", parametrisation="mup", mup_base_width=32), save=False)
    wider = train(replace(TINY, run="mup-wide", parametrisation="mup", mup_base_width=16), save=False)
    assert [v for _, v in base.curve] == pytest.approx([v for _, v in sp.curve], abs=1e-5)
    assert all(math.isfinite(v) for _, v in wider.curve) and wider.curve[-1][1] != pytest.approx(sp.curve[-1][1], abs=1e-5)



@pytest.mark.parametrize("objective", ["mlm", "mlm+sop"])
def test_a_saved_mup_run_reloads_as_the_function_it_trained(objective: str, empty_model_dir: Path) -> None:
    """μP's multipliers live in modules, not weights: the lab saves them folded in (portable_state), so a plain
    from_pretrained (every page, the backend, the Hub) computes what the μP model computed; saving leaves the model as
    it was, and an SP model's state comes back untouched."""
    import torch
    from transformers import BertForMaskedLM, BertForPreTraining

    from models.pretrain import mup
    from models.pretrain.config import TrainResult
    from models.pretrain.corpus import tokenizer
    from models.pretrain.loop import save_run

    cfg = replace(TINY, objective=objective, hidden=128, ffn=256, parametrisation="mup", mup_base_width=32,
                  run=f"mup-{objective.replace('+', '-')}")
    model = _model(cfg).eval()
    with torch.no_grad():  # LayerNorm starts at 1 and 0, where a wrong fold of its bias would not show
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    ids = torch.randint(1, 128, (2, 9), generator=torch.Generator().manual_seed(2))
    want = model(input_ids=ids)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    name = save_run(cfg, model, tokenizer(cfg.vocab), TrainResult(cfg, curve=[(1, 5.0)]))
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    cls = BertForPreTraining if objective == "mlm+sop" else BertForMaskedLM
    got = cls.from_pretrained(empty_model_dir / name).eval()(input_ids=ids)
    logits = "prediction_logits" if objective == "mlm+sop" else "logits"
    assert torch.allclose(getattr(got, logits), getattr(want, logits), atol=1e-4)
    assert not torch.allclose(cls.from_pretrained(empty_model_dir / name).bert.encoder.layer[0].attention.self.query.weight,
                              model.bert.encoder.layer[0].attention.self.query.weight)  # folded, not copied
    if objective == "mlm+sop":
        assert torch.allclose(got.seq_relationship_logits, want.seq_relationship_logits, atol=1e-5)
    sp = _model(replace(TINY, hidden=128, ffn=256))
    assert all(torch.equal(v, sp.state_dict()[k]) for k, v in mup.portable_state(sp).items())

def test_the_mutransfer_preset_plans_each_width_rate_and_parametrisation_once() -> None:
    from services import lab
    from services.lab import experiments, presets
    from services.lab.presets.mutransfer import LOG2_RATES

    planned = lab.plan_runs("mutransfer", replace(TINY, steps=10), "mt", seeds=2, widths=(32, 64, 128))
    rates = {2.0 ** k for k in LOG2_RATES}
    cells = {(p.config.parametrisation, p.config.hidden, p.config.lr, p.replicate) for p in planned}
    assert len(cells) == len(planned) == 2 * 6 * (3 + 2)  # μP's base width is the SP run of that width
    assert {p.config.lr for p in planned} == rates and {p.config.mup_base_width for p in planned} == {32}
    assert not any(p.config.parametrisation == "mup" and p.config.hidden == 32 for p in planned)
    assert all(p.config.objective == "mlm" for p in planned) and len({p.name for p in planned}) == len(planned)
    with pytest.raises(InvalidConfig):
        lab.plan_runs("mutransfer", TINY, "mt", widths=(32,))
    with pytest.raises(InvalidConfig):
        lab.plan_runs("mutransfer", TINY, "mt", widths=(32, 32))
    n, flops = experiments.planned_flops("mutransfer", TrainConfig(), "classroom")
    assert n == 36 and flops > 0
    assert list(presets.BUDGETS["mutransfer"]) == ["classroom", "thorough", "gpu"]
    for budget in presets.BUDGETS["mutransfer"]:  # an experiment fits the queue
        assert experiments.planned_flops("mutransfer", TrainConfig(), budget)[0] <= lab.MAX_QUEUED
        assert presets.budget_of("mutransfer", budget).minutes.startswith(("Measured", "Estimated"))  # stated before Start
        hi, lo = max(presets.budget_of("mutransfer", budget).widths), min(presets.budget_of("mutransfer", budget).widths)
        assert hi >= 8 * lo  # the verdict's least span (analysis.verdicts.transfer.MIN_SPAN)
    kind, said = lab.record_for("mutransfer", "classroom")
    assert kind == "does not decide" and "The GPU budget decided it" in said


def test_the_transfer_verdict_reads_the_lab_grid() -> None:
    """The rule itself is tested on planted curves in tests/analysis/test_transfer_rule.py; here, its shape on the
    lab's grid: widths a factor 8 apart, every run's gain over the token counts read."""
    from tests.helpers.verdicts import planted, shifted

    v = transfer_verdict(*planted(np.random.default_rng(0), shifted(), noise=0.005))
    assert v.label == L.AGREES and v.shift == {"sp": -3, "mup": 0} and v.seed_shifts["sp"] == [-3, -3]
    assert v.best["sp"][256] == 2.0 ** -12 and "μP: best rate 2^-9 at width 32" in v.sentence
    no_gains = transfer_verdict(planted(np.random.default_rng(0), shifted(), noise=0.005)[0])
    assert no_gains.label == L.AGREES and "not checked" in no_gains.reason
    with pytest.raises(InvalidData):
        transfer_verdict([("ntk", 0, 32, 1e-3, 3.0)])


def test_a_mutransfer_experiment_is_decided_from_its_runs_and_drawn_as_the_slide(lab_env: Path) -> None:
    from analysis.mutransfer_plots import transfer_figure
    from analysis.results_db import runs as R
    from services import lab
    from services.lab import experiments

    ids = lab.submit("mutransfer", replace(TINY, steps=10), "mt", seeds=2, widths=(32, 256), start=False)
    for rid in ids:
        cfg = R.get_run(rid)["config"]
        i = round(math.log2(cfg["lr"])) + 12  # the rate's index on the grid
        best = 4 - 3 * (cfg["hidden"] == 256) * (cfg["parametrisation"] == "sp")  # SP: the wider, the smaller its best rate
        loss = 4 + 0.1 * (i - best) ** 2 + 0.001 * cfg["replicate"]
        R.start_run(rid)
        R.finish_run(rid, "finished", evaluation={"held_out_loss": loss, "mask_loss": loss, "unigram_loss": loss + 0.3},
                     tokens=1000, seconds=1.0)
    experiments.settle("mt")
    [claim] = experiments.report("mt").claims
    assert claim.verdict["label"] == L.AGREES, claim.sentence
    assert claim.verdict["shift"] == {"sp": -3, "mup": 0} and claim.verdict["shift_interval"]["sp"] == [-3, -3]
    assert len(claim.detail["points"]) == len(ids) + 2 * 6  # the base-width SP runs count for μP too
    fig = transfer_figure(claim.to_dict())
    lines = [t for t in fig.data if t.mode == "lines+markers"]
    assert len(lines) == 2 * 2 and {t.name for t in lines} == {"width 32", "width 256"}
    sp256 = next(t for t in lines if t.name == "width 256" and t.xaxis == "x")
    assert list(sp256.x) == [-12, -11, -10, -9, -8, -7] and min(zip(sp256.y, sp256.x, strict=True))[1] == -11
    [row] = experiments.results_so_far()
    assert row["verdict"] == L.AGREES and "Tensor Programs V" in row["source"]


def test_a_diverged_run_is_a_result_of_the_mutransfer_grid_not_a_missing_run(lab_env: Path) -> None:
    """SP at the top of the rate grid may diverge: the loop stops it as failed ("The loss became nan ..."), and the
    verdict reads it as an infinite loss instead of calling the experiment partial; any other failure still is."""
    from analysis.results_db import runs as R
    from services import lab
    from services.lab import experiments

    ids = lab.submit("mutransfer", replace(TINY, steps=10), "mtd", seeds=2, widths=(32, 256), start=False)
    for rid in ids:
        cfg = R.get_run(rid)["config"]
        i = round(math.log2(cfg["lr"])) + 12
        best = 4 - 3 * (cfg["hidden"] == 256) * (cfg["parametrisation"] == "sp")
        R.start_run(rid)
        if cfg["parametrisation"] == "sp" and cfg["hidden"] == 256 and i == 5:  # the top rate: diverged
            R.finish_run(rid, "failed", message="The loss became nan at step 4; the last good state (step 3) is kept.",
                         evaluation={}, tokens=500, seconds=1.0)
        else:
            R.finish_run(rid, "finished", evaluation={"held_out_loss": 4 + 0.1 * (i - best) ** 2}, tokens=1000, seconds=1.0)
    report = experiments.report("mtd")
    [claim] = report.claims
    assert report.state == "complete" and not report.missing
    assert claim.verdict["label"] == L.AGREES, claim.sentence
    assert sum(1 for p in claim.detail["points"] if math.isinf(p[4])) == 2  # one diverged run per seed
    # any other failure is still a missing run
    assert not experiments._diverged({"status": "failed", "message": "Training stopped with an internal error (OSError)."})
    assert not experiments._diverged({"status": "cancelled", "message": "The loss became nan"})

