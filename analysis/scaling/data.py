"""The data a fit runs on: the built-in tables from the papers (``data/scaling/*.csv``, a source on every row, and
the catalog's model sizes by year), and a user's CSV read within bounds."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from core.errors import InvalidData

DATA_DIR = Path(__file__).resolve().parents[2] / "data" / "scaling"


@dataclass(frozen=True)
class Dataset:
    key: str
    title: str
    x: str  # default x column
    y: str  # default y column
    law: str  # default law
    description: str


DATASETS: dict[str, Dataset] = {d.key: d for d in (
    Dataset("bert_size_ablation", "BERT model-size ablation (Table 6)", "parameters", "lm_ppl", "power",
            "Masked-LM perplexity and dev accuracy as BERT grows from 3 to 24 layers. Parameters are computed exactly "
            "(analysis.params) for a BERT with V = 30,522 and FFN = 4H; the paper's table lists only L, H, A."),
    Dataset("roberta_batch_size", "RoBERTa batch size (Table 3)", "batch_size", "ppl", "power",
            "Same compute, bigger batches: perplexity and accuracy by batch size."),
    Dataset("megatron_bert_results", "Megatron-BERT sizes and results (Table 5)", "parameters", "race", "power",
            "Dev-set accuracy/F1 of 336M, 1.3B and 3.9B BERT-style models (RACE: test)."),
    Dataset("megatron_sizes", "Megatron-LM scaling-study configurations (Table 1)", "parameters", "model_parallel_gpus", "power",
            "Hidden size, heads, layers, parameters and GPUs of the GPT-2-style weak-scaling runs."),
    Dataset("albert_configs", "BERT vs ALBERT configurations and averages (Tables 1-2)", "parameters", "avg", "power",
            "Parameters against the average of SQuAD 1.1/2.0, MNLI, SST-2 and RACE dev scores."),
    Dataset("albert_embedding_size", "ALBERT embedding size E (Table 3)", "parameters", "avg", "power",
            "ALBERT-base with E = 64 … 768, with and without cross-layer sharing."),
    Dataset("params_by_year", "Model sizes by year (the catalog)", "year", "parameters", "power",
            "Every model in the catalog: exact counts for downloadable checkpoints, else the paper's figure."),
)}


def load_dataset(key: str):
    """A built-in data set as a pandas DataFrame, with a ``source`` column on every row."""
    import pandas as pd

    if key not in DATASETS:
        raise InvalidData(f"Unknown data set {key!r}.", "Data sets: " + ", ".join(DATASETS) + ".")
    if key == "params_by_year":
        from core import registry

        return pd.DataFrame([{"model": c.id, "year": c.year, "parameters": c.parameters, "objective": c.objective,
                              "source": f"{c.paper} (arXiv {c.arxiv})" if c.arxiv else c.paper,
                              "note": "exact count of the transformers base model" if c.loadable else f"paper: {c.parameters_reported}"}
                             for c in registry.all_models()])
    df = pd.read_csv(DATA_DIR / f"{key}.csv")
    if key == "bert_size_ablation":
        from analysis.params import parameter_breakdown

        rows = [parameter_breakdown({"model_type": "bert", "hidden_size": int(r.hidden), "num_hidden_layers": int(r.layers),
                                     "num_attention_heads": int(r.heads), "intermediate_size": 4 * int(r.hidden)})
                for r in df.itertuples()]
        df.insert(3, "parameters", [b.total for b in rows])
        df.insert(4, "non_embedding_parameters", [b.non_embedding for b in rows])
    return df


MAX_CSV_BYTES = 5 * 2**20
MAX_CSV_ROWS = 10_000


def read_csv(raw: bytes):
    """A user's CSV as a DataFrame, within :data:`MAX_CSV_BYTES` and :data:`MAX_CSV_ROWS`. Raises :class:`InvalidData`."""
    import io

    import pandas as pd

    if len(raw) > MAX_CSV_BYTES:
        raise InvalidData(f"The file is {len(raw) / 2**20:.1f} MB; the limit is {MAX_CSV_BYTES // 2**20} MB.",
                          "Average or subsample the points first.")
    try:
        df = pd.read_csv(io.BytesIO(raw), nrows=MAX_CSV_ROWS + 1)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as err:
        raise InvalidData(f"This file could not be read as CSV ({type(err).__name__}).",
                          "Save it as comma-separated values with a header row.") from None
    if len(df) > MAX_CSV_ROWS:
        raise InvalidData(f"The file has more than {MAX_CSV_ROWS:,} rows.", "Average or subsample the points first.")
    return df


def numeric_columns(df) -> list[str]:
    """Columns that are numbers on every row (candidates for x and y)."""
    import pandas as pd

    return [c for c in df.columns if c not in ("source", "note") and pd.to_numeric(df[c], errors="coerce").notna().all()]
