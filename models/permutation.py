"""XLNet's permutation language modelling: factorization orders, the two streams' masks, predictions.

Masks follow transformers' documented semantics: ``perm_mask[b, i, j] = 1`` means position i may
*not* attend to position j; ``target_mapping[b, k, j] = 1`` means the k-th prediction is of position j.
They are built as XLNet's own data pipeline builds them (``_local_perm`` in zihangdai/xlnet's
``data_utils.py``): tokens that are not predicted are context, seen by everyone; a predicted token
sees the context and the tokens before it in the order; the trailing ``<sep>``/``<cls>`` come last
in the order. The content stream may always see itself; the query stream of a target may not.

Mask construction needs no torch (the page draws masks without a model); the functions that run
XLNet import it when called.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from core.errors import InvalidOrder, InvalidText, check_text_length
from models.loader import ModelRef

MAX_TOKENS = 128  # the page's limit: masks are T × T and predictions run T passes in the self-check


#: The longest order the library takes (T positions: masks are T × T). XLNet has relative positions and
#: no limit of its own; the loader caps its inputs at the same 512 tokens.
MAX_ORDER_LENGTH = 512
#: Characters of a typed order: enough for MAX_ORDER_LENGTH positions with separators, nothing more.
MAX_ORDER_CHARS = 8 * MAX_ORDER_LENGTH


def check_order(order: Sequence[int], n: int) -> list[int]:
    """``order`` as a list, if it is a permutation of 0..n−1; else :class:`InvalidOrder` saying what is wrong.

    Linear in the length, and refused at once past :data:`MAX_ORDER_LENGTH` positions.
    """
    if isinstance(order, str | bytes) or not isinstance(order, Sequence):
        raise InvalidOrder(f"An order is a list of positions, not {type(order).__name__}.", "Pass e.g. [2, 0, 1].")
    if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_ORDER_LENGTH:
        raise InvalidOrder(f"An order covers 1 to {MAX_ORDER_LENGTH} positions, not {str(n)[:20]}.", "Use a shorter sentence.")
    if len(order) > MAX_ORDER_LENGTH:
        raise InvalidOrder(f"The order has {len(order):,} positions; the sentence has {n}.", f"List each of 0 to {n - 1} exactly once.")
    if any(isinstance(x, bool) for x in order):
        raise InvalidOrder("The order must be whole numbers (positions), separated by commas.")
    try:
        seq = [int(x) for x in order]
    except (TypeError, ValueError, OverflowError):
        raise InvalidOrder("The order must be whole numbers (positions), separated by commas.") from None
    if any(str(x).strip() != str(int(x)) for x in order if isinstance(x, str)) or any(
            isinstance(x, float) and not x.is_integer() for x in order):
        raise InvalidOrder("The order must be whole numbers (positions), separated by commas.")
    counts = Counter(seq)
    out_of_range = sorted(x for x in counts if not 0 <= x < n)
    dupes = sorted(x for x, c in counts.items() if c > 1 and 0 <= x < n)
    missing = [x for x in range(n) if x not in counts]
    if out_of_range or dupes or missing:
        parts = []
        if out_of_range:
            parts.append(f"out of range (positions are 0–{n - 1}): {_few(out_of_range)}")
        if dupes:
            parts.append(f"repeated: {_few(dupes)}")
        if missing:
            parts.append(f"missing: {_few(missing)}")
        raise InvalidOrder("The order is not a permutation of the positions: " + "; ".join(parts) + ".",
                           f"List each of 0 to {n - 1} exactly once.")
    return seq


def _few(xs: list[int], limit: int = 12) -> str:
    return str(xs) if len(xs) <= limit else str(xs[:limit])[:-1] + f", … ({len(xs) - limit} more)]"


def parse_order(text: str, n: int) -> list[int]:
    """'3, 1, 0, 2' → [3, 1, 0, 2], checked."""
    if not isinstance(text, str):
        raise InvalidOrder("The order must be text: positions separated by commas.")
    if len(text) > MAX_ORDER_CHARS:
        raise InvalidOrder(f"The order is {len(text):,} characters long; at most {MAX_ORDER_CHARS:,}.",
                           f"Type the positions 0 to {n - 1} in the order to predict them.")
    items = [x.strip() for x in text.replace(";", ",").replace(" ", ",").split(",") if x.strip()]
    if not items:
        raise InvalidOrder("The order is empty.", f"Type the positions 0 to {n - 1} in the order to predict them.")
    bad = next((x for x in items if not (x.lstrip("-").isascii() and x.lstrip("-").isdigit()) or len(x) > 6), None)
    if bad is not None:
        raise InvalidOrder(f"{bad[:20]!r} is not a position.", "Type whole numbers separated by commas, like 2, 0, 1.")
    return check_order([int(x) for x in items], n)


def make_order(kind: str, n: int, seed: int = 0) -> list[int]:
    """``left-to-right``, ``right-to-left`` or ``random`` (seeded) order of n positions."""
    if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= MAX_ORDER_LENGTH:
        raise InvalidOrder(f"An order covers 1 to {MAX_ORDER_LENGTH} positions, not {str(n)[:20]}.", "Use a shorter sentence.")
    if kind == "left-to-right":
        return list(range(n))
    if kind == "right-to-left":
        return list(range(n - 1, -1, -1))
    if kind == "random":
        order = list(range(n))
        random.Random(seed).shuffle(order)
        return order
    raise InvalidOrder(f"Unknown order kind {kind!r}.", "Use left-to-right, right-to-left or random.")


def _targets(order: list[int], targets: int | Sequence[int] | None) -> list[int]:
    n = len(order)
    if targets is None:
        return list(order)
    if isinstance(targets, int):
        if not 1 <= targets <= n:
            raise InvalidOrder(f"K = {targets} predictions, but the sentence has {n} tokens.", f"Pick K from 1 to {n}.")
        return order[n - targets:]
    try:
        t = [int(x) for x in targets]
    except (TypeError, ValueError, OverflowError):
        raise InvalidOrder("Targets are K (a whole number) or a list of positions.") from None
    if bad := [x for x in t if x not in order]:
        raise InvalidOrder(f"Targets {_few(bad)} are not positions of the order.")
    return sorted(t, key=order.index)


@dataclass(frozen=True)
class PermutationInputs:
    """``perm_mask`` (1, T, T) and ``target_mapping`` (1, K, T) as float32, with what they were built from."""

    perm_mask: np.ndarray
    target_mapping: np.ndarray
    order: tuple[int, ...]  # over all T positions, specials last
    targets: tuple[int, ...]  # positions predicted, in order


def permutation_inputs(order: Sequence[int], targets: int | Sequence[int] | None = None, specials: Sequence[int] = ()) -> PermutationInputs:
    """Masks for an order over the n text positions (a permutation of 0..n−1); ``specials`` are the
    positions of trailing special tokens (``<sep>``, ``<cls>``: T = n + len(specials)), put last in
    the order. ``targets``: K (the last K of the order: XLNet's partial prediction), explicit
    positions, or None for all.
    """
    if isinstance(order, str | bytes) or not isinstance(order, Sequence):
        raise InvalidOrder(f"An order is a list of positions, not {type(order).__name__}.", "Pass e.g. [2, 0, 1].")
    n = len(order)
    seq = check_order(order, n)
    tg = _targets(seq, targets)
    specials = [int(s) for s in specials]
    t = n + len(specials)
    if sorted(specials) != list(range(n, t)):
        raise InvalidOrder("Special tokens must be the trailing positions after the text.")
    full = seq + specials
    rank = {p: i for i, p in enumerate(full)}
    is_target = np.zeros(t, dtype=bool)
    is_target[tg] = True
    functional = np.zeros(t, dtype=bool)
    functional[specials] = True
    # XLNet's _local_perm: context tokens rank -1 (seen by all); targets and specials keep their rank.
    rev = np.array([rank[p] if (is_target[p] or functional[p]) else -1 for p in range(t)])
    self_rev = np.where(is_target, rev, rev + 1)
    masked_or_func = is_target | functional
    perm = (self_rev[:, None] <= rev[None, :]) & masked_or_func[None, :]  # (T, T): i may not see j
    mapping = np.zeros((len(tg), t), dtype=np.float32)
    mapping[np.arange(len(tg)), tg] = 1.0
    return PermutationInputs(perm[None].astype(np.float32), mapping[None], tuple(full), tuple(tg))


def content_mask(inputs: PermutationInputs) -> np.ndarray:
    """(T, T) bool: who may see whom in the content stream (it always sees itself)."""
    return ~inputs.perm_mask[0].astype(bool) | np.eye(inputs.perm_mask.shape[-1], dtype=bool)


def query_mask(inputs: PermutationInputs) -> np.ndarray:
    """(T, T) bool: who may see whom in the query stream (it never sees its own token)."""
    t = inputs.perm_mask.shape[-1]
    return ~inputs.perm_mask[0].astype(bool) & ~np.eye(t, dtype=bool)


def conditioned_on(inputs: PermutationInputs, position: int) -> list[int]:
    """Positions the prediction at ``position`` is conditioned on (its query-stream row)."""
    return [int(j) for j in np.flatnonzero(query_mask(inputs)[position])]


# ------------------------------------------------------------------------------------ with the model


@dataclass(frozen=True)
class TokenPrediction:
    position: int
    token: str  # the token at that position
    true_probability: float
    top: tuple[tuple[str, float], ...]  # (token, probability), best first


def xlnet_tokens(tokenizer: Any, text: str) -> tuple[list[int], list[str]]:
    """Token ids of ``text`` with XLNet's trailing ``<sep> <cls>``, and the readable tokens."""
    text = (text or "").strip()
    if not text:
        raise InvalidText("The sentence is empty.", "Type a sentence, for example 'New York is a city'.")
    check_text_length(text, "sentence")
    ids = tokenizer(text, add_special_tokens=True)["input_ids"]
    if len(ids) > MAX_TOKENS:
        raise InvalidText(f"The sentence has {len(ids)} tokens; this lab takes at most {MAX_TOKENS}.", "Use a shorter sentence.")
    toks = [t.replace("▁", "") or "␣" for t in tokenizer.convert_ids_to_tokens(ids)]
    return ids, toks


def word_tokens(text: str) -> list[str]:
    """The sentence's words as tokens, with XLNet's trailing ``<sep> <cls>``: what the masks are drawn over when no XLNet
    tokenizer is at hand (no torch). Refused like :func:`xlnet_tokens`: empty, or more than :data:`MAX_TOKENS` tokens."""
    if not isinstance(text, str):
        raise InvalidText("The sentence must be text.")
    check_text_length(text, "sentence")
    words = text.split()
    if not words:
        raise InvalidText("The sentence is empty.", "Type a sentence, for example 'New York is a city'.")
    if len(words) + 2 > MAX_TOKENS:
        raise InvalidText(f"The sentence has {len(words) + 2} tokens (its words and <sep> <cls>); this lab takes at most "
                          f"{MAX_TOKENS}.", "Use a shorter sentence.")
    return [*words, "<sep>", "<cls>"]


def tokens_for(model_id: str, text: str) -> tuple[list[int], list[str]]:
    """:func:`xlnet_tokens` with ``model_id``'s tokenizer (a model id in, plain lists out: the pages call it in the
    model process)."""
    return xlnet_tokens(_lm(model_id).tokenizer, text)


def _lm(model: ModelRef):
    from models.loader import as_loaded

    return as_loaded(model, task="xlnet-lm")


def _forward(lm: Any, ids: list[int], inputs: PermutationInputs) -> np.ndarray:
    """Log-probabilities (K, V) of the targets."""
    import torch

    net, _, dev = lm
    with torch.inference_mode():
        out = net(input_ids=torch.tensor([ids], device=dev), perm_mask=torch.from_numpy(inputs.perm_mask).to(dev),
                  target_mapping=torch.from_numpy(inputs.target_mapping).to(dev))
    return torch.log_softmax(out.logits[0].float(), dim=-1).cpu().numpy()


def predict_last_k(model: ModelRef, text: str, order: Sequence[int], k: int, top_k: int = 5) -> list[TokenPrediction]:
    """Predictions for the last ``k`` positions of ``order`` (XLNet's partial prediction), best ``top_k`` each."""
    lm = _lm(model)
    ids, toks = xlnet_tokens(lm.tokenizer, text)
    n = len(ids) - 2
    inputs = permutation_inputs(check_order(order, n), k, specials=[n, n + 1])
    logp = _forward(lm, ids, inputs)
    out = []
    for row, pos in zip(logp, inputs.targets, strict=True):
        best = np.argsort(-row)[:top_k]
        top = tuple((lm.tokenizer.convert_ids_to_tokens(int(i)).replace("▁", "") or "␣", float(np.exp(row[i]))) for i in best)
        out.append(TokenPrediction(pos, toks[pos], float(np.exp(row[ids[pos]])), top))
    return out


def target_distribution(model: ModelRef, ids: list[int], order: Sequence[int], target: int) -> np.ndarray:
    """The probability distribution (V,) at ``target`` under ``order``, all positions after it in the order predicted."""
    lm = _lm(model)
    n = len(ids) - 2
    seq = check_order(order, n)
    k = n - seq.index(target)
    inputs = permutation_inputs(seq, k, specials=[n, n + 1])
    return np.exp(_forward(lm, ids, inputs)[0])


@dataclass(frozen=True)
class SelfCheck:
    target: int
    later: int | None
    earlier: int | None
    change_later: float | None  # max |Δp| over the vocabulary when the later token is replaced
    change_earlier: float | None


def self_check(model: ModelRef, text: str, order: Sequence[int], target: int, replacement: str = "the") -> SelfCheck:
    """Replace a token that comes later in the order than ``target`` and one that comes earlier; how much
    does the prediction at ``target`` move? (Later: not at all. Earlier: it should.)"""
    lm = _lm(model)
    ids, _ = xlnet_tokens(lm.tokenizer, text)
    n = len(ids) - 2
    seq = check_order(order, n)
    if target not in seq:
        raise InvalidOrder(f"Position {target} is not in the sentence (0–{n - 1}).")
    i = seq.index(target)
    later = seq[i + 1] if i + 1 < n else None
    earlier = seq[i - 1] if i > 0 else None
    base = target_distribution(lm, ids, seq, target)
    rep = lm.tokenizer.convert_tokens_to_ids(lm.tokenizer.tokenize(replacement)[-1:] or ["<unk>"])[0]

    def moved(pos: int | None) -> float | None:
        if pos is None:
            return None
        changed = list(ids)
        changed[pos] = rep if rep != ids[pos] else lm.tokenizer.unk_token_id
        return float(np.abs(target_distribution(lm, changed, seq, target) - base).max())

    return SelfCheck(target, later, earlier, moved(later), moved(earlier))


def new_york(bert: Any, xlnet: Any, text: str, first: str, second: str) -> dict[str, float]:
    """The XLNet paper's §2.3 example: log p(first, second | rest) for two neighbouring words.

    BERT masks both and predicts them independently: log p(first | ctx) + log p(second | ctx).
    XLNet, under an order that predicts ``first`` before ``second``, conditions the second on the first.
    Both words must be single tokens of each tokenizer.
    """
    import torch

    from models.loader import as_loaded

    for value, what in ((text, "sentence"), (first, "first word"), (second, "second word")):
        check_text_length(value, what)
    blm = as_loaded(bert, task="masked-lm")
    xlm = _lm(xlnet)

    def single(tok: Any, word: str, lead: str) -> int:
        pieces = tok.tokenize(lead + word) if lead else tok.tokenize(word)
        pieces = [p for p in pieces if p not in ("▁",)]
        if len(pieces) != 1:
            raise InvalidText(f"{word!r} is {len(pieces)} tokens for {tok.__class__.__name__}; the comparison needs one.",
                              "Pick two words each model has as a single token (New York, Los Angeles ...).")
        return tok.convert_tokens_to_ids(pieces[0])

    if f"{first} {second}" not in text:
        raise InvalidText(f"'{first} {second}' does not occur in the sentence.")
    # BERT: both masked, one pass
    net, tok, dev = blm
    masked = text.replace(f"{first} {second}", f"{tok.mask_token} {tok.mask_token}", 1)
    enc = tok(masked, return_tensors="pt").to(dev)
    pos = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
    if len(pos) != 2:
        raise InvalidText("The sentence must contain the two words once.")
    with torch.inference_mode():
        logits = net(**enc).logits[0].float()
    logp = torch.log_softmax(logits, dim=-1)
    b1, b2 = single(tok, first, ""), single(tok, second, "")
    bert_1, bert_2 = float(logp[pos[0], b1]), float(logp[pos[1], b2])
    # XLNet: the two words are the targets, first then second; everything else is context
    ids, _ = xlnet_tokens(xlm.tokenizer, text)
    x1, x2 = single(xlm.tokenizer, first, "▁"), single(xlm.tokenizer, second, "▁")
    try:
        p1 = ids.index(x1)
        p2 = ids.index(x2, p1 + 1)
    except ValueError:
        raise InvalidText("XLNet's tokenizer splits the sentence differently around these words.") from None
    n = len(ids) - 2
    order = [p for p in range(n) if p not in (p1, p2)] + [p1, p2]
    out = _forward(xlm, ids, permutation_inputs(order, 2, specials=[n, n + 1]))
    xl_1, xl_2 = float(out[0, ids[p1]]), float(out[1, ids[p2]])
    return {"bert_first": bert_1, "bert_second": bert_2, "bert_pair": bert_1 + bert_2,
            "xlnet_first": xl_1, "xlnet_second_given_first": xl_2, "xlnet_pair": xl_1 + xl_2}


@dataclass(frozen=True)
class SegmentAttention:
    segment: int
    tokens: tuple[str, ...]  # this segment's tokens
    memory: int  # how many remembered positions it could attend to
    into_memory: np.ndarray  # (layers,) mean share of attention that goes into memory
    weights: np.ndarray  # (layers, heads, q, memory + q)


def segment_recurrence(model: ModelRef, text: str, segment_length: int = 8, memory_length: int = 8) -> list[SegmentAttention]:
    """Run ``text`` through XLNet in segments of ``segment_length`` tokens, remembering up to
    ``memory_length`` previous hidden states (Transformer-XL's recurrence, XLNet's ``mems``), and
    return the attention each segment pays into memory. ``memory_length = 0`` is the vanilla model
    with a fixed context."""
    import torch

    from models.loader import as_loaded

    if not (1 <= segment_length <= 512 and 0 <= memory_length <= 512):
        raise InvalidText("Segment length must be 1–512 and memory length 0–512.")
    lm = as_loaded(model, task="xlnet-lm", attentions=True)
    net, tok, dev = lm
    text = (text or "").strip()
    if not text:
        raise InvalidText("The text is empty.", "Paste a paragraph: recurrence needs several segments.")
    check_text_length(text)
    ids = tok(text, add_special_tokens=False)["input_ids"][: MAX_TOKENS * 4]
    toks = [t.replace("▁", "") or "␣" for t in tok.convert_ids_to_tokens(ids)]
    body = getattr(net, "transformer", net)
    saved = body.mem_len
    body.mem_len = memory_length or None
    out: list[SegmentAttention] = []
    mems = None
    try:
        for si, start in enumerate(range(0, len(ids), segment_length)):
            seg = ids[start:start + segment_length]
            with torch.inference_mode():
                res = net(input_ids=torch.tensor([seg], device=dev), mems=mems if memory_length else None,
                          use_mems=bool(memory_length), output_attentions=True)
            att = torch.stack([a[0] for a in res.attentions]).float().cpu().numpy()  # (L, H, q, mlen + q)
            mlen = att.shape[-1] - len(seg)
            into = att[..., :mlen].sum(-1).mean(axis=(1, 2)) if mlen else np.zeros(att.shape[0])
            out.append(SegmentAttention(si, tuple(toks[start:start + segment_length]), mlen, into, att))
            mems = res.mems if memory_length else None
    finally:
        body.mem_len = saved
    return out
