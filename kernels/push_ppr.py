"""Forward-push Personalized PageRank, one query per thread, B queries per launch (ops/push_ppr.py).

Query q starts with its residual r uniform over its seeds and its scores p at 0. Each round takes
every touched node u whose residual is at least its threshold (ε, or ε per edge of u), all at once
(a synchronous round: the frontier is chosen before anything of the round is pushed), and for each:

    p(u) += (1 − d)·r(u);  r(i) += d·r(u)·W[u, i] / deg(u) for every neighbour i;  r(u) = 0

with the mass of a degree-0 node sent back to the query's seeds instead (the exact iterate's
dangling rule, ops/ppr.py). It stops when a round finds no node to push, or after `max_rounds`.
Then PPR = p + PPR(r), the PPR of the residual left; a node's score is reported as p(u) + (1 − d)·r(u),
the first term of PPR(r) at u (what a push of u would keep), so scores stay at most PPR node by node
and their L1 error is d·Σr = 1 − Σ scores. This matters for frequent tokens under the "edges"
threshold, which may hold large residuals unpushed.

Mass is counted in fixed point (int64 units of 2^-48): every share is an exact integer, so the
sums do not depend on the order of the additions, nor on how a compiler fuses them. The CPU twin
and the CUDA kernel therefore give the same bits, and a query's result depends on its seeds only,
never on its batch-mates or on the batch size.

A query's state is a table of the nodes it has touched (node, residual, score) and the list of
those nodes in the order they were first reached; rounds scan that list, so the work follows the
mass pushed, not the vocabulary. On the CPU each worker thread holds one vocabulary-sized table,
addressed by node id and cleared after each of its queries; on the GPU each query has its own
open-addressing table of `capacity` slots (at most half full: a query that would fill it more is
flagged, and run again by the launcher with a larger table, which changes no result). At the end
the `K` best touched nodes (score descending, then node id ascending) are selected with a heap
into the query's row of the output.

The per-query routines are one Python definition each, compiled twice (njit for the CPU twin,
inlined device functions for the CUDA kernel), as kernels/pair_count.py does for its probe.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import get_num_threads, njit, prange

from .lazy_cuda import cuda
from .pair_count import _home_slot, table_capacity

#: fixed-point scale: a query's whole mass is 2^SCALE_BITS units
SCALE_BITS = 48
EMPTY = -1  # a free table slot
#: stats columns per query
TOUCHED, ROUNDS, EDGE_VISITS, OVERFLOW = range(4)
N_STATS = 4
#: table slots per query of the first GPU launch; queries that need more run again with 4× more
INITIAL_CAPACITY = 1 << 15


def _find(node, keys, tbase, mask, direct, home):
    """The slot of `node` in a query's table, or the free slot where it goes."""
    if direct:
        return node
    slot = home(node, mask)
    while True:
        held = keys[tbase + slot]
        if held == node or held == EMPTY:
            return tbase + slot
        slot = (slot + 1) & mask


def _worse(units_a, node_a, units_b, node_b):
    """True when entry a ranks below entry b (lower score, or the same score and a higher node id)."""
    return units_a < units_b or (units_a == units_b and node_a > node_b)


