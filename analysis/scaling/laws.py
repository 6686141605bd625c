"""The three laws a fit can take, each an object that carries what a fit needs: its formula (also its label in a
law picker), its parameters, the reparametrisation θ that the fit works in, log L and its Jacobian in θ, its
starting points, and the robust cost the fit minimises."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from core.errors import InvalidData

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

    def predict(self, params: dict[str, float], x: Any) -> np.ndarray:
        """L at ``x`` ((n,), or (n, 2) columns N, D for a two-variable law) for natural parameters ``params``."""
        return np.exp(self.log_pred(self.to_theta(params), np.log(np.asarray(x, dtype=float))))

    @property
    def label(self) -> str:
        """What a law picker shows: the formula."""
        return self.formula

    def cost(self, t: np.ndarray, logx: np.ndarray, logy: np.ndarray, delta: float = HUBER_DELTA) -> float:
        """The Huber cost (threshold ``delta``) of the log residuals at ``t``: what a fit minimises, and what picks the
        best of its starts; infinite where a prediction is not finite."""
        r = self.log_pred(t, logx) - logy
        if not np.all(np.isfinite(r)):
            return float("inf")
        a = np.abs(r)
        return float(np.sum(np.where(a <= delta, 0.5 * r**2, delta * (a - 0.5 * delta))))


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
        # filled row by row rather than np.stack'ed: the same numbers in a third of the time (a fit evaluates it
        # hundreds of times, a bootstrap tens of thousands)
        terms = np.empty((3, len(logx)))
        terms[0] = t[0]
        np.subtract(t[1], t[3] * logx[:, 0], out=terms[1])
        np.subtract(t[2], t[4] * logx[:, 1], out=terms[2])
        return terms

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
            jac = np.empty((len(logx), 5))
            jac[:, :3] = w.T
            np.multiply(-logx[:, 0], w[1], out=jac[:, 3])
            np.multiply(-logx[:, 1], w[2], out=jac[:, 4])
            return jac

    def starts(self, logx: np.ndarray, logy: np.ndarray) -> list[np.ndarray]:
        # a coarse grid (as Hoffmann et al. did), keep the 4 best by Huber cost
        grid = [np.array([e, a, b, al, be]) for e in np.log(np.exp(logy).min()) + np.log([0.5, 0.9])
                for a in (2.0, 6.0, 10.0) for b in (2.0, 6.0, 10.0) for al in (0.2, 0.5, 1.0) for be in (0.2, 0.5, 1.0)]
        costs = [self.cost(t, logx, logy) for t in grid]
        return [grid[i] for i in np.argsort(costs)[:4]]


LAWS: dict[str, Law] = {law.key: law for law in (PowerLaw(), PowerLawWithConstant(), ChinchillaLaw())}


def get_law(key: str) -> Law:
    """The law ``key`` of :data:`LAWS`; :class:`InvalidData` naming the laws for any other key."""
    if not isinstance(key, str) or key not in LAWS:
        raise InvalidData(f"Unknown law {str(key)[:40]!r}.", "Laws: " + ", ".join(LAWS) + ".")
    return LAWS[key]


def evaluate(law: str, params: dict[str, float], x: Any) -> np.ndarray:
    """L at ``x`` ((n,) for one-variable laws, (n, 2) columns N, D for ``chinchilla``) for natural parameters."""
    return get_law(law).predict(params, x)


def synthetic(law: str, params: dict[str, float], x: Sequence[float] | np.ndarray, noise: float = 0.01, seed: int = 0) -> np.ndarray:
    """Points from ``law`` with multiplicative log-normal noise of relative size ``noise`` (for tests and demos)."""
    rng = np.random.default_rng(seed)
    clean = evaluate(law, params, x)
    return clean * np.exp(rng.normal(0.0, noise, size=clean.shape))
