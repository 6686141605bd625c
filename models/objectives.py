"""The pre-training objectives of the family, live: fill-mask, BERT's masking recipe, pseudo-likelihood,
NSP/SOP, ELECTRA's replaced-token detection, and left-to-right generation for contrast.

The user always writes ``[MASK]``; each model gets its own mask token (``<mask>`` for RoBERTa,
whose mask token absorbs the space before it). Single-mask results equal transformers'
``pipeline("fill-mask")`` (tokens, probabilities, sequences): the tests use it as the oracle.
"""

from __future__ import annotations

import math
import random
import time
from dataclasses import dataclass
from typing import Any

from core.errors import InvalidText, MaskMissing, UnsupportedTask, check_text_length
from models.loader import ModelRef

USER_MASK = "[MASK]"
MAX_MASKS = 8
MAX_PLL_TOKENS = 128  # pseudo-likelihood runs one masked copy per token


@dataclass(frozen=True)
class Prediction:
    """One candidate for one mask: vocabulary ``token``, readable ``token_str``, ``id``, ``probability``, filled ``sequence``."""

    token: str
    token_str: str
    id: int
    probability: float
    sequence: str
    step: int = 0  # sequential mode: the step at which this mask was filled (1 = first)


def _load(model: ModelRef, task: str):
    from models.loader import as_loaded

    return as_loaded(model, task=task)


def to_model_text(text: str, tok: Any) -> str:
    """The user's ``[MASK]`` written as this model's mask token; checks the text and the mask count."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidText("The text is empty.", f"Type a sentence with {USER_MASK} where a word should be guessed.")
    check_text_length(text)
    count = text.count(USER_MASK)
    if count == 0:
        raise MaskMissing(f"There is no {USER_MASK} in the text.",
                          f"Put {USER_MASK} where the model should guess a word, e.g. 'Chickens cackle and {USER_MASK} quack'.")
    if count > MAX_MASKS:
        raise MaskMissing(f"There are {count} masks; the limit is {MAX_MASKS}.", "Remove some masks.")
    if tok.mask_token is None:
        raise UnsupportedTask("This model's tokenizer has no mask token.", "Pick a masked-LM model (BERT, RoBERTa, ALBERT ...).")
    return text.strip().replace(USER_MASK, tok.mask_token)


def _encode(lm: Any, text: str):
    _, tok, dev = lm
    check_text_length(text)
    enc = tok(text, return_tensors="pt")
    n = enc["input_ids"].shape[1]
    if n > lm.max_tokens:
        raise InvalidText(f"The text is {n} tokens; {lm.model_id} takes at most {lm.max_tokens}.", "Shorten it.")
    return enc.to(dev)


def _logits(lm: Any, input_ids, attention_mask=None):
    import torch

    with torch.inference_mode():
        return lm.model(input_ids=input_ids, attention_mask=attention_mask).logits.float()


def _head(net: Any):
    """The masked-LM head as a function of hidden states, per architecture (None: unknown, use full logits)."""
    mt = net.config.model_type
    if mt == "bert":
        return net.cls
    if mt == "roberta":
        return net.lm_head
    if mt == "albert":
        return net.predictions
    if mt == "electra":
        return lambda h: net.generator_lm_head(net.generator_predictions(h))
    if mt == "distilbert":
        return lambda h: net.vocab_projector(net.vocab_layer_norm(net.activation(net.vocab_transform(h))))
    return None


def _logits_at(lm: Any, input_ids, positions):
    """Logits (N, V) of row k at ``positions[k]`` only: the vocabulary projection, the costliest layer
    for short inputs, runs on N vectors instead of N × T."""
    import torch

    net = lm.model
    head = _head(net)
    rows = torch.arange(input_ids.shape[0])
    if head is None:
        return _logits(lm, input_ids)[rows, positions]
    with torch.inference_mode():
        hidden = net.base_model(input_ids=input_ids).last_hidden_state  # (N, T, H)
        return head(hidden[rows, positions]).float()


def _predictions(lm: Any, ids, logits, positions: list[int], top_k: int, single: bool) -> list[list[Prediction]]:
    """The pipeline's postprocess: softmax at each mask, top-k, token_str = decode([id]), sequence decoded."""
    tok = lm.tokenizer
    out = []
    for pos in positions:
        probs = logits[0, pos].softmax(-1)
        values, idx = probs.topk(top_k)
        row = []
        for v, p in zip(values.tolist(), idx.tolist(), strict=True):
            filled = ids[0].clone()
            filled[pos] = p
            filled = filled[filled != tok.pad_token_id] if tok.pad_token_id is not None else filled
            row.append(Prediction(tok.convert_ids_to_tokens(p), tok.decode([p]), p, v,
                                  tok.decode(filled.tolist(), skip_special_tokens=single)))
        out.append(row)
    return out


