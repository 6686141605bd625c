"""BigBird's sparse attention: the masks against transformers' own block-sparse attention, the costs against a hand
count, the lab's sparse arm against the lab's BERT, and the preset."""

from __future__ import annotations

import numpy as np
import pytest

from analysis import sparse_attention as sa
from core.errors import InvalidConfig


def _transformers_probs(n: int, block: int, r: int, heads: int, seed: int, max_positions: int) -> np.ndarray:
    """Which (query, key) pairs transformers' BigBirdBlockSparseAttention gives a weight, in training (its random
    blocks drawn after np.random.seed(seed)): (heads, n, n) bool."""
    import torch
    from transformers import BigBirdConfig
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention, BigBirdModel

    cfg = BigBirdConfig(hidden_size=8 * heads, num_attention_heads=heads, block_size=block, num_random_blocks=r,
                        max_position_embeddings=max_positions)
    attention = BigBirdBlockSparseAttention(cfg, seed=seed).train()
    mask = torch.ones(1, n)
    blocked, band, from_mask, to_mask = BigBirdModel.create_masks_for_block_sparse_attn(mask, block)
    with torch.no_grad():
        _, probs = attention(torch.randn(1, n, 8 * heads), band_mask=band, from_mask=from_mask, to_mask=to_mask,
                             from_blocked_mask=blocked, to_blocked_mask=blocked)
    return (probs[0] != 0).numpy()


@pytest.mark.parametrize(("n", "block", "r", "heads", "max_positions"),
                         [(256, 16, 2, 2, 512), (192, 16, 1, 1, 512), (1024, 64, 3, 2, 4096)])
def test_block_layout_is_transformers_block_sparse_attention(n, block, r, heads, max_positions):
    """Every pair transformers scores, and no other, for each head: the global, window and random blocks (the last
    with the same seed through the port of its random plan; 1,024 takes the paper's old plan)."""
    for seed in (3, 11):
        layout = sa.block_layout(n, block, r, heads, seed=seed, max_positions=max_positions)
        mine = sa.to_tokens(layout["bigbird"], block)  # (heads, n, n)
        assert np.array_equal(mine, _transformers_probs(n, block, r, heads, seed, max_positions))
        computed = heads * sa.sparse_pairs(n, block, r)  # the hand count of the pairs transformers computes
        if n in (1024, 3072, 4096):  # the paper's old plan may draw a window block as a random one: computed twice
            assert computed - heads * block * block * r <= int(mine.sum()) <= computed
        else:
            assert int(mine.sum()) == computed  # no block counted twice
    other = sa.block_layout(n, block, r, heads, seed=4, max_positions=max_positions)["random"]
    assert not np.array_equal(other, sa.block_layout(n, block, r, heads, seed=3, max_positions=max_positions)["random"])


def test_random_blocks_equal_transformers_draws():
    from transformers import BigBirdConfig
    from transformers.models.big_bird.modeling_big_bird import BigBirdBlockSparseAttention

    n, block, r, heads = 512, 32, 3, 2
    attention = BigBirdBlockSparseAttention(BigBirdConfig(hidden_size=16, num_attention_heads=heads, block_size=block,
                                                          num_random_blocks=r)).train()
    np.random.seed(5)
    plan, counts = attention._get_rand_attn_plan(n, block, r)
    theirs = np.stack(attention._bigbird_block_rand_mask_with_head(n, n, block, block, heads, plan, counts))
    assert np.array_equal(sa.random_blocks(n, block, r, heads, seed=5), theirs)
    assert np.array_equal(sa.random_blocks(n, block, r, heads, seed=None), np.zeros_like(theirs))  # eval: none


def test_token_masks_are_figure_1():
    """The slide's Figure 1: r random keys per query, a band of width w, g global rows and columns, and the union."""
    n = 16
    m = sa.token_masks(n, **{"random": 2, "window": 3, "global_tokens": 2}, seed=1)
    assert (m["random"].sum(axis=1) == 2).all()
    assert (m["window"].sum(axis=1) == [2, *[3] * (n - 2), 2]).all() and m["window"][5, 4:7].all()
    assert m["global"][:2].all() and m["global"][:, :2].all() and not m["global"][2:, 2:].any()
    assert np.array_equal(m["bigbird"], m["random"] | m["window"] | m["global"])
    assert not np.array_equal(m["random"], sa.token_masks(n, seed=2)["random"])


