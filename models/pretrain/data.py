"""A pre-training run's batches: tokenized once, masked per batch (dynamic) or once per example (static, BERT's
original), BERT's 80/10/10 through transformers' collators; NSP/SOP pairs with their labels."""

from __future__ import annotations

import random
from typing import Any

import torch
from transformers import DataCollatorForLanguageModeling, DataCollatorForPermutationLanguageModeling

from models.pretrain.config import TrainConfig
from models.pretrain.corpus import sentence_pairs
from models.pretrain.sparse import SparsePattern, packed


class Batches:
    """Training batches for an objective: tokenized once, masked per batch (dynamic) or once per example (static)."""

    def __init__(self, config: TrainConfig, texts: list[str], tok: Any) -> None:
        self.c, self.tok = config, tok
        self.rng = random.Random(config.seed)
        self.rank, self.world = 0, 1  # several processes: each trains on its slice of the same global batch
        if config.objective in ("mlm+nsp", "mlm+sop"):
            pairs = sentence_pairs(texts, config.objective[-3:], config.seed)
            self.examples = [dict(tok(a, b, truncation=True, max_length=config.seq_len, return_token_type_ids=True),
                                  next_sentence_label=label) for a, b, label in pairs]
        elif config.pack:
            self.examples = packed(texts, tok, config.seq_len)
        else:
            self.examples = [dict(tok(t, truncation=True, max_length=config.seq_len)) for t in texts]
        self.pattern = SparsePattern(config) if config.attention != "full" else None
        if config.objective == "plm":
            self.collator = DataCollatorForPermutationLanguageModeling(tok)
        else:
            self.collator = DataCollatorForLanguageModeling(tok, mlm=config.objective != "clm", seed=config.seed)
        masked_lm = config.objective not in ("clm", "plm")
        self.static: dict[int, dict[str, Any]] | None = {} if config.masking == "static" and masked_lm else None

    def _pad(self, rows: list[dict[str, Any]], keys: tuple[str, ...] | None = None) -> dict[str, Any]:
        """``rows``' ``keys`` (all of them by default) as tensors, each row padded to the longest."""
        width = self.c.seq_len if self.c.objective == "plm" else max(len(r["input_ids"]) for r in rows)
        out: dict[str, Any] = {}
        for key in rows[0] if keys is None else [k for k in keys if k in rows[0]]:
            if key == "next_sentence_label":
                out[key] = torch.tensor([r[key] for r in rows])
                continue
            fill = self.tok.pad_token_id if key == "input_ids" else (-100 if key == "labels" else 0)
            out[key] = torch.tensor([list(r[key][:width]) + [fill] * (width - len(r[key][:width])) for r in rows],
                                    dtype=torch.long)
        return out

    def sample(self) -> dict[str, Any]:
        """The next batch: the global batch (every process draws the same one), sliced to this process's rows."""
        batch = self._global()
        if self.pattern is not None:
            batch["sparse_mask"] = self.pattern.draw(batch["input_ids"].shape[0])  # (B, heads, W, W)
        if self.world == 1:
            return batch
        n = self.c.batch // self.world
        local = {k: v[self.rank * n: (self.rank + 1) * n] for k, v in batch.items()}
        if "labels" in batch:
            local["global_masked"] = torch.tensor(int((batch["labels"] != -100).sum()))
            local["world"] = torch.tensor(self.world)
        return local

    def _global(self) -> dict[str, Any]:
        idx = [self.rng.randrange(len(self.examples)) for _ in range(self.c.batch)]
        rows = [self.examples[i] for i in idx]
        if self.static is None:
            kept = self._pad(rows, ("next_sentence_label", "token_type_ids"))
            if self.c.objective == "plm":  # XLNet's collator wants equal lengths (the sequence length)
                batch = self.collator([row.tolist() for row in self._pad(rows, ("input_ids",))["input_ids"]])
                batch["attention_mask"] = (batch["input_ids"] != self.tok.pad_token_id).long()
                return {**batch, **kept}
            # Lists, not {"input_ids": ...} rows: the collator pads them itself, the same way, without tokenizer.pad's
            # checks (which cost more than the rest of the batch). The mask comes from the lengths, as pad() made it.
            lengths = torch.tensor([len(r["input_ids"]) for r in rows])
            batch = self.collator([r["input_ids"] for r in rows])
            batch["attention_mask"] = (torch.arange(batch["input_ids"].shape[1]) < lengths[:, None]).long()  # (B, W)
            return {**batch, **kept}
        # static: each example's mask pattern is drawn the first time it is seen and reused after (BERT's original).
        masked = []
        for i, r in zip(idx, rows, strict=True):
            if i not in self.static:
                one = self.collator([{"input_ids": r["input_ids"]}])
                self.static[i] = {"input_ids": one["input_ids"][0].tolist(), "labels": one["labels"][0].tolist()}
            masked.append({**{k: v for k, v in r.items() if k not in ("input_ids",)}, **self.static[i]})
        batch = self._pad(masked)
        # From the lengths, not from the ids: BERT's 10% random replacements draw from the whole vocabulary, [PAD]
        # included, and a masked position that drew it is a real token with a label (read as padding, the loss's
        # masked positions and the encoder's real tokens disagree by one: a ValueError in 1 of 9 RoBERTa runs).
        lengths = torch.tensor([len(r["input_ids"]) for r in masked])
        batch["attention_mask"] = (torch.arange(batch["input_ids"].shape[1]) < lengths[:, None]).long()
        return batch

