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