def fill_mask(model: ModelRef, text: str, top_k: int = 5, mode: str = "independent") -> list[list[Prediction]]:
    """Top-``top_k`` predictions for each ``[MASK]`` in ``text``, one list per mask (left to right).

    ``independent``: one forward pass, every mask predicted on its own (BERT's assumption).
    ``sequential``: fill the most confident mask with its best token, run again, and so on; each
    mask's list is what the model said at the step it was filled (``Prediction.step``).
    """
    if mode not in ("independent", "sequential"):
        raise ValueError(f"mode must be 'independent' or 'sequential', not {mode!r}")
    if not (isinstance(top_k, int) and 1 <= top_k <= 50):
        raise InvalidText("top_k must be a whole number from 1 to 50.")
    lm = _load(model, "masked-lm")
    tok = lm.tokenizer
    enc = _encode(lm, to_model_text(text, tok))
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
    if mode == "independent":
        return _predictions(lm, ids, _logits(lm, ids, enc.get("attention_mask")), positions, top_k, len(positions) == 1)
    ids = ids.clone()
    result: dict[int, list[Prediction]] = {}
    remaining = list(positions)
    step = 0
    while remaining:
        step += 1
        logits = _logits(lm, ids, enc.get("attention_mask"))
        best = max(remaining, key=lambda p: float(logits[0, p].softmax(-1).max()))
        row = _predictions(lm, ids, logits, [best], top_k, len(remaining) == 1)[0]
        result[best] = [Prediction(r.token, r.token_str, r.id, r.probability, r.sequence, step) for r in row]
        ids[0, best] = row[0].id
        remaining.remove(best)
    return [result[p] for p in positions]


# ------------------------------------------------------------------------------------ masking recipe

ACTIONS = ("kept", "mask", "random", "same")  # not chosen; chosen → [MASK] (80%); → random token (10%); → unchanged (10%)


def word_tokens(model: ModelRef, text: str, vocab_size: int = 2000) -> tuple[list[str], list[int | None], list[str]]:
    """``text`` through ``model``'s tokenizer (a masked LM): its tokens, each token's word index (None for special
    tokens), and the alphabetic entries among the first ``vocab_size`` of the vocabulary (the masking recipe's
    random replacements). A model id in, plain lists out: the pages call it in the model process."""
    check_text_length(text, "sentence")
    tok = _load(model, "masked-lm").tokenizer
    enc = tok(text)
    tokens = tok.convert_ids_to_tokens(enc["input_ids"])
    words = [None if i in tok.all_special_ids else w for i, w in zip(enc["input_ids"], enc.word_ids(), strict=True)]
    vocab = [t for t in list(tok.get_vocab())[:vocab_size] if t.isalpha()]
    return tokens, words, vocab


def mask_pattern(words: list[int | None], rng: random.Random, rate: float = 0.15, whole_word: bool = False) -> list[str]:
    """BERT's recipe (create_pretraining_data.py) for one sequence: pick round(15%) of the positions
    (whole words together with ``whole_word``; ``None`` = special token, never picked), then 80%
    become [MASK], 10% a random token, 10% stay. Returns one action per position (:data:`ACTIONS`)."""
    candidates: list[list[int]] = []
    for i, w in enumerate(words):
        if w is None:
            continue
        if whole_word and candidates and words[candidates[-1][-1]] == w:
            candidates[-1].append(i)
        else:
            candidates.append([i])
    n_real = sum(len(c) for c in candidates)
    target = max(1, round(n_real * rate)) if n_real else 0
    rng.shuffle(candidates)
    chosen: list[int] = []
    for group in candidates:
        if len(chosen) >= target:
            break
        if len(chosen) + len(group) > target:
            continue
        chosen.extend(group)
    actions = ["kept"] * len(words)
    for i in chosen:
        r = rng.random()
        actions[i] = "mask" if r < 0.8 else ("same" if r < 0.9 else "random")
    return actions


def masking_epochs(tokens: list[str], words: list[int | None], vocab: list[str], epochs: int = 4, seed: int = 0,
                   dynamic: bool = False, whole_word: bool = False, mask_token: str = "[MASK]") -> list[list[tuple[str, str]]]:
    """Static masking (one pattern, drawn once, reused every epoch: BERT) or dynamic (a new pattern
    each epoch: RoBERTa). Returns, per epoch, (action, token shown) for each position."""
    if not 1 <= epochs <= 100:
        raise InvalidText("Epochs must be 1 to 100.")
    out = []
    static = mask_pattern(words, random.Random(seed), whole_word=whole_word)
    for e in range(epochs):
        rng = random.Random(seed * 1000 + e + 1)
        actions = mask_pattern(words, rng, whole_word=whole_word) if dynamic else static
        shown = [(a, mask_token if a == "mask" else (rng.choice(vocab) if a == "random" else t)) for a, t in zip(actions, tokens, strict=True)]
        out.append(shown)
    return out


