"""Attention extraction on tiny models of every architecture and the bundled MiniLM; analyses; offline HTML."""

from __future__ import annotations

import re

import numpy as np
import pytest

from core.errors import AttentionUnavailable, InvalidText
from models import attention as att
from models.attention import extract_attention
from tests.helpers import ROOT
from tests.helpers.tiny import TINY_MODELS

MINILM = "sentence-transformers/all-MiniLM-L6-v2"
TEXT = "The cat sat on the mat because it was tired."


@pytest.mark.parametrize("model_id", [*TINY_MODELS, MINILM])
def test_shape_rows_and_tokens_for_every_architecture(model_id: str) -> None:
    r = extract_attention(model_id, TEXT)
    layers, heads, t, t2 = r.weights.shape
    assert t == t2 == len(r.tokens) == len(r.raw_tokens) == len(r.segments) == len(r.words)
    assert r.weights.dtype == np.float32 and layers >= 2 and heads >= 2
    assert np.allclose(r.weights.sum(-1), 1.0, atol=1e-4)
    assert (any(r.special) or model_id == "gpt2") and not r.truncated  # GPT-2 adds no special tokens
    assert not any("Ġ" in x or "▁" in x for x in r.tokens)
    # every word of the text is covered by some token
    assert {w for w in r.words if w is not None} == set(range(len(r.word_texts)))


def test_gpt2_is_causal() -> None:
    r = extract_attention("gpt2", TEXT)
    assert r.causal
    upper = np.triu(np.ones(r.weights.shape[-2:], dtype=bool), k=1)
    assert np.all(r.weights[..., upper] == 0)


def test_encoders_are_not_causal() -> None:
    r = extract_attention(MINILM, TEXT)
    upper = np.triu(np.ones(r.weights.shape[-2:], dtype=bool), k=1)
    assert r.weights[..., upper].sum() > 1 and not r.causal


@pytest.mark.parametrize("model_id", ["bert-base-uncased", MINILM, "roberta-base", "xlnet-base-cased"])
def test_sentence_pair_segments(model_id: str) -> None:
    r = extract_attention(model_id, "A boy plays in the snow.", "A boy is outside.")
    b = r.sentence_b_start
    assert b is not None and 0 < b < len(r.tokens)
    assert set(r.segments[:b]) == {0} and set(r.segments[b:]) == {1}
    words_b = [r.word_texts[w] for w, seg in zip(r.words, r.segments, strict=True) if w is not None and seg == 1]
    assert "outside" in "".join(words_b)


def test_a_model_loaded_without_eager_attention_is_caught() -> None:
    from models.loader import load

    lm = load(MINILM)  # default (SDPA) attention: returns no weights
    with pytest.raises(AttentionUnavailable, match="attentions=True"):
        extract_attention(lm, TEXT)


def test_long_input_is_truncated_with_a_notice() -> None:
    r = extract_attention(MINILM, "word " * 700)
    assert r.truncated and len(r.tokens) == r.max_tokens == 512 and r.input_tokens > 512
    assert any("truncated" in n for n in r.notices)
    short = extract_attention(MINILM, "word " * 50, max_tokens=16)
    assert len(short.tokens) == 16 and short.truncated


@pytest.mark.parametrize("text", ["", "   ", "\n\t ", "\x00\x01\x07"])
def test_empty_text_is_refused(text: str) -> None:
    with pytest.raises(InvalidText, match="empty"):
        extract_attention(MINILM, text)


def test_odd_text_is_handled() -> None:
    r = extract_attention(MINILM, "Bonjour 😀 \x07 東京 <script>alert(1)</script> Привет")
    assert any("control character" in n for n in r.notices)
    assert "script" in r.tokens and "<" in r.tokens
    assert np.allclose(r.weights.sum(-1), 1.0, atol=1e-4)


