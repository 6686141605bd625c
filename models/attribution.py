"""Which input tokens drive an output: integrated gradients and gradient × input, through Captum.

Usage::

    from models.attribution import similarity, fill_mask
    a = similarity("sentence-transformers/all-MiniLM-L6-v2", "A man plays the guitar.", "Someone makes music.")
    a.tokens, a.integrated_gradients, a.gradient_x_input, a.delta

Both methods run on the word-embedding layer (Captum's ``LayerIntegratedGradients`` and
``LayerGradientXActivation``): the baseline replaces every word token by the padding token and keeps
the special tokens, so positions and segments stay as they are (Sundararajan et al. 2017, §3; the
usual text baseline). Integrated gradients' attributions sum to f(input) − f(baseline) up to the
convergence ``delta`` Captum reports; the 50 interpolation steps run as one batch.

Outputs explained: a fill-mask candidate's probability at a [MASK]; NSP's "B follows A" (BERT) or
SOP's "in order" (ALBERT); ELECTRA's "this token was replaced" score at a position; and the cosine
similarity of two sentences' mean-pooled vectors under any encoder (the bundled MiniLM: real weights
offline).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from core.errors import InvalidText, UnsupportedTask
from models.loader import ModelRef

MAX_STEPS = 200
MAX_TOKENS = 256


@dataclass(frozen=True)
class Attribution:
    """Per-token attributions of one scalar output, by two methods, with IG's completeness check."""

    model_id: str
    output: str  # what is explained, in words
    tokens: tuple[str, ...]
    special: tuple[bool, ...]
    integrated_gradients: np.ndarray = field(repr=False)  # (T,)
    gradient_x_input: np.ndarray = field(repr=False)  # (T,)
    delta: float  # Captum's convergence delta: sum(IG) − (f(x) − f(baseline))
    f_input: float
    f_baseline: float
    steps: int


def _check_steps(steps: int) -> int:
    if not isinstance(steps, int) or isinstance(steps, bool) or not 1 <= steps <= MAX_STEPS:
        raise InvalidText(f"Integrated gradients takes 1 to {MAX_STEPS} steps, not {steps!r}.")
    return steps


def _run(lm: Any, enc: dict[str, Any], f: Callable[..., Any], output: str, steps: int,
         extra: tuple[Any, ...] = ()) -> Attribution:
    """Attribute ``f(input_ids, attention_mask, *extra) -> (batch,)`` to the word embeddings of ``enc``."""
    import torch
    from captum.attr import LayerGradientXActivation, LayerIntegratedGradients

    from models.attention import readable

    net, tok, dev = lm
    ids = enc["input_ids"].to(dev)
    mask = enc["attention_mask"].to(dev)
    if ids.shape[1] > MAX_TOKENS:
        raise InvalidText(f"The input has {ids.shape[1]} tokens; attribution takes at most {MAX_TOKENS}.", "Shorten the text.")
    special_ids = set(tok.all_special_ids) - {tok.unk_token_id}
    special = torch.tensor([[i in special_ids for i in row] for row in ids.tolist()], device=dev)
    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    baseline = torch.where(special, ids, torch.full_like(ids, pad))
    emb = net.get_input_embeddings()
    was_training = net.training
    net.eval()
    try:
        with torch.enable_grad():
            ig = LayerIntegratedGradients(f, emb)
            attr, delta = ig.attribute(ids, baselines=baseline, additional_forward_args=(mask, *extra), n_steps=steps,
                                       return_convergence_delta=True, internal_batch_size=steps)
            gxi = LayerGradientXActivation(f, emb).attribute(ids, additional_forward_args=(mask, *extra))
            with torch.no_grad():
                fx = float(f(ids, mask, *extra)[0])
                fb = float(f(baseline, mask, *extra)[0])
    finally:
        net.train(was_training)
    return Attribution(
        lm.model_id, output, tuple(readable(t) for t in tok.convert_ids_to_tokens(ids[0].tolist())),
        tuple(bool(s) for s in special[0].tolist()), attr.sum(-1)[0].detach().float().cpu().numpy(),
        gxi.sum(-1)[0].detach().float().cpu().numpy(), float(delta[0]), fx, fb, steps)


def _load(model: ModelRef, task: str) -> Any:
    from models.loader import as_loaded

    return as_loaded(model, task=task)


