"""Result records of a retrieval batch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any, Sequence


@dataclass
class HopTrace:
    """What one hop did for one query."""

    hop: int
    seeds: int  # seed tokens in the token graph (TIGRAG), seed chunks |S0| (SpectRAG), matched nodes (LiteSemRAG)
    pool_size: int  # |P_μ| after pooling (TIGRAG), candidates (SpectRAG), chunks with S > 0 (LiteSemRAG)
    top_chunks: list[int]  # H^j: the top-ι chunks of this hop
    new_entities: list[str]  # entities of H^j not seen before (drive the next hop)
    dense_fallback: bool  # no seed token or an empty pool, every chunk pooled (TIGRAG); no BM25 match (SpectRAG)


@dataclass
class QueryResult:
    """One query's ranking, best first: per chunk its id, score, passage title, the passage's position in
    the index (`passage_ids`) and the corpus's own id of that passage (`doc_ids`: `_id`/`id`/`idx` as
    `records.py` reads it, else the title)."""

    query: str
    chunk_ids: list[int]
    scores: list[float]
    titles: list[str]
    passage_ids: list[int]
    dense_fallback: bool  # hop 1 fell back to every chunk by cosine (TIGRAG); BM25 matched nothing (SpectRAG)
    hops: list[HopTrace] = field(default_factory=list)
    context: int | None = None  # an adaptive context (SpectRAG): its chunks are the first `context` of chunk_ids
    doc_ids: list[str] = field(default_factory=list)  # filled by the retriever (BaseRetriever) for every result
    #: per chunk, where a method that merges several lists took it from, with its score there
    #: (LiteSemRAG: "connected S=…", "recovered level ℓ R=…"); empty for single-list methods
    sources: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def to_run(results: Sequence[QueryResult], qids: Sequence[str] | None = None) -> dict[str, dict[str, float]]:
    """{query id: {passage id: score}} of `results`, for ranx, ir_measures or pytrec_eval: each passage once, at
    its best chunk's score, named by its passage id (`doc_ids`) as every run file of the engine names it. Query
    ids default to the positions ("0", "1", ...). A run of the engine's own run files (`tigrag run`) has
    the same passages and order; scorers sort by score, so tied scores may be ordered by doc id there."""
    if qids is None:
        qids = [str(i) for i in range(len(results))]
    if len(qids) != len(results):
        raise ValueError(f"{len(qids)} query ids for {len(results)} results")
    out: dict[str, dict[str, float]] = {}
    for qid, result in zip(qids, results):
        ranking: dict[str, float] = {}
        for doc_id, score in zip(result.doc_ids, result.scores):
            ranking.setdefault(doc_id, float(score))
        out[str(qid)] = ranking
    return out