def test_head_stats_on_a_hand_made_matrix() -> None:
    tokens = ["[CLS]", "a", ",", "b", "[SEP]"]
    w = np.zeros((1, 2, 5, 5))
    w[0, 0, :, 0] = 1.0  # head 0: everyone looks at [CLS]
    w[0, 1] = np.eye(5, k=-1)  # head 1: everyone looks at the previous token ...
    w[0, 1, 0, 0] = 1.0  # ... and [CLS] at itself
    s = att.head_stats(w, tokens, cls_like=(0,), sep_like=(4,))
    assert s["to_cls"][0, 0] == 1.0 and s["entropy"][0, 0] == 0.0 and s["to_sep"][0, 0] == 0.0
    assert s["distance"][0, 0] == pytest.approx((0 + 1 + 2 + 3 + 4) / 5)
    assert s["to_prev"][0, 1] == 1.0 and s["to_next"][0, 1] == 0.0 and s["to_self"][0, 1] == pytest.approx(1 / 5)
    assert s["to_punct"][0, 1] == pytest.approx(1 / 5)  # only "b" looks at ","
    uniform = np.full((1, 1, 4, 4), 0.25)
    assert att.head_stats(uniform, ["a", "b", "c", "d"])["entropy"][0, 0] == pytest.approx(np.log(4))
    assert np.isnan(att.head_stats(uniform, ["a", "b", "c", "d"])["to_cls"][0, 0])


def test_head_stats_equal_their_definitions_and_one_head_reads_as_in_every_heads() -> None:
    """On random attention (with zeros and a NaN row), each measure equals its textbook formula, computed here the plain
    way; and one head's measures (what a head's caption reads) equal that head's among every head's (to rounding)."""
    rng = np.random.default_rng(3)
    w = rng.random((2, 3, 9, 9))
    w[w < 0.2] = 0.0
    w /= w.sum(-1, keepdims=True)
    w[1, 2, 4] = np.nan
    tokens = ["[CLS]", "a", ",", "b", "c", ".", "d", "e", "[SEP]"]
    s = att.head_stats(w, tokens, cls_like=(0,), sep_like=(8,))
    with np.errstate(divide="ignore", invalid="ignore"):
        plain_entropy = -np.nansum(np.where(w > 0, w * np.log(w), 0.0), axis=-1).mean(axis=-1)
    distance = np.abs(np.arange(9)[:, None] - np.arange(9)[None, :])
    np.testing.assert_allclose(s["entropy"], plain_entropy, rtol=1e-12)
    np.testing.assert_allclose(s["distance"], (w * distance).sum(-1).mean(-1), rtol=1e-12)
    np.testing.assert_allclose(s["to_punct"], w[..., [2, 5]].sum(-1).mean(-1), rtol=1e-12)
    assert np.isnan(s["distance"][1, 2]) and not np.isnan(s["entropy"][1, 2])  # a NaN row: no distance; entropy skips it
    for layer, head in ((0, 0), (1, 2), (0, 1)):
        one = att.head_stats(w[layer:layer + 1, head:head + 1], tokens, cls_like=(0,), sep_like=(8,))
        assert {k: v[0, 0] for k, v in one.items()} == pytest.approx({k: v[layer, head] for k, v in s.items()}, rel=1e-12, abs=0, nan_ok=True)


def test_rollout_on_known_cases() -> None:
    t = 4
    eye = np.broadcast_to(np.eye(t), (3, 2, t, t)).copy()
    assert np.allclose(att.rollout(eye)[-1], np.eye(t))  # attending to oneself changes nothing
    uniform = np.full((1, 2, t, t), 1 / t)
    assert np.allclose(att.rollout(uniform)[0], 0.5 * np.eye(t) + 0.5 / t)
    two = np.full((2, 1, t, t), 1 / t)
    first = 0.5 * np.eye(t) + 0.5 / t
    assert np.allclose(att.rollout(two)[1], first @ first)
    assert np.allclose(att.aggregate(uniform, "max"), uniform[:, 0])


