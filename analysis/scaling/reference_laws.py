"""Published scaling laws with their constants and sources, and their values at a point."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReferenceLaw:
    key: str
    name: str
    formula: str
    params: dict[str, float]
    variable: str
    source: str


KAPLAN = "Kaplan et al. 2020, Scaling Laws for Neural Language Models (arXiv 2001.08361)"
REFERENCE_LAWS: dict[str, ReferenceLaw] = {r.key: r for r in (
    ReferenceLaw("kaplan_n", "Kaplan L(N)", "L = (N_c / N)^α_N", {"x_c": 8.8e13, "alpha": 0.076},
                 "N: non-embedding parameters", f"{KAPLAN}, Eq. 1.1 / Table 5"),
    ReferenceLaw("kaplan_d", "Kaplan L(D)", "L = (D_c / D)^α_D", {"x_c": 5.4e13, "alpha": 0.095},
                 "D: tokens", f"{KAPLAN}, Eq. 1.2 / Table 5"),
    ReferenceLaw("kaplan_c", "Kaplan L(C_min)", "L = (C_c / C_min)^α_C", {"x_c": 3.1e8, "alpha": 0.050},
                 "C_min: PF-days", f"{KAPLAN}, Eq. 1.3 / Table 5"),
    ReferenceLaw("kaplan_nd", "Kaplan L(N, D)", "L = [(N_c/N)^(α_N/α_D) + D_c/D]^α_D",
                 {"N_c": 6.4e13, "D_c": 1.8e13, "alpha_N": 0.076, "alpha_D": 0.103},
                 "N: non-embedding parameters, D: tokens", f"{KAPLAN}, Eq. 1.5 / Table 2"),
    ReferenceLaw("chinchilla", "Chinchilla L(N, D)", "L = E + A/N^α + B/D^β",
                 {"E": 1.69, "A": 406.4, "B": 410.7, "alpha": 0.34, "beta": 0.28},
                 "N: parameters, D: tokens", "Hoffmann et al. 2022, Training Compute-Optimal LLMs (arXiv 2203.15556), Eq. 10 (Approach 3)"),
    ReferenceLaw("besiroglu", "Chinchilla replication L(N, D)", "L = E + A/N^α + B/D^β",
                 {"E": 1.8172, "A": 482.01, "B": 2085.43, "alpha": 0.3478, "beta": 0.3658},
                 "N: parameters, D: tokens", "Besiroglu et al. 2024, Chinchilla Scaling: A replication attempt (arXiv 2404.10102), Eq. 4"),
    ReferenceLaw("kaplan_bcrit", "Kaplan critical batch B_crit(L)", "B_crit = B_* / L^(1/α_B)", {"B_star": 2e8, "alpha_B": 0.21},
                 "L: loss in nats; B_crit in tokens", f"{KAPLAN}, Eq. 1.4"),
)}


def reference_value(key: str, *x: float) -> float:
    """A reference law at a point: one argument (N, D, C or L), or N and D for the two-variable ones."""
    ref = REFERENCE_LAWS[key]
    p = ref.params
    if key in ("kaplan_n", "kaplan_d", "kaplan_c"):
        return float((p["x_c"] / x[0]) ** p["alpha"])
    if key == "kaplan_nd":
        n, d = x
        return float(((p["N_c"] / n) ** (p["alpha_N"] / p["alpha_D"]) + p["D_c"] / d) ** p["alpha_D"])
    if key == "kaplan_bcrit":
        return float(p["B_star"] / x[0] ** (1 / p["alpha_B"]))
    n, d = x
    return float(p["E"] + p["A"] / n ** p["alpha"] + p["B"] / d ** p["beta"])
