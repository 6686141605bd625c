"""Views of the labs' runs that the pages draw: progress and queue places, curves, the scaling data set a sweep
makes, this server's training pace, Peters et al.'s frozen-vs-fine-tuned table, and a run's measures over its
training. Frames in, frames out; no drawing here."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from analysis.run_status import ACTIVE, RunStatus
from core.errors import ExplorerError
from models.pretrain.config import TrainConfig
from services.lab.presets import PRESETS
from services.lab.run_queue import FINETUNE, LabRun
from services.lab.sizing import size

#: Config keys that do not make two fine-tuning runs different treatments: the seed is the replicate, the rest names it.
_NOT_A_SETTING = ("seed", "run", "kind")


def _settings(config: dict[str, Any], without: tuple[str, ...] = ()) -> str:
    """A fine-tuning run's treatment as a short, stable text: every config value but the seed and the names (and
    ``without``); the layer read out only where it is read (frozen mode)."""
    skip = set(_NOT_A_SETTING) | set(without) | ({"layer"} if config.get("mode") != "frozen" else set())
    short = {"max_train": "train", "max_test": "test", "max_len": "length", "lr": "lr"}
    return " · ".join(f"{short.get(k, k)} {'auto' if v is None else v}" for k, v in sorted(config.items())
                      if k not in skip and k not in ("model", "task", "mode"))


def finetune_table(frame: Any) -> Any:
    """Finished fine-tuning runs in the shape of Peters et al.'s table, comparing like with like: one row per
    experiment × model × mode × task × the rest of the config (epochs, rate, sizes, layer), so that only the seeds of
    one treatment are averaged; per row the mean accuracy over seeds, its spread, the seeds, and Student's t interval
    for the mean (one seed: its bootstrap interval over test items, said so)."""
    import pandas as pd
    from scipy import stats as scipy_stats

    from analysis.stats import seed_summary

    done = frame[(frame["objective"] == FINETUNE) & (frame["status"] == RunStatus.FINISHED)]
    rows = []
    for r in done.itertuples():
        ev, cfg = r.evaluation or {}, dict(r.config or {})
        rows.append({"experiment": r.group or "", "model": cfg.get("model"), "mode": cfg.get("mode"),
                     "task": ev.get("task") or cfg.get("task"), "settings": _settings(cfg),
                     "pair": _settings(cfg, ("mode", "layer")), "layer": cfg.get("layer") if cfg.get("mode") == "frozen" else "",
                     "accuracy": ev.get("accuracy"), "interval": ev.get("accuracy_interval"), "macro_f1": ev.get("macro_f1"),
                     "majority": ev.get("majority_baseline")})
    cols = ["experiment", "model", "mode", "task", "settings", "accuracy (mean)", "spread (sd)", "seeds",
            "95% interval (mean over seeds)", "macro-F1", "majority baseline"]
    if not rows:
        return pd.DataFrame(columns=cols)
    long = pd.DataFrame(rows)
    out = []
    for (experiment, model, mode, task, settings), g in long.groupby(["experiment", "model", "mode", "task", "settings"], sort=False):
        seeds = seed_summary(g["accuracy"].astype(float).tolist())
        if seeds["n"] >= 2:
            half = float(scipy_stats.t.ppf(0.975, seeds["n"] - 1)) * seeds["std"] / seeds["n"] ** 0.5
            interval = f"[{seeds['mean'] - half:.3f}, {seeds['mean'] + half:.3f}] (t, {seeds['n']} seeds)"
        else:
            lo_hi = g["interval"].iloc[0] or [float("nan")] * 2
            interval = f"[{lo_hi[0]:.3f}, {lo_hi[1]:.3f}] (1 seed: over test items)"
        out.append({"experiment": experiment, "model": model, "mode": mode, "task": task, "settings": settings,
                    "accuracy (mean)": seeds["mean"], "spread (sd)": seeds["std"], "seeds": seeds["n"],
                    "95% interval (mean over seeds)": interval, "macro-F1": float(g["macro_f1"].astype(float).mean()),
                    "majority baseline": float(g["majority"].astype(float).mean()),
                    "_pair": g["pair"].iloc[0], "_layer": g["layer"].iloc[0]})
    table = pd.DataFrame(out)
    shown = table[cols].copy()
    shown.attrs["pairs"] = table[["experiment", "model", "task", "_pair", "mode", "_layer", "accuracy (mean)"]].to_dict("records")
    return shown


def finetune_delta(table: Any) -> Any:
    """Δ = fine-tuned − frozen (mean accuracy) between rows of :func:`finetune_table` that differ in mode alone
    (the same experiment, model, task, epochs, rate and sizes; a frozen row per layer read out)."""
    import pandas as pd

    cols = ["experiment", "model", "task", "frozen layer", "frozen", "fine-tuned", "Δ (fine-tuned − frozen)"]
    pairs = table.attrs.get("pairs") or []
    out = []
    for f in (p for p in pairs if p["mode"] == "frozen"):
        for t in (p for p in pairs if p["mode"] == "finetune"):
            if all(f[k] == t[k] for k in ("experiment", "model", "task", "_pair")):
                out.append({"experiment": f["experiment"], "model": f["model"], "task": f["task"], "frozen layer": f["_layer"],
                            "frozen": f["accuracy (mean)"], "fine-tuned": t["accuracy (mean)"],
                            "Δ (fine-tuned − frozen)": t["accuracy (mean)"] - f["accuracy (mean)"]})
    return pd.DataFrame(out, columns=cols)



def progress_of(run: dict[str, Any], now: dt.datetime | None = None) -> dict[str, Any]:
    """Step, share done, and seconds left (from the pace so far) of a run row from :mod:`analysis.results_db.runs`."""
    stored = run["config"].get("steps")
    steps = int(stored) if stored is not None else 1
    step = run["curve"][-1][0] if run["curve"] else 0
    if not steps:  # a shipped checkpoint evaluated as it is (models.pretrain.shipped): done when the run ends
        return {"step": 0, "steps": 0, "done": 1.0 if run["status"] == RunStatus.FINISHED else 0.0, "seconds_left": None}
    done = step / steps
    left = None
    if run["status"] == RunStatus.RUNNING and step and run["seconds"]:
        left = run["seconds"] / step * (steps - step)
    return {"step": step, "steps": steps, "done": min(1.0, done), "seconds_left": left}


def waiting_runs(frame: Any) -> set[int]:
    """Ids of the queued runs of a :func:`runs.list_runs` frame that wait for others to end: those whose config's
    ``after`` names a run of the frame still queued or running (a tuned preset's verdict run waits for its sweep, as
    :func:`analysis.results_db.runs.claim_next` does)."""
    live = frame[frame["status"].isin(list(ACTIVE))]
    active = set(zip(live["group"], live["name"], strict=True))
    return {int(rid) for rid, group, status, config in zip(frame["id"], frame["group"], frame["status"], frame["config"], strict=True)
            if status == RunStatus.QUEUED and any((group, str(n)) in active for n in ((config or {}).get("after") or []))}


def queue_positions(frame: Any) -> dict[int, int]:
    """run id -> place in the queue (1 = next), for the queued runs of a :func:`runs.list_runs` frame: oldest first,
    the order one slot claims them in. A run that waits for others (:func:`waiting_runs`) waits for runs queued
    before it (a tuned verdict run for its sweep), so its place holds; with several slots a later run may start
    meanwhile."""
    queued = frame[frame["status"] == RunStatus.QUEUED].sort_values("id")
    return {int(rid): i + 1 for i, rid in enumerate(queued["id"])}


def curves_frame(frame: Any) -> Any:
    """Long table (run, group, objective, step, loss) of the runs' curves, for one chart."""
    import pandas as pd

    rows = [{"run": r.name, "group": r.group, "objective": r.objective, "step": step, "loss": loss}
            for r in frame.itertuples() for step, loss in r.curve]
    return pd.DataFrame(rows, columns=["run", "group", "objective", "step", "loss"])


