"""The pre-training lab: sizes from the calculator, presets, the background queue (one run at a time,
cancel, a killed worker, two processes submitting at once), data-parallel training over 2 processes, the page."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from core.errors import InvalidConfig
from models.pretrain import OBJECTIVES, VOCABS, TrainConfig, build_model, parameter_count, tokenizer
from models.pretrain.config import VOCAB_SIZES
from services import lab
from services.lab import presets
from services.lab.presets import isoflop
from services.lab.presets import scaling as scaling_preset
from tests.helpers import ENTRY, ROOT
from tests.helpers.lab import run_status as status
from tests.helpers.servers import wait_for

TINY = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)
TINY_HISTORY = pd.DataFrame(columns=["id", "status", "config", "seconds", "tokens"])  # no runs yet: no pace


# ------------------------------------------------------------------------------------------ sizes and presets


@pytest.mark.parametrize("objective", [o for o in OBJECTIVES if o != "distil"])  # distil: tests/models/pretrain/test_distil.py (needs a teacher)
@pytest.mark.parametrize("vocab", list(VOCABS))
def test_the_calculator_counts_exactly_what_transformers_builds(objective: str, vocab: str) -> None:
    config = replace(TINY, objective=objective, vocab=vocab, layers=2, hidden=64, heads=4, ffn=96)
    tok = tokenizer(vocab)
    assert len(tok) == VOCAB_SIZES[vocab]
    assert lab.size(config).parameters == parameter_count(build_model(config, len(tok), tok))


def test_presets_plan_the_papers_ablations() -> None:
    base = replace(TINY, steps=200, layers=2)  # distillation halves the layers: a one-layer teacher is refused
    arms = {k: [(n, c.objective, c.masking) for n, c in lab.plan(k, base, "g", seeds=4 if lab.PRESETS[k].tuning else 1)]
            for k in lab.PRESETS}  # a tuned preset decides on the seeds after its 2 validation ones: 4 at least
    assert arms["roberta"] == [("g-bert-static-nsp", "mlm+nsp", "static"), ("g-static", "mlm", "static"),
                               ("g-dynamic", "mlm", "dynamic")]
    assert [o for _, o, _ in arms["albert"]] == ["mlm+nsp", "mlm+sop"]
    assert [o for _, o, _ in arms["xlnet"]] == ["plm", "mlm"] and arms["single"] == [("g", "mlm", "dynamic")]
    # ELECTRA vs MLM: the MLM gets the steps that ELECTRA's compute buys it (within one step)
    (_, electra), (_, mlm) = lab.plan("electra", base, "g")
    e = lab.size(electra).flops_per_step * electra.steps
    m = lab.size(mlm).flops_per_step
    assert abs(e - m * mlm.steps) <= m and mlm.steps != electra.steps
    # scaling: four widths, one token budget; IsoFLOP: each budget's runs cost that budget (within one step)
    scaling = lab.plan("scaling", base, "g")
    assert [c.hidden for _, c in scaling] == list(scaling_preset.WIDTHS) and len({c.steps for _, c in scaling}) == 1
    grid = lab.plan("isoflop", base, "g")
    assert len(grid) == len(isoflop.COMPUTE) * len(isoflop.WIDTHS)
    for scale in isoflop.COMPUTE:
        costs = [lab.size(c).flops_per_step * c.steps for n, c in grid if n.startswith(f"g-c{scale:g}-")]
        assert max(costs) / min(costs) < 1.1, costs
    assert sum(c.steps for _, c in grid if c.hidden == 32) > sum(c.steps for _, c in grid if c.hidden == 256)
    # the classroom widths price their budgets from their own middle width (32), not from a width outside them
    classroom = presets.BUDGETS["isoflop"]["classroom"]
    small = {p.arm: p.config for p in lab.plan_runs("isoflop", base, "g", 1, classroom.widths)}
    assert small["c1-h32"].steps == base.steps and {c.hidden for c in small.values()} == set(classroom.widths)
    unit = lab.size(small["c1-h32"]).flops_per_step * base.steps
    for width in classroom.widths:
        c = small[f"c1-h{width}"]
        assert abs(lab.size(c).flops_per_step * c.steps - unit) <= lab.size(c).flops_per_step


@pytest.mark.parametrize(("change", "words"), [
    ({"heads": 3}, "do not divide"), ({"steps": 0}, "Steps"), ({"steps": 10**6}, "Steps"),
    ({"hidden": 1024, "layers": 24, "ffn": 4096, "batch": 512, "seq_len": 512}, "MB"),
])
def test_configs_that_cannot_run_or_would_not_fit_are_refused_before_anything_starts(change: dict, words: str) -> None:
    with pytest.raises(InvalidConfig, match=words):
        for _, cfg in lab.plan("single", replace(TINY, **change), "g"):
            lab.check_fits(cfg)


def test_a_model_dir_that_cannot_be_written_gives_a_clear_message(tmp_path: Path, monkeypatch) -> None:
    from core.errors import ExplorerError

    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("BFE_MODEL_DIR", str(blocker / "models"))  # mkdir fails, even for root
    with pytest.raises(ExplorerError, match="BFE_MODEL_DIR"):
        lab.dispatch()


@pytest.mark.parametrize("name", ["", "../etc", "a b", "x" * 61, "-lead", "bad/slash"])
def test_hostile_run_names_are_refused(name: str) -> None:
    with pytest.raises(InvalidConfig, match="run name"):
        lab.plan("single", TINY, name)


def test_the_memory_budget_setting_is_obeyed(monkeypatch) -> None:
    need = lab.size(TINY).memory_bytes / 2**20
    monkeypatch.setenv("BFE_LAB_MEMORY_MB", str(max(1, int(need) - 1)))
    with pytest.raises(InvalidConfig, match="BFE_LAB_MEMORY_MB"):
        lab.submit("single", TINY, "too-big", start=False)
    monkeypatch.setenv("BFE_LAB_MEMORY_MB", str(int(need) + 2))
    assert lab.check_fits(TINY).memory_bytes < (int(need) + 2) * 2**20


def test_the_preview_prices_the_plan_and_applies_the_memory_rule_once(monkeypatch) -> None:
    """The use case the page draws: a named budget sets steps, batch, length and seeds; a custom one keeps the form's;
    tokens and FLOPs are the calculator's over the steps; the memory limit refuses what check_fits refuses."""
    shape = {"config": lab.TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30)}
    budget = presets.budget_of("albert", "classroom")
    plan = lab.preview(lab.LabRequest(preset="albert", budget="classroom", name="pv", **shape), history=TINY_HISTORY)
    assert plan.budget == budget and plan.seeds == budget.seeds and len(plan.runs) == 2 * budget.seeds
    assert {(r.config.steps, r.config.batch, r.config.seq_len) for r in plan.runs} == {(budget.steps, budget.batch, budget.seq_len)}
    run = plan.runs[0]
    assert run.tokens == round(lab.size(run.config).tokens_per_step * run.config.steps)
    assert plan.total_flops == pytest.approx(sum(lab.size(r.config).flops_per_step * r.config.steps for r in plan.runs))
    custom = lab.preview(lab.LabRequest(preset="single", seeds=5, name="pv", **shape), history=TINY_HISTORY)
    assert custom.budget is None and custom.seeds == 1 and [r.name for r in custom.runs] == ["pv"]
    assert custom.pace is None and custom.training_seconds is None and custom.can_start
    need = custom.runs[0].cost.memory_bytes / 2**20
    monkeypatch.setenv("BFE_LAB_MEMORY_MB", str(max(1, int(need) - 1)))
    refused = lab.preview(lab.LabRequest(preset="single", name="pv", **shape), history=TINY_HISTORY)
    assert refused.too_big == ("pv",) and not refused.can_start
    with pytest.raises(InvalidConfig, match="Too large"):
        lab.start(refused)
    assert not lab.preview(lab.LabRequest(preset="single", name="pv", config=replace(shape["config"], corpus="")),
                                  history=TINY_HISTORY).has_corpus
    # more runs than the queue holds: refused with the plan, saying how many seeds fit (mutransfer: 18 runs per seed)
    with pytest.raises(InvalidConfig, match="180 runs") as err:
        lab.preview(lab.LabRequest(preset="mutransfer", budget="custom", seeds=10, name="pv", **shape), history=TINY_HISTORY)
    assert "at most 2 seed(s)" in err.value.hint
    assert len(lab.preview(lab.LabRequest(preset="mutransfer", budget="custom", seeds=2, name="pv", **shape),
                           history=TINY_HISTORY).runs) == 36


