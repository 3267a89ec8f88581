"""LiteSemRAG's co-occurrence sums on the CPU (gpu_tigrag/methods/litesemrag/retriever.py, step 3): per matched
node a of a query, Σ_b |C_a ∩ C_b| / √(|C_a|·|C_b|) over the query's other nodes b with a shared chunk.

The sparse form (the GPU's, and the CPU's before this kernel) moves every node's chunks to per-query columns
(a sort of all of them) and multiplies the result by its transpose. Here each worker takes whole queries and
marks, in one array over the chunks, which of up to 64 of the query's nodes hold each chunk (a 64-bit word per
chunk, made current by a stamp instead of being cleared); then each node's chunks read off the nodes they share
with. The work is the nodes' postings once per 64 nodes plus one step per shared (node, node, chunk): no sort,
no per-query columns. Counts are exact integers, so each term is the sparse form's float64 bits; the terms of a
node are added in node order (the sparse form adds them in its product's order, which only moves the last bit
of a float64 sum: the weights are rounded to float32 before they score a chunk).
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import get_num_threads, njit, prange

#: nodes whose chunks one pass marks: the bits of a word
WORD = 64
#: de Bruijn multiplier and table: the index of a 64-bit word's lowest set bit in one multiply and a lookup
DE_BRUIJN = np.uint64(0x03F79D71B4CB0A89)
BIT_INDEX = np.zeros(64, dtype=np.int64)
for _bit in range(64):
    BIT_INDEX[((0x03F79D71B4CB0A89 << _bit) & 0xFFFFFFFFFFFFFFFF) >> 58] = _bit
del _bit


def shared_chunk_sums(indptr: np.ndarray, indices: np.ndarray, protos: np.ndarray, node_ptr: np.ndarray,
                      df: np.ndarray, n_chunks: int) -> np.ndarray:
    """(n,) float64: per node (prototype protos[i], nodes of query q at node_ptr[q]:node_ptr[q + 1]), the sum of
    shared-chunk counts over √(max(df_a·df_b, 1)) with the query's other nodes (module doc). `indptr`/`indices`:
    the prototypes' chunk postings, each chunk at most once per prototype."""
    n_queries = node_ptr.size - 1
    workers = max(1, min(get_num_threads(), n_queries))
    total = np.zeros(protos.size, dtype=np.float64)
    if protos.size:
        _sums(indptr, indices, protos.astype(np.int64), node_ptr.astype(np.int64), df.astype(np.float64), n_chunks,
              workers, BIT_INDEX, total)
    return total


@njit(parallel=True, cache=True)
def _sums(indptr, indices, protos, node_ptr, df, n_chunks, workers, bit_index, total):
    n_queries = node_ptr.size - 1
    for w in prange(workers):
        stamp = np.full(n_chunks, -1, dtype=np.int64)  # the pass that last marked each chunk
        bits = np.zeros(n_chunks, dtype=np.uint64)
        passes = 0
        for q in range(w, n_queries, workers):
            first, last = node_ptr[q], node_ptr[q + 1]
            m = last - first
            if m < 2:
                continue
            shared = np.zeros((m, m), dtype=np.int64)
            for block in range(0, m, WORD):
                tag = passes * workers + w  # unique to this pass of this worker
                passes += 1
                for j in range(min(WORD, m - block)):
                    p = protos[first + block + j]
                    flag = np.uint64(1) << np.uint64(j)
                    for e in range(indptr[p], indptr[p + 1]):
                        c = indices[e]
                        if stamp[c] != tag:
                            stamp[c] = tag
                            bits[c] = np.uint64(0)
                        bits[c] |= flag
                for i in range(m):
                    p = protos[first + i]
                    for e in range(indptr[p], indptr[p + 1]):
                        c = indices[e]
                        if stamp[c] != tag:
                            continue
                        word = bits[c]
                        while word != np.uint64(0):
                            low = word & (~word + np.uint64(1))
                            shared[i, block + bit_index[(low * DE_BRUIJN) >> np.uint64(58)]] += 1
                            word ^= low
            for i in range(m):
                s = 0.0
                for j in range(m):
                    if j != i and shared[i, j] > 0:
                        s += np.float64(shared[i, j]) / np.sqrt(max(df[protos[first + i]] * df[protos[first + j]], 1.0))
                total[first + i] = s
