"""Measure what the calculators predict, on real torch models (imports torch; used by bench/ and tests).

``adamw_step_bytes`` runs one AdamW step and counts the bytes held by parameters, gradients and
optimizer state; ``cuda_peak_training_step`` measures ``torch.cuda.max_memory_allocated`` over one
mixed-precision training step.
"""

from __future__ import annotations

from typing import Any

from models.loader import TASK_CLASSES


def build(config: dict[str, Any], head: str = "base", device: str = "cpu"):
    """A randomly initialised transformers model for a config dict (with ``model_type``) and head."""
    import torch
    import transformers

    cfg = dict(config)
    model_type = cfg.pop("model_type")
    config_obj = transformers.AutoConfig.for_model(model_type, **cfg)
    cls = getattr(transformers, TASK_CLASSES[head])
    with torch.device(device):
        return cls(config_obj) if head == "xlnet-lm" else cls.from_config(config_obj)


def _batch(model, batch: int, seq: int, device: str) -> dict:
    import torch

    ids = torch.randint(5, model.config.vocab_size, (batch, seq), device=device)  # (B, T)
    return {"input_ids": ids, "labels": ids} if hasattr(model, "get_output_embeddings") and model.get_output_embeddings() is not None else {"input_ids": ids}


def _loss(model, inputs: dict):
    """The LM loss where there are labels, plus the mean of every other output, so every parameter gets a gradient."""
    import torch

    out = model(**inputs)
    loss = out.loss if getattr(out, "loss", None) is not None else 0.0
    for key, value in out.items():
        if key != "loss" and torch.is_tensor(value) and value.is_floating_point():
            loss = loss + value.float().mean()
    return loss


def adamw_step_bytes(config: dict[str, Any], head: str = "base", batch: int = 2, seq: int = 16) -> dict[str, int]:
    """Bytes in parameters, gradients and AdamW state after one fp32 step on CPU (tied tensors once)."""
    import torch

    torch.manual_seed(0)
    model = build(config, head)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    _loss(model, _batch(model, batch, seq, "cpu")).backward()
    opt.step()
    params = list(model.parameters())  # deduplicated by torch: tied weights appear once
    state = [v for p in params for v in opt.state[p].values() if torch.is_tensor(v)]
    return {
        "weights": sum(p.numel() * p.element_size() for p in params),
        "gradients": sum(p.grad.numel() * p.grad.element_size() for p in params if p.grad is not None),
        "optimizer states": sum(v.numel() * v.element_size() for v in state if v.dim() > 0),
        "optimizer step counters": sum(v.numel() * v.element_size() for v in state if v.dim() == 0),
        "parameters": sum(p.numel() for p in params),
        "tensors": len(params),
    }


def cuda_peak_training_step(config: dict[str, Any], head: str, batch: int, seq: int, dtype: str = "bf16") -> dict[str, int]:
    """Peak CUDA memory of one mixed-precision (autocast) AdamW step, fp32 master weights as in AMP."""
    import torch

    dev = "cuda"
    torch.manual_seed(0)
    model = build(config, head, dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    inputs = _batch(model, batch, seq, dev)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    with torch.autocast("cuda", dtype=torch.bfloat16 if dtype == "bf16" else torch.float16):
        loss = _loss(model, inputs)
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=False)
    torch.cuda.synchronize()
    return {"peak": torch.cuda.max_memory_allocated(), "before_step": base}
