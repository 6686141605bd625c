"""Train the DistilBERT preset's shipped teacher and write it under ``data/lab/teachers/<name>/``.

    python bench/ship_teacher.py [--steps 12000]

One masked LM of the lab's default size (2 layers of 128, the shape of the page's form and of every distil budget)
trained for 12,000 steps of 64 sequences of 64 tokens on the WordNet corpus (seed 0), on one thread as the lab's
worker trains: what ``bench/distil_teacher.py`` measured at +0.063 [+0.037, +0.089] over its random initialisation on
the classroom suite (bench/results/distil-teacher-steps.txt), where the teachers the lab trains per seed in a lesson
are at chance. The folder gets the weights (safetensors), the tokenizer, the run's record (``bfe_run.json``: config,
curve, held-out evaluation) and ``provenance.json`` (command, commit, minutes). DistilBERT distils from a teacher
trained before the experiment (bert-base-uncased), as the preset's runs now do wherever this one fits
(:mod:`models.pretrain.shipped`).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ["BFE_MODEL_DIR"] = tempfile.mkdtemp(prefix="bfe-ship-")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=12_000)
    ap.add_argument("--name", default="distil-h128")
    args = ap.parse_args()

    import torch

    from models.pretrain import train
    from models.pretrain.config import TrainConfig, trained_dir
    from models.pretrain.shipped import TEACHER_SETTINGS, TEACHERS_DIR
    from models.training import atomic_save
    from services.lab.run_queue import WORKER_THREADS

    torch.set_num_threads(WORKER_THREADS)
    cfg = replace(TrainConfig(), **{**TEACHER_SETTINGS, "steps": args.steps}, run=f"teacher-{args.name}")
    result = train(cfg, on_progress=lambda s, loss, t: print(f"step {s:6d}  loss {loss:.4f}  {t:7.1f} s", flush=True)
                   if s % 1000 == 0 else None)
    src = trained_dir() / cfg.run_name
    out = TEACHERS_DIR / args.name
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    provenance = {
        "command": f"python bench/ship_teacher.py --steps {args.steps} --name {args.name}", "commit": commit,
        "date": f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC", "threads": WORKER_THREADS,
        "training_minutes": round(result.seconds / 60, 1), "config": asdict(cfg),
        "held_out_loss": result.evaluation.get("held_out_loss"),
        "measured": "bench/results/distil-teacher-steps.txt: +0.063 [+0.037, +0.089] over random init (supersense, 5 seeds)",
    }

    def write(folder: Path) -> None:  # the final weights only, and the provenance, renamed into place whole
        shutil.copytree(src, folder, ignore=shutil.ignore_patterns("steps"), dirs_exist_ok=True)
        (folder / "provenance.json").write_text(json.dumps(provenance, indent=1) + "\n")
        folder.chmod(0o755)  # a temporary folder is the owner's only; what ships is readable by all
        for f in folder.iterdir():
            f.chmod(0o644)

    atomic_save(out, write)  # a kill mid-copy leaves the shipped teacher as it was, never half-written
    print(f"{out}: {sum(f.stat().st_size for f in out.rglob('*') if f.is_file()) / 2**20:.1f} MB, "
          f"{result.seconds / 60:.1f} min of training, held-out loss {result.evaluation.get('held_out_loss')}")
    shutil.rmtree(os.environ["BFE_MODEL_DIR"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
