"""The arrays of a loaded index checked by meaning, not only by checksum.

A checksum says a file is the one its manifest lists, not that the manifest and the file were
written by the engine: an edited array re-signed in its manifest passes it. The query kernels
(numba, CUDA) index other arrays with the ids and offsets they are given and never check them,
so an id past its table reads (or writes) outside an array: a wrong answer, a traceback or a
segmentation fault. `load_index` therefore checks, before any kernel sees them:

* each `.npy` header: a version this engine writes, no Python objects, and a shape whose bytes
  are the file's size, before anything is allocated (`read_npy`; a header claiming terabytes is
  a damaged file, not an out-of-memory);
* every base array's dtype and shape (as `store._base_arrays` writes them);
* every offset array (`*_indptr`) starts at 0, never decreases and ends at its data's length;
* every id within its table: token ids < vocabulary, graph and BM25 columns < their width,
  chunk -> passage < passages, entity ids < entities, entity label masks within the label bits;
* values: BM25 weights finite and >= 0, token-graph weights finite and > 0 (window counts; the
  graph is written symmetric, which is not checked: it costs a transpose), passage vectors finite
  and of unit length (|norm - 1| <= `NORM_TOLERANCE`; the encoder protocol returns L2-normalised
  vectors) or all zero where the index's encoder is the hashing stand-in (its vector of a text
  without a word);
* string columns of type string, without nulls.

Method stages use the same helpers in their `from_arrays`. Each failure is an IndexFormatError
naming the file and what is wrong (exit 3). The checks are vectorised single passes; their cost
at load is measured by bench/load_checks.py (docs/index-format.md, "Checked at load").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ..config_types import ENTITY_LABELS
from ..errors import IndexFormatError

#: how far from 1 a stored unit vector's norm may be (float32 rounding of a normalised vector is ~1e-7)
NORM_TOLERANCE = 1e-3
#: npy format versions the engine writes (numpy writes 2.0 only for headers over 64 KiB)
NPY_VERSIONS = ((1, 0), (2, 0))
#: the backend of the encoder whose vector of a text without a word is all zero (encoders/hashing.py)
ZERO_ROW_BACKENDS = ("hashing",)

#: dtype and number of dimensions of every base array, as `store._base_arrays` writes them
BASE_ARRAYS: dict[str, tuple[np.dtype, int]] = {
    "chunk_passage": (np.dtype(np.int32), 1),
    "token_indptr": (np.dtype(np.int64), 1),
    "token_ids": (np.dtype(np.int32), 1),
    "embeddings": (np.dtype(np.float32), 2),
    "entity_chunk_indptr": (np.dtype(np.int64), 1),
    "entity_chunk_ids": (np.dtype(np.int32), 1),
    "entity_chunk_masks": (np.dtype(np.int32), 1),
    "entity_token_indptr": (np.dtype(np.int64), 1),
    "entity_token_ids": (np.dtype(np.int32), 1),
    "graph_indptr": (np.dtype(np.int64), 1),
    "graph_indices": (np.dtype(np.int32), 1),
    "graph_data": (np.dtype(np.float32), 1),
    "bm25_indptr": (np.dtype(np.int64), 1),
    "bm25_indices": (np.dtype(np.int32), 1),
    "bm25_data": (np.dtype(np.float32), 1),
}
#: the unsigned view of each id dtype (validate.check_ids)
_UNSIGNED = {np.dtype(np.int32): np.dtype(np.uint32), np.dtype(np.int64): np.dtype(np.uint64)}
_FLOAT32_INF_BITS = 0x7F800000
#: dtypes of a CSR matrix's three arrays (`stage_arrays.csr_arrays`)
CSR_DTYPES = {"indptr": np.dtype(np.int64), "indices": np.dtype(np.int32), "data": np.dtype(np.float32)}


def _fail(file: Path, problem: str, repair: str | None) -> IndexFormatError:
    return IndexFormatError(f"{file}: {problem}" + (f"; {repair}" if repair else ""))


def _npy(folder: Path, name: str) -> Path:
    return folder / f"{name}.npy"


# ---- reading -----------------------------------------------------------------------------------

def read_npy(file: Path, repair: str | None) -> np.ndarray:
    """The array in npy file `file`, its header checked before anything is allocated: a version the
    engine writes, no object dtype, and shape × itemsize equal to the bytes after the header."""
    try:
        with open(file, "rb") as handle:
            version = np.lib.format.read_magic(handle)
            if version not in NPY_VERSIONS:
                raise _fail(file, f"npy format version {version[0]}.{version[1]}, which this engine never "
                                  "writes (a damaged file)", repair)
            reader = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                      else np.lib.format.read_array_header_2_0)
            shape, _, dtype = reader(handle)
            if dtype.hasobject:
                raise _fail(file, "holds Python objects, which an index never stores (a damaged or crafted "
                                  "file; nothing of it was executed)", repair)
            data_bytes = Path(file).stat().st_size - handle.tell()
            claimed = math.prod(int(d) for d in shape) * dtype.itemsize
            if claimed != data_bytes or any(int(d) < 0 for d in shape):
                raise _fail(file, f"damaged file: its header claims a {dtype} array of shape {_shape(shape)} "
                                  f"({claimed:,} bytes), the file holds {data_bytes:,} bytes of data", repair)
            handle.seek(0)
            return np.lib.format.read_array(handle, allow_pickle=False)
    except IndexFormatError:
        raise
    except (ValueError, EOFError, OverflowError, TypeError) as exc:
        raise _fail(file, f"not a readable array ({exc})", repair) from None


def _shape(shape: tuple[int, ...]) -> str:
    text = str(tuple(int(d) for d in shape))
    return text if len(text) <= 120 else text[:117] + "..."


# ---- checks ------------------------------------------------------------------------------------

def check_dtype(file: Path, array: np.ndarray, dtype: Any, ndim: int, repair: str | None) -> None:
    """The array must be a C-ordered `dtype` array of `ndim` dimensions (native byte order)."""
    dtype = np.dtype(dtype)
    if array.dtype != dtype or array.ndim != ndim or not array.flags.c_contiguous:
        order = "" if array.flags.c_contiguous else ", Fortran order"
        raise _fail(file, f"a {array.dtype.str} array of {array.ndim} dimension(s){order}, expected "
                          f"{dtype} with {ndim} (as the engine writes it); the array is damaged", repair)


def check_length(file: Path, array: np.ndarray, length: int, what: str, repair: str | None) -> None:
    if array.shape[0] != length:
        raise _fail(file, f"{array.shape[0]:,} rows, expected {length:,} ({what}); the array is damaged", repair)


def check_ids(file: Path, ids: np.ndarray, size: int, what: str, repair: str | None, noun: str = "ids") -> None:
    """Every id in [0, size): `what` names the table they point into."""
    if ids.size == 0:
        return
    unsigned = _UNSIGNED.get(ids.dtype)
    if unsigned is not None and size > 0 and int(ids.view(unsigned).max()) < size:
        return  # one pass: a negative id reads as a huge unsigned one
    low, high = int(ids.min()), int(ids.max())
    if low < 0 or high >= size:
        bad = low if low < 0 else high
        count = int(np.count_nonzero((ids < 0) | (ids >= size)))
        raise _fail(file, f"{count:,} of its {ids.size:,} {noun} are outside {what} (0 to {size - 1:,}), e.g. "
                          f"{bad:,}; the array is damaged", repair)


def check_offsets(file: Path, indptr: np.ndarray, rows: int, length: int, what: str, repair: str | None) -> None:
    """`indptr` holds rows + 1 offsets into `length` entries: 0 first, never decreasing, `length` last."""
    if indptr.shape != (rows + 1,):
        raise _fail(file, f"{indptr.shape[0]:,} offsets, expected {rows + 1:,} ({rows:,} {what} + 1); the array is "
                          "damaged", repair)
    if int(indptr[0]) != 0 or int(indptr[-1]) != length:
        raise _fail(file, f"offsets run from {int(indptr[0]):,} to {int(indptr[-1]):,}, expected 0 to {length:,} "
                          f"(the entries of its {what}); the array is damaged", repair)
    if rows > 1 and bool((indptr[1:] < indptr[:-1]).any()):
        at = int(np.flatnonzero(indptr[1:] < indptr[:-1])[0])
        raise _fail(file, f"offsets decrease at row {at:,} ({int(indptr[at]):,} then {int(indptr[at + 1]):,}); "
                          "the array is damaged", repair)


def check_values(file: Path, values: np.ndarray, what: str, repair: str | None, positive: bool = False) -> None:
    """Every value finite and >= 0 (> 0 with `positive`); one min and one max pass, no temporary."""
    if values.size == 0:
        return
    if not positive and values.dtype == np.float32 and int(values.view(np.uint32).max()) < _FLOAT32_INF_BITS:
        return  # one pass: the bits of a finite float32 >= +0 are below those of +inf, a negative's sign bit is set
    low, high = values.min(), values.max()
    if not (low > 0 if positive else low >= 0) or not np.isfinite(high):
        bound = ("finite " if values.dtype.kind == "f" else "") + ("> 0" if positive else ">= 0")
        bad = int(np.count_nonzero(~(values > 0 if positive else values >= 0) | ~np.isfinite(values)))
        raise _fail(file, f"{bad:,} of its {values.size:,} {what} are not {bound} (smallest {low}, largest "
                          f"{high}); the array is damaged", repair)


def check_unit_rows(file: Path, vectors: np.ndarray, zero_rows: bool, repair: str | None) -> None:
    """Every row of unit L2 norm (within NORM_TOLERANCE), or all zero where `zero_rows`."""
    if vectors.size == 0:
        return
    squares = np.einsum("ij,ij->i", vectors, vectors)
    off = np.abs(squares - 1.0) > 2 * NORM_TOLERANCE  # |n² − 1| ≈ 2|n − 1| near 1; NaN compares False
    bad = off & ~(squares == 0) if zero_rows else off
    bad |= ~np.isfinite(squares)
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        allowed = " or all zero" if zero_rows else ""
        raise _fail(file, f"{int(bad.sum()):,} of its {vectors.shape[0]:,} vectors are not of unit length{allowed} "
                          f"(row {first:,} has norm {float(np.sqrt(squares[first])):.6g}; the encoder's vectors are "
                          "L2-normalised); the array is damaged", repair)


def check_csr(folder: Path, arrays: dict[str, np.ndarray], prefix: str, shape: tuple[int, int], what: str,
              repair: str | None, positive: bool = False) -> None:
    """Arrays `prefix`_{indptr,indices,data} of a shape[0] × shape[1] CSR matrix: dtypes, offsets,
    column ids, finite values >= 0 (> 0 with `positive`)."""
    for part, dtype in CSR_DTYPES.items():
        check_dtype(_npy(folder, f"{prefix}_{part}"), arrays[f"{prefix}_{part}"], dtype, 1, repair)
    indptr, indices, data = (arrays[f"{prefix}_{part}"] for part in CSR_DTYPES)
    if data.shape != indices.shape:
        raise _fail(_npy(folder, f"{prefix}_data"), f"{data.size:,} values for {indices.size:,} column ids "
                    f"({prefix}_indices.npy); the array is damaged", repair)
    check_offsets(_npy(folder, f"{prefix}_indptr"), indptr, shape[0], indices.size, f"rows of {what}", repair)
    check_ids(_npy(folder, f"{prefix}_indices"), indices, shape[1], f"the {shape[1]:,} columns of {what}", repair)
    check_values(_npy(folder, f"{prefix}_data"), data, f"values of {what}", repair, positive)


def check_strings(file: Path, column: Any, repair: str | None) -> None:
    """A Parquet column (pyarrow ChunkedArray) of strings without nulls."""
    import pyarrow as pa

    if not (pa.types.is_string(column.type) or pa.types.is_large_string(column.type)):
        raise _fail(file, f"a column of {column.type}, expected strings; the file is damaged", repair)
    if column.null_count:
        raise _fail(file, f"{column.null_count:,} of its {len(column):,} strings are missing (null); the file is "
                          "damaged", repair)


def check_base(folder: Path, arrays: dict[str, np.ndarray], *, passages: int, chunks: int, vocab: int,
               entities: int, dim: Any = None, encoder_backend: str = "", repair: str | None = None) -> None:
    """Every base array of an index read from generation `folder` (module doc), against the counts of
    its string tables; `dim` is the vector size its manifest records (None: not recorded)."""
    for name, (dtype, ndim) in BASE_ARRAYS.items():
        check_dtype(_npy(folder, name), arrays[name], dtype, ndim, repair)
    a = arrays
    check_length(_npy(folder, "chunk_passage"), a["chunk_passage"], chunks, "one per chunk of chunks.parquet", repair)
    check_ids(_npy(folder, "chunk_passage"), a["chunk_passage"], passages, "the passages", repair)
    check_offsets(_npy(folder, "token_indptr"), a["token_indptr"], chunks, a["token_ids"].size,
                  "chunks' token ids (token_ids.npy)", repair)
    check_ids(_npy(folder, "token_ids"), a["token_ids"], vocab, "the vocabulary", repair)
    check_csr(folder, a, "graph", (vocab, vocab), "the token graph", repair, positive=True)
    check_csr(folder, a, "bm25", (chunks, vocab), "the BM25 matrix", repair)
    ids, masks = a["entity_chunk_ids"], a["entity_chunk_masks"]
    check_offsets(_npy(folder, "entity_chunk_indptr"), a["entity_chunk_indptr"], chunks, ids.size,
                  "chunks' entity occurrences (entity_chunk_ids.npy)", repair)
    check_ids(_npy(folder, "entity_chunk_ids"), ids, entities, "the entity table", repair)
    check_length(_npy(folder, "entity_chunk_masks"), masks, ids.size, "one label mask per entity occurrence",
                 repair)
    check_ids(_npy(folder, "entity_chunk_masks"), masks, 1 << len(ENTITY_LABELS),
              f"the bits of the {len(ENTITY_LABELS)} entity labels", repair, noun="label masks")
    check_offsets(_npy(folder, "entity_token_indptr"), a["entity_token_indptr"], entities, a["entity_token_ids"].size,
                  "entities' token ids (entity_token_ids.npy)", repair)
    check_ids(_npy(folder, "entity_token_ids"), a["entity_token_ids"], vocab, "the vocabulary", repair)
    embeddings = a["embeddings"]
    check_length(_npy(folder, "embeddings"), embeddings, chunks, "one vector per chunk", repair)
    if dim is not None and embeddings.shape[1] != dim:
        raise _fail(_npy(folder, "embeddings"), f"vectors of {embeddings.shape[1]} dimensions, the manifest's encoder "
                    f"gives {dim}; the array is damaged", repair)
    check_unit_rows(_npy(folder, "embeddings"), embeddings, encoder_backend in ZERO_ROW_BACKENDS, repair)
