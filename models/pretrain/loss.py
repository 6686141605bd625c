"""Each objective's loss on a batch (ELECTRA's joint loss and the masked-positions-only MLM written by hand)."""

from __future__ import annotations

from typing import Any

import torch

from models.pretrain import unpadded
from models.pretrain.config import TrainConfig


def _masked_logits(model: torch.nn.Module, batch: dict[str, Any], masked: Any) -> tuple[Any, Any] | None:
    """(vocabulary logits at the masked positions only, NSP/SOP logits or None), or None for a wrapped model.

    transformers' MLM heads score every position; with a small model the output layer over the vocabulary
    is most of the compute, and only the ~15% masked positions enter the loss. Scoring those alone (as
    fairseq's RoBERTa and Megatron do) gives the same loss faster (``bench/pretrain.py``,
    bench/results/README.md). Not for a model
    wrapped for several processes, whose own forward must run (DDP synchronises gradients through it).
    """
    kwargs = {"input_ids": batch["input_ids"], "attention_mask": batch["attention_mask"]}
    if hasattr(model, "bert") and hasattr(model, "cls"):  # BertForMaskedLM, BertForPreTraining
        pair = hasattr(model.cls, "seq_relationship")
        if pair:
            kwargs["token_type_ids"] = batch["token_type_ids"]
        head = model.cls.predictions if pair else model.cls
        if unpadded.supports(model.bert):  # the real tokens only: the same loss, about half the work (unpadded.py)
            hidden, u = unpadded.encode(model.bert, **kwargs)  # (N, h)
            logits = head(hidden[u.gather(masked)])
            pooled = model.bert.pooler(u.scatter(hidden)) if pair else None  # BertPooler reads position 0
            return logits, (model.cls.seq_relationship(pooled) if pair else None)
        out = model.bert(**kwargs)
        logits = head(out.last_hidden_state[masked])
        return logits, (model.cls.seq_relationship(out.pooler_output) if pair else None)
    if hasattr(model, "electra") and hasattr(model, "generator_lm_head"):  # ElectraForMaskedLM
        hidden = model.electra(**kwargs).last_hidden_state[masked]
        return model.generator_lm_head(model.generator_predictions(hidden)), None
    return None


def loss_of(config: TrainConfig, model: torch.nn.Module, batch: dict[str, Any]) -> Any:
    ce = torch.nn.functional.cross_entropy
    masked = batch["labels"] != -100 if "labels" in batch else None
    if config.objective == "distil":
        from models.pretrain.distil import distil_losses

        return distil_losses(model, batch)["loss"]
    if config.objective == "electra":
        gen, disc = model
        logits, _ = _masked_logits(gen, batch, masked)  # ELECTRA trains in one process: never wrapped
        gen_loss = ce(logits.float(), batch["labels"][masked])
        with torch.no_grad():  # sample replacements from the generator (ELECTRA §2: not trained through the sample)
            sampled = torch.distributions.Categorical(logits=logits.detach()).sample()
        original = torch.where(masked, batch["labels"], batch["input_ids"])
        corrupted = original.clone()
        corrupted[masked] = sampled
        replaced = (corrupted != original).long()
        d = disc(input_ids=corrupted, attention_mask=batch["attention_mask"], labels=replaced)
        return gen_loss + config.disc_weight * d.loss
    if "sparse_mask" in batch:  # BigBird's arm: the lab's BERT under the sparse pattern (models.pretrain.sparse)
        from models.pretrain.sparse import masked_lm_loss

        return masked_lm_loss(model, batch, masked)
    if config.objective in ("mlm", "mlm+nsp", "mlm+sop") and "global_masked" not in batch:
        fast = _masked_logits(model, batch, masked)
        if fast is not None:
            logits, pair = fast
            loss = ce(logits.float(), batch["labels"][masked])
            if pair is not None:  # BERT's pre-training loss: MLM + NSP (or SOP), as BertForPreTraining sums them
                loss = loss + ce(pair.float(), batch["next_sentence_label"])
            return loss
    if config.objective in ("mlm+nsp", "mlm+sop"):
        return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], token_type_ids=batch["token_type_ids"],
                     labels=batch["labels"], next_sentence_label=batch["next_sentence_label"]).loss
    if config.objective == "plm":
        return model(input_ids=batch["input_ids"], perm_mask=batch["perm_mask"], target_mapping=batch["target_mapping"],
                     labels=batch["labels"]).loss
    if config.objective == "mlm" and "global_masked" in batch:
        # Several processes: sum over this slice's masked tokens / all masked tokens of the global batch, times the
        # number of processes (DDP averages the gradients), so the gradient is exactly the single-process one.
        logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
        total = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), batch["labels"].reshape(-1),
                                                  ignore_index=-100, reduction="sum")
        return total / batch["global_masked"].clamp(min=1) * batch["world"]
    return model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"], labels=batch["labels"]).loss

