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
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from core.errors import FitFailed, InvalidData

MAX_POINTS = 100_000
HUBER_DELTA = 1e-3  # Hoffmann et al. 2022, §D.2


class Law:
    """A law of the form log L = f(θ, log x): its formula, natural parameters, and the functions a fit needs.

    Internal parameters θ keep positivity where the law needs it (log A, log B, log E) and keep the power law linear:
    θ = (a, α) with log L = a − α·log x, a = α·log x_c (log x_c and α alone are so correlated that least squares stops
    early, and x_c = exp(a/α) leaves the floats as α nears 0, so predictions are made from θ, never from x_c).
    """

    key: str
    formula: str
    params: tuple[str, ...]
    variables: int  # 1: L(x); 2: L(N, D)

    def to_theta(self, p: dict[str, float]) -> np.ndarray:
        raise NotImplementedError

    def from_theta(self, t: np.ndarray) -> dict[str, float]:
        raise NotImplementedError

    def log_pred(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        """log L for internal parameters ``t`` and log inputs (n,) or (n, 2); NaN where L ≤ 0."""
        raise NotImplementedError

    def jacobian(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        """d log L / d θ, (n, p): analytic, so least squares needs no finite differences."""
        raise NotImplementedError

    def starts(self, logx: np.ndarray, logy: np.ndarray) -> list[np.ndarray]:
        """Starting points of the fit."""
        raise NotImplementedError


class PowerLaw(Law):
    key, formula, params, variables = "power", "L(x) = (x_c / x)^α", ("x_c", "alpha"), 1

    def to_theta(self, p: dict[str, float]) -> np.ndarray:
        if not p["x_c"] > 0:
            raise InvalidData(f"x_c must be above zero, not {p['x_c']!r}.")
        return np.array([p["alpha"] * math.log(p["x_c"]), p["alpha"]])

    def from_theta(self, t: np.ndarray) -> dict[str, float]:
        with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
            return {"x_c": float(np.exp(t[0] / t[1])) if t[1] else float("inf"), "alpha": float(t[1])}

    def log_pred(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        return t[0] - t[1] * logx

    def jacobian(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        return np.column_stack([np.ones(len(logx)), -logx])

    def starts(self, logx: np.ndarray, logy: np.ndarray) -> list[np.ndarray]:
        slope, icpt = np.polyfit(logx, logy, 1)  # the log-space linear fit
        return [np.array([icpt, -slope])]


class PowerLawWithConstant(Law):
    key, formula, params, variables = "power_const", "L(x) = L_∞ + A·x^(−α)", ("L_inf", "A", "alpha"), 1

    def to_theta(self, p: dict[str, float]) -> np.ndarray:
        if not p["A"] > 0:
            raise InvalidData(f"A must be above zero, not {p['A']!r}.")
        return np.array([p["L_inf"], math.log(p["A"]), p["alpha"]])

    def from_theta(self, t: np.ndarray) -> dict[str, float]:
        with np.errstate(over="ignore"):
            return {"L_inf": float(t[0]), "A": float(np.exp(t[1])), "alpha": float(t[2])}

    def log_pred(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            pred = t[0] + np.exp(t[1] - t[2] * logx)
            return np.where(pred > 0, np.log(np.where(pred > 0, pred, 1.0)), np.nan)

    def jacobian(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            u = np.exp(t[1] - t[2] * logx)
            pred = t[0] + u
            return np.column_stack([1 / pred, u / pred, -logx * u / pred])

    def starts(self, logx: np.ndarray, logy: np.ndarray) -> list[np.ndarray]:
        y, out = np.exp(logy), []
        for frac in (0.0, 0.5, 0.9, 0.99):  # L_∞ as a share of the smallest loss, then the linear fit of the rest
            linf = frac * y.min()
            slope, icpt = np.polyfit(logx, np.log(y - linf), 1)
            out.append(np.array([linf, icpt, -slope]))
        return out


class ChinchillaLaw(Law):
    key, formula, params, variables = "chinchilla", "L(N, D) = E + A/N^α + B/D^β", ("E", "A", "B", "alpha", "beta"), 2

    def to_theta(self, p: dict[str, float]) -> np.ndarray:
        bad = [k for k in ("E", "A", "B") if not p[k] > 0]
        if bad:
            raise InvalidData(f"{', '.join(bad)} must be above zero.")
        return np.array([math.log(p["E"]), math.log(p["A"]), math.log(p["B"]), p["alpha"], p["beta"]])

    def from_theta(self, t: np.ndarray) -> dict[str, float]:
        with np.errstate(over="ignore"):
            return {"E": float(np.exp(t[0])), "A": float(np.exp(t[1])), "B": float(np.exp(t[2])), "alpha": float(t[3]),
                    "beta": float(t[4])}

    @staticmethod
    def _terms(t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        return np.stack([np.full(len(logx), t[0]), t[1] - t[3] * logx[:, 0], t[2] - t[4] * logx[:, 1]])

    def log_pred(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            terms = self._terms(t, logx)
            m = terms.max(axis=0)
            return m + np.log(np.exp(terms - m).sum(axis=0))  # log-sum-exp, as Chinchilla fits it

    def jacobian(self, t: np.ndarray, logx: np.ndarray) -> np.ndarray:
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            terms = self._terms(t, logx)
            w = np.exp(terms - terms.max(axis=0))
            w /= w.sum(axis=0)  # softmax weights of the three terms
            return np.column_stack([w[0], w[1], w[2], -logx[:, 0] * w[1], -logx[:, 1] * w[2]])

    def starts(self, logx: np.ndarray, logy: np.ndarray) -> list[np.ndarray]:
        # a coarse grid (as Hoffmann et al. did), keep the 4 best by Huber cost
        grid = [np.array([e, a, b, al, be]) for e in np.log(np.exp(logy).min()) + np.log([0.5, 0.9])
                for a in (2.0, 6.0, 10.0) for b in (2.0, 6.0, 10.0) for al in (0.2, 0.5, 1.0) for be in (0.2, 0.5, 1.0)]
        costs = [_huber_cost(self, t, logx, logy) for t in grid]
        return [grid[i] for i in np.argsort(costs)[:4]]


LAWS: dict[str, Law] = {law.key: law for law in (PowerLaw(), PowerLawWithConstant(), ChinchillaLaw())}


def _law(key: str) -> Law:
    if not isinstance(key, str) or key not in LAWS:
        raise InvalidData(f"Unknown law {str(key)[:40]!r}.", "Laws: " + ", ".join(LAWS) + ".")
    return LAWS[key]


def evaluate(law: str, params: dict[str, float], x: Any) -> np.ndarray:
    """L at ``x`` ((n,) for one-variable laws, (n, 2) columns N, D for ``chinchilla``) for natural parameters."""
    spec = _law(law)
    return np.exp(spec.log_pred(spec.to_theta(params), np.log(np.asarray(x, dtype=float))))


# ---------------------------------------------------------------------------------- validating data


def _as_numbers(name: str, values: Any) -> np.ndarray:
    arr = np.asarray(values, dtype=object).reshape(-1)
    out = np.empty(len(arr), dtype=float)
    for i, v in enumerate(arr):
        try:
            out[i] = float(v)
        except (TypeError, ValueError):
            raise InvalidData(f"Row {i + 1} of {name} is {v!r}, not a number.", "Fix or delete that row.") from None
        if not math.isfinite(out[i]):
            raise InvalidData(f"Row {i + 1} of {name} is empty or not finite ({v!r}).", "Fill it in or delete that row.")
        if out[i] <= 0:
            raise InvalidData(f"Row {i + 1} of {name} is {out[i]:g}: power laws need values above zero.",
                              "Remove zeros and negatives (a log scale has no place for them).")
    return out


def prepare(law: str, x: Any, y: Any) -> tuple[np.ndarray, np.ndarray]:
    """Validate and convert the points: x (n,) or (n, 2) for ``chinchilla``, y (n,). Raises :class:`InvalidData`."""
    spec = _law(law)
    yv = _as_numbers("y", y)
    if spec.variables == 2:
        xa = np.asarray(x, dtype=object)
        if xa.ndim != 2 or xa.shape[1] != 2:
            raise InvalidData("L(N, D) needs two columns of x: N (parameters) and D (tokens).")
        xv = np.column_stack([_as_numbers("N", xa[:, 0]), _as_numbers("D", xa[:, 1])])
    else:
        xv = _as_numbers("x", x)
    if len(xv) != len(yv):
        raise InvalidData(f"x has {len(xv)} values and y has {len(yv)}.")
    n, p = len(yv), len(spec.params)
    if n > MAX_POINTS:
        raise InvalidData(f"{n:,} points is more than the limit of {MAX_POINTS:,}.", "Average or subsample them first.")
    if n < p + 1:
        raise InvalidData(f"{spec.formula} has {p} parameters and needs at least {p + 1} points; there are {n}.",
                          "Add points, or choose a law with fewer parameters.")
    columns = [xv] if xv.ndim == 1 else [xv[:, 0], xv[:, 1]]
    for col, name in zip(columns, ("x",) if xv.ndim == 1 else ("N", "D"), strict=True):
        if np.unique(col).size < 2:
            raise InvalidData(f"All values of {name} are equal: there is nothing to fit against.", f"Vary {name} across the points.")
    return xv, yv


# --------------------------------------------------------------------------------------------- fits


@dataclass(frozen=True)
class Fit:
    """A fitted law. ``theta`` holds its internal parameters (see :class:`Law`), ``boot_theta`` the bootstrap fits' (B, p);
    ``boot`` the bootstrap fits in natural parameters, (B, p) in the order of ``LAWS[law].params``."""

    law: str
    params: dict[str, float]
    x: np.ndarray = field(repr=False)
    y: np.ndarray = field(repr=False)
    boot: np.ndarray | None = field(default=None, repr=False)
    starts: int = 1
    huber_delta: float = HUBER_DELTA
    theta: np.ndarray | None = field(default=None, repr=False)
    boot_theta: np.ndarray | None = field(default=None, repr=False)

    @property
    def formula(self) -> str:
        return LAWS[self.law].formula

    def _theta(self) -> np.ndarray:
        return self.theta if self.theta is not None else LAWS[self.law].to_theta(self.params)

    def predict(self, x: Any) -> np.ndarray:
        """L at ``x``, from the fit's internal parameters (finite wherever the fit is, even where x_c is not)."""
        return np.exp(LAWS[self.law].log_pred(self._theta(), np.log(np.asarray(x, dtype=float))))

    @property
    def residuals(self) -> np.ndarray:
        """log y − log L(x): relative residuals of the points (n,)."""
        return np.log(self.y) - np.log(self.predict(self.x))

    @property
    def rmse_log(self) -> float:
        return float(np.sqrt(np.mean(self.residuals**2)))

    @property
    def r2_log(self) -> float:
        """R² of log y (1 = every point on the curve)."""
        ly = np.log(self.y)
        ss = float(np.sum((ly - ly.mean()) ** 2))
        return 1.0 - float(np.sum(self.residuals**2)) / ss if ss else float("nan")

    def stderr(self) -> dict[str, float]:
        """Bootstrap standard deviation of each parameter (NaN without a bootstrap, or where a resample's is not finite)."""
        names = LAWS[self.law].params
        if self.boot is None or len(self.boot) < 2:
            return dict.fromkeys(names, float("nan"))
        with np.errstate(invalid="ignore", over="ignore"):
            return {k: float(np.std(self.boot[:, i], ddof=1)) for i, k in enumerate(names)}

    def interval(self, level: float = 0.95) -> dict[str, tuple[float, float]]:
        """Bootstrap percentile interval of each parameter."""
        names = LAWS[self.law].params
        if self.boot is None or len(self.boot) < 2:
            return {k: (float("nan"), float("nan")) for k in names}
        q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
        return {k: tuple(float(v) for v in np.percentile(self.boot[:, i], q)) for i, k in enumerate(names)}

    def band(self, x: Any, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Pointwise confidence band of L(x) from the bootstrap fits (lo, hi), each (n,)."""
        x = np.asarray(x, dtype=float)
        if self.boot_theta is None or len(self.boot_theta) < 2:
            mid = self.predict(x)
            return mid, mid
        spec, logx = LAWS[self.law], np.log(x)
        with np.errstate(over="ignore"):
            preds = np.exp(np.array([spec.log_pred(t, logx) for t in self.boot_theta]))
        q = [(1 - level) / 2 * 100, (1 + level) / 2 * 100]
        lo, hi = np.nanpercentile(preds, q, axis=0)
        return lo, hi

    def table(self, level: float = 0.95) -> list[dict[str, Any]]:
        """One row per parameter: value, bootstrap standard error, interval."""
        se, ci = self.stderr(), self.interval(level)
        return [{"parameter": k, "value": v, "std. error": se[k], f"{level:.0%} low": ci[k][0], f"{level:.0%} high": ci[k][1]}
                for k, v in self.params.items()]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary: law, formula, parameters with uncertainty, fit quality, data."""
        return {"law": self.law, "formula": self.formula, "parameters": self.params, "std_errors": self.stderr(),
                "interval_95": {k: list(v) for k, v in self.interval().items()},
                "bootstrap_resamples": 0 if self.boot is None else len(self.boot), "rmse_log": self.rmse_log,
                "r2_log": self.r2_log, "huber_delta": self.huber_delta, "points": len(self.y),
                "x": self.x.tolist(), "y": self.y.tolist()}


def _huber_cost(law: Law, t: np.ndarray, logx: np.ndarray, logy: np.ndarray, delta: float = HUBER_DELTA) -> float:
    r = law.log_pred(t, logx) - logy
    if not np.all(np.isfinite(r)):
        return float("inf")
    a = np.abs(r)
    return float(np.sum(np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))))


def _refine(law: Law, t0: np.ndarray, logx: np.ndarray, logy: np.ndarray, delta: float, strict: bool = True):
    """One robust least-squares fit from ``t0`` (2,000 evaluations at most). ``strict``: a fit that used up its
    evaluations is refused (the data's own fit tries the next start); a bootstrap refit keeps its last point, since
    dropping the hard resamples would narrow the interval."""
    from scipy.optimize import least_squares

    def residual(t: np.ndarray) -> np.ndarray:
        r = law.log_pred(t, logx) - logy
        return np.where(np.isfinite(r), r, 1e3)

    def jac(t: np.ndarray) -> np.ndarray:
        j = law.jacobian(t, logx)
        return np.where(np.isfinite(j), j, 0.0)

    try:
        res = least_squares(residual, t0, jac=jac, loss="huber", f_scale=delta, method="trf", x_scale=1.0,
                            max_nfev=2000, ftol=1e-8, xtol=1e-8, gtol=1e-8)
    except (ValueError, FloatingPointError):
        return None
    if not np.all(np.isfinite(res.x)) or res.status < 0 or (res.status == 0 and strict):
        return None
    return res


def _fit_theta(law: Law, logx: np.ndarray, logy: np.ndarray, starts: list[np.ndarray], delta: float,
               strict: bool = True) -> np.ndarray | None:
    best, best_cost = None, float("inf")
    for t0 in starts:
        res = _refine(law, t0, logx, logy, delta, strict)
        if res is None:
            continue
        cost = _huber_cost(law, res.x, logx, logy, delta)
        if cost < best_cost:
            best, best_cost = res.x, cost
    return best


def fit(law: str, x: Any, y: Any, bootstrap: int = 200, seed: int = 0, huber_delta: float = HUBER_DELTA) -> Fit:
    """Fit ``law`` to the points (x, y); ``bootstrap`` resamples for the uncertainty (0: none).

    Raises:
        InvalidData: too few points, non-numbers, zeros/negatives, NaN, all-equal x.
        FitFailed: no start converged to finite parameters.
    """
    if not (isinstance(bootstrap, int) and 0 <= bootstrap <= 10_000):
        raise InvalidData("The number of bootstrap resamples must be a whole number from 0 to 10,000.")
    xv, yv = prepare(law, x, y)
    spec = LAWS[law]
    logx, logy = np.log(xv), np.log(yv)
    starts = spec.starts(logx, logy)
    theta = _fit_theta(spec, logx, logy, starts, huber_delta)
    if theta is None or not np.all(np.isfinite(spec.log_pred(theta, logx))):
        raise FitFailed(f"The fit of {spec.formula} did not converge from {len(starts)} starting points.",
                        "Try the simpler law L(x) = (x_c / x)^α, or check the points for outliers.")
    params = spec.from_theta(theta)
    try:  # the natural parameters must say what θ says (x_c = exp(a/α) leaves the floats as α nears 0)
        faithful = np.allclose(spec.to_theta(params), theta, rtol=1e-6, atol=1e-9)
    except InvalidData:
        faithful = False
    if not faithful:
        raise FitFailed(f"The fit of {spec.formula} ends at parameters beyond the floats ("
                        + ", ".join(f"{k} = {v:g}" for k, v in params.items()) + "): y hardly changes with x here.",
                        "Pick a y that falls (or rises) with x, or the law with a constant term.")
    boot = boot_theta = None
    if bootstrap:
        rng = np.random.default_rng(seed)
        thetas, n = [], len(yv)
        for _ in range(bootstrap):
            idx = rng.integers(0, n, n)
            lx = logx[idx]
            cols = [lx] if lx.ndim == 1 else [lx[:, 0], lx[:, 1]]
            if any(np.unique(c).size < 2 for c in cols):
                continue  # a resample without spread cannot be fitted; skip it
            # Each resample is fitted to convergence, as the data's own fit is: capping its evaluations (50 once) left
            # resamples near θ and the interval too narrow (Chinchilla's law covered its exponents 85% of the time at
            # 95%, 92.5% uncapped; tests/test_scaling.py). One that uses up its evaluations keeps its last point.
            t = _fit_theta(spec, lx, logy[idx], [theta], huber_delta, strict=False)
            if t is not None and np.all(np.isfinite(t)):
                thetas.append(t)
        if thetas:
            boot_theta = np.array(thetas)
            boot = np.array([[spec.from_theta(t)[k] for k in spec.params] for t in thetas])
    return Fit(law, params, xv, yv, boot, len(starts), huber_delta, theta, boot_theta)


# ------------------------------------------------------------------------------------ reference laws


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


# -------------------------------------------------------------------------------- compute-optimal


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


def synthetic(law: str, params: dict[str, float], x: Sequence[float] | np.ndarray, noise: float = 0.01, seed: int = 0) -> np.ndarray:
    """Points from ``law`` with multiplicative log-normal noise of relative size ``noise`` (for tests and demos)."""
    rng = np.random.default_rng(seed)
    clean = evaluate(law, params, x)
    return clean * np.exp(rng.normal(0.0, noise, size=clean.shape))


# ------------------------------------------------------------------------------------ built-in data

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "scaling"


@dataclass(frozen=True)
class Dataset:
    key: str
    title: str
    x: str  # default x column
    y: str  # default y column
    law: str  # default law
    description: str


DATASETS: dict[str, Dataset] = {d.key: d for d in (
    Dataset("bert_size_ablation", "BERT model-size ablation (Table 6)", "parameters", "lm_ppl", "power",
            "Masked-LM perplexity and dev accuracy as BERT grows from 3 to 24 layers. Parameters are computed exactly "
            "(analysis.params) for a BERT with V = 30,522 and FFN = 4H; the paper's table lists only L, H, A."),
    Dataset("roberta_batch_size", "RoBERTa batch size (Table 3)", "batch_size", "ppl", "power",
            "Same compute, bigger batches: perplexity and accuracy by batch size."),
    Dataset("megatron_bert_results", "Megatron-BERT sizes and results (Table 5)", "parameters", "race", "power",
            "Dev-set accuracy/F1 of 336M, 1.3B and 3.9B BERT-style models (RACE: test)."),
    Dataset("megatron_sizes", "Megatron-LM scaling-study configurations (Table 1)", "parameters", "model_parallel_gpus", "power",
            "Hidden size, heads, layers, parameters and GPUs of the GPT-2-style weak-scaling runs."),
    Dataset("albert_configs", "BERT vs ALBERT configurations and averages (Tables 1-2)", "parameters", "avg", "power",
            "Parameters against the average of SQuAD 1.1/2.0, MNLI, SST-2 and RACE dev scores."),
    Dataset("albert_embedding_size", "ALBERT embedding size E (Table 3)", "parameters", "avg", "power",
            "ALBERT-base with E = 64 … 768, with and without cross-layer sharing."),
    Dataset("params_by_year", "Model sizes by year (the catalog)", "year", "parameters", "power",
            "Every model in the catalog: exact counts for downloadable checkpoints, else the paper's figure."),
)}


def load_dataset(key: str):
    """A built-in data set as a pandas DataFrame, with a ``source`` column on every row."""
    import pandas as pd

    if key not in DATASETS:
        raise InvalidData(f"Unknown data set {key!r}.", "Data sets: " + ", ".join(DATASETS) + ".")
    if key == "params_by_year":
        from core import registry

        return pd.DataFrame([{"model": c.id, "year": c.year, "parameters": c.parameters, "objective": c.objective,
                              "source": f"{c.paper} (arXiv {c.arxiv})" if c.arxiv else c.paper,
                              "note": "exact count of the transformers base model" if c.loadable else f"paper: {c.parameters_reported}"}
                             for c in registry.all_models()])
    df = pd.read_csv(DATA_DIR / f"{key}.csv")
    if key == "bert_size_ablation":
        from analysis.params import parameter_breakdown

        rows = [parameter_breakdown({"model_type": "bert", "hidden_size": int(r.hidden), "num_hidden_layers": int(r.layers),
                                     "num_attention_heads": int(r.heads), "intermediate_size": 4 * int(r.hidden)})
                for r in df.itertuples()]
        df.insert(3, "parameters", [b.total for b in rows])
        df.insert(4, "non_embedding_parameters", [b.non_embedding for b in rows])
    return df


MAX_CSV_BYTES = 5 * 2**20
MAX_CSV_ROWS = 10_000


def read_csv(raw: bytes):
    """A user's CSV as a DataFrame, within :data:`MAX_CSV_BYTES` and :data:`MAX_CSV_ROWS`. Raises :class:`InvalidData`."""
    import io

    import pandas as pd

    if len(raw) > MAX_CSV_BYTES:
        raise InvalidData(f"The file is {len(raw) / 2**20:.1f} MB; the limit is {MAX_CSV_BYTES // 2**20} MB.",
                          "Average or subsample the points first.")
    try:
        df = pd.read_csv(io.BytesIO(raw), nrows=MAX_CSV_ROWS + 1)
    except (pd.errors.ParserError, UnicodeDecodeError, pd.errors.EmptyDataError) as err:
        raise InvalidData(f"This file could not be read as CSV ({type(err).__name__}).",
                          "Save it as comma-separated values with a header row.") from None
    if len(df) > MAX_CSV_ROWS:
        raise InvalidData(f"The file has more than {MAX_CSV_ROWS:,} rows.", "Average or subsample the points first.")
    return df


def numeric_columns(df) -> list[str]:
    """Columns that are numbers on every row (candidates for x and y)."""
    import pandas as pd

    return [c for c in df.columns if c not in ("source", "note") and pd.to_numeric(df[c], errors="coerce").notna().all()]
