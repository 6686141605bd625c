"""What hidden vectors hold, layer by layer: projections, CKA, Ethayarajh's contextuality measures, neighbours.

numpy and scikit-learn (umap-learn for UMAP) only: no torch, no streamlit. Inputs are float arrays of
token vectors, ``(n, d)``; per-layer inputs are ``(layers, n, d)``.

- :func:`project`: 2-D coordinates by PCA, t-SNE (scikit-learn) or UMAP (umap-learn), deterministic for a seed.
- :func:`linear_cka`: linear centred kernel alignment (Kornblith et al. 2019, ICML, Eq. 5) between two
  representations of the same n items; invariant to orthogonal transforms and isotropic scaling.
- :func:`self_similarity`, :func:`intra_sentence_similarity`, :func:`anisotropy`: Ethayarajh (2019),
  "How Contextual are Contextualized Word Representations?", EMNLP, §3.2 and §4.1; the adjusted
  self-similarity subtracts the layer's anisotropy (his §4.2).
- :func:`nearest`: the k nearest rows by cosine similarity (exact, brute force).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import InvalidData

METHODS = ("pca", "tsne", "umap")
#: Points a projection takes; more are sampled down (t-SNE and UMAP grow faster than linearly).
MAX_POINTS = 5_000


def check_matrix(x: np.ndarray, name: str = "the vectors", min_rows: int = 1) -> np.ndarray:
    """``x`` as float64 (n, d), refusing NaN/inf, wrong shapes and too few rows with :class:`InvalidData`."""
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != 2 or a.shape[1] < 1:
        raise InvalidData(f"{name} must be a 2-D array (items × dimensions), not of shape {a.shape}.")
    if a.shape[0] < min_rows:
        raise InvalidData(f"{name} has {a.shape[0]} rows; this needs at least {min_rows}.")
    if not np.isfinite(a).all():
        bad = int((~np.isfinite(a)).any(axis=1).sum())
        raise InvalidData(f"{name} holds NaN or infinite values in {bad} row(s).", "Remove or fix those rows.")
    return a


def project(x: np.ndarray, method: str = "pca", seed: int = 0) -> np.ndarray:
    """2-D coordinates of the rows of ``x`` (n ≤ :data:`MAX_POINTS`), the same for the same seed.

    Raises:
        InvalidData: an unknown method, NaN, fewer than 3 rows, or more than MAX_POINTS.
    """
    a = check_matrix(x, min_rows=3)
    if method not in METHODS:
        raise InvalidData(f"Unknown projection {method!r}.", "Use one of: " + ", ".join(METHODS) + ".")
    if a.shape[0] > MAX_POINTS:
        raise InvalidData(f"{a.shape[0]:,} points are more than a projection takes here ({MAX_POINTS:,}).",
                          "Use fewer sentences, or sample the points.")
    if method == "pca":
        from sklearn.decomposition import PCA

        out = PCA(n_components=2, random_state=seed).fit_transform(a)
        # PCA's sign is arbitrary: fix it so the largest coordinate of each axis is positive (stable pictures).
        signs = np.sign(out[np.abs(out).argmax(axis=0), range(2)])
        return out * np.where(signs == 0, 1, signs)
    if method == "tsne":
        from sklearn.manifold import TSNE

        perplexity = float(min(30, max(2, (a.shape[0] - 1) // 3)))
        return TSNE(n_components=2, perplexity=perplexity, init="pca", random_state=seed).fit_transform(a)
    umap = _umap()
    neighbours = int(min(15, a.shape[0] - 1))
    return umap.UMAP(n_components=2, n_neighbors=neighbours, random_state=seed, n_jobs=1).fit_transform(a)


_UMAP_LOCK = threading.Lock()
_UMAP_CACHED: list[bool] = []


def _umap() -> Any:
    """umap-learn, with its numba-compiled functions cached on disk as ``@njit(cache=True)`` caches them.

    umap declares its functions without ``cache=True``, so every process (each server start, each test worker)
    compiled them again on its first projection: 17 s here. ``Dispatcher.enable_caching()`` is what that option calls;
    with it the first process on a machine compiles and writes numba's cache (beside umap's files, or in the user's
    cache folder where those are read-only) and later ones load it: 0.1 s, the same embedding bit for bit (measured:
    compiled, written and loaded runs of one seed). Done once, before anything is compiled."""
    import umap
    import umap.distances
    import umap.layouts
    import umap.sparse
    import umap.spectral
    import umap.umap_
    import umap.utils
    from numba.core.registry import CPUDispatcher

    with _UMAP_LOCK:
        if not _UMAP_CACHED:
            for module in (umap.umap_, umap.layouts, umap.utils, umap.distances, umap.sparse, umap.spectral):
                for obj in vars(module).values():
                    if isinstance(obj, CPUDispatcher) and not obj.signatures:  # not compiled yet: caching can start
                        try:
                            obj.enable_caching()
                        except (RuntimeError, OSError):  # nowhere writable to cache ("no locator available"): compiled per process, as before
                            break
            _UMAP_CACHED.append(True)
    return umap


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two representations of the same n items (rows): 1 for the same up to rotation and scale.

    CKA(X, Y) = ‖YᵀX‖²_F / (‖XᵀX‖_F ‖YᵀY‖_F) on column-centred X, Y (Kornblith et al. 2019, Eq. 5).
    """
    a, b = check_matrix(x, "X", 2), check_matrix(y, "Y", 2)
    if a.shape[0] != b.shape[0]:
        raise InvalidData(f"CKA compares the same items: X has {a.shape[0]} rows, Y has {b.shape[0]}.",
                          "Align the two models' tokens by words first (models.attention.align does it for attention).")
    a = a - a.mean(axis=0)
    b = b - b.mean(axis=0)
    num = np.linalg.norm(b.T @ a) ** 2
    den = np.linalg.norm(a.T @ a) * np.linalg.norm(b.T @ b)
    return float(num / den) if den > 0 else 0.0


