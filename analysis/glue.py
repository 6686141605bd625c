"""GLUE-style comparisons over the results database's data frames (pandas only; no SQL, no torch, no streamlit).

- :data:`CONVENTIONS`: how each paper aggregates: the official GLUE score (nine task scores,
  a two-metric task's metrics averaged first, MNLI matched/mismatched averaged, WNLI included; the
  same formula is DistilBERT's "macro-score"), BERT's Table 1 "Average" (WNLI excluded, MNLI-m and
  MNLI-mm counted separately, F1 for QQP/MRPC and Spearman for STS-B), ALBERT's "Avg" (SQuAD
  F1/EM averaged first, then the mean with MNLI, SST-2 and RACE).
- :func:`score_check`: every reported aggregate next to the one recomputed from the same table's
  cells, with a status: match, within rounding, differs, or cannot recompute (and what is missing).
- :func:`compare`: a model × (task, metric) table with the best value per column and each cell's source.
- the table for the page and for slides (HTML, Markdown, LaTeX, text escaped): :mod:`analysis.glue_plots`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

# A component is a list of alternatives; an alternative is the (task, metric) cells to average.
Alternative = tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Convention:
    """How one paper turns per-task numbers into its aggregate."""

    key: str
    label: str
    description: str
    components: tuple[tuple[str, tuple[Alternative, ...]], ...]


def _task(name: str, *metric_sets: Sequence[str]) -> tuple[str, tuple[Alternative, ...]]:
    return name, tuple(tuple((name, m) for m in ms) for ms in metric_sets)


_OFFICIAL = (
    _task("CoLA", ["mcc"]), _task("SST-2", ["acc"]), _task("MRPC", ["score"], ["acc", "f1"]),
    _task("STS-B", ["score"], ["pearson", "spearman"]), _task("QQP", ["score"], ["acc", "f1"]),
    _task("MNLI", ["score"], ["acc_m", "acc_mm"]), _task("QNLI", ["acc"]), _task("RTE", ["acc"]), _task("WNLI", ["acc"]),
)
CONVENTIONS: dict[str, Convention] = {
    "glue": Convention("glue", "GLUE score (official)",
                       "mean of the nine task scores; a task with two metrics (MRPC, QQP: acc/F1; STS-B: Pearson/Spearman; "
                       "MNLI: matched/mismatched) counts as their mean; WNLI included", _OFFICIAL),
    "glue_no_wnli": Convention("glue_no_wnli", "GLUE score without WNLI", "the official formula over eight tasks (WNLI left out)",
                               _OFFICIAL[:-1]),
    "bert": Convention("bert", "BERT's Average (Table 1)",
                       "mean of nine numbers: MNLI-m and MNLI-mm separately, QQP F1, QNLI, SST-2, CoLA, STS-B Spearman, MRPC F1, "
                       "RTE; WNLI excluded", (
                           ("MNLI-m", ((("MNLI", "acc_m"),),)), ("MNLI-mm", ((("MNLI", "acc_mm"),),)), _task("QQP", ["f1"]),
                           _task("QNLI", ["acc"]), _task("SST-2", ["acc"]), _task("CoLA", ["mcc"]), _task("STS-B", ["spearman"]),
                           _task("MRPC", ["f1"]), _task("RTE", ["acc"]))),
    "albert": Convention("albert", "ALBERT's Avg", "mean of SQuAD 1.1 and SQuAD 2.0 (F1 and EM averaged first), MNLI, SST-2 and RACE", (
        _task("SQuAD 1.1", ["f1", "em"]), _task("SQuAD 2.0", ["f1", "em"]), _task("MNLI", ["acc_m"]), _task("SST-2", ["acc"]),
        _task("RACE", ["acc"]))),
}
# Which convention a reported aggregate (task, metric) follows.
AGGREGATES: dict[tuple[str, str], str] = {("GLUE", "score"): "glue", ("GLUE", "macro"): "glue", ("GLUE", "average"): "bert",
                                          ("ALBERT-avg", "avg"): "albert"}
ENTRY = ["model", "variant", "setting", "split", "source", "table"]
# A model's own paper: preferred when several sources report the same cell.
HOME = {"BERT": "devlin2019", "RoBERTa": "liu2019", "XLNet": "yang2019", "ALBERT": "lan2020", "DistilBERT": "sanh2019",
        "ERNIE": "sun2020", "Megatron": "shoeybi2019", "GPT": "radford2018"}
SHORT = {"acc_m": "m", "acc_mm": "mm", "acc": "acc", "f1": "F1", "em": "EM", "pearson": "Pearson", "spearman": "Spearman",
         "mcc": "MCC", "score": "score", "acc_middle": "middle", "acc_high": "high", "ppl": "ppl", "unspecified": "",
         "average": "Average", "macro": "macro", "avg": "Avg"}


def recompute(cells: dict[tuple[str, str], float], convention: str) -> tuple[float | None, list[str]]:
    """The aggregate under ``convention`` from {(task, metric): value}; (None, missing parts) when incomplete."""
    conv = CONVENTIONS[convention]
    parts, missing = [], []
    for name, alternatives in conv.components:
        for alt in alternatives:
            if all(c in cells for c in alt):
                parts.append(sum(cells[c] for c in alt) / len(alt))
                break
        else:
            want = " + ".join(f"{t} {SHORT.get(m, m)}".strip() for t, m in alternatives[-1] if (t, m) not in cells)
            missing.append(want or name)
    if missing:
        return None, missing
    return sum(parts) / len(parts), []


def _decimals(value: float) -> int:
    text = repr(float(value))
    return 0 if "e" in text else len(text.split(".")[1].rstrip("0")) or 1


def status(reported: float, recomputed: float | None) -> str:
    """'match' (rounds to the reported value), 'within rounding' (off by at most one unit of the last digit,
    which rounded inputs allow), 'differs', or 'cannot recompute'."""
    if recomputed is None:
        return "cannot recompute"
    d = _decimals(reported)
    if abs(round(recomputed, d) - reported) < 10 ** -(d + 3):
        return "match"
    if abs(recomputed - reported) <= 10**-d + 1e-9:
        return "within rounding"
    return "differs"


def score_check(df: pd.DataFrame) -> pd.DataFrame:
    """Each reported aggregate in ``df`` (a :func:`analysis.results_db.results_frame`) beside its recomputation.

    The recomputation uses only cells of the same entry (model, variant, setting, split, source,
    table). Columns: model, variant, setting, split, citation, table, aggregate, convention,
    reported, recomputed, difference, status, missing, glue_official, glue_without_wnli.
    """
    cols = ["model", "variant", "setting", "split", "citation", "table", "aggregate", "reported", "recomputed", "difference",
            "status", "missing", "convention", "glue_official", "glue_without_wnli"]
    rows = []
    if df.empty:
        return pd.DataFrame(columns=cols)
    for key, group in df.groupby(ENTRY, sort=False, dropna=False):
        cells = {(t, m): float(v) for t, m, v in zip(group["task"], group["metric"], group["value"], strict=True)}
        glue, _ = recompute(cells, "glue")
        no_wnli, _ = recompute(cells, "glue_no_wnli")
        for (task, metric), conv in AGGREGATES.items():
            if (task, metric) not in cells:
                continue
            reported = cells[(task, metric)]
            value, missing = recompute(cells, conv)
            entry = dict(zip(ENTRY, key, strict=True))
            rows.append(dict(model=entry["model"], variant=entry["variant"], setting=entry["setting"], split=entry["split"],
                             citation=group["citation"].iloc[0], table=entry["table"], aggregate=f"{task} {SHORT.get(metric, metric)}",
                             convention=CONVENTIONS[conv].label, reported=reported, recomputed=value,
                             difference=None if value is None else value - reported, status=status(reported, value),
                             missing=", ".join(missing), glue_official=glue, glue_without_wnli=no_wnli))
    return pd.DataFrame(rows, columns=cols)


# ------------------------------------------------------------------------------------- comparison
def row_label(model: str, variant: str, setting: str) -> str:
    return f"{model}{f' [{variant}]' if variant else ''}{' (ensemble)' if setting == 'ensemble' else ''}"


# Tasks with several metrics: their columns always name the metric.
MULTI_METRIC = {"MNLI", "MRPC", "QQP", "STS-B", "SQuAD 1.1", "SQuAD 2.0", "RACE", "LAMBADA", "MLM", "The Pile", "ClueWeb09-B", "GLUE"}


def column_label(task: str, metric: str, metrics_of_task: int = 1) -> str:
    """'MNLI m', 'QQP acc', 'SST-2': the metric is named when the task has several (or this table shows several)."""
    if metrics_of_task == 1 and task not in MULTI_METRIC and metric not in ("ppl", "cpu_time_s", "speedup", "bpb"):
        return task
    return f"{task} {SHORT.get(metric, metric)}".strip()


@dataclass
class Comparison:
    """A comparison table: ``values`` (rows × columns, NaN where not reported), each cell's ``sources``
    text, the ``best`` cells per column, and per-row ``rows`` facts (model, family, parameters)."""

    values: pd.DataFrame
    sources: pd.DataFrame
    best: pd.DataFrame
    higher_is_better: dict[str, bool]
    rows: pd.DataFrame
    columns: dict[str, tuple[str, str]]

    @property
    def empty(self) -> bool:
        return self.values.empty


def _cell_source(r: pd.Series) -> str:
    bits = [f"{r['citation']}, {r['table']}".strip(", "), r["split"]]
    if hasattr(r["snapshot"], "isoformat") or (isinstance(r["snapshot"], str) and r["snapshot"]):
        bits.append(f"leaderboard {r['snapshot']}")
    if isinstance(r["arxiv"], str) and r["arxiv"]:
        bits.append(f"arXiv {r['arxiv']}")
    text = " · ".join(str(b) for b in bits if b)
    if r["origin"] == "user":
        text += " · added by a user"
    return text + (f" — {r['note']}" if isinstance(r["note"], str) and r["note"] else "")


def compare(df: pd.DataFrame, collapse: bool = True, order: Sequence[tuple[str, str]] | None = None) -> Comparison:
    """Pivot results into a comparison table.

    ``collapse=True``: one row per model (and variant, and single/ensemble); when several sources
    report the same cell, the model's own paper wins, then the newest source. ``collapse=False``:
    one row per model and source table. Columns are (task, metric) in ``order`` (default: grouped by
    task, in the order first seen).
    """
    if df.empty:
        empty = pd.DataFrame()
        return Comparison(empty, empty, empty, {}, pd.DataFrame(columns=["model", "family", "parameters"]), {})
    d = df.copy()
    d["row"] = [row_label(m, v, s) for m, v, s in zip(d["model"], d["variant"], d["setting"], strict=True)]
    if not collapse:
        d["row"] = d["row"] + " — " + d["citation"] + ", " + d["table"] + " (" + d["split"] + ")"
    d["home"] = [HOME.get(f) == s for f, s in zip(d["family"], d["source"], strict=True)]
    d = d.sort_values(["home", "year", "id"], ascending=[False, False, True], kind="stable")
    d = d.drop_duplicates(["row", "task", "metric"], keep="first")
    n_metrics = d.groupby("task")["metric"].nunique().to_dict()
    col_order = _ordered_columns(df)
    if order is not None:
        rank = {tm: i for i, tm in enumerate(order)}
        col_order = sorted(col_order, key=lambda tm: rank.get(tm, len(rank)))
    columns = {column_label(t, m, n_metrics.get(t, 1)): (t, m) for t, m in col_order if (t, m) in set(zip(d["task"], d["metric"], strict=True))}
    by_cell = {(t, m): lbl for lbl, (t, m) in columns.items()}
    d["col"] = [by_cell[(t, m)] for t, m in zip(d["task"], d["metric"], strict=True)]
    d["src"] = d.apply(_cell_source, axis=1)
    row_order = list(dict.fromkeys(d.sort_values("id")["row"]))
    values = d.pivot(index="row", columns="col", values="value").reindex(index=row_order, columns=list(columns))
    sources = d.pivot(index="row", columns="col", values="src").reindex(index=row_order, columns=list(columns))
    hib = {c: bool(d.loc[d["col"] == c, "higher_is_better"].iloc[0]) for c in columns}
    best = pd.DataFrame(False, index=values.index, columns=values.columns)
    for c in values.columns:
        col = values[c]
        if col.notna().sum() >= 2:
            target = col.max() if hib[c] else col.min()
            best[c] = (col - target).abs() < 1e-9
    rows = d.drop_duplicates("row").set_index("row").reindex(row_order)[["model", "family", "parameters"]]
    return Comparison(values, sources, best, hib, rows, columns)


def deltas(comp: Comparison, baseline: str) -> pd.DataFrame:
    """Each row minus the ``baseline`` row, column by column (positive = higher than the baseline)."""
    if baseline not in comp.values.index:
        raise KeyError(baseline)
    return comp.values.sub(comp.values.loc[baseline], axis=1)


def fmt(v: float) -> str:
    """A reported value with its own decimals, at least one ('88.0', '84.65', '0.9281'); '–' for missing."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    return f"{v:.{min(4, _decimals(v))}f}"


