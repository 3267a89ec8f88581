"""TIGRAG's score steps over per-query candidate lists (`tigrag.blocks="sparse"`).

The same stages as `full_blocks.FullBlocks`, held as `ops.sparse_scores.SparseScores`: a query's
ρ has an entry for each chunk in the postings of its top-γ tokens (one sparse product with the
postings, B × vocab by vocab × chunks), its pool is a subset of those, and its cosine is a
gather-dot over the pooled (chunk, query) pairs. Where the method needs the whole corpus by cosine
(a query with no seed or an empty pool pools every chunk; the `best` first hop's dense list), it
asks the dense first stage (`retrieve.first_stage`) for the top `max(k, ι, rrf_depth)` chunks:
nothing below them can reach a top-k, a next hop's top-ι or a fused list. The cosine spread of
the `cosine_std` link bonus is √(qᵀ C q) with C the passage vectors' covariance, computed once.

With the flat (exact) first stage the rankings are the dense blocks' up to float rounding at
near-ties, with one exception: the dense `best` first hop ranks zero-score chunks (in chunk-id
order) when a query has fewer than `rrf_depth` positive BM25 or ρ scores; here only positive
scores are listed (bench/results/scale.md measures the agreement).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ...ops import sparse_scores as sparse
from ...ops.fusion import query_term_matrix
from ...ops.sparse_scores import SparseScores
from ...retrieve.first_stage import first_stage
from .fusion import linked_chunks

#: bytes per candidate entry (a chunk in the postings of a query's top-γ tokens) alive at once: the
#: product's index and score (8), its rank (8), kind and mask (2), the kept count (8), the row (8)
BYTES_PER_ENTRY = 34


@dataclass
class QuestionCosine:
    """The question vectors and, for the queries that need the whole corpus, their first-stage top."""

    vectors: Any  # B × dim on the backend
    top: SparseScores  # first-stage cosines of the queries that need them (others: no entries)


class SparseBlocks:
    """The candidate-list implementation of the hop loop's score stages (module doc)."""

    def __init__(self, retriever: Any):
        self.r = retriever
        self.be, self.settings = retriever.be, retriever.settings
        device, index = retriever.device, retriever.index
        if self.settings.scoring == "graph":  # the presence ablation: postings of the presence matrix
            self.postings = device.get("tigrag.presence_postings", lambda: retriever.bm25.T.tocsr())
        else:
            self.postings = device.postings
        cap = self.settings.postings_max
        if cap:  # each token's `cap` highest-weight postings
            full = self.postings
            self.postings = device.get(f"tigrag.postings_top_{cap}_{self.settings.scoring}",
                                       lambda: sparse.top_of_each_row(self.be, full, cap))
        self.chunk_passage = device.get("tigrag.chunk_passage",
                                        lambda: self.be.asarray(np.asarray(index.chunk_passage, dtype=np.int64)))
        self.first_stage = first_stage(device, retriever.config.dense)  # exact, or the index's ANN
        fusion = self.settings.fusion
        if fusion.title_links and fusion.link_bonus_unit == "cosine_std":
            embedding_covariance(self.be, device)  # made with the other per-index arrays, not inside a batch
        self.depth = 0  # first-stage results per query, set per batch from k
        #: the most candidate entries (ρ) one query has had so far: the memory plan follows them
        self.entries_per_query = self._prior_entries()

    # -- memory ------------------------------------------------------------------------------
    def _prior_entries(self) -> int:
        """Candidates of a query before any was met: γ tokens of average (capped) postings, at most every chunk."""
        index, cap = self.r.index, self.settings.postings_max
        mean_postings = index.bm25.nnz / max(index.n_vocab, 1)
        if cap:
            mean_postings = min(mean_postings, cap)
        return int(min(index.n_chunks, max(1024, self.settings.ppr.top_gamma * mean_postings)))

    def bytes_per_query(self) -> int:
        """The most candidates met so far per query (or the prior) × their bytes: one hop's candidates
        are alive at a time; the pools and lists kept between hops are bounded by the caps."""
        return int(self.entries_per_query * BYTES_PER_ENTRY)

    # -- token-graph stage ---------------------------------------------------------------------
    def score_and_pool(self, ids: Any, weights: Any, n_seeds: np.ndarray) -> tuple[SparseScores, SparseScores,
                                                                                    np.ndarray]:
        """(ρ, pool, dense_fallback) as in `FullBlocks.score_and_pool`; a fallback query's pool is every
        chunk, which its entries do not list (its cosine comes from the first stage)."""
        be, xp, timer = self.be, self.be.xp, self.r.timer
        t = time.perf_counter()
        gamma, n_queries = ids.shape
        owners = xp.broadcast_to(xp.arange(n_queries, dtype=xp.int32)[None, :], (gamma, n_queries))
        expansion = be.sparse.coo_matrix(
            (weights.ravel(), (owners.ravel(), ids.ravel().astype(xp.int32))),
            shape=(n_queries, self.postings.shape[0])).tocsr()
        product = expansion @ self.postings  # B × chunks: ρ of every chunk in the postings of Φ_μ
        t = timer.add("score", t)
        sizes = be.to_host(xp.diff(product.indptr))
        if sizes.size:
            self.entries_per_query = max(self.entries_per_query, int(sizes.max()))
        cfg = self.settings
        depth = cfg.fusion.rrf_depth if cfg.fusion.first_hop == "hybrid" else 0
        kind, pooled = sparse.pool_entries(be, product, cfg.pool_threshold, cfg.pool_max, depth)
        keep = kind > 0  # the pool and, for the fused first hop, ρ's top list
        rows = sparse.row_ids(be, xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(_row_counts(be, keep, product))]))
        chunks, scores, kind = product.indices[keep], product.data[keep], kind[keep]
        rho = sparse.from_entries(be, rows, chunks, scores, len(n_seeds))
        fallback = (be.to_host(pooled) == 0) | (n_seeds == 0)
        in_pool = kind == 2
        pool = sparse.from_entries(be, rows[in_pool], chunks[in_pool], scores[in_pool], len(n_seeds))
        pool = pool.where(~be.asarray(fallback)[pool.rows])
        timer.add("pool", t)
        return rho, pool, fallback

    def pool_sizes(self, hop: Any) -> np.ndarray:
        sizes = self.be.to_host(hop.pool.row_sizes(self.be)).astype(np.int64)
        return np.where(hop.dense_fallback, self.r.index.n_chunks, sizes)

    # -- cosines -------------------------------------------------------------------------------
    def _first_stage_top(self, vectors: Any, owners: np.ndarray, n_queries: int) -> SparseScores:
        """First-stage top `depth` chunks of each vector, as entries of its owner (max over a query's vectors)."""
        if owners.size == 0:
            return sparse.empty(self.be, n_queries)
        ids, cosines = self.first_stage.search(vectors, self.depth)
        top = sparse.from_top(self.be, ids, cosines)
        return sparse.from_entries(self.be, self.be.asarray(owners)[top.rows], top.chunks, top.scores, n_queries)

    def question_cosine(self, query_vectors: Any, hop: Any, k: int) -> QuestionCosine:
        """The question vectors, and the first-stage top of the queries that pool every chunk (all
        queries when the first hop fuses a dense list)."""
        fusion = self.settings.fusion
        self.depth = max(k, self.settings.iota, fusion.rrf_depth if fusion.first_hop == "hybrid" else 0)
        n = query_vectors.shape[0]
        wanted = np.arange(n) if fusion.first_hop == "hybrid" else np.nonzero(hop.dense_fallback)[0]
        vectors = query_vectors[self.be.asarray(wanted)] if wanted.size else query_vectors[:0]
        return QuestionCosine(query_vectors, self._first_stage_top(vectors, wanted, n))

    def _cosine_at(self, vectors: Any, rows: Any, chunks: Any) -> Any:
        return sparse.gather_dot(self.be, self.r.embeddings, vectors, chunks, rows)

    def pool_cosine(self, hop: Any, cosine: QuestionCosine) -> SparseScores:
        """The question's cosine on its pool; a fallback query's first-stage top."""
        pool = hop.pool
        pooled = pool.with_scores(self._cosine_at(cosine.vectors, pool.rows, pool.chunks))
        fallback = self.be.asarray(hop.dense_fallback)
        top = cosine.top.where(fallback[cosine.top.rows])
        return sparse.concat(self.be, [pooled, top], "max") if len(top) else pooled

    def expanded_cosine(self, hop: Any, vectors: Any, owner: np.ndarray, n_queries: int) -> SparseScores:
        """The max cosine over each query's expanded-query vectors on its pool (eq. 3.15); a fallback
        query's first-stage top of each of its vectors."""
        be = self.be
        pool = hop.pool
        counts = np.bincount(owner, minlength=n_queries)
        starts = be.asarray(np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64))
        counts_d = be.asarray(counts.astype(np.int64))
        best = sparse.gather_max_dot(be, self.r.embeddings, vectors, pool.chunks, starts[pool.rows], counts_d[pool.rows])
        pooled = pool.with_scores(best)
        fallback_vectors = np.nonzero(hop.dense_fallback[owner])[0]
        if fallback_vectors.size == 0:
            return pooled
        top = self._first_stage_top(vectors[be.asarray(fallback_vectors)], owner[fallback_vectors], n_queries)
        return sparse.concat(be, [pooled, top], "max")

    def rho_ranking(self, hop: Any) -> SparseScores:
        """ρ on the pool (the rerank ablation)."""
        return hop.pool

    # -- fusion --------------------------------------------------------------------------------
    def hybrid_pick(self, cosine: QuestionCosine, seeds: Sequence[np.ndarray], hop: Any,
                    linked: SparseScores | None) -> SparseScores:
        """RRF of the first-stage cosine list, BM25 and ρ, plus the question's linked chunks ranked by
        that fused score and counted twice (`fusion.hybrid_first_hop`)."""
        be, fusion = self.be, self.settings.fusion
        depth, k = fusion.rrf_depth, fusion.rrf_k
        terms = query_term_matrix(be, seeds, self.r.index.n_vocab).T.tocsr()
        bm25 = sparse.from_csr(be, terms @ self.postings)
        bm25 = bm25.where(bm25.scores > 0)
        lists = [sparse.reciprocal_rank(be, block, depth, k) for block in (cosine.top, bm25, hop.rho)]
        fused = sparse.concat(be, lists, "sum")
        if linked is not None and len(linked):
            at_links = linked.with_scores(sparse.lookup(be, fused, linked.rows, linked.chunks))
            ranked = sparse.reciprocal_rank(be, at_links, depth, k)
            fused = sparse.concat(be, [fused, ranked.with_scores(2 * ranked.scores)], "sum")
        return fused

    def link_mask(self, passages: list[list[int]] | None) -> SparseScores | None:
        """The chunks of each query's linked passages as entries of score 1, or None."""
        if passages is None:
            return None
        queries, chunks = linked_chunks(self.r.passage_chunks, passages)
        return sparse.from_entries(self.be, queries, chunks, np.ones(chunks.size, np.float32), len(passages), fill=0.0)

    def top_chunks(self, block: SparseScores, count: int) -> np.ndarray:
        ids, _ = sparse.top_k(self.be, block, count)
        return ids

    def values_at(self, block: SparseScores, queries: np.ndarray, chunks: np.ndarray) -> np.ndarray:
        return self.be.to_host(sparse.lookup(self.be, block, queries, chunks))

    def merge_hops(self, sigma: SparseScores, hop_scores: list[tuple[np.ndarray, SparseScores]]) -> SparseScores:
        """Final scores from hop 1 and the expanded hops: max over hops (eq. 3.16) or RRF."""
        be, fusion, n = self.be, self.settings.fusion, sigma.n_queries
        hops = [sparse.remap_rows(be, scores, cols, n) for cols, scores in hop_scores]
        if fusion.hop_fusion == "max":
            return sparse.concat(be, [sigma, *hops], "max")
        ranks = [sparse.reciprocal_rank(be, block, fusion.rrf_depth, fusion.rrf_k) for block in (sigma, *hops)]
        fused = sparse.concat(be, ranks, "sum")
        return fused.with_scores(fused.scores, fill=float(sparse.NEG_INF))

    def add_link_bonus(self, final: SparseScores, cosine: QuestionCosine, question: SparseScores,
                       bridged: SparseScores) -> SparseScores:
        """`FullBlocks.add_link_bonus` on the linked entries: their score (or question cosine where no
        hop ranked them) plus the bonus, in units of the query's cosine spread over all chunks."""
        be, xp, fusion = self.be, self.be.xp, self.settings.fusion
        flags = sparse.concat(be, [question, bridged.with_scores(2 * bridged.scores)], "sum")
        if len(flags) == 0:
            return final
        base = sparse.lookup(be, final, flags.rows, flags.chunks)
        missing = xp.nonzero(~xp.isfinite(base))[0]
        if missing.size:
            base[missing] = self._cosine_at(cosine.vectors, flags.rows[missing], flags.chunks[missing])
        code = flags.scores.astype(xp.int64)
        bonus = (fusion.question_link_bonus * (code & 1) + fusion.bridge_link_bonus * ((code >> 1) & 1)).astype(
            xp.float64)
        if fusion.link_bonus_unit == "cosine_std":
            bonus = bonus * cosine_spread(be, self.r.device, cosine.vectors)[flags.rows]
        linked = flags.with_scores(base + bonus.astype(xp.float32), fill=float(sparse.NEG_INF))
        return sparse.concat(be, [final, linked], "max")  # a bonus is >= 0: the max is the linked score

    def final_ranking(self, final: SparseScores, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × k, of the final top-k; with `dedup_passages`, one chunk per passage."""
        if self.settings.fusion.dedup_passages:
            final = sparse.best_of_each_group(self.be, final, self.chunk_passage)
        return sparse.top_k(self.be, final, k)


def cosine_spread(be: Any, device: Any, vectors: Any) -> Any:
    """Each query's standard deviation of its cosine over every chunk, √(qᵀ C q) with C the
    covariance of the passage vectors (float32, one per query): what `cosine.std(axis=0)` gives over
    a dense block, without one."""
    xp = be.xp
    covariance = embedding_covariance(be, device)
    q = vectors.astype(xp.float64)
    return xp.sqrt(xp.maximum(xp.einsum("bi,ij,bj->b", q, covariance, q), 0.0)).astype(xp.float32)


def embedding_covariance(be: Any, device: Any) -> Any:
    """The passage vectors' covariance (`_covariance`), made once per index and device: 2.8 s for 1.29M
    chunks on 2 cores, a cost of the retriever's preparation rather than of its first batch."""
    return device.get("tigrag.embedding_covariance", lambda: _covariance(be, device.embeddings))


def _covariance(be: Any, embeddings: Any, rows: int = 1 << 16) -> Any:
    """The (population) covariance of the rows of `embeddings`, dim × dim float64, block by block."""
    xp = be.xp
    n = embeddings.shape[0]
    mean = embeddings.sum(axis=0, dtype=xp.float64) / max(n, 1)
    out = xp.zeros((embeddings.shape[1],) * 2, dtype=xp.float64)
    for start in range(0, n, rows):
        centred = (embeddings[start:start + rows].astype(xp.float64) - mean)
        out += centred.T @ centred
    return out / max(n, 1)


def _row_counts(be: Any, keep: Any, matrix: Any) -> Any:
    """Kept entries per row of a CSR matrix (`keep`: a mask over its entries)."""
    xp = be.xp
    kept = xp.concatenate([xp.zeros(1, xp.int64), xp.cumsum(keep, dtype=xp.int64)])
    return kept[matrix.indptr[1:]] - kept[matrix.indptr[:-1]]
