"""Presets that end in verdicts: plans with equal seeds per arm, ELECTRA at equal FLOPs, the downstream
suite with its random-init control, stored verdicts that outlive their runs, partial and one-seed experiments."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from analysis import verdicts as V
from analysis.results_db import runs as R
from analysis.results_db import verdicts as SV
from core.errors import InvalidConfig
from models.pretrain import TrainConfig
from services import lab
from services.lab import claims, entries, experiments, presets
from services.lab.presets import distil
from tests.helpers import ENTRY
from tests.helpers.pages import run as draw_page

TINY = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)
SUITE = {"tasks": ["supersense"], "epochs": 1, "max_train": 40, "max_test": 30, "max_len": 32}


def test_every_arm_gets_the_same_seeds_and_electra_the_same_flops_within_one_step() -> None:
    for preset in ("albert", "electra", "roberta", "xlnet"):
        planned = lab.plan_runs(preset, replace(TINY, steps=200), "g", seeds=3)
        by_arm: dict[str, list[int]] = {}
        for p in planned:
            by_arm.setdefault(p.arm, []).append(p.config.seed)
        assert len(by_arm) >= 2 and all(seeds == [0, 1, 2] for seeds in by_arm.values()), by_arm
        assert len({p.name for p in planned}) == len(planned)
    planned = lab.plan_runs("electra", replace(TINY, steps=200), "g", seeds=2)
    for rep in (0, 1):
        electra, mlm = [p.config for p in planned if p.replicate == rep]
        one_step = lab.size(mlm).flops_per_step
        spent = [lab.size(c).flops_per_step * c.steps for c in (electra, mlm)]
        assert abs(spent[0] - spent[1]) <= one_step
    with pytest.raises(InvalidConfig):
        lab.plan_runs("albert", TINY, "g", seeds=0)
    with pytest.raises(InvalidConfig):
        lab.plan_runs("albert", TINY, "g", seeds=True)
    with pytest.raises(InvalidConfig):
        presets.budget_of("albert", "lavish")


#: The most training FLOPs a thorough budget may plan at the bench's default run (bench/verdicts.py's DEFAULT): what
#: finished in 41–49 min on the 2-core reference machine (Lion 8.9e13, grow-batch 8.9e13, BigBird 1.0e14;
#: data/lab/budgets-measured.json), so that every thorough budget fits about an hour there. FLOPs under-count a preset
#: of many small runs, one at a time: the tuned Lion's 7.1e13 in 40 runs took 79 min (each run's start and evaluation).
HOUR_FLOPS = 1.05e14  # BigBird's 1.0008e14 with a little room
#: A preset whose runs train slower per counted FLOP than the default run: DistilBERT's distilled arm (the teacher's
#: forward passes in eval mode), 1,164 s against 1,783 s for the same FLOPs as the scratch arm (docs/lab.md,
#: "Measured here: DistilBERT", its 4 × 2,000 thorough run).
DISTIL_PACE = {"distil": 1164 / 1783}


def test_every_thorough_budget_fits_an_hour_on_a_cpu_and_the_bigger_ones_are_gpu_budgets() -> None:
    bench = lab.TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=1200, lr=1e-3)
    gpu = []
    for preset, named in presets.BUDGETS.items():
        assert list(named)[:2] == ["classroom", "thorough"] and set(named) <= {"classroom", "thorough", "gpu"}, preset
        assert lab.budget_names(preset) == [*named, "custom"]
        thorough = experiments.planned_flops(preset, bench, "thorough")[1]
        assert thorough <= HOUR_FLOPS, (preset, f"{thorough:.2e}")
        assert experiments.planned_flops(preset, bench, "classroom")[1] < thorough, preset
        if "gpu" in named:
            gpu.append(preset)
            # why it is a GPU budget: more than an hour's FLOPs, or DistilBERT's (its teacher shipped, 0 steps) more than
            # the hour's share its students run at: they train at two-thirds the pace per counted FLOP
            assert experiments.planned_flops(preset, bench, "gpu")[1] > HOUR_FLOPS * DISTIL_PACE.get(preset, 1), preset
            assert named["thorough"].minutes and named["gpu"].minutes, preset  # said before Start
    assert sorted(gpu) == ["distil", "isoflop", "lion-tuned", "mutransfer", "roberta", "scaling", "xlnet"]
    assert lab.budget_names("single") == []
    assert [lab.bigger_budget("scaling", b) for b in ("custom", "classroom", "thorough", "gpu")] == ["thorough", "thorough", "gpu", None]
    assert [lab.bigger_budget("albert", b) for b in ("custom", "classroom", "thorough")] == ["thorough", "thorough", None]


def test_a_gpu_budget_asked_for_a_preset_without_one_falls_back_to_classroom() -> None:
    at = draw_page("views/lab.py", lb_preset="albert", lb_budget="gpu")
    assert not at.exception
    assert at.session_state["lb_budget"] == "classroom"
    at = draw_page("views/lab.py", lb_preset="scaling", lb_budget="gpu")
    assert not at.exception and at.session_state["lb_budget"] == "gpu"
    assert any("widths 32, 64, 128, 256" in c.value for c in at.caption)


def test_budgets_are_declared_for_every_claimed_preset_and_plan() -> None:
    for preset in presets.CLAIMS:
        assert {"classroom", "thorough"} <= set(presets.BUDGETS[preset]), preset
        for name in presets.BUDGETS[preset]:  # every budget a preset offers, the GPU ones too
            b = presets.budget_of(preset, name)
            assert b.seeds >= 2
            n, flops = experiments.planned_flops(preset, lab.TrainConfig(), name)
            assert n >= 2 * b.seeds and flops > 0
    with pytest.raises(InvalidConfig):
        lab.submit("albert", TINY, "g", downstream={"tasks": ["glue"]}, start=False)


def _finish(rid: int, evaluation: dict, status: str = "finished") -> None:
    R.start_run(rid)
    R.finish_run(rid, status, evaluation=evaluation, tokens=1000, seconds=1.0)


def _fake(group: str, arms: dict[str, list[float]], control: float = 0.1, seeds: int = 3, statuses: dict | None = None) -> list[int]:
    ids = lab.submit("albert", TINY, group, seeds=seeds, downstream=SUITE, start=False)
    for rid in ids:
        run = R.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        ds = {"accuracy": arms[arm][rep], "correct": [1, 0]}
        if run["config"]["control"]:
            ds["random_accuracy"] = control + 0.001 * rep
        _finish(rid, {"sop_accuracy": arms[arm][rep], "downstream": {"supersense": ds},
                      "pos_probe_accuracy": arms[arm][rep] / 2, "pos_probe_random_init": 0.25 + 0.01 * rep},
                (statuses or {}).get(run["name"], "finished"))
    experiments.settle(group)  # as the last worker does
    return ids


def test_a_complete_experiment_is_decided_stored_and_outlives_its_runs(lab_env: Path) -> None:
    ids = _fake("ab", {"sop": [0.80, 0.82, 0.81], "nsp": [0.50, 0.53, 0.51]})
    rep = experiments.report("ab")
    assert rep.state == "complete"
    by_key = {c.key: c for c in rep.claims}
    assert set(by_key) == {"sop", "downstream", "downstream:pos"}
    assert by_key["downstream"].primary and by_key["sop"].primary and not by_key["downstream:pos"].primary
    assert by_key["downstream:pos"].detail["chance"] == 0.25 and by_key["downstream:pos"].verdict["label"] == V.AGREES
    sop = by_key["sop"]
    assert sop.verdict["label"] == V.AGREES and sop.verdict["effect"] == pytest.approx(0.2967, abs=1e-3)
    assert sop.detail["chance"] == 0.5
    ds = by_key["downstream"]
    # a suite of one task: the average is that task, and the page names it so
    assert ds.label.startswith("Downstream: supersense accuracy (") and ds.label.endswith("classes), the suite's one task")
    effect = ds.detail["control_effects"]["sop"]  # 0.8 over a control of 0.1: an interval well above 0, and still no label
    assert effect["label"] == V.DESCRIPTIVE and effect["low"] > 0.5 and effect["family"] == 1
    assert list(ds.detail["controls"]) == ["random init"]  # one control per architecture and seed, shared by both BERT arms
    stored = SV.for_group("ab")
    assert {s["claim_key"] for s in stored} == set(by_key) and stored[0]["payload"]["verdict"] == sop.verdict
    assert V.Verdict.from_dict(stored[0]["payload"]["verdict"]).label == V.AGREES
    rows = experiments.results_so_far()
    assert any(r["verdict"] == V.AGREES and r["experiment"] == "ab" for r in rows)
    for rid in ids[:2]:
        R.delete_run(rid)
    rep = experiments.report("ab")
    assert "deleted" in rep.note and rep.claims[0].verdict["label"] == V.AGREES
    for rid in ids[2:]:
        R.delete_run(rid)
    gone = experiments.report("ab")
    assert gone.state == "gone" and "deleted" in gone.note and gone.claims


def test_a_suite_of_tasks_has_one_primary_average_and_bonferroni_exploratory_measures_with_the_items_noise(lab_env: Path) -> None:
    """The thorough suite (two tasks): the claim is decided on the average; each task and the probe are exploratory
    with a family-wise (Bonferroni) interval; every seed scored the same test items, so the interval has an item term."""
    rng = np.random.default_rng(0)
    truth = {t: rng.random(300) for t in ("supersense", "wic")}
    helped = {t: rng.random(300) < 0.3 for t in truth}  # the items SOP pre-training helps with (the same every seed)
    suite = {"tasks": ["supersense", "wic"], "epochs": 1, "max_train": 50, "max_test": 300}
    ids = lab.submit("albert", TINY, "two", seeds=3, downstream=suite, start=False)
    for rid in ids:
        run = R.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        ds = {}
        for t, p in truth.items():
            right = (rng.random(300) < np.clip(p + (0.3 * helped[t] if arm == "sop" else 0.0), 0, 1)).astype(int)
            ds[t] = {"accuracy": float(right.mean()), "correct": right.tolist(), "items": [f"{t}:{i}" for i in range(300)],
                     "clusters": [f"lemma{i // 3}" for i in range(300)]}
        _finish(rid, {"sop_accuracy": 0.8 if arm == "sop" else 0.5, "downstream": ds, "pos_probe_accuracy": 0.6 + 0.01 * rep})
    experiments.settle("two")
    rep = experiments.report("two")
    by_key = {c.key: c for c in rep.claims}
    assert set(by_key) == {"sop", "downstream", "downstream:supersense", "downstream:wic", "downstream:pos"}
    assert rep.family == 3
    avg = by_key["downstream"]
    assert avg.primary and avg.holm["primaries"] == 2  # SOP and the downstream average, adjusted together
    assert avg.verdict["level"] == pytest.approx(1 - 0.05 / avg.holm["family"])
    assert "shared test items" in avg.verdict["method"] and avg.verdict["item_share"] > 0
    for key in ("downstream:supersense", "downstream:wic"):
        v = by_key[key].verdict
        assert not by_key[key].primary and v["family"] == 3 and v["level"] == pytest.approx(1 - 0.05 / 3)
        assert "Bonferroni over 3" in by_key[key].sentence
    means = [np.mean([dict(by_key[f"downstream:{t}"].detail["scores"]["sop"])[k] for t in truth]) for k in range(3)]
    assert [v for _, v in avg.detail["scores"]["sop"]] == pytest.approx(means)
    roles = [r["role"] for r in experiments.results_so_far()]
    assert roles[:2] == ["primary (Holm, 2 claims)"] * 2 and roles.count("exploratory (Bonferroni, 3)") == 3


def test_verdicts_a_killed_settle_left_out_are_stored_later_and_concurrent_settles_store_each_once(lab_env: Path) -> None:
    import subprocess
    import sys

    from sqlalchemy import delete

    from analysis.results_db.engine import get_engine, write
    from analysis.results_db.schema import StoredVerdict

    _fake("half", {"sop": [0.80, 0.82, 0.81], "nsp": [0.50, 0.53, 0.51]})
    first = {s["claim_key"]: s["created_at"] for s in SV.for_group("half")}
    assert len(first) == 3
    # as if the settling process had been killed after storing one claim (before this fix, the rest never came)
    write(get_engine(), lambda s: s.execute(delete(StoredVerdict).where(StoredVerdict.claim_key != "sop")))
    assert [s["claim_key"] for s in SV.for_group("half")] == ["sop"]
    # three processes settle it at once: each claim is stored once, none of them fails, "sop" keeps its date
    procs = [subprocess.Popen([sys.executable, "-c", "from services.lab import experiments; experiments.settle('half')"],
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    again = SV.for_group("half")
    assert sorted(s["claim_key"] for s in again) == sorted(first)
    assert {s["claim_key"]: s["created_at"] for s in again}["sop"] == first["sop"]


def test_reading_a_report_stores_nothing_and_settling_stores_the_verdicts(lab_env: Path) -> None:
    from sqlalchemy import delete

    from analysis.results_db.engine import get_engine, write
    from analysis.results_db.schema import StoredVerdict

    _fake("read", {"sop": [0.80, 0.82, 0.81], "nsp": [0.50, 0.53, 0.51]})
    write(get_engine(), lambda s: s.execute(delete(StoredVerdict)))
    rep = experiments.report("read")
    assert rep.state == "complete" and all(c.verdict for c in rep.claims)  # decided on the read...
    assert SV.for_group("read") == [] and experiments.results_so_far() == []  # ... and nothing written
    experiments.settle("read")
    assert {s["claim_key"] for s in SV.for_group("read")} == {c.key for c in rep.claims}


def test_a_cancelled_run_makes_the_experiment_partial_without_a_verdict(lab_env: Path) -> None:
    _fake("cut", {"sop": [0.8, 0.8, 0.8], "nsp": [0.5, 0.5, 0.5]}, statuses={"cut-sop-s2": "cancelled"})
    rep = experiments.report("cut")
    assert rep.state == "partial" and rep.missing == ["cut-sop-s2 (cancelled)"]
    assert all(c.verdict is None and "partial" in c.why_none for c in rep.claims)
    assert SV.for_group("cut") == []


def test_an_experiment_stored_as_thorough_before_the_budget_shrank_reads_as_the_gpu_budget_it_ran(lab_env: Path) -> None:
    from services.lab import run_queue

    base = lab.TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=1200, lr=1e-3)
    gpu = presets.budget_of("scaling", "gpu")
    # what the page stored before ada3903: the GPU budget's settings (then thorough's) under the name "thorough"
    run_queue.submit("scaling", claims.apply_budget(base, gpu), "old", start=False, seeds=gpu.seeds, widths=gpu.widths, budget="thorough")
    experiments.submit("scaling", base, "new", "thorough", start=False)
    experiments.submit("scaling", base, "big", "gpu", start=False)
    assert [experiments.report(g).budget for g in ("old", "new", "big")] == ["gpu", "thorough", "gpu"]
    # a plan that matches no budget (a custom width list) keeps its stored name
    run_queue.submit("scaling", claims.apply_budget(base, gpu), "odd", start=False, seeds=1, widths=(16, 48, 80), budget="thorough")
    assert experiments.report("odd").budget == "thorough"
    # ... and says that its runs follow none of the budgets as they are now; a plan that matches one says nothing
    thorough = presets.budget_of("scaling", "thorough")
    assert f"{thorough.seeds} seeds × {thorough.steps:,} steps" in experiments.report("odd").plan_note
    assert "follow none" in experiments.report("odd").to_dict()["plan_note"]
    assert [experiments.report(g).plan_note for g in ("old", "new", "big")] == ["", "", ""]
    assert "plan_note" not in experiments.report("new").to_dict()


def test_a_distil_experiment_of_the_thorough_plan_before_it_shrank_says_it_ran_another_plan(lab_env: Path) -> None:
    from services.lab import run_queue

    base = lab.TrainConfig(layers=2, hidden=128, heads=2, ffn=512, seq_len=64, batch=64, steps=1200, lr=1e-3)
    thorough = presets.budget_of("distil", "thorough")
    # what "thorough" planned before 2026-12-06: 4 seeds x 2,000 steps, each seed training its teacher (none shipped)
    with pytest.MonkeyPatch.context() as before:
        before.setattr(distil, "teacher_for", lambda base: "")
        run_queue.submit("distil", claims.apply_budget(base, replace(thorough, seeds=4, steps=2000)), "was", start=False,
                         seeds=4, budget="thorough")
    experiments.submit("distil", base, "now", "thorough", start=False)
    was, now = experiments.report("was"), experiments.report("now")
    assert (was.budget, now.budget) == ("thorough", "thorough")
    assert now.plan_note == ""
    # the scratch student trains the steps the distilled run's FLOPs buy it: two step counts in one experiment
    assert "2,000 to 3,063 steps" in was.plan_note and f"{thorough.seeds} seeds × {thorough.steps:,} steps" in was.plan_note
    # the plan of now, but fine-tuned on the suite with WiC (before 2026-12-07): the note names both task lists
    run_queue.submit("distil", claims.apply_budget(base, thorough), "wic", start=False, seeds=thorough.seeds, budget="thorough",
                     downstream=claims.THOROUGH_SUITE)
    wic = experiments.report("wic")
    assert wic.budget == "thorough" and "fine-tuned on supersense, wic, where the budget now fine-tunes on supersense" in wic.plan_note


def test_one_seed_shows_the_runs_and_no_verdict(lab_env: Path) -> None:
    _fake("one", {"sop": [0.8], "nsp": [0.5]}, seeds=1)
    rep = experiments.report("one")
    assert rep.state == "complete"
    assert all(c.verdict["label"] == V.NO_VERDICT for c in rep.claims)
    assert "2 seeds" in rep.claims[0].sentence


@pytest.mark.slow
def test_a_preset_trains_fine_tunes_its_checkpoints_and_ends_in_a_verdict(lab_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from services import worker

    monkeypatch.setenv("BFE_LAB_CONCURRENCY", "0")  # this test is the only worker: a run's end dispatches nothing

    ids = lab.submit("albert", replace(TINY, steps=10), "e2e", seeds=2, downstream=SUITE, start=False)
    assert len(ids) == 4
    for rid in ids:
        R.start_run(rid)  # claimed, as dispatch would
        assert worker.main([str(rid)]) == 0
    runs = [R.get_run(rid) for rid in ids]
    assert [r["status"] for r in runs] == ["finished"] * 4
    for r in runs:
        ds = r["evaluation"]["downstream"]["supersense"]
        assert 0 <= ds["accuracy"] <= 1 and len(ds["correct"]) == 30 and ds["baseline"] > 0
        assert ("random_accuracy" in ds) == r["config"]["control"]
    assert sum(r["config"]["control"] for r in runs) == 2  # one per seed: both arms are BERTs
    stored = SV.for_group("e2e")  # settled by the last worker, without a page open
    assert {s["claim_key"] for s in stored} == {"sop", "downstream", "downstream:pos"}
    assert all(s["label"] in V.LABELS for s in stored)


def test_the_lab_page_shows_a_finished_presets_verdict_and_the_results_so_far(lab_env: Path) -> None:
    from streamlit.testing.v1 import AppTest

    _fake("shown", {"sop": [0.80, 0.82, 0.81], "nsp": [0.50, 0.53, 0.51]})
    _fake("undecided", {"sop": [0.70, 0.60, 0.66], "nsp": [0.64, 0.66, 0.62]})
    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.query_params["lb_show"] = "shown"
    at.run()
    at.switch_page("views/lab.py").run()
    assert not at.exception, at.exception
    assert any(sub.value == "Verdict" for sub in at.subheader)
    assert any("Agrees: effect +0.297" in x.value and "Holm" in x.value for x in at.success)
    assert any("Lan et al. 2019, ALBERT, Table 5" in m.value for m in at.markdown)
    effects = [d.value for d in at.dataframe if "effect over random init" in d.value]
    assert effects and (effects[0]["95% low"] > 0).all() and "verdict" not in " ".join(effects[0].columns)  # context, no label
    assert any("not a tested claim" in c.value for c in at.caption)
    so_far = [d.value for d in at.dataframe if "verdict" in d.value.columns and "experiment" in d.value.columns]
    # every replication of the preset, not only the latest (a later "agrees" does not replace an earlier "cannot tell")
    assert so_far and set(so_far[0]["experiment"]) == {"./lab?lb_show=undecided", "./lab?lb_show=shown"}
    at.query_params["lb_show"] = "undecided"
    at.session_state["lb_show"] = "undecided"
    at.run()
    assert not at.exception and any("Cannot tell" in x.value for x in at.warning)
    # a new replication with the seeds the two experiments used is flagged, and one click moves it past them
    assert experiments.seeds_taken("albert", R.list_runs()) == {TINY.seed, TINY.seed + 1, TINY.seed + 2}
    assert experiments.fresh_seed("albert", R.list_runs()) == TINY.seed + 3 and experiments.fresh_seed("lion", R.list_runs()) == 0
    at.session_state["lb_seed"] = TINY.seed + 2
    at.run()
    assert any("would repeat them" in w.value and f"Fresh seeds start at {TINY.seed + 3}" in w.value for w in at.warning)
    at.button(key="lb_fresh_seed").click().run()
    assert at.session_state["lb_seed"] == TINY.seed + 3 and not any("would repeat them" in w.value for w in at.warning)


@pytest.mark.slow  # its runs start training in a worker process, which the test then stops: about 30 s
def test_the_page_starts_a_preset_at_its_budget(lab_env: Path) -> None:
    at = draw_page("views/lab.py", **{"lb_preset": "albert", "lb_budget": "classroom", "lb_layers": "1", "lb_hidden": "32", "lb_ffn": "64",
                 "lb_name": "budgeted"})
    planned = at.dataframe[0].value
    assert len(planned) == 6 and set(planned["steps"]) == {presets.BUDGETS["albert"]["classroom"].steps}
    [start] = [b for b in at.main.button if b.label.startswith("Start")]  # the page's own, not the sidebar's "Start a class"
    start.click().run()
    assert not at.exception, at.exception
    assert not [e for e in at.error if "unexpected" in e.value]
    frame = R.list_runs(group="budgeted")
    assert len(frame) == 6
    cfgs = list(frame["config"])
    assert {c["budget"] for c in cfgs} == {"classroom"} and {c["replicate"] for c in cfgs} == {0, 1, 2}
    assert all(c["downstream"]["tasks"] == ["supersense"] and c["batch"] == 32 for c in cfgs)
    for rid in frame["id"]:
        lab.cancel(int(rid))


def test_a_scaling_experiment_ends_in_a_fitted_exponent_and_flags_data_limited_runs(lab_env: Path) -> None:
    """Kaplan's exponent inside the interval agrees; a slope with the sign but not the value agrees on direction only.
    Runs with fewer than 20 tokens per parameter (all of them counted) are flagged in the verdict and in "Results so
    far", and the fit without them is shown."""
    import math

    widths = (32, 64, 128, 256)
    ids = lab.submit("scaling", replace(TINY, steps=100), "sc", seeds=2, widths=widths, start=False)
    sizes = {rid: lab.size(TrainConfig.from_stored(R.get_run(rid)["config"])) for rid in ids}
    tokens = 25 * max(z.parameters for z in sizes.values() if z.parameters < max(x.parameters for x in sizes.values()))
    for rid in ids:
        run = R.get_run(rid)
        n = sizes[rid].non_embedding
        R.start_run(rid)
        slope = 0.076 + 0.002 * (run["config"]["replicate"] - 0.5)  # seeds fit slightly different exponents
        R.finish_run(rid, "finished", evaluation={"held_out_loss": 9 * n ** -slope * math.exp(0.001 * run["config"]["replicate"])},
                     tokens=tokens, seconds=1.0)  # 25 tokens per parameter at the third width, under 20 at the widest
    experiments.settle("sc")
    [claim] = experiments.report("sc").claims
    assert claim.verdict["label"] == V.AGREES and claim.verdict["estimate"] == pytest.approx(0.076, abs=0.005)
    assert {d["run"] for d in claim.detail["data_limited"]} == {"sc-h256-s0", "sc-h256-s1"}
    assert "2 of 8 runs are data-limited" in claim.sentence and "without them: agrees" in claim.sentence
    assert claim.detail["without_data_limited"]["points"] == 6
    assert claim.detail["data_limited_why"].startswith("Kaplan's L(N) holds")  # what the page says under their names
    [row] = experiments.results_so_far()
    assert "2 run(s) data-limited" in row["notes"] and "without them: agrees" in row["notes"]
    shallow = [(s, n, 9 * n ** -(0.02 + 0.001 * s)) for s in range(2) for n in (1e4, 1e5, 1e6)]
    flat = V.scaling_verdict(shallow)
    assert flat.label == V.AGREES_ON_DIRECTION and not flat.reference_inside and "not inside the band" in flat.sentence
    same = V.scaling_verdict([(s, n, 9 * n ** -0.076 * math.exp(0.001 * s)) for s in range(2) for n in (1e4, 1e5, 1e6)])
    assert same.label == V.CANNOT_TELL and "no measurable spread" in same.sentence.lower()  # every seed fitted the same slope
    wide = V.scaling_verdict([(s, n, 9 * n ** -(0.076 + 0.06 * (s - 0.5))) for s in range(2) for n in (1e4, 1e5, 1e6)])
    assert wide.low < 0.076 < wide.high and wide.label != V.AGREES  # holding the value is not matching it