def test_costs_against_a_hand_count():
    """4,096 tokens, blocks of 64, 3 random blocks, head size 64: 64 blocks; 2 global query blocks × 64 rows ×
    4,096 keys, 2 × 64 × 64 × 7 for the second and second-to-last, 60 × 64 × 64 × 8 for the rest."""
    c = sa.attention_cost(4096, 64, 64, 3)
    pairs = 2 * 64 * 4096 + 2 * 64 * 64 * 7 + 60 * 64 * 64 * 8
    assert c.pairs_sparse == pairs and c.pairs_full == 4096 ** 2
    assert c.flops_full == 4 * 64 * 4096 ** 2 and c.flops_sparse == 4 * 64 * pairs  # QKᵀ and AV: 2 × 2·d per pair
    assert c.bytes_full == 4 * 4096 ** 2 == 64 * 2 ** 20
    assert c.ratio == pytest.approx(pairs / 4096 ** 2)
    table = sa.cost_table()
    assert [t.length for t in table] == [512, 1024, 2048, 4096, 8192, 16_384]
    ratios = [t.ratio for t in table]
    assert table[0].falls_back and ratios[0] == 1  # 512 ≤ (5 + 2·3) × 64: transformers runs full attention
    assert ratios == sorted(ratios, reverse=True) and ratios[-1] < 0.05  # linear against quadratic
    assert sa.attention_cost(16_384).pairs_sparse == 2 * 64 * 16_384 + 2 * 64 * 64 * 7 + 252 * 64 * 64 * 8


@pytest.mark.parametrize(("n", "block", "r"), [(100, 16, 2), (176, 16, 3), (32_768, 64, 3), (512, 0, 3), (512, 16, -1)])
def test_settings_block_sparse_attention_cannot_run_are_refused(n, block, r):
    with pytest.raises(InvalidConfig):
        sa.block_layout(n, block, r)


def test_token_masks_are_bounded():
    with pytest.raises(InvalidConfig):
        sa.token_masks(sa.MAX_MASK_LENGTH + 1)
    with pytest.raises(InvalidConfig):
        sa.token_masks(16, random=17)
    with pytest.raises(InvalidConfig):
        sa.to_tokens(np.zeros((1, 128, 128), dtype=bool), 64)


# ------------------------------------------------------------------------------------------ the lab's arm

TEXTS = ["the act of moving something from one place to another", "a small domesticated carnivorous mammal",
         "any of various plants of the genus", "a person who works in a particular activity"] * 40


def _arm(attention: str = "bigbird", **kw):
    from models.pretrain.config import TrainConfig

    return TrainConfig(objective="mlm", pack=True, attention=attention, seq_len=96, block_size=8, random_blocks=1,
                       layers=1, hidden=32, heads=2, ffn=64, batch=3, dropout=0.0, **kw).validate()


@pytest.fixture(scope="module")
def lab_parts():
    import torch

    from models.pretrain.corpus import tokenizer
    from models.pretrain.model import build_model

    tok = tokenizer("wordnet-8k")
    torch.manual_seed(0)  # the same weights whichever tests ran before in this worker
    return tok, build_model(_arm(), len(tok), tok).eval()


def test_packed_sequences_are_the_texts_end_to_end(lab_parts):
    from models.pretrain.data import Batches

    tok, _ = lab_parts
    batches = Batches(_arm(), TEXTS, tok)
    ids = [i for t in TEXTS for i in tok(t, add_special_tokens=False)["input_ids"]]
    assert all(len(e["input_ids"]) == 96 for e in batches.examples)
    assert batches.examples[1]["input_ids"] == [tok.cls_token_id, *ids[94:188], tok.sep_token_id]
    assert len(batches.examples) == len(ids) // 94