def _make(jit):
    """The per-query routines compiled by `jit` (njit, or an inlined CUDA device function)."""
    home = jit(_home_slot)
    find = jit(_find)
    worse = jit(_worse)

    def push_query(q, seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds,
                   keys, resid, score, tbase, mask, direct, touched, front_slot, front_amount, lbase, half, stats):
        """Runs query q's push; returns how many nodes it touched, or -1 when its table was too small."""
        start = seed_ptr[q]
        n_seeds = seed_ptr[q + 1] - start
        stats[q, TOUCHED] = 0
        stats[q, ROUNDS] = 0
        stats[q, EDGE_VISITS] = 0
        stats[q, OVERFLOW] = 0
        if n_seeds == 0:
            return 0
        count = 0
        share = (np.int64(1) << SCALE_BITS) // n_seeds  # seeds are distinct
        for k in range(start, start + n_seeds):
            node = seed_ids[k]
            slot = find(node, keys, tbase, mask, direct, home)
            if keys[slot] == EMPTY:
                if count >= half:
                    stats[q, OVERFLOW] = 1
                    return -1
                keys[slot] = node
                touched[lbase + count] = slot
                count += 1
            resid[slot] += share
        rounds = 0
        visits = np.int64(0)
        while rounds < max_rounds:
            n_front = 0
            for t in range(count):  # the frontier: every node at or above its threshold, chosen at once
                slot = touched[lbase + t]
                amount = resid[slot]
                limit = eps_units
                if by_edges:
                    node = keys[slot]
                    limit = eps_units * max(indptr[node + 1] - indptr[node], 1)
                if amount >= limit:
                    spread = np.int64(np.float64(amount) * damping)
                    score[slot] += amount - spread
                    resid[slot] = 0
                    front_slot[lbase + n_front] = slot
                    front_amount[lbase + n_front] = spread
                    n_front += 1
            if n_front == 0:
                break
            rounds += 1
            for f in range(n_front):
                node = keys[front_slot[lbase + f]]
                spread = front_amount[lbase + f]
                lo = indptr[node]
                hi = indptr[node + 1]
                if lo == hi:  # a dangling node: its mass goes back to the query's seeds
                    each = spread // n_seeds
                    for k in range(start, start + n_seeds):
                        resid[find(seed_ids[k], keys, tbase, mask, direct, home)] += each
                    continue
                visits += hi - lo
                for e in range(lo, hi):
                    amount = np.int64(np.float64(spread) * np.float64(prob[e]))
                    if amount == 0:
                        continue
                    target = indices[e]
                    slot = find(target, keys, tbase, mask, direct, home)
                    if keys[slot] == EMPTY:
                        if count >= half:
                            stats[q, OVERFLOW] = 1
                            return -1
                        keys[slot] = target
                        touched[lbase + count] = slot
                        count += 1
                    resid[slot] += amount
        stats[q, TOUCHED] = count
        stats[q, ROUNDS] = rounds
        stats[q, EDGE_VISITS] = visits
        return count

    def sift_up(out_ids, out_units, q, i):
        while i > 0:
            parent = (i - 1) // 2
            if not worse(out_units[q, i], out_ids[q, i], out_units[q, parent], out_ids[q, parent]):
                break
            out_ids[q, i], out_ids[q, parent] = out_ids[q, parent], out_ids[q, i]
            out_units[q, i], out_units[q, parent] = out_units[q, parent], out_units[q, i]
            i = parent

    def sift_down(out_ids, out_units, q, i, size):
        while True:
            child = 2 * i + 1
            if child >= size:
                break
            if child + 1 < size and worse(out_units[q, child + 1], out_ids[q, child + 1], out_units[q, child],
                                          out_ids[q, child]):
                child += 1
            if not worse(out_units[q, child], out_ids[q, child], out_units[q, i], out_ids[q, i]):
                break
            out_ids[q, i], out_ids[q, child] = out_ids[q, child], out_ids[q, i]
            out_units[q, i], out_units[q, child] = out_units[q, child], out_units[q, i]
            i = child

    jit_up, jit_down = jit(sift_up), jit(sift_down)

    def select(q, count, keys, resid, score, touched, lbase, damping, n_nodes, out_ids, out_units):
        """The K best touched nodes of query q into row q of the outputs (a min-heap on the rank: its
        root is the worst kept), each scored p(u) + (1 − d)·r(u): the share of its residual a push
        would keep (still at most its PPR). Rows are padded with node id `n_nodes` and score 0."""
        size = 0
        width = out_ids.shape[1]
        for t in range(count):
            slot = touched[lbase + t]
            left = resid[slot]
            units = score[slot] + left - np.int64(np.float64(left) * damping)
            if units <= 0:
                continue
            node = keys[slot]
            if size < width:
                out_ids[q, size] = node
                out_units[q, size] = units
                jit_up(out_ids, out_units, q, size)
                size += 1
            elif worse(out_units[q, 0], out_ids[q, 0], units, node):
                out_ids[q, 0] = node
                out_units[q, 0] = units
                jit_down(out_ids, out_units, q, 0, size)
        for i in range(size, width):
            out_ids[q, i] = n_nodes
            out_units[q, i] = 0

    return jit(push_query), jit(select)


_push_query_cpu, _select_cpu = _make(njit)
_push_query_gpu, _select_gpu = _make(lambda f: cuda.jit(device=True, inline=True)(f))


@njit(parallel=True, cache=True)
def _push_ppr_cpu(seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds, out_ids,
                  out_units, stats, workers):
    """CPU twin: worker w runs queries w, w + W, ... one after the other in its own vocabulary-sized
    table (direct addressing by node id), cleared node by node after each query. Writes `out_ids`,
    `out_units` (B × K) and `stats` (B × N_STATS)."""
    n = indptr.shape[0] - 1
    width = seed_ptr.shape[0] - 1
    for w in prange(workers):
        keys = np.full(n, EMPTY, dtype=np.int32)
        resid = np.zeros(n, dtype=np.int64)
        score = np.zeros(n, dtype=np.int64)
        touched = np.empty(n, dtype=np.int32)
        front_slot = np.empty(n, dtype=np.int32)
        front_amount = np.empty(n, dtype=np.int64)
        for q in range(w, width, workers):
            count = _push_query_cpu(q, seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping,
                                    max_rounds, keys, resid, score, 0, 0, True, touched, front_slot, front_amount, 0,
                                    n, stats)
            _select_cpu(q, count, keys, resid, score, touched, 0, damping, n, out_ids, out_units)
            for t in range(count):
                slot = touched[t]
                keys[slot] = EMPTY
                resid[slot] = 0
                score[slot] = 0


