"""Heads masked, ranked and pruned, and the logit lens, on the tiny models: each checked against an independent
construction (weight surgery on the output projection, the model's own fill-mask output, finite differences)."""

from __future__ import annotations

import copy
from dataclasses import replace

import numpy as np
import pytest
import torch

from core.errors import InvalidConfig, InvalidText, MaskMissing, UnsupportedArchitecture, UnsupportedTask
from models import interventions as I
from models import objectives
from models.loader import load

MASKED = ["bert-base-uncased", "roberta-base", "distilbert-base-uncased", "albert-base-v2", "google/electra-small-generator",
          "xlm-roberta-base", "mpnet-base", "modernbert-base"]
TEXTS = ["the cat sat on the mat because it was tired", "a dog ran in the park with a ball",
         "we walked along the river bank at night", "the bank raised its rates again this year",
         "she plays the guitar on stage every week", "the bat flew out of the cave at dusk"]


def _surgery(net, layer_heads: list[tuple[int, int]]):
    """A copy of ``net`` whose output projections read zeros where the removed heads' outputs enter: what transformers 4's
    ``prune_heads`` (and its ``head_mask``) did to a head, built without hooks."""
    twin = copy.deepcopy(net)
    projections = I.head_projections(twin)
    _, heads = I.head_shape(twin)
    with torch.no_grad():
        for layer, head in layer_heads:
            proj = projections[layer]
            size = proj.weight.shape[1 if proj.__class__.__name__ != "Conv1D" else 0] // heads
            if proj.__class__.__name__ == "Conv1D":  # GPT-2: weight is (in, out)
                proj.weight[head * size:(head + 1) * size, :] = 0
            else:
                proj.weight[:, head * size:(head + 1) * size] = 0
    return twin


@pytest.mark.parametrize("model_id", [*MASKED, "gpt2"])
def test_a_masked_head_is_the_head_cut_out_of_the_output_projection(model_id: str) -> None:
    lm = load(model_id, task="causal-lm" if model_id == "gpt2" else "masked-lm")
    net = lm.model.eval()
    layers, heads = I.head_shape(net)
    ids = lm.tokenizer("the cat sat on the mat", return_tensors="pt")["input_ids"]
    with torch.inference_mode():
        plain = net(input_ids=ids).logits
    ones = torch.ones(layers, heads)
    with torch.inference_mode(), I.HeadMask(net, ones):
        assert torch.equal(net(input_ids=ids).logits, plain)
    # ALBERT shares one layer: cutting a head out of its weights removes it from every layer
    removed = [(layer, heads - 1) for layer in range(layers)] if model_id == "albert-base-v2" else [(layers - 1, 0), (0, heads - 1)]
    mask = ones.clone()
    for layer, head in removed:
        mask[layer, head] = 0
    with torch.inference_mode(), I.HeadMask(net, mask):
        hooked = net(input_ids=ids).logits
    with torch.inference_mode():
        cut = _surgery(net, removed)(input_ids=ids).logits
    assert torch.allclose(hooked, cut, atol=1e-5) and not torch.allclose(hooked, plain, atol=1e-5)
    with torch.inference_mode():
        assert torch.equal(net(input_ids=ids).logits, plain)  # the hooks are gone after the block


def test_albert_masks_one_layer_of_its_shared_weights_alone() -> None:
    """The shared module serves every layer: a head removed in layer 0 only changes the output, and differently from the
    same head removed in the last layer."""
    net = load("albert-base-v2", task="masked-lm").model.eval()
    layers, heads = I.head_shape(net)
    ids = torch.tensor([[2, 10, 11, 12, 13, 3]])
    outs = []
    for layer in (0, layers - 1):
        mask = torch.ones(layers, heads)
        mask[layer, 0] = 0
        with torch.inference_mode(), I.HeadMask(net, mask):
            outs.append(net(input_ids=ids).logits)
    assert layers > 1 and not torch.allclose(outs[0], outs[1], atol=1e-6)


