"""What the pre-training and fine-tuning loops share: the accelerate set-up, AdamW with a warm-up schedule, one
optimisation step, and an atomic checkpoint save.

Both labs train with the same pieces so that a speed-up or a fix reaches both (and so that a model that trains
in one trains the same way in the other): ``accelerate`` for the device and mixed precision (bf16 on a GPU, fp32
on a CPU), ``torch.optim.AdamW`` (or Lion) with transformers' linear or constant schedule with warm-up, clipping at 1.0.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import torch

from core.errors import InvalidConfig, TrainingFailed


def make_accelerator() -> Any:
    """An ``accelerate.Accelerator`` on the GPU in bf16 when there is one, else on the CPU in fp32."""
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    return Accelerator(cpu=not cuda, mixed_precision="bf16" if cuda else "no")


def optimizer_and_schedule(params: Iterable[Any], lr: float, steps: int, warmup: float = 0.06, schedule: str = "linear",
                           weight_decay: float = 0.01, optimizer: str = "adamw",
                           lr_factors: Sequence[float] | None = None) -> tuple[Any, Any]:
    """AdamW (fused) or Lion, and a schedule that warms up over ``warmup`` × ``steps`` steps, then decays linearly to 0
    (BERT's recipe) or stays constant; ``lr_factors`` (one multiplier per update) replaces the schedule (the
    phases of :mod:`models.pretrain.phases`).

    Lion is lion-pytorch's (Chen et al. 2023, arXiv 2302.06675, Program 1, β = (0.9, 0.99) as the paper's default):
    update = sign(β1·m + (1−β1)·g), θ ← θ − lr·(update + λ·θ), m ← β2·m + (1−β2)·g; one state (m) per parameter.
    """
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    params = list(params)
    # ``params`` may be parameter groups (dicts with their own lr, as μP's are).
    flat = [q for p in params for q in (p["params"] if isinstance(p, dict) else [p])]
    if optimizer == "lion":
        from lion_pytorch import Lion

        opt = Lion(params, lr=lr, betas=(0.9, 0.99), weight_decay=weight_decay)
    elif optimizer == "adamw":
        # Fused: one kernel for all the parameters instead of a dozen ops per parameter, a share of the lab's step on a
        # CPU (measured: bench/mfu.py --candidates, bench/results/README.md). make_accelerator puts a model on a CPU or
        # a CUDA GPU, which both have the kernel; it wants floating-point parameters.
        fused = all(torch.is_floating_point(p) for p in flat) or None
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)
    else:
        raise InvalidConfig(f"Unknown optimizer {optimizer!r}.", "Use adamw or lion.")
    if lr_factors is not None:
        factors = [float(f) for f in lr_factors]
        scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda n: factors[min(n, len(factors) - 1)])
        return opt, scheduler
    warm = int(warmup * steps)
    scheduler = (get_linear_schedule_with_warmup(opt, warm, steps) if schedule == "linear"
                 else get_constant_schedule_with_warmup(opt, warm))
    return opt, scheduler


def optimizer_state_bytes(optimizer: Any) -> int:
    """Bytes the optimizer's state tensors hold now (AdamW: two moments and a step count per tensor; Lion: one
    momentum): measured, beside the memory calculator's prediction."""
    inner = getattr(optimizer, "optimizer", optimizer)  # accelerate wraps it
    return sum(t.numel() * t.element_size() for s in inner.state.values() for t in s.values() if torch.is_tensor(t))


def step(accelerator: Any, loss: Any, params: list[Any], optimizer: Any, scheduler: Any, clip: float = 1.0) -> None:
    """Backward, clip the gradient norm, step the optimizer and the schedule, clear the gradients."""
    accelerator.backward(loss)
    accelerator.clip_grad_norm_(params, clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


def step_accumulated(accelerator: Any, params: list[Any], optimizer: Any, scheduler: Any, clip: float = 1.0) -> None:
    """:func:`step` after gradients were accumulated (each micro-batch's loss backpropagated, divided by their count)."""
    accelerator.clip_grad_norm_(params, clip)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad(set_to_none=True)


#: A ``.partial-*`` folder untouched this long is left by a killed save (a live one is written within seconds).
STALE_PARTIAL_S = 3600.0


def sweep_partials(folder: Path, older_than_s: float = STALE_PARTIAL_S) -> int:
    """Remove the ``.partial-*`` folders that killed saves (``kill -9``, a power cut) left in ``folder``: no picker
    shows them, but they hold a checkpoint's worth of disk each. Returns how many went."""
    import time

    gone = 0
    now = time.time()
    for p in folder.glob(".partial-*"):
        try:
            if p.is_dir() and now - p.stat().st_mtime > older_than_s:
                shutil.rmtree(p)
                gone += 1
        except OSError:
            continue
    return gone


def atomic_save(final: Path, write: Callable[[Path], None]) -> None:
    """Call ``write(folder)`` on a temporary folder beside ``final``, then rename it to ``final``: a full disk or a
    killed process never leaves a half-written checkpoint where a model picker would offer it.

    Raises:
        TrainingFailed: the folder cannot be written; the temporary folder is removed.
    """
    tmp = None
    try:
        final.parent.mkdir(parents=True, exist_ok=True)
        sweep_partials(final.parent)
        tmp = Path(tempfile.mkdtemp(prefix=".partial-", dir=final.parent))
        write(tmp)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        tmp = None
    except OSError as err:
        raise TrainingFailed(f"The checkpoint could not be saved ({err.strerror or type(err).__name__}).",
                         "Free some disk space under BFE_MODEL_DIR and train again.") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