# ------------------------------------------------------------------------------------ pseudo-likelihood


@dataclass(frozen=True)
class PseudoLikelihood:
    tokens: tuple[str, ...]  # the scored tokens (no special tokens)
    log_probs: tuple[float, ...]  # log p(token | all the others), natural log
    pll: float  # sum
    pppl: float  # exp(−pll / n)


def pseudo_log_likelihood(model: ModelRef, text: str, batched: bool = True) -> PseudoLikelihood:
    """Salazar et al. 2020: mask each token in turn and add log p(token | rest); all masked copies in
    one batched forward pass (``batched=False``: one pass per token, for checking)."""
    import torch

    lm = _load(model, "masked-lm")
    tok = lm.tokenizer
    if not isinstance(text, str) or not text.strip():
        raise InvalidText("The sentence is empty.", "Type a sentence to score.")
    enc = _encode(lm, text.strip())
    ids = enc["input_ids"][0]
    special = set(tok.all_special_ids)
    positions = [i for i, t in enumerate(ids.tolist()) if t not in special]
    if not positions:
        raise InvalidText("Nothing to score: the sentence has no ordinary tokens.")
    if len(positions) > MAX_PLL_TOKENS:
        raise InvalidText(f"The sentence has {len(positions)} tokens; pseudo-likelihood here takes at most {MAX_PLL_TOKENS}.")
    copies = ids.repeat(len(positions), 1)  # (N, T): copy k has position k masked
    rows = torch.arange(len(positions))
    copies[rows, torch.tensor(positions)] = tok.mask_token_id
    if batched:
        lp = _logits_at(lm, copies, torch.tensor(positions)).log_softmax(-1)[rows, ids[positions]]
    else:
        lp = torch.stack([_logits(lm, copies[k : k + 1])[0, p].log_softmax(-1)[ids[p]] for k, p in enumerate(positions)])
    values = [float(v) for v in lp.tolist()]
    pll = sum(values)
    return PseudoLikelihood(tuple(tok.convert_ids_to_tokens([int(ids[p]) for p in positions])), tuple(values), pll,
                            math.exp(-pll / len(values)))


# ------------------------------------------------------------------------------------ NSP / SOP


def sentence_relation(model: ModelRef, a: str, b: str) -> dict[str, float]:
    """P(B follows A) from BERT's NSP head or ALBERT's SOP head, for (A, B) and swapped (B, A)."""
    import torch

    lm = _load(model, "pretraining")
    net, tok, dev = lm
    if net.config.model_type not in ("bert", "albert"):
        raise UnsupportedTask(f"{lm.model_id} has no next-sentence or sentence-order head.",
                              "Use a BERT checkpoint (NSP) or an ALBERT one (SOP).")
    a, b = (a or "").strip(), (b or "").strip()
    if not a or not b:
        raise InvalidText("Both sentences are needed.", "Type sentence A and sentence B.")
    check_text_length(a, "sentence A")
    check_text_length(b, "sentence B")

    def p_follows(x: str, y: str) -> float:
        enc = tok(x, y, return_tensors="pt", truncation=True, max_length=lm.max_tokens).to(dev)
        with torch.inference_mode():
            out = net(**enc)
        logits = out.seq_relationship_logits if net.config.model_type == "bert" else out.sop_logits
        return float(logits[0].float().softmax(-1)[0])  # label 0: B is the continuation / in order

    head = "NSP" if net.config.model_type == "bert" else "SOP"
    return {"head": head, "p_follows": p_follows(a, b), "p_follows_swapped": p_follows(b, a)}


# ------------------------------------------------------------------------------------ ELECTRA


@dataclass(frozen=True)
class Detection:
    tokens: tuple[str, ...]
    replaced: tuple[bool, ...]  # what really was replaced (by the generator or by hand)
    p_replaced: tuple[float, ...]  # the discriminator's probability per token


def discriminate(discriminator: Any, text: str, original: str | None = None) -> Detection:
    """The discriminator's probability that each token was replaced; with ``original``, which were."""
    import torch

    lm = _load(discriminator, "pretraining")
    net, tok, _ = lm
    if net.config.model_type != "electra":
        raise UnsupportedTask(f"{lm.model_id} is not an ELECTRA discriminator.", "Use google/electra-small-discriminator.")
    if not (text or "").strip():
        raise InvalidText("The text is empty.")
    enc = _encode(lm, text.strip())
    with torch.inference_mode():
        logits = net(**enc).logits[0].float()
    probs = torch.sigmoid(logits).tolist()
    ids = enc["input_ids"][0].tolist()
    replaced = [False] * len(ids)
    if original is not None:
        # Position by position: a replacement that re-tokenises into another length shifts what follows.
        check_text_length(original, "original text")
        orig = tok(original.strip())["input_ids"]
        replaced = [i >= len(orig) or x != orig[i] for i, x in enumerate(ids)]
    return Detection(tuple(tok.convert_ids_to_tokens(ids)), tuple(replaced), tuple(float(p) for p in probs))