# Metrics that are not scores: never picked by default, never averaged.
EFFICIENCY = {"cpu_time_s", "speedup", "ppl", "bpb"}


def default_columns(df: pd.DataFrame) -> list[tuple[str, str]]:
    """A sensible (task, metric) set for ``df``: per task the most reported metric (both for MNLI m/mm),
    leaving out task scores when a real metric is there and efficiency figures."""
    out = []
    for task, group in df.groupby("task", sort=False):
        counts = group.loc[~group["metric"].isin(EFFICIENCY), "metric"].value_counts()
        if counts.empty:
            continue
        if task == "MNLI" and {"acc_m", "acc_mm"} & set(counts.index):
            out += [(task, m) for m in ("acc_m", "acc_mm") if m in counts.index]
            continue
        real = counts.drop([m for m in ("score", "unspecified") if m in counts.index and len(counts) > 1])
        out.append((task, str(real.index[0])))
    return out


def column_options(df: pd.DataFrame) -> dict[str, tuple[str, str]]:
    """Every (task, metric) in ``df`` under its display label."""
    n = df.groupby("task")["metric"].nunique().to_dict()
    return {column_label(t, m, n.get(t, 1)): (t, m) for t, m in _ordered_columns(df)}


def _ordered_columns(df: pd.DataFrame) -> list[tuple[str, str]]:
    """(task, metric) pairs grouped by task (in order of first appearance), metrics in their first-seen order."""
    pairs = list(dict.fromkeys(zip(df["task"], df["metric"], strict=True)))
    task_rank = {t: i for i, t in enumerate(dict.fromkeys(t for t, _ in pairs))}
    return sorted(pairs, key=lambda p: (task_rank[p[0]], pairs.index(p)))


def size_points(comp: Comparison, column: str) -> pd.DataFrame:
    """Rows of ``comp`` that have both a parameter count and a value in ``column``: label, family, parameters, value, source."""
    if column not in comp.values.columns:
        return pd.DataFrame(columns=["label", "family", "parameters", "value", "source"])
    out = pd.DataFrame({"label": comp.values.index, "family": comp.rows["family"].to_numpy(),
                        "parameters": pd.to_numeric(comp.rows["parameters"], errors="coerce").to_numpy(),
                        "value": comp.values[column].to_numpy(), "source": comp.sources[column].to_numpy()})
    return out.dropna(subset=["parameters", "value"]).sort_values("parameters").reset_index(drop=True)
