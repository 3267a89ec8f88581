"""Array checks shared by every method's stage loader: a stored array that does not fit the index is
an IndexFormatError naming its file, never a crash or a silent wrong result later."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse

from ..errors import IndexFormatError


def csr_arrays(prefix: str, matrix: scipy.sparse.csr_matrix) -> dict[str, np.ndarray]:
    """The three arrays `prefix`_{indptr,indices,data} of a CSR matrix (int64, int32, float32)."""
    return {
        f"{prefix}_indptr": matrix.indptr.astype(np.int64),
        f"{prefix}_indices": matrix.indices.astype(np.int32),
        f"{prefix}_data": matrix.data.astype(np.float32),
    }


def check_arrays(folder: Path, arrays: dict[str, np.ndarray], expected: dict[str, tuple[tuple[int, ...], str]],
                 what: str) -> None:
    """IndexFormatError naming the first array whose shape or dtype kind is not the expected one."""
    for name, (shape, kind) in expected.items():
        if arrays[name].shape != shape or arrays[name].dtype.kind != kind:
            raise IndexFormatError(f"{folder / (name + '.npy')}: {arrays[name].dtype} array of shape "
                                   f"{arrays[name].shape}, expected {shape} for {what}")


def csr_from_arrays(folder: Path, arrays: dict[str, np.ndarray], prefix: str, shape: tuple[int, int],
                    what: str) -> scipy.sparse.csr_matrix:
    """The CSR matrix of arrays `prefix`_{indptr,indices,data}, its entries checked against `shape`."""
    indptr, indices, data = (arrays[f"{prefix}_{part}"] for part in ("indptr", "indices", "data"))
    nnz = int(indptr[-1]) if indptr.size else 0
    outside = nnz and not 0 <= int(indices.min()) <= int(indices.max()) < shape[1]
    if indices.shape != (nnz,) or data.shape != (nnz,) or outside:
        raise IndexFormatError(f"{folder / (prefix + '_indices.npy')}: {what} do not fit "
                               f"a {shape[0]} × {shape[1]} matrix with {nnz} entries")
    try:
        return scipy.sparse.csr_matrix((data, indices, indptr), shape=shape)
    except ValueError as exc:
        raise IndexFormatError(f"{folder / (prefix + '_indptr.npy')}: not valid {what} ({exc})") from None
