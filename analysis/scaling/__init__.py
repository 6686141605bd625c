"""Scaling laws: fit, compare and extrapolate power laws, with bootstrap uncertainty (no torch).

Three laws (:data:`LAWS`):

- ``power``:        L(x) = (x_c / x)^α                       (Kaplan et al. 2020's one-variable form)
- ``power_const``:  L(x) = L_∞ + A·x^(−α)                    (with an irreducible term)
- ``chinchilla``:   L(N, D) = E + A/N^α + B/D^β              (Hoffmann et al. 2022, Eq. 2)

:func:`fit` starts from a linear fit in log space (or a grid of starts), refines each start with a
robust non-linear least squares on log residuals (Huber loss, δ = 10⁻³, as Chinchilla's Approach 3),
keeps the best, and bootstraps the points for standard errors and confidence bands.
:data:`REFERENCE_LAWS` holds published constants with their sources; :func:`compute_optimal`
gives N_opt(C), D_opt(C) under C = 6·N·D in closed form.

Where to look: :mod:`.laws` (the laws as objects: formula and label, parameters, θ, log L, Jacobian, starts, cost),
:mod:`.fitting` (:func:`prepare`, :func:`fit`, :class:`Fit`), :mod:`.reference_laws`, :mod:`.allocations`
(compute-optimal N and D), :mod:`.data` (the built-in data sets and users' CSVs).
"""

from __future__ import annotations

from analysis.scaling.allocations import (
    Allocation,
    allocations,
    compute_optimal,
    compute_optimal_numeric,
    kaplan_optimal,
)
from analysis.scaling.data import (
    DATA_DIR,
    DATASETS,
    MAX_CSV_BYTES,
    MAX_CSV_ROWS,
    Dataset,
    load_dataset,
    numeric_columns,
    read_csv,
)
from analysis.scaling.fitting import MAX_POINTS, Fit, fit, prepare
from analysis.scaling.laws import (
    HUBER_DELTA,
    LAWS,
    ChinchillaLaw,
    Law,
    PowerLaw,
    PowerLawWithConstant,
    evaluate,
    get_law,
    synthetic,
)
from analysis.scaling.reference_laws import KAPLAN, REFERENCE_LAWS, ReferenceLaw, reference_value

__all__ = ["DATASETS", "DATA_DIR", "HUBER_DELTA", "KAPLAN", "LAWS", "MAX_CSV_BYTES", "MAX_CSV_ROWS", "MAX_POINTS",
           "REFERENCE_LAWS", "Allocation", "ChinchillaLaw", "Dataset", "Fit", "Law", "PowerLaw", "PowerLawWithConstant",
           "ReferenceLaw", "allocations", "compute_optimal", "compute_optimal_numeric", "evaluate", "fit", "get_law",
           "kaplan_optimal", "load_dataset", "numeric_columns", "prepare", "read_csv", "reference_value", "synthetic"]
