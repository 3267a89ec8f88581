"""Array checks shared by every method's stage loader: a stored array that does not fit the index is
an IndexFormatError naming its file, never a crash or a silent wrong result later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse

from ..errors import IndexFormatError
from .validate import check_csr


def csr_arrays(prefix: str, matrix: scipy.sparse.csr_matrix) -> dict[str, np.ndarray]:
    """The three arrays `prefix`_{indptr,indices,data} of a CSR matrix (int64, int32, float32)."""
    return {
        f"{prefix}_indptr": matrix.indptr.astype(np.int64),
        f"{prefix}_indices": matrix.indices.astype(np.int32),
        f"{prefix}_data": matrix.data.astype(np.float32),
    }


def check_arrays(folder: Path, arrays: dict[str, np.ndarray], expected: dict[str, tuple[tuple[int, ...], Any]],
                 what: str) -> None:
    """IndexFormatError naming the first array whose shape or dtype is not the expected one: a dtype
    kind ("i", "f") or an exact dtype (np.int64: as the stage writes it)."""
    for name, (shape, dtype) in expected.items():
        array = arrays[name]
        kind = isinstance(dtype, str) and len(dtype) == 1
        if array.shape != shape or (array.dtype.kind != dtype if kind else array.dtype != np.dtype(dtype)):
            raise IndexFormatError(f"{folder / (name + '.npy')}: {array.dtype} array of shape "
                                   f"{array.shape}, expected {shape}{'' if kind else f' of {np.dtype(dtype)}'} "
                                   f"for {what}")


def csr_from_arrays(folder: Path, arrays: dict[str, np.ndarray], prefix: str, shape: tuple[int, int],
                    what: str, positive: bool = False) -> scipy.sparse.csr_matrix:
    """The CSR matrix of arrays `prefix`_{indptr,indices,data}, checked by `validate.check_csr`
    against `shape` (dtypes, offsets, column ids, finite values >= 0; > 0 with `positive`)."""
    check_csr(folder, arrays, prefix, shape, what, None, positive)
    indptr, indices, data = (arrays[f"{prefix}_{part}"] for part in ("indptr", "indices", "data"))
    try:
        return scipy.sparse.csr_matrix((data, indices, indptr), shape=shape)
    except ValueError as exc:
        raise IndexFormatError(f"{folder / (prefix + '_indptr.npy')}: not valid {what} ({exc})") from None
