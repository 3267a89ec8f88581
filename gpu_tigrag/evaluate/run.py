"""Run a retrieval configuration over a query set and report recall@k with timings."""

from __future__ import annotations

import time
from typing import Any, Sequence

import numpy as np

from ..retrieve.retriever import Retriever
from .datasets import check_gold
from .metrics import dedup_titles, recall_at_k
from .queries import Query

DEFAULT_KS = (2, 5)


def titles_of(retriever: Retriever, chunk_ids: np.ndarray | Sequence[Sequence[int]]) -> list[list[str]]:
    index = retriever.index
    return [[index.chunk_title(int(c)) for c in row if c >= 0] for row in chunk_ids]


#: chunks retrieved per k when the de-duplicated variant is wanted (room for repeated passages)
DEDUP_DEPTH = 4


def recall_metrics(ranked_titles: list[list[str]], queries: Sequence[Query], ks: Sequence[int] = DEFAULT_KS) -> dict[str, float]:
    """recall@k over chunk rankings; with rankings deeper than max(ks), also recall_dedup@k."""
    gold = [q.gold for q in queries]
    metrics = {f"recall@{k}": recall_at_k(ranked_titles, gold, k) for k in ks}
    if ranked_titles and max(len(r) for r in ranked_titles) > max(ks):
        unique = [dedup_titles(r) for r in ranked_titles]
        metrics.update({f"recall_dedup@{k}": recall_at_k(unique, gold, k) for k in ks})
    return metrics


def evaluate_tigrag(
    retriever: Retriever, queries: Sequence[Query], ks: Sequence[int] = DEFAULT_KS, show_progress: bool = False
) -> dict[str, Any]:
    """Recall of TIGRAG over `queries` (gold matched by title), plus throughput with the encoder's share
    separated. Gold titles absent from the index are a warning; none present is an error (check_gold)."""
    check_gold(retriever.index.passage_titles, queries, "title")
    retriever.timer.seconds.clear()
    retriever.timer.encoded_texts = 0
    start = time.perf_counter()
    results = retriever.retrieve([q.text for q in queries], k=DEDUP_DEPTH * max(ks), show_progress=show_progress)
    elapsed = time.perf_counter() - start
    stages = dict(retriever.timer.seconds)
    encode = stages.get("encode", 0.0)
    hop_pools = [[h.pool_size for h in r.hops] for r in results]
    return {
        "metrics": recall_metrics([r.titles for r in results], queries, ks),
        "queries": len(queries),
        "seconds": elapsed,
        "queries_per_second": len(queries) / elapsed if elapsed else float("inf"),
        "queries_per_second_without_encoder": len(queries) / max(elapsed - encode, 1e-9),
        "stage_seconds": stages,
        "encoder_texts_per_query": retriever.timer.encoded_texts / max(len(queries), 1),
        "mean_pool_size_hop1": float(np.mean([p[0] for p in hop_pools])) if hop_pools else 0.0,
        "mean_hops": float(np.mean([len(p) for p in hop_pools])) if hop_pools else 0.0,
        "dense_fallbacks": int(sum(r.dense_fallback for r in results)),
        "results": results,
    }