def test_alignment_of_two_tokenizers_on_the_same_text() -> None:
    text = "Tokenizers disagree about unbelievable words."
    a, b = extract_attention("bert-base-uncased", text), extract_attention("gpt2", text)
    words, ma, mb = att.align(a, b)
    assert words == list(a.word_texts) == ["Tokenizers", "disagree", "about", "unbelievable", "words", "."]
    assert ma.shape[-2:] == mb.shape[-2:] == (6, 6)
    assert np.allclose(ma.sum(-1), 1, atol=1e-4) and np.allclose(mb.sum(-1), 1, atol=1e-4)
    with pytest.raises(InvalidText):
        att.align(a, extract_attention("gpt2", "another text"))


def test_offline_bertviz_html() -> None:
    from models.attention_html import bertviz_html

    r = extract_attention(MINILM, "The cat </script><!--<script>alert(1)</script> sat " + "word " * 110)
    assert len(r.tokens) >= 128
    for view in ("head", "model"):
        html = bertviz_html(r, view)
        urls = set(re.findall(r"https?://[^\s\"'<>)]*", html))
        assert all(u.startswith("http://www.w3.org/") for u in urls), urls
        assert "cdnjs" not in html and not re.search(r"require\.config\(\{\s*paths", html)
        assert len(html.encode()) < 3 * 2**20
        # the tokens cannot close a script: only our six scripts (d3, jQuery, require.js, the AMD shim, the SVG
        # snapshot button, the view) end
        assert html.count("</script>") == 6 and "<!--" not in html.split("__bfeUnpack", 1)[1]
        assert "Download this view as SVG" in html
        assert "__bfeUnpack" in html and "d3" in html
    one = bertviz_html(r, "head", layer=2, only_layers=[2])
    assert len(one) < len(bertviz_html(r, "head")) / 3 and '"include_layers":[2]' in one


def test_analyses_do_not_need_torch_at_import() -> None:
    import subprocess
    import sys

    code = "import sys, models.attention, analysis.attention_plots; sys.exit(1 if 'torch' in sys.modules else 0)"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


@pytest.mark.parametrize("model_id", [*TINY_MODELS, MINILM])
@pytest.mark.parametrize("pair", [None, "A boy is outside."])
def test_weights_equal_transformers_eager_output_attentions(model_id: str, pair: str | None) -> None:
    """Captured in place (BERT-like) or stacked (GPT-2, XLNet): the same numbers transformers' own eager
    model returns with output_attentions, on the inputs its tokenizer makes (segment ids included)."""
    import torch
    import transformers

    from models import capture
    from models.loader import load

    lm = load(model_id, attentions=True)
    r = extract_attention(lm, TEXT, pair)
    ref = getattr(transformers, type(lm.model).__name__).from_pretrained(lm.source.location, attn_implementation="eager")
    ref.eval()
    enc = lm.tokenizer(TEXT, pair, return_tensors="pt",
                       return_token_type_ids=bool(pair) and getattr(ref.config, "type_vocab_size", 0) >= 2)
    with torch.inference_mode():
        out = ref(**enc, output_attentions=True)
    att = out.attentions
    expected = torch.stack([a[0] for a in att]).numpy()
    assert r.weights.shape == expected.shape
    np.testing.assert_allclose(r.weights, expected, atol=1e-5, rtol=0)
    assert (lm.model.config._attn_implementation == capture.IMPLEMENTATION) == (lm.model.config.model_type in capture.CAPTURE_TYPES)
    # outside extract_attention the capturing model is plain eager: same attentions, for a padded batch too
    if lm.tokenizer.pad_token is None:  # GPT-2 has no padding token
        return
    batch = lm.tokenizer([TEXT, "a boy ."], return_tensors="pt", padding=True)
    with torch.inference_mode():
        mine, theirs = lm.model(**batch, output_attentions=True), ref(**batch, output_attentions=True)
    for a, b in zip(mine.attentions, theirs.attentions, strict=True):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=0)