def test_an_isoflop_grids_data_limited_runs_are_named_and_kept_in_the_fit(lab_env: Path) -> None:
    """In an IsoFLOP grid the large sizes of a budget see few tokens by design: they are named in the sentence, and no
    fit without them is tried (it would leave fewer than 3 sizes per budget)."""
    widths = (32, 64, 128, 256)
    ids = lab.submit("isoflop", replace(TINY, steps=100), "iso", seeds=2, widths=widths, start=False)
    for rid in ids:
        run = R.get_run(rid)
        cfg = TrainConfig.from_stored(run["config"])
        tokens = cfg.steps * cfg.batch * cfg.seq_len
        compute = lab.size(cfg).flops_per_token * tokens
        best = 5e4 * (compute / 1e11) ** 0.5  # the best size grows with the budget
        loss = 3 + 0.2 * math.log(lab.size(cfg).non_embedding / best) ** 2 + 0.001 * run["config"]["replicate"]
        R.start_run(rid)
        R.finish_run(rid, "finished", evaluation={"held_out_loss": loss}, tokens=tokens, seconds=1.0)
    experiments.settle("iso")
    [claim] = experiments.report("iso").claims
    assert claim.detail["data_limited"] and "see few tokens by design; they stay in the fit" in claim.sentence
    assert "without_data_limited" not in claim.detail and "without them" not in claim.sentence
    assert len(claim.detail["points"]) == len(ids)