def test_the_fine_tuning_preview_waits_for_a_task_a_model_and_a_mode() -> None:
    from services.lab import finetuning

    request = finetuning.FineTuneRequest(models=("tiny-bert",), task="wic", modes=("finetune", "frozen"), seeds=2, name="grid")
    assert finetuning.preview(request, None).runs == () and not finetuning.preview(request, None).nothing_picked
    assert finetuning.preview(replace(request, modes=()), None).nothing_picked
    assert finetuning.preview(replace(request, models=()), None).nothing_picked
    upload = finetuning.preview(replace(request, task="upload"), {"labels": ["a", "b"], "kind": "single"})
    assert upload.runs == () and upload.group == "grid"  # an upload with no file yet: nothing to size


# ------------------------------------------------------------------------------------------ the queue


@pytest.mark.slow
def test_runs_train_in_the_background_one_at_a_time_and_cancel(lab_env: Path) -> None:
    from analysis.results_db import runs

    first, second = lab.submit("albert", replace(TINY, steps=5000), "q")
    assert status(first) == "running" and status(second) == "queued"
    assert lab.queue_positions(runs.list_runs()) == {second: 1}
    curve = wait_for(lambda: runs.get_run(first)["curve"], timeout=120)  # the worker writes its curve as it goes
    assert curve[0][0] == 1 and status(second) == "queued"
    row = runs.get_run(first)
    assert 0 < lab.progress_of(row)["done"] < 1 and lab.progress_of(row)["seconds_left"] > 0
    assert lab.cancel(second) == "cancelled"  # a queued run is cancelled at once
    assert lab.cancel(first) == "running"  # a running one is asked to stop
    wait_for(lambda: status(first) == "cancelled", timeout=60)
    got = runs.get_run(first)
    assert "cancelled at step" in got["message"].lower() and got["checkpoint"] == "trained/q-nsp"
    assert (lab_env / "trained" / "q-nsp" / "model.safetensors").is_file()
    assert status(second) == "cancelled" and lab.trained_models() == ["trained/q-nsp"]
    assert lab.trained_models("pretraining") == ["trained/q-nsp"] and lab.trained_models("xlnet-lm") == []