def fill_mask(model: ModelRef, text: str, candidate: str | None = None, mask: int = 0, steps: int = 50) -> Attribution:
    """Attribute the probability of ``candidate`` (default: the top prediction) at the ``mask``-th [MASK] of ``text``."""
    import torch

    from models.objectives import to_model_text

    steps = _check_steps(steps)
    lm = _load(model, "masked-lm")
    net, tok, dev = lm
    enc = tok(to_model_text(text, tok), return_tensors="pt")
    positions = (enc["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist()
    if not 0 <= mask < len(positions):
        raise InvalidText(f"The text has {len(positions)} [MASK]; there is no mask number {mask + 1}.")
    pos = positions[mask]
    with torch.no_grad():
        logits = net(**{k: v.to(dev) for k, v in enc.items()}).logits[0, pos]
    if candidate is None:
        target = int(logits.argmax())
    else:
        # Byte-level BPE (RoBERTa, GPT-2) spells a word after a space with the space: try both spellings.
        spellings = [tok(w, add_special_tokens=False)["input_ids"] for w in (candidate.strip(), " " + candidate.strip())]
        single = [c for c in spellings if len(c) == 1]
        if not single:
            raise InvalidText(f"{candidate!r} is {len(spellings[0])} tokens for {lm.model_id}; pick a single-token word.")
        target = single[0][0]
    word = tok.convert_ids_to_tokens(target)

    def f(ids: Any, attention_mask: Any) -> Any:
        return torch.softmax(net(input_ids=ids, attention_mask=attention_mask.expand_as(ids)).logits[:, pos], -1)[:, target]

    return _run(lm, enc, f, f"P({word!r} at mask {mask + 1})", steps)


def sentence_relation(model: ModelRef, a: str, b: str, steps: int = 50) -> Attribution:
    """Attribute NSP's P(B follows A) (BERT) or SOP's P(in order) (ALBERT) to the tokens of both sentences."""
    import torch

    steps = _check_steps(steps)
    lm = _load(model, "pretraining")
    net, tok, dev = lm
    mt = net.config.model_type
    if mt not in ("bert", "albert"):
        raise UnsupportedTask(f"{lm.model_id} has no NSP or SOP head.", "Use a BERT (NSP) or ALBERT (SOP) checkpoint.")
    enc = tok(a, b, return_tensors="pt", truncation=True, max_length=min(lm.max_tokens, MAX_TOKENS), return_token_type_ids=True)
    types = enc["token_type_ids"].to(dev)

    def f(ids: Any, attention_mask: Any, token_types: Any) -> Any:
        out = net(input_ids=ids, attention_mask=attention_mask.expand_as(ids), token_type_ids=token_types.expand_as(ids))
        logits = out.seq_relationship_logits if mt == "bert" else out.sop_logits
        return torch.softmax(logits, -1)[:, 0]

    return _run(lm, enc, f, "P(B follows A)" if mt == "bert" else "P(A, B in order)", steps, (types,))


def replaced_token(model: ModelRef, text: str, position: int, steps: int = 50) -> Attribution:
    """Attribute ELECTRA's discriminator score 'token ``position`` was replaced' (a sigmoid) to the input tokens."""
    import torch

    steps = _check_steps(steps)
    lm = _load(model, "pretraining")
    net, tok, _ = lm
    if net.config.model_type != "electra":
        raise UnsupportedTask(f"{lm.model_id} is not an ELECTRA discriminator.", "Use google/electra-small-discriminator.")
    enc = tok(text, return_tensors="pt", truncation=True, max_length=min(lm.max_tokens, MAX_TOKENS))
    if not 0 <= position < enc["input_ids"].shape[1]:
        raise InvalidText(f"Position {position} is outside the text's {enc['input_ids'].shape[1]} tokens.")

    def f(ids: Any, attention_mask: Any) -> Any:
        return torch.sigmoid(net(input_ids=ids, attention_mask=attention_mask.expand_as(ids)).logits[:, position])

    return _run(lm, enc, f, f"P(token {position} replaced)", steps)


def similarity(model: ModelRef, a: str, b: str, steps: int = 50) -> Attribution:
    """Attribute the cosine similarity of two sentences' mean-pooled vectors to the tokens of sentence A
    (B's vector is fixed): which words of A make it close to B. Works on any encoder, e.g. the bundled MiniLM."""
    import torch

    from models.attention import clean_text

    steps = _check_steps(steps)
    lm = _load(model, "base")
    net, tok, dev = lm
    a, _ = clean_text(a, "sentence A")
    b, _ = clean_text(b, "sentence B")
    limit = min(lm.max_tokens, MAX_TOKENS)
    enc_a = tok(a, return_tensors="pt", truncation=True, max_length=limit)
    enc_b = {k: v.to(dev) for k, v in tok(b, return_tensors="pt", truncation=True, max_length=limit).items()}

    def pool(hidden: Any, attention_mask: Any) -> Any:
        m = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)

    with torch.no_grad():
        vb = pool(net(**enc_b).last_hidden_state, enc_b["attention_mask"])

    def f(ids: Any, attention_mask: Any) -> Any:
        am = attention_mask.expand_as(ids)
        va = pool(net(input_ids=ids, attention_mask=am).last_hidden_state, am)
        return torch.nn.functional.cosine_similarity(va, vb.expand_as(va), dim=-1)

    return _run(lm, enc_a, f, "cosine(A, B), mean-pooled", steps)
