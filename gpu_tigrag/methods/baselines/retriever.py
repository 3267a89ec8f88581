"""Baselines over the same chunks and encoder, batched: NaiveRAG (dense cosine, through the dense first
stage), BM25, and Hybrid
(reciprocal-rank fusion of the two, SpectRAG's paper's strongest baseline). Each is a retriever of
its own, so the evaluation, `query` and `run` treat them as they treat every method."""

from __future__ import annotations

from typing import Any

import numpy as np

from ...retrieve.base import BaseRetriever, PreparedBatch
from ...retrieve.first_stage import first_stage
from ...retrieve.results import QueryResult

#: RRF of the Hybrid baseline: the constant k of 1 / (k + rank), and the ranks counted per list
HYBRID_RRF_K = 60
HYBRID_DEPTH = 100


class NaiveragRetriever(BaseRetriever):
    """NaiveRAG: every chunk by its cosine to the query, ranked by the dense first stage
    (`retrieve.first_stage`: exact block-wise search, or the index's ANN under `dense.search`=auto),
    so no chunks × B block is allocated."""

    method = "naiverag"
    uses_query_tokens = False  # ranks by the vectors alone

    def bytes_per_query(self) -> int:
        # the first stage's blocks are bounded whatever the batch (first_stage.BLOCK_BYTES); per query: its
        # vector and the running top-k (ids and cosines, twice while merging) at the default depth
        return 4 * self.index.embeddings.shape[1] + 2 * 12 * self.default_k()

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        if len(batch) == 0:
            return []
        ids, vals = first_stage(self.device, self.config.dense).search(batch.vectors, k)
        ids, vals = self.be.to_host(ids).T, self.be.to_host(vals).T
        return [self.result(query, ids[q], vals[q]) for q, query in enumerate(batch.queries)]


class Bm25Retriever(BaseRetriever):
    """BM25 of the query's valid tokens (counted with multiplicity); queries are not embedded.

    No chunks × B block: each query's top k by `ops.fusion.bm25_top` (MaxScore over the postings on the
    CPU), the scores and order a ranked top-k of the whole BM25 block gives. A query whose tokens touch
    fewer than k chunks is filled up with unscored chunks (score 0) in chunk-id order, as that top-k does."""

    method = "bm25"
    uses_passage_encoder = False  # no query is embedded: the dense encoder is not even loaded

    def bytes_per_query(self) -> int:
        # per query: its ranked list (ids and scores) at the default depth, and its token rows
        return 16 * self.default_k() + 256

    def prepare(self, queries: Any) -> PreparedBatch:
        queries = list(queries)
        return PreparedBatch(queries, self.query_seeds(queries), np.zeros((len(queries), 0), dtype=np.float32))

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        from ...ops.fusion import bm25_top

        if len(batch) == 0:
            return []
        k = min(k, self.index.n_chunks)
        ids, vals, counts = bm25_top(self.be, self.device.bm25, self.device.postings, self.device.postings_max_weight,
                                     batch.seeds, self.index.n_vocab, k)
        fill_unscored(ids, vals, counts)
        return [self.result(query, ids[q], vals[q]) for q, query in enumerate(batch.queries)]


def fill_unscored(ids: np.ndarray, scores: np.ndarray, counts: np.ndarray) -> None:
    """Fill each row of `ids` past `counts[q]` (its chunks scoring > 0) with the lowest chunk ids not
    already in it, at score 0: where a ranked top-k of a whole score block puts its zero-score ties.
    One array pass over the rows that need it: a row's fill lies below 2 × its width (width − count
    free ids below width + count)."""
    width = ids.shape[1]
    short = np.flatnonzero(counts < width)
    if short.size == 0:
        return
    listed_ids, listed = ids[short], np.arange(width)[None, :] < counts[short][:, None]
    taken = np.zeros((short.size, 2 * width), dtype=bool)
    row, col = np.nonzero(listed & (listed_ids < 2 * width))
    taken[row, listed_ids[row, col]] = True
    free = ~taken
    rank = np.cumsum(free, axis=1) - 1  # each free id's place among its row's free ids
    row, chunk = np.nonzero(free & (rank < (width - counts[short])[:, None]))
    position = counts[short][row] + rank[row, chunk]
    ids[short[row], position] = chunk
    scores[short[row], position] = 0.0


