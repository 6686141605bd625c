"""Simulated arms whose seed and test-item noise are known: the verdict rule's coverage is checked on them
(tests/analysis/test_verdicts.py, bench/verdicts.py coverage); and planted μTransfer grids (:func:`planted`:
tests/analysis/test_transfer_rule.py, bench/transfer_rule.py)."""

from __future__ import annotations

import numpy as np


def arms(rng, true: float, seeds: int, items: int, shared: bool | float, cluster: int = 1, seed_sd: float = 0.015,
          sure: bool = False, tasks: int = 1, seeds_b: int | None = None):
    """Two arms' per-seed scores and per-item correctness, with known seed and item noise. Items come from a
    population: a lemma of ``cluster`` items shares its difficulty class and its effect of a over b (mean ``true``);
    each seed moves a against b (sd ``seed_sd``) and both together. ``shared``: True, every seed scores the same items
    (a fixed test set); False, each seed draws its own; a fraction f, each seed draws its items from a pool of
    ``items / f`` (partial overlap). ``sure``: most items nearly always right or wrong, as a fine-tuned model's are.
    ``tasks``: the items split into that many tasks and the score is their average (weights 1/(n·T), strata).
    ``seeds_b``: arm b's own seed count (unpaired, Welch)."""
    per_task = items // tasks

    def population(n: int, tag: str):
        lemmas = -(-n // cluster)
        if sure:  # 80% of lemmas settled (both arms nearly always right, or wrong); 20% contested: one arm's
            contested = np.repeat(rng.random(lemmas) < 0.2, cluster)[:n]
            p = np.where(contested, 0.5, np.repeat(rng.choice([0.03, 0.97], lemmas), cluster)[:n])
            effect = true + np.where(contested, np.repeat(rng.choice([-0.8, 0.8], lemmas), cluster)[:n], 0.0)
        else:
            p = rng.uniform(0.35, 0.75, n)
            effect = np.repeat(true + rng.uniform(-0.3, 0.3, lemmas), cluster)[:n]
        return p, effect, np.array([f"{tag}:{i}" for i in range(n)]), np.array([f"{tag}:{i // cluster}" for i in range(n)])

    pool_size = per_task if shared is True else int(per_task / shared) if shared else 0
    pools = [population(pool_size, f"t{t}") for t in range(tasks)] if pool_size else None

    def draw(s: int):
        parts = []
        for t in range(tasks):
            if pools is None:
                parts.append(population(per_task, f"s{s}t{t}"))
            else:
                pick = np.sort(rng.choice(pool_size, per_task, replace=False))
                parts.append(tuple(x[pick] for x in pools[t]))
        return parts

    def arm(sign: float, count: int):
        scores, rows = [], []
        for s in range(count):
            u, v = rng.normal(0, seed_sd), rng.normal(0, 0.005 if sure else 0.02)
            values, ids, clusters, strata, weights = [], [], [], [], []
            for t, (p, effect, i, c) in enumerate(draws[s]):
                values.append(rng.binomial(1, np.clip(p + sign * (effect + u) / 2 + v, 0, 1)))
                ids.append(i)
                clusters.append(c)
                strata.append(np.full(len(i), f"t{t}"))
                weights.append(np.full(len(i), 1 / (len(i) * tasks)))
            y, w = np.concatenate(values), np.concatenate(weights)
            scores.append(float((w * y).sum()))
            rows.append({"values": y, "ids": np.concatenate(ids), "clusters": np.concatenate(clusters),
                         "strata": np.concatenate(strata), "weights": w})
        return scores, rows

    draws = [draw(s) for s in range(max(seeds, seeds_b or 0))]
    sa, ia = arm(+1, seeds)
    sb, ib = arm(-1, seeds_b or seeds)
    return sa, sb, ia, ib


#: The thorough μTransfer grid's shape: 6 rates a factor 2 apart, widths 32 and 256.
RATES = [2.0 ** k for k in range(-12, -6)]
WIDTHS = (32, 256)


def planted(rng, optimum: dict[tuple[str, int], float], curvature: float = 0.15, noise: float = 0.03, seeds: int = 2,
            gain: float = 0.3, widths=WIDTHS):
    """Points and gains: loss = 6.5 + the seed's level + curvature × (rate index − optimum)² + noise."""
    pts, gains = [], []
    for s in range(seeds):
        level = rng.normal(0, 0.2)  # seeds hold out different text
        for p in ("sp", "mup"):
            for w in widths:
                for i, r in enumerate(RATES):
                    loss = 6.5 + level + curvature * (i - optimum[p, w]) ** 2 + rng.normal(0, noise)
                    pts.append((p, s, w, r, loss))
                    gains.append((p, s, w, r, gain + rng.normal(0, 0.01)))
    return pts, gains


def shifted(mup: float = 3.3, sp: float = 3.3, shift: int = 3) -> dict[tuple[str, int], float]:
    return {("mup", 32): mup, ("mup", 256): mup, ("sp", 32): sp, ("sp", 256): sp - shift}
