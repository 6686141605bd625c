"""Representations: hidden states, CKA, Ethayarajh's measures, projections, nearest contexts, the neuron view,
attributions (Captum), and the page — on the bundled MiniLM (real weights) and the tiny models."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from analysis import representations as R
from core.errors import AttentionUnavailable, InvalidData, InvalidText, UnsupportedTask
from tests.helpers import ENTRY, ROOT
from tests.helpers.tiny import TINY_MODELS

MINILM = "sentence-transformers/all-MiniLM-L6-v2"


# ------------------------------------------------------------------------------------------ hidden states
@pytest.mark.parametrize("model_id", [MINILM, *TINY_MODELS])
def test_hidden_states_equal_transformers_output_hidden_states(model_id: str) -> None:
    import torch

    from models.loader import load
    from models.representations import hidden_states

    texts = ["the cat sat on the mat .", "a boy plays in the snow because it was tired .", "penguins ."]
    reps = hidden_states(model_id, texts)  # one padded batch
    lm = load(model_id)
    for text, item in zip(texts, reps.items, strict=True):
        enc = lm.tokenizer(text, return_tensors="pt")
        with torch.inference_mode():
            ref = np.stack([h[0].float().numpy() for h in lm.model(**enc, output_hidden_states=True).hidden_states])
        assert item.hidden.dtype == np.float32 and item.hidden.shape == ref.shape
        assert np.abs(item.hidden - ref).max() < 1e-5
        assert len(item.tokens) == len(item.words) == ref.shape[1]
    assert reps.layers == lm.model.config.num_hidden_layers


def test_hidden_states_bounds() -> None:
    from models.representations import MAX_BATCH_TEXTS, hidden_states

    with pytest.raises(InvalidText):
        hidden_states(MINILM, [])
    with pytest.raises(InvalidText, match="empty"):
        hidden_states(MINILM, ["   "])
    with pytest.raises(InvalidText, match=str(MAX_BATCH_TEXTS)):
        hidden_states(MINILM, ["a b"] * (MAX_BATCH_TEXTS + 1))
    long = hidden_states(MINILM, ["word " * 700, "short text"])
    assert long.items[0].hidden.shape[1] == 512 and len(long.notices) == 1 and "truncated" in long.notices[0]
    exact = hidden_states(MINILM, ["word " * 510])  # exactly the limit with [CLS] and [SEP]: nothing cut
    assert exact.items[0].hidden.shape[1] == 512 and not exact.notices
    reps = hidden_states(MINILM, ["word"])  # one token between [CLS] and [SEP]
    with pytest.raises(InvalidData, match="layers 0–6"):
        reps.layer_matrix(7)


# ------------------------------------------------------------------------------------------ the measures
def test_cka_is_one_under_rotation_and_scaling_and_low_for_independent_data() -> None:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 40))
    q, _ = np.linalg.qr(rng.normal(size=(40, 40)))
    assert R.linear_cka(x, 3.7 * x @ q) == pytest.approx(1.0, abs=1e-9)
    assert R.linear_cka(x, x + 5.0) == pytest.approx(1.0, abs=1e-9)  # centring: a shift changes nothing
    assert R.linear_cka(x, rng.normal(size=(300, 40))) < 0.2
    m = R.cka_matrix([x, 2 * x, rng.normal(size=(300, 10))])
    assert m.shape == (3, 3) and np.allclose(np.diag(m), 1) and np.allclose(m, m.T)
    with pytest.raises(InvalidData, match="same items"):
        R.linear_cka(x, x[:10])
    bad = x.copy()
    bad[3, 2] = np.nan
    with pytest.raises(InvalidData, match="NaN"):
        R.linear_cka(bad, x)


def test_ethayarajh_measures() -> None:
    rng = np.random.default_rng(1)
    v = rng.normal(size=16)
    assert R.self_similarity(np.stack([v, v, v])) == pytest.approx(1.0)  # the same context repeated
    iso = rng.normal(size=(4000, 64))
    assert abs(R.anisotropy(iso)) < 0.05
    assert R.anisotropy(iso + 10.0) > 0.9  # every vector pointing one way
    sentence = rng.normal(size=(6, 8))
    assert R.intra_sentence_similarity(np.repeat(sentence[:1], 5, axis=0)) == pytest.approx(1.0)
    # per layer: a word in two contexts, from real hidden states; the repeated identical sentence gives 1 at every layer
    from models.representations import hidden_states

    reps = hidden_states(MINILM, ["the bank raised rates .", "the bank raised rates ."])
    layers = np.stack([reps.layer_matrix(layer)[0] for layer in range(reps.layers + 1)])
    where = reps.layer_matrix(0)[1]
    words = [reps.items[t].word_texts[reps.items[t].words[p]] for t, p in where]
    out = R.contextuality(layers, [t for t, _ in where], words)
    assert len(out) == reps.layers + 1 and all(m.self_similarity == pytest.approx(1.0, abs=1e-5) for m in out)
    assert all(m.adjusted_self_similarity == pytest.approx(m.self_similarity - m.anisotropy) for m in out)


@pytest.mark.parametrize("method", R.METHODS)
def test_projections_are_deterministic_for_a_seed(method: str) -> None:
    rng = np.random.default_rng(2)
    x = np.concatenate([rng.normal(0, 1, (30, 20)), rng.normal(6, 1, (30, 20))])
    a, b = R.project(x, method, seed=3), R.project(x, method, seed=3)
    assert a.shape == (60, 2) and np.allclose(a, b)
    # two well-separated clusters stay apart in 2-D
    gap = np.linalg.norm(a[:30].mean(0) - a[30:].mean(0))
    spread = max(a[:30].std(0).max(), a[30:].std(0).max())
    assert gap > 2 * spread


def test_umaps_compiled_functions_are_cached_on_disk_as_cache_true_would(monkeypatch: pytest.MonkeyPatch) -> None:
    """umap declares its numba functions without ``cache=True``, so each process compiled them again (17 s); the
    projection turns numba's disk cache on for each of them before it is compiled (analysis.representations._umap), so
    a later process loads them. The embedding is unchanged (the projection test above checks it per seed)."""
    import umap
    import umap.layouts
    import umap.umap_
    from numba.core.caching import FunctionCache
    from numba.core.registry import CPUDispatcher

    R._umap()
    found = {name: obj for module in (umap.umap_, umap.layouts) for name, obj in vars(module).items()
             if isinstance(obj, CPUDispatcher)}
    # the ones a fit compiles (those umap declares with a signature are compiled as it is imported, and stay so)
    fit = ("smooth_knn_dist", "compute_membership_strengths", "fast_knn_indices", "_nb_optimize_layout_euclidean_single_epoch")
    assert all(isinstance(found[name]._cache, FunctionCache) for name in fit), \
        [name for name in fit if not isinstance(found[name]._cache, FunctionCache)]

    def nowhere(self) -> None:
        raise RuntimeError("cannot cache function: no locator available")

    monkeypatch.setattr(R, "_UMAP_CACHED", [])  # a machine with no writable place for numba's cache: umap as before
    monkeypatch.setattr(CPUDispatcher, "signatures", property(lambda self: []))
    monkeypatch.setattr(CPUDispatcher, "enable_caching", nowhere)
    assert R._umap() is umap


def test_projection_refuses_bad_input() -> None:
    with pytest.raises(InvalidData, match="Unknown projection"):
        R.project(np.zeros((5, 3)), "lda")
    with pytest.raises(InvalidData, match="at least 3"):
        R.project(np.zeros((2, 3)))
    with pytest.raises(InvalidData, match="more than a projection"):
        R.project(np.zeros((R.MAX_POINTS + 1, 2)))
    x = np.ones((5, 3))
    x[0, 0] = np.inf
    with pytest.raises(InvalidData, match="NaN or infinite"):
        R.project(x)


def test_nearest_equals_a_brute_force_scan() -> None:
    rng = np.random.default_rng(4)
    v = rng.normal(size=(5000, 32)).astype(np.float32)
    q = rng.normal(size=32)
    idx, sims = R.nearest(q, v, 7)
    cos = (v / np.linalg.norm(v, axis=1, keepdims=True)) @ (q / np.linalg.norm(q))
    assert list(idx) == list(np.argsort(-cos, kind="stable")[:7])
    assert np.allclose(sims, cos[idx], atol=1e-5)


# ------------------------------------------------------------------------------------------ layers compared
SIM_TEXTS = ["the cat sat on the mat .", "a boy plays in the snow .", "the cat is outside .", "penguins are flightless birds ."]


def test_layer_similarity_equals_the_measures_called_by_hand() -> None:
    """The page's former computation, step by step: Ethayarajh's measures and CKA over the non-special tokens."""
    from models.representations import hidden_states, layer_similarity

    reps = hidden_states("bert-base-uncased", SIM_TEXTS)
    sim = layer_similarity(reps)
    _, where = reps.layer_matrix(0)
    words = [reps.items[t].word_texts[reps.items[t].words[p]].lower().strip(".,;:!?\"'") if reps.items[t].words[p] is not None
             else "" for t, p in where]
    per_layer = np.stack([reps.layer_matrix(layer)[0] for layer in range(reps.layers + 1)])
    assert sim.measures == R.contextuality(per_layer, [t for t, _ in where], words)
    assert np.array_equal(sim.cka, R.cka_matrix(list(per_layer)))
    assert sim.cka.shape == (reps.layers + 1, reps.layers + 1) and np.allclose(np.diag(sim.cka), 1)
    assert sim.tokens == len(where) and sim.measures[0].words >= 2  # 'the' and 'cat' occur in two sentences


def test_cross_model_cka_equals_pooling_by_word_by_hand() -> None:
    """Two tokenizers (WordPiece, byte-level BPE) split the texts differently; pooled per word, the rows are the same words."""
    from dataclasses import replace

    from models.representations import Representations, cross_model_cka, hidden_states

    a, b = hidden_states("bert-base-uncased", SIM_TEXTS), hidden_states("roberta-base", SIM_TEXTS)
    by_hand = [[np.concatenate([R.pool_by_word(item.hidden[layer], item.words)[0] for item in reps.items])
                for layer in range(reps.layers + 1)] for reps in (a, b)]
    cross = cross_model_cka(a, b)
    assert cross.cka.shape == (b.layers + 1, a.layers + 1)  # rows: b's layers
    assert np.array_equal(cross.cka, R.cka_matrix(by_hand[1], by_hand[0]))
    assert cross.words == by_hand[0][0].shape[0] == sum(len(i.word_texts) for i in a.items)
    assert list(cross.best_match) == list(cross.cka.argmax(axis=1))
    assert np.allclose(np.diag(cross_model_cka(a, a).cka), 1)  # a model against itself
    with pytest.raises(InvalidData, match="different texts"):
        cross_model_cka(a, hidden_states("roberta-base", SIM_TEXTS[:2]))
    first = b.items[0]
    lost = replace(first, words=tuple(None if w == 0 else w for w in first.words))  # a word with no token
    with pytest.raises(InvalidData, match="do not agree"):
        cross_model_cka(a, Representations(b.model_id, (lost, *b.items[1:])))


# ------------------------------------------------------------------------------------------ nearest contexts
def test_nearest_contexts_equal_brute_force_and_the_index_is_cached(tiny_dir: Path, monkeypatch) -> None:
    from models import representations as M
    from models.loader import load

    lm = load("bert-base-uncased")
    hits = M.nearest_contexts(lm, "the cat sat on the mat .", position=2, k=5, layer=1, limit=200)
    sentences = M.corpus(200)
    reps = M.hidden_states(lm, list(sentences))
    x, where = reps.layer_matrix(1)
    query = M.hidden_states(lm, ["the cat sat on the mat ."]).items[0].hidden[1, 2]
    unit = x / np.linalg.norm(x, axis=1, keepdims=True)
    index = M.corpus_index(lm, 1, 200)
    assert index.vectors.shape == unit.shape and np.abs(index.vectors - unit).max() < 1e-3  # float16 on disk
    assert [index.sentences[s] for s in index.sentence] == [sentences[t] for t, _ in where]
    # the search equals a brute-force scan of the stored vectors, order and all
    scan = index.vectors @ (query / np.linalg.norm(query))
    best = sorted(range(len(scan)), key=lambda i: (-scan[i], i))[:5]
    assert [h.sentence for h in hits] == [sentences[where[i][0]] for i in best]
    assert [h.similarity for h in hits] == pytest.approx([float(scan[i]) for i in best], abs=1e-5)
    # and the float16 index keeps the fp32 scan's neighbours up to near-ties
    exact = unit @ (query / np.linalg.norm(query))
    assert min(exact[best]) >= np.sort(exact)[-5] - 2e-3
    own = M._index_dir() / f"{M._fingerprint(lm, 1, 200)}.npz"  # (the folder is shared: damage only this test's file)
    assert own.is_file()
    monkeypatch.setattr(M, "_forward_hidden", lambda *a: pytest.fail("rebuilt"))
    assert M.corpus_index(lm, 1, 200) is index  # kept in memory
    M._loaded.clear()
    M.corpus_index(lm, 1, 200)  # from disk: no forward pass
    # a small model's pass kept every layer's index: the others are read, not built, and are that layer's vectors
    for other in (0, lm.model.config.num_hidden_layers):
        xo, _ = reps.layer_matrix(other)
        assert np.abs(M.corpus_index(lm, other, 200).vectors - xo / np.linalg.norm(xo, axis=1, keepdims=True)).max() < 1e-3
    own.write_bytes(b"not a zip")  # a damaged index is built again, not trusted
    M._loaded.clear()
    monkeypatch.undo()
    index = M.corpus_index(lm, 1, 200)
    assert index.vectors.shape[0] == x.shape[0]
    monkeypatch.setattr(M, "ALL_LAYERS_BYTES", 0)  # a model too large to keep every layer: only the one asked for
    M.corpus_index(lm, 1, 150)
    assert (M._index_dir() / f"{M._fingerprint(lm, 1, 150)}.npz").is_file()
    assert not (M._index_dir() / f"{M._fingerprint(lm, 2, 150)}.npz").is_file()


def test_nearest_contexts_bad_input() -> None:
    from models.representations import nearest_contexts

    with pytest.raises(InvalidData, match="outside"):
        nearest_contexts("bert-base-uncased", "the cat", position=40, limit=50)
    with pytest.raises(InvalidData, match="special token"):
        nearest_contexts("bert-base-uncased", "the cat", position=0, limit=50)
    with pytest.raises(InvalidData, match="layers 0–2"):
        nearest_contexts("bert-base-uncased", "the cat", position=1, layer=9, limit=50)
    with pytest.raises(InvalidText):
        nearest_contexts("bert-base-uncased", "  ", position=1, limit=50)


def test_the_corpus_ships_with_its_licence() -> None:
    from models.representations import CORPUS, corpus

    assert CORPUS.is_file() and (CORPUS.parent / "LICENSE-WordNet").read_text().count("WordNet 3.0 Copyright 2006") == 1
    assert len(corpus()) == 6_000 and len(set(corpus())) > 5_900


# ------------------------------------------------------------------------------------------ neuron view
@pytest.mark.parametrize("model_id", [MINILM, "bert-base-uncased", "roberta-base", "albert-base-v2", "distilbert-base-uncased",
                                      "google/electra-small-discriminator", "gpt2", "xlm-roberta-base",
                                      "bert-base-multilingual-cased"])
def test_query_key_scores_reproduce_the_models_attention(model_id: str) -> None:
    from models.attention import extract_attention
    from models.neuron_view import query_key

    text = "the cat sat on the mat because it was tired ."
    r = extract_attention(model_id, text)
    for layer in range(r.layers):
        for head in (0, r.heads - 1):
            qk = query_key(model_id, text, layer, head)
            assert qk.tokens == r.tokens
            assert np.abs(qk.probabilities - r.weights[layer, head]).max() < 1e-5
            seen = np.isfinite(qk.scores[2])  # GPT-2: token 2 sees tokens 0–2 only
            assert seen.sum() == (3 if qk.causal else len(qk.tokens))
            assert np.allclose(qk.product(2).sum(-1)[seen] / np.sqrt(qk.query.shape[1]), qk.scores[2][seen], atol=1e-5)


@pytest.mark.parametrize(("model_id", "words"), [("deberta-v3-base", "disentangled"), ("mpnet-base", "relative-position"),
                                                 ("xlnet-base-cased", "relative positions"), ("modernbert-base", "rotary")])
def test_query_key_says_which_architectures_are_not_plain(model_id: str, words: str) -> None:
    from models.neuron_view import query_key

    with pytest.raises(AttentionUnavailable, match=words):
        query_key(model_id, "the cat sat", 0, 0)


def test_query_key_bounds() -> None:
    from models.neuron_view import query_key

    with pytest.raises(AttentionUnavailable, match="layers 0–5"):
        query_key(MINILM, "the cat", 6, 0)


# ------------------------------------------------------------------------------------------ attribution
def _complete(a) -> None:
    """Integrated gradients add up to f(x) − f(baseline), within the convergence delta Captum reports."""
    assert a.integrated_gradients.shape == a.gradient_x_input.shape == (len(a.tokens),)
    assert abs(a.integrated_gradients.sum() - (a.f_input - a.f_baseline)) <= abs(a.delta) + 1e-4
    assert abs(a.delta) < 0.05 * max(1e-3, abs(a.f_input - a.f_baseline)) + 1e-3


def test_similarity_attribution_on_the_bundled_model() -> None:
    from models.attribution import similarity

    a = similarity(MINILM, "A man is playing the guitar on stage.", "Someone performs music.")
    _complete(a)
    words = dict(zip(a.tokens, a.integrated_gradients, strict=True))
    assert words["guitar"] > words["the"] and words["playing"] > words["on"]  # real weights: the music words matter
    assert a.integrated_gradients[0] == 0 and a.integrated_gradients[-1] == 0  # [CLS], [SEP] are their own baseline


@pytest.mark.parametrize(("fn", "model_id", "args"), [
    ("fill_mask", "bert-base-uncased", ("the cat sat on the [MASK] .",)),
    ("fill_mask", "roberta-base", ("the cat sat on the [MASK] .", "mat")),
    ("sentence_relation", "bert-base-uncased", ("a boy plays in the snow .", "a boy is outside .")),
    ("sentence_relation", "albert-base-v2", ("a boy plays in the snow .", "a boy is outside .")),
    ("replaced_token", "google/electra-small-discriminator", ("the cat sat on the mat .", 3)),
])
def test_attributions_are_complete_for_every_output(fn: str, model_id: str, args: tuple) -> None:
    from models import attribution

    _complete(getattr(attribution, fn)(model_id, *args, steps=50))


def test_attribution_refusals() -> None:
    from models import attribution as A

    with pytest.raises(UnsupportedTask):
        A.sentence_relation("google/electra-small-discriminator", "a", "b")
    with pytest.raises(UnsupportedTask):
        A.replaced_token("bert-base-uncased", "the cat", 1)
    with pytest.raises(UnsupportedTask):  # no MLM head: refused, never a random head
        A.fill_mask(MINILM, "the [MASK] sat")
    with pytest.raises(InvalidText, match="single-token"):
        A.fill_mask("bert-base-uncased", "the [MASK] sat", candidate="cat mat")
    with pytest.raises(InvalidText, match="steps"):
        A.similarity(MINILM, "a", "b", steps=10_000)
    with pytest.raises(InvalidText, match="no mask number 2"):
        A.fill_mask("bert-base-uncased", "the [MASK] sat", mask=1)


# ------------------------------------------------------------------------------------------ the page
def _page(**params: str):
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    st.cache_data.clear()
    at = AppTest.from_file(ENTRY, default_timeout=300)
    at.switch_page("views/representations.py")
    for k, v in params.items():
        at.query_params[k] = v
    return at.run()


@pytest.mark.parametrize("view", ["projection", "similarity", "neuron", "why"])
def test_every_view_draws_offline_on_the_bundled_model(view: str) -> None:
    at = _page(rp_view=view)
    assert not at.exception and not at.error
    assert at.title[0].value == "Representations"


def test_the_projection_separates_the_senses_of_bank_at_a_middle_layer() -> None:
    from models.representations import hidden_states

    at = _page(rp_view="projection", rp_words="bank", rp_layer="4")
    assert not at.exception and not at.error
    # the same computation as the page: PCA of 'bank' at layer 4 of the real MiniLM
    import pandas as pd

    senses = pd.read_csv(ROOT / "data" / "corpus" / "senses.csv")
    rows = senses[senses["word"] == "bank"]
    reps = hidden_states(MINILM, list(rows["sentence"]))
    vecs = [item.hidden[4, next(p for p, w in enumerate(item.words) if w is not None and item.word_texts[w].lower() == "bank")]
            for item in reps.items]
    xy = R.project(np.stack(vecs), "pca")
    money, river = xy[(rows["sense"] == "money").to_numpy()], xy[(rows["sense"] == "river").to_numpy()]
    assert np.linalg.norm(money.mean(0) - river.mean(0)) > 2 * max(money.std(0).max(), river.std(0).max())


def test_the_page_handles_bad_input() -> None:
    at = _page(rp_view="projection", rp_source="typed", rp_text="  ")
    assert not at.exception and any("type a sentence" in i.value.lower() for i in at.info)
    at = _page(rp_view="projection", rp_source="typed", rp_text="hello world", rp_focus="zebra")
    assert not at.exception and any("Fewer than three tokens" in i.value for i in at.info)
    at = _page(rp_view="projection", rp_layer="1001", rp_method="pca")  # past representations.BOUNDS["layer"]
    assert not at.exception and any("were reset" in w.value for w in at.warning)
    at = _page(rp_view="neuron", rp_model="deberta-v3-base")
    assert not at.exception and any("not plain" in e.value or "disentangled" in e.value for e in at.error)


def test_nearest_contexts_on_the_page(monkeypatch) -> None:
    monkeypatch.setenv("BFE_CORPUS_SENTENCES", "100")  # a small index: the page's search, not the corpus, is tested
    at = _page(rp_view="nearest", rp_model="bert-base-uncased", rp_source="typed", rp_text="the cat sat on the mat .",
               rp_k="3", rp_layer="1")
    assert not at.exception and not at.error
    at.button(key="rp_search").click().run()
    assert not at.exception and not at.error
    table = at.dataframe[0].value
    assert len(table) == 3 and list(table.columns) == ["similarity", "token", "sentence"]


def test_an_uploaded_matrix_is_checked_before_it_is_projected() -> None:
    good = "label,a,b,c\n" + "\n".join(f"w{i},{i},{i * 2 % 7},{i % 3}" for i in range(10))
    x, labels = R.parse_vectors_csv(good.encode())
    assert x.shape == (10, 3) and labels[:2] == ["w0", "w1"]
    assert R.project(x).shape == (10, 2)
    too_many = ("a\n" + "1\n" * (R.MAX_POINTS + 2)).encode()
    for raw, words in ((b"a,b\n1,2\n3,\n5,6\n7,8\n", "lines 3"), (b"a,b\n1,2\nnan,4\n5,6\n7,8\n", "NaN"),
                       (b"a,b\n1,x\n3,4\n5,6\n", "holds text"), (b"a,b\n1,2\n3,4\n", "at least 3"),
                       (too_many, "More than"), (b"\xff\xfe\x00garbage", "not a CSV")):
        with pytest.raises(InvalidData, match=words):
            R.parse_vectors_csv(raw)
    with pytest.raises(InvalidData, match="at most 5 MB"):
        R.parse_vectors_csv(b"a\n" + b"1\n" * (3 * 2**20))


def test_a_vectors_csv_of_random_bytes_is_read_or_refused_by_name() -> None:
    """Property: any bytes (binary, text, CSV-shaped rows of numbers and words, huge numbers, NaN) are either vectors of
    finite numbers with one label per row, or InvalidData; never another exception."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    cell = st.one_of(st.floats(), st.integers(-10**30, 10**30), st.text(max_size=6), st.sampled_from(["", "nan", "label"]))
    rows = st.lists(st.lists(cell, min_size=1, max_size=6), max_size=40).map(lambda r: "\n".join(",".join(map(str, x)) for x in r).encode())

    @settings(max_examples=200, deadline=None, derandomize=True, database=None)
    @given(st.one_of(st.binary(max_size=3000), rows, st.text(max_size=400).map(str.encode)))
    def check(raw: bytes) -> None:
        try:
            vectors, labels = R.parse_vectors_csv(raw)
        except InvalidData:
            return
        assert vectors.ndim == 2 and len(labels) == len(vectors) and np.isfinite(vectors).all()

    check()
