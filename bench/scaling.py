"""Fit and bootstrap times of the scaling-law fits (targets: fit < 1 s, 200-resample bootstrap < 3 s).

    python bench/scaling.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis import scaling

CASES = {
    "power": {"x_c": 8.8e13, "alpha": 0.076},
    "power_const": {"L_inf": 1.69, "A": 406.4, "alpha": 0.34},
    "chinchilla": scaling.REFERENCE_LAWS["chinchilla"].params,
}


def points(law: str, n: int) -> np.ndarray:
    rng = np.random.default_rng(n)
    if law == "chinchilla":
        return np.column_stack([10 ** rng.uniform(7, 10.5, n), 10 ** rng.uniform(9, 12.5, n)])
    return np.sort(10 ** rng.uniform(6, 11, n))


def main() -> None:
    scaling.fit("power", [1, 2, 3], [3, 2, 1.5], bootstrap=0)  # import scipy once, outside the timings
    print(f"{'law':12s} {'points':>6s} {'fit s':>7s} {'fit+200 boot s':>15s}   α (true → fitted ± se)")
    for law, params in CASES.items():
        for n in (10, 100, 1000):
            x = points(law, n)
            y = scaling.synthetic(law, params, x, noise=0.01, seed=n)
            t0 = time.perf_counter()
            scaling.fit(law, x, y, bootstrap=0)
            t_fit = time.perf_counter() - t0
            t0 = time.perf_counter()
            f = scaling.fit(law, x, y, bootstrap=200)
            t_boot = time.perf_counter() - t0
            print(f"{law:12s} {n:>6d} {t_fit:>7.3f} {t_boot:>15.2f}   {params['alpha']:.3f} → {f.params['alpha']:.3f} ± {f.stderr()['alpha']:.3f}")


if __name__ == "__main__":
    main()
