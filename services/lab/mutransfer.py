"""The μTransfer preset's report: its runs read as Tensor Programs V's grid (parametrisation, seed, width, learning
rate, held-out loss) and the claim decided by :func:`analysis.verdicts.transfer.transfer_verdict`."""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

from services.lab.claims import Claim
from services.lab.entries import decided, undecided


def points(finished: list[dict[str, Any]]) -> list[tuple[str, int, int, float, float]]:
    """(parametrisation, seed, width, rate, held-out loss) per finished run; a run without a finite held-out loss
    (it diverged) has an infinite one. An SP run at μP's base width counts under both parametrisations: there μP
    is SP, and the preset trains that model once (:func:`services.lab.presets._mutransfer`)."""
    out = []
    for r in finished:
        cfg = r["config"] or {}
        loss = (r["evaluation"] or {}).get("held_out_loss")
        loss = float(loss) if isinstance(loss, int | float) and math.isfinite(loss) else math.inf
        p, width, rate = cfg.get("parametrisation", "sp"), int(cfg.get("hidden", 0)), float(cfg.get("lr", 0))
        out.append((p, int(r["replicate"]), width, rate, loss))
        if p == "sp" and width == int(cfg.get("mup_base_width", 0)):
            out.append(("mup", int(r["replicate"]), width, rate, loss))
    return sorted(out)


def gains(finished: list[dict[str, Any]]) -> list[tuple[str, int, int, float, float]] | None:
    """(parametrisation, seed, width, rate, nats below the corpus's token counts at the [MASK] inputs) per finished run
    (``unigram_loss − mask_loss``; −inf for a diverged run), for the verdict's "learnt something" precondition; None
    where a run that finished recorded neither (trained before they were kept)."""
    out = []
    for r in finished:
        cfg, ev = r["config"] or {}, r["evaluation"] or {}
        mask, counts = ev.get("mask_loss"), ev.get("unigram_loss")
        ok = isinstance(mask, int | float) and isinstance(counts, int | float) and math.isfinite(mask) and math.isfinite(counts)
        if not ok and isinstance(ev.get("held_out_loss"), int | float) and math.isfinite(ev["held_out_loss"]):
            return None
        gain = float(counts) - float(mask) if ok else -math.inf
        p, width, rate = cfg.get("parametrisation", "sp"), int(cfg.get("hidden", 0)), float(cfg.get("lr", 0))
        out.append((p, int(r["replicate"]), width, rate, gain))
        if p == "sp" and width == int(cfg.get("mup_base_width", 0)):
            out.append(("mup", int(r["replicate"]), width, rate, gain))
    return out


def transfer_claim(claim: Claim, finished: list[dict[str, Any]], state: str) -> dict[str, Any]:
    """One report entry (the shape :func:`services.lab.experiments.report`'s claims have) for the μTransfer claim."""
    from analysis.verdicts.transfer import transfer_verdict

    pts = points(finished)
    out: dict[str, Any] = {"key": claim.key, "claim": asdict(claim), "measure": claim.measure, "label":
                           "Best learning rate across widths (held-out loss)", "primary": True,
                           "points": [list(p) for p in pts], "verdict": None, "run_ids": [int(r["id"]) for r in finished]}
    if not undecided(out, state):
        decided(out, lambda: transfer_verdict(pts, gains(finished)))
    return out
