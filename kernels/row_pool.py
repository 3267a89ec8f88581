"""Rank the entries of each row of a CSR score matrix and find each row's cumulative-mass pool, on the CPU.

The contract (`ops.sparse_scores.rank_and_pool`): for a B × chunks CSR of positive scores (ρ),
`rank[e]` is entry e's place in its row by (score descending, chunk id ascending; with a cap, only
the best max(pool_max, depth) are placed, the others get that bound) and `pooled[r]` the
number of row r's best entries in its pool (eq. 3.9): those at or above the score at which the
descending cumulative sum first reaches `threshold` of the row's total, at most `pool_max` (0: no cap).
Sums are exact integers in a fixed point of the row's own scale (its largest score × its count below
2**62), so a row's pool never depends on the other rows. The GPU runs the same contract as sorts over
the whole batch (`ops.sparse_scores`), with the same integers.

Here each thread takes whole rows: (descending score bits << 32 | chunk id) keys, and with a cap only
the best max(pool_max, depth) of them are sorted, after one partition: a row of 64k candidates costs
about a millisecond, where one sort of the whole batch's entries costs seconds.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import math

import numpy as np
from numba import njit, prange


@njit(inline="always")
def _descending(bits):
    """The uint64 (below 2**32) key ordering a float32, given as its int32 bits, descending; 0.0 = -0.0."""
    b = np.int64(bits)
    if b == np.int64(-2147483648):  # -0.0
        b = 0
    key = b + 2147483648 if b >= 0 else -b - 1  # the float's ascending order
    return np.uint64(4294967295 - key)


@njit(parallel=True, cache=True)
def rank_and_pool_cpu(indptr, indices, bits, data, threshold, pool_max, depth, rank, pooled, kind):
    """Fill `rank` (per entry; entries below the row's best max(pool_max, depth) get that bound when
    pool_max > 0, as no caller reads their place), `pooled` (per row) and `kind` (per entry: 2 in the
    pool, 1 among the row's best `depth` but not pooled, 0 neither). `bits` is `data` viewed as int32."""
    for r in prange(indptr.size - 1):
        start, stop = indptr[r], indptr[r + 1]
        size = stop - start
        pooled[r] = 0
        for i in range(size):
            kind[start + i] = 0
        if size == 0:
            continue
        keys = np.empty(size, dtype=np.uint64)
        for i in range(size):
            keys[i] = (_descending(bits[start + i]) << np.uint64(32)) | np.uint64(indices[start + i])
        wanted = size
        if pool_max > 0:
            wanted = min(size, max(pool_max, depth))
        if wanted < size:  # only the best `wanted` are ranked: one partition, then a sort of those
            kth = np.partition(keys, wanted - 1)[wanted - 1]
            picked = np.empty(wanted, dtype=np.int64)
            n = 0
            for i in range(size):
                rank[start + i] = wanted
                if keys[i] <= kth:
                    picked[n] = i
                    n += 1
            order = picked[np.argsort(keys[picked])]
        else:
            order = np.argsort(keys)  # keys are unique: one entry per chunk in a row
        for j in range(wanted):
            rank[start + order[j]] = j
        top = np.float64(data[start + order[0]])
        if top <= 0:
            continue
        positives = 0
        for i in range(size):
            if data[start + i] > 0:
                positives += 1
        _, exponent = math.frexp(top * positives)
        scale = math.ldexp(1.0, 62 - exponent)
        total = np.uint64(0)
        for i in range(size):
            if data[start + i] > 0:
                total += np.uint64(math.floor(np.float64(data[start + i]) * scale))
        goal = threshold * np.float64(total)
        within = np.uint64(0)
        count = -1
        for j in range(min(wanted, positives)):
            within += np.uint64(math.floor(np.float64(data[start + order[j]]) * scale))
            if np.float64(within) >= goal:
                cutoff = data[start + order[j]]
                count = j + 1
                while count < min(wanted, positives) and data[start + order[count]] >= cutoff:  # ties are pooled
                    count += 1
                break
        if count < 0:  # the mass lies past the ranked entries: the cap holds the pool
            count = min(wanted, positives)
        if pool_max > 0 and count > pool_max:
            count = pool_max
        pooled[r] = count
        for i in range(size):
            e = start + i
            kind[e] = 2 if rank[e] < count else (1 if rank[e] < depth and data[e] > 0 else 0)
