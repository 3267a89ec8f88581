"""Reciprocal-rank fusion of systems' runs (`tigrag eval --system "NAME=rrf(A,B,...)"`): the fused
passage ranking of each query, score(p) = Σ over the members of 1 / (k + rank of p in that member's
passage ranking), k = 60 (Cormack, Clarke and Büttcher, SIGIR 2009; Hybrid's constant), a member's
ranking counted to the evaluation's depth. Ties: the better best rank among the members, then the
passage's position in the index. Fusing runs already made costs nothing to time, so no throughput is
claimed for a fused row.
"""

from __future__ import annotations

from typing import Any, Sequence

from ..errors import TigragError
from ..retrieve.results import QueryResult

RRF_K = 60


def fusion_members(rest: str) -> list[str] | None:
    """The member names of an `rrf(A,B,...)` definition, or None when `rest` is not one."""
    text = rest.strip()
    if not (text.lower().startswith("rrf(") and text.endswith(")")):
        return None
    members = [" ".join(m.split()) for m in text[4:-1].split(",")]
    if len(members) < 2 or not all(members):
        raise TigragError(f"rrf({text[4:-1]}): name two systems or more, separated by commas")
    return members


def passage_lists(index: Any, chunk_rankings: Sequence[Sequence[int]]) -> list[list[int]]:
    """Each query's passages in order of their best chunk."""
    out = []
    for chunks in chunk_rankings:
        seen: dict[int, None] = {}
        for c in chunks:
            if c >= 0:
                seen.setdefault(int(index.chunk_passage[c]), None)
        out.append(list(seen))
    return out


def fuse(member_rankings: Sequence[Sequence[Sequence[int]]], k: int = RRF_K) -> list[list[tuple[int, float]]]:
    """Per query, [(passage, fused score)] best first, from each member's passage rankings (module notes)."""
    out = []
    for lists in zip(*member_rankings):
        score: dict[int, float] = {}
        best: dict[int, int] = {}
        for ranking in lists:
            for rank, passage in enumerate(ranking, start=1):
                score[passage] = score.get(passage, 0.0) + 1.0 / (k + rank)
                best[passage] = min(best.get(passage, rank), rank)
        out.append(sorted(score.items(), key=lambda item: (-item[1], best[item[0]], item[0])))
    return out


def fused_results(index: Any, queries: Sequence[Any], member_chunks: Sequence[Sequence[Sequence[int]]],
                  depth: int) -> list[QueryResult]:
    """QueryResults (each passage's first chunk) of the fusion of the members' chunk rankings."""
    from ..methods.baselines.passage_bm25 import first_chunks

    first = first_chunks(index.chunk_passage, len(index.passage_titles))
    fused = fuse([passage_lists(index, chunks) for chunks in member_chunks])
    out = []
    for q, ranking in zip(queries, fused):
        ranking = ranking[:depth]
        passages = [p for p, _ in ranking]
        out.append(QueryResult(query=q.text, chunk_ids=[int(first[p]) for p in passages], scores=[s for _, s in ranking],
                               titles=[index.passage_titles[p] for p in passages], passage_ids=passages,
                               dense_fallback=False, doc_ids=[index.passage_ids[p] for p in passages]))
    return out
