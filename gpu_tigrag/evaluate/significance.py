"""Paired significance tests between systems over the same queries, as ranx's `compare` runs them
(Smucker, Allan and Carterette, CIKM 2007):

* the two-sided paired Student's t-test on the per-query values (`scipy.stats.ttest_rel`, as ranx);
* the paired randomisation test (Fisher's, approximated by sampling): under the null hypothesis the
  two systems are exchangeable on each query, so each query's pair of values is swapped at random
  (equivalently, the sign of its difference flipped); the p-value is the fraction of `permutations`
  random swaps whose |mean difference| is at least the observed one (ranx's estimate, without the
  +1 correction).

The randomisation test is seeded (`seed`, default 42 as in ranx) and its swaps are drawn from
NumPy's PCG64 in a fixed order, so a run gives the same p-values every time, whatever the machine;
every comparison of a run uses the same swaps (ranx re-seeds each comparison with the same seed).
Identical per-query values (no difference at all) have p = 1 in both tests. No correction for
multiple comparisons is applied (nor does ranx apply one by default).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

#: significance level of the report's markers
ALPHA = 0.05
#: random swaps of the randomisation test (ranx's default is 1,000; more gives a steadier estimate)
PERMUTATIONS = 10_000
#: seed of the random swaps (ranx's default)
SEED = 42
#: the test whose p-value decides the report's markers
MARKER_TEST = "paired randomisation test"
#: rows of random swaps drawn at a time (fixed, so the p-values do not depend on memory)
_BLOCK = 512


def paired_t_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the paired t-test of `a` vs `b` (1.0 when they are identical)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _check(a, b)
    diff = a - b
    if not np.any(diff):
        return 1.0
    if np.all(diff == diff[0]):  # a constant non-zero difference: no variance, the difference is certain
        return 0.0
    from scipy.stats import ttest_rel

    return float(ttest_rel(a, b, alternative="two-sided").pvalue)


def _swap_blocks(n_queries: int, permutations: int, seed: int):
    """The random swaps of the randomisation test, in blocks of at most `_BLOCK` rows of ±1 (float64),
    permutations × queries in all; the same for the same (queries, permutations, seed)."""
    rng = np.random.Generator(np.random.PCG64(seed))
    for start in range(0, permutations, _BLOCK):
        rows = min(_BLOCK, permutations - start)
        yield 1.0 - 2.0 * rng.integers(0, 2, size=(rows, n_queries), dtype=np.int8)


def randomization_pvalues(diffs: np.ndarray, permutations: int = PERMUTATIONS, seed: int = SEED) -> np.ndarray:
    """p-values of the paired randomisation test for each column of `diffs` (queries × metrics, the
    per-query differences of two systems), all drawn from the same random swaps."""
    diffs = np.asarray(diffs, dtype=np.float64)
    n = diffs.shape[0]
    if n == 0 or permutations < 1:
        return np.ones(diffs.shape[1])
    observed = np.abs(diffs.mean(axis=0))
    hits = np.zeros(diffs.shape[1], dtype=np.int64)
    for signs in _swap_blocks(n, permutations, seed):
        permuted = np.abs(signs @ diffs) / n
        # the identity swap computes the observed mean in another order: allow for its last bits
        hits += np.count_nonzero(permuted >= observed - 1e-12, axis=0)
    p = hits / permutations
    p[~np.any(diffs, axis=0)] = 1.0
    return p


def randomization_test(a: Sequence[float], b: Sequence[float], permutations: int = PERMUTATIONS,
                       seed: int = SEED) -> float:
    """p-value of the paired randomisation test of `a` vs `b` (two-sided: |mean difference|)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _check(a, b)
    return float(randomization_pvalues((a - b)[:, None], permutations, seed)[0])


def _check(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("paired tests need one value per query for both systems")


def compare_systems(per_query: dict[str, dict[str, Sequence[float]]], baseline: str, metrics: Sequence[str],
                    permutations: int = PERMUTATIONS, seed: int = SEED, alpha: float = ALPHA) -> dict[str, Any]:
    """Every system of `per_query` ({system: {metric: values}}) against `baseline` on each of `metrics`
    (those both carry): the difference of the means (system − baseline), both p-values, and
    `significant` (randomisation test p < alpha). The result records the test settings."""
    base = per_query[baseline]
    out: dict[str, Any] = {"baseline": baseline, "alpha": alpha, "marker_test": MARKER_TEST,
                           "tests": {"p_t_test": "paired t-test (two-sided)",
                                     "p_randomization": f"paired randomisation test ({permutations:,} random swaps, "
                                                        f"seed {seed})"},
                           "permutations": permutations, "seed": seed, "systems": {}}
    for name, values in per_query.items():
        if name == baseline:
            continue
        shared = [m for m in metrics if m in values and m in base]
        if not shared:
            out["systems"][name] = {}
            continue
        a = np.array([values[m] for m in shared], dtype=np.float64).T
        b = np.array([base[m] for m in shared], dtype=np.float64).T
        _check(a[:, 0], b[:, 0])
        p_rand = randomization_pvalues(a - b, permutations, seed)
        out["systems"][name] = {
            m: {"delta": float(np.mean(a[:, j])) - float(np.mean(b[:, j])), "p_t_test": paired_t_test(a[:, j], b[:, j]),
                "p_randomization": float(p_rand[j]), "significant": bool(p_rand[j] < alpha)}
            for j, m in enumerate(shared)}
    return out
