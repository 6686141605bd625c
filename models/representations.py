"""Hidden states layer by layer, and exBERT's search: the corpus tokens nearest to a token at a layer.

Usage::

    from models.representations import hidden_states, nearest_contexts
    reps = hidden_states("sentence-transformers/all-MiniLM-L6-v2", ["The bank raised rates.", "We sat on the bank."])
    reps.items[0].hidden.shape          # (layers + 1, tokens, hidden), float32, embedding output first
    hits = nearest_contexts(model, "We sat on the river bank.", position=6, k=10, layer=3)
    layer_similarity(reps).cka          # (layers + 1, layers + 1): linear CKA between its layers
    cross_model_cka(reps, hidden_states("distilbert-base-uncased", texts)).cka   # (layers_b + 1, layers_a + 1)

The corpus is WordNet 3.0's example sentences (``data/corpus/``, extracted from Debian's
``wordnet-base`` by ``scripts/build_wordnet_corpus.py``; licence in ``data/corpus/LICENSE-WordNet``).
Its index (unit vectors of every non-special token at one layer, float16) is built once per model
and layer and cached on disk under ``BFE_MODEL_DIR/.index/``, written atomically (a killed build
leaves no index that looks complete); search is an exact scan (:func:`analysis.representations.nearest`).
"""

from __future__ import annotations

import contextlib
import functools
import gzip
import hashlib
import json
import logging
import os
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from analysis.representations import LayerContextuality, cka_matrix, contextuality, pool_by_word
from core.errors import InvalidData, InvalidText
from models.loader import ModelRef

log = logging.getLogger(__name__)

CORPUS = Path(__file__).resolve().parent.parent / "data" / "corpus" / "wordnet_examples.txt.gz"
#: The word-sense demo set of the Representations page (word, sense, sentence).
SENSES = CORPUS.parent / "senses.csv"
#: Sentences of the corpus the index holds (about 8.5 tokens each besides [CLS] and [SEP]: ~51,000 vectors for MiniLM).
CORPUS_SENTENCES = 6_000  # BFE_CORPUS_SENTENCES's default (core/settings.py; tests/core/test_settings.py checks they agree)
#: Texts one call of hidden_states takes at most (the use cases bound theirs lower: services.representations.MAX_TEXTS).
MAX_BATCH_TEXTS = 256
MAX_TOTAL_TOKENS = 20_000
BATCH = 64
#: The most bytes (float16 on disk) the corpus index of every layer may take for one build to keep them all.
ALL_LAYERS_BYTES = 384 * 2**20


@dataclass(frozen=True)
class TextStates:
    """One text's tokens (readable, as in AttentionResult), their word index (None: special) and hidden states."""

    text: str
    tokens: tuple[str, ...]
    words: tuple[int | None, ...]
    word_texts: tuple[str, ...]
    special: tuple[bool, ...]
    hidden: np.ndarray = field(repr=False)  # float32 (layers + 1, tokens, hidden)


@dataclass(frozen=True)
class Representations:
    model_id: str
    items: tuple[TextStates, ...]
    notices: tuple[str, ...] = ()

    @property
    def layers(self) -> int:
        """Transformer layers (the arrays hold one more: the embedding output)."""
        return self.items[0].hidden.shape[0] - 1 if self.items else 0

    def layer_matrix(self, layer: int, include_special: bool = False) -> tuple[np.ndarray, list[tuple[int, int]]]:
        """All tokens' vectors at ``layer`` stacked (n, hidden), and (text index, token position) for each row."""
        if not 0 <= layer <= self.layers:
            raise InvalidData(f"{self.model_id} has layers 0–{self.layers} (0 is the embedding output), not {layer}.")
        rows, where = [], []
        for t, item in enumerate(self.items):
            for p in range(len(item.tokens)):
                if include_special or not item.special[p]:
                    rows.append(item.hidden[layer, p])
                    where.append((t, p))
        return (np.stack(rows) if rows else np.zeros((0, self.items[0].hidden.shape[-1] if self.items else 0), np.float32)), where

    def word_matrix(self, layer: int) -> np.ndarray:
        """Every text's words at ``layer``, each the mean of its tokens' vectors, stacked in text and word order:
        float64 (words, hidden). Special tokens are left out; two tokenizers give rows for the same words."""
        if not 0 <= layer <= self.layers:
            raise InvalidData(f"{self.model_id} has layers 0–{self.layers} (0 is the embedding output), not {layer}.")
        return np.concatenate([pool_by_word(item.hidden[layer], item.words)[0] for item in self.items])


