"""Knowledge distillation (DistilBERT): the student cut from its teacher, the loss against a hand computation, the
config's teacher rules, the distil preset's arms and compute, the queue's wait for a teacher, and the ratio verdicts."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from core.errors import InvalidConfig, InvalidModelId
from models.pretrain import Batches, TrainConfig, build_model, distil, read_corpus, tokenizer, train
from tests.helpers import ENTRY
from tests.helpers.pages import run as draw_page

TEACHER = TrainConfig(objective="mlm", layers=2, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=6, lr=3e-3,
                      corpus_lines=120, run="tiny-teacher")
STUDENT = replace(TEACHER, objective="distil", layers=1, teacher="trained/tiny-teacher", run="tiny-student")


@pytest.fixture
def teacher_dir(empty_model_dir: Path) -> Path:
    """A tiny masked-LM teacher saved where a lab run's checkpoint goes (trained/tiny-teacher), for the loader to load
    back. Its weights are drawn wide (std 0.3, not BERT's 0.02) so that its predictions are peaked, not near uniform."""
    tok = tokenizer()
    torch.manual_seed(0)
    teacher = build_model(TEACHER, len(tok), tok)
    with torch.no_grad():
        for p in teacher.parameters():
            if p.dim() > 1:
                p.normal_(0.0, 0.3)
    folder = empty_model_dir / "trained" / "tiny-teacher"
    teacher.save_pretrained(folder, safe_serialization=True)
    tok.save_pretrained(folder)
    return empty_model_dir


def _batch(config: TrainConfig) -> dict:
    tok = tokenizer(config.vocab)
    texts, _ = read_corpus(config)
    return Batches(config, texts, tok).sample()


def test_the_student_starts_as_the_teachers_embeddings_and_even_layers(teacher_dir: Path) -> None:
    tok = tokenizer()
    student = build_model(STUDENT, len(tok), tok)
    teacher = distil.teacher_of(student)
    assert len(student.bert.encoder.layer) == 1 and len(teacher.bert.encoder.layer) == 2
    for key, value in student.state_dict().items():
        if key.startswith("bert.encoder.layer.0."):
            assert torch.equal(value, teacher.state_dict()[key]), key  # layer 0 ← the teacher's layer 0
        elif key.startswith(("bert.embeddings.", "cls.")):
            assert torch.equal(value, teacher.state_dict()[key]), key
    odd = teacher.bert.encoder.layer[1].attention.self.query.weight
    assert not torch.equal(student.bert.encoder.layer[0].attention.self.query.weight, odd)
    # the teacher is neither trained nor saved with the student
    assert not any(p is q for p in student.parameters() for q in teacher.parameters())
    assert not any(k.startswith(distil._TEACHER) for k in student.state_dict())
    assert not teacher.training and not any(p.requires_grad for p in teacher.parameters())


def test_the_loss_matches_a_hand_computation_on_a_tiny_teacher(teacher_dir: Path) -> None:
    tok = tokenizer()
    student = build_model(STUDENT, len(tok), tok)
    with torch.no_grad():  # move the student off its teacher, so the soft-target loss is not ~0
        for p in student.bert.encoder.parameters():
            p.add_(0.3 * torch.randn_like(p))
    student.eval()
    teacher = distil.teacher_of(student)
    batch = _batch(STUDENT)
    got = {k: float(v.detach()) for k, v in distil.distil_losses(student, batch).items()}

    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    with torch.no_grad():
        s_out, t_out = student(**kwargs, output_hidden_states=True), teacher(**kwargs, output_hidden_states=True)
    masked = (batch["labels"] != -100).numpy()
    s = s_out.logits.double().numpy()[masked]  # (N, V): the full models' logits, the heads at every position
    t = t_out.logits.double().numpy()[masked]
    temp = distil.TEMPERATURE

    def log_softmax(x: np.ndarray) -> np.ndarray:
        x = x - x.max(-1, keepdims=True)
        return x - np.log(np.exp(x).sum(-1, keepdims=True))

    p_t = np.exp(log_softmax(t / temp))
    kl = (p_t * (np.log(p_t) - log_softmax(s / temp))).sum() / len(s) * temp**2
    labels = batch["labels"].numpy()[masked]
    mlm = -log_softmax(s)[np.arange(len(s)), labels].mean()
    real = batch["attention_mask"].bool().numpy()
    hs, ht = s_out.hidden_states[-1].double().numpy()[real], t_out.hidden_states[-1].double().numpy()[real]
    cos = (1 - (hs * ht).sum(-1) / (np.linalg.norm(hs, axis=-1) * np.linalg.norm(ht, axis=-1))).mean()
    assert kl > 1e-3  # not trivially zero
    assert got["ce"] == pytest.approx(kl, rel=1e-4)
    assert got["mlm"] == pytest.approx(mlm, rel=1e-4)
    assert got["cos"] == pytest.approx(cos, rel=1e-3, abs=1e-6)
    assert got["loss"] == pytest.approx(5.0 * kl + 2.0 * mlm + 1.0 * cos, rel=1e-4)


def test_a_distilled_run_learns_saves_the_student_alone_and_times_both(teacher_dir: Path) -> None:
    result = train(replace(STUDENT, steps=25))
    assert not result.stopped and len(result.curve) == 25
    first, last = np.mean([v for _, v in result.curve[:5]]), np.mean([v for _, v in result.curve[-5:]])
    assert last < first
    ev = result.evaluation
    assert math.isfinite(ev["perplexity"]) and ev["probes"] and 0 <= ev["pos_probe_random_init"] <= 1
    timing = ev["inference"]
    assert len(timing["student_seconds"]) == len(timing["teacher_seconds"]) == 7
    assert timing["speedup"] == pytest.approx(min(timing["teacher_seconds"]) / min(timing["student_seconds"]))
    saved = sorted(p.name for p in (teacher_dir / "trained" / "tiny-student").iterdir())
    assert "model.safetensors" in saved
    from models.loader import load

    loaded = load("trained/tiny-student", "masked-lm")
    assert loaded.model.config.num_hidden_layers == 1


@pytest.mark.parametrize(("change", "error", "words"), [
    ({"teacher": ""}, InvalidConfig, "needs a teacher"),
    ({"objective": "mlm"}, InvalidConfig, "Only a distillation run"),
    ({"teacher": "../etc/passwd"}, InvalidModelId, "not a valid model id"),
    ({"teacher": "trained/../../x"}, InvalidModelId, "not a valid model id"),
    ({"teacher": "/abs/path"}, InvalidModelId, "not a valid model id"),
])
def test_the_teacher_is_required_for_distil_refused_otherwise_and_checked_as_an_id(change: dict, error: type,
                                                                                   words: str) -> None:
    with pytest.raises(error, match=words):
        replace(STUDENT, **change).validate()


@pytest.mark.parametrize(("change", "words"), [({"layers": 2}, "every other one"), ({"ffn": 128}, "teacher's shape"),
                                               ({"vocab": "bert"}, "another vocabulary")])
def test_a_student_that_cannot_be_cut_from_its_teacher_is_refused(teacher_dir: Path, change: dict, words: str) -> None:
    tok = tokenizer(change.get("vocab", "wordnet-8k"))
    with pytest.raises(InvalidConfig, match=words):
        build_model(replace(STUDENT, **change), len(tok), tok)


def test_a_missing_teacher_is_refused_by_the_loader(empty_model_dir: Path) -> None:
    from core.errors import ExplorerError

    tok = tokenizer()
    with pytest.raises(ExplorerError):
        build_model(replace(STUDENT, teacher="trained/no-such-run"), len(tok), tok)


def test_a_distillation_step_costs_the_students_training_plus_the_teachers_forward() -> None:
    from models.pretrain import flops

    stats = flops.LengthStats(20.0, 25.0, 2.7)
    student = flops.per_token(STUDENT, stats)
    as_mlm = flops.per_token(replace(STUDENT, objective="mlm", teacher=""), stats)
    teacher_training = flops.per_token(replace(TEACHER), stats)  # 2 layers: 3 × its forward
    assert student == pytest.approx(as_mlm + teacher_training / 3)


# ------------------------------------------------------------------------------------------ the preset and the queue

BASE = TrainConfig(layers=2, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=40, corpus_lines=120)


def test_the_preset_plans_teacher_student_and_scratch_student_at_equal_compute() -> None:
    from services.lab.presets import plan_runs
    from services.lab.sizing import size

    with pytest.raises(InvalidConfig, match="one-layer teacher"):  # its "student" would be the teacher again
        plan_runs("distil", replace(BASE, layers=1), "g")
    planned = plan_runs("distil", BASE, "g", seeds=2)
    assert [(p.name, p.config.objective, p.config.layers) for p in planned[:3]] == [
        ("g-teacher-s0", "mlm", 2), ("g-distilled-s0", "distil", 1), ("g-scratch-s0", "mlm", 1)]
    for p in planned:  # each student learns from its own seed's teacher
        assert p.config.teacher == (f"trained/g-teacher-s{p.replicate}" if p.arm == "distilled" else "")
    _, distilled, scratch = (p.config for p in planned[:3])
    spent = size(distilled).flops_per_step * distilled.steps  # the teacher's forward passes included
    per_step = size(scratch).flops_per_step
    assert abs(spent - per_step * scratch.steps) <= per_step and scratch.steps > distilled.steps


def _queue(engine=None) -> dict[str, int]:
    from services.lab.run_queue import submit

    ids = submit("distil", BASE, "kd", engine, start=False)
    return dict(zip(("teacher", "distilled", "scratch"), ids, strict=True))


def test_a_student_is_not_claimed_before_its_teacher_finishes() -> None:
    from analysis.results_db import runs

    ids = _queue()
    assert runs.claim_next(10) == ids["teacher"]
    assert runs.claim_next(10) == ids["scratch"]  # the student waits; the run after it may start
    assert runs.claim_next(10) is None and runs.get_run(ids["distilled"])["status"] == "queued"
    runs.finish_run(ids["teacher"], "finished", checkpoint="trained/kd-teacher")
    assert runs.claim_next(10) == ids["distilled"]


def test_a_student_is_claimed_where_its_teacher_was_trained(monkeypatch: pytest.MonkeyPatch) -> None:
    """The teacher's checkpoint is in the model folder of the host that trained it: another host passes the student
    over (and may take other runs), that host claims it."""
    from analysis.results_db import runs

    ids = _queue()
    monkeypatch.setattr(runs, "host_name", lambda: "gpu-box")
    assert runs.claim_next(10) == ids["teacher"]
    runs.finish_run(ids["teacher"], "finished", checkpoint="trained/kd-teacher")
    monkeypatch.setattr(runs, "host_name", lambda: "web-replica")
    assert runs.claim_next(10) == ids["scratch"]  # not the student: its teacher is on gpu-box
    assert runs.claim_next(10) is None and runs.get_run(ids["distilled"])["status"] == "queued"
    monkeypatch.setattr(runs, "host_name", lambda: "gpu-box")
    assert runs.claim_next(10) == ids["distilled"]


@pytest.mark.parametrize("ending", ["failed", "cancelled"])
def test_a_teacher_that_does_not_finish_fails_its_student_with_the_reason(ending: str) -> None:
    from analysis.results_db import runs

    ids = _queue()
    assert runs.claim_next(1) == ids["teacher"]
    runs.finish_run(ids["teacher"], ending, message="stopped")
    assert runs.claim_next(1) == ids["scratch"]
    student = runs.get_run(ids["distilled"])
    assert student["status"] == "failed" and "kd-teacher" in student["message"] and ending in student["message"]


# ------------------------------------------------------------------------------------------ the ratio verdicts


def test_the_ratio_interval_is_the_delta_method_over_paired_seeds_and_covers() -> None:
    from scipy import stats

    from analysis.verdicts.ratios import ratio_interval

    a, b = [0.60, 0.66, 0.63], [0.70, 0.72, 0.69]
    r = np.mean(a) / np.mean(b)
    d = np.asarray(a) - r * np.asarray(b)
    half = stats.t.ppf(0.975, 2) * d.std(ddof=1) / (math.sqrt(3) * np.mean(b))
    assert ratio_interval(a, b) == pytest.approx((r, r - half, r + half))
    assert all(math.isnan(x) for x in ratio_interval([0.5], [0.6])[1:])
    rng = np.random.default_rng(0)  # coverage on simulated paired seeds: a shared seed effect and each arm's own noise
    hits = 0
    for _ in range(1000):
        seed = rng.normal(0, 0.02, 5)
        lo, hi = ratio_interval(0.63 + seed + rng.normal(0, 0.01, 5), 0.70 + seed + rng.normal(0, 0.01, 5))[1:]
        hits += lo <= 0.9 <= hi
    assert 0.92 <= hits / 1000 <= 0.98


@pytest.mark.parametrize(("a", "b", "floor", "reference", "label"), [
    ([0.69, 0.70, 0.71], [0.70, 0.70, 0.70], 0.97, 0.97, "cannot tell at this budget"),
    ([0.50, 0.52, 0.51], [0.70, 0.71, 0.70], 0.97, 0.97, "disagrees"),
    ([0.70, 0.71, 0.70], [0.70, 0.70, 0.70], 0.97, 0.97, "agrees"),
    ([3.0, 3.1, 2.9], [1.0, 1.02, 0.98], 1.0, 668 / 410, "agrees on direction only"),
    ([1.6, 1.7, 1.62], [1.0, 1.02, 0.98], 1.0, 668 / 410, "agrees"),
])
def test_a_ratio_claim_is_labelled_by_the_one_rule(a, b, floor, reference, label) -> None:
    from analysis.verdicts.ratios import ratio_verdict

    v = ratio_verdict(a, b, "ratio", floor, reference, "source")
    assert v.label == label, v.sentence


def test_a_score_ratio_is_decided_only_where_the_teacher_beats_its_random_initialisation(lab_env: Path) -> None:
    """Student and teacher both at chance have a ratio near 1: "keeps 100%" of nothing. The retention claim then
    cannot tell, and says why (a classroom run of this preset on this CPU did exactly that: teacher 0.12, random init
    0.13, ratio 1.04)."""
    from analysis.verdicts.ratios import gain_interval, ratio_verdict
    from services.lab import experiments

    a, b = [0.69, 0.70, 0.70], [0.70, 0.70, 0.71]
    assert ratio_verdict(a, b, "ratio", 0.97, 0.97, "s", baseline=[0.30, 0.31, 0.30]).label == "agrees"
    at_chance = ratio_verdict(a, b, "ratio", 0.97, 0.97, "s", baseline=[0.70, 0.69, 0.72])
    assert at_chance.label == "cannot tell at this budget" and "random initialisation" in at_chance.sentence
    gain, low, high = gain_interval([0.5, 0.6, 0.7], [0.4, 0.4, 0.4])
    assert gain == pytest.approx(0.2) and low < 0.2 < high  # t(2) · 0.1/√3 = 0.248 each side: not above zero
    assert gain_interval([0.5], [0.4])[1] != gain_interval([0.5], [0.4])[1]  # one seed: no interval (NaN)

    chance = {"teacher": [0.31, 0.30, 0.33], "distilled": [0.32, 0.31, 0.33], "scratch": [0.30, 0.32, 0.31]}
    _finished_experiment("kdc", chance, chance=0.31)
    retention = {c.key: c for c in experiments.report("kdc").claims}["retention"]
    assert retention.verdict["label"] == "cannot tell at this budget"
    assert "does not score measurably and materially" in retention.sentence and "random initialisation" in retention.sentence


SCORES = {"teacher": [0.70, 0.72, 0.71], "distilled": [0.69, 0.70, 0.70], "scratch": [0.55, 0.56, 0.54]}


def _finished_experiment(group: str, scores: dict[str, list[float]] = SCORES, chance: float = 0.30, first_seed: int = 0) -> None:
    """A distil experiment whose runs finished with the given downstream scores, each run's random-init control at
    ``chance + 0.01 × replicate``, and (distilled) inference timings; its seeds start at ``first_seed``."""
    from analysis.results_db import runs
    from services.lab import experiments
    from services.lab.run_queue import submit

    suite = {"tasks": ["supersense"], "epochs": 1, "max_train": 40, "max_test": 30, "max_len": 32}
    for rid in submit("distil", replace(BASE, seed=first_seed), group, seeds=3, downstream=suite, start=False):
        run = runs.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        ev = {"downstream": {"supersense": {"accuracy": scores[arm][rep], "random_accuracy": chance + 0.01 * rep}}}
        if arm == "distilled":
            ev["inference"] = {"student_seconds": [0.010, 0.011, 0.012], "teacher_seconds": [0.020 + 0.001 * rep] * 3}
        runs.start_run(rid)
        runs.finish_run(rid, "finished", evaluation=ev, tokens=1000, seconds=1.0)
    experiments.settle(group)  # as the last worker does


def test_a_finished_distil_experiment_reports_retention_downstream_and_speedup(lab_env: Path) -> None:
    from services.lab import experiments

    scores = SCORES
    _finished_experiment("kdr")
    by_key = {c.key: c for c in experiments.report("kdr").claims}
    retention = by_key["retention"].verdict
    assert retention["estimate"] == pytest.approx(np.mean(scores["distilled"]) / np.mean(scores["teacher"]))
    assert retention["low"] < retention["estimate"] < retention["high"] and retention["reference"] == 0.97
    assert by_key["downstream"].verdict["label"] == "agrees"  # distilled beats scratch
    speed = by_key["speedup"].verdict
    assert speed["estimate"] == pytest.approx(np.mean([0.020, 0.021, 0.022]) / 0.010)  # the fastest of each
    assert speed["label"] in ("agrees", "agrees on direction only") and "Inference speed-up" in by_key["speedup"].label

    # The chart the page and the pack draw: each seed's ratio, the verdict's estimate and interval, floor and paper.
    from analysis.verdict_plots import ratio_figure

    fig = ratio_figure(by_key["retention"].to_dict())
    seeds, bar = fig.data[0], fig.data[1]
    expected = [d / t for d, t in zip(scores["distilled"], scores["teacher"], strict=True)]
    assert list(seeds.y) == pytest.approx(expected)
    assert bar.y[0] == pytest.approx(retention["estimate"])
    assert bar.error_y.array[0] == pytest.approx(retention["high"] - retention["estimate"])
    assert [shape.y0 for shape in fig.layout.shapes] == [0.97]  # the floor; the paper's value is the floor here
    speed_fig = ratio_figure(by_key["speedup"].to_dict())
    assert sorted(round(shape.y0, 3) for shape in speed_fig.layout.shapes) == [1.0, round(668 / 410, 3)]


def test_the_charts_name_each_point_by_the_seed_it_ran_not_its_replicate(lab_env: Path) -> None:
    """An experiment on fresh seeds (3-5) shows seeds 3-5, as its runs' configs say; not 0-2, its replicates."""
    from analysis.verdict_plots import arms_figure, ratio_figure
    from services.lab import experiments

    _finished_experiment("kdseeds", first_seed=3)
    by_key = {c.key: c for c in experiments.report("kdseeds").claims}
    assert list(ratio_figure(by_key["retention"].to_dict()).data[0].x) == ["seed 3", "seed 4", "seed 5"]
    seeds = arms_figure(by_key["downstream"].to_dict()).data[-1]  # the one-seed circles, arms and random init
    assert set(seeds.text) == {"seed 3", "seed 4", "seed 5"} and len(seeds.text) == 4 * 3
    _finished_experiment("kdzero")
    assert list(ratio_figure({c.key: c for c in experiments.report("kdzero").claims}["retention"].to_dict()).data[0].x) == [
        "seed 0", "seed 1", "seed 2"]


@pytest.mark.slow  # the page starts the preset's runs in a worker process: about 15 s
def test_the_lab_page_lists_and_starts_the_distil_preset(lab_env: Path) -> None:

    from analysis.results_db import runs
    from services import lab
    at = draw_page("views/lab.py", **{"lb_preset": "distil", "lb_budget": "classroom", "lb_layers": "2", "lb_hidden": "32", "lb_ffn": "64",
                 "lb_name": "kdpage"})
    assert lab.PRESETS["distil"].title in at.selectbox(key="lb_preset").options
    planned = at.dataframe[0].value
    from services.lab.presets import BUDGETS

    seeds = BUDGETS["distil"]["classroom"].seeds
    assert len(planned) == 3 * seeds  # 3 arms × the classroom budget's seeds
    [start] = [b for b in at.main.button if b.label.startswith("Start")]  # the page's own, not the sidebar's "Start a class"
    start.click().run()
    assert not at.exception, at.exception
    frame = runs.list_runs(group="kdpage")
    cfgs = {c["run"]: c for c in frame["config"]}
    assert len(cfgs) == 3 * seeds and cfgs["kdpage-distilled-s1"]["teacher"] == "trained/kdpage-teacher-s1"
    for rid in frame["id"]:
        lab.cancel(int(rid))


def test_the_memory_rule_counts_the_teachers_weights_and_forward() -> None:
    from analysis.memory import inference_memory
    from analysis.params import parameter_breakdown
    from models.pretrain.config import hf_config
    from services.lab.sizing import size

    alone = size(replace(STUDENT, objective="mlm", teacher=""))
    with_teacher = size(STUDENT)
    teacher = inference_memory(parameter_breakdown(*hf_config(TEACHER)), STUDENT.batch, STUDENT.seq_len).total
    assert with_teacher.memory_bytes == alone.memory_bytes + teacher
    assert with_teacher.parameters == alone.parameters  # the student's own: the teacher is not trained


def test_the_lab_page_shows_a_finished_distil_experiments_verdicts(lab_env: Path) -> None:
    from streamlit.testing.v1 import AppTest

    from services.lab import experiments

    _finished_experiment("kdshown")
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.query_params["lb_show"] = "kdshown"
    at.run()
    at.switch_page("views/lab.py").run()
    assert not at.exception, at.exception
    shown = " ".join(x.value for x in [*at.success, *at.warning, *at.info])
    assert "student / teacher downstream average" in shown and "inference speed-up" in shown
    assert any("Sanh et al. 2019, DistilBERT, Table 3" in m.value for m in at.markdown)
    charts = at.get("plotly_chart")
    assert len(charts) == len([c for c in experiments.report("kdshown").claims if c.detail.get("points") or c.detail.get("scores")]), len(charts)
