"""The fine-tuning lab: modes, scores with intervals, what changed per layer, saving and loading, the
command line, the queue, refusals, and the page."""

from __future__ import annotations

import errno
import json
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from analysis.stats import bootstrap_interval, macro_f1, seed_summary
from core.errors import InvalidConfig, InvalidData, InvalidTaskFile, TrainingFailed, UnsupportedArchitecture
from models import finetune as F
from services import lab
from tests.helpers import ENTRY, ROOT
from tests.helpers.lab import run_status as status
from tests.helpers.servers import wait_for

TINY = F.FineTuneConfig(model="bert-base-uncased", task="wic", mode="finetune", epochs=2, batch=8, max_train=48, max_test=24,
                        max_len=32, lr=1e-3)


# ------------------------------------------------------------------------------------------ scores


def test_macro_f1_is_scikit_learns_and_the_bootstrap_covers_a_known_case() -> None:
    from sklearn.metrics import f1_score

    rng = np.random.default_rng(1)
    t = rng.integers(0, 5, 400)
    p = np.where(rng.random(400) < 0.5, t, rng.integers(0, 5, 400))
    assert macro_f1(t, p, 5) == pytest.approx(f1_score(t, p, average="macro"))
    # 80 right of 100: the normal approximation gives 0.80 ± 1.96·0.04 = [0.72, 0.88]
    truth = np.ones(100, dtype=int)
    pred = np.r_[np.ones(80), np.zeros(20)].astype(int)
    low, high = bootstrap_interval(truth, pred, seed=3)
    assert low == pytest.approx(0.72, abs=0.02) and high == pytest.approx(0.88, abs=0.02)
    assert bootstrap_interval(truth, truth) == (1.0, 1.0)
    with pytest.raises(InvalidData):
        bootstrap_interval(truth, pred[:50])
    assert seed_summary([0.5, 0.7])["std"] == pytest.approx(np.std([0.5, 0.7], ddof=1)) and seed_summary([0.5])["n"] == 1


@pytest.mark.slow
def test_the_lemma_clustered_bootstrap_covers_when_items_of_a_lemma_move_together() -> None:
    """WiC-like data: 90 lemmas of 3 pairs each, each lemma easy or hard as a whole (a lemma effect), true accuracy
    0.70. Resampling items as if independent is too narrow for such data; resampling whole lemmas covers the true
    accuracy at about the stated 95% (simulated 300 times), and its interval is wider."""
    rng = np.random.default_rng(7)
    lemmas, per, truth_p = 90, 3, 0.70
    clusters = [f"lemma{c}" for c in range(lemmas) for _ in range(per)]
    covered = {"items": 0, "lemmas": 0}
    widths = {"items": [], "lemmas": []}
    trials = 300
    for trial in range(trials):
        # a lemma is easy or hard for all its pairs: its accuracy ~ Beta with mean 0.70 and sd 0.23
        p_lemma = rng.beta(3 * truth_p, 3 * (1 - truth_p), lemmas)
        pred = (rng.random((lemmas, per)) < p_lemma[:, None]).ravel().astype(int)
        truth = np.ones_like(pred)
        for name, groups in (("items", None), ("lemmas", clusters)):
            low, high = bootstrap_interval(truth, pred, n_resamples=400, seed=trial, clusters=groups)
            covered[name] += low <= truth_p <= high
            widths[name].append(high - low)
    # measured with 600 trials: lemmas 0.93, items 0.88 (a percentile bootstrap of 90 clusters runs a little short)
    assert 0.90 <= covered["lemmas"] / trials <= 0.98, covered
    assert covered["items"] / trials < 0.92 and np.mean(widths["lemmas"]) > 1.1 * np.mean(widths["items"]), covered


# ------------------------------------------------------------------------------------------ the library


