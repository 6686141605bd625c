"""Real attention weights of any family member, and the analyses the Attention page shows.

``extract_attention(model, text, text_pair)`` runs one forward pass with eager attention and
returns an :class:`AttentionResult` whose ``weights`` are float32, shape (layers, heads, T, T):
row i is where token i looks. GPT-2's upper triangle is zero (causal); XLNet gives its content
stream. Analyses (no torch): :func:`head_stats` (Clark et al. 2019, "What Does BERT Look At?"),
:func:`aggregate` over heads, :func:`rollout` (Abnar & Zuidema 2020), and :func:`word_attention` /
:func:`align` to compare two tokenizers on the same text.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.architectures import ARCHITECTURES
from core.errors import AttentionUnavailable, ExplorerError, InvalidText, check_text_length
from models.loader import ModelRef

PUNCTUATION = frozenset(".,;:!?-—–()[]{}\"'`…/")
WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


#: The most rows an attention CSV export holds: past it, the layer's export is one head's (see
#: :meth:`AttentionResult.export_rows`).
MAX_EXPORT_ROWS = 500_000


@dataclass(frozen=True)
class AttentionResult:
    """Attention of one model on one input.

    ``weights``: float32 (layers, heads, T, T), rows sum to 1. ``tokens`` are readable (``Ġ``/``▁``
    markers removed, WordPiece ``##`` kept, special tokens kept); ``raw_tokens`` are the vocabulary's.
    ``segments``: 0 for sentence A, 1 for B (special tokens take their neighbour's). ``words``: for
    each token, the index of the word of the text it belongs to (None for special tokens), from
    character offsets, so two tokenizers can be aligned.
    """

    model_id: str
    tokens: tuple[str, ...]
    raw_tokens: tuple[str, ...]
    segments: tuple[int, ...]
    special: tuple[bool, ...]
    words: tuple[int | None, ...]
    word_texts: tuple[str, ...]
    weights: np.ndarray = field(repr=False)  # (L, H, T, T)
    causal: bool = False
    truncated: bool = False
    input_tokens: int = 0  # tokens before truncation
    max_tokens: int = 0
    notices: tuple[str, ...] = ()
    cls_like: tuple[int, ...] = ()  # positions of [CLS] / <s> / <cls>
    sep_like: tuple[int, ...] = ()  # positions of [SEP] / </s> / <sep>
    local_layers: tuple[int, ...] = ()  # layers that attend within a sliding window (ModernBERT)
    window: int = 0  # that window, in tokens (each token sees window // 2 on each side)
    architecture_note: str = ""  # what is particular about this architecture's attention, for the page

    @property
    def layers(self) -> int:
        return self.weights.shape[0]

    @property
    def heads(self) -> int:
        return self.weights.shape[1]

    @property
    def sentence_b_start(self) -> int | None:
        return self.segments.index(1) if 1 in self.segments else None

    def _export_heads(self, head: int) -> np.ndarray:
        t = len(self.tokens)
        return np.arange(self.heads) if self.heads * t * t <= MAX_EXPORT_ROWS else np.array([head])

    def export_label(self, layer: int, head: int) -> str:
        """What :meth:`export_rows` holds, for its download button."""
        one = len(self._export_heads(head)) == 1 and self.heads > 1
        return f"Layer {layer}, head {head} CSV" if one else f"Layer {layer} CSV"

    def export_rows(self, layer: int, head: int) -> dict[str, np.ndarray]:
        """The weights to export as CSV in long form (layer, head, from, to, their tokens, weight), as columns: every
        head of ``layer``, or only ``head`` where the layer would pass :data:`MAX_EXPORT_ROWS` (12 heads at 512 tokens are
        3.1 million rows, about 150 MB of CSV held in the server's memory per click). Built from arrays, not row by row."""
        t = len(self.tokens)
        tokens = np.asarray(self.tokens, dtype=object)
        which, src, dst = (a.ravel() for a in np.meshgrid(self._export_heads(head), np.arange(t), np.arange(t), indexing="ij"))
        return {"layer": np.full(len(which), layer), "head": which, "from": src, "from_token": tokens[src], "to": dst,
                "to_token": tokens[dst], "weight": self.weights[layer, which, src, dst].astype(float)}  # each (rows,)

    def _header(self) -> dict[str, Any]:
        return {"model": self.model_id, "tokens": list(self.tokens), "segments": list(self.segments),
                "truncated": self.truncated, "shape": list(self.weights.shape)}

    def to_dict(self, decimals: int = 4) -> dict[str, Any]:
        """JSON-ready: tokens, segments, and the weights rounded to ``decimals``."""
        return self._header() | {"weights": np.round(self.weights, decimals).tolist()}

    def to_json(self, decimals: int = 4) -> bytes:
        """:meth:`to_dict` as JSON bytes, the weights written by orjson straight from the array (json.dumps of the nested
        lists is slow at 512 tokens, 19 million numbers: bench/results/README.md)."""
        import orjson

        doc = self._header() | {"weights": np.round(self.weights, decimals).astype(np.float32)}
        return orjson.dumps(doc, option=orjson.OPT_SERIALIZE_NUMPY)


def clean_text(text: str, what: str = "text") -> tuple[str, list[str]]:
    """Remove control and format characters (keeping tabs/newlines as spaces); refuse empty text."""
    if not isinstance(text, str):
        raise InvalidText(f"The {what} must be a string, not {type(text).__name__}.")
    check_text_length(text, what)
    removed = 0
    out = []
    for ch in text:
        cat = unicodedata.category(ch)
        if ch in "\t\n\r":
            out.append(" ")
        elif cat in ("Cc", "Cf", "Cs", "Co") and ch != "\u200d":  # keep the zero-width joiner inside emoji
            removed += 1
        else:
            out.append(ch)
    cleaned = "".join(out).strip()
    if not cleaned:
        raise InvalidText(f"The {what} is empty.", "Type a sentence, or pick one of the examples.")
    notes = [f"{removed} control character(s) were removed from the {what}."] if removed else []
    return cleaned, notes


def readable(token: str) -> str:
    """A vocabulary token as a person reads it: byte-level ``Ġ``/``Ċ`` and SentencePiece ``▁`` removed."""
    shown = token.replace("Ġ", "").replace("▁", "").replace("Ċ", "\\n")
    return shown if shown else "␣"  # a token that is only a space marker


def _word_spans(text: str) -> list[tuple[int, int]]:
    return [m.span() for m in WORD_RE.finditer(text)]


def _word_index(starts: list[int], ends: list[int], start: int, end: int) -> int | None:
    """The first word (sorted, non-overlapping spans) that holds character ``start`` or begins inside
    ``[start, end)``: a binary search, so a 512-token input costs microseconds, not a T × W scan."""
    j = bisect.bisect_right(starts, start)
    if j and start < ends[j - 1]:
        return j - 1
    if j < len(starts) and starts[j] < end:
        return j
    return None


def _forward_attention(lm: Any, enc: dict[str, Any], t: int) -> np.ndarray:
    """One forward pass; its attention as float32 (L, H, T, T). Written straight into one array
    where the model supports it (:mod:`models.capture`), else gathered from ``output_attentions``."""
    import torch

    from models import capture

    net = lm.model
    config = getattr(net.config, "text_config", net.config)
    with torch.inference_mode():
        if lm.dtype == torch.float32 and capture.supports(net) \
                and net.config._attn_implementation == capture.IMPLEMENTATION:
            with capture.capturing(config.num_hidden_layers, config.num_attention_heads, t, lm.device) as cap:
                net(**enc)
            if cap.complete:
                return cap.buffer.cpu().numpy()
        out = net(**enc, output_attentions=True)
    att = getattr(out, "attentions", None)
    if not att or any(a is None or a.shape[-1] != t or a.shape[-2] != t for a in att):
        raise AttentionUnavailable(f"{lm.model_id} returned no attention weights.",
                                   "Load it with attentions=True (eager attention); SDPA and FlashAttention return none.")
    return torch.stack([a[0] for a in att]).float().cpu().numpy()


def extract_attention(model: ModelRef, text: str, text_pair: str | None = None, max_tokens: int | None = None) -> AttentionResult:
    """Attention of ``model`` (a catalog id, or a ``LoadedModel`` loaded with ``attentions=True``) on ``text``.

    ``text_pair`` makes a sentence pair (segments A and B). Input past the model's limit (or
    ``max_tokens``) is truncated and the result says so (``truncated``, ``notices``).

    Raises:
        InvalidText: empty or whitespace-only text.
        AttentionUnavailable: the model returned no attention (not loaded with eager attention).
        core.errors.ModelUnavailable and friends: from the loader.
    """

    from models.loader import as_loaded

    lm = as_loaded(model, attentions=True)
    prepared = _prepare(lm, text, text_pair, max_tokens)
    enc = {k: v.to(lm.device) for k, v in prepared.enc.items()}
    return _assemble(lm, prepared, _forward_attention(lm, enc, enc["input_ids"].shape[1]))


#: The most attention one padded batch may hold, in bytes of float32 (layers x heads x T x T per sentence), and the
#: most tokens (padding included) it may feed the model: a class's 30 sentences of a few dozen tokens fit in one pass.
BATCH_ATTENTION_BYTES = 512 * 2**20
BATCH_TOKENS = 8192


def extract_attention_batch(model: ModelRef, items: list[tuple[str, str | None, int | None]]) -> list[AttentionResult | Exception]:
    """:func:`extract_attention` for several ``(text, text_pair, max_tokens)`` at once, in padded forward passes.

    Each result equals what :func:`extract_attention` returns for that item alone (the padding is masked out of every
    softmax and cut off each result; a test compares them). Items are sorted by length and cut into batches bounded by
    :data:`BATCH_ATTENTION_BYTES` and :data:`BATCH_TOKENS`. Architectures whose attention depends on the padded length
    (relative positions: XLNet; alternating windows: ModernBERT) run one item at a time. An item's own error (an empty
    text) is returned in its place; the others go on.
    """
    from models import capture
    from models.loader import as_loaded

    lm = as_loaded(model, attentions=True)
    out: list[AttentionResult | Exception] = [AttentionUnavailable("not computed")] * len(items)
    prepared: list[tuple[int, _Prepared]] = []
    for i, (text, pair, max_tokens) in enumerate(items):
        try:
            prepared.append((i, _prepare(lm, text, pair, max_tokens)))
        except ExplorerError as err:
            out[i] = err
    if not prepared:
        return out
    config = getattr(lm.model.config, "text_config", lm.model.config)
    if config.model_type not in capture.CAPTURE_TYPES or len(prepared) == 1:
        for i, p in prepared:
            enc = {k: v.to(lm.device) for k, v in p.enc.items()}
            out[i] = _assemble(lm, p, _forward_attention(lm, enc, enc["input_ids"].shape[1]))
        return out
    per_cell = config.num_hidden_layers * config.num_attention_heads * 4
    prepared.sort(key=lambda ip: ip[1].tokens)
    chunk: list[tuple[int, _Prepared]] = []
    for item in prepared:
        t = item[1].tokens  # the longest so far: the list is sorted
        if chunk and ((len(chunk) + 1) * t * t * per_cell > BATCH_ATTENTION_BYTES or (len(chunk) + 1) * t > BATCH_TOKENS):
            for (i, p), w in zip(chunk, _forward_padded(lm, [p for _, p in chunk]), strict=True):
                out[i] = _assemble(lm, p, w)
            chunk = []
        chunk.append(item)
    for (i, p), w in zip(chunk, _forward_padded(lm, [p for _, p in chunk]), strict=True):
        out[i] = _assemble(lm, p, w)
    return out


def _forward_padded(lm: Any, items: list[_Prepared]) -> list[np.ndarray]:
    """One forward pass over ``items`` padded on the right; each item's attention (L, H, t, t) as float32."""
    import torch

    t_max = max(p.tokens for p in items)
    pad = lm.tokenizer.pad_token_id if lm.tokenizer.pad_token_id is not None else 0
    batch: dict[str, torch.Tensor] = {}
    for key in dict.fromkeys(k for p in items for k in p.enc):  # a single sentence has no segment ids: zeros, as alone
        fill = pad if key == "input_ids" else 0
        rows = torch.full((len(items), t_max), fill, dtype=torch.long)
        for row, p in zip(rows, items, strict=True):
            if key in p.enc:
                row[: p.tokens] = p.enc[key][0]
        batch[key] = rows
    mask = torch.zeros((len(items), t_max), dtype=torch.long)
    for row, p in zip(mask, items, strict=True):
        row[: p.tokens] = 1
    batch["attention_mask"] = mask
    with torch.inference_mode():
        out = lm.model(**{k: v.to(lm.device) for k, v in batch.items()}, output_attentions=True)
    att = getattr(out, "attentions", None)
    if not att or any(a is None for a in att):
        raise AttentionUnavailable(f"{lm.model_id} returned no attention weights.",
                                   "Load it with attentions=True (eager attention); SDPA and FlashAttention return none.")
    stacked = torch.stack(att, dim=1)  # (B, L, H, T, T)
    return [stacked[b, :, :, : p.tokens, : p.tokens].float().cpu().numpy() for b, p in enumerate(items)]


@dataclass
class _Prepared:
    """One input, cleaned and tokenized (on the CPU), ready for a forward pass."""

    text: str
    pair: str | None
    notes: list[str]
    enc: dict[str, Any]
    offsets: list[tuple[int, int]]
    seq_ids: list[int | None]
    truncated: bool
    full: int
    limit: int

    @property
    def tokens(self) -> int:
        return int(self.enc["input_ids"].shape[1])


def _prepare(lm: Any, text: str, text_pair: str | None, max_tokens: int | None) -> _Prepared:
    """Clean and tokenize one input (truncated to the model's limit or ``max_tokens``, with a note saying so)."""
    tok, net = lm.tokenizer, lm.model
    text, notes = clean_text(text, "text")
    pair = None
    if text_pair is not None and text_pair.strip():
        pair, more = clean_text(text_pair, "sentence B")
        notes += more
    limit = min(lm.max_tokens, max_tokens) if max_tokens else lm.max_tokens
    # Tokenized once; a second time, truncated, only when the input is longer than the model takes.
    # Segment ids as the tokenizer makes them (BERT's second [SEP] is segment B), for models that have them.
    types = pair is not None and getattr(net.config, "type_vocab_size", 0) >= 2
    enc = tok(text, pair, return_tensors="pt", return_offsets_mapping=True, return_token_type_ids=types)
    full = enc["input_ids"].shape[1]
    truncated = full > limit
    if truncated:
        enc = tok(text, pair, truncation="longest_first" if pair else True, max_length=limit, return_tensors="pt",
                  return_offsets_mapping=True, return_token_type_ids=types)
    offsets = enc.pop("offset_mapping")[0].tolist()
    seq_ids = enc.sequence_ids(0)
    if truncated:
        notes.append(f"The input has {full} tokens; {lm.model_id} takes {limit}, so it was truncated to the first {limit}.")
    return _Prepared(text, pair, notes, dict(enc), offsets, seq_ids, truncated, full, limit)


def _assemble(lm: Any, p: _Prepared, weights: np.ndarray) -> AttentionResult:
    """The result of one input: its tokens, segments, words and the attention ``weights`` (L, H, T, T)."""
    tok, net = lm.tokenizer, lm.model
    text, pair = p.text, p.pair
    ids = p.enc["input_ids"][0].tolist()
    raw = tok.convert_ids_to_tokens(ids)
    special_ids = set(tok.all_special_ids) - {tok.unk_token_id}  # [UNK] stands for real text
    special = [i in special_ids for i in ids]
    segments, last = [], 0
    for s in p.seq_ids:
        last = s if s is not None else last
        segments.append(1 if last == 1 else 0)
    # words: by character spans of a tokenizer-independent split of each segment's text
    spans = {0: _word_spans(text), 1: _word_spans(pair) if pair else []}
    base = {0: 0, 1: len(spans[0])}
    starts = {k: [a for a, _ in v] for k, v in spans.items()}
    ends = {k: [b for _, b in v] for k, v in spans.items()}
    words: list[int | None] = []
    for (start, end), s, sp in zip(p.offsets, p.seq_ids, special, strict=True):
        if sp or s is None or end <= start:
            words.append(None)
            continue
        idx = _word_index(starts[s], ends[s], start, end)
        words.append(None if idx is None else base[s] + idx)
    word_texts = tuple(text[a:b] for a, b in spans[0]) + tuple(pair[a:b] for a, b in spans[1]) if pair else \
        tuple(text[a:b] for a, b in spans[0])
    cls_tokens = {x for x in (tok.cls_token, tok.bos_token) if x}
    sep_tokens = {x for x in (tok.sep_token, tok.eos_token) if x} - cls_tokens
    causal = bool(getattr(net.config, "is_decoder", False)) or net.config.model_type == "gpt2"
    local, window, note = architecture_notes(net.config)
    return AttentionResult(
        model_id=lm.model_id, tokens=tuple(readable(x) for x in raw), raw_tokens=tuple(raw), segments=tuple(segments),
        special=tuple(special), words=tuple(words), word_texts=word_texts, weights=weights, causal=causal,
        truncated=p.truncated, input_tokens=p.full, max_tokens=p.limit, notices=tuple(p.notes),
        cls_like=tuple(i for i, x in enumerate(raw) if x in cls_tokens and special[i]),
        sep_like=tuple(i for i, x in enumerate(raw) if x in sep_tokens and special[i]),
        local_layers=local, window=window, architecture_note=note)


def _layer_list(layers: list[int], verb: str = "are") -> str:
    """'layer 0 is' / 'layers 1, 2 are'."""
    if len(layers) == 1:
        return f"layer {layers[0]} {'is' if verb == 'are' else verb}"
    return f"layers {', '.join(map(str, layers))} {verb}"


def architecture_notes(config: Any) -> tuple[tuple[int, ...], int, str]:
    """(local layers, window, a sentence for the page) about what makes this architecture's attention particular."""
    mt = getattr(config, "model_type", "")
    if mt == "modernbert":
        kinds = list(getattr(config, "layer_types", None) or [])
        local = tuple(i for i, k in enumerate(kinds) if k == "sliding_attention")
        window = int(getattr(config, "local_attention", 0) or 0)
        glob = [i for i in range(len(kinds)) if i not in local]
        return local, window, (
            f"ModernBERT alternates global and local attention: {_layer_list(glob)} global; "
            f"{_layer_list(list(local))} local, each token seeing only the {window // 2} tokens on either side "
            f"(a {window}-token sliding window), so their maps are a band. Positions are rotary (RoPE), not learned "
            "(Warner et al. 2024, ModernBERT, Section 2.1).")
    record = ARCHITECTURES.get(mt)
    return (), 0, record.note if record else ""


# ------------------------------------------------------------------------------------------ analyses

STAT_LABELS = {
    "entropy": "entropy (nats)", "to_cls": "to [CLS]/<s>", "to_sep": "to [SEP]/</s>", "to_self": "to itself",
    "to_prev": "to previous token", "to_next": "to next token", "to_punct": "to punctuation", "distance": "mean distance (tokens)",
}


def head_stats(weights: np.ndarray, tokens: tuple[str, ...] | list[str], cls_like=(), sep_like=()) -> dict[str, np.ndarray]:
    """Per layer and head (each value (L, H)), the measures of Clark et al. 2019:

    entropy of each row (nats, averaged over rows); average share of attention to [CLS]-like,
    [SEP]-like, itself, the previous and the next token, punctuation; mean attention distance
    Σ_j a_ij·|i − j| averaged over rows. A measure with no such token (no [CLS] in GPT-2) is NaN.
    """
    from scipy.special import entr

    w = np.asarray(weights, dtype=np.float64)  # (L, H, T, T)
    t = w.shape[-1]
    idx = np.arange(t)
    # −w·log w in one pass (0 at w = 0), and the distance as one product: at 512 tokens 2× faster than the where() of
    # a log and a (T, T) weights-times-distance array, with the same numbers (tests/models/test_attention.py)
    ent = np.nansum(entr(w), axis=-1).mean(axis=-1)
    nan = np.full(w.shape[:2], np.nan)
    punct = [i for i, x in enumerate(tokens) if x and all(c in PUNCTUATION for c in x)]
    return {
        "entropy": ent,
        "to_cls": w[..., list(cls_like)].sum(-1).mean(-1) if cls_like else nan,
        "to_sep": w[..., list(sep_like)].sum(-1).mean(-1) if sep_like else nan,
        "to_self": np.diagonal(w, axis1=-2, axis2=-1).mean(-1),
        "to_prev": w[..., idx[1:], idx[:-1]].mean(-1) if t > 1 else nan,
        "to_next": w[..., idx[:-1], idx[1:]].mean(-1) if t > 1 else nan,
        "to_punct": w[..., punct].sum(-1).mean(-1) if punct else nan,
        "distance": np.einsum("...ij,ij->...i", w, np.abs(idx[:, None] - idx[None, :]).astype(np.float64)).mean(-1),
    }


def result_stats(r: AttentionResult) -> dict[str, np.ndarray]:
    return head_stats(r.weights, r.tokens, r.cls_like, r.sep_like)


def stats_rows(stats: dict[str, np.ndarray]) -> list[dict[str, Any]]:
    """One row per (layer, head) with every measure: ready for a data frame or CSV."""
    layers, heads = next(iter(stats.values())).shape
    return [{"layer": li, "head": hi, **{k: float(v[li, hi]) for k, v in stats.items()}} for li in range(layers) for hi in range(heads)]


def aggregate(weights: np.ndarray, how: str = "mean") -> np.ndarray:
    """Attention combined over heads, (L, T, T): ``mean`` or ``max``."""
    if how not in ("mean", "max"):
        raise ValueError(f"how must be 'mean' or 'max', not {how!r}")
    return weights.mean(axis=1) if how == "mean" else weights.max(axis=1)


def rollout(weights: np.ndarray, residual: float = 0.5) -> np.ndarray:
    """Attention rollout (Abnar & Zuidema 2020), (L, T, T): R_l = Â_l · R_(l−1), with
    Â_l = residual·I + (1 − residual)·mean_heads(A_l), rows renormalised. Row i of R_l says how
    much token i's representation at layer l draws on each input token."""
    a = weights.mean(axis=1).astype(np.float64)  # (L, T, T)
    t = a.shape[-1]
    out = np.empty_like(a)
    r = np.eye(t)
    for li in range(a.shape[0]):
        hat = residual * np.eye(t) + (1 - residual) * a[li]
        hat /= hat.sum(axis=-1, keepdims=True)
        r = hat @ r
        out[li] = r
    return out


def word_attention(r: AttentionResult) -> tuple[list[str], np.ndarray]:
    """Attention between words, (L, H, W, W): columns summed over a word's tokens (attention *to*
    the word), rows averaged (attention *from* it), as Clark et al. 2019 do. Special tokens are
    dropped and rows renormalised, so two tokenizers' results on the same text share one grid."""
    ids = sorted({w for w in r.words if w is not None})
    if not ids:
        return [], np.zeros((r.layers, r.heads, 0, 0), dtype=np.float32)
    member = np.array([[1.0 if w == k else 0.0 for w in r.words] for k in ids])  # (W, T)
    to_words = r.weights @ member.T  # (L, H, T, W)
    counts = member.sum(axis=1)
    from_words = np.einsum("wt,lhtv->lhwv", member, to_words) / counts[:, None]  # (L, H, W, W)
    sums = from_words.sum(axis=-1, keepdims=True)
    from_words = np.divide(from_words, sums, out=np.zeros_like(from_words), where=sums > 0)
    return [r.word_texts[k] for k in ids], from_words.astype(np.float32)


def align(a: AttentionResult, b: AttentionResult) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Two results on the same text, as word-level attention on the words both cover: (words, A, B)."""
    if a.word_texts != b.word_texts:
        raise InvalidText("The two results are not on the same text.", "Run both models on the same sentence.")
    _, ma = word_attention(a)
    _, mb = word_attention(b)
    ids_a = sorted({w for w in a.words if w is not None})
    ids_b = sorted({w for w in b.words if w is not None})
    common = [k for k in ids_a if k in set(ids_b)]
    pa = [ids_a.index(k) for k in common]
    pb = [ids_b.index(k) for k in common]
    return [a.word_texts[k] for k in common], ma[..., pa, :][..., pa], mb[..., pb, :][..., pb]