def scaling_table(frame: Any) -> Any:
    """Finished runs as a scaling-law data set: non-embedding parameters N, tokens D, compute C = 6·N·D, held-out
    loss, and the training FLOPs the lab counted. Feeds the scaling-laws page (fit α with its error bar)."""
    import pandas as pd

    rows = []
    for r in frame[frame["status"] == RunStatus.FINISHED].itertuples():
        cfg = TrainConfig.from_stored(r.config)
        loss = (r.evaluation or {}).get("held_out_loss")
        if loss is None or not r.tokens:
            continue
        cost = size(cfg)
        rows.append({"run": r.name, "objective": r.objective, "hidden": cfg.hidden, "N (non-embedding)": cost.non_embedding,
                     "parameters": cost.parameters, "D (tokens)": int(r.tokens), "C = 6ND": 6.0 * cost.non_embedding * r.tokens,
                     "training FLOPs": cost.flops_per_token * r.tokens, "held-out loss": float(loss),
                     "source": f"Trained on this server: BERT Family Explorer pre-training lab, experiment {r.group or r.name}"})
    return pd.DataFrame(rows, columns=["run", "objective", "hidden", "N (non-embedding)", "parameters", "D (tokens)", "C = 6ND",
                                       "training FLOPs", "held-out loss", "source"])


def flops_per_second(frame: Any) -> float | None:
    """Training FLOP/s of the newest finished run of a :func:`runs.list_runs` frame (this server's pace), or None."""
    for r in frame[frame["status"] == RunStatus.FINISHED].sort_values("id", ascending=False).itertuples():
        if r.seconds and r.tokens:
            try:
                return size(TrainConfig.from_stored(r.config)).flops_per_token * r.tokens / r.seconds
            except ExplorerError:
                continue
    return None



