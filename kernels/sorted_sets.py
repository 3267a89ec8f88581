"""Intersections of sorted id lists on the CPU (LiteSemRAG's partial matching: the phrases holding every word
of a span, `methods/litesemrag/retriever.py:_containing`).

NumPy's `intersect1d` concatenates and sorts both lists, so it costs their total length times its log: the
lists of a common word hold a share of the corpus's phrases. Walking the shorter list and galloping through
the longer one (`bm25_top._gallop`) costs the shorter list's length times the log of the gaps it jumps.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from numba import njit

from .bm25_top import _gallop


@njit(cache=True)
def intersect_sorted(a, b):
    """The ids in both `a` and `b` (int64, each ascending without repeats), ascending: `np.intersect1d`'s answer."""
    if a.size > b.size:
        a, b = b, a
    out = np.empty(a.size, dtype=np.int64)
    count = 0
    position = 0
    for i in range(a.size):
        position = _gallop(b, position, b.size, a[i])
        if position == b.size:
            break
        if b[position] == a[i]:
            out[count] = a[i]
            count += 1
    return out[:count]
