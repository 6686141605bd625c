"""What a worker process does with the run it claimed: train it (pre-training, with the downstream suite where its
preset asks for one, or fine-tuning), write its curve and read its cancel flag through the database about once a
second, close it whatever happens, and dispatch the next queued run.

Torch is imported here, inside the run, and only by the worker process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from analysis.run_status import RunStatus, diverged
from core.errors import ExplorerError, InvalidConfig
from models.pretrain.config import TrainConfig
from services.lab.presets import PRESETS
from services.lab.run_queue import FINETUNE, WORKER_THREADS, LabRun, dispatch


def prepare(run: dict[str, Any], config: TrainConfig, engine: Any = None) -> TrainConfig:
    """What a run decides as it starts, from the runs it waited for (``after``): a tuned preset's verdict run trains at
    the rate its arm's validation runs chose (:meth:`services.lab.presets.base.Tuning.choose`), and its stored config
    says so (``lr``, ``tuned_rate``). Any other run: its config as it is.

    Raises:
        InvalidConfig: no rate can be chosen (every validation run of a rate diverged, failed or was cancelled).
    """
    lab = LabRun.from_stored(run["config"], run["name"])
    preset = PRESETS.get(lab.preset)
    tuning = preset.tuning if preset else None
    if tuning is None or not lab.after or tuning.split(lab.arm)[1]:
        return config
    from analysis.results_db import runs

    frame = runs.list_runs(engine, group=run["group"])
    finished, broken = [], [f"{name} (deleted)" for name in lab.after if name not in set(frame["name"])]
    for name, stored, status, message, evaluation in zip(frame["name"], frame["config"], frame["status"], frame["message"],
                                                          frame["evaluation"], strict=True):
        if name not in lab.after:
            continue
        if status == RunStatus.FINISHED:
            placed = LabRun.from_stored(stored or {}, name)
            finished.append({"arm": placed.arm, "replicate": placed.replicate, "evaluation": evaluation})
        elif not diverged(status, message):
            broken.append(f"{name} ({status})")
    if broken:  # a sweep that did not end cannot choose: the experiment can only end partial, so train nothing for it
        raise InvalidConfig(f"Its learning-rate sweep did not end: {', '.join(broken[:3])}"
                            + (f" and {len(broken) - 3} more" if len(broken) > 3 else "") + "; the rate cannot be chosen.",
                            "Start the experiment again.")
    code, _ = tuning.choose(lab.arm, finished)
    if code is None:
        raise InvalidConfig(f"No learning rate to train {lab.arm} at: none of its rates has every validation run "
                            f"(seeds 0–{tuning.replicates - 1}) finished with a finite held-out loss.",
                            "Start the experiment again, or with a lower rate.")
    tuned = replace(config, lr=tuning.rate(code))
    runs.set_config(run["id"], {**run["config"], "lr": tuned.lr, "tuned_rate": code}, engine)
    return tuned


def work(run_id: int, engine: Any = None) -> str:
    """Train one claimed run (in the worker process): curve and cancel flag through the database about once a
    second, evaluation and checkpoint at the end, then start the next queued run. Returns the final status."""
    from analysis.results_db import runs

    run = runs.get_run(run_id, engine)
    if run["objective"] == FINETUNE:
        return _work_finetune(run, engine)
    config = TrainConfig.from_stored(run["config"])
    runs.set_pid(run_id, os.getpid(), engine)
    curve: list[tuple[int, float]] = []
    # The lease ran from the claim: renew it as the worker starts and again once torch is imported, so that a slow start
    # on a loaded machine (seconds of imports before the first step reports) does not read as a hung worker.
    state = {"last": 0.0, "cancel": runs.renew_lease(run_id, engine)}

    def progress(step: int, loss: float, seconds: float) -> None:
        curve.append((step, loss))
        if time.monotonic() - state["last"] >= 1.0 or step == config.steps:
            state["last"] = time.monotonic()
            state["cancel"] = runs.record_curve(run_id, curve, engine, seconds=seconds)

    stored = run["config"]

    def still_wanted() -> bool:
        """Between downstream steps: renew the lease every few seconds (that phase writes no curve); False to stop."""
        if time.monotonic() - state["last"] >= 5.0:
            state["last"] = time.monotonic()
            state["cancel"] = runs.renew_lease(run_id, engine)
        return state["cancel"]

    def fit() -> Any:
        ready = prepare(run, config, engine)  # before torch: a run that cannot start says so at once
        from models.pretrain import train  # torch: in the worker only, and inside the run's try

        state["cancel"] = state["cancel"] or runs.renew_lease(run_id, engine)
        result = train(ready, on_progress=progress, should_stop=lambda: state["cancel"])
        lab = LabRun.from_stored(stored)
        if lab.downstream and result.checkpoint and not result.stopped:
            from models.finetune import downstream

            def phase(text: str) -> None:
                state["cancel"] = runs.record_curve(run_id, curve, engine, evaluation={**result.evaluation, "phase": text})

            result.evaluation["downstream"] = downstream(result.checkpoint, lab.downstream, config.seed, lab.control,
                                                         still_wanted, phase)
            if state["cancel"]:
                result.stopped = "cancelled during the downstream evaluation"
        return result

    return _run_and_close(run_id, engine, curve, fit, "; what it learned so far is saved.",
                          lambda status, result: {"evaluation": result.evaluation if result else {},
                                                   "parameters": result.parameters if result else None})


def _run_and_close(run_id: int, engine: Any, curve: list[tuple[int, float]], fit: Callable[[], Any], cancelled_note: str,
                   outcome: Callable[[str, Any], dict[str, Any]]) -> str:
    """Run ``fit()`` in the worker and close the run whatever happens: finished, cancelled (``cancelled_note`` said),
    failed with the reason, the curve and ``outcome(status, result)`` (evaluation, parameters) stored, and the next
    queued run dispatched. Returns the final status."""
    from analysis.results_db import runs

    status, message, result = RunStatus.FAILED, "", None
    try:
        import torch

        torch.set_num_threads(WORKER_THREADS)
        result = fit()
        if result.stopped.startswith("cancelled"):
            status, message = RunStatus.CANCELLED, result.stopped.capitalize() + cancelled_note
        elif result.stopped:
            status, message = RunStatus.FAILED, result.stopped.capitalize() + "."
        else:
            status = RunStatus.FINISHED
    except ExplorerError as err:
        message = str(err)
    except Exception as err:  # a worker must close its run whatever happened; the log keeps the trace
        import traceback

        traceback.print_exc()
        message = f"Training stopped with an internal error ({type(err).__name__}); the server log has the details."
    finally:
        if curve:
            runs.record_curve(run_id, curve, engine, seconds=result.seconds if result else None)
        runs.finish_run(run_id, status, message=message, checkpoint=result.checkpoint if result else "",
                        seconds=result.seconds if result else None, tokens=result.tokens if result else None, engine=engine,
                        **outcome(status, result))
        dispatch(engine)
    return status


def _work_finetune(run: dict[str, Any], engine: Any) -> str:
    """The worker's side of a fine-tuning run: curve and epochs through the database about once a second."""
    from analysis.results_db import runs
    from models.finetune import FineTuneConfig

    run_id = run["id"]
    config = FineTuneConfig.from_stored(run["config"])
    runs.set_pid(run_id, os.getpid(), engine)
    curve: list[tuple[int, float]] = []
    epochs: list[dict[str, float]] = []
    state = {"last": 0.0, "cancel": runs.renew_lease(run_id, engine)}  # torch is imported: renew the claim's lease

    def progress(step: int, loss: float, seconds: float) -> None:
        curve.append((step, loss))
        if time.monotonic() - state["last"] >= 1.0:
            state["last"] = time.monotonic()
            state["cancel"] = runs.record_curve(run_id, curve, engine, seconds=seconds, evaluation={"epochs": epochs})

    def epoch(row: dict[str, float]) -> None:
        epochs.append(row)
        state["cancel"] = runs.record_curve(run_id, curve, engine, evaluation={"epochs": epochs})

    def fit() -> Any:
        from models.finetune import finetune

        return finetune(config, on_progress=progress, on_epoch=epoch, should_stop=lambda: state["cancel"])

    def outcome(status: str, result: Any) -> dict[str, Any]:
        if result is None or status != RunStatus.FINISHED:
            return {"evaluation": {"epochs": epochs}, "parameters": result.trainable_parameters if result else None}
        return {"evaluation": {**result.summary(), "correct": result.correct}, "parameters": result.trainable_parameters}

    return _run_and_close(run_id, engine, curve, fit, "; no score is reported for a cancelled run.", outcome)

