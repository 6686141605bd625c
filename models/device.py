"""Compute device: which one models run on, in which dtype, and a description for the UI.

:func:`describe_device` does not import torch (pages that need no model call it); when torch is
already imported it asks torch, otherwise it asks ``nvidia-smi``. :func:`resolve_device` and
:func:`inference_dtype` import torch and are for the loader.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

from core.errors import InvalidSetting
from core.settings import get_settings

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class DeviceInfo:
    """What the sidebar shows. ``memory_bytes`` is the GPU's memory, or the machine's RAM on a CPU."""

    kind: str  # "cuda", "mps" or "cpu"
    name: str
    memory_bytes: int | None

    def label(self) -> str:
        mem = f", {self.memory_bytes / 2**30:.0f} GiB" if self.memory_bytes else ""
        return {"cuda": "GPU", "mps": "Apple GPU", "cpu": "CPU"}[self.kind] + f": {self.name}{mem}"


def _ram_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


@lru_cache(maxsize=1)
def _nvidia_smi() -> tuple[str, int] | None:
    exe = shutil.which("nvidia-smi")
    if not exe:
        return None
    try:
        out = subprocess.run([exe, "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=5, check=True).stdout
        name, mib = out.splitlines()[0].rsplit(",", 1)
        return name.strip(), int(mib.strip()) * 2**20
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def describe_device() -> DeviceInfo:
    """The device models will run on, without importing torch when it is not imported yet."""
    wanted = get_settings().device
    cpu = DeviceInfo("cpu", f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)", _ram_bytes())
    if wanted == "cpu":
        return cpu
    if "torch" in sys.modules:
        dev = resolve_device(wanted)
        if dev.type == "cuda":
            import torch

            try:
                props = torch.cuda.get_device_properties(dev)
            except (RuntimeError, AssertionError, AttributeError):
                # A GPU that is attached only while a call runs (a ZeroGPU Space's process between calls): name it
                # as nvidia-smi does, or just as a CUDA GPU.
                smi = _nvidia_smi()
                return DeviceInfo("cuda", smi[0], smi[1]) if smi else DeviceInfo("cuda", "CUDA GPU", None)
            return DeviceInfo("cuda", props.name, props.total_memory)
        if dev.type == "mps":
            return DeviceInfo("mps", "Apple Metal (MPS)", _ram_bytes())
        return cpu
    if (wanted.startswith("cuda") or wanted == "auto") and (smi := _nvidia_smi()):
        return DeviceInfo("cuda", smi[0], smi[1])
    if wanted in ("mps", "auto") and sys.platform == "darwin" and platform.machine() == "arm64":
        return DeviceInfo("mps", "Apple Metal (MPS)", _ram_bytes())
    return cpu


def resolve_device(wanted: str | None = None) -> torch.device:
    """The torch device for a setting value: ``auto`` picks CUDA, then MPS, then CPU.

    Raises:
        InvalidSetting: an explicit device that this machine does not have.
    """
    import torch

    wanted = (wanted or get_settings().device).lower()
    if wanted == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if wanted.startswith("cuda") and not torch.cuda.is_available():
        raise InvalidSetting(f"BFE_DEVICE={wanted} but no CUDA GPU is visible to torch.",
                             "Install a CUDA build of torch (docs/setup.md, \"Running on a GPU\") or set BFE_DEVICE=auto.")
    if wanted == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InvalidSetting("BFE_DEVICE=mps but Apple MPS is not available.", "Set BFE_DEVICE=auto.")
    return torch.device(wanted)


def inference_dtype(device: torch.device) -> torch.dtype:
    """float32 on a CPU; on a GPU half precision: bf16 where supported, else fp16."""
    import torch

    if device.type == "cuda":
        try:
            return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        except (RuntimeError, AssertionError):  # no GPU attached to this process yet (ZeroGPU: its cards all have bf16)
            return torch.bfloat16
    if device.type == "mps":
        return torch.float16
    return torch.float32
