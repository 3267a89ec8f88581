"""The LiteSemRAG retriever (paper sections 3.3-3.4; the public code's `multi_level_query`,
docs/design-notes.md#litesemrag-query), batched over blocks of queries on the index's LiteSemRAG stage
(`index.litesemrag`).

Per block of B queries:

1. **Spans and vectors** (host): the index-time span extraction on the queries, and their span
   vectors from the same token encoder and layer (`token_states.py`).
2. **Matching** (host lookups, device scores). Each query's spans are read in order (entities,
   phrases, tokens: the query-side rules of `spans.py`, where a token inside a phrase is a span of
   its own); a token is skipped when it is a word of an exactly matched entity or phrase read
   before it. Per span x:
   - *exact*: x's string exists → its prototype of highest cosine to x's vector;
   - *partial*: the phrase strings (>= 2 words) holding every word of x, x itself excluded → the
     prototype of highest cosine among all of theirs;
   - *similarity*, only when neither exists: the prototype of highest cosine among all (one
     matrix product of the block's such spans against the prototypes).
   Levels (λ): exact entity 0 (1.2); exact other 1 (1.0); partial of an entity 1; partial of
   another span 2 (0.8); similarity 3 (0.5). The node list is the exact, lone-partial and
   similarity matches in reading order, then the partial matches of exactly matched spans. A
   prototype matched twice in a query is two nodes, as in the public code: they share all their
   chunks, so each adds 1 to the other's co-occurrence sum (dropping the second costs about
   15 points of MRR@10 on MuSiQue-100: bench/results/faithfulness_litesemrag.md).
3. **Co-occurrence weights**: w_ab = |C_a ∩ C_b| / √(|C_a||C_b|) between the matched nodes of a
   query (C: the chunks holding the prototype): on the CPU one pass over each query's nodes' postings
   (`kernels/shared_chunks.py`), on the GPU one sparse product Y_sel·Y_selᵀ for the block;
   W(a) = λ_a Σ_b w_ab. A node with Σ_b w_ab > 0 is *connected*, otherwise *isolated*.
4. **Connected scores**: S(c) = Σ_a W(a)·BM25_a(c) over connected nodes, one sparse product; a
   string counts once per chunk (its first node in list order), as in the code.
5. **Recovery** (the code's version; the paper's W_prop is in neither the text nor the code,
   docs/design-notes.md#litesemrag-query, step 5): R_ℓ(c) = Σ BM25_p(c) over all matched nodes of
   level ℓ; the recovery order is the chunks of R_0 by score, then those of R_1, R_2, R_3, each
   chunk at its first place.
6. **Merge** (host), at the paper's K = `split_depth` (10): n_rec = ⌊K·recovery_share⌋ (2),
   n_con = K − n_rec (8); the top n_con connected chunks, then the first n_rec recovery chunks not
   already taken; when one side runs short, the other fills the rest (the code's refill re-took
   n_con connected chunks, docs/design-notes.md#litesemrag-query, step 6; here the connected list
   is read on from where it stopped, so no chunk repeats). Ranks past K continue with the remaining
   connected chunks, then the remaining recovery order, so a deeper k (the evaluation's) keeps the
   same top K.

7. **Fusion** (off in the paper; the `LiteSemRAG best` system): with `dense_fusion` or
   `lexical_fusion` > 0, the merged ranking (to `fusion_depth`) is fused by reciprocal ranks with
   the dense cosine ranking (the index's passage encoder) and the chunk BM25 ranking
   (the index's BM25): 1/(k + rank) for the merged list, dense_fusion/(k + rank) and
   lexical_fusion/(k + rank) for the others. Chunks in no list follow by cosine where the dense
   list is fused (as Hybrid), else are not ranked. As Hybrid does, no chunks × B block: the dense list is the
   dense first stage's top k + fusion_depth (exact below `ann.min_chunks`, the index's ANN from there), the BM25
   list `ops.fusion.bm25_top`'s, fused by `ops.fusion.fuse_lists` (the blocks' float32 sums, in the same order).
   Steps 4-5 rank their sparse products' entries (`ops.sparse_scores.top_k`), without densifying them.
   `recovery_order = weighted` (also off in the paper) replaces step 5's level-by-level order by one
   list, R(c) = Σ_ℓ λ_ℓ·R_ℓ(c).
8. **Title-link lift** (`link_seeds` r > 0; off in the paper): the ranking's first r chunks and every chunk of
   each passage they name by title (text/titles.forward_title_links: the bridging names of its top chunks that
   are another passage's subject) score `link_lift` × the query's top score more, chunks named but not ranked
   entering at the lift alone, and the ranking is sorted again (`ops.title_lift.lift_named`).

What a `QueryResult` holds: up to k chunks in that order. The merge joins lists on different scales
(S and R_ℓ), so a chunk's score is its rank's 1/rank (fused: the fused reciprocal-rank sum), always
decreasing down the ranking (run files and scorers re-sort by score); `sources` says where each chunk
came from, with its S(c) or R_ℓ(c) (`tigrag query` prints it). A query none of whose spans matches
a chunk gets fewer chunks (or none) unless the dense list is fused: LiteSemRAG has no dense fallback.
`hops` holds one trace: `seeds` = matched nodes, `pool_size` = chunks with S > 0.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import scipy.sparse

from ...backend import Backend
from ...config import RetrievalConfig
from .config import LitesemragQueryConfig
from ...errors import TigragError
from ...encoders import Encoder, VectorCache
from ...index.index import Index
from ...ops import sparse_scores
from ...ops.dense_dot import best_dot_per_list
from ...ops.fusion import bm25_top, fuse_lists
from .semantic_graph import SemanticGraph, check_stage
from .spans import ENTITY, PHRASE, TOKEN, Span
from ...retrieve.results import HopTrace, QueryResult
from ...ops.rows import unit_rows
from ...retrieve.base import BaseRetriever
from ...retrieve.first_stage import FlatSearch, first_stage

MISSING_STAGE = ("this index has no LiteSemRAG stage; build it with `tigrag extend INDEX --methods litesemrag` "
                 "(or `tigrag index ... --methods tigrag,litesemrag`)")
LEVELS = 4


@dataclass
class SpanBatch:
    """The host work of a block: each query's spans and their vectors (unit rows; `keep` False for
    a span past the encoder's window, which is not matched)."""

    queries: list[str]
    spans: list[list[Span]]
    vectors: np.ndarray  # float32 spans × d, all queries' spans in order
    keep: np.ndarray  # bool per span
    offsets: np.ndarray  # int64 (B + 1): query q's spans are rows offsets[q]..offsets[q+1]-1
    dense: Any = None  # B × dim query vectors of the passage encoder, where the dense list is fused
    seeds: list[np.ndarray] | None = None  # each query's valid token ids, where the BM25 list is fused

    def __len__(self) -> int:
        return len(self.queries)

    def part(self, start: int, stop: int) -> "SpanBatch":
        lo, hi = int(self.offsets[start]), int(self.offsets[stop])
        return SpanBatch(self.queries[start:stop], self.spans[start:stop], self.vectors[lo:hi], self.keep[lo:hi],
                         self.offsets[start : stop + 1] - lo,
                         None if self.dense is None else self.dense[start:stop],
                         None if self.seeds is None else self.seeds[start:stop])


