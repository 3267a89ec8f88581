"""One device-resident copy of an index per process and backend, shared by every retriever over it.

The base index's arrays (BM25, embeddings, the PPR transition matrix) and each method's own
device arrays are prepared (normalised, uploaded) on first use and kept, so an evaluation of
many systems over one index uploads each array once. `prepared` counts the preparations, per key.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Callable

from ..backend import Backend


class DeviceIndex:
    """The arrays of `index` on backend `be`, each prepared once (see module doc)."""

    def __init__(self, index: Any, be: Backend):
        self.index, self.be = index, be
        self._arrays: dict[str, Any] = {}
        self._sources: dict[str, Any] = {}
        self.prepared: Counter[str] = Counter()

    @classmethod
    def of(cls, index: Any, be: Backend) -> "DeviceIndex":
        """The process's device index of `index` on `be` (kept on the index object: an index derived
        from it, e.g. by `add_passages` or `with_stage`, is another object with its own)."""
        shared = index.__dict__.setdefault("_device_indexes", {})
        if be.name not in shared:
            shared[be.name] = cls(index, be)
        return shared[be.name]

    def get(self, key: str, prepare: Callable[[], Any], source: Any = None) -> Any:
        """The array (or object) `key`, made by `prepare()` the first time it is asked for; with
        `source` (e.g. the method stage it is made from), made again when the source is another object."""
        if key not in self._arrays or self._sources.get(key) is not source:
            self._arrays[key] = prepare()
            self._sources[key] = source
            self.prepared[key] += 1
        return self._arrays[key]

    @property
    def bm25(self) -> Any:
        """chunks × vocab BM25 (CSR on the backend)."""
        return self.get("bm25", lambda: self.be.csr(self.index.bm25))

    @property
    def postings(self) -> Any:
        """vocab × chunks BM25 (CSR on the backend): row v is token v's postings with their BM25 weights,
        so a query's scores cost the postings of its tokens, not a pass over every chunk."""
        return self.get("postings", lambda: self.be.csr(self.index.bm25.T.tocsr()))

    @property
    def postings_max_weight(self) -> Any:
        """Each token's largest BM25 weight (`ops.fusion.postings_max_weight`): MaxScore's bounds."""
        from ..ops.fusion import postings_max_weight

        return self.get("postings_max_weight", lambda: postings_max_weight(self.index.bm25))

    @property
    def title_links(self) -> Any:
        """Directed title links between chunks, a host scipy CSR (`text.titles.forward_title_links`): built once
        per index and process, whichever method's title-link lift asks first."""
        from ..text.titles import forward_title_links

        index = self.index
        return self.get("title_links", lambda: forward_title_links(
            index.chunk_texts, index.chunk_passage, index.passage_titles, index.config.chunk.title_in_chunk))

    @property
    def embeddings(self) -> Any:
        """chunks × dim passage vectors (unit rows) on the backend."""
        return self.get("embeddings", lambda: self.be.asarray(self.index.embeddings))

    @property
    def embedding_tiles(self) -> Any:
        """The embeddings' rows in transposed tiles (`ops.dense_dot.RowTiles`: made on the first product of a
        few queries on CPU), for `query_dot(..., tiles=)`."""
        from ..ops.dense_dot import RowTiles

        return self.get("embedding_tiles", lambda: RowTiles(self.embeddings))

    @property
    def transition(self) -> Any:
        """The column-stochastic transition matrix of the token graph (PPR)."""
        from ..ops.ppr import TransitionMatrix

        return self.get("transition", lambda: TransitionMatrix.from_adjacency(self.be, self.index.graph))