def cka_matrix(xs: Sequence[np.ndarray], ys: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Linear CKA between every layer of ``xs`` and every layer of ``ys`` (``xs`` itself when None)."""
    ys = xs if ys is None else ys
    return np.array([[linear_cka(x, y) for y in ys] for x in xs])


def _unit(a: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(a, axis=-1, keepdims=True)
    return a / np.where(norms == 0, 1, norms)


def mean_pairwise_cosine(a: np.ndarray) -> float:
    """Mean cosine similarity over all pairs of distinct rows (n ≥ 2), in O(n·d)."""
    u = _unit(check_matrix(a, min_rows=2))
    n = u.shape[0]
    s = u.sum(axis=0)
    return float((s @ s - n) / (n * (n - 1)))


def self_similarity(occurrences: np.ndarray) -> float:
    """Ethayarajh's SelfSim: mean cosine between one word's vectors in its different contexts (rows)."""
    return mean_pairwise_cosine(occurrences)


def intra_sentence_similarity(sentence: np.ndarray) -> float:
    """Ethayarajh's IntraSim: mean cosine between each token of a sentence and the sentence's mean vector."""
    a = check_matrix(sentence, min_rows=1)
    mean = _unit(a.mean(axis=0))
    return float((_unit(a) @ mean).mean())


def anisotropy(vectors: np.ndarray, pairs: int = 1_000, seed: int = 0) -> float:
    """Mean cosine of random pairs of distinct rows: how much all vectors point one way (0 = isotropic)."""
    a = _unit(check_matrix(vectors, min_rows=2))
    rng = np.random.default_rng(seed)
    i = rng.integers(0, a.shape[0], pairs)
    j = rng.integers(0, a.shape[0] - 1, pairs)
    j = j + (j >= i)  # never a row with itself
    return float(np.einsum("nd,nd->n", a[i], a[j]).mean())


@dataclass(frozen=True)
class LayerContextuality:
    """Ethayarajh's measures for one layer."""

    layer: int
    self_similarity: float  # mean over words seen in ≥ 2 contexts
    intra_sentence: float  # mean over sentences
    anisotropy: float
    words: int  # how many words the self-similarity averages

    @property
    def adjusted_self_similarity(self) -> float:
        """Self-similarity minus the layer's anisotropy (Ethayarajh §4.2): what is left beyond 'all vectors are alike'."""
        return self.self_similarity - self.anisotropy


def contextuality(layers: np.ndarray, sentence_of: Sequence[int], word_of: Sequence[str], seed: int = 0) -> list[LayerContextuality]:
    """Ethayarajh's measures per layer for tokens ``layers`` (L, n, d), each from sentence ``sentence_of[i]`` and
    word ``word_of[i]`` (lower-cased surface form; '' for tokens left out, such as special tokens)."""
    arr = np.asarray(layers, dtype=np.float64)
    if arr.ndim != 3 or arr.shape[1] != len(sentence_of) or len(sentence_of) != len(word_of):
        raise InvalidData("Contextuality needs (layers, tokens, dimensions) and a sentence and word per token.")
    keep = np.array([bool(w) for w in word_of])
    words: dict[str, list[int]] = {}
    for i, w in enumerate(word_of):
        if w:
            words.setdefault(w, []).append(i)
    repeated = {w: idx for w, idx in words.items() if len({sentence_of[i] for i in idx}) >= 2}
    sentences: dict[int, list[int]] = {}
    for i, s in enumerate(sentence_of):
        if keep[i]:
            sentences.setdefault(s, []).append(i)
    out = []
    for layer in range(arr.shape[0]):
        x = arr[layer]
        self_sims = [self_similarity(x[idx]) for idx in repeated.values()]
        out.append(LayerContextuality(
            layer, float(np.mean(self_sims)) if self_sims else float("nan"),
            float(np.mean([intra_sentence_similarity(x[idx]) for idx in sentences.values()])) if sentences else float("nan"),
            anisotropy(x[keep], seed=seed) if keep.sum() >= 2 else float("nan"), len(repeated)))
    return out


def nearest(query: np.ndarray, vectors: np.ndarray, k: int = 10, *, normalized: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Indices and cosine similarities of the ``k`` rows of ``vectors`` nearest to ``query`` (best first).

    Exact: one matrix product and a partial sort (at 60,000 × 384 that is a few milliseconds, so no
    approximate index is needed and the result equals a scan). ``normalized``: the rows are unit
    vectors already (a corpus index), so they are not normalised again.
    """
    v = np.asarray(vectors, dtype=np.float32)
    q = np.asarray(query, dtype=np.float32).reshape(-1)
    if v.ndim != 2 or q.shape[0] != v.shape[1]:
        raise InvalidData(f"The query has {q.shape[0]} dimensions; the vectors have {v.shape[1] if v.ndim == 2 else v.shape}.")
    if not np.isfinite(q).all():
        raise InvalidData("The query vector holds NaN or infinite values.")
    k = max(1, min(int(k), v.shape[0]))
    sims = (v if normalized else _unit(v)) @ _unit(q)
    idx = np.argpartition(-sims, k - 1)[:k]
    idx = idx[np.lexsort((idx, -sims[idx]))]  # best first, ties by index: deterministic
    return idx, sims[idx]


def pool_by_word(vectors: np.ndarray, words: Sequence[int | None]) -> tuple[np.ndarray, list[int]]:
    """Mean of each word's token vectors (``words[i]``: the word of token i, None to leave it out), in word order.

    Two models with different tokenizers agree on the words of a text, so their pooled rows can be
    compared item by item (CKA across models)."""
    a = np.asarray(vectors, dtype=np.float64)
    ids = sorted({w for w in words if w is not None})
    if not ids:
        return np.zeros((0, a.shape[-1])), []
    rows = [a[[i for i, w in enumerate(words) if w == wid]].mean(axis=0) for wid in ids]
    return np.stack(rows), ids


#: A matrix a user uploads to project: at most this many bytes and columns (rows: MAX_POINTS).
MAX_UPLOAD_BYTES = 5 * 2**20
MAX_UPLOAD_COLUMNS = 4_096


def parse_vectors_csv(raw: bytes) -> tuple[np.ndarray, list[str]]:
    """A CSV of vectors (one row per item, numeric columns; an optional ``label`` column) as (n, d) and labels.

    Raises:
        InvalidData: too large, not CSV, no numeric column, text in a numeric column, NaN or infinite
            values (named by row), fewer than 3 or more than :data:`MAX_POINTS` rows.
    """
    import io

    import pandas as pd

    if len(raw) > MAX_UPLOAD_BYTES:
        raise InvalidData(f"The file is {len(raw) / 2**20:.1f} MB; vectors to project may be at most {MAX_UPLOAD_BYTES // 2**20} MB.")
    try:
        df = pd.read_csv(io.BytesIO(raw), nrows=MAX_POINTS + 1, encoding="utf-8")
    except (ValueError, UnicodeDecodeError, pd.errors.ParserError) as err:
        raise InvalidData(f"This is not a CSV file ({type(err).__name__}).", "One row per item, one column per dimension.") from None
    if len(df) > MAX_POINTS:
        raise InvalidData(f"More than {MAX_POINTS:,} rows; a projection takes at most {MAX_POINTS:,}.")
    labels = [str(x)[:100] for x in df.pop("label")] if "label" in df.columns else [str(i) for i in range(len(df))]
    if df.shape[1] == 0 or df.shape[1] > MAX_UPLOAD_COLUMNS:
        raise InvalidData(f"The file has {df.shape[1]} numeric columns; vectors need 1 to {MAX_UPLOAD_COLUMNS:,}.")
    text = [c for c in df.columns if not pd.api.types.is_numeric_dtype(df[c])]
    if text:
        raise InvalidData(f"Column {str(text[0])[:40]!r} holds text; every column but 'label' must be numbers.")
    x = df.to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(x).all(axis=1))
    if bad.size:
        rows = ", ".join(str(i + 2) for i in bad[:5])  # +2: the header is line 1
        raise InvalidData(f"{bad.size} row(s) hold NaN, empty or infinite values (lines {rows}{'…' if bad.size > 5 else ''}).",
                          "Fill or remove those rows.")
    return check_matrix(x, "the uploaded vectors", min_rows=3), labels
