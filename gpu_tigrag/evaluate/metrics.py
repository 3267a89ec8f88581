"""Retrieval metrics, and the one place that turns a system's rankings into all of them
(`score_rankings`): the quick `tigrag eval` and the full evaluation run report the same figures
with the same cutoffs.

Recall@k as HippoRAG defines it: map the top-k chunks to their passages and take
|gold passages found| / |gold passages|, averaged over queries. Gold is matched by passage key
(the title, or the passage id of BEIR datasets).

The de-duplicated variant first collapses the chunk ranking into a passage ranking (each
passage at the rank of its best chunk) and then cuts at k, so two chunks of one passage do
not use two of the k slots. MRR and nDCG are computed on that passage ranking."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from .queries import Query

#: the k of every recall figure (plain and de-duplicated), in the quick eval and in full runs
RECALL_KS = (2, 5, 10)
#: the k of the recall by question type (the paper's tables report R@2 and R@5)
TYPE_KS = (2, 5)
#: the cutoff of MRR and nDCG
RANK_K = 10


def recall_at_k(ranked_titles: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int) -> float:
    """Mean over queries of the fraction of gold titles among the titles of the top-k chunks."""
    if len(ranked_titles) != len(gold):
        raise ValueError("one ranking per query is needed")
    values = [per_query_recall(r, g, k) for r, g in zip(ranked_titles, gold)]
    return float(np.mean(values)) if values else 0.0


def per_query_recall(ranked_titles: Sequence[str], gold: Sequence[str], k: int) -> float:
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(gold_set & set(ranked_titles[:k])) / len(gold_set)


def dedup_titles(ranked_titles: Sequence[str]) -> list[str]:
    """Titles in rank order with repeats removed (a passage ranks at its best chunk)."""
    return list(dict.fromkeys(ranked_titles))


def mrr_at_k(ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int = 10) -> float:
    """Mean reciprocal rank of the first gold passage within the top k (0 when none)."""
    values = []
    for r, g in zip(ranked, gold):
        gold_set = set(g)
        values.append(next((1.0 / (i + 1) for i, key in enumerate(r[:k]) if key in gold_set), 0.0))
    return float(np.mean(values)) if values else 0.0


def ndcg_at_k(ranked: Sequence[Sequence[str]], grades: Sequence[dict[str, int]], k: int = 10) -> float:
    """nDCG@k with linear gains (as pytrec_eval / BEIR): Σ grade / log2(rank + 1), over the ideal."""
    values = []
    for r, g in zip(ranked, grades):
        dcg = sum(g.get(key, 0) / np.log2(i + 2) for i, key in enumerate(r[:k]))
        ideal = sorted(g.values(), reverse=True)[:k]
        idcg = sum(grade / np.log2(i + 2) for i, grade in enumerate(ideal))
        values.append(dcg / idcg if idcg > 0 else 0.0)
    return float(np.mean(values)) if values else 0.0


def score_rankings(ranked: Sequence[Sequence[str]], queries: Sequence[Query],
                   contexts: Sequence[int] | None = None) -> dict[str, Any]:
    """Every retrieval metric of one system: recall@k and recall_dedup@k for each k of RECALL_KS,
    MRR@10 and nDCG@10 on the de-duplicated ranking, and recall@2/5 per question type (`by_type`,
    when the queries carry types). `ranked` holds each query's passage keys in chunk-rank order,
    deep enough for the de-duplicated cut at max(RECALL_KS). With `contexts` (chunks in each query's
    context), also `context_recall` (recall over the whole context) and `context_chunks` (its mean size):
    the figure of a method whose context is adaptive (SpectRAG)."""
    if len(ranked) != len(queries) or (contexts is not None and len(contexts) != len(queries)):
        raise ValueError("one ranking per query is needed")
    unique = [dedup_titles(r) for r in ranked]
    gold = [q.gold for q in queries]
    metrics: dict[str, Any] = {}
    for k in RECALL_KS:
        metrics[f"recall@{k}"] = recall_at_k(ranked, gold, k)
        metrics[f"recall_dedup@{k}"] = recall_at_k(unique, gold, k)
    metrics[f"mrr@{RANK_K}"] = mrr_at_k(unique, gold, RANK_K)
    metrics[f"ndcg@{RANK_K}"] = ndcg_at_k(unique, [q.grades() for q in queries], RANK_K)
    if contexts is not None:
        values = [per_query_recall(r, g, size) for r, g, size in zip(ranked, gold, contexts)]
        metrics["context_recall"] = float(np.mean(values)) if values else 0.0
        metrics["context_chunks"] = float(np.mean(contexts)) if len(contexts) else 0.0
    types = sorted({q.qtype for q in queries if q.qtype})
    if types:
        metrics["by_type"] = {}
        for t in types:
            pairs = [(r, q.gold) for r, q in zip(ranked, queries) if q.qtype == t]
            metrics["by_type"][t] = {f"recall@{k}": recall_at_k([r for r, _ in pairs], [g for _, g in pairs], k)
                                     for k in TYPE_KS} | {"queries": len(pairs)}
    return metrics
