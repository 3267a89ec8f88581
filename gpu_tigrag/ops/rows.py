"""Row normalisation shared by every method: unit rows, zero rows left at zero."""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_rows(vectors: Any) -> np.ndarray:
    """float32 copy of `vectors` (n × d, host) with each row scaled to unit L2 norm; zero rows stay 0."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return (vectors / np.where(norms > 0, norms, 1)).astype(np.float32)
