"""TIGRAG's score steps over full chunks × B blocks: the reference (`tigrag.blocks="full"`).

Every stage of the retriever's hop loop that touches chunk scores is a method here, and
`sparse_blocks.SparseBlocks` answers the same methods over per-query candidate lists; the loop
(`retriever.TigragRetriever`) does not know which one it runs. A "block" is whatever the
implementation holds: here a chunks × B array (scores, −inf where a chunk is not ranked; or a
bool mask), over every chunk of the corpus, so memory and time grow with the corpus.
"""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ...ops.dense_dot import query_dot
from ...ops.fusion import NEG_INF, bm25_scores, reciprocal_rank
from ...ops.topk import best_of_each_group
from .fusion import hybrid_first_hop, link_mask
from .rerank import masked_max_cosine
from .scoring import cumulative_mass_pool, ppr_weighted_bm25


class FullBlocks:
    """The chunks × B implementation of the hop loop's score stages (module doc)."""

    #: bytes per (chunk, query) of the blocks alive at once: scores, sorted copy, cumulative sums,
    #: cosines, merged scores (float32), masks
    CHUNK_BYTES_PER_QUERY = 6 * 4 + 2
    #: more chunks × B blocks with fusion on: full cosine, BM25, RRF lists and sums, link masks, bonus
    FUSION_CHUNK_BYTES_PER_QUERY = 8 * 4 + 2

    def __init__(self, retriever: Any):
        self.r = retriever
        self.be, self.settings = retriever.be, retriever.settings

    def bytes_per_query(self) -> int:
        fusion = self.settings.fusion
        chunk_bytes = self.CHUNK_BYTES_PER_QUERY + (
            self.FUSION_CHUNK_BYTES_PER_QUERY if fusion.first_hop == "hybrid" or fusion.title_links else 0)
        return self.r.index.n_chunks * chunk_bytes

    def score_and_pool(self, ids: Any, weights: Any, n_seeds: np.ndarray) -> tuple[Any, Any, np.ndarray]:
        """(ρ, pool, dense_fallback): PPR-weighted BM25 (eq. 3.7) of the top-γ tokens, the cumulative-mass
        pool (eq. 3.9) and the queries whose pool is every chunk (no seed, or an empty pool)."""
        be, xp, timer = self.be, self.be.xp, self.r.timer
        t = time.perf_counter()
        rho = ppr_weighted_bm25(be, self.r.bm25, ids, weights)
        t = timer.add("score", t)
        pool = cumulative_mass_pool(be, rho, self.settings.pool_threshold)
        fallback = be.to_host(~pool.any(axis=0)) | (n_seeds == 0)
        if fallback.any():
            pool[:, xp.asarray(np.nonzero(fallback)[0])] = True
        timer.add("pool", t)
        return rho, pool, fallback

    def pool_sizes(self, hop: Any) -> np.ndarray:
        return self.be.to_host(hop.pool.sum(axis=0))

    def question_cosine(self, query_vectors: Any, hop: Any, k: int) -> Any:
        """The cosine of every chunk to each question (chunks × B; the embeddings are L2-normalised)."""
        return query_dot(self.be, self.r.embeddings, query_vectors, self.r.device.embedding_tiles)

    def pool_cosine(self, hop: Any, cosine: Any) -> Any:
        """The question's cosine on its pool, −inf elsewhere (section 3.6)."""
        return self.be.xp.where(hop.pool, cosine, NEG_INF)

    def expanded_cosine(self, hop: Any, vectors: Any, owner: np.ndarray, n_queries: int) -> Any:
        """The max cosine over each query's expanded-query vectors on its pool (eq. 3.15)."""
        return masked_max_cosine(self.be, self.r.embeddings, vectors, owner, n_queries, hop.pool,
                                 self.r.device.embedding_tiles)

    def rho_ranking(self, hop: Any) -> Any:
        """ρ on the pool, −inf elsewhere (the rerank ablation)."""
        xp = self.be.xp
        return xp.where(hop.pool, hop.rho, xp.float32(-np.inf)).astype(xp.float32)

    def hybrid_pick(self, cosine: Any, seeds: Sequence[np.ndarray], hop: Any, linked: Any) -> Any:
        """RRF of cosine, BM25, ρ and the question's linked chunks (`fusion.hybrid_first_hop`)."""
        fusion, r = self.settings.fusion, self.r
        return hybrid_first_hop(self.be, cosine, bm25_scores(self.be, r.bm25, seeds, r.index.n_vocab), hop.rho,
                                linked, fusion.rrf_depth, fusion.rrf_k)

    def link_mask(self, passages: list[list[int]] | None) -> Any:
        """The chunks of each query's linked passages (bool chunks × B), or None."""
        if passages is None:
            return None
        return link_mask(self.be, self.r.passage_chunks, passages, self.r.index.n_chunks)

    def top_chunks(self, block: Any, count: int) -> np.ndarray:
        """Ids (B × count) of the best-scoring chunks per query; −1 where fewer are ranked."""
        ids, vals = self.r.top_k(block, count)
        return np.where(np.isfinite(vals), ids, -1)

    def values_at(self, block: Any, queries: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        """The block's scores at (query, chunk) pairs, on the host (one gather per batch)."""
        return self.be.to_host(block[self.be.asarray(chunks), self.be.asarray(queries)])

    def merge_hops(self, sigma: Any, hop_scores: list[tuple[np.ndarray, Any]]) -> Any:
        """Final chunk scores from hop 1 and the expanded hops: max over hops (eq. 3.16) or RRF."""
        be, xp, fusion = self.be, self.be.xp, self.settings.fusion
        if fusion.hop_fusion == "max":
            final = sigma.copy()
            for cols, scores in hop_scores:
                cols = xp.asarray(cols)
                final[:, cols] = xp.maximum(final[:, cols], scores)
            return final
        final = reciprocal_rank(be, sigma, fusion.rrf_depth, fusion.rrf_k)
        for cols, scores in hop_scores:
            cols = xp.asarray(cols)
            final[:, cols] += reciprocal_rank(be, scores, fusion.rrf_depth, fusion.rrf_k)
        return xp.where(final > 0, final, NEG_INF).astype(xp.float32)

    def add_link_bonus(self, final: Any, cosine: Any, question: Any, bridged: Any) -> Any:
        """Calibrated scores: linked chunks get a fixed bonus on top of their score (their question
        cosine where no hop pooled them), so a passage the question names, or the passage of a
        bridging entity, cannot be evicted by an unlinked chunk of slightly higher cosine.

        With `link_bonus_unit="cosine_std"` the bonus is counted in standard deviations of the
        query's cosine over all chunks: encoders spread their cosines very differently (about 0.10
        for all-MiniLM-L6-v2, 0.025 for multilingual-e5-small on 2Wiki), and a bonus in cosine units
        tuned on one overrides the ranking of the other (bench/results/link_bonus.md)."""
        xp, fusion = self.be.xp, self.settings.fusion
        base = xp.where(xp.isfinite(final), final, cosine)
        bonus = fusion.question_link_bonus * question + fusion.bridge_link_bonus * bridged
        if fusion.link_bonus_unit == "cosine_std":
            bonus = bonus * column_std(xp, cosine)[None, :]
        bonus = bonus.astype(xp.float32)
        return xp.where(question | bridged, base + bonus, final)

    def final_ranking(self, final: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × k, of the final top-k; with `dedup_passages`, each passage appears once,
        at its best chunk (highest score, then lowest id)."""
        if self.settings.fusion.dedup_passages:
            final = best_of_each_group(self.be, final, *self.r.device_passage_chunks)
        return self.r.top_k(final, k)


def column_std(xp: Any, block: Any) -> Any:
    """float32 standard deviation of each column of a chunks × B block, the same bits in any batch: a
    reduction down axis 0 of a C-ordered block adds a column's rows in an order set by B (one column:
    pairwise; several: row after row), so each column is reduced as a contiguous row of the transpose."""
    return xp.ascontiguousarray(block.T).std(axis=1, dtype=xp.float32)