def test_an_isoflop_optimum_at_the_edge_of_the_widths_cannot_tell() -> None:
    pts = []
    for s in range(2):
        for c in (1e12, 1e13):
            best = 1e5 * (c / 1e12) ** 0.5
            for n in (best / 8, best / 2.8, best, best * 2.8, best * 8) if c == 1e12 else (best / 8, best / 4, best / 2):
                pts.append((s, c, n, 3 + 0.2 * math.log(n / best) ** 2 + 0.001 * s))
    v = V.isoflop_verdict(pts)
    assert v.label == V.CANNOT_TELL and v.edges == (1e13,) and "edge of the widths tried" in v.sentence


def test_an_edge_optimum_is_said_whatever_the_label() -> None:
    """A clipped optimum only lowers confidence: a verdict that already cannot tell or disagrees still names it."""
    pts = []
    for s in range(3):
        for c in (1e12, 1e13):
            best = 1e5 * (c / 1e12) ** -0.5 if c == 1e13 else 1e5  # the optimum shrinks as the budget grows
            for n in (best / 8, best / 2.8, best, best * 2.8, best * 8) if c == 1e12 else (best / 8, best / 4, best / 2):
                pts.append((s, c, n, 3 + 0.2 * math.log(n / best) ** 2 + 0.001 * s * math.log(n)))
    v = V.isoflop_verdict(pts)
    assert v.label in (V.CANNOT_TELL, V.DISAGREES) and v.edges and "edge of the widths tried" in v.sentence


