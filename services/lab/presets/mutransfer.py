"""Tensor Programs V's Figure 1 in miniature (Yang et al. 2022): learning rate × width under the standard
parametrisation and under μP, one masked LM per cell; read as the grid (parametrisation, seed, width, rate, held-out
loss) and decided by :func:`analysis.verdicts.transfer.transfer_verdict`."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from typing import Any, ClassVar

from models.pretrain.config import TrainConfig
from services.lab.claims import Claim, Entry, Reading
from services.lab.entries import decided, undecided
from services.lab.presets.base import Preset, at_widths, budgets

#: The learning-rate grid: log2 rates a factor of 2 apart, 2^-12 to 2^-7 (Adam). A factor of 2, not 4: under SP
#: Adam's best rate is expected to fall about as 1/width, so from width 32 to 128 by two octaves, which a grid of
#: factor-4 steps would call one step (what was measured: bench/results/verdicts-mutransfer-classroom.txt; docs/lab.md).
LOG2_RATES = (-12, -11, -10, -9, -8, -7)
WIDTHS = (16, 128)  # a custom budget's: 8× (the verdict's least span), 18 runs per seed: 2 seeds fit the queue's 40


def runs(base: TrainConfig, widths: tuple[int, ...] = WIDTHS, log2_rates: tuple[int, ...] = LOG2_RATES) -> list[tuple[str, TrainConfig]]:
    """Each parametrisation (SP, μP) × each width (the FFN 4×, one head count at every width) × each learning rate of
    the grid, all at the base run's steps, batch and length; the base run's own rate is not used. μP's base width is
    the narrowest width, so there the two parametrisations are the same model, trained once (as SP), and the report
    counts it under both (:func:`points`)."""
    out = []
    # One head count at every width (the narrowest width's): μP's wide model must reduce to the base-width SP run
    # it is compared with, and its attention scale is computed from the head size at the base width.
    heads = min(base.heads, min(widths) // 16) or 1
    for p in ("sp", "mup"):
        for name, cfg in at_widths(replace(base, objective="mlm"), widths):
            if p == "mup" and cfg.hidden == min(widths):
                continue
            for k in log2_rates:
                out.append((f"{p}-{name}-lr2e{k}", replace(cfg, heads=heads, lr=2.0 ** k, parametrisation=p,
                                                            mup_base_width=min(widths))))
    return out


def _cells(finished: list[dict[str, Any]], value: Any) -> list[tuple[str, int, int, float, float]]:
    """(parametrisation, seed, width, rate, ``value(run)``) per finished run; an SP run at μP's base width counts
    under both parametrisations: there μP is SP, and :func:`runs` trains that model once."""
    out = []
    for r in finished:
        cfg = TrainConfig.from_stored(r["config"] or {})
        v = value(r)
        out.append((cfg.parametrisation, int(r["replicate"]), cfg.hidden, cfg.lr, v))
        if cfg.parametrisation == "sp" and cfg.hidden == cfg.mup_base_width:
            out.append(("mup", int(r["replicate"]), cfg.hidden, cfg.lr, v))
    return out


def points(finished: list[dict[str, Any]]) -> list[tuple[str, int, int, float, float]]:
    """(parametrisation, seed, width, rate, held-out loss) per finished run; a run without a finite held-out loss (it
    diverged) has an infinite one."""
    def loss(r: dict[str, Any]) -> float:
        v = (r["evaluation"] or {}).get("held_out_loss")
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else math.inf

    return sorted(_cells(finished, loss))


def gains(finished: list[dict[str, Any]]) -> list[tuple[str, int, int, float, float]] | None:
    """(parametrisation, seed, width, rate, nats below the corpus's token counts at the [MASK] inputs) per finished run
    (``unigram_loss − mask_loss``; −inf for a diverged run), for the verdict's "learnt something" precondition; None
    where a run that finished recorded neither (trained before they were kept)."""
    def gain(r: dict[str, Any]) -> float:
        ev = r["evaluation"] or {}
        return float(ev["unigram_loss"]) - float(ev["mask_loss"]) if _recorded(ev) else -math.inf

    def unrecorded(r: dict[str, Any]) -> bool:  # it has a finite loss, so it could have recorded them
        ev = r["evaluation"] or {}
        return not _recorded(ev) and isinstance(ev.get("held_out_loss"), int | float) and math.isfinite(ev["held_out_loss"])

    return None if any(unrecorded(r) for r in finished) else _cells(finished, gain)


def _recorded(ev: dict[str, Any]) -> bool:
    mask, counts = ev.get("mask_loss"), ev.get("unigram_loss")
    return isinstance(mask, int | float) and isinstance(counts, int | float) and math.isfinite(mask) and math.isfinite(counts)


@dataclass(frozen=True)
class TransferClaim(Claim):
    """The best learning rate across widths: within one grid step under μP, moved under SP (the verdict's interval on
    the shift: :func:`analysis.verdicts.transfer.transfer_verdict`); not adjusted with other claims."""

    figure: ClassVar[str] = "transfer"

    def entries(self, reading: Reading) -> list[Entry]:
        from analysis.verdicts.transfer import transfer_verdict

        pts = points(reading.finished)
        out: dict[str, Any] = {"key": self.key, "claim": asdict(self), "figure": self.figure, "measure": self.measure,
                               "label": "Best learning rate across widths (held-out loss)", "primary": True,
                               "points": [list(p) for p in pts], "verdict": None,
                               "run_ids": [int(r["id"]) for r in reading.finished]}
        if not undecided(out, reading.state):
            decided(out, lambda: transfer_verdict(pts, gains(reading.finished)))
        return [Entry(out)]


PRESET = Preset(
    "mutransfer", "μTransfer: learning rate × width, SP vs μP",
    "Yang et al. 2022, Tensor Programs V, Figure 1 (training loss against log2 learning rate per width, SP vs μP) and "
    "Figure 3 (transformers)",
    "Under the standard parametrisation the best learning rate shifts as the model widens; under μP it stays put, so it "
    "can be tuned on a narrow model and carried to a wide one.",
    runs,
    claims=(TransferClaim("mutransfer", "mutransfer", "Under μP the best learning rate at the narrowest width is within one "
                          "grid step (a factor of 2) of the best at the widest; under the standard parametrisation it is not.",
                          "Yang et al. 2022, Tensor Programs V, Figure 1 and Figure 3 (the optimum stays put under μP, "
                          "shifts under SP)"),),
    # 6 learning rates × (SP at every width + μP at every width but its base, where it is SP) × 2 seeds: 36 runs, within
    # the queue's 40 per experiment (services.lab.run_queue.MAX_QUEUED), which is why thorough widens the gap between the
    # two widths (32 to 256) and trains longer rather than adding widths, rates or seeds.
    budgets=budgets("mutransfer", {"seeds": 2, "steps": 250, "batch": 32, "seq_len": 64, "downstream": None, "widths": WIDTHS},
                    {"seeds": 2, "steps": 1000, "batch": 32, "seq_len": 64, "downstream": None, "widths": WIDTHS},  # an hour on 2 cores
                    {"seeds": 2, "steps": 2000, "batch": 32, "seq_len": 64, "downstream": None, "widths": (32, 256)}),
    widths=WIDTHS, least_widths=2, divergence_is_a_result=True)  # the narrowest vs the widest