def test_mean_ablation_puts_the_heads_mean_in_its_place() -> None:
    lm = load("bert-base-uncased", task="masked-lm")
    net = lm.model.eval()
    batch = I.masked_batch(lm, TEXTS, seed=0)
    means = I.head_means(net, batch.inputs)
    layers, heads = I.head_shape(net)
    assert tuple(means.shape) == (layers, heads, net.config.hidden_size // heads)
    mask = torch.ones(layers, heads)
    mask[0, 1] = 0
    zero, mean = I.mlm_score(lm, batch, mask), I.mlm_score(lm, batch, mask, means)
    assert zero != mean and I.mlm_score(lm, batch) == I.mlm_score(lm, batch, torch.ones(layers, heads), means)


def test_importance_is_the_gradient_of_the_loss_with_respect_to_the_head_mask() -> None:
    """Michel et al.'s score, against a finite difference of the loss in one head's mask variable (one batch)."""
    lm = load("bert-base-uncased", task="masked-lm")
    texts = TEXTS[:4]
    imp = I.head_importance(lm, texts, seed=3)
    layers, heads = I.head_shape(lm.model)
    assert imp.raw.shape == imp.scores.shape == (layers, heads) and np.all(imp.raw >= 0)
    assert np.allclose(np.sqrt((imp.scores ** 2).sum(1)), 1.0)  # normalised per layer
    batch = I.masked_batch(lm, texts, seed=3)
    eps = 1e-3
    for layer, head in ((0, 0), (layers - 1, heads - 1)):
        up, down = torch.ones(layers, heads, dtype=torch.float64), torch.ones(layers, heads, dtype=torch.float64)
        up[layer, head], down[layer, head] = 1 + eps, 1 - eps
        lm.model.double()
        try:
            slope = (I.mlm_score(lm, batch, up)[0] - I.mlm_score(lm, batch, down)[0]) / (2 * eps)
        finally:
            lm.model.float()
        assert abs(slope) == pytest.approx(imp.raw[layer, head], rel=2e-2, abs=1e-5)
    assert len(imp.order()) == layers * heads and imp.scores[imp.order()[0]] == imp.scores.min()


def test_a_pruning_curve_starts_at_the_full_model_and_removes_heads_in_the_orders_it_names() -> None:
    lm = load("bert-base-uncased", task="masked-lm")
    c = I.pruning_curve(lm, TEXTS, steps=3, seeds=3)
    layers, heads = I.head_shape(lm.model)
    assert c.total == layers * heads and c.removed[0] == 0 and c.removed[-1] == c.total - 1
    full = I.mlm_score(lm, I.masked_batch(lm, TEXTS[1::2], 1))[1]
    assert c.by_importance[0] == pytest.approx(full) and c.random_mean[0] == pytest.approx(full)
    assert all(lo <= m <= hi for lo, m, hi in zip(c.random_low, c.random_mean, c.random_high, strict=True))
    assert len(c.by_importance) == len(c.random_mean) == len(c.removed)
    with pytest.raises(InvalidText, match="at least 4"):
        I.pruning_curve(lm, TEXTS[:3])
    with pytest.raises(InvalidConfig):
        I.pruning_curve(lm, TEXTS, steps=1)
    with pytest.raises(InvalidConfig, match="forward passes"):
        I.pruning_curve(lm, TEXTS * 10, steps=24, seeds=10)


@pytest.mark.parametrize("model_id", MASKED)
def test_the_logit_lens_last_layer_is_the_fill_mask_output(model_id: str) -> None:
    text = "the cat sat on the [MASK] because it was [MASK] ."
    lens = I.logit_lens(model_id, text, top_k=5)
    filled = objectives.fill_mask(model_id, text, top_k=5)
    layers, _ = I.head_shape(load(model_id, task="masked-lm").model)
    assert len(lens.positions) == 2 and all(len(rows) == layers + 1 for rows in lens.rows)
    for rows, preds, answer in zip(lens.rows, filled, lens.answers, strict=True):
        last = rows[-1]
        assert [t for t, _ in last.top] == [p.token for p in preds] and answer == preds[0].token
        assert [p for _, p in last.top] == pytest.approx([p.probability for p in preds], abs=1e-5)
        assert last.final_probability == pytest.approx(preds[0].probability, abs=1e-5)
        assert all(0 <= r.final_probability <= 1 for r in rows)


def test_models_without_a_masked_lm_head_or_hooks_are_refused_by_name() -> None:
    with pytest.raises(UnsupportedTask, match="no trained masked-lm head"):  # the real checkpoint is a discriminator
        I.logit_lens("deberta-v3-base", "a [MASK] here")
    with pytest.raises(UnsupportedArchitecture, match="XLNet"):
        I.head_projections(load("xlnet-base-cased", task="xlnet-lm").model)
    with pytest.raises(MaskMissing):
        I.logit_lens("bert-base-uncased", "no mask here")
    with pytest.raises(InvalidText):
        I.head_importance("bert-base-uncased", ["one sentence only"])
    with pytest.raises(InvalidText, match="at most"):
        I.head_importance("bert-base-uncased", ["a sentence here"] * (I.MAX_SENTENCES + 1))


def _pair(tok) -> tuple[str, str, str, str]:
    """(clean, corrupted, answer, foil) for a tokenizer: two sentences of the same token length, two one-token words."""
    words = ["cat", "dog", "mat", "bank", "the", "a", "on", "it", "sat", "was", "river", "park"]
    vocab = sorted(t.lstrip("▁Ġ") for t in tok.get_vocab() if t.lstrip("▁Ġ").isalpha())
    single = [w for w in [*words, *vocab] if len(tok(w, add_special_tokens=False)["input_ids"]) == 1]
    answer, foil = list(dict.fromkeys(single))[:2]

    def sentence(w: str) -> str:
        return f"the {w} sat on the [MASK] ."

    clean, corrupt = next((sentence(a), sentence(b)) for a in words for b in words if a != b and
                          len(tok(sentence(a).replace("[MASK]", tok.mask_token))["input_ids"]) ==
                          len(tok(sentence(b).replace("[MASK]", tok.mask_token))["input_ids"]))
    return clean, corrupt, answer, foil


@pytest.mark.parametrize("model_id", ["bert-base-uncased", "distilbert-base-uncased", "albert-base-v2", "roberta-base"])
def test_patching_the_last_layer_at_the_mask_restores_the_clean_prediction_and_elsewhere_nothing(model_id: str) -> None:
    """Exact checks that need no reference run: the head reads only the mask's last hidden state, so copying it from the
    clean run restores the clean difference exactly, and copying the last layer anywhere else changes nothing."""
    clean, corrupt, answer, foil = _pair(load(model_id, task="masked-lm").tokenizer)
    p = I.activation_patching(model_id, clean, corrupt, answer, foil)
    layers = len(I.layer_modules(load(model_id, task="masked-lm").model))
    assert p.effects.shape == (layers, len(p.clean_tokens)) and p.passes == -(-p.effects.size // I.BATCH)
    gap = p.clean_difference - p.corrupted_difference
    assert p.effects[-1, p.mask_position] == pytest.approx(gap, abs=1e-4)
    others = np.delete(p.effects[-1], p.mask_position)
    assert np.allclose(others, 0, atol=1e-5)
    with pytest.raises(InvalidText, match="same length"):
        I.activation_patching(model_id, "the cat sat on the [MASK] .", "the cat sat on the big [MASK] .", answer, foil)
    with pytest.raises(InvalidText, match="one each"):
        I.activation_patching(model_id, clean, corrupt, "", foil)
    with pytest.MonkeyPatch.context() as mp:  # the tiny models' 64 positions stay under the real bound: lower it
        mp.setattr(I.patching, "MAX_PATCH_PASSES", p.passes - 1)  # where activation_patching reads it
        with pytest.raises(InvalidText, match="forward passes"):  # refused before any pass runs
            I.activation_patching(model_id, clean, corrupt, answer, foil)


@pytest.fixture
def supersense_run(empty_model_dir, model_env, monkeypatch) -> str:
    """A fine-tuning lab run of the tiny BERT on supersense (token classification), saved as the lab saves it, in a
    model folder of its own."""
    import shutil

    from models.finetune import FineTuneConfig, finetune

    monkeypatch.setenv("BFE_MODEL_DIR", str(empty_model_dir))
    shutil.copytree(model_env / "bert-base-uncased", empty_model_dir / "bert-base-uncased")
    return finetune(FineTuneConfig(model="bert-base-uncased", task="supersense", epochs=1, max_train=64, max_test=32,
                                   max_len=32, run="heads-ft")).checkpoint


def test_a_classifier_target_scores_what_the_fine_tuned_model_predicts(supersense_run: str) -> None:
    """A fine-tuning lab run is scored on its own task's test items: with every head in place, its accuracy is the one
    the lab's own prediction code gives on the same items, and its importance is the gradient of its task loss."""
    from models.finetune import predict, stored_config

    target = I.make_target(supersense_run, "classifier", items=32)
    assert target.kind == "classifier" and target.measure == "supersense accuracy" and target.items == 32
    assert stored_config(supersense_run).task == "supersense"
    chunks = target.chunks(slice(None), 0)
    _, accuracy = target.score(chunks)
    predicted = predict(target.lm.model, target.enc, target.lm.tokenizer.pad_token_id, True)
    gold = target.enc["labels"]
    assert accuracy == pytest.approx(np.mean([p == g for p, g in zip(predicted, gold, strict=True)]))
    # one batch (16 items), so the summed |gradient| is the gradient of that batch's mean loss
    imp = I.head_importance(supersense_run, target="classifier", items=16)
    assert imp.target == "classifier" and imp.raw.shape == I.head_shape(target.lm.model) and imp.raw.sum() > 0
    target = I.make_target(supersense_run, "classifier", items=16)
    chunks = target.chunks(slice(None), 0)
    layers, heads = I.head_shape(target.lm.model)
    eps = 1e-3
    target.lm.model.double()
    try:
        up, down = torch.ones(layers, heads, dtype=torch.float64), torch.ones(layers, heads, dtype=torch.float64)
        up[0, 0], down[0, 0] = 1 + eps, 1 - eps
        losses = [sum(target.per_item(chunks, m)[0]) / target.items for m in (up, down)]
    finally:
        target.lm.model.float()
    assert abs(losses[0] - losses[1]) / (2 * eps) == pytest.approx(imp.raw[0, 0], rel=2e-2, abs=1e-5)
    curve = I.pruning_curve(supersense_run, steps=2, seeds=2, target="classifier", items=32)
    assert curve.measure == "supersense accuracy" and curve.scored == 16 and len(curve.correct) == len(curve.removed)
    assert curve.by_importance[0] == pytest.approx(np.mean(curve.correct[0]["importance"]))


def test_a_probe_target_reads_what_the_fitted_probe_predicts() -> None:
    """The probe is fitted with every head in place and held fixed; with every head in place, its torch read-out gives
    exactly sklearn's predictions on the same features."""
    from models.finetune import features

    target = I.make_target("bert-base-uncased", "probe", task="wic", items=24)
    assert target.kind == "probe" and target.measure == "wic probe accuracy" and target.train_items > 24
    x = features(target.lm.model, target.enc, "last", target.lm.tokenizer.pad_token_id, False)
    z = ((torch.tensor(x) - target.mean) / target.scale) @ target.weight.T + target.bias
    sk = (z[:, 0] > 0).int().tolist()  # binary: class 1 where the decision function is positive
    _, accuracy = target.score(target.chunks(slice(None), 0))
    assert accuracy == pytest.approx(np.mean([a == b for a, b in zip(sk, target.enc["labels"], strict=True)]))
    imp = I.head_importance("bert-base-uncased", target="probe", task="supersense", items=16)
    assert imp.measure == "supersense probe accuracy" and np.allclose(np.sqrt((imp.scores ** 2).sum(1)), 1.0)


def test_targets_refuse_what_they_cannot_score(supersense_run: str) -> None:
    with pytest.raises(InvalidConfig, match="needs a task"):
        I.make_target("bert-base-uncased", "probe")
    with pytest.raises(InvalidConfig, match="Unknown target"):
        I.make_target("bert-base-uncased", "telepathy")
    with pytest.raises(InvalidConfig, match="Unknown task"):
        I.make_target("bert-base-uncased", "probe", task="../etc/passwd")
    with pytest.raises(InvalidConfig, match="Items"):
        I.make_target("bert-base-uncased", "probe", task="wic", items=10**6)
    with pytest.raises(UnsupportedTask, match=r"no classification head.*probe target"):
        I.make_target("bert-base-uncased", "classifier")
    with pytest.raises(UnsupportedTask, match="labels"):  # supersense's run on WiC's two labels
        I.make_target(supersense_run, "classifier", task="wic")
    assert I.parse_labelled(["yes | a fine day", "1 | another"], ["no", "yes"])[0].label == 1
    with pytest.raises(InvalidText, match="Line 2: unknown label 'maybe'"):
        I.parse_labelled(["yes | a fine day", "maybe | =HYPERLINK(\"x\")"], ["no", "yes"])
    with pytest.raises(InvalidText, match="Line 1 has no label"):
        I.parse_labelled(["just a sentence"], ["no", "yes"])


@pytest.mark.parametrize("model_id", ["bert-base-uncased", "albert-base-v2", "distilbert-base-uncased"])
def test_patching_one_head_is_adding_its_clean_difference_through_the_output_projection(model_id: str) -> None:
    """Per-head tracing, against a construction that does not touch the heads' inputs: the output projection is linear,
    so copying head h's clean context vectors is adding W[:, h] · (clean − corrupted) to the projection's output. And in
    the last layer a head patched away from the mask changes nothing (only the mask's last state is read)."""
    lm = load(model_id, task="masked-lm")
    net, tok = lm.model.eval(), lm.tokenizer
    clean, corrupt, answer, foil = _pair(tok)
    traced = I.activation_patching(model_id, clean, corrupt, answer, foil, unit="head")
    layers, heads = I.head_shape(net)
    assert traced.unit == "head" and traced.effects.shape == (layers, heads) and traced.passes == -(-layers * heads // I.BATCH)
    ids = [tok(t.replace("[MASK]", tok.mask_token), return_tensors="pt")["input_ids"] for t in (clean, corrupt)]
    projections = I.head_projections(net)
    layer, head = layers - 2 if layers > 1 else 0, heads - 1
    from models.interventions.heads import _LayerCalls

    calls = _LayerCalls(projections)

    def grab(module, args, store):
        store[calls.layer(module)] = args[0].detach().clone()

    inputs: list[dict] = [{}, {}]
    for store, x in zip(inputs, ids, strict=True):
        calls.reset()
        hs = [m.register_forward_pre_hook(lambda m, a, store=store: grab(m, a, store)) for m in calls.unique]
        with torch.inference_mode():
            net(input_ids=x)
        for h in hs:
            h.remove()
    size = inputs[0][layer].shape[-1] // heads
    delta = torch.zeros_like(inputs[0][layer])
    delta[..., head * size:(head + 1) * size] = (inputs[0][layer] - inputs[1][layer])[..., head * size:(head + 1) * size]
    proj = projections[layer]
    added = torch.nn.functional.linear(delta, proj.weight)  # W · Δ, no bias: the difference of two projections
    calls.reset()

    def add(module, args, output):
        return output + added if calls.layer(module) == layer else output

    hs = [m.register_forward_hook(add) for m in calls.unique]
    try:
        with torch.inference_mode():
            logits = net(input_ids=ids[1]).logits[0, traced.mask_position]
    finally:
        for h in hs:
            h.remove()
    a, f = (tok(w, add_special_tokens=False)["input_ids"][0] for w in (answer, foil))
    assert float(logits[a] - logits[f]) - traced.corrupted_difference == pytest.approx(traced.effects[layer, head], abs=1e-4)
    elsewhere = I.activation_patching(model_id, clean, corrupt, answer, foil, unit="head", position=1)
    assert np.allclose(elsewhere.effects[-1], 0, atol=1e-5) and elsewhere.position == 1  # ALBERT's shared layer too
    with pytest.raises(InvalidText, match="outside the sentence"):
        I.activation_patching(model_id, clean, corrupt, answer, foil, unit="head", position=999)
    with pytest.raises(InvalidConfig, match="Unknown unit"):
        I.activation_patching(model_id, clean, corrupt, answer, foil, unit="neuron")


def test_xlnet_heads_are_masked_through_its_post_attention_as_surgery_on_its_output_weights_would() -> None:
    """XLNet projects its heads with an einsum over ``o`` (no module to hook): a masked head equals that head's slice of
    ``o`` set to zero, the wrapper is gone after the block, and a probe ranks XLNet's heads."""
    net = load("xlnet-base-cased", task="xlnet-lm").model.eval()
    layers, heads = I.head_shape(net)
    ids = torch.tensor([[5, 6, 7, 8, 9, 4, 3]])
    with torch.inference_mode():
        plain = net(input_ids=ids).logits
    mask = torch.ones(layers, heads)
    mask[layers - 1, 0] = 0
    with torch.inference_mode(), I.HeadMask(net, mask):
        hooked = net(input_ids=ids).logits
    twin = copy.deepcopy(net)
    with torch.no_grad():
        I.xlnet_attentions(twin)[layers - 1].o[:, 0, :] = 0
        cut = twin(input_ids=ids).logits
    assert torch.allclose(hooked, cut, atol=1e-5) and not torch.allclose(hooked, plain, atol=1e-5)
    with torch.inference_mode():
        assert torch.equal(net(input_ids=ids).logits, plain)
    means = I.head_means(net, {"input_ids": ids, "attention_mask": torch.ones_like(ids)})
    assert tuple(means.shape) == (layers, heads, net.config.d_head)
    imp = I.head_importance("xlnet-base-cased", target="probe", task="wic", items=16)
    assert imp.raw.shape == (layers, heads) and imp.raw.sum() > 0


def _curve(importance_right: list[list[int]], random_right: list[list[list[int]]], seed: int = 0) -> I.PruningCurve:
    """A curve with two points (none removed, half removed) and the given per-item correctness at the second."""
    full = [1] * len(importance_right[1])
    correct = [{"importance": full, "random": [full] * len(random_right[1])},
               {"importance": importance_right[1], "random": random_right[1]}]
    return I.PruningCurve("m", [0, 6], 12, [1.0, float(np.mean(importance_right[1]))], [1.0, 0.5], [1.0, 0.4], [1.0, 0.6],
                          [0.1, 0.2], len(random_right[1]), "zero", None, correct=correct, seed=seed)


def test_a_pruning_verdict_pairs_replicates_and_counts_the_items_noise() -> None:
    from analysis.verdicts import AGREES, CANNOT_TELL, DISAGREES
    from core.errors import InvalidData

    rng = np.random.default_rng(0)
    n = 200
    clusters = [[f"lemma{i // 4}" for i in range(n)]] * 3

    seeds = iter(range(100))

    def replicate(p_importance: float, p_random: float) -> I.PruningCurve:
        imp = (rng.random(n) < p_importance).astype(int).tolist()
        rand = [(rng.random(n) < p_random).astype(int).tolist() for _ in range(4)]
        return _curve([[], imp], [[], rand], next(seeds))

    better = [replicate(0.8, 0.4) for _ in range(3)]
    v = I.pruning_verdict(better, clusters)
    assert v.label == AGREES and v.low > 0 and v.seeds_a == 3 and "shared test items" in v.method
    assert v.effect == pytest.approx(np.mean([c.by_importance[1] for c in better]) -
                                     np.mean([np.mean(c.correct[1]["random"]) for c in better]))
    assert I.pruning_verdict([replicate(0.3, 0.7) for _ in range(3)], clusters).label == DISAGREES
    assert I.pruning_verdict([replicate(0.5, 0.5) for _ in range(3)], clusters).label == CANNOT_TELL
    with pytest.raises(InvalidData, match="at least 2"):
        I.pruning_verdict(better[:1])
    with pytest.raises(InvalidData, match="do not match"):
        I.pruning_verdict(better, [["x"]] * 3)
    with pytest.raises(InvalidData, match="same seed"):  # the same random orders in two replicates
        I.pruning_verdict([better[0], replace(better[1], seed=better[0].seed)])


def test_a_curve_names_its_scored_items_in_the_order_it_scored_them(supersense_run: str) -> None:
    from analysis.tasks import load_task

    curve = I.pruning_curve(supersense_run, steps=2, seeds=2, target="classifier", items=32)
    test = load_task("supersense", max_train=1, max_test=32, seed=0).test
    assert len(curve.item_ids) == len(curve.item_clusters) == curve.scored == len(curve.correct[0]["importance"])
    made = I.make_target(supersense_run, "classifier", items=32)
    scored = [e for i, e in enumerate(test) if i % 2 == 1 and made.enc["word_index"][i] >= 0]
    assert curve.item_ids == [e.item for e in scored] and curve.item_clusters == [e.cluster for e in scored]
    # and the correctness at a point is per item in that order: the full model's, item by item
    assert curve.correct[0]["importance"] == made.per_item(made.chunks(slice(1, None, 2), 1))[1]
    lm_curve = I.pruning_curve("bert-base-uncased", TEXTS, steps=2, seeds=2)
    assert lm_curve.item_clusters[0] == "sentence 2" and len(lm_curve.item_ids) == lm_curve.scored


def test_the_signed_gradient_predicts_what_removing_a_head_does() -> None:
    """−∂L/∂ξ_h (the mean loss over every scored place) is the first-order estimate of ablating head h: against a
    finite difference it is exact to first order, and it is the Σ n_b g_b / N of the batches' gradients."""
    lm = load("bert-base-uncased", task="masked-lm")
    target = I.make_target(lm, "masked-lm", TEXTS)
    chunks = target.chunks(slice(None), 0)
    imp = I.importance_of(target, chunks)
    base = target.score(chunks)[0]
    layers, heads = I.head_shape(lm.model)
    eps = 1e-3
    lm.model.double()
    try:
        for layer, head in ((0, 0), (layers - 1, heads - 1)):
            mask = torch.ones(layers, heads, dtype=torch.float64)
            mask[layer, head] = 1 - eps
            up = torch.ones(layers, heads, dtype=torch.float64)
            up[layer, head] = 1 + eps
            slope = (target.score(chunks, up)[0] - target.score(chunks, mask)[0]) / (2 * eps)
            assert slope == pytest.approx(imp.gradient[layer, head], rel=2e-2, abs=1e-5)
    finally:
        lm.model.float()
    assert base == pytest.approx(imp.loss, rel=1e-5)


def test_ablating_heads_scores_the_target_with_them_removed_and_refuses_heads_not_in_the_model() -> None:
    lm = load("bert-base-uncased", task="masked-lm")
    layers, heads = I.head_shape(lm.model)
    a = I.ablate_heads(lm, [(0, 0), [layers - 1, heads - 1], (0, 0)], TEXTS)
    assert a.heads == [(0, 0), (layers - 1, heads - 1)] and a.scored > 0
    batch = I.masked_batch(lm, TEXTS, 0)
    mask = torch.ones(layers, heads)
    mask[0, 0] = mask[layers - 1, heads - 1] = 0
    assert (a.full_loss, a.full_accuracy) == pytest.approx(I.mlm_score(lm, batch))
    assert (a.loss, a.accuracy) == pytest.approx(I.mlm_score(lm, batch, mask))
    mean = I.ablate_heads(lm, [(0, 0)], TEXTS, mode="mean")
    assert mean.loss != I.ablate_heads(lm, [(0, 0)], TEXTS).loss
    for bad, words in (([(layers, 0)], rf"Head {layers + 1}\.1 \(layer\.head, counted from 1\) is not in this model"),
                       ([(0, -1)], "whole numbers"), ([(0, 1.5)], "whole numbers"), ([(0,)], "pair"), ("0,0", "pairs"),
                       ([(0, 0)] * 1001, "at most 1,000"),
                       ([(i, j) for i in range(layers) for j in range(heads)], "every head")):
        with pytest.raises(InvalidConfig, match=words):
            I.ablate_heads(lm, bad, TEXTS)


def test_a_probe_scores_no_place_where_truncation_cut_the_word_off() -> None:
    """A supersense item whose marked word truncation cut off has no label: the probe's read-out drops it too, rather
    than reading position 0 for it (the lengths would then disagree)."""
    target = I.make_target("bert-base-uncased", "probe", task="supersense", items=16)
    target.enc["word_index"][1] = -1  # as if the sentence were too long for the model
    chunks = target.chunks(slice(None), 0)
    losses, right = target.per_item(chunks)
    assert len(losses) == len(right) == 15 == len(target.places(slice(None), chunks))
    assert I.importance_of(target, chunks).masked == 15


def test_the_pages_entry_points_are_still_routed_to_the_model_process() -> None:
    """The model process runs a call by the public name of its function (services.runtime.ROUTED): the entry
    points defined in the package's submodules still answer to ``models.interventions``."""
    from services import routing, runtime

    routed = runtime.ROUTED["models.interventions"]
    assert all(runtime.routable(getattr(I, name)) for name in routed)
    assert all(routing._resolve("models.interventions", name) is getattr(I, name) for name in routed)
