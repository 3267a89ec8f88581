"""Row normalisation shared by every method: unit rows, zero rows left at zero."""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_rows(vectors: Any, compute_dtype: Any = np.float32) -> np.ndarray:
    """float32 copy of `vectors` (n × d, host) with each row scaled to unit L2 norm; zero rows stay 0.
    The norms are computed in `compute_dtype` (None: the input's own precision, e.g. float64 means)."""
    x = np.asarray(vectors) if compute_dtype is None else np.asarray(vectors, dtype=compute_dtype)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1)).astype(np.float32)


def unit_rows_in_place(vectors: np.ndarray, block_rows: int = 8192) -> np.ndarray:
    """`vectors` (float32 n × d, C-contiguous, host) with each row scaled to unit L2 norm in place, zero rows
    left at zero, and returned: the bits of `unit_rows(vectors)` without its two n × d temporaries (the
    squares and the quotient), block by block, so a large array (LiteSemRAG's span vectors) needs no second copy."""
    if vectors.dtype != np.float32 or vectors.ndim != 2 or not vectors.flags.c_contiguous:
        raise ValueError(f"unit_rows_in_place needs a C-contiguous float32 matrix, got {vectors.dtype} {vectors.shape}")
    for lo in range(0, vectors.shape[0], block_rows):
        block = vectors[lo : lo + block_rows]
        norms = np.linalg.norm(block, axis=1, keepdims=True)
        np.divide(block, np.where(norms > 0, norms, 1), out=block)
    return vectors
