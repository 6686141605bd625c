"""What the pre-training and fine-tuning loops share: the accelerate set-up, AdamW with a warm-up schedule, one
optimisation step, and an atomic checkpoint save.

Both labs train with the same pieces so that a speed-up or a fix reaches both (and so that a model that trains
in one trains the same way in the other): ``accelerate`` for the device and mixed precision (bf16 on a GPU, fp32
on a CPU), ``torch.optim.AdamW`` with transformers' linear or constant schedule with warm-up, clipping at 1.0.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from core.errors import TrainingFailed


def make_accelerator() -> Any:
    """An ``accelerate.Accelerator`` on the GPU in bf16 when there is one, else on the CPU in fp32."""
    from accelerate import Accelerator

    cuda = torch.cuda.is_available()
    return Accelerator(cpu=not cuda, mixed_precision="bf16" if cuda else "no")


def optimizer_and_schedule(params: Iterable[Any], lr: float, steps: int, warmup: float = 0.06, schedule: str = "linear",
                           weight_decay: float = 0.01) -> tuple[Any, Any]:
    """AdamW (fused) and a schedule that warms up over ``warmup`` × ``steps`` steps, then decays linearly to 0 (BERT's
    recipe) or stays constant."""
    from transformers import get_constant_schedule_with_warmup, get_linear_schedule_with_warmup

    params = list(params)
    # Fused: one kernel for all the parameters instead of a dozen ops per parameter, ~7% of the lab's step on a CPU
    # (bench/mfu.py --candidates). make_accelerator puts a model on a CPU or a CUDA GPU, which both have the kernel;
    # it wants floating-point parameters. ``params`` may be parameter groups (dicts with their own lr, as μP's are).
    flat = [q for p in params for q in (p["params"] if isinstance(p, dict) else [p])]
    fused = all(torch.is_floating_point(p) for p in flat) or None
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused)
    warm = int(warmup * steps)
    scheduler = (get_linear_schedule_with_warmup(optimizer, warm, steps) if schedule == "linear"
                 else get_constant_schedule_with_warmup(optimizer, warm))
    return optimizer, scheduler


def step(accelerator: Any, loss: Any, params: list[Any], optimizer: Any, scheduler: Any, clip: float = 1.0) -> None:
    """Backward, clip the gradient norm, step the optimizer and the schedule, clear the gradients."""
    accelerator.backward(loss)
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