def test_fine_tuning_lowers_the_loss_and_the_same_seed_repeats_it(model_env: Path) -> None:
    cfg = replace(TINY, run="tiny-ft")
    a = F.finetune(cfg, save=False)
    b = F.finetune(cfg, save=False)
    first, last = np.mean([x for _, x in a.curve[:3]]), np.mean([x for _, x in a.curve[-3:]])
    assert last < first
    assert [round(x, 5) for _, x in a.curve] == [round(x, 5) for _, x in b.curve] and a.accuracy == b.accuracy
    assert a.train_examples == 48 and a.test_examples == 24 and len(a.correct) == 24
    assert a.accuracy_interval[0] <= a.accuracy <= a.accuracy_interval[1] and a.majority_baseline == pytest.approx(0.5)
    assert [e["epoch"] for e in a.epochs] == [1, 2]
    layers = [r["layer"] for r in a.layer_change]
    assert layers[0] == "embeddings" and layers[-1] == "head" and all(r["weight_change"] > 0 for r in a.layer_change)
    assert a.trainable_parameters > 0


def test_the_frozen_mode_is_logistic_regression_on_the_extracted_features(model_env: Path) -> None:
    import torch
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    cfg = replace(TINY, task="supersense", mode="frozen", layer="last4", max_train=80, max_test=40)
    result = F.finetune(cfg, save=False)
    task = F.load_config_task(cfg)
    model, tok = F.build(cfg, task)
    model.eval()
    with torch.no_grad():
        x_train = F.features(model, F.encode(tok, task, task.train, cfg.max_len), "last4", tok.pad_token_id, True)
        x_test = F.features(model, F.encode(tok, task, task.test, cfg.max_len), "last4", tok.pad_token_id, True)
    assert x_train.shape[1] == min(4, model.config.num_hidden_layers + 1) * model.config.hidden_size  # 2 layers + embeddings
    clf = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000, random_state=cfg.seed))
    clf.fit(x_train, [e.label for e in task.train])
    assert result.accuracy == pytest.approx(clf.score(x_test, [e.label for e in task.test]))
    # the encoder is fixed: nothing of it moves, and every layer's representation is unchanged
    assert all(r["weight_change"] == 0 for r in result.layer_change if r["layer"] != "head")
    assert all(r["cka"] == pytest.approx(1.0) for r in result.layer_change if r["layer"] != "head")
    assert result.trainable_parameters == x_train.shape[1] * len(task.labels) + len(task.labels) and not result.checkpoint


def test_a_pair_without_marked_words_is_read_out_frozen_as_each_text_alone(model_env: Path, tmp_path: Path) -> None:
    """A user's text_a,text_b,label CSV: the frozen read-out encodes each text alone, mean-pools it (u, v) and classifies
    [u, v, |u − v|, u ⊙ v] (SentEval, InferSent), not the mean of the joined pair. On "is text_b the same sentence as
    text_a?" the |u − v| part makes that a linear read-out even of a random encoder; the joined pair's mean does not."""
    import random

    import torch

    sentences = [f"the {a} {b} in the {c} ." for a in ("cat", "dog", "boy", "man") for b in ("sat", "plays", "went")
                 for c in ("snow", "street", "store", "mat")]
    rng = random.Random(0)
    rows = []
    for s_ in sentences * 2:
        same = rng.random() < 0.5
        rows.append(f"{s_},{s_ if same else rng.choice([t for t in sentences if t != s_])},{int(same)}")
    task_file = tmp_path / "same.csv"
    task_file.write_text("text_a,text_b,label\n" + "\n".join(rows) + "\n")
    cfg = replace(TINY, task=str(task_file), mode="frozen", layer="last", max_train=80, max_test=16)
    result = F.finetune(cfg, save=False)
    task = F.load_config_task(cfg)
    model, tok = F.build(cfg, task)
    model.eval()
    enc = F.encode(tok, task, task.test, cfg.max_len)
    with torch.no_grad():
        x = F.features(model, enc, "last", tok.pad_token_id, False)
        u, v = (F.features(model, F.encode(tok, F.Task("t", "single", task.labels, (), (), ""),
                                             [F.Example(getattr(e, side) or "", e.label) for e in task.test], cfg.max_len),
                           "last", tok.pad_token_id, False) for side in ("text", "text_b"))
    hidden = model.config.hidden_size
    assert x.shape == (len(task.test), 4 * hidden)
    assert np.allclose(x, np.concatenate([u, v, np.abs(u - v), u * v], axis=1), atol=1e-6)
    assert np.allclose(x[:, 2 * hidden: 3 * hidden][[e.label == 1 for e in task.test]], 0.0)  # |u − v| of identical texts
    assert result.accuracy >= 0.9, result.accuracy