class HybridRetriever(BaseRetriever):
    """RRF of the dense cosine ranking and the BM25 ranking (chunks with a BM25 score of 0 are not in
    the BM25 list); chunks in neither list follow by cosine.

    No chunks × B block: the dense list is the dense first stage's top k + HYBRID_DEPTH (the top
    HYBRID_DEPTH to fuse, and enough beyond them for the cosine tail of a deep k), the BM25 list the
    top HYBRID_DEPTH of each query by BM25 over slices of queries (`ops.fusion.bm25_top`). Their fusion
    (`ops.fusion.fuse_ranked_lists`) gives what the fused chunks × B block gave, score for score: the
    same float32 reciprocal ranks, the tail's (cosine − 3) · 1e-6, ties by chunk id."""

    method = "hybrid"

    def bytes_per_query(self) -> int:
        # the first stage's and the BM25 lists' blocks are bounded whatever the batch; per query its
        # vector and its lists (ids and scores) at the default depth
        return 4 * self.index.embeddings.shape[1] + 64 * (self.default_k() + 2 * HYBRID_DEPTH)

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        from ...ops.fusion import bm25_top, fuse_ranked_lists

        if len(batch) == 0:
            return []
        n = self.index.n_chunks
        dense_ids, dense_vals = first_stage(self.device, self.config.dense).search(batch.vectors, min(n, k + HYBRID_DEPTH))
        bm25_ids, _, bm25_counts = bm25_top(self.be, self.device.bm25, self.device.postings,
                                            self.device.postings_max_weight, batch.seeds, self.index.n_vocab,
                                            HYBRID_DEPTH)
        ids, vals = fuse_ranked_lists(self.be.to_host(dense_ids).T, self.be.to_host(dense_vals).T, bm25_ids,
                                      bm25_counts, min(HYBRID_DEPTH, n), HYBRID_RRF_K, k)
        return [self.result(query, ids[q], vals[q]) for q, query in enumerate(batch.queries)]


class Bm25PassagesRetriever(BaseRetriever):
    """BM25 of whole passages as bm25s and Lucene score them (`passage_bm25`: word tokens, stop words,
    optional stemming); each passage answers with its first chunk, so a ranking holds each passage once.
    Queries are not embedded."""

    method = "bm25passages"
    uses_passage_encoder = False

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        from .passage_bm25 import first_chunks, passage_bm25_of

        settings = self.config.bm25passages
        key = f"bm25passages:{settings.k1!r}:{settings.b!r}:{settings.stopwords}:{settings.stemmer}"
        self.bm25 = self.device.get(key + ":host", lambda: passage_bm25_of(self.index, settings))
        self.postings = self.device.get(key, lambda: self.be.csr(self.bm25.postings), source=self.bm25)
        self.n_passages = len(self.index.passage_titles)
        self.first_chunk = first_chunks(self.index.chunk_passage, self.n_passages)

    #: passages × B blocks alive at once: the sparse product's dense copy, its transpose, the top-k temporaries
    PASSAGE_BYTES_PER_QUERY = 4 * 4

    def bytes_per_query(self) -> int:
        return self.n_passages * self.PASSAGE_BYTES_PER_QUERY

    def prepare(self, queries: Any) -> PreparedBatch:
        queries = list(queries)
        return PreparedBatch(queries, self.bm25.query_terms(queries), np.zeros((len(queries), 0), dtype=np.float32))

    def _retrieve_batch(self, batch: PreparedBatch, k: int) -> list[QueryResult]:
        if len(batch) == 0:
            return []
        from ...ops.fusion import bm25_postings_scores

        scores = bm25_postings_scores(self.be, self.postings, batch.seeds, self.bm25.n_terms)
        ids, vals = self.top_k(scores, min(k, self.n_passages))
        return [self.result(query, self.first_chunk[ids[q]], vals[q]) for q, query in enumerate(batch.queries)]
