"""LiteSemRAG's repeated-string correction on the CPU (gpu_tigrag/methods/litesemrag/retriever.py,
`_repeated_strings`): where several connected nodes of one query carry one string (several of its prototypes,
or one matched twice), a chunk counts only for the first of them in list order, so each later node's weighted
BM25 on a chunk an earlier node of its group already holds is subtracted.

`claimed_entries` gives those (query, chunk, value) entries in the order the nodes and their postings are read:
the groups are walked one after another, each marking its chunks on one array (a stamp per group, never
cleared), instead of a row copy, a membership test and a union per node. `summed_in_order` adds each pair's
values in that order, each add in float64 stored as float32 (what a float32 block's `+=` gives), in one pass
after a stable sort instead of one masked pass per repeat.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit


@njit(cache=True)
def claimed_entries(indptr, indices, data, protos, groups, weights, queries, n_chunks):
    """(query, chunk, weight · BM25) of every posting of node i (prototype protos[i], group groups[i], in list
    order) on a chunk that an earlier node of its group holds; nodes in order, each node's postings in order."""
    m = protos.size
    offsets = np.zeros(m + 1, dtype=np.int64)
    for i in range(m):
        offsets[i + 1] = offsets[i] + indptr[protos[i] + 1] - indptr[protos[i]]
    taken = np.zeros(offsets[m], dtype=np.bool_)
    stamp = np.full(n_chunks, -1, dtype=np.int64)
    for i in np.argsort(groups, kind="mergesort"):  # group by group, list order within one
        p, g = protos[i], groups[i]
        for e in range(indptr[p], indptr[p + 1]):
            c = indices[e]
            if stamp[c] == g:
                taken[offsets[i] + e - indptr[p]] = True
            else:
                stamp[c] = g
    count = 0
    for e in range(taken.size):
        count += taken[e]
    out_queries = np.empty(count, dtype=np.int64)
    out_chunks = np.empty(count, dtype=np.int64)
    out_values = np.empty(count, dtype=np.float64)
    n = 0
    for i in range(m):
        p = protos[i]
        for e in range(indptr[p], indptr[p + 1]):
            if taken[offsets[i] + e - indptr[p]]:
                out_queries[n] = queries[i]
                out_chunks[n] = indices[e]
                out_values[n] = weights[i] * np.float64(data[e])
                n += 1
    return out_queries, out_chunks, out_values


@njit(cache=True)
def summed_in_order(keys, values):
    """(distinct keys ascending, float32 sums): each key's values added in their order, each add in float64
    stored as float32."""
    order = np.argsort(keys, kind="mergesort")
    distinct = np.empty(keys.size, dtype=np.int64)
    totals = np.empty(keys.size, dtype=np.float32)
    n = -1
    for t in range(order.size):
        key = keys[order[t]]
        if n < 0 or distinct[n] != key:
            n += 1
            distinct[n] = key
            totals[n] = np.float32(0.0)
        totals[n] = np.float32(np.float64(totals[n]) + values[order[t]])
    return distinct[:n + 1], totals[:n + 1]
