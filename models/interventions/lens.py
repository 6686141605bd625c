"""The logit lens: for each ``[MASK]``, the top-k tokens the model's own masked-LM head reads from every layer's
hidden state, and the probability of the final answer by layer; its last layer is the model's fill-mask output."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from core.errors import InvalidText, UnsupportedTask
from models.interventions.targets import _masked_lm
from models.loader import ModelRef


def mlm_head(net: Any) -> Any:
    """The masked-LM head as a function of hidden states (B, T, H) → logits, per architecture.

    Raises:
        UnsupportedTask: a model without one.
    """
    from models.objectives import _head

    head = _head(net)
    if head is not None:
        return head
    if hasattr(net, "lm_head"):  # XLM-R, MPNet
        return net.lm_head
    if net.config.model_type == "modernbert" and hasattr(net, "head"):
        return lambda h: net.decoder(net.head(h))
    raise UnsupportedTask(f"No masked-LM head to read the layers of {net.config.model_type}.",
                          "Pick a masked-LM model (BERT, RoBERTa, ALBERT, DistilBERT, an ELECTRA generator, a lab model).")


@dataclass(frozen=True)
class LensRow:
    """One mask at one layer: the top-k (token, probability) and the probability of the final answer."""

    layer: int  # 0: the embeddings; L: the last layer
    top: list[tuple[str, float]]
    final_probability: float


@dataclass(frozen=True)
class LogitLens:
    model_id: str
    tokens: list[str]
    positions: list[int]  # the masks' token positions
    rows: list[list[LensRow]]  # per mask, one row per layer (embeddings first)
    answers: list[str]  # per mask, the last layer's top token


def logit_lens(model: ModelRef, text: str, top_k: int = 5) -> LogitLens:
    """For each ``[MASK]`` in ``text``: what the model's own masked-LM head reads from every layer's hidden state (the
    embeddings and each layer's output), its top ``top_k`` tokens and the probability of the final answer; the last
    layer's row is the model's fill-mask output (tested).

    Raises:
        InvalidText, MaskMissing: the text (see :func:`models.objectives.to_model_text`); top_k outside 1 to 20.
        UnsupportedTask: a model without a masked-LM head (use the Attention or Representations page instead).
    """
    import torch

    from models.objectives import _encode, to_model_text

    if not (isinstance(top_k, int) and 1 <= top_k <= 20):
        raise InvalidText("top_k must be a whole number from 1 to 20.")
    lm = _masked_lm(model)
    net, tok = lm.model, lm.tokenizer
    head = mlm_head(net)
    enc = _encode(lm, to_model_text(text, tok))
    ids = enc["input_ids"]
    positions = (ids[0] == tok.mask_token_id).nonzero().flatten().tolist()
    with torch.inference_mode():
        out = net.base_model(input_ids=ids, attention_mask=enc.get("attention_mask"), output_hidden_states=True)
        states = list(out.hidden_states)
        final_norm = getattr(net.base_model, "final_norm", None)
        if final_norm is not None:  # a pre-LN model's head reads normalised states: every layer goes through the norm
            states = [final_norm(h) for h in states[:-1]] + [out.last_hidden_state]
        else:
            states[-1] = out.last_hidden_state
        probs = [head(h[0, positions]).float().softmax(-1) for h in states]  # per layer (masks, V)
    rows, answers = [], []
    for m in range(len(positions)):
        answer = int(probs[-1][m].argmax())
        answers.append(tok.convert_ids_to_tokens(answer))
        per_layer = []
        for layer, p in enumerate(probs):
            values, idx = p[m].topk(top_k)
            per_layer.append(LensRow(layer, [(tok.convert_ids_to_tokens(int(i)), float(v)) for v, i in zip(values, idx, strict=True)],
                                     float(p[m, answer])))
        rows.append(per_layer)
    return LogitLens(lm.model_id, tok.convert_ids_to_tokens(ids[0].tolist()), positions, rows, answers)