def _encode(lm: Any, texts: list[str]) -> tuple[list[dict[str, Any]], list[str]]:
    """Tokenize each text (truncated to the model's limit), with offsets; notices for truncations."""
    tok = lm.tokenizer
    limit = lm.max_tokens
    out, notes = [], []
    for text in texts:
        enc = tok(text, truncation=True, max_length=limit, return_offsets_mapping=True)
        # Truncated when the kept tokens stop before the text ends: read from the offsets, not a second tokenization.
        if len(enc["input_ids"]) == limit and max(e for _, e in enc["offset_mapping"]) < len(text.rstrip()):
            notes.append(f"“{text[:40]}…” is longer than the {limit} tokens {lm.model_id} takes, so it was truncated.")
        out.append(enc)
    return out, notes


def _forward_hidden(lm: Any, encs: list[dict[str, Any]]) -> list[np.ndarray]:
    """Hidden states of every layer for each encoding, batched with padding: float32 (L + 1, T_i, H) each."""
    import torch

    net, tok, dev = lm
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    out: list[np.ndarray] = []
    for start in range(0, len(encs), BATCH):
        chunk = encs[start:start + BATCH]
        width = max(len(e["input_ids"]) for e in chunk)
        ids = torch.full((len(chunk), width), pad, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for i, e in enumerate(chunk):
            ids[i, : len(e["input_ids"])] = torch.tensor(e["input_ids"])
            mask[i, : len(e["input_ids"])] = 1
        kwargs = {"input_ids": ids.to(dev), "attention_mask": mask.to(dev)}
        with torch.inference_mode():
            states = net(**kwargs, output_hidden_states=True).hidden_states
        stacked = torch.stack(states, dim=1).float().cpu().numpy()  # (B, L + 1, T, H)
        for i, e in enumerate(chunk):
            out.append(np.ascontiguousarray(stacked[i, :, : len(e["input_ids"])]))
    return out


def hidden_states(model: ModelRef, texts: list[str]) -> Representations:
    """The hidden states of every layer (embedding output first) for each text, float32 (L + 1, T, H).

    Equal to transformers' ``output_hidden_states`` of each text alone within 1e-5 (padding is masked).

    Raises:
        InvalidText: no text, an empty text, more than :data:`MAX_BATCH_TEXTS` texts or :data:`MAX_TOTAL_TOKENS` tokens.
    """
    from models.attention import _word_index, _word_spans, clean_text, readable
    from models.loader import as_loaded

    if not texts:
        raise InvalidText("There is no text.", "Type a sentence, or pick the demo set.")
    if len(texts) > MAX_BATCH_TEXTS:
        raise InvalidText(f"{len(texts)} texts are more than {MAX_BATCH_TEXTS}.", "Use fewer sentences.")
    cleaned = [clean_text(t, f"text {i + 1}")[0] for i, t in enumerate(texts)]
    lm = as_loaded(model)
    encs, notes = _encode(lm, cleaned)
    total = sum(len(e["input_ids"]) for e in encs)
    if total > MAX_TOTAL_TOKENS:
        raise InvalidText(f"The texts have {total:,} tokens together; the limit is {MAX_TOTAL_TOKENS:,}.", "Use fewer or shorter texts.")
    hidden = _forward_hidden(lm, encs)
    tok = lm.tokenizer
    special_ids = set(tok.all_special_ids) - {tok.unk_token_id}
    items = []
    for text, enc, h in zip(cleaned, encs, hidden, strict=True):
        ids = enc["input_ids"]
        spans = _word_spans(text)
        starts, ends = [a for a, _ in spans], [b for _, b in spans]
        special = [i in special_ids for i in ids]
        words = [None if sp or e <= s else _word_index(starts, ends, s, e) for (s, e), sp in zip(enc["offset_mapping"], special, strict=True)]
        items.append(TextStates(text, tuple(readable(x) for x in tok.convert_ids_to_tokens(ids)), tuple(words),
                                tuple(text[a:b] for a, b in spans), tuple(special), h))
    return Representations(lm.model_id, tuple(items), tuple(notes))


# ----------------------------------------------------------------------------------------- layers compared


@dataclass(frozen=True)
class LayerSimilarity:
    """How contextual one model's token vectors are at each layer, and how alike its layers are."""

    model_id: str
    measures: list[LayerContextuality]  # one per layer, the embedding output first (Ethayarajh 2019)
    cka: np.ndarray = field(repr=False)  # float64 (layers + 1, layers + 1), linear CKA between layers
    tokens: int  # token vectors compared at each layer (special tokens left out)


def _word_key(item: TextStates, p: int) -> str:
    """Token ``p``'s word, lower-cased without surrounding punctuation ('' for a special token): Ethayarajh's word identity."""
    return item.word_texts[item.words[p]].lower().strip(".,;:!?\"'") if item.words[p] is not None else ""


def layer_similarity(reps: Representations) -> LayerSimilarity:
    """Ethayarajh's contextuality measures (:func:`analysis.representations.contextuality`) and linear CKA between
    every pair of layers (:func:`analysis.representations.cka_matrix`), over the non-special tokens of ``reps``.

    Raises:
        InvalidData: fewer than two tokens (CKA needs two rows).
    """
    _, where = reps.layer_matrix(0)
    words = [_word_key(reps.items[t], p) for t, p in where]
    per_layer = np.stack([reps.layer_matrix(layer)[0] for layer in range(reps.layers + 1)])  # (L + 1, n, H)
    measures = contextuality(per_layer, [t for t, _ in where], words)
    return LayerSimilarity(reps.model_id, measures, cka_matrix(list(per_layer)), len(where))


@dataclass(frozen=True)
class CrossModelCKA:
    """Linear CKA between every layer of model ``b`` and every layer of model ``a`` on the same texts, the two
    models' tokens mean-pooled per word so that their rows are the same words."""

    model_a: str
    model_b: str
    cka: np.ndarray = field(repr=False)  # float64 (layers_b + 1, layers_a + 1): row i is b's layer i, column j a's layer j
    words: int  # rows compared: the words of all texts

    @property
    def best_match(self) -> np.ndarray:
        """For each of ``b``'s layers, the layer of ``a`` it is most alike: int (layers_b + 1,)."""
        return self.cka.argmax(axis=1)


def cross_model_cka(a: Representations, b: Representations) -> CrossModelCKA:
    """Linear CKA (Kornblith et al. 2019) between the layers of two models on the same texts, aligned by words:
    each word's tokens are mean-pooled (:meth:`Representations.word_matrix`), so tokenizers that split words
    differently still compare the same items. BERT against DistilBERT shows which student layer matches which
    teacher layer.

    Raises:
        InvalidData: the two hold different texts, or their tokenizers do not give the same words (a word one of
        them truncated or left without a token).
    """
    if [i.text for i in a.items] != [i.text for i in b.items]:
        raise InvalidData("The two models' hidden states are of different texts.", "Run both on the same sentences.")
    for x, y in zip(a.items, b.items, strict=True):
        if sorted({w for w in x.words if w is not None}) != sorted({w for w in y.words if w is not None}):
            raise InvalidData("The two tokenizers do not agree on the words of these sentences.", "Try plainer sentences.")
    a_rows = [a.word_matrix(layer) for layer in range(a.layers + 1)]
    b_rows = [b.word_matrix(layer) for layer in range(b.layers + 1)]
    return CrossModelCKA(a.model_id, b.model_id, cka_matrix(b_rows, a_rows), a_rows[0].shape[0])


# ----------------------------------------------------------------------------------------- the corpus


@functools.cache
def corpus(limit: int = CORPUS_SENTENCES) -> tuple[str, ...]:
    """``limit`` WordNet example sentences, spread evenly over the file (the same ones every time)."""
    with gzip.open(CORPUS, "rt", encoding="utf-8") as f:
        lines = [line.rstrip("\n").split("\t")[-1] for line in f if line.strip()]
    step = max(1, len(lines) // limit)
    return tuple(lines[::step][:limit])


@dataclass(frozen=True)
class CorpusIndex:
    """Unit vectors of every non-special corpus token at one layer, and where each comes from."""

    model_id: str
    layer: int
    vectors: np.ndarray = field(repr=False)  # float32 (n, hidden), unit length (float16 on disk)
    sentence: np.ndarray = field(repr=False)  # int32 (n,)
    position: np.ndarray = field(repr=False)  # int32 (n,)
    tokens: tuple[str, ...] = field(repr=False)
    sentences: tuple[str, ...] = field(repr=False)


@dataclass(frozen=True)
class Neighbour:
    token: str
    sentence: str
    position: int  # the token's position in its sentence's tokens
    similarity: float


def _index_dir() -> Path:
    from core.settings import get_settings

    return get_settings().model_dir / ".index"


def _fingerprint(lm: Any, layer: int, n_sentences: int) -> str:
    """Changes when the model's files, the layer or the corpus change."""
    folder = Path(lm.source.location)
    stats = sorted((p.name, p.stat().st_size, int(p.stat().st_mtime)) for p in folder.glob("*") if p.is_file()) if folder.is_dir() else []
    raw = json.dumps([lm.model_id, str(lm.source.location), stats, layer, n_sentences, CORPUS.stat().st_size])
    return hashlib.sha256(raw.encode()).hexdigest()[:20]


_build_lock = threading.Lock()
#: Indexes kept in memory (each ~77 MB at 50,000 × 384 float32): the last two asked for.
_loaded: dict[Path, CorpusIndex] = {}
MAX_LOADED = 2


def _corpus_sentences() -> int:
    """The index's sentences: the ``BFE_CORPUS_SENTENCES`` setting (:data:`CORPUS_SENTENCES` by default)."""
    from core.settings import get_settings

    return get_settings().corpus_sentences


def corpus_index(model: ModelRef, layer: int, limit: int | None = None) -> CorpusIndex:
    """The index of ``limit`` corpus sentences at ``layer``: from the disk cache, or built (one pass) and saved."""
    from models.attention import readable
    from models.loader import as_loaded

    lm = as_loaded(model)
    n_layers = lm.model.config.num_hidden_layers
    if not 0 <= layer <= n_layers:
        raise InvalidData(f"{lm.model_id} has layers 0–{n_layers} (0 is the embedding output), not {layer}.")
    sentences = corpus(limit or _corpus_sentences())
    key = _fingerprint(lm, layer, len(sentences))
    path = _index_dir() / f"{key}.npz"
    with _build_lock:
        if path in _loaded and path.is_file():
            return _loaded[path]
        if path.is_file():
            try:
                with np.load(path, allow_pickle=False) as z:
                    index = CorpusIndex(lm.model_id, layer, z["vectors"].astype(np.float32), z["sentence"], z["position"],
                                        tuple(json.loads(str(z["tokens"]))), sentences)
                return _remember(path, index)
            except (OSError, ValueError, KeyError):
                path.unlink(missing_ok=True)  # a damaged file: build it again
        encs, _ = _encode(lm, list(sentences))
        tok = lm.tokenizer
        special_ids = set(tok.all_special_ids) - {tok.unk_token_id}
        # One pass computes every layer: where every layer's index is small enough (a tiny or lab-trained model, the
        # bundled MiniLM: about 320 MB), all are kept, so the next layer asked for is read, not built (36 s for MiniLM
        # on 2 cores). Each vector is normalised in float32 and held in float16, as it is stored.
        n_tokens = sum(len(e["input_ids"]) for e in encs)
        hidden = lm.model.config.hidden_size
        wanted = list(range(n_layers + 1)) if (n_layers + 1) * n_tokens * hidden * 2 <= ALL_LAYERS_BYTES else [layer]
        every = np.empty((n_tokens, len(wanted), hidden), np.float16)
        sent, pos, toks, filled = [], [], [], 0
        for start in range(0, len(encs), BATCH * 4):
            chunk = encs[start:start + BATCH * 4]
            for j, (enc, h) in enumerate(zip(chunk, _forward_hidden(lm, chunk), strict=True)):
                kept = [p for p, i in enumerate(enc["input_ids"]) if i not in special_ids]
                x = h[wanted][:, kept].transpose(1, 0, 2)  # (kept, layers, hidden), float32
                every[filled:filled + len(kept)] = x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)
                filled += len(kept)
                sent += [start + j] * len(kept)
                pos += kept
                toks += [readable(tok.convert_ids_to_tokens(enc["input_ids"][p])) for p in kept]
        every = every[:filled]  # (tokens, wanted layers, hidden)
        sent_a, pos_a, toks_t = np.array(sent, np.int32), np.array(pos, np.int32), tuple(toks)
        index = None
        for k, at in enumerate(wanted):
            built = CorpusIndex(lm.model_id, at, every[:, k].astype(np.float32), sent_a, pos_a, toks_t, sentences)
            here = _index_dir() / f"{_fingerprint(lm, at, len(sentences))}.npz"
            if at == layer:
                index = built
            elif here.is_file():
                continue
            _save(here, built)
        return _remember(path, index)


def _remember(path: Path, index: CorpusIndex) -> CorpusIndex:
    _loaded.pop(path, None)
    _loaded[path] = index
    while len(_loaded) > MAX_LOADED:
        _loaded.pop(next(iter(_loaded)))
    return index


def _save(path: Path, index: CorpusIndex) -> None:
    """Write atomically: a temporary file renamed into place, so a killed build never leaves a partial index."""
    tmp = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            np.savez(f, vectors=index.vectors.astype(np.float16), sentence=index.sentence, position=index.position,
                     tokens=np.array(json.dumps(index.tokens)))
        os.replace(tmp, path)
        tmp = None
    except OSError as err:
        # A read-only model directory or a full disk: the index lives in memory (the search still answers), and the
        # partly written file goes, so a full disk is not made fuller by every search.
        log.warning("the corpus index could not be saved (%s); it is kept in memory only", err.strerror or type(err).__name__)
    finally:
        if tmp is not None:
            with contextlib.suppress(OSError):
                os.unlink(tmp)


def nearest_contexts(model: ModelRef, text: str, position: int, k: int = 10, layer: int = -1,
                     limit: int | None = None) -> list[Neighbour]:
    """exBERT's search: the ``k`` corpus tokens whose vectors at ``layer`` are nearest (cosine) to token
    ``position`` of ``text``, with their sentences. ``layer`` -1 is the last; ``limit``: corpus sentences
    (default: the ``BFE_CORPUS_SENTENCES`` setting, :data:`CORPUS_SENTENCES` unless set).

    Raises:
        InvalidText: empty text; InvalidData: a position or layer out of range, or a special token.
    """
    from analysis.representations import nearest
    from models.loader import as_loaded

    if not 1 <= int(k) <= 100:
        raise InvalidData(f"k must be from 1 to 100, not {k}.")
    lm = as_loaded(model)
    reps = hidden_states(lm, [text])
    item = reps.items[0]
    layer = reps.layers if layer == -1 else layer
    if not 0 <= position < len(item.tokens):
        raise InvalidData(f"Position {position} is outside the text's {len(item.tokens)} tokens.")
    if item.special[position]:
        raise InvalidData(f"Token {position} ({item.tokens[position]}) is a special token; pick a word of the text.")
    index = corpus_index(lm, layer, limit)
    idx, sims = nearest(item.hidden[layer, position], index.vectors, int(k), normalized=True)
    return [Neighbour(index.tokens[i], index.sentences[index.sentence[i]], int(index.position[i]), float(s))
            for i, s in zip(idx, sims, strict=True)]