def test_what_each_budget_took_and_decided_is_data_naming_committed_outputs() -> None:
    """data/lab/budgets-measured.json, not code: every budget a preset offers has its minutes there, every record names
    a committed bench output, and nothing there names a preset or budget the lab does not offer."""
    import json

    from tests.helpers import ROOT

    entries = json.loads(claims.MEASURED_FILE.read_text(encoding="utf-8"))["budgets"]
    offered = {(p, b) for p, budgets in presets.BUDGETS.items() for b in budgets}
    assert {(e["preset"], e["budget"]) for e in entries} == offered
    assert all(presets.budget_of(p, b).minutes.startswith(("Measured", "Estimated")) for p, b in offered)
    for key, record in claims.DECIDED_HERE.items():
        assert record.decides in (True, False, None) and record.said and (ROOT / record.file).is_file(), key
    assert claims.record_of("lion-tuned", "thorough").decides is False  # run here (27.7 min): cannot tell, and it says so
    assert claims.record_of("lion-tuned", "gpu").decides is None  # never run here: it says so


def test_a_preset_is_one_object_whose_claims_say_how_they_are_decided(lab_env: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seam: a preset registered with its own kind of claim is planned, reported and decided with nothing else
    edited (no table of measures, no switch on the preset's name), and its entry names the chart that draws it."""
    from dataclasses import dataclass
    from typing import ClassVar

    @dataclass(frozen=True)
    class Counted(claims.Claim):
        figure: ClassVar[str] = "trend"

        def entries(self, reading: claims.Reading) -> list[claims.Entry]:
            return [claims.Entry({"key": self.key, "measure": self.measure, "figure": self.figure, "state": reading.state,
                                  "runs": sorted(r["arm"] for r in reading.finished)})]

    planted = replace(presets.PRESETS["xlnet"], name="planted", claims=(Counted("count", "runs", "Two arms ran.", "here"),))
    monkeypatch.setitem(presets.PRESETS, "planted", planted)
    ids = lab.submit("planted", TINY, "pl", seeds=1, start=False)
    assert len(ids) == 2
    [waiting] = experiments.report("pl").claims
    assert waiting.detail["state"] == "running" and waiting.detail["runs"] == []
    for rid in ids:
        _finish(rid, {"held_out_loss": 5.0})
    [entry] = experiments.report("pl").claims
    assert (entry.key, entry.measure, entry.figure, entry.detail) == ("count", "runs", "trend", {"state": "complete", "runs": ["mlm", "plm"]})
    assert entry.to_dict() == {"key": "count", "measure": "runs", "figure": "trend", "state": "complete", "runs": ["mlm", "plm"]}
    assert entries.ClaimEntry.from_dict(entry.to_dict()) == entry  # stored as its dict, read back the same
    stored = {"key": "k", "sentence": None, "verdict": None, "label": "", "points": [1]}  # written back as it was read
    assert entries.ClaimEntry.from_dict(stored).to_dict() == stored
    assert entries.ClaimEntry.from_dict({"key": "old", "measure": "speedup"}).figure == "ratio"  # stored before entries named their chart
    for name, preset in presets.PRESETS.items():  # every registered kind says how it is decided
        assert preset.name == name and all(type(c).entries is not claims.Claim.entries for c in preset.claims), name