def test_full_arm_is_the_labs_bert_and_the_sparse_arm_is_restricted(lab_parts):
    """The full arm's batches carry no pattern, so its loss is the lab's BERT's own path; the sparse path with every
    pair allowed gives that loss, so the arms differ in the pattern alone; the pattern changes the loss."""
    import copy

    import torch

    from models.pretrain.data import Batches
    from models.pretrain.loss import loss_of

    tok, untrained = lab_parts
    # An untrained model attends almost uniformly, so a pattern moves its loss only in the 6th digit, or not at all for
    # some draws of the batch's masked positions. Larger query, key and value weights make attention peaked and its
    # output count, as a trained model's do, so what the pattern removes shows in the loss; that it is restricted
    # exactly is the next test's.
    model = copy.deepcopy(untrained)
    with torch.no_grad():
        for module in model.modules():
            if hasattr(module, "query") and isinstance(module.query, torch.nn.Linear):
                for lin in (module.query, module.key, module.value):
                    lin.weight.mul_(30.0)
    torch.manual_seed(0)
    assert "sparse_mask" not in Batches(_arm("full"), TEXTS, tok).sample()
    batch = Batches(_arm(), TEXTS, tok).sample()
    assert batch["sparse_mask"].shape == (3, 2, 96, 96) and not batch["sparse_mask"].all()
    plain = {k: v for k, v in batch.items() if k != "sparse_mask"}
    with torch.no_grad():
        full = float(loss_of(_arm("full"), model, plain))
        everything = float(loss_of(_arm(), model, {**plain, "sparse_mask": torch.ones_like(batch["sparse_mask"])}))
        sparse = float(loss_of(_arm(), model, batch))
    assert everything == pytest.approx(full, abs=1e-5)
    assert sparse != full  # the pattern moves the loss: by 1e-4 to 1e-2 with these weights, as the draw of them goes
    from models.pretrain.sparse import attention_bias

    def hidden(mask):
        bias = attention_bias(mask, plain["attention_mask"], model.bert.embeddings.word_embeddings.weight.dtype)
        with torch.no_grad():
            return model.bert(input_ids=plain["input_ids"], attention_mask=bias).last_hidden_state

    moved = float((hidden(batch["sparse_mask"]) - hidden(torch.ones_like(batch["sparse_mask"]))).abs().max())
    assert moved > 1e-2, moved  # and the states it reads, at every position the pattern cuts (not a mean over 15%)


def test_sparse_arm_attends_exactly_its_pattern(lab_parts):
    """transformers' eager attention under the arm's mask: a weight above 0 where the pattern allows, 0 elsewhere."""
    import torch
    from transformers import BertConfig, BertModel

    from models.pretrain.data import Batches
    from models.pretrain.sparse import attention_bias

    tok, _ = lab_parts
    batch = Batches(_arm(), TEXTS, tok).sample()
    bert = BertModel(BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                                vocab_size=len(tok), attn_implementation="eager")).eval()
    bias = attention_bias(batch["sparse_mask"], batch["attention_mask"], torch.float32)
    with torch.no_grad():
        weights = bert(input_ids=batch["input_ids"], attention_mask=bias, output_attentions=True).attentions[0]
    assert torch.equal(weights > 0, batch["sparse_mask"])  # (B, heads, W, W)
    assert torch.allclose(weights.sum(-1), torch.ones(3, 2, 96))


def test_pattern_is_drawn_per_batch_and_repeats_per_seed(lab_parts):
    from models.pretrain.sparse import SparsePattern

    a, b = SparsePattern(_arm()), SparsePattern(_arm())
    first = a.draw(1)
    assert torch_equal(first, b.draw(1)) and not torch_equal(first, a.draw(1))
    assert not torch_equal(first[0, 0], first[0, 1])  # each head its own random blocks, as in transformers


def torch_equal(x, y) -> bool:
    import torch

    return bool(torch.equal(x, y))


@pytest.mark.parametrize("change", [dict(pack=False), dict(seq_len=48), dict(objective="mlm+sop"), dict(seq_len=100),
                                    dict(attention="longformer"), dict(random_blocks=-1)])
def test_arms_that_cannot_run_are_refused(change):
    from dataclasses import replace

    with pytest.raises(InvalidConfig):
        replace(_arm(), **change).validate()


def test_default_config_is_unchanged():
    from models.pretrain.config import TrainConfig

    c = TrainConfig()
    assert (c.attention, c.pack) == ("full", False)


