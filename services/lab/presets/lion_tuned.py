"""Lion against AdamW, each at its own tuned learning rate (Chen et al. 2023, Section 4): the same sweep for both,
each optimizer's rate chosen on validation seeds, the claim decided on fresh seeds at the chosen rates."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.claims import Entry, Reading
from services.lab.presets.base import RATE_MARK, Preset, Tuning, budgets
from services.lab.presets.lion import WD_FACTOR

#: The one learning-rate sweep, the same for both optimizers (log2 rates): AdamW's usual 1e-3 (2^-10) and the paper's
#: Lion rates, 3-10x smaller (2^-11.6 to 2^-13.3), all inside it with a step either side. Both earlier sweeps here
#: (2^-12 to 2^-9) chose Lion's lowest rate, 2^-12, at both budgets: its best lay at or beyond the sweep's end.
LOG2_RATES = (-14, -13, -12, -11, -10, -9)
#: Replicates 0 and 1 choose each optimizer's rate (validation seeds); the verdict is decided on the others (fresh seeds).
TUNING = Tuning(replicates=2, log2_rates=LOG2_RATES)
TUNING_REPLICATES = TUNING.replicates
ARMS = ("lion", "adamw")


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Lion and AdamW each over the same sweep (:data:`LOG2_RATES`; tuning arms ``<optimizer>-lr2e<k>``) and each
    once more at the rate its sweep chooses (verdict arms ``lion``, ``adamw``: the base rate until the run starts and
    reads its choice, :func:`services.lab.training.prepare`); Lion with the paper's larger weight decay."""
    arms = (("lion", replace(base, optimizer="lion", weight_decay=base.weight_decay * WD_FACTOR)),
            ("adamw", replace(base, optimizer="adamw")))
    return [(f"{name}{RATE_MARK}2e{k}", replace(cfg, lr=2.0 ** k)) for k in TUNING.log2_rates for name, cfg in arms] + list(arms)


def tuned(claim: ArmClaim, finished: list[dict[str, Any]], tuning: Tuning = TUNING) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A tuned claim's runs: each of its two arms' rate chosen on the validation replicates (:meth:`Tuning.choose`),
    and the runs of the fresh seeds at the chosen rates, for the verdict: the verdict arms' runs (each trained at its
    arm's choice as it started), or, in an experiment queued before the verdict arms existed (every rate on every
    seed), the fresh seeds' runs of the chosen rate renamed to the arm. With what the tuning saw (``tuning``: per arm
    the mean validation loss per rate, the chosen rate, and the validation seeds)."""
    tuning = tuning.ran(finished)
    seen: dict[str, Any] = {}
    for arm in (claim.a, claim.b):
        chosen, means = tuning.choose(arm, finished)
        seen[arm] = {"validation_loss": means, "chosen": chosen, "seeds": tuning.replicates}
    rows = []
    for r in finished:
        arm, code = tuning.split(str(r["arm"]))
        trained_at = code or (r.get("config") or {}).get("tuned_rate")  # a verdict arm's run stores the rate it read
        chosen = seen[arm]["chosen"] if arm in seen else None
        if r["replicate"] >= tuning.replicates and chosen is not None and trained_at == chosen:
            rows.append({**r, "arm": arm})
    return rows, seen


@dataclass(frozen=True)
class TunedClaim(ArmClaim):
    """Arm ``a`` against arm ``b``, each at the rate its validation replicates chose from the sweep, decided on the
    other replicates (:func:`tuned`); says what was chosen and whether a choice sits at an end of the sweep (its best
    rate may lie beyond it)."""

    tuning: Tuning = TUNING

    def entries(self, reading: Reading) -> list[Entry]:
        rows, tuning = tuned(self, reading.finished, self.tuning)
        chosen = ", ".join(f"{arm} at {Tuning.power(t['chosen'])}" for arm, t in tuning.items())
        ends = self.tuning.ran(reading.finished).ends
        edge = [arm for arm, t in tuning.items() if t["chosen"] and t["chosen"] in ends]
        swept = [int(r["id"]) for r in reading.finished if self.tuning.split(str(r["arm"]))[1] and "id" in r]
        said = (f"Tuned: each optimizer's rate chosen on seeds 0–{self.tuning.replicates - 1} ({chosen}); decided on the other "
                "seeds" + (f"; {' and '.join(edge)} chose an end of the sweep, so its best rate may lie beyond it" if edge else "")
                + ". ")
        out = []
        for measure, primary in self.measures(reading.suite):
            entry, redecide = self.entry(measure, primary, rows, reading)
            # its tuning runs count among the runs it was decided from: deleting one later is said, as for the others
            ids = sorted(set(entry.get("run_ids", [])) | set(swept))
            out.append(Entry({**entry, "tuning": tuning, "run_ids": ids, "sentence": said + entry.get("sentence", "")}, redecide))
        return out


PRESET = Preset(
    "lion-tuned", "Lion vs AdamW, each tuned: the same learning-rate sweep for both",
    "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion), arXiv 2302.06675, Section 4 (language "
    "modelling, both optimizers tuned) and Section 5 (hyperparameters)",
    f"Lion matches or beats AdamW on language modelling, each optimizer at its own tuned rate. Here both run the same sweep "
    f"of {len(LOG2_RATES)} rates (2^{LOG2_RATES[0]} to 2^{LOG2_RATES[-1]}); each optimizer's rate is chosen on the first "
    f"{TUNING_REPLICATES} seeds (validation) and the verdict is decided on the other seeds at the chosen rates (fresh "
    f"seeds): the tuning budget is {len(LOG2_RATES)} rates × {TUNING_REPLICATES} seeds per optimizer, and a fresh seed "
    f"trains each optimizer once, at its chosen rate.",
    runs,
    claims=(TunedClaim("loss", "held_out_loss", "Each at its tuned learning rate, Lion matches AdamW's loss with one optimizer "
                       "state instead of two.", "Chen et al. 2023, Lion, arXiv 2302.06675, Section 4 (language modelling: "
                       "Lion matches or beats AdamW, both tuned)", "lion", "adamw", ">=", 0.05),),
    tuning=TUNING,
    # 5 seeds, 2 to choose each optimizer's rate (2 × 6 rates × 2 = 24 runs) and 3 fresh ones to decide on (2 × 3): 30
    # runs; at the page's 10 seeds 40, the queue's most per experiment (services.lab.run_queue.MAX_QUEUED).
    budgets=budgets("lion-tuned", {"seeds": 5, "steps": 300, "batch": 32, "seq_len": 64, "downstream": None},
                    {"seeds": 5, "steps": 600, "batch": 64, "seq_len": 64, "downstream": None},  # an hour on 2 cores
                    {"seeds": 5, "steps": 3000, "batch": 64, "seq_len": 64, "downstream": None}))
