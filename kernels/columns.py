"""Top-k rows of every column of a C-ordered (rows × B queries) block, on the CPU.

NumPy's `argpartition` along axis 0 walks each column with a stride and picks arbitrarily
among equal values (190 ms for 37k × 256 here). `top_k_rows_cpu` gives each thread a group
of columns, copied out row by row in whole cache lines, finds each column's k-th largest
value with a size-k min-heap (one pass; few values beat the heap's minimum), then keeps, in
row order, every larger entry and the first equal ones: ids ascending, ties to the lowest
ids, the rule `gpu_tigrag.ops.topk.top_k_rows` applies on the GPU through CuPy's sort.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

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