def test_bigbird_preset_arms_claim_and_budgets():
    from dataclasses import replace

    from models.pretrain.config import TrainConfig
    from models.pretrain.flops import length_stats
    from services.lab.claims import apply_budget
    from services.lab.presets import BUDGETS, CLAIMS, plan_runs
    from services.lab.presets.bigbird import attention_saved

    base = apply_budget(TrainConfig(), BUDGETS["bigbird"]["classroom"])
    runs = plan_runs("bigbird", base, "bb", 2)
    arms = {p.arm: p.config for p in runs if p.replicate == 0}
    assert set(arms) == {"sparse", "full"} and len(runs) == 4
    full, sparse = arms["full"], arms["sparse"]
    assert full.attention == "full" and full.pack and full.seq_len == 256
    assert sparse == replace(full, attention="bigbird", block_size=8, random_blocks=2, run=sparse.run)
    claim = CLAIMS["bigbird"][0]
    assert (claim.measure, claim.a, claim.b, claim.op, claim.margin) == ("held_out_loss", "sparse", "full", ">=", 0.05)
    assert "27%" in attention_saved(sparse)
    assert BUDGETS["bigbird"]["thorough"].seq_len == 512
    stats = length_stats(full)  # packed: every sequence 256 tokens, every pair scored
    assert (stats.tokens_per_sequence, stats.pairs_per_token) == (256, 256)
    with pytest.raises(InvalidConfig):
        plan_runs("bigbird", replace(base, seq_len=100), "bb")  # not 32 whole blocks


# ------------------------------------------------------------------------------------------ the explorer view


def test_view_draws_the_masks_and_the_costs():
    from services import sparse_attention as view

    v = view.explain(32, 2048, seed=3)
    masks = sa.token_masks(32, 2, 3, 2, seed=3)
    drawn = [np.asarray(t.z, dtype=bool) for t in v.tokens.data]
    assert [d.shape for d in drawn] == [(32, 32)] * 4
    assert all(np.array_equal(d, masks[k]) for d, k in zip(drawn, ("random", "window", "global", "bigbird"), strict=True))
    blocks = sa.block_layout(2048, 64, 3, seed=3)["bigbird"][0]
    assert np.array_equal(np.asarray(v.blocks.data[3].z, dtype=bool), blocks)
    rows = {r["tokens"]: r for r in v.costs}
    assert rows[16_384]["sparse / full"] == pytest.approx(sa.attention_cost(16_384).ratio)
    assert rows[4096]["full: scores MiB"] == 64 and rows[512]["note"]
    with pytest.raises(InvalidConfig):
        view.explain(20, 2048)


def test_calculator_page_shows_the_sparse_section_from_the_url():
    from tests.helpers.pages import calc_page, markdown

    at = calc_page(sz_sparse_n="64", sz_sparse_len="4096", sz_tab="Compute & cost")
    assert at.select_slider(key="sz_sparse_n").value == 64 and at.select_slider(key="sz_sparse_len").value == 4096
    assert any("BigBird's sparse attention" in s.value for s in at.subheader)
    costs = at.dataframe[-1].value
    assert list(costs["tokens"]) == [512, 1024, 2048, 4096, 8192, 16_384]
    assert "grows with n²" in markdown(at)


def test_lab_page_plans_the_bigbird_preset(lab_env):
    """The lab page plans the preset at its classroom budget: 2 seeds × the two arms, with the budget's estimate."""
    from streamlit.testing.v1 import AppTest

    from tests.helpers.pages import ENTRY, markdown

    at = AppTest.from_file(ENTRY, default_timeout=60)
    at.query_params["lb_preset"] = "bigbird"
    at.run()
    at.switch_page("views/lab.py").run()
    assert not at.exception, at.exception
    planned = at.dataframe[0].value
    assert len(planned) == 4 and any(r.endswith("-sparse-s1") for r in planned["run"])
    from services.lab.presets import budget_of

    assert budget_of("bigbird", "classroom").minutes in markdown(at)  # stated before Start


# ------------------------------------------------------------------------------------------ the verdict's guard


def _bigbird_runs(full: list[float], sparse: list[float], unigram: list[float] | None) -> list[dict]:
    """Runs whose loss at the [MASK] inputs is their held-out loss + 0.2 (the positions only context can fill)."""
    return [{"arm": arm, "replicate": i, "kind": "bert", "id": 10 * k + i,
             "evaluation": {"held_out_loss": v, **({"unigram_loss": unigram[i], "mask_loss": v + 0.2} if unigram else {})}}
            for k, (arm, values) in enumerate({"sparse": sparse, "full": full}.items()) for i, v in enumerate(values)]