@dataclass
class MatchedNodes:
    """The block's matched semantic nodes, each query's in its list order."""

    query: np.ndarray  # int64 per node
    proto: np.ndarray  # int64 per node
    level: np.ndarray  # int64 per node, 0..3

    def __len__(self) -> int:
        return int(self.proto.size)


def match_spans(semantic_graph: SemanticGraph, batch: SpanBatch, slot_best, global_best) -> MatchedNodes:
    """The matched nodes of every query of `batch` (module doc, step 2). `slot_best(rows, lists, list_ptr, protos)`
    gives, per slot s, the prototype among protos[list_ptr[l]:list_ptr[l + 1]], l = lists[s] (-1: no candidates,
    answer -1), of highest cosine to span row rows[s] (equal: the lower id): the batch's distinct candidate lists
    once each, as every span holding the same words has the same partial candidates; `global_best(spans)` the
    prototype of highest cosine to each span row among all."""
    ptr, ids, phrases = semantic_graph.proto_ptr, semantic_graph.string_ids, semantic_graph.phrase_index
    lists: dict[tuple, int] = {}  # a candidate list's key → its place in `protos` (-1: no candidates)
    protos: list[np.ndarray] = []

    def candidates(key: tuple, strings) -> int:
        if key not in lists:
            strings = np.asarray(strings(), dtype=np.int64)
            lists[key] = len(protos) if strings.size else -1
            if strings.size:
                protos.append(_proto_ranges(ptr, strings))
        return lists[key]

    plan = []  # per considered span: (query, row, kind is entity, exact string or -1, its two candidate lists)
    for q, spans in enumerate(batch.spans):
        base = int(batch.offsets[q])
        in_matched_phrase: set[str] = set()
        for j, span in enumerate(spans):
            if span.kind == TOKEN and span.text in in_matched_phrase:
                continue
            if not batch.keep[base + j]:
                continue
            exact = ids.get(span.text, -1)
            if exact >= 0 and span.kind in (ENTITY, PHRASE):
                in_matched_phrase.update(span.text.split())
            own = candidates(("exact", exact), lambda: [exact]) if exact >= 0 else -1
            partial = candidates(("partial", frozenset(span.text.split()), exact),
                                 lambda: _containing(phrases, span.text, exact))
            plan.append((q, base + j, span.kind == ENTITY, own, partial))
    # two slots per span, its exact candidates (2p) and its partial ones (2p + 1): each slot's best prototype
    best = np.full(2 * len(plan), -1, dtype=np.int64)
    if plan:
        slot_rows = np.repeat(np.array([row for _, row, _, _, _ in plan], dtype=np.int64), 2)
        slot_lists = np.array([[own, partial] for _, _, _, own, partial in plan], dtype=np.int64).ravel()
        list_ptr = np.concatenate([[0], np.cumsum([p.size for p in protos])]).astype(np.int64)
        flat = np.concatenate(protos) if protos else np.zeros(0, dtype=np.int64)
        best = slot_best(slot_rows, slot_lists, list_ptr, flat)
    lone = [p for p in range(len(plan)) if best[2 * p] < 0 and best[2 * p + 1] < 0]
    similar = global_best(np.array([plan[p][1] for p in lone], dtype=np.int64)) if lone else np.zeros(0, np.int64)
    similar_of = dict(zip(lone, similar.tolist()))
    query, proto, level = [], [], []
    pending: list[tuple[int, int, int]] = []  # partial matches of exactly matched spans: after the query's list

    def flush() -> None:
        for item in pending:
            query.append(item[0]), proto.append(item[1]), level.append(item[2])
        pending.clear()

    current = -1
    for p, (q, _, is_entity, _, _) in enumerate(plan):
        if q != current:
            flush()
            current = q
        exact, partial = int(best[2 * p]), int(best[2 * p + 1])
        if exact >= 0:
            query.append(q), proto.append(exact), level.append(0 if is_entity else 1)
        if partial >= 0:
            item = (q, partial, 1 if is_entity else 2)
            if exact >= 0:
                pending.append(item)
            else:
                query.append(q), proto.append(partial), level.append(item[2])
        if exact < 0 and partial < 0:
            query.append(q), proto.append(similar_of[p]), level.append(3)
    flush()
    return MatchedNodes(np.asarray(query, dtype=np.int64), np.asarray(proto, dtype=np.int64),
                        np.asarray(level, dtype=np.int64))