def push_ppr_cpu(seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds, out_ids,
                 out_units, stats) -> None:
    """CPU twin (see `_push_ppr_cpu`), one worker per numba thread at most."""
    workers = max(1, min(get_num_threads(), seed_ptr.shape[0] - 1))
    _push_ppr_cpu(seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds, out_ids,
                  out_units, stats, workers)


@cuda.jit
def _push_kernel(queries, seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds, keys,
                 resid, score, capacity, touched, front_slot, front_amount, out_ids, out_units, stats):
    """GPU kernel: thread i runs query queries[i] in table slots [i·capacity, (i + 1)·capacity)."""
    i = cuda.grid(1)
    if i >= queries.shape[0]:
        return
    q = queries[i]
    half = capacity // 2
    count = _push_query_gpu(q, seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds,
                            keys, resid, score, i * capacity, capacity - 1, False, touched, front_slot, front_amount,
                            i * half, half, stats)
    if count >= 0:
        _select_gpu(q, count, keys, resid, score, touched, i * half, damping, indptr.shape[0] - 1, out_ids, out_units)


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    i32, i64, f32, f64, b1 = types.int32, types.int64, types.float32, types.float64, types.boolean
    return [(_push_kernel, (i64[::1], i64[::1], i32[::1], i64[::1], i32[::1], f32[::1], i64, b1, f64, i64, i32[::1],
                            i64[::1], i64[::1], i64, i32[::1], i32[::1], i64[::1], i32[:, ::1], i64[:, ::1],
                            i64[:, ::1]))]


def _is_cupy(array) -> bool:
    return type(array).__module__.startswith("cupy")


def _device_full(like, size: int, dtype, fill) -> object:
    """A filled device array from the allocator `like` came from (CuPy's pool, or numba's)."""
    if _is_cupy(like):
        import cupy

        return cupy.full(size, fill, dtype=dtype)
    return cuda.to_device(np.full(size, fill, dtype=dtype))


def _device_copy(like, values: np.ndarray) -> object:
    """`values` copied to the device, on the allocator `like` came from."""
    if _is_cupy(like):
        import cupy

        return cupy.asarray(values)
    return cuda.to_device(values)


def _host(array) -> np.ndarray:
    if _is_cupy(array):
        return array.get()
    return array.copy_to_host() if hasattr(array, "copy_to_host") else np.asarray(array)


def push_ppr_cuda(seed_ptr, seed_ids, indptr, indices, prob, eps_units, by_edges, damping, max_rounds, out_ids,
                  out_units, stats, capacity: int = INITIAL_CAPACITY, threads: int = 64) -> None:
    """Launch the GPU push (same contract as `push_ppr_cpu`).

    Every query first gets `capacity` table slots (at most enough for the whole vocabulary); the
    queries flagged as overflowing run again with 4× the slots, in groups that hold no more slots
    than the first launch, until none is left (a table of 2 × vocabulary slots never overflows).
    """
    n = indptr.shape[0] - 1
    width = seed_ptr.shape[0] - 1
    if width == 0:
        return
    largest = table_capacity(max(n, 1))
    capacity = min(table_capacity(max(capacity // 2, 1)), largest)
    budget = width * capacity
    pending = np.arange(width, dtype=np.int64)
    while pending.size:
        group = max(1, budget // capacity)
        for begin in range(0, pending.size, group):
            chosen = pending[begin:begin + group]
            size = int(chosen.size)
            queries = _device_copy(seed_ptr, chosen)
            half = capacity // 2
            keys = _device_full(seed_ptr, size * capacity, np.int32, EMPTY)
            resid = _device_full(seed_ptr, size * capacity, np.int64, 0)
            score = _device_full(seed_ptr, size * capacity, np.int64, 0)
            touched = _device_full(seed_ptr, size * half, np.int32, 0)
            front_slot = _device_full(seed_ptr, size * half, np.int32, 0)
            front_amount = _device_full(seed_ptr, size * half, np.int64, 0)
            _push_kernel[(size + threads - 1) // threads, threads](
                queries, seed_ptr, seed_ids, indptr, indices, prob, np.int64(eps_units), bool(by_edges),
                np.float64(damping), np.int64(max_rounds), keys, resid, score, np.int64(capacity), touched,
                front_slot, front_amount, out_ids, out_units, stats)
        flags = _host(stats)[pending, OVERFLOW]
        pending = pending[flags != 0]
        if pending.size and capacity >= largest:
            raise RuntimeError("push PPR: a table of twice the vocabulary overflowed")  # cannot happen
        capacity = min(capacity * 4, largest)
