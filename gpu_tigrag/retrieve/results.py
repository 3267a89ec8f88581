"""Result records of a retrieval batch."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass
class HopTrace:
    """What one hop did for one query."""

    hop: int
    seeds: int  # seed tokens in the graph
    pool_size: int  # |P_μ| after cumulative-mass pooling
    top_chunks: list[int]  # H^j: the top-ι chunks of this hop
    new_entities: list[str]  # entities of H^j not seen before (drive the next hop)
    dense_fallback: bool  # no seed token: this hop ranked all chunks by cosine


@dataclass
class QueryResult:
    query: str
    chunk_ids: list[int]
    scores: list[float]
    titles: list[str]
    passage_ids: list[int]
    dense_fallback: bool  # the query had no valid token in the graph: dense retrieval answered it
    hops: list[HopTrace] = field(default_factory=list)
    context: int | None = None  # an adaptive context (SpectRAG): its chunks are the first `context` of chunk_ids

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