def _containing(phrases: dict[str, np.ndarray], text: str, itself: int) -> np.ndarray:
    """Ids of the phrase strings holding every word of `text`, string `itself` excluded (ascending): the words'
    lists intersected shortest first (`kernels.sorted_sets`)."""
    from ...kernels.sorted_sets import intersect_sorted

    lists = []
    for word in set(text.split()):
        ids = phrases.get(word)
        if ids is None:
            return np.zeros(0, dtype=np.int64)
        lists.append(ids)
    if not lists:
        return np.zeros(0, dtype=np.int64)
    lists.sort(key=len)
    found = lists[0]
    for ids in lists[1:]:
        found = intersect_sorted(found, ids)
        if found.size == 0:
            return found
    return found[found != itself]


def _proto_ranges(ptr: np.ndarray, strings: np.ndarray) -> np.ndarray:
    """The prototype ids of `strings`, concatenated."""
    lo, hi = ptr[strings], ptr[strings + 1]
    sizes = hi - lo
    return np.repeat(lo - np.concatenate([[0], np.cumsum(sizes)[:-1]]), sizes) + np.arange(int(sizes.sum()))


class LitesemragRetriever(BaseRetriever):
    """Batched LiteSemRAG retrieval over an `Index` with its LiteSemRAG stage (`index.stage("litesemrag")`):
    `prepare(queries)` (spans and span vectors, CPU) then `run_prepared(batch, k)`."""

    method = "litesemrag"
    OPTIONS = BaseRetriever.OPTIONS | {"nlp"}
    uses_passage_encoder = False  # queries are read by the stage's token encoder, not the passage encoder
    #: bytes per (chunk, query) entry of the sparse products alive at once (connected scores or one recovery level:
    #: float32 value and int32 column, then the ranked form's int64 query and chunk, float32 score and int64 sort
    #: key and order): a bound, as a query's products hold at most one entry per chunk (usually far fewer)
    CHUNK_BYTES_PER_QUERY = 48
    #: bytes per query of the fused lists (ids and scores of three lists and the fused ranking, fusion depth ~100-k)
    FUSION_BYTES_PER_QUERY = 64 * 1024

    def __init__(self, index: Index, config: RetrievalConfig | None = None, encoder: Encoder | Any = None,
                 backend: str | Backend = "auto", vector_cache: VectorCache | None = None,
                 allow_mixed_encoder: bool = False, nlp: Any = None, token_encoder: Any = None):
        """`config.litesemrag` holds the settings (default: `RetrievalConfig(method="litesemrag")`).
        `token_encoder` (or an `encoder` with `span_vectors`): a `TokenStateEncoder`; default: the
        stage's token encoder and layer, whose weights must be the ones that built the stage.
        `encoder`, `vector_cache` and `allow_mixed_encoder` concern the passage encoder, used only
        where the dense list is fused (`litesemrag.dense_fusion` > 0), as for every dense method.
        `nlp`: the span pipeline (default: the stage's spaCy model, `litesemrag.spacy_model`)."""
        semantic_graph = index.stage("litesemrag")
        if semantic_graph is None:
            raise TigragError(MISSING_STAGE)
        check_stage(semantic_graph, index.n_chunks)
        config = config if config is not None else self.default_config()
        if encoder is not None and hasattr(encoder, "span_vectors"):
            token_encoder, encoder = encoder, None
        self.uses_passage_encoder = config.litesemrag.dense_fusion > 0
        super().__init__(index, config, encoder, backend, vector_cache, allow_mixed_encoder)
        self.graph = semantic_graph  # the stage's semantic graph (not the index's token graph)
        self.settings: LitesemragQueryConfig = self.config.litesemrag
        self.stage_config = index.config.litesemrag
        self.token_encoder = token_encoder if token_encoder is not None else self._token_encoder()
        if self.token_encoder.dim != semantic_graph.proto_vectors.shape[1]:
            raise TigragError(f"the token encoder gives {self.token_encoder.dim}-d vectors but the stage's prototypes are "
                              f"{semantic_graph.proto_vectors.shape[1]}-d")
        self.nlp = nlp
        self.df, self.pattern, self.bm25_host, self.bm25, self.protos = self.device.get(
            "litesemrag.semantic_graph", self._device_stage, source=semantic_graph)

    def _device_stage(self) -> tuple[np.ndarray, Any, Any, Any, Any]:
        """(document frequency per prototype, the postings' 0/1 pattern and BM25 (host and backend),
        the prototype vectors on the backend)."""
        be, semantic_graph, cfg = self.be, self.graph, self.stage_config
        tf = semantic_graph.tf.tocsr()
        pattern = scipy.sparse.csr_matrix((np.ones(tf.nnz, dtype=np.float32), tf.indices, tf.indptr), shape=tf.shape)
        bm25_host = semantic_graph.bm25(cfg.k1, cfg.b)
        return (np.diff(tf.indptr).astype(np.float64), be.csr(pattern), bm25_host, be.csr(bm25_host),
                be.asarray(semantic_graph.proto_vectors))

    def _host_postings(self) -> Any:
        """The stage's postings (prototypes × chunks CSR, host) when no row holds a chunk twice, else None."""
        tf = self.graph.tf.tocsr()
        if tf.nnz and not tf.has_canonical_format:
            rows = np.repeat(np.arange(tf.shape[0]), np.diff(tf.indptr))
            keys = rows.astype(np.int64) * tf.shape[1] + tf.indices
            if np.unique(keys).size != keys.size:
                return None
        return tf

    def _token_encoder(self) -> Any:
        from .token_states import TokenStateEncoder

        cfg = self.stage_config
        encoder = TokenStateEncoder(cfg.token_encoder, cfg.layer, cfg.max_length, cfg.batch_size)
        built = self.graph.stats.get("token_encoder_fingerprint")
        if built and built != encoder.fingerprint:
            raise TigragError(f"the token encoder {cfg.token_encoder!r} here has weights {encoder.fingerprint}, but "
                              f"the LiteSemRAG stage was built with {built}; rebuild it with `tigrag extend`")
        return encoder

    def prepare(self, queries: Sequence[str]) -> SpanBatch:
        """Spans and span vectors of a block (CPU work; may run ahead of `run_prepared`)."""
        from .spans import clean_text, load_span_pipeline, parse_spans

        queries = list(queries)
        t = time.perf_counter()
        if self.nlp is None:
            self.nlp = load_span_pipeline(self.stage_config.spacy_model)
        protect = self.stage_config.protect_single_capitals
        spans, _ = parse_spans(queries, self.nlp, protect_single_capitals=protect, query=True)
        t = self.timer.add("spans", t)
        vectors, keep = self.token_encoder.span_vectors([clean_text(q, protect) for q in queries], spans)
        vectors = unit_rows(vectors)
        self.timer.add("encode", t)
        self.timer.encoded_texts += len(queries)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in spans])]).astype(np.int64)
        dense = self.encode_queries(queries) if self.settings.dense_fusion > 0 else None
        seeds = self.query_seeds(queries) if self.settings.lexical_fusion > 0 else None
        return SpanBatch(queries, spans, vectors, keep, offsets, dense, seeds)

    def bytes_per_query(self) -> int:
        fusion = self.FUSION_BYTES_PER_QUERY if self.settings.fused else 0
        return self.index.n_chunks * self.CHUNK_BYTES_PER_QUERY + fusion

    # -- device side ----------------------------------------------------------------------
    def match(self, batch: SpanBatch) -> MatchedNodes:
        """The matched nodes of a prepared block (module doc, step 2) on this retriever's backend."""
        vectors = self.be.asarray(batch.vectors)
        return match_spans(self.graph, batch,
                           lambda rows, lists, ptr, protos: best_dot_per_list(self.be, vectors, self.protos, rows, lists,
                                                                              ptr, protos),
                           lambda rows: self._global_best(vectors, rows))

    def _global_best(self, vectors: Any, rows: np.ndarray) -> np.ndarray:
        """The prototype of highest cosine with each span vector vectors[rows] (equal cosines: the lower id, as an
        argmax): the exact top 1 of `FlatSearch` over the prototypes, whose cosines are each added in k order,
        so a span's match does not depend on the other spans of its batch (a BLAS product's bits would)."""
        if rows.size == 0:
            return np.zeros(0, dtype=np.int64)
        search = self.device.get("litesemrag.prototype_search", lambda: FlatSearch(self.be, self.protos),
                                 source=self.graph)
        ids, _ = search.search(vectors[self.be.asarray(rows)], 1)
        return self.be.to_host(ids[0]).astype(np.int64)

    def _retrieve_batch(self, batch: SpanBatch, k: int) -> list[QueryResult]:
        if len(batch) == 0:
            return []
        t = time.perf_counter()
        nodes = self.match(batch)
        t = self.timer.add("match", t)
        weight, connected = self._cooccurrence(nodes)
        t = self.timer.add("cooccurrence", t)
        cfg = self.settings
        depth = max(k, cfg.split_depth, cfg.fusion_depth if cfg.fused else 0)
        connected_ranked = self._connected_ranking(nodes, weight, connected, len(batch), depth)
        t = self.timer.add("score", t)
        recovery = self._recovery_ranking(nodes, len(batch), 3 * depth)
        t = self.timer.add("recover", t)
        merged = self._merge(len(batch), connected_ranked, recovery, depth)
        t = self.timer.add("merge", t)
        if cfg.fused:
            ranked = self._fuse(batch, merged, k)
            t = self.timer.add("fuse", t)
        else:
            ranked = [[(c, 1.0 / rank, source) for rank, (c, source) in enumerate(row[:k], start=1)] for row in merged]
        if cfg.link_seeds > 0:
            ranked = self._lift(ranked, k)
            self.timer.add("lift", t)
        return self._results(batch, nodes, connected_ranked[2], ranked)

    def _lift(self, ranked: list[list[tuple[int, float, str]]], k: int) -> list[list[tuple[int, float, str]]]:
        """Step 8, the title-link lift (`ops.title_lift.lift_named`): the first `link_seeds` chunks and the
        chunks their title links name score `link_lift` × the query's top score more; the block is ranked again."""
        from ...ops.title_lift import lift_named

        cfg = self.settings
        links = self.device.title_links
        depth = max((len(row) for row in ranked), default=0)
        ids = np.full((len(ranked), depth), -1, dtype=np.int64)
        scores = np.zeros((len(ranked), depth), dtype=np.float64)
        for q, row in enumerate(ranked):
            ids[q, :len(row)] = [c for c, _, _ in row]
            scores[q, :len(row)] = [v for _, v, _ in row]
        ids, scores, lifted = lift_named(ids, scores, links, cfg.link_seeds, cfg.link_lift, k)
        out = []
        for q, row in enumerate(ranked):
            source = {c: s for c, _, s in row}
            out.append([(int(c), float(v), source.get(int(c), "named by a first chunk, not ranked before")
                         + (", lifted by a title link" if up else ""))
                        for c, v, up in zip(ids[q], scores[q], lifted[q]) if c >= 0])
        return out

    def _selection(self, nodes: MatchedNodes, rows: np.ndarray, values: np.ndarray, n_queries: int) -> Any:
        """queries × prototypes sparse matrix on the backend, `values` at (query, prototype) of `rows`."""
        host = scipy.sparse.csr_matrix((values.astype(np.float32), (nodes.query[rows], nodes.proto[rows])),
                                       shape=(n_queries, self.graph.n_prototypes))
        return self.be.csr(host)

    def _cooccurrence(self, nodes: MatchedNodes) -> tuple[np.ndarray, np.ndarray]:
        """(W per node, connected per node): step 3 of the module doc, the sums of `_shared_sums`."""
        n = len(nodes)
        if n == 0:
            return np.zeros(0), np.zeros(0, dtype=bool)
        total = self.be.kernel(cpu=self._shared_sums_host, cuda=self._shared_sums_sparse)(nodes)
        levels = np.asarray(self.settings.level_weights, dtype=np.float64)
        return levels[nodes.level] * total, total > 0

    def _shared_sums_host(self, nodes: MatchedNodes) -> np.ndarray:
        """Per node, Σ_b |C_a ∩ C_b| / √(|C_a||C_b|) over its query's other nodes (`kernels.shared_chunks`: each
        query's nodes marked on one array over the chunks, no sort). The nodes come grouped by query, in order."""
        from ...kernels.shared_chunks import shared_chunk_sums

        postings = self.device.get("litesemrag.host_postings", self._host_postings, source=self.graph)
        if postings is None:  # an edited stage whose postings repeat a chunk: the product counts it twice
            return self._shared_sums_sparse(nodes)
        if (np.diff(nodes.query) < 0).any():
            raise RuntimeError("LiteSemRAG's matched nodes must come grouped by query, in query order")
        node_ptr = np.searchsorted(nodes.query, np.arange(int(nodes.query[-1]) + 2)).astype(np.int64)
        return shared_chunk_sums(postings.indptr, postings.indices, nodes.proto, node_ptr, self.df, self.index.n_chunks)

    def _shared_sums_sparse(self, nodes: MatchedNodes) -> np.ndarray:
        """`_shared_sums_host`'s sums by sparse products (the GPU's form). Each node's chunks are moved to columns
        of its own query (every (query, chunk) pair numbered once), so one sparse product Y·Yᵀ holds the shared
        chunks of the pairs within a query only: no nodes × nodes matrix across the block. Two nodes of one
        prototype share all its chunks: weight 1."""
        be, xp = self.be, self.be.xp
        n = len(nodes)
        pick = scipy.sparse.csr_matrix((np.ones(n, dtype=np.float32), (np.arange(n), nodes.proto)),
                                       shape=(n, self.graph.n_prototypes))
        chosen = (be.csr(pick) @ self.pattern).tocoo()  # nodes × chunks, 0/1
        owner = xp.asarray(nodes.query)[chosen.row].astype(xp.int64)
        _, column = xp.unique(owner * self.index.n_chunks + chosen.col.astype(xp.int64), return_inverse=True)
        column = column.ravel().astype(xp.int32)
        width = int(column.max()) + 1 if column.size else 1
        own = be.sparse.coo_matrix((chosen.data, (chosen.row, column)), shape=(n, width)).tocsr()
        shared = be.to_host(own @ own.T.tocsr()).tocoo()  # csr @ csr on both backends
        pairs = shared.row != shared.col
        a, b = shared.row[pairs], shared.col[pairs]
        df = self.df[nodes.proto]
        w = shared.data[pairs].astype(np.float64) / np.sqrt(np.maximum(df[a] * df[b], 1.0))
        return np.bincount(a, weights=w, minlength=n)

    def _connected_ranking(self, nodes: MatchedNodes, weight: np.ndarray, connected: np.ndarray,
                           n_queries: int, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, scores, candidates): B × k on the host, chunks by S(c), best first (equal: lower id),
        -1 past the chunks with S > 0; and the count of chunks with S > 0 per query. S is the sparse
        product's entries (a chunk no connected node names has S = 0): no queries × chunks block."""
        rows = np.nonzero(connected)[0]
        omega = self._selection(nodes, rows, weight[rows], n_queries)
        scores = self._as_float32(omega @ self.bm25)  # queries × chunks, sparse
        correction = self._repeated_strings(nodes, weight, rows, n_queries)
        if correction is not None:
            scores = scores - self.be.csr(correction)
        entry_query = sparse_scores.row_ids(self.be, scores.indptr)
        positive = self.be.to_host(self.be.xp.bincount(entry_query[scores.data > 0], minlength=n_queries)[:n_queries])
        return (*self._ranked(scores, k), positive.astype(np.int64))

    def _repeated_strings(self, nodes: MatchedNodes, weight: np.ndarray, rows: np.ndarray,
                          n_queries: int) -> np.ndarray | None:
        """queries × chunks (host, sparse float32) to subtract so each string counts once per chunk, at its
        first connected node (several prototypes of one string in a query; rare); None when none repeats."""
        strings = self.graph.proto_string[nodes.proto[rows]]
        key = nodes.query[rows] * len(self.graph.strings) + strings
        _, inverse, counts = np.unique(key, return_inverse=True, return_counts=True)
        repeated = np.nonzero(counts[inverse] > 1)[0]
        if repeated.size == 0:
            return None
        from ...kernels.repeated_strings import claimed_entries

        nodes_of = rows[repeated]  # list order
        bm25 = self.bm25_host
        queries, chunks, values = claimed_entries(bm25.indptr, bm25.indices, bm25.data, nodes.proto[nodes_of],
                                                  inverse.ravel()[repeated].astype(np.int64), weight[nodes_of],
                                                  nodes.query[nodes_of], self.index.n_chunks)
        if queries.size == 0:
            return scipy.sparse.csr_matrix((n_queries, self.index.n_chunks), dtype=np.float32)
        return _summed_in_order(queries, chunks, values, (n_queries, self.index.n_chunks))

    def _recovery_ranking(self, nodes: MatchedNodes, n_queries: int, depth: int) -> list[tuple[np.ndarray, np.ndarray]]:
        """Per level ℓ: (ids, scores), B × depth on the host, chunks by R_ℓ best first, -1 past R_ℓ > 0;
        with `recovery_order = weighted` one list instead, by Σ_ℓ λ_ℓ·R_ℓ. From the sparse products' entries."""
        if self.settings.recovery_order == "weighted":
            if len(nodes) == 0:
                return [(np.full((n_queries, 0), -1, dtype=np.int64), np.zeros((n_queries, 0), np.float32))]
            levels = np.asarray(self.settings.level_weights, dtype=np.float64)
            scores = self._selection(nodes, np.arange(len(nodes)), levels[nodes.level], n_queries) @ self.bm25
            return [self._ranked(self._as_float32(scores), depth)]
        out = []
        for level in range(LEVELS):
            rows = np.nonzero(nodes.level == level)[0]
            if rows.size == 0:
                out.append((np.full((n_queries, 0), -1, dtype=np.int64), np.zeros((n_queries, 0), np.float32)))
                continue
            scores = self._selection(nodes, rows, np.ones(rows.size), n_queries) @ self.bm25
            out.append(self._ranked(self._as_float32(scores), depth))
        return out

    def _as_float32(self, matrix: Any) -> Any:
        """A sparse product's entries as float32 (what the queries × chunks block held)."""
        return matrix if matrix.dtype == np.float32 else matrix.astype(np.float32)

    def _ranked(self, scores: Any, depth: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × depth on the host: each query's entries of the sparse product `scores` (queries ×
        chunks CSR) by score, best first (equal: lower id), -1 past its entries > 0 (0 where the scores stop)."""
        depth = min(depth, self.index.n_chunks)
        ids, vals = sparse_scores.csr_top_k(self.be, scores, depth)
        ids[~(vals > 0)] = -1
        return ids, np.where(vals > 0, vals, np.float32(0.0)).astype(np.float32)

    def _merge(self, n_queries: int, connected: tuple[np.ndarray, np.ndarray, np.ndarray],
               recovery: list[tuple[np.ndarray, np.ndarray]], depth: int) -> list[list[tuple[int, str]]]:
        """Each query's merged ranking (module doc, step 6) to `depth`: (chunk, where it came from)."""
        cfg = self.settings
        split = cfg.split_depth
        n_con = split - int(np.floor(split * cfg.recovery_share))
        con_ids, con_vals, _ = connected
        weighted = cfg.recovery_order == "weighted"
        out = []
        for q in range(n_queries):
            ranked = [(int(c), f"connected S={float(s):.6g}") for c, s in zip(con_ids[q], con_vals[q]) if c >= 0]
            order = recovery_order([(ids[q], vals[q]) for ids, vals in recovery],
                                   "recovered Σλ·R={:.6g}" if weighted else "recovered level {level} R={value:.6g}")
            out.append(merge_rankings(ranked, order, split, n_con)[:depth])
        return out

    def _fuse(self, batch: SpanBatch, merged: list[list[tuple[int, str]]], k: int) -> list[list[tuple[int, float, str]]]:
        """Step 7: the reciprocal-rank fusion of each merged ranking with the dense and BM25 rankings
        (the dense first stage's top k + fusion depth, and BM25's top fusion depth: no chunks × B block,
        `ops.fusion.fuse_lists`); (chunk, fused score, source) to depth k."""
        be, cfg = self.be, self.settings
        n, width, depth = self.index.n_chunks, len(batch), min(cfg.fusion_depth, self.index.n_chunks)
        own = np.full((width, depth), -1, dtype=np.int64)
        own_counts = np.array([min(len(row), depth) for row in merged], dtype=np.int64)
        for q, row in enumerate(merged):
            own[q, :own_counts[q]] = [c for c, _ in row[:own_counts[q]]]
        lists = [(own, own_counts, 1.0)]
        tail = None
        if cfg.dense_fusion > 0:
            dense_ids, dense_vals = first_stage(self.device, self.config.dense).search(batch.dense, min(n, k + depth))
            dense_ids, dense_vals = be.to_host(dense_ids).T, be.to_host(dense_vals).T
            lists.append((dense_ids, np.full(width, min(depth, dense_ids.shape[1]), dtype=np.int64), cfg.dense_fusion))
            tail = (dense_ids, dense_vals)
        if cfg.lexical_fusion > 0:
            lexical_ids, _, lexical_counts = bm25_top(be, self.device.bm25, self.device.postings,
                                                      self.device.postings_max_weight, batch.seeds, self.index.n_vocab,
                                                      depth)
            lists.append((lexical_ids, lexical_counts, cfg.lexical_fusion))
        ids, vals, counts = fuse_lists(lists, cfg.fusion_rrf_k, min(k, n), tail)
        out = []
        for q, row in enumerate(merged):
            source = dict(row[: cfg.fusion_depth])
            listed = [(int(c), float(v), source.get(int(c), "dense or BM25 list"))
                      for c, v in zip(ids[q, :counts[q]], vals[q, :counts[q]])]
            out.append([(c, v, s if v > 0 else "dense order (in no list)") for c, v, s in listed])
        return out

    def _results(self, batch: SpanBatch, nodes: MatchedNodes, pool: np.ndarray,
                 ranked: list[list[tuple[int, float, str]]]) -> list[QueryResult]:
        index = self.index
        per_query = np.bincount(nodes.query, minlength=len(batch))
        out = []
        for q, query in enumerate(batch.queries):
            passages = [int(index.chunk_passage[c]) for c, _, _ in ranked[q]]
            out.append(QueryResult(
                query=query, chunk_ids=[c for c, _, _ in ranked[q]], scores=[v for _, v, _ in ranked[q]],
                titles=[index.passage_titles[p] for p in passages], passage_ids=passages, dense_fallback=False,
                hops=[HopTrace(hop=1, seeds=int(per_query[q]), pool_size=int(pool[q]), top_chunks=[],
                               new_entities=[], dense_fallback=False)],
                sources=[s for _, _, s in ranked[q]],
            ))
        return out

    def trace_lines(self, result: QueryResult) -> list[str]:
        """What `tigrag query` prints under a query's ranking: matched nodes, connected chunks, and where
        each ranked chunk came from (its S or R_ℓ: the printed score is the merge's rank score)."""
        cfg = self.settings
        split = cfg.split_depth
        n_rec = int(np.floor(split * cfg.recovery_share))
        hop = result.hops[0] if result.hops else None
        lines = []
        if hop is not None:
            lines.append(f"LiteSemRAG: {hop.seeds} matched semantic nodes, {hop.pool_size} chunks with a connected "
                         f"score S > 0; top {split}: {split - n_rec} connected + {n_rec} recovered"
                         + (f", fused with {self._fusion_label()} by reciprocal ranks" if cfg.fused else ""))
        lines += [f"  {rank}. chunk {chunk}: {source}"
                  for rank, (chunk, source) in enumerate(zip(result.chunk_ids, result.sources), start=1)]
        return lines

    def _fusion_label(self) -> str:
        cfg = self.settings
        parts = [f"dense (weight {cfg.dense_fusion:g})"] if cfg.dense_fusion > 0 else []
        parts += [f"BM25 (weight {cfg.lexical_fusion:g})"] if cfg.lexical_fusion > 0 else []
        return " and ".join(parts)