@pytest.mark.slow
def test_a_run_finishes_with_its_evaluation_and_the_next_one_starts(lab_env: Path) -> None:
    from analysis.results_db import runs

    a, b = lab.submit("xlnet", replace(TINY, steps=20), "pair")
    wait_for(lambda: status(b) == "finished", timeout=180)
    ra, rb = runs.get_run(a), runs.get_run(b)
    assert ra["status"] == "finished" and rb["started_at"] >= ra["finished_at"]  # one at a time
    for r in (ra, rb):
        assert len(r["curve"]) == 20 and r["tokens"] > 0 and r["parameters"] == lab.size(TrainConfig.from_stored(r["config"])).parameters
        assert 0 <= r["evaluation"]["pos_probe_accuracy"] <= 1 and "pos_probe_random_init" in r["evaluation"]
    assert "probes" in rb["evaluation"]  # the masked LM's fill-mask probes


@pytest.mark.slow
def test_a_killed_worker_leaves_an_interrupted_run_never_a_finished_one(lab_env: Path) -> None:
    from analysis.results_db import runs

    (rid,) = lab.submit("single", replace(TINY, steps=5000), "killed")
    wait_for(lambda: runs.get_run(rid)["curve"], timeout=120)
    os.kill(_pid(rid), signal.SIGKILL)
    wait_for(lambda: (lab.dispatch() or True) and status(rid) == "interrupted", timeout=30)
    assert not (lab_env / "trained" / "killed").exists()  # nothing half-written for the pickers
    assert lab.trained_models() == []


