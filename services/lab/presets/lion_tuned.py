"""Lion against AdamW, each at its own tuned learning rate (Chen et al. 2023, Section 4): the same sweep for both,
each optimizer's rate chosen on validation seeds, the claim decided on fresh seeds at the chosen rates."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from models.pretrain.config import TrainConfig
from services.lab.claim_entries import ArmClaim
from services.lab.claims import Entry, Reading
from services.lab.presets.base import Preset, budgets
from services.lab.presets.lion import WD_FACTOR

#: The one learning-rate sweep, the same for both optimizers (log2 rates): AdamW's usual 1e-3 (2^-10) and Lion's 3×
#: smaller one (2^-11.6) both lie inside it, with a step either side.
LOG2_RATES = (-12, -11, -10, -9)
#: Replicates 0 and 1 choose each optimizer's rate (validation seeds); the verdict is decided on the others (fresh seeds).
TUNING_REPLICATES = 2


def runs(base: TrainConfig) -> list[tuple[str, TrainConfig]]:
    """Lion and AdamW each over the same sweep (:data:`LOG2_RATES`; arms ``<optimizer>-lr2e<k>``), Lion with the
    paper's larger weight decay."""
    return [(f"{name}-lr2e{k}", replace(cfg, lr=2.0 ** k)) for k in LOG2_RATES
            for name, cfg in (("lion", replace(base, optimizer="lion", weight_decay=base.weight_decay * WD_FACTOR)),
                              ("adamw", replace(base, optimizer="adamw")))]


def tuned(claim: ArmClaim, finished: list[dict[str, Any]], cut: int) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """A tuned claim's runs: each of its two arms' rate chosen as the lowest mean held-out loss over the validation
    replicates (those below ``cut``), and the runs of the other replicates (fresh seeds) at the chosen rates, renamed
    to the arm, for the verdict; with what the tuning saw (``tuning``: per arm the mean validation loss per rate and
    the chosen rate). A rate whose validation run diverged or is missing is never chosen."""
    seen: dict[str, dict[str, list[float]]] = {}
    for r in finished:
        arm, _, rate = str(r["arm"]).partition("-lr")
        loss = (r["evaluation"] or {}).get("held_out_loss")
        if arm in (claim.a, claim.b) and rate and r["replicate"] < cut:
            ok = isinstance(loss, int | float) and math.isfinite(loss)
            seen.setdefault(arm, {}).setdefault(rate, []).append(float(loss) if ok else math.inf)
    tuning: dict[str, Any] = {}
    for arm in (claim.a, claim.b):
        means = {rate: (sum(v) / len(v) if len(v) == cut else math.inf) for rate, v in seen.get(arm, {}).items()}
        finite = {k: v for k, v in means.items() if math.isfinite(v)}
        tuning[arm] = {"validation_loss": means, "chosen": min(finite, key=finite.get) if finite else None, "seeds": cut}
    rows = [{**r, "arm": r["arm"].partition("-lr")[0]} for r in finished
            if r["replicate"] >= cut and r["arm"].partition("-lr")[0] in tuning
            and r["arm"].partition("-lr")[2] == tuning[r["arm"].partition("-lr")[0]]["chosen"]]
    return rows, tuning


def _rate(code: str) -> float:
    """A tuned arm's rate from its name's code (``2e-11`` → 2^-11)."""
    return 2.0 ** float(code.split("e", 1)[1])


@dataclass(frozen=True)
class TunedClaim(ArmClaim):
    """Arm ``a`` against arm ``b``, each at the rate its validation replicates (those below ``tuning_replicates``)
    chose from the sweep, decided on the other replicates (:func:`tuned`); says what was chosen and whether a
    choice sits at an end of the sweep (its best rate may lie beyond it)."""

    tuning_replicates: int = TUNING_REPLICATES

    def entries(self, reading: Reading) -> list[Entry]:
        rows, tuning = tuned(self, reading.finished, self.tuning_replicates)
        chosen = ", ".join(f"{arm} at 2^{t['chosen'].split('e', 1)[1] if t['chosen'] else '?'}" for arm, t in tuning.items())
        edge = [arm for arm, t in tuning.items()
                if t["chosen"] and t["chosen"] in (min(t["validation_loss"], key=_rate), max(t["validation_loss"], key=_rate))]
        said = (f"Tuned: each optimizer's rate chosen on seeds 0–{self.tuning_replicates - 1} ({chosen}); decided on the other "
                "seeds" + (f"; {' and '.join(edge)} chose an end of the sweep, so its best rate may lie beyond it" if edge else "")
                + ". ")
        out = []
        for measure, primary in self.measures(reading.suite):
            entry, redecide = self.entry(measure, primary, rows, reading)
            out.append(Entry({**entry, "tuning": tuning, "sentence": said + entry.get("sentence", "")}, redecide))
        return out


PRESET = Preset(
    "lion-tuned", "Lion vs AdamW, each tuned: the same learning-rate sweep for both",
    "Chen et al. 2023, Symbolic Discovery of Optimization Algorithms (Lion), arXiv 2302.06675, Section 4 (language "
    "modelling, both optimizers tuned) and Section 5 (hyperparameters)",
    f"Lion matches or beats AdamW on language modelling, each optimizer at its own tuned rate. Here both run the same sweep "
    f"of {len(LOG2_RATES)} rates (2^{LOG2_RATES[0]} to 2^{LOG2_RATES[-1]}); each optimizer's rate is chosen on the first "
    f"{TUNING_REPLICATES} seeds (validation) and the verdict is decided on the other seeds at the chosen rates (fresh "
    f"seeds): the tuning budget is {len(LOG2_RATES)} rates × {TUNING_REPLICATES} seeds per optimizer.",
    runs,
    claims=(TunedClaim("loss", "held_out_loss", "Each at its tuned learning rate, Lion matches AdamW's loss with one optimizer "
                       "state instead of two.", "Chen et al. 2023, Lion, arXiv 2302.06675, Section 4 (language modelling: "
                       "Lion matches or beats AdamW, both tuned)", "lion", "adamw", ">=", 0.05),),
    # 5 seeds, 2 to choose each optimizer's rate and 3 fresh ones to decide on: 40 runs, the queue's most per
    # experiment (services.lab.run_queue.MAX_QUEUED).
    budgets=budgets("lion-tuned", {"seeds": 5, "steps": 300, "batch": 32, "seq_len": 64, "downstream": None},
                    {"seeds": 5, "steps": 600, "batch": 64, "seq_len": 64, "downstream": None},  # an hour on 2 cores
                    {"seeds": 5, "steps": 3000, "batch": 64, "seq_len": 64, "downstream": None}))
