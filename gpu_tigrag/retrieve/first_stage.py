"""The dense first stage: each query's k chunks of highest cosine, without a chunks × B block.

Methods that need the best chunks of the whole corpus by cosine (the dense fallback of a query with
no seed, the dense list of a fused first hop, NaiveRAG) ask `first_stage(device)` for them.
`FlatSearch` is exact: it scans the passage vectors in row blocks and keeps a running top-k, so its
memory is one block × B whatever the corpus size, and its ranking is the full cosine ranking's
(equal scores in chunk-id order, as `ops.topk.ranked_top_k`).

`AnnSearch` asks the index's stored FAISS ANN (`index/ann.py`: IVF or HNSW) for each query's k
candidates, then scores them exactly against the passage vectors and ranks them as FlatSearch does,
so the cosines it returns are the true ones and only the candidate set is approximate. It is the
first stage when the index holds an ANN and the query settings leave `dense.search` at "auto"
(`first_stage(device, settings)`); "exact" always scans. On a GPU backend the search is FlatSearch
(a GEMM there; the GPU machines have neither faiss-gpu nor cuVS).
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

import numpy as np

from ..backend import Backend
from ..config_types import DenseSearchConfig
from ..ops.dense_dot import query_dot
from ..ops.screen import screened_top_k
from ..threads import wide_blas
from ..ops.topk import ranked_top_k

log = logging.getLogger(__name__)

#: bytes of one block of scores and its top-k temporaries, per (row, query): sized to stay in cache-sized slices
BLOCK_BYTES = 64 << 20
#: from this many chunks the search screens with a BLAS product and re-scores the candidates (ops/screen.py);
#: below, the plain scan is as fast. The ranking is the same either way.
SCREEN_MIN_ROWS = 2048
#: ... and from this many chunks per result asked for: a deep top k (Hybrid's k + 100) costs the screen's heaps and
#: candidates more than the scan's top-k pass below that (12,849 × 256 stand-ins at k 110: 25 against 17 ms)
SCREEN_ROWS_PER_K = 256
#: ... for batches of this many queries or more. Fewer take the plain scan (its one-query kernels): a one-query
#: product gains nothing on one BLAS thread, and on two the BLAS workers, woken per call, spin beside the numba
#: threads (one question per call at 131,072 chunks: 70 ms screened against 5.6 ms scanned in the bench process)
SCREEN_MIN_QUERIES = 8
#: rows of one screening block (B × rows float32 scores: 16 MB at B = 256; a query's row of them in L2)
SCREEN_BLOCK_ROWS = 16384


class DenseSearch(Protocol):
    """What a dense first stage answers."""

    def search(self, vectors: Any, k: int) -> tuple[Any, Any]:
        """(ids, cosines), k × B on the backend, best first per column; ids are int64 chunk ids."""
        ...


class FlatSearch:
    """Exact top-k by cosine over every chunk (module doc)."""

    def __init__(self, be: Backend, embeddings: Any, tiles: Any = None):
        """`tiles`: the embeddings' `RowTiles` (a device's `embedding_tiles`), for searches of a few queries."""
        self.be, self.embeddings, self.tiles = be, embeddings, tiles
        self._max_row_norm: float | None = None

    def search(self, vectors: Any, k: int) -> tuple[Any, Any]:
        be = self.be
        vectors = be.asarray(vectors)
        n, n_queries = self.embeddings.shape[0], vectors.shape[0]
        k = min(k, n)
        if k and n >= max(SCREEN_MIN_ROWS, SCREEN_ROWS_PER_K * k) and n_queries >= SCREEN_MIN_QUERIES:
            return screened_top_k(be, self.embeddings, vectors, k, self.max_row_norm(), SCREEN_BLOCK_ROWS,
                                  self._screen_product, self.scan)
        return self.scan(vectors, k)

    def max_row_norm(self) -> float:
        """The largest Euclidean norm of a chunk vector (the screen's error bound), found once."""
        if self._max_row_norm is None:
            rows = self.be.to_host(self.embeddings)
            norms = [float(np.sqrt(np.einsum("ij,ij->i", block, block, dtype=np.float64)).max(initial=0.0))
                     for block in (rows[i:i + SCREEN_BLOCK_ROWS] for i in range(0, rows.shape[0], SCREEN_BLOCK_ROWS))]
            self._max_row_norm = max(norms, default=0.0) * (1.0 + 1e-6)
        return self._max_row_norm

    def _screen_product(self, vectors: Any, rows: Any, out: Any) -> Any:
        """The BLAS screening scores of a block of rows, B × rows, into `out` (the numba threads' count of BLAS
        threads on the CPU)."""
        if self.be.is_gpu:
            return self.be.xp.matmul(vectors, rows.T, out=out)
        with wide_blas():
            return np.matmul(vectors, rows.T, out=out)

    def scan(self, vectors: Any, k: int) -> tuple[Any, Any]:
        """The plain scan: every cosine by `query_dot`, in row blocks with a running top-k."""
        be, xp = self.be, self.be.xp
        vectors = be.asarray(vectors)
        n, n_queries = self.embeddings.shape[0], vectors.shape[0]
        k = min(k, n)
        rows = max(k, BLOCK_BYTES // max(4 * 3 * n_queries, 1))
        if rows >= n:  # one block holds the corpus: its top-k is the answer (no merge)
            ids, vals = ranked_top_k(be, query_dot(be, self.embeddings, vectors, self.tiles), k)
            return ids.astype(xp.int64), vals.astype(xp.float32)
        best_ids = xp.zeros((0, n_queries), dtype=xp.int64)
        best_vals = xp.zeros((0, n_queries), dtype=xp.float32)
        for start in range(0, n, rows):
            block = query_dot(be, self.embeddings[start:start + rows], vectors)  # rows × B
            ids, vals = ranked_top_k(be, block, k)
            # the running best (lower ids) come first, so equal scores stay in chunk-id order
            merged_vals = xp.concatenate([best_vals, vals.astype(xp.float32)])
            merged_ids = xp.concatenate([best_ids, ids.astype(xp.int64) + start])
            order, best_vals = ranked_top_k(be, merged_vals, k)
            best_ids = xp.take_along_axis(merged_ids, order, axis=0)
        return best_ids, best_vals


class AnnSearch:
    """Top-k by cosine among the candidates of a FAISS ANN, re-scored exactly (module doc)."""

    def __init__(self, be: Backend, embeddings: Any, ann: Any, settings: DenseSearchConfig):
        """`embeddings`: the host passage vectors; `ann`: the index's AnnIndex (its FAISS index read here)."""
        from ..index.ann import import_faiss

        self.be, self.embeddings, self.ann, self.settings = be, embeddings, ann, settings
        self.index = ann.faiss_index()  # read and checked here the first time (a missing faiss: TigragError)
        faiss = import_faiss(f"searching the index's {ann.kind} ANN")
        if ann.kind == "hnsw":
            self._params = lambda k: faiss.SearchParametersHNSW(efSearch=max(settings.ef_search, k))
        else:
            nprobe = min(settings.nprobe, int(self.index.nlist))
            self._params = lambda k: faiss.SearchParametersIVF(nprobe=nprobe)
        self.exact_fills = 0  # queries the ANN found fewer than k candidates for, answered by FlatSearch

    def search(self, vectors: Any, k: int) -> tuple[Any, Any]:
        be = self.be
        queries = np.ascontiguousarray(be.to_host(vectors), dtype=np.float32)
        n = self.embeddings.shape[0]
        k = min(k, n)
        if queries.shape[0] == 0:
            return be.asarray(np.zeros((k, 0), dtype=np.int64)), be.asarray(np.zeros((k, 0), dtype=np.float32))
        _, found = self.index.search(queries, k, params=self._params(k))  # B × k, -1 where none
        found = found.astype(np.int64)
        short = (found < 0).any(axis=1)
        safe = np.where(found < 0, 0, found)
        # exact cosines of the candidates (gathered a slice of queries at a time: at most BLOCK_BYTES of
        # vectors), ranked best first, equal cosines in chunk-id order
        scores = np.empty(found.shape, dtype=np.float32)
        step = max(1, BLOCK_BYTES // max(4 * k * queries.shape[1], 1))
        for first in range(0, queries.shape[0], step):
            rows = slice(first, first + step)
            scores[rows] = np.einsum("bkd,bd->bk", self.embeddings[safe[rows]], queries[rows], dtype=np.float32)
        order = np.lexsort((safe, -scores), axis=-1)
        ids = np.take_along_axis(safe, order, axis=1)
        vals = np.take_along_axis(scores, order, axis=1).astype(np.float32)
        if short.any():  # the probed lists held fewer than k vectors: those queries are answered exactly
            self.exact_fills += int(short.sum())
            log.debug("%d of %d queries got fewer than %d ANN candidates: searched exactly", int(short.sum()),
                      len(short), k)
            exact_ids, exact_vals = FlatSearch(be, self.embeddings).search(queries[short], k)
            ids[short], vals[short] = be.to_host(exact_ids).T, be.to_host(exact_vals).T
        return be.asarray(np.ascontiguousarray(ids.T)), be.asarray(np.ascontiguousarray(vals.T))


def first_stage(device: Any, settings: DenseSearchConfig | None = None) -> DenseSearch:
    """The dense first stage of a device index (one per process, backend and search settings): the
    index's ANN when it holds one and `settings.search` is "auto" (the default), else FlatSearch.
    An index holding an ANN where faiss cannot be imported is a TigragError naming
    `--set dense.search=exact`; a damaged ANN file an IndexFormatError naming the file."""
    settings = settings or DenseSearchConfig()
    ann = getattr(device.index, "ann", None)
    if ann is None or settings.search == "exact":
        return device.get("first_stage.flat", lambda: FlatSearch(device.be, device.embeddings, device.embedding_tiles))
    if device.be.is_gpu:
        if not device.__dict__.get("_ann_gpu_noted"):
            log.info("the index's %s ANN is not used on the %s backend: the dense first stage is exact (FlatSearch)",
                     ann.kind, device.be.name)
            device.__dict__["_ann_gpu_noted"] = True
        return device.get("first_stage.flat", lambda: FlatSearch(device.be, device.embeddings))
    key = f"first_stage.ann.{ann.kind}.{settings.ef_search if ann.kind == 'hnsw' else settings.nprobe}"
    return device.get(key, lambda: AnnSearch(device.be, device.index.embeddings, ann, settings), source=ann)