def test_sparse_matches_full_is_decided_only_once_full_attention_beats_the_token_counts():
    """Two models that both predict from token counts alone have equal losses whatever their attention: the classroom
    budget's first runs on this CPU had both arms at 7.03, above what the counts score. "Matches" is then no finding."""
    from services.lab import claim_entries
    from services.lab.presets import CLAIMS

    claim = CLAIMS["bigbird"][0]

    def decide(runs):
        return claim_entries.arm_claim(claim, "held_out_loss", runs, "complete")

    learnt = decide(_bigbird_runs([5.00, 5.10, 5.05], [5.01, 5.12, 5.05], [6.80, 6.81, 6.79]))
    assert learnt["verdict"]["label"] == "agrees"
    assert learnt["context_reference"] == pytest.approx({"arm": "full", "mask_loss": 5.25, "unigram_loss": 6.80})
    assert "full scores 5.250 and the corpus's token counts 6.800" in learnt["sentence"]
    at_counts = decide(_bigbird_runs([6.61, 6.59, 6.62], [6.61, 6.60, 6.62], [6.80, 6.81, 6.79]))  # 6.81 at [MASK]
    assert at_counts["verdict"]["label"] == "cannot tell at this budget"
    assert "Cannot tell at this budget: effect " in at_counts["sentence"]  # the losses' own interval, then why
    assert "below the corpus's token counts at the [MASK] inputs" in at_counts["sentence"]
    assert "sparse by -0.0" in at_counts["sentence"] and "full by -0.0" in at_counts["sentence"]  # both arms, "≥"
    assert "the rule would read “agrees”" in at_counts["sentence"] and at_counts["verdict"]["seeds_needed"] is None
    assert at_counts["precondition"]["full"]["holds"] is False and at_counts["precondition"]["sparse"]["checked"]
    unrecorded = decide(_bigbird_runs([5.00, 5.10, 5.05], [5.01, 5.12, 5.05], None))
    assert unrecorded["verdict"]["label"] == "cannot tell at this budget" and "did not record" in unrecorded["sentence"]
    # every loss claim asks it now, not only attention's (Lion's classroom "agrees" had both arms at the counts)
    lion = claim_entries.arm_claim(CLAIMS["lion"][0], "held_out_loss", [
        {**r, "arm": {"sparse": "lion", "full": "adamw"}[r["arm"]]}
        for r in _bigbird_runs([7.03, 7.01, 7.04], [7.03, 7.02, 7.04], [6.80, 6.81, 6.79])], "complete")
    assert lion["verdict"]["label"] == "cannot tell at this budget" and "lion by -0.4" in lion["sentence"]


def test_unigram_log_probs_count_the_training_tokens_and_give_specials_nothing():
    from models.pretrain.evaluate import unigram_log_probs

    lp = unigram_log_probs([{"input_ids": [0, 2, 2, 3]}, {"input_ids": [0, 2]}], 5, [0])
    # counts + 1: token 1 → 1, 2 → 4, 3 → 2, 4 → 1 (0 is special: no mass); total 8
    assert np.exp(lp[1:]) == pytest.approx([1 / 8, 4 / 8, 2 / 8, 1 / 8]) and lp[0] == -np.inf


def test_a_loss_claim_is_drawn_as_points_on_a_zoomed_axis_and_an_accuracy_as_bars():
    from analysis.verdict_plots import arms_figure
    from services.lab import claim_entries
    from services.lab.presets import CLAIMS

    loss = claim_entries.arm_claim(CLAIMS["bigbird"][0], "held_out_loss",
                                _bigbird_runs([7.03, 7.01, 7.04], [7.03, 7.02, 7.04], [6.80, 6.81, 6.79]), "complete")
    fig = arms_figure(loss)
    assert fig.data[0].type == "scatter" and fig.data[0].mode == "markers" and fig.data[0].error_y.array is not None
    assert "Cannot tell" in loss["sentence"] and "the rule would read “agrees”" in loss["sentence"]
    assert "Agrees:" not in loss["sentence"]  # the rule's label is not repeated inside a "cannot tell"
    accuracy = {**loss, "measure": "sop_accuracy"}
    assert arms_figure(accuracy).data[0].type == "bar"