def test_random_initialisation_is_the_same_architecture_with_other_weights(model_env: Path) -> None:
    task = F.load_config_task(TINY)
    pre, _ = F.build(TINY, task)
    rnd, _ = F.build(replace(TINY, mode="random"), task)
    assert type(pre) is type(rnd) and sum(p.numel() for p in pre.parameters()) == sum(p.numel() for p in rnd.parameters())
    assert not all(bool((a == b).all()) for a, b in zip(pre.parameters(), rnd.parameters(), strict=True))


@pytest.mark.slow
def test_the_saved_model_loads_and_predicts_what_the_pipeline_predicts(empty_model_dir: Path, model_env: Path,
                                                                    monkeypatch) -> None:
    import shutil

    from transformers import pipeline

    from models.loader import load

    monkeypatch.setenv("BFE_MODEL_DIR", str(empty_model_dir))
    shutil.copytree(model_env / "bert-base-uncased", empty_model_dir / "bert-base-uncased")
    r = F.finetune(replace(TINY, epochs=1, run="saved-ft"))
    assert r.checkpoint == "trained/saved-ft"
    info = json.loads((empty_model_dir / "trained" / "saved-ft" / "bfe_run.json").read_text())
    assert info["kind"] == "finetune" and info["config"]["task"] == "wic"
    loaded = load("trained/saved-ft", task="sequence-classification")
    pipe = pipeline("text-classification", model=str(empty_model_dir / "trained" / "saved-ft"), device="cpu")
    for text in ("the bank of the river", "a person who works"):
        enc = loaded.tokenizer(text, return_tensors="pt")
        ours = loaded.model.config.id2label[int(loaded.model(**enc).logits.argmax(-1))]
        assert ours == pipe(text)[0]["label"]
    assert "sequence-classification" in __import__("models.inspection").inspection.inspect("trained/saved-ft").heads


@pytest.mark.slow
def test_the_command_line_prints_the_result_as_json(model_env: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "models.finetune", "--model", "bert-base-uncased", "--task", "wic", "--mode",
                          "frozen", "--max-train", "40", "--max-test", "20", "--max-len", "32", "--no-save"],
                         cwd=ROOT, capture_output=True, text=True, timeout=180, env={**__import__("os").environ})
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    for key in ("accuracy", "macro_f1", "majority_baseline", "train_examples", "test_examples", "seconds", "checkpoint"):
        assert key in result
    assert len(result["accuracy_interval"]) == 2 and result["train_examples"] == 40 and result["test_examples"] == 20


