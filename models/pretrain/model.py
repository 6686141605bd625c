"""The transformers models a pre-training run trains, built from :func:`models.pretrain.config.hf_config`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import transformers

from models.pretrain.config import TrainConfig, hf_config

if TYPE_CHECKING:
    import torch

#: transformers' class for each (model type, head) a run trains
MODEL_CLASSES = {("bert", "masked-lm"): "BertForMaskedLM", ("bert", "pretraining"): "BertForPreTraining",
                 ("electra", "pretraining"): "ElectraForPreTraining", ("electra", "masked-lm"): "ElectraForMaskedLM",
                 ("xlnet", "xlnet-lm"): "XLNetLMHeadModel", ("gpt2", "causal-lm"): "GPT2LMHeadModel"}


def _dropout_keys(model_type: str, p: float) -> dict[str, float]:
    if model_type == "xlnet":
        return {"dropout": p}
    if model_type == "gpt2":
        return {"resid_pdrop": p, "embd_pdrop": p, "attn_pdrop": p}
    return {"hidden_dropout_prob": p, "attention_probs_dropout_prob": p}


def build_model(config: TrainConfig, vocab: int, tok: Any) -> Any:
    """The transformers model a run trains, from :func:`hf_config` (ELECTRA: a (generator, discriminator) pair
    sharing embeddings)."""
    def make(part: str) -> Any:
        keys, head = hf_config(config, part)
        model_type = keys.pop("model_type")
        extra = {"vocab_size": vocab, "pad_token_id": tok.pad_token_id, **_dropout_keys(model_type, config.dropout)}
        if model_type == "gpt2":
            extra.update(bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id)
        cfg = transformers.AutoConfig.for_model(model_type, **{**keys, **extra})
        return getattr(transformers, MODEL_CLASSES[model_type, head])(cfg)

    if config.objective == "distil":
        from models.pretrain.distil import build_student

        return build_student(config, lambda: make("main"), tok)
    if config.objective != "electra":
        return make("main")
    disc, gen = make("main"), make("generator")
    gen.electra.embeddings = disc.electra.embeddings  # ELECTRA §3.2: the generator and discriminator share embeddings
    gen.generator_lm_head.weight = disc.electra.embeddings.word_embeddings.weight
    return gen, disc


def parameter_count(model: torch.nn.Module | tuple[torch.nn.Module, ...]) -> int:
    """Parameters of a model, or of ELECTRA's (generator, discriminator) with the tensors they share counted once."""
    models = model if isinstance(model, tuple) else (model,)
    seen, total = set(), 0
    for m in models:
        for p in m.parameters():
            if id(p) not in seen:
                seen.add(id(p))
                total += p.numel()
    return total



def main_model(model: torch.nn.Module | tuple[torch.nn.Module, ...]) -> torch.nn.Module:
    """The model a run keeps: ELECTRA's discriminator, the model otherwise."""
    if isinstance(model, tuple):
        return model[1] if len(model) > 1 else model[0]
    return model