def electra_round(generator: Any, discriminator: Any, text: str, seed: int = 0, rate: float = 0.15) -> tuple[str, Detection]:
    """One round of ELECTRA's game: mask ~15% of the tokens, the generator samples replacements,
    the discriminator says which tokens it thinks were replaced. Returns (corrupted text, detection)."""
    import torch

    gen = _load(generator, "masked-lm")
    tok = gen.tokenizer
    if not (text or "").strip():
        raise InvalidText("The text is empty.")
    enc = _encode(gen, text.strip())
    ids = enc["input_ids"][0].clone()
    special = set(tok.all_special_ids)
    words = [None if t in special else i for i, t in enumerate(ids.tolist())]
    actions = mask_pattern(words, random.Random(seed), rate)
    positions = [i for i, a in enumerate(actions) if a != "kept"]
    masked = ids.clone()
    masked[positions] = tok.mask_token_id
    logits = _logits(gen, masked[None])
    g = torch.Generator().manual_seed(seed)
    for p in positions:
        probs = logits[0, p].softmax(-1).cpu()
        ids[p] = int(torch.multinomial(probs, 1, generator=g))
    corrupted = tok.decode(ids.tolist(), skip_special_tokens=True)
    return corrupted, discriminate(discriminator, corrupted, original=text)


# ------------------------------------------------------------------------------------ left to right


@dataclass(frozen=True)
class Generation:
    text: str
    new_text: str
    seconds: float


def generate(model: ModelRef, prompt: str, max_new_tokens: int = 20, sample: bool = False, temperature: float = 1.0,
             top_k: int = 50, top_p: float = 1.0, seed: int = 0) -> Generation:
    """GPT-2 continues ``prompt``: greedy, or sampling with temperature, top-k, top-p and a seed."""
    import torch

    lm = _load(model, "causal-lm")
    net, tok, dev = lm
    if not (prompt or "").strip():
        raise InvalidText("The prompt is empty.", "Type the beginning of a sentence.")
    if not 1 <= max_new_tokens <= 200:
        raise InvalidText("Max new tokens must be 1 to 200.")
    if sample and not (0 < temperature <= 5 and 0 < top_p <= 1 and 0 <= top_k <= 1000):
        raise InvalidText("Temperature must be in (0, 5], top-p in (0, 1], top-k in [0, 1000].")
    check_text_length(prompt, "prompt")
    enc = tok(prompt.strip(), return_tensors="pt").to(dev)
    n = int(enc["input_ids"].shape[1])
    if n + max_new_tokens > lm.max_tokens:  # past its positions a decoder has no embedding to look up
        raise InvalidText(f"The prompt is {n} tokens and {max_new_tokens} more were asked for; {lm.model_id} reads at most "
                          f"{lm.max_tokens} tokens in all.", "Shorten the prompt or ask for fewer new tokens.")
    torch.manual_seed(seed)
    t0 = time.perf_counter()
    with torch.inference_mode():
        out = net.generate(**enc, max_new_tokens=max_new_tokens, do_sample=sample,
                           temperature=temperature if sample else None, top_k=top_k if sample else None,
                           top_p=top_p if sample else None, pad_token_id=tok.eos_token_id)
    secs = time.perf_counter() - t0
    new = tok.decode(out[0, enc["input_ids"].shape[1]:], skip_special_tokens=True)
    return Generation(tok.decode(out[0], skip_special_tokens=True), new, secs)


def bert_generate(model: ModelRef, prompt: str, max_new_tokens: int = 10) -> Generation:
    """BERT 'generating': append [MASK], fill it with the best token, repeat. It was never trained for this."""
    lm = _load(model, "masked-lm")
    if not (prompt or "").strip():
        raise InvalidText("The prompt is empty.", "Type the beginning of a sentence.")
    if not 1 <= max_new_tokens <= 50:
        raise InvalidText("Max new tokens must be 1 to 50.")
    text = prompt.strip()
    t0 = time.perf_counter()
    added = []
    for _ in range(max_new_tokens):
        best = fill_mask(lm, f"{text} {USER_MASK}", top_k=1)[0][0]
        word = best.token_str.strip()
        added.append(word)
        text = best.sequence if best.sequence else f"{text} {word}"
    return Generation(text, " ".join(added), time.perf_counter() - t0)
