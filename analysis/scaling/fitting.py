"""Fitting a law to points: the points checked (:func:`prepare`), a robust non-linear least squares on log residuals
from each of the law's starts, the best kept, and the points bootstrapped for standard errors and bands
(:class:`Fit`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from analysis.scaling.laws import HUBER_DELTA, LAWS, Law, get_law
from core.errors import FitFailed, InvalidData

MAX_POINTS = 100_000


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
    spec = get_law(law)
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
        cost = law.cost(res.x, logx, logy, delta)
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
            # Each resample is fitted to convergence, as the data's own fit is: capping its evaluations left resamples
            # near θ and the interval too narrow (Chinchilla's law's coverage at 95%, capped and uncapped:
            # tests/analysis/test_scaling.py, bench/results/README.md). One that uses up its evaluations keeps its last
            # point.
            t = _fit_theta(spec, lx, logy[idx], [theta], huber_delta, strict=False)
            if t is not None and np.all(np.isfinite(t)):
                thetas.append(t)
        if thetas:
            boot_theta = np.array(thetas)
            boot = np.array([[spec.from_theta(t)[k] for k in spec.params] for t in thetas])
    return Fit(law, params, xv, yv, boot, len(starts), huber_delta, theta, boot_theta)
