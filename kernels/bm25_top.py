"""Exact top-k BM25 of each query over the index's postings, on the CPU, by MaxScore dynamic pruning.

Scoring every chunk a query's tokens touch costs the postings of its commonest tokens, which grow
with the corpus. MaxScore (Turtle & Flood, 1995) walks the postings in chunk-id order and keeps the
k best chunks so far in a heap; once the k-th best score θ exceeds what the lowest-impact tokens can
add together (the sum of their largest weights), a chunk found only in those tokens' postings cannot
enter the top k, so only the other tokens' postings drive the walk, and the low-impact ones are looked
up (galloping search) for the chunks that could still make it. The result is the exhaustive top k:

- a chunk's score is summed in float32 over the query's tokens in ascending token order, each term
  `count · weight` in float32: what SciPy's sparse product of the query-term rows and the postings
  gives (`ops.fusion.bm25_postings_scores`), bit for bit;
- equal scores go to the lowest chunk id (chunks are visited in id order and a later one must beat
  the heap's worst strictly), the rule of `ops.topk.ranked_top_k`;
- pruning compares float64 bounds with a relative margin (`MARGIN`) far above float32 summation error,
  so rounding never drops a chunk that belongs in the top k.

Weights must be positive (the index's BM25 has idf > 0), so a chunk in any posting scores above 0 and
a chunk in none scores 0: the kernel returns the chunks scoring > 0 only, with their count.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit, prange

#: relative slack of every pruning test: a bound must fall below θ / (1 + MARGIN) to drop a chunk
MARGIN = 1e-4


@njit(inline="always")
def _worse(score_a, id_a, score_b, id_b):
    """Entry a ranks below entry b: lower score, or the same score and a higher chunk id."""
    return score_a < score_b or (score_a == score_b and id_a > id_b)


@njit(inline="always")
def _sift_down(scores, ids, i, size):
    """Restore the heap (worst entry at the root) below position i."""
    while True:
        worst, left, right = i, 2 * i + 1, 2 * i + 2
        if left < size and _worse(scores[left], ids[left], scores[worst], ids[worst]):
            worst = left
        if right < size and _worse(scores[right], ids[right], scores[worst], ids[worst]):
            worst = right
        if worst == i:
            return
        scores[i], scores[worst] = scores[worst], scores[i]
        ids[i], ids[worst] = ids[worst], ids[i]
        i = worst


@njit(inline="always")
def _sift_up(scores, ids, i):
    while i > 0:
        parent = (i - 1) // 2
        if not _worse(scores[i], ids[i], scores[parent], ids[parent]):
            return
        scores[i], scores[parent] = scores[parent], scores[i]
        ids[i], ids[parent] = ids[parent], ids[i]
        i = parent


@njit(inline="always")
def _gallop(indices, position, end, target):
    """The first position in indices[position:end] (ascending) holding a value >= target."""
    if position >= end or indices[position] >= target:
        return position
    step = 1
    low = position
    high = position + 1
    while high < end and indices[high] < target:
        low = high
        step *= 2
        high = position + step
    if high > end:
        high = end
    while low + 1 < high:  # indices[low] < target, and indices[high] >= target or high == end
        middle = (low + high) // 2
        if indices[middle] < target:
            low = middle
        else:
            high = middle
    return high


@njit(cache=True)
def _query_top(indptr, indices, data, max_weight, terms, counts, k, out_ids, out_scores):
    """The top k of one query (terms ascending, with their counts) into out_ids/out_scores, best
    first; returns how many chunks scored > 0 (at most k)."""
    m = terms.size
    if m == 0 or k == 0:
        return 0
    cursor = np.empty(m, dtype=np.int64)
    end = np.empty(m, dtype=np.int64)
    bound = np.empty(m, dtype=np.float64)
    for i in range(m):
        cursor[i] = indptr[terms[i]]
        end[i] = indptr[terms[i] + 1]
        bound[i] = np.float64(np.float32(counts[i]) * max_weight[terms[i]])
    by_bound = np.argsort(bound, kind="mergesort")  # lowest impact first: the non-essential prefix
    prefix = np.zeros(m + 1, dtype=np.float64)
    for j in range(m):
        prefix[j + 1] = prefix[j] + bound[by_bound[j]]
    essential = np.ones(m, dtype=np.bool_)
    n_lazy = 0  # the first n_lazy tokens of by_bound are looked up, not walked
    contribution = np.zeros(m, dtype=np.float32)
    heap_scores = np.empty(k, dtype=np.float32)
    heap_ids = np.empty(k, dtype=np.int64)
    size = 0
    theta = -np.inf
    slack = 1.0 + MARGIN
    while True:
        chunk = -1
        for i in range(m):
            if essential[i] and cursor[i] < end[i]:
                candidate = indices[cursor[i]]
                if chunk < 0 or candidate < chunk:
                    chunk = candidate
        if chunk < 0:
            break
        total = prefix[n_lazy]  # the lazy tokens at their largest weight, until looked up
        for i in range(m):
            contribution[i] = 0.0
            if essential[i] and cursor[i] < end[i] and indices[cursor[i]] == chunk:
                contribution[i] = np.float32(counts[i]) * data[cursor[i]]
                total += contribution[i]
                cursor[i] += 1
        if size == k and total * slack <= theta:
            continue
        pruned = False
        for j in range(n_lazy - 1, -1, -1):  # highest-impact lazy token first: the bound falls fastest
            i = by_bound[j]
            cursor[i] = _gallop(indices, cursor[i], end[i], chunk)
            total -= bound[i]
            if cursor[i] < end[i] and indices[cursor[i]] == chunk:
                contribution[i] = np.float32(counts[i]) * data[cursor[i]]
                total += contribution[i]
            if size == k and total * slack <= theta:
                pruned = True
                break
        if pruned:
            continue
        score = np.float32(0.0)
        for i in range(m):  # ascending token order: the sparse product's summation, bit for bit
            if contribution[i] != 0.0:
                score += contribution[i]
        if size < k:
            heap_scores[size] = score
            heap_ids[size] = chunk
            _sift_up(heap_scores, heap_ids, size)
            size += 1
        elif score > heap_scores[0]:  # a later chunk has a higher id: it must beat the worst strictly
            heap_scores[0] = score
            heap_ids[0] = chunk
            _sift_down(heap_scores, heap_ids, 0, size)
        else:
            continue
        if size == k:
            theta = np.float64(heap_scores[0])
            while n_lazy < m and prefix[n_lazy + 1] * slack <= theta:
                essential[by_bound[n_lazy]] = False
                n_lazy += 1
    for position in range(size - 1, -1, -1):  # pop the worst into the last slot: best first
        out_scores[position] = heap_scores[0]
        out_ids[position] = heap_ids[0]
        last = position
        heap_scores[0] = heap_scores[last]
        heap_ids[0] = heap_ids[last]
        _sift_down(heap_scores, heap_ids, 0, last)
    return size


@njit(parallel=True, cache=True)
def bm25_top_cpu(indptr, indices, data, max_weight, query_indptr, query_terms, query_counts, k, out_ids,
                 out_scores, out_counts):
    """Each query's top k by BM25 (see the module doc): out_ids/out_scores rows best first, -1 / 0
    past out_counts[q], the number of chunks scoring > 0 (at most k)."""
    for q in prange(query_indptr.size - 1):
        first, last = query_indptr[q], query_indptr[q + 1]
        out_counts[q] = _query_top(indptr, indices, data, max_weight, query_terms[first:last],
                                   query_counts[first:last], k, out_ids[q], out_scores[q])
