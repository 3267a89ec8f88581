"""Weighted undirected token co-occurrence graph (section 3.3).

Reading of the paper: each chunk's ordered valid-token sequence is scanned with every
window of w consecutive tokens (a chunk shorter than w is one window). For each window,
every unordered pair of distinct tokens in it adds 1 to the edge weight, once per window
even if the pair occurs twice inside it. So ω_pq is the number of sliding windows, over
the whole corpus, in which p and q co-occur: adjacent tokens in a long chunk count w-1,
tokens w-1 apart count 1. The matrix is symmetric CSR, int32 indices, float32 weights.
"""

from __future__ import annotations

from typing import Any

from ..kernels.cooccurrence import emit_pairs_cpu, emit_pairs_cuda, slots_per_window, window_bounds
from ..kernels.pair_count import count_keys

from ..backend import Backend


def window_pair_keys(be: Backend, indptr: Any, ids: Any, n_vocab: int, window: int) -> Any:
    """Packed keys lo * n_vocab + hi, one per (window, distinct pair), on the backend.

    `indptr` / `ids` may be host or backend arrays; everything after the first move stays there.
    """
    starts, ends = window_bounds(be.asarray(indptr), window, be.xp)
    out = be.xp.full(starts.size * slots_per_window(window), -1, dtype=be.xp.int64)
    emit = be.kernel(cpu=emit_pairs_cpu, cuda=emit_pairs_cuda)
    emit(be.asarray(ids, dtype=be.xp.int32), starts, ends, n_vocab, window, out)
    return out[out >= 0]


COUNT_METHODS = ("sort", "hash")


def count_pairs(be: Backend, keys: Any, method: str = "sort") -> tuple[Any, Any]:
    """(distinct keys ascending, int64 counts) of packed pair keys; both methods give the same arrays.

    "sort" is `xp.unique` (sorts every key); "hash" inserts the keys into an open-addressing
    table (kernels/pair_count.py, atomics on the GPU) and sorts only the distinct ones.
    bench/studies/pair_count.py measures both.
    """
    if method == "sort":
        return be.xp.unique(keys, return_counts=True)
    if method == "hash":
        return count_keys(be, keys)
    raise ValueError(f"unknown pair counting method {method!r}; choose one of {', '.join(COUNT_METHODS)}")


def cooccurrence_graph(be: Backend, indptr: Any, ids: Any, n_vocab: int, window: int, method: str = "sort") -> Any:
    """Symmetric CSR adjacency (n_vocab × n_vocab, float32) of windowed co-occurrence counts.

    `method` picks how pair keys are counted (see `count_pairs`); the graph is the same.
    """
    pairs, counts = count_pairs(be, window_pair_keys(be, indptr, ids, n_vocab, window), method)
    return symmetric_graph(be, pairs, counts, n_vocab)


def symmetric_graph(be: Backend, pairs: Any, counts: Any, n_vocab: int) -> Any:
    """Symmetric CSR (float32, sorted indices) with weight `counts[i]` on both (lo, hi) and (hi, lo),
    from distinct packed keys `pairs` = lo * n_vocab + hi (lo < hi). The streaming build's merge of
    partition counts ends here too."""
    xp = be.xp
    lo = (pairs // n_vocab).astype(xp.int32)
    hi = (pairs % n_vocab).astype(xp.int32)
    rows = xp.concatenate([lo, hi])
    cols = xp.concatenate([hi, lo])
    data = xp.concatenate([counts, counts]).astype(xp.float32)
    graph = be.sparse.coo_matrix((data, (rows, cols)), shape=(n_vocab, n_vocab)).tocsr()
    graph.sort_indices()
    return graph
