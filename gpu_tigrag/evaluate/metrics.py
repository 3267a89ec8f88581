"""Recall@k as HippoRAG defines it: map the top-k chunks to their passages and take
|gold passages found| / |gold passages|, averaged over queries. Gold is matched by title.

The de-duplicated variant first collapses the chunk ranking into a passage ranking (each
passage at the rank of its best chunk) and then cuts at k, so two chunks of one passage do
not use two of the k slots."""

from __future__ import annotations

from typing import Sequence

import numpy as np


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
