"""SpectRAG's index stage in and out of the index directory: the chunk graph W (CSR), the spectral
coordinates, the eigenvalues and each chunk's cl100k token count."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ...errors import IndexFormatError
from ...index.stage_arrays import check_arrays, csr_arrays, csr_from_arrays
from ...index.validate import check_dtype, check_values
from .chunk_graph import STAGE_FORMAT, ChunkGraph
from .config import SpectragIndexConfig


def build(index: Any, config: SpectragIndexConfig, backend: Any = None, encoder: Any = None,
          show_progress: bool = False) -> ChunkGraph:
    from .chunk_graph import build_chunk_graph

    return build_chunk_graph(index, config, backend, encoder, show_progress)


def to_arrays(stage: ChunkGraph) -> tuple[dict[str, np.ndarray], dict[str, list[str]]]:
    arrays = csr_arrays("spectrag_weights", stage.weights)
    arrays["spectrag_coords"] = np.ascontiguousarray(stage.coords, dtype=np.float32)
    arrays["spectrag_eigenvalues"] = np.asarray(stage.eigenvalues, dtype=np.float64)
    arrays["spectrag_chunk_tokens"] = np.asarray(stage.chunk_tokens, dtype=np.int32)
    return arrays, {}


def from_arrays(arrays: dict[str, np.ndarray], strings: dict[str, list[str]], index: Any,
                config: SpectragIndexConfig, stats: dict[str, Any], folder: Path) -> ChunkGraph:
    """The stage, its arrays' shapes checked: a file that does not fit the index's n chunks and the
    stage's d dimensions is named in the error. A stage of an older format (built before the engine
    was compared with the public code: other entity counts, unrounded weights, another null space)
    is an error that names the command rebuilding it."""
    if stats.get("format") != STAGE_FORMAT:
        raise IndexFormatError(
            f"{folder}: its SpectRAG stage was built by an older gpu_tigrag (stage format {stats.get('format', 1)}, "
            f"this version reads {STAGE_FORMAT}: entity counts, weights and spectral coordinates now follow the "
            "public code); rebuild it with `tigrag extend INDEX --methods spectrag` (the index keeps its stored "
            "spectrag settings: add --set spectrag.semantic_top_k=7 for the public code's neighbours)")
    n, d = index.n_chunks, config.dimensions
    check_arrays(folder, arrays, {"spectrag_weights_indptr": ((n + 1,), np.int64), "spectrag_coords": ((n, d), np.float32),
                                  "spectrag_eigenvalues": ((d + 1,), np.float64),
                                  "spectrag_chunk_tokens": ((n,), np.int32)},
                 f"{n} chunks and {d} dimensions")
    check_dtype(folder / "spectrag_coords.npy", arrays["spectrag_coords"], np.float32, 2, None)
    check_values(folder / "spectrag_chunk_tokens.npy", arrays["spectrag_chunk_tokens"], "token counts", None)
    check_padding(folder, arrays["spectrag_eigenvalues"], n)
    weights = csr_from_arrays(folder, arrays, "spectrag_weights", (n, n), "the chunk graph")
    return ChunkGraph(weights=weights, coords=arrays["spectrag_coords"], eigenvalues=arrays["spectrag_eigenvalues"],
                      chunk_tokens=arrays["spectrag_chunk_tokens"], stats=stats)


def check_padding(folder: Path, eigenvalues: np.ndarray, n: int) -> None:
    """The eigenvalues of n chunks: the first min(n, d + 1) finite, NaN only after them (the padding
    of a graph with fewer than d + 1 nodes); anything else is a damaged array, named."""
    real = min(n, eigenvalues.size)
    if not (np.isfinite(eigenvalues[:real]).all() and np.isnan(eigenvalues[real:]).all()):
        raise IndexFormatError(
            f"{folder / 'spectrag_eigenvalues.npy'}: expected {real} finite eigenvalue(s) then NaN padding for "
            f"{n} chunks, got {int(np.isnan(eigenvalues).sum())} NaN at other positions or infinite values; the "
            "array is damaged (rebuild the stage with `tigrag extend INDEX --methods spectrag`)")


def padded_dimensions(index: Any, stage: ChunkGraph) -> int:
    """Spectral coordinates asked for that the graph cannot give (n chunks give n − 1): zero columns."""
    return max(0, index.config.spectrag.dimensions - max(stage.n_chunks - 1, 0))


def summary(index: Any, stage: ChunkGraph) -> str:
    stats = stage.stats
    signals = ", ".join(f"{name} {r['kept']:,}/{r['edges']:,}" if not r["dropped"] else f"{name} dropped"
                        for name, r in stats["signals"].items())
    loops = f", {stats['self_loops']:,} self loops" if stats.get("self_loops") else ""
    return (f"SpectRAG chunk graph: {stats['edges_kept']:,} edges kept of {stats['edges']:,}{loops} ({signals}); "
            f"{stats['components']:,} components, {stats['zero_eigenvalues']} zero eigenvalues of "
            f"{index.config.spectrag.dimensions + 1} ({stats['eigensolver']}){_padding_note(index, stage)}")


def _padding_note(index: Any, stage: ChunkGraph) -> str:
    padded = padded_dimensions(index, stage)
    if not padded:
        return ""
    d = index.config.spectrag.dimensions
    return (f"; {stage.n_chunks:,} chunks give {d - padded} of the {d} spectral dimensions "
            f"(spectrag.dimensions): the other {padded} coordinates are 0 and their eigenvalues NaN")
