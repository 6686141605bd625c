"""Reference figures from the slides and papers that are not results tables: each with its source.

The files live in ``data/reference/`` (see its README): ``facts.csv`` (single figures: the 14.90 GiB
per billion parameters, pre-training costs, Megatron's scaling efficiency, ZeRO's claims, LLaMA's
token counts, XLNet's corpus), ``max_batch.csv`` (the BERT and XLNet READMEs' largest batch per
GPU), ``bert_training_times.csv`` (BERT-large on 256 to 1,472 V100s) and ``gpt2_sizes.csv`` (GPT-2's
four sizes). Pages show each figure with its ``source``. No torch, no streamlit.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "reference"


@dataclass(frozen=True)
class Fact:
    """One figure: its value, unit, what it measures and where it comes from (paper, table, slide)."""

    key: str
    value: float
    unit: str
    what: str
    source: str

    def __str__(self) -> str:
        return f"{self.what}: {self.value:g} {self.unit} ({self.source})"


def _read(name: str, required: tuple[str, ...]) -> list[dict[str, str]]:
    with (DATA_DIR / name).open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    for i, row in enumerate(rows, start=2):
        missing = [c for c in required if not (row.get(c) or "").strip()]
        if missing:
            raise ValueError(f"data/reference/{name}, line {i}: no {', '.join(missing)}")
    return rows


@functools.cache
def facts() -> dict[str, Fact]:
    """Every single figure of ``facts.csv`` by key."""
    rows = _read("facts.csv", ("key", "value", "unit", "what", "source"))
    return {r["key"]: Fact(r["key"], float(r["value"]), r["unit"], r["what"], r["source"]) for r in rows}


def fact(key: str) -> Fact:
    """One figure of ``facts.csv``; KeyError names the keys there are."""
    try:
        return facts()[key]
    except KeyError:
        raise KeyError(f"no reference figure {key!r}; there are: {', '.join(facts())}") from None


@functools.cache
def max_batch() -> tuple[dict[str, object], ...]:
    """The READMEs' largest training batch per GPU: catalog id, sequence length, batch, framework, GPU size, source."""
    rows = _read("max_batch.csv", ("catalog_id", "model", "seq_len", "max_batch", "framework", "precision", "gpu_gib", "source"))
    return tuple({**r, "seq_len": int(r["seq_len"]), "max_batch": int(r["max_batch"]), "gpu_gib": float(r["gpu_gib"])} for r in rows)


@functools.cache
def bert_training_times() -> tuple[dict[str, object], ...]:
    """BERT-large pre-training wall-clock on NVIDIA DGX SuperPOD: minutes, nodes, V100 GPUs, source."""
    rows = _read("bert_training_times.csv", ("minutes", "system", "nodes", "v100_gpus", "source"))
    return tuple({**r, "minutes": int(r["minutes"]), "v100_gpus": int(r["v100_gpus"])} for r in rows)


@functools.cache
def gpt2_sizes() -> tuple[dict[str, object], ...]:
    """GPT-2's four sizes (parameters as reported, layers, d_model), with the catalog id where one exists."""
    rows = _read("gpt2_sizes.csv", ("parameters_reported", "parameters", "layers", "d_model", "source"))
    return tuple({**r, "parameters": float(r["parameters"]), "layers": int(r["layers"]), "d_model": int(r["d_model"])} for r in rows)


def pretraining_costs() -> list[dict[str, object]]:
    """The slides' pre-training cost of one run, per model, with the source (a range where the slides give one)."""
    f = facts()
    return [
        {"model": "BERT-base", "cost (USD)": f"{f['bert_base_pretraining_usd'].value:,.0f}", "source": f["bert_base_pretraining_usd"].source},
        {"model": "BERT-large", "cost (USD)": f"{f['bert_large_pretraining_usd'].value:,.0f}", "source": f["bert_large_pretraining_usd"].source},
        {"model": "Grover-Mega (GPT-2 variant)", "cost (USD)": f"{f['grover_mega_pretraining_usd'].value:,.0f}",
         "source": f["grover_mega_pretraining_usd"].source},
        {"model": "XLNet-large", "cost (USD)": f"{f['xlnet_pretraining_usd_low'].value:,.0f}–{f['xlnet_pretraining_usd_high'].value:,.0f} "
         "(the slides: 'unclear')", "source": f["xlnet_pretraining_usd_low"].source},
    ]