def over_training(checkpoint: str, evaluation: dict[str, Any] | None) -> Any:
    """A lab run's word measures at each step it kept, its last included (from its end-of-run evaluation): a frame
    with ``step``, ``POS probe`` and, for a masked-LM objective, one column per fill-mask probe holding its top 5.
    Empty for a run that kept no steps (trained before the lab kept them)."""
    import pandas as pd

    from models.locate import run_steps

    evaluation = evaluation or {}
    rows = [r for r in evaluation.get("over_training") or [] if isinstance(r, dict) and isinstance(r.get("step"), int)]
    steps = run_steps(checkpoint) if checkpoint.startswith("trained/") else []
    if not rows or not steps:
        return pd.DataFrame(columns=["step", "POS probe"])
    rows = [*rows, {"step": steps[-1], "pos_probe_accuracy": evaluation.get("pos_probe_accuracy"),
                    "probes": evaluation.get("probes") or []}]
    table = []
    for kept in sorted(rows, key=lambda r: r["step"]):
        row = {"step": kept["step"], "POS probe": kept.get("pos_probe_accuracy")}
        for probe in kept.get("probes") or []:
            row[probe["probe"]] = ", ".join(probe["top"])
        table.append(row)
    return pd.DataFrame(table)



def server_pace(engine: Any = None) -> float | None:
    """This server's training FLOP/s in its newest finished pre-training run (:func:`flops_per_second`), or None."""
    from analysis.results_db import runs

    frame = runs.list_runs(engine)
    return flops_per_second(frame[frame["objective"] != FINETUNE])


@dataclass(frozen=True)
class ScalingRuns:
    """An experiment's finished runs as the points of a scaling chart."""

    table: Any  # :func:`scaling_table`'s frame, one row per run
    budgets: list[str] | None  # per row, the IsoFLOP compute budget its run spends ("c0.5": half the base run's); None: one budget


def scaling_runs(frame: Any) -> ScalingRuns | None:
    """The runs of a preset that charts sizes (scaling, IsoFLOP: :attr:`Preset.charts_sizes`) in ``frame`` as chart
    points, or None where the frame holds no such preset or fewer than two finished points (no line to draw). A run's
    compute budget is the part of its arm its preset names one (:attr:`Preset.arm_budget`)."""
    table = scaling_table(frame)
    placed = {r.name: LabRun.from_stored(r.config or {}) for r in frame.itertuples()}
    presets = {name: PRESETS.get(lab.preset) for name, lab in placed.items()}
    if not any(p is not None and p.charts_sizes for p in presets.values()) or len(table) < 2:
        return None

    def budget(name: str) -> str | None:
        p = presets.get(name)
        return p.arm_budget(placed[name].arm) if p is not None and p.arm_budget else None

    budgets = [budget(name) for name in table["run"]]
    return ScalingRuns(table, budgets if any(budgets) else None)


# ------------------------------------------------------------------------------------ reads the pages and the API share

def runs_table(group: str | None = None) -> Any:
    """Every run (or one experiment's), newest first, as a table (config, curve and evaluation as Python objects)."""
    from analysis.results_db import runs

    return runs.list_runs(group=group)


def runs_csv() -> bytes:
    """One row per run (config and evaluation flattened), formula-safe, for a spreadsheet."""
    from analysis.results_db import runs

    return runs.runs_csv()


def peters_published() -> Any:
    """Peters, Ruder & Smith 2019's published rows (fine-tuned against frozen), with their tables, for comparison."""
    from analysis.results_db import results_frame

    return results_frame(sources=["peters2019"])[["model", "variant", "task", "value", "table", "note"]]


#: The most runs one API answer lists.
MAX_LISTED = 5_000


def finished_runs(kind: str = "all", group: str = "", limit: int = MAX_LISTED) -> dict[str, Any]:
    """The labs' finished runs (read-only), the fine-tuning table (model × mode × task, mean accuracy over seeds) and
    fine-tuned − frozen per model and task; ``kind`` all, pretrain or finetune; ``group`` one experiment (empty: all)."""
    from services import requests as req

    kind = req.choice("kind", kind, ("all", "pretrain", "finetune"))
    frame = runs_table(req.text("group", group, 100, empty_ok=True) or None)
    frame = frame[frame["status"] == RunStatus.FINISHED]
    if kind != "all":
        frame = frame[(frame["objective"] == FINETUNE) == (kind == "finetune")]
    rows = [{"id": r["id"], "name": r["name"], "objective": r["objective"], "group": r["group"], "seconds": r["seconds"],
             "tokens": r["tokens"], "parameters": r["parameters"], "final_loss": r["curve"][-1][1] if r["curve"] else None,
             "evaluation": r["evaluation"], "config": r["config"], "finished_at": r["finished_at"]}
            for r in frame.head(limit).to_dict("records")]
    table = finetune_table(frame)
    return {"runs": rows, "finetune_table": table, "finetune_delta": finetune_delta(table), "count": len(frame),
            "truncated": len(frame) > limit}
