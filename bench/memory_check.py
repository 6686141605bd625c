"""Check the memory calculator against reality.

    python bench/memory_check.py

1. CPU: build a bert-base-sized model (BertForPreTraining, random weights), run one fp32 AdamW step,
   and count the bytes held by parameters, gradients and optimizer state: the prediction must be exact.
2. GPU (when CUDA is there): one mixed-precision (bf16 autocast) AdamW step at batch 8 × 128 tokens,
   torch.cuda.max_memory_allocated against the predicted total (target: within 15%).
3. The slides' "max batch size" table (TF, fp32, 12 GB GPU) next to our prediction for the same setup.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import reference
from analysis.memory import GiB, TrainingSetup, custom_gpu, max_batch_size, model_state_bytes, training_memory
from analysis.params import parameter_breakdown
from core import registry

#: slides 002, "FP32 TF 1.11.0 12GB GPU" (from the BERT GitHub README), in data/reference/max_batch.csv
SLIDES_MAX_BATCH: dict[str, dict[int, int]] = {}
for _row in reference.max_batch():
    if _row["catalog_id"].startswith("bert"):
        SLIDES_MAX_BATCH.setdefault(_row["catalog_id"], {})[_row["seq_len"]] = _row["max_batch"]


def cpu_check() -> bool:
    from models.measure import adamw_step_bytes

    config = registry.get("bert-base-uncased").config
    t0 = time.perf_counter()
    measured = adamw_step_bytes(config, "pretraining", batch=2, seq=32)
    predicted = model_state_bytes(parameter_breakdown(config, "pretraining"), TrainingSetup(precision="fp32")).components
    print(f"CPU fp32 AdamW step, bert-base (BertForPreTraining, {measured['parameters']:,} parameters, "
          f"{measured['tensors']} tensors), {time.perf_counter() - t0:.1f} s")
    ok = True
    for key, value in predicted.items():
        same = measured[key] == value
        ok &= same
        print(f"  {key:26s} measured {measured[key]:>13,} B   predicted {value:>13,} B   {'exact' if same else 'DIFFERENT'}")
    return ok


def gpu_check() -> None:
    import torch

    if not torch.cuda.is_available():
        print("GPU check: no CUDA device here (skipped; run this script where a GPU is lent).")
        return
    from models.measure import cuda_peak_training_step

    config = registry.get("bert-base-uncased").config
    bd = parameter_breakdown(config, "masked-lm")
    measured = cuda_peak_training_step(config, "masked-lm", 8, 128)
    # torch.autocast keeps fp32 weights and casts on the fly: weights/grads are fp32, plus 16-bit copies in flight.
    predicted_amp = training_memory(bd, 8, 128, TrainingSetup(precision="fp32")).total
    predicted_mixed = training_memory(bd, 8, 128, TrainingSetup(precision="mixed")).total
    print(f"GPU {torch.cuda.get_device_name()}: bf16 autocast AdamW step, bert-base MLM, batch 8 × 128")
    print(f"  max_memory_allocated {measured['peak'] / GiB:.3f} GiB")
    print(f"  predicted (fp32 states + 16-bit activations, as autocast runs) {predicted_amp / GiB:.3f} GiB"
          f"  ratio {measured['peak'] / predicted_amp:.2f}")
    print(f"  predicted (ZeRO-style mixed: 16-bit weights, fp32 master) {predicted_mixed / GiB:.3f} GiB")


def slides_table() -> None:
    print("\nMax batch on a 12 GB GPU, fp32 Adam (slides: TF 1.11 / BERT README; ours: 1 GiB reserve, Korthikanti activations ×2 for fp32)")
    print(f"  {'model':20s} {'seq':>4s} {'slides':>6s} {'ours':>5s}")
    for mid, rows in SLIDES_MAX_BATCH.items():
        bd = parameter_breakdown(registry.get(mid).config, "pretraining")
        for seq, slide in rows.items():
            ours = max_batch_size(bd, custom_gpu(12), seq, TrainingSetup(precision="fp32")).max_batch
            print(f"  {mid:20s} {seq:>4d} {slide:>6d} {ours:>5d}")


if __name__ == "__main__":
    exact = cpu_check()
    gpu_check()
    slides_table()
    sys.exit(0 if exact else 1)