def recovery_order(levels: Sequence[tuple[np.ndarray, np.ndarray]],
                   label: str = "recovered level {level} R={value:.6g}") -> list[tuple[int, str]]:
    """The recovery order: each level's chunks by R_ℓ (ids -1 end a level), level 0 first, each chunk
    at its first place; with `label` (formatted with the level and the value) as its source."""
    seen: set[int] = set()
    order = []
    for level, (ids, vals) in enumerate(levels):
        for c, v in zip(ids.tolist(), vals.tolist()):
            if c < 0:
                break
            if c not in seen:
                seen.add(c)
                order.append((c, label.format(v, level=level, value=v)))
    return order


def merge_rankings(connected: list[tuple[int, Any]], recovered: list[tuple[int, Any]], split: int,
                   n_con: int) -> list[tuple[int, Any]]:
    """The final ranking (module doc, step 6): the first `split` ranks take the top `n_con` connected
    chunks and then recovered ones not already taken, either side filling what the other lacks;
    after them the remaining connected chunks, then the remaining recovered ones. No chunk repeats."""
    head = connected[:n_con]
    taken = {c for c, _ in head}
    rec = [(c, s) for c, s in recovered if c not in taken]
    extra_rec = rec[: split - len(head)]
    taken |= {c for c, _ in extra_rec}
    rest_con = [(c, s) for c, s in connected[n_con:] if c not in taken]
    fill = rest_con[: split - len(head) - len(extra_rec)]
    top = head + fill + extra_rec
    taken |= {c for c, _ in fill}
    tail = [(c, s) for c, s in connected[n_con:] if c not in taken]
    tail += [(c, s) for c, s in rec if c not in taken and c not in {t for t, _ in tail}]
    return top + tail


def _summed_in_order(queries: np.ndarray, chunks: np.ndarray, values: np.ndarray, shape: tuple[int, int]) -> Any:
    """A float32 CSR matrix of the entries (float64 values), each (query, chunk) pair's values added in the given
    order into a float32 sum, as a float32 block's `block[q, chunks] += values` gives it: each add in float64,
    stored as float32 (`kernels.repeated_strings.summed_in_order`)."""
    from ...kernels.repeated_strings import summed_in_order

    keys = np.asarray(queries, dtype=np.int64) * shape[1] + np.asarray(chunks, dtype=np.int64)
    unique, total = summed_in_order(keys, np.asarray(values, dtype=np.float64))
    return scipy.sparse.csr_matrix((total, (unique // shape[1], unique % shape[1])), shape=shape)
