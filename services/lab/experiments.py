"""The lab's presets as the papers decide them: each arm over several seeds, a downstream score for every
pre-trained model (and for the same architecture from random initialisation), and a computed verdict per claim.

- each preset's claims (:mod:`services.lab.presets`, one file per preset): a comparison of two arms on one measure
  (an intrinsic test where the paper used one, e.g. ALBERT's SOP accuracy; the downstream suite otherwise), a ratio,
  the direction of a fitted exponent, or μTransfer's shift; each claim says how it is read off the runs;
- its budgets: a *classroom* budget (what fits a lesson on a 2-core CPU), a *thorough* one (what resolves
  more in about an hour on one) and, for the presets whose paper-sized budget takes hours on a CPU, a *gpu* one
  (minutes on a GPU through the headless worker);
- :func:`report`: one experiment's state, scores, verdicts, effects over random initialisation and compute; a
  complete experiment's verdicts are stored in the database (:func:`settle`, also called by the worker when a run
  ends), and a stored verdict outlives its runs and says so.
- :func:`results_so_far`: every preset's latest verdicts on this server.

The decision itself is :func:`analysis.verdicts.verdict` (no torch); this module only gathers the numbers.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

from analysis.run_status import ACTIVE, RunStatus, diverged
from analysis.verdicts.labels import Label
from core.errors import ExplorerError
from models.pretrain.config import TrainConfig, hf_config
from services.lab.claims import DATA_LIMITED_TOKENS_PER_PARAMETER, Budget, Reading, apply_budget
from services.lab.entries import ArmSpend, ClaimEntry, ExperimentState, Report
from services.lab.presets import BUDGETS, PRESETS, budget_of, plan_runs
from services.lab.run_queue import FINETUNE, LabRun
from services.lab.run_queue import submit as submit_runs
from services.lab.sizing import size


def submit(preset: str, base: TrainConfig, group: str, budget: str = "classroom", engine: Any = None,
           start: bool = True, seeds: int | None = None) -> list[int]:
    """Queue a preset at a named budget (``seeds`` overrides the budget's count); see :func:`services.lab.submit`."""
    b = budget_of(preset, budget)
    return submit_runs(preset, apply_budget(base, b), group, engine, start, seeds=seeds or b.seeds, downstream=b.downstream,
                       widths=b.widths, budget=budget)


def planned_flops(preset: str, base: TrainConfig, budget: str) -> tuple[int, float]:
    """(runs, training FLOPs) a preset at a budget would start, from the calculator: for an estimate of its time."""
    b = budget_of(preset, budget)
    planned = plan_runs(preset, apply_budget(base, b), "estimate", b.seeds, b.widths)
    return len(planned), sum(size(p.config).flops_per_step * p.config.steps for p in planned)


# ------------------------------------------------------------------------------------------ reading the runs


def _run_rows(frame: Any) -> list[dict[str, Any]]:
    rows = []
    for r in frame.sort_values("id").to_dict("records"):
        cfg = r["config"]
        try:
            tc = TrainConfig.from_stored(cfg)
            z = size(tc)
            flops, per_token, non_embedding = z.flops_per_token * (r["tokens"] or 0), z.flops_per_token, z.non_embedding
            parameters, kind = z.parameters, hf_config(tc)[0]["model_type"]
        except ExplorerError:
            flops, per_token, non_embedding, parameters, kind = float("nan"), float("nan"), 0, 0, ""
        ds = (r["evaluation"] or {}).get("downstream") or {}
        ds_seconds = sum(float(v.get("seconds", 0)) + float(v.get("random_seconds", 0)) for v in ds.values())
        placed = LabRun.from_stored(cfg, r["name"])
        rows.append({**r, "arm": placed.arm, "replicate": placed.replicate, "kind": kind,
                     "flops": flops, "flops_per_token": per_token, "non_embedding": non_embedding, "parameters": parameters,
                     "downstream_seconds": ds_seconds})
    return rows


def budget_plan(preset: str, named: str, rows: list[dict[str, Any]], suite: dict[str, Any] | None = None) -> tuple[str, str]:
    """The named budget whose plan an experiment's stored runs follow (arm, steps, batch, length and width of each run).

    The thorough budgets of seven presets were cut to fit an hour on a 2-core CPU (commit ada3903) and their earlier
    settings kept, unchanged, as the *gpu* budget; an experiment stored as "thorough" before then ran what is now the
    GPU budget and is read as one, so the page names the budget it spent (stored rows are not rewritten). A stored name
    that no longer matches any budget's plan is kept as it was stored: DistilBERT's thorough experiments of 4 seeds ×
    2,000 steps, before its thorough became 3 × 1,500 on 2026-12-06, still read "thorough", with a sentence that says
    they follow none of the budgets now (the verdict's header shows it); so do its 3 × 1,500 ones whose seeds trained
    their own teacher, before the teacher was shipped (2026-12-07: the teacher arm is 0 steps now). IsoFLOP's thorough lost a seed the same day;
    the plan compared has no seed count, so its 3-seed experiments read "thorough" as they are. ``suite``, the stored
    downstream suite: a "thorough" whose runs follow the plan but fine-tuned on other tasks than the budget's now
    (DistilBERT's with WiC, before 2026-12-07) says so too.

    Returns the name and, where a stored "thorough" follows no budget's plan now, a sentence saying so (else "")."""
    offered = BUDGETS.get(preset, {})
    if named != "thorough" or "gpu" not in offered or not rows:  # the one renamed budget: no re-planning on other polls
        return named, ""

    def shape(arm: Any, c: Any) -> tuple:
        return arm, c.steps, c.batch, c.seq_len, c.hidden

    try:
        base = replace(TrainConfig.from_stored(rows[0]["config"]), run="")
        ran = {shape(r["arm"], TrainConfig.from_stored(r["config"])) for r in rows}
    except ExplorerError:
        return named, ""

    def planned(b: Budget) -> set[tuple]:
        try:
            return {shape(p.arm, p.config) for p in plan_runs(preset, apply_budget(base, b), "budget-check", b.seeds, b.widths)}
        except ExplorerError:
            return set()

    if planned(offered[named]) == ran:
        return named, _suite_note(named, offered[named], suite)
    other = next((n for n, b in offered.items() if n != named and planned(b) == ran), "")
    if other:
        return other, ""
    now = offered[named]
    steps = sorted({s[1] for s in ran})
    spent = f"{steps[0]:,} steps" if len(steps) == 1 else f"{steps[0]:,} to {steps[-1]:,} steps"
    return named, (f"Stored as {named}, but its runs ({spent} a run) follow none of this preset's budgets as they are "
                   f"now ({named}: {now.seeds} seeds × {now.steps:,} steps): an earlier plan of that budget, or settings "
                   "of its own. Its verdict is decided on the runs it has.")


def _first_seed(rows: list[dict[str, Any]]) -> int:
    """The seed of replicate 0 (a run's seed is the experiment's first plus its replicate: ``plan_runs``), so that the
    charts name each point by the seed it ran, not its replicate: an experiment on fresh seeds 3-7 shows seeds 3-7."""
    try:
        return int(TrainConfig.from_stored(rows[0]["config"]).seed) - int(rows[0]["replicate"])
    except (ExplorerError, KeyError, TypeError, ValueError):
        return 0


def _suite_note(named: str, budget: Budget, suite: dict[str, Any] | None) -> str:
    """A sentence where an experiment's stored downstream tasks are not its budget's now (else "")."""
    if not isinstance(suite, dict):  # none stored (or a row that is not a suite): nothing to compare
        return ""
    ran, now = list(suite.get("tasks") or []), list((budget.downstream or {}).get("tasks") or [])
    if ran == now:
        return ""
    return (f"Stored as {named}, fine-tuned on {', '.join(ran) or 'no task'}, where the budget now fine-tunes on "
            f"{', '.join(now) or 'no task'}: an earlier plan of that budget. Its verdict is decided on the tasks it ran.")


def _diverged(run: dict[str, Any]) -> bool:
    """Whether a run failed because its loss became NaN or infinite (:func:`analysis.run_status.diverged`)."""
    return diverged(run["status"], run.get("message"))


def report(group: str, engine: Any = None) -> Report:
    """One experiment (:class:`services.lab.entries.Report`): its state (``running``, ``partial``, ``complete``,
    ``gone``), per run and per arm what was spent, and per claim the per-seed scores, the verdict and each arm's
    effect over random initialisation.

    A read: it computes a complete experiment's verdicts and stores nothing (:func:`settle` stores them). An
    experiment whose runs were deleted after its verdict shows the stored verdict and says its runs are gone.
    """
    return _report(group, engine)


def _stored_entries(stored: list[dict[str, Any]]) -> list[ClaimEntry]:
    return [ClaimEntry.from_dict({"key": s["claim_key"], **s["payload"]}) for s in stored]


def _report(group: str, engine: Any = None, store: bool = False) -> Report:
    from analysis.results_db import runs
    from analysis.results_db import verdicts as stored_verdicts

    frame = runs.list_runs(engine, group=group)
    frame = frame[frame["objective"] != FINETUNE]
    stored = stored_verdicts.for_group(group, engine)
    if frame.empty:
        if not stored:
            return Report(group, ExperimentState.EMPTY)
        return Report(group, ExperimentState.GONE, preset=stored[0]["preset"], claims=_stored_entries(stored),
                      note="The runs of this verdict were deleted; the verdict is kept as it was decided.")
    rows = _run_rows(frame)
    first = LabRun.from_stored(rows[0]["config"], rows[0]["name"])
    preset, suite = first.preset, first.downstream
    known = PRESETS.get(preset)
    claims = known.claims if known else ()
    active = [r for r in rows if r["status"] in ACTIVE]
    diverging = bool(known and known.divergence_is_a_result)
    tuning = known.tuning if known else None
    # finished: with the diverged runs of a preset whose grid expects them (an infinite loss there)
    finished = [r for r in rows if r["status"] == RunStatus.FINISHED or (diverging and _diverged(r))]
    # a tuned preset's diverged validation run is a result of its sweep (that rate is never chosen), not a missing run
    swept = [r for r in rows if tuning and _diverged(r) and r["replicate"] < tuning.replicates and tuning.split(str(r["arm"]))[1]]
    missing = [f"{r['name']} ({r['status']})" for r in rows if r["status"] not in ACTIVE and r not in finished and r not in swept]
    state = ExperimentState.RUNNING if active else (ExperimentState.PARTIAL if missing else ExperimentState.COMPLETE)
    budget, plan_note = budget_plan(preset, first.budget, rows, suite)
    out = Report(group, state, preset=preset, seeds=first.seeds, budget=budget, plan_note=plan_note,
                 suite=suite, missing=missing, runs=rows, waiting=len(active))
    if known:
        out.title, out.paper, out.finding = known.title, known.paper, known.finding
    for r in rows:
        a = out.arms.setdefault(r["arm"], ArmSpend())
        a.runs += 1
        a.flops += r["flops"] if math.isfinite(r["flops"]) else 0.0
        a.pretrain_seconds += float(r["seconds"] or 0)
        a.downstream_seconds += r["downstream_seconds"]
    out.family = sum(1 for c in claims for _, primary in c.measures(suite) if not primary)
    entries: list[dict[str, Any]] = []
    primaries: list[tuple[int, Any]] = []  # (index in entries, decide(family)) of each adjustable primary claim
    reading = Reading(finished, state, suite, out.family)
    for claim in claims:
        for entry, redecide in claim.entries(reading):
            entries.append(entry)
            if redecide is not None:
                primaries.append((len(entries) - 1, redecide))
    if len(primaries) > 1:
        _holm(entries, primaries)
    first_seed = _first_seed(rows)
    out.claims = [ClaimEntry.from_dict({**e, "first_seed": first_seed} if first_seed else e) for e in entries]  # 0: the charts' default
    deleted = 0
    if stored:
        have = {int(r["id"]) for r in rows}
        ids = {int(i) for s in stored for i in s["payload"].get("run_ids", [])}
        deleted = len(ids - have)
    if deleted:
        out.note = f"{deleted} of this experiment's runs were deleted after its verdict; the stored verdict is shown."
        out.claims = _stored_entries(stored)
    elif state == ExperimentState.COMPLETE and store:
        # Decided once: a stored verdict is not re-dated by a later read, and one that a killed settle did not get
        # to store is stored now (all of an experiment's verdicts go in one transaction, so that is rare).
        have = {s["claim_key"] for s in stored}
        todo = [(c.key, c.verdict_label, c.to_dict()) for c in out.claims if c.verdict_label and c.key not in have]
        if todo:
            stored_verdicts.store_missing(group, preset, todo, engine)
    return out


DECISIVE = frozenset({Label.AGREES, Label.DISAGREES, Label.AGREES_ON_DIRECTION})


def _holm(entries: list[dict[str, Any]], primaries: list[tuple[int, Any]]) -> None:
    """Adjust a preset's primary claims together (Holm's step-down at a family-wise 95%): with m primaries still
    open, every one decisive at 1 − 0.05/m is decided and leaves the family, and the rest are tried again at the
    smaller family; those never decisive are decided at the last family tried (cannot tell). Without p-values: a
    claim decisive at level 1 − 0.05/k is one whose p-value is at most 0.05/k, so this is Holm's procedure read
    off the intervals. Each entry says its family (``holm``)."""
    m = len(primaries)
    todo = list(primaries)
    k = m
    while todo:
        decided = {i: decide(k) for i, decide in todo}
        hits = [i for i, e in decided.items() if (e.get("verdict") or {}).get("label") in DECISIVE]
        for i, e in decided.items():
            if i in hits or not hits:
                entries[i] = {**e, "holm": {"primaries": m, "family": k}}
                if e.get("sentence"):
                    entries[i]["sentence"] = (f"Primary, one of {m} adjusted together (Holm; this one at "
                                              f"{1 - 0.05 / k:.4g}). " + e["sentence"])
        if not hits:
            return
        todo = [(i, d) for i, d in todo if i not in hits]
        k -= len(hits)


def settle(group: str, engine: Any = None) -> None:
    """Store the verdicts of ``group`` if its runs are complete (called by the worker when a run ends, and by
    ``bench/verdicts.py``); a verdict already stored keeps its date, and one a killed settle left out is stored now."""
    if group:
        _report(group, engine, store=True)


def results_so_far(engine: Any = None) -> list[dict[str, Any]]:
    """Every decided experiment's stored verdicts on this server, one row per claim: every replication of a preset,
    not the latest only, so a later "agrees" never hides an earlier "cannot tell" (no optional stopping). Each row
    says which replication it is (1 = the first decided) and its seeds; a replication whose seeds overlap an earlier
    one's is marked: it is not independent of it."""
    from analysis.results_db import verdicts as stored_verdicts

    stored = list(reversed(stored_verdicts.latest(engine)))  # oldest first: replications numbered in order
    seeds_of = _seed_ranges({v["group"] for v in stored}, engine)
    order: dict[str, list[str]] = {}
    for v in stored:
        groups = order.setdefault(v["preset"], [])
        if v["group"] not in groups:
            groups.append(v["group"])
    rows = []
    for v in stored:
        preset, p = v["preset"], v["payload"]
        entry = ClaimEntry.from_dict({"key": v["claim_key"], **p})  # the row's key where a payload has none
        verdict = entry.verdict or {}
        groups = order[preset]
        n = groups.index(v["group"])
        mine = seeds_of.get(v["group"], set())
        shared = [g for g in groups[:n] if mine & seeds_of.get(g, set())]
        notes = []
        if shared:
            notes.append(f"shares seeds with {len(shared)} earlier replication(s): not independent of them")
        if entry.detail.get("data_limited"):
            notes.append(f"{len(entry.detail['data_limited'])} run(s) data-limited (< {DATA_LIMITED_TOKENS_PER_PARAMETER} tokens/parameter)")
        if (entry.detail.get("without_data_limited") or {}).get("label"):
            notes.append(f"without them: {entry.detail['without_data_limited']['label']}")
        if verdict.get("lower_is_better"):
            notes.append(f"lower is better: effect = {entry.claim.b}'s mean minus {entry.claim.a}'s")
        if verdict.get("reason") and v["label"] != Label.AGREES:
            notes.append(verdict["reason"])
        holm = entry.holm
        role = ("primary" + (f" (Holm, {holm['primaries']} claims)" if holm else "") if entry.primary
                else f"exploratory (Bonferroni, {entry.family})")
        rows.append({"preset": PRESETS[preset].title if preset in PRESETS else preset, "verdict": v["label"],
                     "replication": f"{n + 1} of {len(groups)}",
                     "seeds": _span(mine), "role": role,
                     "measure": entry.label or entry.measure, "effect": verdict.get("effect", verdict.get("estimate")),
                     "low": verdict.get("low"), "high": verdict.get("high"),
                     "interval": f"{verdict.get('level') or 0.95:.1%}".replace(".0%", "%"),
                     "notes": "; ".join(notes), "claim": entry.claim.statement,
                     "source": entry.claim.source, "experiment": v["group"], "decided": v["created_at"]})
    newest = {g: i for i, g in enumerate(dict.fromkeys(r["experiment"] for r in reversed(rows)))}
    rows.sort(key=lambda r: (newest[r["experiment"]], not r["role"].startswith("primary")))  # newest first
    return rows


def seeds_taken(preset: str, frame: Any) -> set[int]:
    """The seeds that this server's experiments of ``preset`` already used (each run's stored config in ``frame``, the
    runs table): a new replication that reuses any of them repeats those runs and is not independent of them."""
    if frame is None or len(frame) == 0 or "config" not in frame:
        return set()
    return {int(cfg.get("seed", 0)) for cfg in frame["config"] if isinstance(cfg, dict) and LabRun.from_stored(cfg).preset == preset}


def fresh_seed(preset: str, frame: Any) -> int:
    """The first seed past every seed this server's experiments of ``preset`` used (0 when there are none): where a new
    replication starts so that it is independent of the earlier ones (no optional stopping)."""
    taken = seeds_taken(preset, frame)
    return max(taken) + 1 if taken else 0


def _seed_ranges(groups: set[str], engine: Any = None) -> dict[str, set[int]]:
    """Per experiment, the seeds its runs used (their configs' ``seed``), read in one query; empty where its runs were
    deleted."""
    from analysis.results_db import runs

    frame = runs.list_runs(engine)
    out: dict[str, set[int]] = {g: set() for g in groups}
    for group, cfg in zip(frame["group"], frame["config"], strict=True):
        if group in out:
            out[group].add(int((cfg or {}).get("seed", 0)))
    return out


def _span(seeds: set[int]) -> str:
    if not seeds:
        return ""
    lo, hi = min(seeds), max(seeds)
    return str(lo) if lo == hi else f"{lo}–{hi}" if len(seeds) == hi - lo + 1 else ", ".join(map(str, sorted(seeds)))


def verdicts_json(group: str = "") -> dict[str, Any]:
    """The API's read of the verdicts: one experiment's report (its runs trimmed to what they spent), or, with no
    ``group``, each preset's latest decided verdicts."""
    if not group:
        return {"verdicts": results_so_far()}
    out = report(group).to_dict()
    out["runs"] = [{k: r[k] for k in ("id", "name", "arm", "replicate", "status", "seconds", "tokens", "flops")}
                   for r in out["runs"]]
    return out