def _pid(rid: int) -> int:
    from analysis.results_db import engine as E
    from analysis.results_db.schema import TrainingRun

    with E.session(E.get_engine()) as s:
        return s.get(TrainingRun, rid).pid


@pytest.mark.slow
def test_two_processes_submitting_at_once_are_queued_not_run_together(lab_env: Path) -> None:
    from analysis.results_db import runs

    code = ("import sys; from dataclasses import replace; from services import lab; from models.pretrain import TrainConfig; "
            "cfg = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=4000, corpus_lines=200); "
            "print(lab.submit('single', cfg, sys.argv[1]))")
    procs = [subprocess.Popen([sys.executable, "-c", code, f"student{i}"], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for i in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    df = runs.list_runs()
    assert len(df) == 3 and sorted(df["status"]) == ["queued", "queued", "running"]


# ------------------------------------------------------------------------------------------ data parallel


@pytest.mark.slow
def test_two_processes_train_like_one_with_the_same_global_batch(empty_model_dir: Path) -> None:
    """torchrun (gloo) with 2 processes against 1 process: same global batch, seed and masks. The first steps agree
    to float precision; later ones stay within 0.02 (the all-reduce sums in another order), while a run with
    another seed differs by more."""
    args = ["--objective", "mlm", "--layers", "1", "--hidden", "32", "--heads", "2", "--ffn", "64", "--seq-len", "32", "--batch",
            "8", "--steps", "12", "--lr", "1e-4", "--corpus-lines", "200", "--dropout", "0.0"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
    two = subprocess.run([*torchrun, "-m", "models.pretrain", "--", *args, "--run", "two"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert two.returncode == 0, two.stderr[-3000:]
    assert json.loads(two.stdout[two.stdout.index("{"):])["processes"] == 2
    for name, extra in (("one", []), ("other-seed", ["--seed", "1"])):
        one = subprocess.run([sys.executable, "-m", "models.pretrain", *args, *extra, "--run", name], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=300)
        assert one.returncode == 0, one.stderr[-3000:]
    curve = {n: json.loads((empty_model_dir / "trained" / n / "bfe_run.json").read_text())["curve"] for n in ("one", "two", "other-seed")}
    diffs = [abs(a[1] - b[1]) for a, b in zip(curve["one"], curve["two"], strict=True)]
    assert max(diffs[:2]) < 1e-5 and max(diffs) < 0.02, diffs
    assert max(abs(a[1] - b[1]) for a, b in zip(curve["one"], curve["other-seed"], strict=True)) > 0.02


# ------------------------------------------------------------------------------------------ the page


@pytest.mark.slow
def test_the_lab_page_starts_watches_and_cancels_a_run(lab_env: Path) -> None:
    from streamlit.testing.v1 import AppTest

    from analysis.results_db import runs

    at = AppTest.from_file(ENTRY, default_timeout=60)
    for k, v in {"lb_preset": "single", "lb_layers": "1", "lb_hidden": "32", "lb_ffn": "64", "lb_seq": "32", "lb_batch": "8",
                 "lb_steps": "5000", "lb_name": "class-demo"}.items():
        at.query_params[k] = v
    at.run()
    at.switch_page("views/lab.py").run()
    assert not at.exception, at.exception
    planned = at.dataframe[0].value
    assert list(planned["run"]) == ["class-demo"] and planned["parameters (exact)"].iloc[0] == lab.size(
        replace(TINY, steps=5000, batch=8)).parameters
    [start] = [b for b in at.main.button if b.label.startswith("Start")]  # the page's own, not the sidebar's "Start a class"
    start.click().run()
    assert not at.exception, at.exception
    (rid,) = runs.list_runs()["id"]
    wait_for(lambda: runs.get_run(rid)["curve"], timeout=120)
    at.run()
    table = at.dataframe[-1].value if "status" in at.dataframe[-1].value else at.dataframe[0].value
    assert "running" in " ".join(table["status"])
    at.button(key="lb_cancel").click().run()
    wait_for(lambda: status(rid) == "cancelled", timeout=60)
    at.run()
    assert not at.exception and "trained/class-demo" in " ".join(m.value for m in at.markdown)


@pytest.mark.slow
def test_a_trained_model_appears_in_the_pickers(lab_env: Path) -> None:
    from streamlit.testing.v1 import AppTest

    from models.pretrain import train

    train(replace(TINY, objective="plm", steps=3, run="my-xlnet"))
    at = AppTest.from_file(ENTRY, default_timeout=60).run()
    at.switch_page("views/permutation.py").run()
    box = at.selectbox(key="pm_model")
    assert "my-xlnet · trained here (plm, 1×32)" in box.options
    box.set_value("trained/my-xlnet").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    assert at.query_params["pm_model"] in ("trained/my-xlnet", ["trained/my-xlnet"])  # it lives in the page's link like the rest
    again = AppTest.from_file(ENTRY, default_timeout=60)
    again.query_params["pm_model"] = "trained/my-xlnet"
    again.run()
    again.switch_page("views/permutation.py").run()
    assert again.selectbox(key="pm_model").value == "trained/my-xlnet" and not again.warning


def test_the_lab_package_imports_no_numerical_library() -> None:
    """The server's warm-up imports the lab package (its supervisor) as Home is first drawn: scipy there cost the
    first paint 0.7 s once (a verdict label imported through ``analysis.verdicts``, which decides with scipy)."""
    code = ("import sys, services.lab, services.lab.experiments, services.lab.claim_entries; "
            "heavy = [m for m in ('scipy', 'numpy', 'torch', 'transformers') if m in sys.modules]; print(heavy); sys.exit(bool(heavy))")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
@pytest.mark.parametrize("page", ["lab", "finetune"])
def test_the_lab_pages_do_not_import_torch(page: str) -> None:
    code = (
        "import sys; from streamlit.testing.v1 import AppTest; "
        f"at = AppTest.from_file({str(ROOT / 'app' / 'streamlit_app.py')!r}, default_timeout=60).run(); "
        f"at.switch_page('views/{page}.py').run(); assert not at.exception, at.exception; "
        "heavy = [m for m in ('torch', 'transformers', 'gradio') if m in sys.modules]; print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_scaling_experiment_feeds_the_scaling_law_page(lab_env: Path) -> None:
    """Finished runs of the scaling preset become a data set there: N (non-embedding) against held-out loss, fitted."""
    from dataclasses import asdict

    from streamlit.testing.v1 import AppTest

    from analysis.results_db import runs

    losses = {}
    for name, cfg in lab.plan("scaling", replace(TINY, steps=100), "sc"):
        rid = runs.create_run(name, cfg.objective, {**asdict(cfg), "preset": "scaling"}, group="sc")
        n = lab.size(cfg).non_embedding
        losses[name] = 3.0 * (n / 1e4) ** -0.08  # a clean power law with α = 0.08
        runs.finish_run(rid, "finished", evaluation={"held_out_loss": losses[name]}, tokens=100 * 8 * 32, seconds=1.0)
    table = lab.scaling_table(runs.list_runs())
    assert lab.flops_per_second(runs.list_runs()) == pytest.approx(lab.size(cfg).flops_per_token * 100 * 8 * 32 / 1.0)  # the newest
    assert len(table) == 4 and table["held-out loss"].is_monotonic_decreasing == (table["hidden"].is_monotonic_increasing)
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.query_params["sc_src"] = "lab"
    at.run()
    at.switch_page("views/scaling.py").run()
    assert not at.exception, at.exception
    assert at.selectbox(key="sc_lab").value == "sc" and at.selectbox(key="sc_x").value == "N (non-embedding)"
    text = " ".join(m.value for m in at.markdown) + " ".join(str(m.value) for m in at.metric)
    assert "0.08" in text, text[:2000]  # the fitted exponent


def test_the_runs_of_a_preset_that_charts_sizes_become_points_each_with_the_budget_its_arm_names(lab_env: Path) -> None:
    """IsoFLOP's arms name their compute budget (c0.5-h32): each point carries it; a preset that compares arms at one
    size (Lion) gives no size chart at all, and neither do fewer than two finished points."""
    from dataclasses import asdict

    from analysis.results_db import runs

    planned = lab.plan_runs("isoflop", replace(TINY, steps=20), "iso", widths=(16, 32, 64))
    for i, p in enumerate(planned):
        rid = runs.create_run(p.name, p.config.objective, {**asdict(p.config), "preset": "isoflop", "arm": p.arm}, group="iso")
        runs.finish_run(rid, "finished", evaluation={"held_out_loss": 7.0 - 0.1 * i}, tokens=p.config.steps * 8 * 32, seconds=1.0)
    charted = lab.scaling_runs(runs.list_runs(group="iso"))
    assert charted is not None and len(charted.table) == len(planned) == 9
    assert sorted(set(charted.budgets)) == ["c0.5", "c1", "c2"]
    assert dict(zip(charted.table["run"], charted.budgets, strict=True))["iso-c2-h64"] == "c2"
    for p in lab.plan_runs("lion", replace(TINY, steps=20), "li"):
        rid = runs.create_run(p.name, p.config.objective, {**asdict(p.config), "preset": "lion", "arm": p.arm}, group="li")
        runs.finish_run(rid, "finished", evaluation={"held_out_loss": 7.0}, tokens=20 * 8 * 32, seconds=1.0)
    assert lab.scaling_runs(runs.list_runs(group="li")) is None


def test_the_forms_bounds_lie_within_the_librarys_and_a_run_at_each_corner_is_valid() -> None:
    """The page's bounds are the use case's (lab.FORM_LIMITS, finetuning.FORM_LIMITS), never wider than the library's
    own, and a request at the form's largest shape still validates (a corner the form offers is one the library takes)."""
    from models.finetune.config import LIMITS as FINETUNE_LIMITS
    from models.pretrain.config import LIMITS as PRETRAIN_LIMITS
    from services.lab import finetuning

    for name, (low, high) in lab.FORM_LIMITS.items():
        if name in PRETRAIN_LIMITS:
            assert PRETRAIN_LIMITS[name][0] <= low <= high <= PRETRAIN_LIMITS[name][1], name
    for name, (low, high) in finetuning.FORM_LIMITS.items():
        if name in FINETUNE_LIMITS:
            assert FINETUNE_LIMITS[name][0] <= low <= high <= FINETUNE_LIMITS[name][1], name
    top = {k: int(lab.FORM_LIMITS[k][1]) for k in ("layers", "hidden", "heads", "ffn", "seq_len", "batch", "steps")}
    replace(TINY, **top).validate()
    assert lab.FORM_LIMITS["steps"][1] == lab.MAX_STEPS and lab.FORM_LIMITS["seeds"][1] == lab.MAX_SEEDS
