"""Counting distinct int64 keys with an open-addressing hash table (section 3.3, pair counts).

The alternative to `xp.unique(keys, return_counts=True)`, which sorts every key: each key is
inserted once into a table of capacity = next power of two >= 2 * len(keys), so the table is
at most half full and probes stay short. Slots hold the key (EMPTY = -1 when free) and its
count; collisions move to the next slot (linear probing). On the GPU one thread inserts one
key, claiming a free slot with an int64 atomic compare-and-swap and counting with an atomic
add; the CPU twin does the same sequentially. Only the occupied slots, far fewer than the
keys when pairs repeat, are sorted afterwards.

Counts are int64: `xp.unique` returns int64 counts, so the table is the output with no cast
pass; 64-bit atomicAdd is native on every CUDA GPU and contends like 32-bit; and a count
cannot overflow whatever the number of keys. The price is 8 more bytes per slot.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import functools
from typing import Any

import numpy as np
from numba import njit

from .lazy_cuda import cuda

EMPTY = -1  # free slot marker: keys must never be -1 (packed pair keys are >= 0)
_MIX1 = np.uint64(0xFF51AFD7ED558CCD)
_MIX2 = np.uint64(0xC4CEB9FE1A85EC53)


def _home_slot(key, mask):
    """First slot probed for `key`: xor-shift / multiply mixing, so that the packed keys
    lo * n_vocab + hi (runs of consecutive values) spread over the whole table."""
    x = np.uint64(key)
    x ^= x >> np.uint64(33)
    x *= _MIX1
    x ^= x >> np.uint64(33)
    x *= _MIX2
    x ^= x >> np.uint64(33)
    return np.int64(x & np.uint64(mask))


# one Python definition compiled twice: the twin and the kernel probe the same slots
_home_slot_cpu = njit(inline="always")(_home_slot)
_home_slot_gpu = cuda.jit(device=True, inline=True)(_home_slot)


def table_capacity(n_keys: int) -> int:
    """Next power of two >= 2 * n_keys (at least 2): load factor <= 1/2, mask = capacity - 1."""
    return 1 << max(1, (2 * n_keys - 1).bit_length())


@njit(cache=True)
def count_keys_cpu(keys, table, counts):
    """CPU twin: inserts every key of `keys` into `table` (all EMPTY) and counts it in `counts` (zeros)."""
    mask = table.size - 1
    for i in range(keys.size):
        key = keys[i]
        slot = _home_slot_cpu(key, mask)
        while table[slot] != key and table[slot] != EMPTY:
            slot = (slot + 1) & mask
        table[slot] = key
        counts[slot] += 1


@cuda.jit
def _count_keys_kernel(keys, table, counts):
    """GPU kernel: one thread per key; CAS claims a free slot, atomic add counts.

    A slot goes from EMPTY to a key once and never changes again, so a plain read that sees
    a key is final; only a read of EMPTY needs the CAS, which returns the slot's winner.
    """
    i = cuda.grid(1)
    if i >= keys.size:
        return
    key = keys[i]
    mask = table.size - 1
    slot = _home_slot_gpu(key, mask)
    while True:
        held = table[slot]
        if held == EMPTY:
            held = cuda.atomic.cas(table, slot, np.int64(EMPTY), key)
            if held == EMPTY:
                held = key
        if held == key:
            cuda.atomic.add(counts, slot, np.int64(1))
            return
        slot = (slot + 1) & mask


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    i64 = types.int64[::1]
    return [(_count_keys_kernel, (i64, i64, i64))]


def count_keys_cuda(keys, table, counts, threads: int = 256) -> None:
    """GPU kernel launch: same contract as `count_keys_cpu`, arrays on the device (CuPy or numba)."""
    n = int(keys.shape[0])
    if n == 0:
        return
    blocks = (n + threads - 1) // threads
    _count_keys_kernel[blocks, threads](keys, table, counts)


def count_keys(be: Any, keys: Any, threads: int = 256) -> tuple[Any, Any]:
    """(unique keys ascending, int64 counts) on backend `be`: exactly `xp.unique(keys, return_counts=True)`.

    `keys` is a 1-d integer array on the backend with no key equal to -1.
    """
    xp = be.xp
    keys = xp.ascontiguousarray(keys, dtype=xp.int64)
    if keys.size == 0:
        return xp.empty(0, dtype=xp.int64), xp.empty(0, dtype=xp.int64)
    capacity = table_capacity(int(keys.size))
    table = xp.full(capacity, EMPTY, dtype=xp.int64)
    table_counts = xp.zeros(capacity, dtype=xp.int64)
    count = be.kernel(cpu=count_keys_cpu, cuda=functools.partial(count_keys_cuda, threads=threads))
    count(keys, table, table_counts)
    occupied = xp.flatnonzero(table != EMPTY)
    unique, counts = table[occupied], table_counts[occupied]
    order = xp.argsort(unique)  # only the distinct keys are sorted
    return unique[order], counts[order]