# ------------------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(("change", "match"), [
    ({"mode": "melt"}, "Unknown mode"), ({"epochs": 0}, "epochs must be"), ({"batch": 10**6}, "batch must be"),
    ({"max_train": 10**9}, "max_train must be"), ({"lr": 5.0}, "learning rate"), ({"layer": "top"}, "Unknown layer"),
    ({"task": "glue"}, "Unknown task"), ({"run": "exp+ft"}, "not a usable run name"), ({"run": "../x"}, "not a usable run name"),
])
def test_a_bad_request_is_refused_before_any_work(change: dict, match: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(InvalidConfig, match=match):
        F.finetune(replace(TINY, **change))
    assert time.perf_counter() - t0 < 1.0


def test_bad_models_and_task_files_are_refused_by_name(model_env: Path, tmp_path: Path) -> None:
    with pytest.raises(UnsupportedArchitecture, match="padding"):  # GPT-2's tokenizer has no pad token
        F.finetune(replace(TINY, model="gpt2"), save=False)
    one_class = tmp_path / "one.csv"
    one_class.write_text("text,label\n" + "".join(f"sentence number {i},a\n" for i in range(20)))
    with pytest.raises(InvalidTaskFile):
        F.finetune(replace(TINY, task=str(one_class)), save=False)
    binary = tmp_path / "bin.csv"
    binary.write_bytes(b"\x00\xff" * 500)
    with pytest.raises(InvalidTaskFile):
        lab.save_task_file(binary.read_bytes())
    with pytest.raises(InvalidData, match="No task file"):
        F.finetune(replace(TINY, task=str(tmp_path / "missing.csv")), save=False)


def test_a_full_disk_leaves_no_half_written_model(empty_model_dir: Path, model_env: Path, monkeypatch) -> None:
    import shutil

    import transformers

    monkeypatch.setenv("BFE_MODEL_DIR", str(empty_model_dir))
    shutil.copytree(model_env / "bert-base-uncased", empty_model_dir / "bert-base-uncased")

    def full(self, *a, **k):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(transformers.PreTrainedModel, "save_pretrained", full)
    with pytest.raises(TrainingFailed, match="No space left"):
        F.finetune(replace(TINY, epochs=1, run="full-disk-ft"))
    assert not (empty_model_dir / "trained" / "full-disk-ft").exists()
    assert not list((empty_model_dir / "trained").glob(".partial-*"))


# ------------------------------------------------------------------------------------------ the queue and the page


@pytest.mark.slow
def test_the_queue_runs_a_fine_tune_and_the_table_has_the_slides_shape(lab_env: Path, model_env: Path, monkeypatch) -> None:
    import shutil

    from analysis.results_db import runs

    shutil.copytree(model_env / "bert-base-uncased", lab_env / "bert-base-uncased")
    configs = [replace(TINY, mode=m, epochs=1, run=F.run_label("cls", "bert-base-uncased", m, 0)) for m in ("finetune", "frozen")]
    with pytest.raises(InvalidConfig, match="not a usable run name"):
        lab.submit_finetune(configs, "a b")
    ids = lab.submit_finetune(configs, "cls")
    for rid in ids:
        wait_for(lambda rid=rid: status(rid) in ("finished", "failed"), timeout=180)
    frame = runs.list_runs()
    assert set(frame["status"]) == {"finished"}, list(frame["message"])
    row = runs.get_run(ids[0])
    assert row["objective"] == lab.FINETUNE and row["config"]["kind"] == "finetune" and row["evaluation"]["epochs"]
    assert row["checkpoint"] == "trained/cls-bert-base-uncased-finetune-s0" and len(row["evaluation"]["correct"]) == 24
    table = lab.finetune_table(frame)
    assert sorted(table["mode"]) == ["finetune", "frozen"] and set(table["seeds"]) == {1}
    assert all("1 seed: over test items" in x for x in table["95% interval (mean over seeds)"])
    delta = lab.finetune_delta(table)
    assert len(delta) == 1 and delta["experiment"].iloc[0] == "cls"
    assert delta["Δ (fine-tuned − frozen)"].iloc[0] == pytest.approx(delta["fine-tuned"].iloc[0] - delta["frozen"].iloc[0])
    assert lab.delete(ids[0]) == row["name"] and not (lab_env / "trained" / "cls-bert-base-uncased-finetune-s0").exists()


def test_the_table_averages_only_seeds_of_one_treatment_and_pairs_modes_only(lab_env: Path) -> None:
    """Runs that differ in epochs, rate or experiment are never averaged as seeds; the interval is Student's t for the
    mean over seeds; Δ pairs a frozen and a fine-tuned row only when nothing but the mode (and layer) differs."""
    from analysis.results_db import runs

    def finished(group: str, mode: str, seed: int, accuracy: float, **changes: Any) -> None:
        cfg = replace(TINY, mode=mode, seed=seed, run=f"{group}-{mode}-{seed}-{len(changes)}", **changes)
        rid = runs.create_run(cfg.run_name, lab.FINETUNE, {"kind": lab.FINETUNE, **asdict(cfg)}, group=group)
        runs.start_run(rid)
        runs.finish_run(rid, "finished", evaluation={"task": cfg.task, "accuracy": accuracy, "accuracy_interval": [0.0, 1.0],
                                                     "macro_f1": accuracy, "majority_baseline": 0.5}, tokens=1, seconds=1.0)

    for seed, acc in enumerate((0.70, 0.72, 0.74)):
        finished("x", "finetune", seed, acc)
        finished("x", "frozen", seed, acc - 0.1)
    finished("x", "finetune", 0, 0.99, epochs=7)  # another treatment: not a fourth seed
    finished("y", "finetune", 0, 0.10)  # another experiment's seed 0: not a fourth seed either
    table = lab.finetune_table(runs.list_runs())
    assert len(table) == 4
    main = table[(table["experiment"] == "x") & (table["mode"] == "finetune") & (table["seeds"] == 3)].iloc[0]
    assert main["accuracy (mean)"] == pytest.approx(0.72)
    half = 4.303 * 0.02 / 3 ** 0.5  # t(0.975, 2) × sd / √n
    assert main["95% interval (mean over seeds)"].startswith(f"[{0.72 - half:.3f}, {0.72 + half:.3f}]")
    delta = lab.finetune_delta(table)
    assert len(delta) == 1 and delta["Δ (fine-tuned − frozen)"].iloc[0] == pytest.approx(0.1)


def test_sizes_before_starting_are_exact(model_env: Path) -> None:
    task = F.load_config_task(TINY)
    model, _ = F.build(TINY, task)
    size = lab.finetune_size(TINY, len(task.labels))
    assert size.trainable == sum(p.numel() for p in model.parameters()) == size.parameters
    frozen = lab.finetune_size(replace(TINY, mode="frozen", layer="last4"), len(task.labels), task.kind)
    enc = F.encode(F.build(TINY, task)[1], task, task.train, TINY.max_len)
    width = F.features(model, enc, "last4", 0, False).shape[1]  # WiC: the two marked words as [u, v, u⊙v, |u−v|]
    assert width == 4 * min(4, model.config.num_hidden_layers + 1) * model.config.hidden_size
    assert frozen.trainable == width + 1 and 0 < frozen.memory_bytes < size.memory_bytes


@pytest.mark.slow
def test_the_page_starts_watches_and_finishes_a_fine_tune_on_minilm(lab_env: Path) -> None:
    from streamlit.testing.v1 import AppTest

    from analysis.results_db import runs

    entry = ENTRY
    at = AppTest.from_file(entry, default_timeout=120)
    at.run()
    at.switch_page("views/finetune.py").run()
    assert not at.exception, at.exception
    at.multiselect(key="ft_modes").set_value(["finetune"]).run()
    for key, value in (("ft_train", 24), ("ft_test", 16), ("ft_epochs", 1), ("ft_len", 32)):
        at.number_input(key=key).set_value(value).run()
    at.text_input(key="ft_name").set_value("page-ft").run()
    planned = at.dataframe[0].value
    assert list(planned["run"]) == ["page-ft-all-MiniLM-L6-v2-finetune-s0"] and planned["trainable (exact)"].iloc[0] > 20_000_000
    next(b for b in at.main.button if b.label.startswith("Start")).click().run()
    assert not at.exception, at.exception
    rid = int(runs.list_runs()["id"].iloc[0])
    wait_for(lambda: status(rid) in ("finished", "failed"), timeout=300)
    assert status(rid) == "finished", runs.get_run(rid)["message"]
    at.run()
    assert not at.exception, at.exception
    assert any("Frozen against fine-tuned" in h.value for h in at.subheader)
    assert any("What fine-tuning changed" in h.value for h in at.subheader)


def test_a_frozen_pair_run_reads_every_split_as_its_training_split_does() -> None:
    """WiC at 32 tokens: a training pair whose marked word truncation cut off made the training split's features each
    text's mean, another split's the two words' [u, v, |u − v|, u ⊙ v], and the frozen run failed on the width. The
    choice is now the training split's, for every split."""
    cfg = F.FineTuneConfig(model="bert-base-uncased", task="wic", mode="frozen", epochs=1, max_len=32, max_train=300,
                           max_test=200)
    task = F.load_config_task(cfg)
    tok = F.build(cfg, task)[1]
    train, validation = (F.encode(tok, task, split, cfg.max_len) for split in (task.train, task.validation))
    assert not F.pair_words(train) and F.pair_words(validation)  # the case that failed: the two splits disagree
    result = F.finetune(cfg, save=False)
    assert 0 <= result.accuracy <= 1 and 0 <= result.epochs[0]["validation_accuracy"] <= 1
