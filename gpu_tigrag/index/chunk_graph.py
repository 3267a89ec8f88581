"""SpectRAG's index arrays: the weighted chunk graph, its spectral coordinates and chunk token counts.

The arrays are an extension of the shared index (DESIGN.md "Several methods on one index"): built
from the chunks, embeddings and entity table the index already has, stored beside them under
the manifest's `methods.spectrag` section, and absent (None) until asked for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import scipy.sparse


@dataclass
class ChunkGraph:
    """SpectRAG's index stage over the index's chunks (n = chunks)."""

    weights: scipy.sparse.csr_matrix  # n × n, symmetric float32 combined weights W (edges >= the threshold), no self loops
    coords: np.ndarray  # n × d float32 spectral coordinates Z: the Laplacian's eigenvectors after the lowest
    eigenvalues: np.ndarray  # float64, the d + 1 lowest eigenvalues of L = I - D^-1/2 W D^-1/2 (ascending)
    chunk_tokens: np.ndarray  # int32, cl100k_base tokens per chunk (token-budgeted selection)
    stats: dict[str, Any] = field(default_factory=dict)  # edges per signal, edges kept, zero eigenvalues, seconds

    @property
    def n_chunks(self) -> int:
        return int(self.weights.shape[0])
