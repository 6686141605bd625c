"""The optimizer presets: Lion against the paper's Program 1 step for step, Lion's one state in the memory sizing
and measured in a run, the growing-batch schedules (rate and batch per update, equal tokens, fewer updates), and
verdicts on a lower-is-better measure (held-out loss) from synthetic finished runs."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from analysis import verdicts as V
from analysis.results_db import runs as R
from core.errors import InvalidConfig
from models.pretrain import TrainConfig, train
from models.pretrain.phases import phase_lengths, update_plan, updates_of
from models.training import optimizer_and_schedule
from services import lab
from services.lab import claim_entries, experiments, presets
from services.lab.presets import grow_batch, lion_tuned
from tests.helpers.pages import run as draw_page

TINY = TrainConfig(layers=1, hidden=32, heads=2, ffn=64, seq_len=32, batch=8, steps=30, lr=3e-3, corpus_lines=200)


# ------------------------------------------------------------------------------------------ Lion


def program_1(theta: torch.Tensor, m: torch.Tensor, g: torch.Tensor, lr: float, wd: float,
              b1: float = 0.9, b2: float = 0.99) -> tuple[torch.Tensor, torch.Tensor]:
    """Chen et al. 2023 (arXiv 2302.06675), Program 1, written out as the oracle."""
    update = torch.sign(b1 * m + (1 - b1) * g)
    theta = theta - lr * (update + wd * theta)
    m = b2 * m + (1 - b2) * g
    return theta, m


def test_lion_is_the_papers_program_1_step_for_step() -> None:
    gen = torch.Generator().manual_seed(0)
    # float64: the oracle and the library differ only in the order of operations
    start = [torch.randn(5, 3, generator=gen, dtype=torch.float64), torch.randn(7, generator=gen, dtype=torch.float64)]
    params = [torch.nn.Parameter(t.clone()) for t in start]
    lr, wd = 1e-2, 0.3
    opt, sched = optimizer_and_schedule(params, lr, steps=20, warmup=0.0, schedule="constant", weight_decay=wd, optimizer="lion")
    theta = [t.clone() for t in start]
    m = [torch.zeros_like(t) for t in start]
    for _ in range(20):
        grads = [torch.randn(t.shape, generator=gen, dtype=torch.float64) for t in start]
        for p, g in zip(params, grads, strict=True):
            p.grad = g.clone()
        opt.step()
        sched.step()
        for i, g in enumerate(grads):
            theta[i], m[i] = program_1(theta[i], m[i], g, lr, wd)
        for p, t in zip(params, theta, strict=True):
            torch.testing.assert_close(p.detach(), t, rtol=0, atol=1e-12)  # a flipped sign would be lr = 1e-2 off
    # one state per parameter (the momentum), the same as the oracle's
    states = [opt.state[p] for p in params]
    assert all(list(s) == ["exp_avg"] for s in states)
    for s, mm in zip(states, m, strict=True):
        torch.testing.assert_close(s["exp_avg"], mm, rtol=0, atol=1e-12)  # a flipped sign would be lr = 1e-2 off
    # and not AdamW: the same gradients through AdamW end elsewhere
    other = [torch.nn.Parameter(t.clone()) for t in start]
    adamw, _ = optimizer_and_schedule(other, lr, steps=20, warmup=0.0, schedule="constant", weight_decay=wd)
    for p in other:
        p.grad = torch.ones_like(p)
    adamw.step()
    assert len(adamw.state[other[0]]) == 3  # step, exp_avg, exp_avg_sq
    with pytest.raises(InvalidConfig):
        optimizer_and_schedule(other, lr, 10, optimizer="sgd")


def test_the_sizing_counts_one_state_for_lion_and_two_for_adamw() -> None:
    for objective in ("mlm", "electra"):
        adamw = lab.size(replace(TINY, objective=objective))
        lion = lab.size(replace(TINY, objective=objective, optimizer="lion"))
        assert adamw.parameters == lion.parameters
        # one fp32 state fewer per parameter, and no AdamW step counters (4 bytes per tensor, a few dozen tensors)
        assert 4 * adamw.parameters < adamw.memory_bytes - lion.memory_bytes <= 4 * adamw.parameters + 4 * 200
    with pytest.raises(InvalidConfig):
        replace(TINY, optimizer="adam").validate()
    with pytest.raises(InvalidConfig):
        replace(TINY, weight_decay=-0.1).validate()


def test_a_lion_run_trains_and_measures_its_one_state() -> None:
    lion = train(replace(TINY, optimizer="lion", lr=1e-3, weight_decay=0.03, steps=20), save=False)
    adamw = train(replace(TINY, steps=20), save=False)
    n = lion.parameters
    assert lion.evaluation["optimizer_state_bytes"] == 4 * n  # the momentum, fp32
    assert 8 * n <= adamw.evaluation["optimizer_state_bytes"] <= 8 * n + 4 * 1000  # two moments + a step per tensor
    assert lion.evaluation["parameter_updates"] == adamw.evaluation["parameter_updates"] == 20
    first, last = lion.curve[0][1], sum(v for _, v in lion.curve[-5:]) / 5
    assert last < first  # it learns


def test_the_lion_preset_uses_the_papers_settings_at_equal_steps() -> None:
    planned = lab.plan_runs("lion", replace(TINY, steps=300, weight_decay=0.02), "g", seeds=2)
    by = {(p.arm, p.replicate): p.config for p in planned}
    assert sorted({a for a, _ in by}) == ["adamw", "lion"]
    for rep in (0, 1):
        lion, adamw = by["lion", rep], by["adamw", rep]
        assert (lion.optimizer, adamw.optimizer) == ("lion", "adamw") and lion.steps == adamw.steps == 300
        assert lion.lr == pytest.approx(adamw.lr / 3) and lion.weight_decay == pytest.approx(adamw.weight_decay * 3)
        assert 3 <= adamw.lr / lion.lr <= 10 and 3 <= lion.weight_decay / adamw.weight_decay <= 10  # the paper's range
        assert lion.lr * lion.weight_decay == pytest.approx(adamw.lr * adamw.weight_decay)  # the same decay strength
        assert lion.seed == adamw.seed == rep


# ------------------------------------------------------------------------------------------ growing batch

GROW = replace(TINY, steps=300, schedule="constant", warmup=0.06, phase_count=3, phase_factor=5)


def test_the_decay_arm_divides_the_rate_and_the_grow_arm_multiplies_the_batch() -> None:
    decay, grow = update_plan(replace(GROW, phases="decay")), update_plan(replace(GROW, phases="grow"))
    assert phase_lengths(GROW) == [100, 100, 100]
    warm = int(0.06 * 300)
    # decay: one batch per update; after the warm-up the rate is lr, lr/5, lr/25 in the three phases
    assert [u.micro_batches for u in decay] == [1] * 300
    assert [u.lr_factor for u in decay[warm:]] == pytest.approx([1.0] * (100 - warm) + [0.2] * 100 + [0.04] * 100)
    assert [u.lr_factor for u in decay[:warm]] == pytest.approx([i / warm for i in range(warm)])
    # grow: the rate stays (after the same warm-up), the batch is ×1, ×5, ×25 at the same points of the tokens
    assert [u.micro_batches for u in grow] == [1] * 100 + [5] * 20 + [25] * 4
    assert [u.lr_factor for u in grow[warm:]] == pytest.approx([1.0] * (124 - warm))
    assert [u.lr_factor for u in grow[:warm]] == pytest.approx([u.lr_factor for u in decay[:warm]])
    # the same tokens, and the phase boundaries at the same micro-batch in both arms
    assert sum(u.micro_batches for u in grow) == sum(u.micro_batches for u in decay) == GROW.steps

    def starts(plan: list) -> list[int]:
        """The micro-batch at which each phase begins."""
        seen, out = 0, {}
        for u in plan:
            out.setdefault(u.phase, seen)
            seen += u.micro_batches
        return list(out.values())

    assert starts(grow) == starts(decay) == [0, 100, 200]
    assert (updates_of(replace(GROW, phases="grow")), updates_of(replace(GROW, phases="decay")), updates_of(GROW)) == (124, 300, 300)
    # uneven steps: the later phases round to whole grown batches, the first takes the rest; the sum stays
    odd = replace(GROW, steps=301, phases="grow")
    assert phase_lengths(odd) == [101, 100, 100] and sum(u.micro_batches for u in update_plan(odd)) == 301


def test_phase_settings_are_bounded() -> None:
    for bad in ({"phases": "cosine"}, {"phases": "grow", "phase_count": 1}, {"phases": "grow", "phase_factor": 1},
                {"phases": "grow", "phase_count": 6, "phase_factor": 10},  # 10^5 batches per update
                {"phases": "grow", "steps": 60}):  # phase 3 needs 25 micro-batches: 3 × 25 > 60
        with pytest.raises(InvalidConfig):
            replace(GROW, **bad).validate()
    with pytest.raises(InvalidConfig):
        update_plan(GROW)  # no phases
    assert replace(GROW, phase_count=1, phase_factor=1).validate()  # ignored while phases are off


def test_grow_and_decay_runs_see_the_same_tokens_in_different_updates() -> None:
    small = replace(TINY, steps=24, schedule="constant", phase_count=3, phase_factor=2)
    grow = train(replace(small, phases="grow"), save=False)
    decay = train(replace(small, phases="decay"), save=False)
    assert grow.tokens == decay.tokens > 0  # the same micro-batches, drawn from the same seed
    assert decay.evaluation["parameter_updates"] == 24
    assert grow.evaluation["parameter_updates"] == updates_of(replace(small, phases="grow")) == 8 + 4 + 2
    assert len(grow.curve) == len(decay.curve) == 24
    assert grow.curve[0] == decay.curve[0]  # the same first batch at the same weights
    assert grow.curve[-1] != decay.curve[-1]


def test_the_grow_batch_preset_plans_equal_tokens() -> None:
    planned = lab.plan_runs("grow-batch", replace(TINY, steps=300), "g", seeds=2)
    by = {(p.arm, p.replicate): p.config for p in planned}
    for rep in (0, 1):
        grow, decay = by["grow", rep], by["decay", rep]
        assert (grow.phases, decay.phases) == ("grow", "decay")
        assert grow.steps * grow.batch == decay.steps * decay.batch and grow.lr == decay.lr
        assert (grow.phase_factor, grow.phase_count) == (grow_batch.FACTOR, grow_batch.PHASES)
        assert updates_of(grow) < updates_of(decay)
        assert lab.size(grow).flops_per_step * grow.steps == lab.size(decay).flops_per_step * decay.steps


# ------------------------------------------------------------------------------------------ lower-is-better verdicts


def _finish_all(preset: str, group: str, loss: dict[str, list[float]], extra: dict[str, dict] | None = None) -> None:
    for rid in lab.submit(preset, TINY if preset == "lion" else replace(TINY, steps=300), group, seeds=3, start=False):
        run = R.get_run(rid)
        arm, rep = run["config"]["arm"], run["config"]["replicate"]
        R.start_run(rid)
        R.finish_run(rid, "finished", evaluation={"held_out_loss": loss[arm][rep], "mask_loss": loss[arm][rep] + 0.2,
                                                  "unigram_loss": 6.8, **(extra or {}).get(arm, {})},
                     tokens=1000, seconds=1.0)  # both arms well below the token counts: the precondition holds
    experiments.settle(group)


def test_a_lower_loss_agrees_and_a_higher_one_disagrees(lab_env: Path) -> None:
    adamw = [5.00, 5.10, 4.95]
    jitter = (0.0, 0.01, -0.01)  # seeds differ a little: tied differences would be no measurable spread

    def moved(by: float) -> list[float]:
        return [x + by + j for x, j in zip(adamw, jitter, strict=True)]

    _finish_all("lion", "lo", {"lion": moved(-0.10), "adamw": adamw},
                {"lion": {"optimizer_state_bytes": 4 * 2**20}, "adamw": {"optimizer_state_bytes": 8 * 2**20}})
    rep = experiments.report("lo")
    [c] = rep.claims
    assert c.measure == "held_out_loss" and c.verdict["label"] == V.AGREES
    v = c.verdict
    assert v["mean_a"] == pytest.approx(sum(adamw) / 3 - 0.10) and v["mean_b"] == pytest.approx(sum(adamw) / 3)  # raw losses
    assert v["effect"] == pytest.approx(0.10) and v["low"] > 0 and v["lower_is_better"]  # b's loss − a's loss
    assert dict(c.detail["scores"]["lion"])[0] == pytest.approx(4.90)  # the chart's points are the raw losses
    assert c.sentence.startswith("Lower is better") and "Agrees" in c.sentence
    assert c.detail["arm_facts"] == {"lion": {"optimizer state MB": 4.0}, "adamw": {"optimizer state MB": 8.0}}
    assert "lion 4.00 optimizer state MB" in c.sentence
    [row] = [r for r in experiments.results_so_far() if r["experiment"] == "lo"]
    assert row["verdict"] == V.AGREES and row["effect"] == pytest.approx(0.10) and "lower is better" in row["notes"]
    # Lion's loss higher than AdamW's by more than the margin (0.05): disagrees
    _finish_all("lion", "hi", {"lion": moved(0.20), "adamw": adamw})
    [c] = experiments.report("hi").claims
    assert c.verdict["label"] == V.DISAGREES and c.verdict["high"] < -0.05
    assert "arm_facts" not in c.detail  # nothing recorded: nothing to put beside it
    # both arms at the corpus's token counts: "matches" says nothing, whatever the losses (the precondition)
    at_counts = claim_entries.arm_claim(presets.CLAIMS["lion"][0], "held_out_loss", [
        {"arm": arm, "replicate": i, "kind": "bert", "id": 10 * k + i,
         "evaluation": {"held_out_loss": v, "mask_loss": 6.85 + 0.01 * i, "unigram_loss": 6.84}}
        for k, (arm, vals) in enumerate({"lion": [7.10, 7.12, 7.11], "adamw": [7.11, 7.12, 7.10]}.items())
        for i, v in enumerate(vals)], "complete")
    assert at_counts["verdict"]["label"] == V.CANNOT_TELL and "rule would read “agrees”" in at_counts["sentence"]
    # higher but within the margin: still "at least as good as" (>=), never for the strict claim
    _finish_all("lion", "near", {"lion": moved(0.01), "adamw": adamw})
    [c] = experiments.report("near").claims
    assert c.verdict["label"] == V.AGREES and c.verdict["effect"] == pytest.approx(-0.01)


def test_a_strict_lower_is_better_claim_reads_its_sign_right() -> None:
    finished = [{"arm": arm, "replicate": i, "kind": "bert", "id": 10 * k + i,
                 "evaluation": {"held_out_loss": v, "mask_loss": v + 0.2, "unigram_loss": 6.8}}
                for k, (arm, values) in enumerate({"a": [3.0, 3.1, 3.05], "b": [3.5, 3.55, 3.6]}.items())
                for i, v in enumerate(values)]
    lower = claim_entries.arm_claim(claim_entries.ArmClaim("x", "held_out_loss", "a's loss is lower", "s", "a", "b", ">"),
                                 "held_out_loss", finished, "complete")
    higher = claim_entries.arm_claim(claim_entries.ArmClaim("x", "held_out_loss", "b's loss is lower", "s", "b", "a", ">"),
                                  "held_out_loss", finished, "complete")
    assert lower["verdict"]["label"] == V.AGREES and higher["verdict"]["label"] == V.DISAGREES
    assert lower["verdict"]["mean_a"] == pytest.approx(3.05) and higher["verdict"]["mean_a"] == pytest.approx(3.55)
    # an accuracy (higher is better) on the same numbers reads the other way
    acc = [{**r, "evaluation": {"sop_accuracy": r["evaluation"]["held_out_loss"] / 10 + 0.4}} for r in finished]
    assert claim_entries.arm_claim(claim_entries.ArmClaim("x", "sop_accuracy", "", "s", "a", "b", ">"), "sop_accuracy", acc,
                                "complete")["verdict"]["label"] == V.DISAGREES


def test_the_grow_batch_verdict_states_each_arms_updates(lab_env: Path) -> None:
    decay = [5.0, 5.1, 5.05]
    _finish_all("grow-batch", "gb", {"grow": [x + j for x, j in zip(decay, (0.01, 0.02, 0.0), strict=True)], "decay": decay},
                {"grow": {"parameter_updates": 124}, "decay": {"parameter_updates": 300}})
    [c] = experiments.report("gb").claims
    assert c.verdict["label"] == V.AGREES
    assert c.detail["arm_facts"] == {"grow": {"parameter updates": 124}, "decay": {"parameter updates": 300}}
    assert "grow 124 parameter updates" in c.sentence and "decay 300 parameter updates" in c.sentence


# ------------------------------------------------------------------------------------------ the page


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["lion", "grow-batch"])
def test_the_lab_page_plans_the_optimizer_presets(lab_env: Path, preset: str) -> None:
    at = draw_page("views/lab.py", **{"lb_preset": preset, "lb_budget": "classroom", "lb_layers": "1", "lb_hidden": "32", "lb_ffn": "64",
                 "lb_name": "opt"})
    planned = at.dataframe[0].value
    arms = ("lion", "adamw") if preset == "lion" else ("grow", "decay")
    assert list(planned["run"]) == [f"opt-{arm}-s{i}" for i in range(3) for arm in arms]
    assert set(planned["steps"]) == {300}
    memory = dict(zip(planned["run"], planned["memory (MB, predicted)"], strict=True))
    if preset == "lion":
        assert memory["opt-lion-s0"] < memory["opt-adamw-s0"]  # one optimizer state instead of two
    else:
        assert memory["opt-grow-s0"] == memory["opt-decay-s0"]  # accumulation: the memory of one batch
    from services.lab.presets import budget_of

    assert budget_of(preset, "classroom").minutes in " ".join(c.value for c in at.caption)  # stated before Start


def test_a_tuned_verdict_run_is_not_claimed_before_its_sweep_ends_and_fails_by_name_when_nothing_can_be_chosen(lab_env: Path) -> None:
    """With slots to spare, the queue still passes over a fresh seed's run while one of its optimizer's tuning runs is
    queued or running. As it starts, a run whose sweep diverged at every rate (each diverged run evaluated at its last
    good weights, as the loop does: a finite loss that must not count) fails saying no rate can be chosen, and one
    whose sweep was cancelled fails saying the sweep did not end."""
    from services.lab.training import prepare

    def starting(name: str) -> tuple[dict, TrainConfig]:
        row = R.get_run(rows[name])
        return row, TrainConfig.from_stored(row["config"])

    ids = lab.submit("lion-tuned", TINY, "lq", seeds=4, start=False)
    rows = {R.get_run(i)["name"]: i for i in ids}
    assert lab.waiting_runs(R.list_runs()) == {i for n, i in rows.items() if "-lr" not in n}  # the page says so
    claimed = [R.claim_next(100) for _ in range(len(ids))]
    assert sorted(i for i in claimed if i is not None) == sorted(i for n, i in rows.items() if "-lr" in n)  # the sweep only
    for n, i in rows.items():
        if n.startswith("lq-adamw-lr"):
            R.finish_run(i, "finished", evaluation={"held_out_loss": 5.0}, tokens=1, seconds=1.0)
    assert [R.claim_next(100), R.claim_next(100), R.claim_next(100)] == [rows["lq-adamw-s2"], rows["lq-adamw-s3"], None]
    for n, i in rows.items():
        if n.startswith("lq-lion-lr"):
            R.finish_run(i, "failed", message="The loss became NaN at step 2.", evaluation={"held_out_loss": 4.0})
    assert R.claim_next(100) == rows["lq-lion-s2"]  # its sweep ended
    with pytest.raises(InvalidConfig, match="No learning rate to train lion at"):
        prepare(*starting("lq-lion-s2"))
    assert prepare(*starting("lq-adamw-s2")).lr == 2.0 ** lion_tuned.LOG2_RATES[0]  # equal means: the lowest rate
    assert R.get_run(rows["lq-adamw-s2"])["config"]["tuned_rate"] == "2e-14"
    for i in rows.values():
        if R.get_run(i)["status"] in ("queued", "running"):
            R.finish_run(i, "failed", message="closed by the test")
    rows = {R.get_run(i)["name"]: i for i in lab.submit("lion-tuned", TINY, "lr", seeds=4, start=False)}
    for n, i in rows.items():
        if "-lr2e" in n:  # closed while queued, as a cancel does
            R.finish_run(i, "cancelled" if n == "lr-lion-lr2e-9-s1" else "finished", evaluation={"held_out_loss": 5.0})
    assert R.claim_next(100) == rows["lr-lion-s2"]
    with pytest.raises(InvalidConfig, match="sweep did not end: lr-lion-lr2e-9-s1 \\(cancelled\\)"):
        prepare(*starting("lr-lion-s2"))
    R.delete_run(rows.pop("lr-adamw-lr2e-9-s1"))  # a finished sweep run deleted before its verdict run starts
    assert R.claim_next(100) == rows["lr-adamw-s2"]
    with pytest.raises(InvalidConfig, match="sweep did not end: lr-adamw-lr2e-9-s1 \\(deleted\\)"):
        prepare(*starting("lr-adamw-s2"))
    for i in rows.values():
        if R.get_run(i)["status"] in ("queued", "running"):
            R.finish_run(i, "failed", message="closed by the test")


def test_an_experiment_queued_before_the_two_stages_is_read_with_its_own_sweep() -> None:
    """Every rate on every seed over the old sweep (2^-12 … 2^-9): the fresh seeds' runs at the chosen rate are the
    verdict's, the rates it never swept are not read as missing, and its lowest rate is its sweep's end."""
    old = [{"id": 100 * s + k, "arm": f"{opt}-lr2e{k}", "replicate": s, "config": {},
            "evaluation": {"held_out_loss": 5.0 + 0.01 * (k + (12 if opt == "lion" else 10)) ** 2 + 0.001 * s}}
           for s in range(5) for k in (-12, -11, -10, -9) for opt in ("lion", "adamw")]
    sweep = lion_tuned.TUNING.ran(old)
    assert sweep.codes == ("2e-12", "2e-11", "2e-10", "2e-9") and sweep.ends == ("2e-12", "2e-9")
    assert lion_tuned.TUNING.ran([r for r in old if r["replicate"] < 2]) == lion_tuned.TUNING  # the new protocol's runs
    rows, seen = lion_tuned.tuned(lion_tuned.PRESET.claims[0], old)
    assert seen["lion"]["chosen"] == "2e-12" and seen["adamw"]["chosen"] == "2e-10"
    assert set(seen["lion"]["validation_loss"]) == set(sweep.codes)  # no 2^-14 read as a rate that never finished
    assert sorted((r["arm"], r["replicate"]) for r in rows) == [(a, s) for a in ("adamw", "lion") for s in (2, 3, 4)]
    assert {r["id"] % 100 for r in rows if r["arm"] == "lion"} == {-12 % 100}


def test_the_tuned_lion_preset_chooses_each_rate_on_validation_seeds_and_decides_on_fresh_ones(lab_env: Path) -> None:
    """Both optimizers run the same rate sweep on seeds 0–1; a fresh seed (2–4) trains each optimizer once, after the
    sweep, at the rate its sweep chose (set as the run starts, as the worker does, and stored with the run); the
    verdict pairs the fresh seeds. A rate with a diverged validation run is never chosen."""
    from services.lab.training import prepare

    def run(group: str, best: dict[str, float], diverged: tuple[str, int] | None = None) -> list[int]:
        ids = lab.submit("lion-tuned", TINY, group, seeds=5, start=False)
        for rid in ids:
            row = R.get_run(rid)
            cfg = row["config"]
            opt, rep = cfg["arm"].split("-lr")[0], cfg["replicate"]
            if rep >= 2:
                ended = R.list_runs(group=group).set_index("name")["status"]
                assert len(cfg["after"]) == 12 and all(ended[n] in ("finished", "failed") for n in cfg["after"])  # its sweep ran first
                prepare(row, TrainConfig.from_stored(cfg))
                cfg = R.get_run(rid)["config"]
            k = round(math.log2(cfg["lr"]))
            loss = 5.0 + 0.05 * (k - best[opt]) ** 2 + 0.01 * rep + (0.003 * rep if opt == "lion" else 0.0)
            R.start_run(rid)
            if (opt, k) == diverged and rep == 1:  # evaluated at its last good weights, as the loop does: a finite loss
                R.finish_run(rid, "failed", message="The loss became NaN at step 3.", evaluation={"held_out_loss": 4.0})
                continue
            R.finish_run(rid, "finished", evaluation={"held_out_loss": loss, "mask_loss": loss + 0.2, "unigram_loss": 6.8},
                         tokens=1000, seconds=1.0)
        return ids

    ids = run("lt", {"lion": -11.8, "adamw": -10}, diverged=("lion", -12))
    assert len(ids) == 2 * len(lion_tuned.LOG2_RATES) * 2 + 2 * 3  # the sweep on 2 seeds, each optimizer once on 3
    verdict_runs = [R.get_run(i)["config"] for i in ids if R.get_run(i)["config"]["replicate"] >= 2]
    assert sorted(c["arm"] for c in verdict_runs) == ["adamw"] * 3 + ["lion"] * 3
    assert {c["arm"]: c["tuned_rate"] for c in verdict_runs} == {"lion": "2e-11", "adamw": "2e-10"}  # -12 diverged once
    assert {c["lr"] for c in verdict_runs if c["arm"] == "lion"} == {2.0 ** -11}
    experiments.settle("lt")
    [c] = experiments.report("lt").claims
    assert c.detail["tuning"]["lion"]["chosen"] == "2e-11" and c.detail["tuning"]["adamw"]["chosen"] == "2e-10"
    assert c.detail["tuning"]["lion"]["validation_loss"]["2e-12"] == math.inf
    assert sorted(dict(c.detail["scores"]["adamw"])) == [2, 3, 4] and set(c.detail["scores"]) == {"lion", "adamw"}
    assert c.verdict["label"] == V.AGREES and c.verdict["seeds_a"] == 3
    assert c.sentence.startswith("Tuned: each optimizer's rate chosen on seeds 0–1 (lion at 2^-11, adamw at 2^-10)")
    assert "end of the sweep" not in c.sentence  # both chosen rates lie inside the sweep
    run("lt-edge", {"lion": -15, "adamw": -10})
    experiments.settle("lt-edge")
    [edge] = experiments.report("lt-edge").claims
    assert edge.detail["tuning"]["lion"]["chosen"] == "2e-14" and "lion chose an end of the sweep" in edge.sentence
    with pytest.raises(InvalidConfig, match="4 seeds or more, not 3"):
        lab.plan_runs("lion-tuned", TINY, "few", seeds=3)
    kind, said = lab.record_for("lion-tuned", "classroom")
    assert kind == "does not decide" and "token counts" in said
