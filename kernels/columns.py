"""Column-wise selections over C-ordered (rows × B queries) blocks, on the CPU.

NumPy's `argpartition` and `sort` along axis 0 walk each column with a stride (190 ms for a
37k × 256 top-k here; 9 s of pooling for 512 queries on a 128k-chunk index). These kernels
give each thread a group of columns, copied out row by row in whole cache lines, then work
on contiguous columns. On the GPU the same results come from CuPy's sort (`Backend.top_k_rows`,
`retrieve.scoring.cumulative_mass_pool`).

- `top_k_rows_cpu`: the k largest entries per column, found with a size-k min-heap (one
  pass; few values beat the heap's minimum); ids ascending, ties to the lowest ids.
- `mass_cutoffs_cpu`: per column, the score at which the descending cumulative sum first
  reaches `threshold` of the total (eq. 3.9), summed in float32 in the same order as
  `cumsum` over the sorted column, so the pool is bit-identical to the array version.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

#: columns copied together: 16 float32 = one 64-byte cache line of a row
GROUP = 16


@njit(inline="always")
def _sift_down(heap, i, size):
    while True:
        smallest, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and heap[left] < heap[smallest]:
            smallest = left
        if right < size and heap[right] < heap[smallest]:
            smallest = right
        if smallest == i:
            return
        heap[i], heap[smallest] = heap[smallest], heap[i]
        i = smallest


@njit
def kth_largest(column, k):
    """The k-th largest value of a 1-d array (1 <= k <= len), by a size-k min-heap."""
    heap = column[:k].copy()
    for i in range(k // 2 - 1, -1, -1):
        _sift_down(heap, i, k)
    for i in range(k, column.size):
        if column[i] > heap[0]:
            heap[0] = column[i]
            _sift_down(heap, 0, k)
    return heap[0]


@njit(parallel=True, cache=True)
def top_k_rows_cpu(scores, k, out):
    """out[:, b] = ascending ids of the k largest scores[:, b] (ties: lowest ids); 1 <= k <= n."""
    n, width = scores.shape
    for g in prange((width + GROUP - 1) // GROUP):
        b0 = g * GROUP
        b1 = min(width, b0 + GROUP)
        block = np.empty((b1 - b0, n), dtype=scores.dtype)
        for i in range(n):
            for b in range(b0, b1):
                block[b - b0, i] = scores[i, b]
        for b in range(b0, b1):
            column = block[b - b0]
            kth = kth_largest(column, k)
            ties = k
            for i in range(n):
                if column[i] > kth:
                    ties -= 1
            m = 0
            for i in range(n):
                value = column[i]
                if value > kth or (value == kth and ties > 0):
                    if value == kth:
                        ties -= 1
                    out[m, b] = i
                    m += 1


@njit(parallel=True, cache=True)
def mass_cutoffs_cpu(scores, threshold, out):
    """out[b] = the smallest score among the top α of column b, α the first rank whose
    cumulative score reaches threshold × total; 0 where the column has no positive score.
    Scores are >= 0 (zeros never enter a pool and add nothing to the sums)."""
    n, width = scores.shape
    limit_factor = np.float32(threshold)
    for g in prange((width + GROUP - 1) // GROUP):
        b0 = g * GROUP
        b1 = min(width, b0 + GROUP)
        block = np.empty((b1 - b0, n), dtype=np.float32)
        counts = np.zeros(b1 - b0, dtype=np.int64)
        for i in range(n):
            for b in range(b0, b1):
                value = scores[i, b]
                if value > 0:
                    block[b - b0, counts[b - b0]] = value
                    counts[b - b0] += 1
        for b in range(b0, b1):
            values = np.sort(block[b - b0, : counts[b - b0]])  # ascending: walk it from the end
            total = np.float32(0.0)
            for r in range(values.size - 1, -1, -1):
                total += values[r]
            limit = limit_factor * total
            running = np.float32(0.0)
            cutoff = np.float32(0.0)
            for r in range(values.size - 1, -1, -1):
                running += values[r]
                if running >= limit:
                    cutoff = values[r]
                    break
            out[b] = cutoff
