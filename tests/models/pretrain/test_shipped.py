"""The checkpoint the project ships for DistilBERT's teacher: what fits it, a run of 0 steps from it (its weights,
evaluated and saved as the run), the distil preset's teacher arm taken from it where the form's shape is its shape,
and what a damaged or hostile setting gets."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from core.errors import InvalidConfig
from models.pretrain import TrainConfig, shipped, train
from services.lab.claims import apply_budget
from services.lab.presets import budget_of, plan_runs

TEACHER = "distil-h128"
FITS = replace(TrainConfig(), init=TEACHER, steps=0, run="from-shipped")


def test_the_shipped_teacher_is_in_the_repository_with_its_provenance() -> None:
    where = shipped.folder(TEACHER)
    provenance = json.loads((where / "provenance.json").read_text())
    stored = shipped.shipped_config(TEACHER)
    # what bench/ship_teacher.py trains, and what bench/distil_teacher.py measured above its random initialisation
    trained = replace(TrainConfig(), **shipped.TEACHER_SETTINGS)
    shared = (*shipped.SAME, "seq_len", "objective", "parametrisation", *shipped.TEACHER_SETTINGS)
    assert {k: stored[k] for k in shared} == {k: getattr(trained, k) for k in shared}
    assert provenance["config"]["steps"] == stored["steps"] == 12_000 and provenance["command"].startswith("python bench/ship_teacher.py")
    assert (where / "model.safetensors").stat().st_size < 8 * 2**20  # small enough to ship (fp32, 1.5 M parameters)
    assert not (where / "steps").exists()  # the final weights only


def test_what_fits_the_shipped_teacher_and_what_does_not() -> None:
    base = TrainConfig()
    assert shipped.teacher_for(base) == TEACHER and shipped.teacher_for(replace(base, seq_len=32, batch=8, lr=3e-4)) == TEACHER
    for other in (replace(base, hidden=64, ffn=256), replace(base, layers=4), replace(base, seq_len=128),
                  replace(base, corpus="/tmp/mine.txt"), replace(base, vocab="bert"), replace(base, corpus_lines=500),
                  replace(base, parametrisation="mup")):
        assert shipped.teacher_for(other) == ""
    with pytest.raises(InvalidConfig, match="hidden 64"):
        replace(FITS, hidden=64, ffn=256).validate()
    for hostile in ("../../etc", "x" * 10_000, "distil-h128/../../etc"):
        with pytest.raises(InvalidConfig, match="No shipped checkpoint") as err:
            replace(FITS, init=hostile).validate()
        assert len(str(err.value)) < 300
    with pytest.raises(InvalidConfig, match="name of a shipped checkpoint"):
        TrainConfig.from_stored({**vars(FITS), "init": ["distil-h128"]}).validate()
    with pytest.raises(InvalidConfig, match="0 only from a shipped checkpoint"):
        replace(TrainConfig(), steps=0).validate()
    with pytest.raises(InvalidConfig, match="objective"):
        replace(FITS, objective="electra").validate()


def test_a_run_of_zero_steps_is_the_shipped_weights_evaluated_and_saved(empty_model_dir: Path) -> None:
    result = train(FITS)
    assert result.checkpoint == "trained/from-shipped" and result.curve == [] and not result.stopped
    saved = load_file(empty_model_dir / "trained" / "from-shipped" / "model.safetensors")
    original = load_file(shipped.folder(TEACHER) / "model.safetensors")
    assert saved.keys() == original.keys() and all(torch.equal(saved[k], original[k]) for k in saved)
    # a trained masked LM: its held-out loss far below the corpus's token counts at [MASK] (about 7 nats; ln 8192 = 9.0)
    assert result.evaluation["held_out_loss"] < 6.0
    # held out from what the teacher trained on (seed 0's split), whatever the run's seed: seed 3's own split shares
    # about a fifth of its texts with seed 0's training texts
    from models.pretrain import read_corpus
    from models.pretrain.loop import setup

    teacher_train, teacher_held = read_corpus(replace(FITS, seed=0))
    assert setup(replace(FITS, seed=3), save=False).held_out == teacher_held
    assert set(read_corpus(replace(FITS, seed=3))[1]) & set(teacher_train)  # what it would have been: not held out


def test_the_distil_preset_takes_its_teacher_from_the_shipped_checkpoint_where_the_shape_is_its_own() -> None:
    classroom = budget_of("distil", "classroom")
    planned = plan_runs("distil", apply_budget(TrainConfig(), classroom), "g", classroom.seeds)
    teachers = [p for p in planned if p.arm == "teacher"]
    assert [(t.config.init, t.config.steps) for t in teachers] == [(TEACHER, 0)] * classroom.seeds
    assert all(p.config.init == "" and p.config.steps >= classroom.steps for p in planned if p.arm != "teacher")
    assert {p.config.teacher for p in planned if p.arm == "distilled"} == {f"trained/g-teacher-s{i}" for i in range(classroom.seeds)}
    # another width: each seed trains its teacher, as before there was a shipped one
    wide = plan_runs("distil", apply_budget(TrainConfig(hidden=256, ffn=1024), classroom), "w", classroom.seeds)
    assert all(p.config.init == "" and p.config.steps == classroom.steps for p in wide if p.arm == "teacher")


def test_a_damaged_shipped_teacher_is_refused_with_a_message_and_the_preset_trains_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_model_dir: Path) -> None:
    from safetensors.torch import save_file

    copy, original = tmp_path / "teachers", shipped.TEACHERS_DIR
    shutil.copytree(original, copy)
    monkeypatch.setattr(shipped, "TEACHERS_DIR", copy)
    weights = copy / TEACHER / "model.safetensors"
    whole = weights.read_bytes()

    def damaged(write) -> None:
        write()
        shipped.shipped_config.cache_clear()
        with pytest.raises(InvalidConfig, match="missing or damaged"):
            FITS.validate()
        assert shipped.teacher_for(TrainConfig()) == ""  # the plan trains a teacher per seed instead of failing

    try:
        damaged(lambda: weights.write_bytes(whole[:100_000]))  # cut mid-write: the header parses, the data is short
        damaged(lambda: weights.write_text("version https://git-lfs.github.com/spec/v1\noid sha256:0\nsize 6149200\n"))
        damaged(lambda: weights.unlink())
        damaged(lambda: (copy / TEACHER / "bfe_run.json").write_text("[1, 2]"))
        shutil.copy(original / TEACHER / "bfe_run.json", copy / TEACHER / "bfe_run.json")
        save_file({"other.weight": torch.zeros(2, 2)}, weights)  # a sound file of other tensors: refused as it loads
        shipped.shipped_config.cache_clear()
        with pytest.raises(InvalidConfig, match="does not match this run's model"):
            train(FITS)
    finally:
        shipped.shipped_config.cache_clear()


def test_the_lab_page_says_where_the_teacher_comes_from_before_start(lab_env: Path) -> None:
    from tests.helpers.pages import run as draw_page

    at = draw_page("views/lab.py", lb_preset="distil", lb_budget="classroom")
    assert not at.exception, at.exception
    plan = at.dataframe[0].value
    teachers = plan[plan["run"].str.contains("-teacher-")]
    assert set(teachers["starts from"]) == {TEACHER} and set(teachers["steps"]) == {0}
    assert set(plan[~plan["run"].str.contains("-teacher-")]["starts from"]) == {"random init"}
    assert any(TEACHER in c.value and "trained before the experiment" in c.value for c in at.caption)


def test_a_run_of_zero_steps_reads_as_done_when_it_ends_and_not_before() -> None:
    from services.lab.reports import progress_of

    row = {"config": {"steps": 0}, "curve": [], "seconds": 0.0}
    assert progress_of({**row, "status": "finished"})["done"] == 1.0
    assert progress_of({**row, "status": "running"})["done"] == 0.0 and progress_of({**row, "status": "queued"})["done"] == 0.0


def test_distil_decides_its_thorough_and_gpu_budgets_on_the_tasks_its_teacher_can_do() -> None:
    """WiC is out of DistilBERT's suites (its teacher is at chance there); every other preset keeps the thorough suite."""
    from services.lab.claims import THOROUGH_SUITE
    from services.lab.presets import BUDGETS

    for name, b in BUDGETS["distil"].items():
        assert b.downstream is not None and "wic" not in b.downstream["tasks"] and "supersense" in b.downstream["tasks"], name
    assert BUDGETS["distil"]["gpu"].downstream["max_train"] == THOROUGH_SUITE["max_train"]
    assert "wic" in THOROUGH_SUITE["tasks"]
    assert BUDGETS["roberta"]["thorough"].downstream == THOROUGH_SUITE and BUDGETS["roberta"]["gpu"].downstream == THOROUGH_SUITE
