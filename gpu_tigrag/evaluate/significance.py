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
Identical per-query values (no difference at all) have p = 1 in both tests.

Beside them: the Wilcoxon signed-rank test (`scipy.stats.wilcoxon`, two-sided, zero differences
dropped as Wilcoxon's original method), and the 95% confidence interval of the mean difference (the
t distribution's, the paired t-test's own). The report's markers follow one test (`test`:
randomisation by default, or t or wilcoxon), its p-values corrected for the comparisons of each metric
against the baseline when `correction` is `holm` (Holm-Bonferroni, step-down) or `bonferroni`; the
default `none` corrects nothing, as ranx by default, and the report says so.
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
#: the tests a marker may follow, and their names in reports
TESTS = {"randomization": MARKER_TEST, "t": "paired t-test", "wilcoxon": "Wilcoxon signed-rank test"}
#: multiple-comparison corrections of the marker test's p-values (per metric, over the systems compared)
CORRECTIONS = ("none", "holm", "bonferroni")
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


def claim_pvalue(per_query: dict[str, dict[str, Sequence[float]]] | None, first: tuple[str, str],
                 second: tuple[str, str]) -> float | None:
    """The paired randomisation test's p-value of (system, metric) `first` against `second` over the run's
    queries, for a claim's verdict; None where the run kept no per-query values of either (an older
    results.json) or they do not pair up."""
    a = ((per_query or {}).get(first[0]) or {}).get(first[1])
    b = ((per_query or {}).get(second[0]) or {}).get(second[1])
    if a is None or b is None or len(a) != len(b) or len(a) == 0:
        return None
    return randomization_test(a, b)


def claim_verdict(difference: float, p: float | None, alpha: float = ALPHA) -> str:
    """"holds" / "does not hold" by the sign of `difference`, said with its paired test: significant or not at
    `alpha` (a claim that holds on the means only is no finding); the means alone where `p` is None."""
    if p is None:
        return "holds" if difference > 0 else "does not hold"
    if difference > 0:
        return f"holds (p {p:.3f})" if p < alpha else f"holds on the means, not significantly (p {p:.3f})"
    return f"does not hold (p {p:.3f}{', significantly below' if p < alpha and difference < 0 else ''})"


def wilcoxon_test(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided p-value of the Wilcoxon signed-rank test of `a` vs `b` (zero differences dropped; 1.0
    when every difference is zero)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    _check(a, b)
    diff = a - b
    if not np.any(diff):
        return 1.0
    from scipy.stats import wilcoxon

    return float(wilcoxon(diff, zero_method="wilcox", alternative="two-sided").pvalue)


def confidence_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> tuple[float, float]:
    """The `level` confidence interval of the mean of a − b (Student's t; a point where the differences
    do not vary)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    mean = float(diff.mean()) if diff.size else 0.0
    if diff.size < 2 or not np.any(diff - diff[0]):
        return mean, mean
    from scipy.stats import t

    half = float(t.ppf(0.5 + level / 2, diff.size - 1)) * float(diff.std(ddof=1)) / np.sqrt(diff.size)
    return mean - half, mean + half


def adjust(pvalues: Sequence[float], correction: str) -> list[float]:
    """`pvalues` of one family corrected for multiple comparisons: `holm` (step-down), `bonferroni`, `none`."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = p.size
    if correction == "none" or m == 0:
        return p.tolist()
    if correction == "bonferroni":
        return np.minimum(1.0, p * m).tolist()
    if correction != "holm":
        raise ValueError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}")
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = stepped
    return out.tolist()


def _check(a: np.ndarray, b: np.ndarray) -> None:
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError("paired tests need one value per query for both systems")


def compare_systems(per_query: dict[str, dict[str, Sequence[float]]], baseline: str, metrics: Sequence[str],
                    permutations: int = PERMUTATIONS, seed: int = SEED, alpha: float = ALPHA,
                    test: str = "randomization", correction: str = "none") -> dict[str, Any]:
    """Every system of `per_query` ({system: {metric: values}}) against `baseline` on each of `metrics`
    (those both carry): the difference of the means (system − baseline) and its 95% confidence interval,
    the p-values of the three tests, the marker test's p-value after `correction` (`p_marker`, over the
    systems compared on that metric) and `significant` (p_marker < alpha). The result records the settings."""
    if test not in TESTS:
        raise ValueError(f"unknown test {test!r}; choose from {', '.join(TESTS)}")
    if correction not in CORRECTIONS:
        raise ValueError(f"unknown correction {correction!r}; choose from {', '.join(CORRECTIONS)}")
    base = per_query[baseline]
    out: dict[str, Any] = {"baseline": baseline, "alpha": alpha, "marker_test": TESTS[test], "correction": correction,
                           "tests": {"p_t_test": "paired t-test (two-sided)",
                                     "p_randomization": f"paired randomisation test ({permutations:,} random swaps, "
                                                        f"seed {seed})",
                                     "p_wilcoxon": "Wilcoxon signed-rank test (two-sided)"},
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
        rows = {}
        for j, m in enumerate(shared):
            low, high = confidence_interval(a[:, j], b[:, j])
            rows[m] = {"delta": float(np.mean(a[:, j])) - float(np.mean(b[:, j])), "ci95": [low, high],
                       "p_t_test": paired_t_test(a[:, j], b[:, j]), "p_randomization": float(p_rand[j]),
                       "p_wilcoxon": wilcoxon_test(a[:, j], b[:, j])}
        out["systems"][name] = rows
    key = {"randomization": "p_randomization", "t": "p_t_test", "wilcoxon": "p_wilcoxon"}[test]
    for metric in dict.fromkeys(m for rows in out["systems"].values() for m in rows):
        family = [rows[metric] for rows in out["systems"].values() if metric in rows]
        for row, p in zip(family, adjust([row[key] for row in family], correction)):
            row["p_marker"], row["significant"] = p, bool(p < alpha)
    return out
