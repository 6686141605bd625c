"""Compute-optimal allocation: N_opt(C) and D_opt(C) under C = 6·N·D, in closed form for an L(N, D) law and by
Kaplan et al.'s prescription, side by side."""

from __future__ import annotations

import math
from dataclasses import dataclass

from analysis.scaling.reference_laws import KAPLAN, REFERENCE_LAWS
from core.errors import InvalidData


@dataclass(frozen=True)
class Allocation:
    law: str
    compute: float  # FLOPs
    n_opt: float  # parameters
    d_opt: float  # tokens
    loss: float | None
    source: str

    @property
    def tokens_per_parameter(self) -> float:
        return self.d_opt / self.n_opt


def compute_optimal(params: dict[str, float], compute: float, law: str = "") -> Allocation:
    """Minimise E + A/N^α + B/D^β subject to 6·N·D = C, in closed form (Hoffmann et al. 2022, Eq. 4):

    N_opt = G·(C/6)^(β/(α+β)),  D_opt = G⁻¹·(C/6)^(α/(α+β)),  G = (α·A / (β·B))^(1/(α+β)).
    """
    if not (isinstance(compute, (int, float)) and math.isfinite(compute) and compute > 0):
        raise InvalidData(f"The compute budget must be a positive number of FLOPs, not {compute!r}.")
    a, b, al, be = params["A"], params["B"], params["alpha"], params["beta"]
    if not (al > 0 and be > 0 and a > 0 and b > 0):
        raise InvalidData("Compute-optimal allocation needs positive A, B, α and β.")
    g = (al * a / (be * b)) ** (1 / (al + be))
    n = g * (compute / 6) ** (be / (al + be))
    d = (compute / 6) ** (al / (al + be)) / g
    loss = params["E"] + a / n**al + b / d**be
    return Allocation(law or "fitted L(N, D)", compute, n, d, loss, "closed form, Hoffmann et al. 2022 Eq. 4")


def compute_optimal_numeric(params: dict[str, float], compute: float) -> tuple[float, float]:
    """The same optimum found numerically (bounded search over log N with D = C/(6N)): a check on the closed form."""
    from scipy.optimize import minimize_scalar

    c6 = compute / 6

    def loss(logn: float) -> float:
        n = math.exp(logn)
        return params["E"] + params["A"] / n ** params["alpha"] + params["B"] / (c6 / n) ** params["beta"]

    res = minimize_scalar(loss, bounds=(0.0, math.log(c6)), method="bounded", options={"xatol": 1e-10})
    n = math.exp(res.x)
    return n, c6 / n


def kaplan_optimal(compute: float) -> Allocation:
    """Kaplan et al. 2020's prescription: N_opt ≈ 1.3·10⁹ · C^0.73 with C in PF-days (Figure 14), D = C / (6N)."""
    if not (isinstance(compute, (int, float)) and math.isfinite(compute) and compute > 0):
        raise InvalidData(f"The compute budget must be a positive number of FLOPs, not {compute!r}.")
    pfd = compute / 8.64e19
    n = 1.3e9 * pfd**0.73
    return Allocation("Kaplan", compute, n, compute / (6 * n), None, f"{KAPLAN}, Figure 14: N_opt = 1.3e9 · C_min^0.73 (PF-days)")


def allocations(compute: float, fitted: dict[str, float] | None = None) -> list[Allocation]:
    """N_opt and D_opt under Chinchilla, its replication, Kaplan (and a fitted L(N, D)), side by side."""
    from dataclasses import replace

    out = [replace(compute_optimal(REFERENCE_LAWS[k].params, compute, REFERENCE_LAWS[k].name), source=REFERENCE_LAWS[k].source)
           for k in ("chinchilla", "besiroglu")]
    out.append(kaplan_optimal(compute))
    if fitted is not None:
        out.append(compute_optimal(fitted, compute, "your fit"))
    return out