def test_capture_writes_one_buffer_and_falls_back_outside_it() -> None:
    import torch

    from models import capture
    from models.loader import load

    lm = load(MINILM, attentions=True)
    enc = lm.tokenizer(TEXT, return_tensors="pt")
    t = enc["input_ids"].shape[1]
    cfg = lm.model.config
    with torch.inference_mode():
        with capture.capturing(cfg.num_hidden_layers, cfg.num_attention_heads, t, lm.device) as cap:
            lm.model(**enc)
        assert cap.complete and cap.layer == cfg.num_hidden_layers
        np.testing.assert_allclose(cap.buffer.sum(-1).numpy(), 1.0, atol=1e-5)
        # a buffer of the wrong size is left alone (the layers run plain eager), and says so
        with capture.capturing(cfg.num_hidden_layers, cfg.num_attention_heads, t + 1, lm.device) as wrong:
            lm.model(**enc)
        assert wrong.layer == 0 and not wrong.complete


def test_modernbert_local_layers_attend_within_their_window() -> None:
    """ModernBERT alternates global and sliding-window layers: the local layers' maps are a band, and the page says which."""
    from tests.helpers.tiny import LOCAL_ATTENTION

    r = extract_attention("modernbert-base", "the cat sat on the mat because it was tired and the dog was not .")
    assert r.local_layers == (1, 2) and r.window == LOCAL_ATTENTION
    t = len(r.tokens)
    far = np.abs(np.subtract.outer(np.arange(t), np.arange(t))) > LOCAL_ATTENTION // 2
    assert t > LOCAL_ATTENTION + 4
    for layer in range(r.layers):
        outside = r.weights[layer][:, far].max()
        if layer in r.local_layers:
            assert outside == 0.0
        else:
            assert outside > 1e-3  # the global layer sees the whole sentence
    assert "layer 0 is global" in r.architecture_note and "layers 1, 2 are local" in r.architecture_note


@pytest.mark.parametrize(("model_id", "words"), [("deberta-v3-base", "disentangled"), ("mpnet-base", "relative-position"),
                                                 ("xlm-roberta-base", "100 languages"), ("bert-base-uncased", "")])
def test_each_architecture_says_what_is_particular_about_its_attention(model_id: str, words: str) -> None:
    r = extract_attention(model_id, "the cat sat on the mat .")
    assert (words in r.architecture_note) if words else r.architecture_note == ""


def test_the_csv_export_is_the_long_form_of_the_weights_and_one_head_past_its_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Built from arrays, the export holds exactly the naive row-by-row long form; a layer past MAX_EXPORT_ROWS
    exports the chosen head only, and its button says so."""
    r = extract_attention("bert-base-uncased", "the cat sat on the mat")
    t = len(r.tokens)
    rows = r.export_rows(1, 2)
    naive = [(1, h, i, r.tokens[i], j, r.tokens[j], float(r.weights[1, h, i, j])) for h in range(r.heads) for i in range(t) for j in range(t)]
    got = list(zip(*(rows[c].tolist() for c in ("layer", "head", "from", "from_token", "to", "to_token", "weight")), strict=True))
    assert got == naive and r.export_label(1, 2) == "Layer 1 CSV"
    monkeypatch.setattr(att, "MAX_EXPORT_ROWS", r.heads * t * t - 1)
    one = r.export_rows(1, 2)
    assert set(one["head"].tolist()) == {2} and len(one["weight"]) == t * t
    assert one["weight"].tolist() == [w for (_, h, *_, w) in naive if h == 2]
    assert r.export_label(1, 2) == "Layer 1, head 2 CSV"
    doc = __import__("json").loads(r.to_json())
    assert doc["shape"] == list(r.weights.shape) and np.allclose(doc["weights"], np.round(r.weights, 4), atol=1e-6)
