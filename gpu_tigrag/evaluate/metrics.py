"""Retrieval metrics, and the one place that turns a system's rankings into all of them
(`score_rankings`, from the per-query values of `per_query_metrics`): the quick `tigrag eval` and
the full evaluation run report the same figures with the same cutoffs.

Recall@k as HippoRAG defines it (`recall@k`, the chunk-level figure of the paper's tables): map the
top-k *chunks* to their passages and take |gold passages found| / |gold passages|, averaged over
queries. Two chunks of one passage take two of the k slots. Gold is matched by passage key (the
title, or the passage id of BEIR datasets).

The passage-level figures work on the de-duplicated ranking: the chunk ranking collapsed into a
passage ranking (each passage at the rank of its best chunk), then cut at k. `recall_dedup@k`,
`mrr@k` and `ndcg@k` are computed on it; they are the figures an external scorer (trec_eval,
pytrec_eval, ir_measures, ranx) computes on the engine's TREC run files, which hold exactly that
passage ranking (`runfiles.py`): `recall_dedup@k` = `R@k`, `mrr@k` = `RR@k`, `ndcg@k` = `nDCG@k`.

Cutoffs: by default recall (both kinds) at 2, 5 and 10 and MRR and nDCG at 10; `Cutoffs.parse`
(`tigrag eval --cutoffs 1,2,5,10,20,100`) adds every metric at each listed cutoff to those.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from ..errors import TigragError
from .queries import Query

#: the k of every recall figure (plain and de-duplicated), in the quick eval and in full runs
RECALL_KS = (2, 5, 10)
#: the k of the recall by question type (the paper's tables report R@2 and R@5)
TYPE_KS = (2, 5)
#: the cutoff of MRR and nDCG
RANK_K = 10


@dataclass(frozen=True)
class Cutoffs:
    """The cutoffs of a run: `recall` for recall@k and recall_dedup@k, `rank` for MRR@k and nDCG@k."""

    recall: tuple[int, ...] = RECALL_KS
    rank: tuple[int, ...] = (RANK_K,)

    @property
    def deepest(self) -> int:
        return max(self.recall + self.rank)

    @classmethod
    def parse(cls, spec: str | None) -> "Cutoffs":
        """`"1,2,5,10,20,100"`: every metric at each of these cutoffs, added to the default ones (recall at
        2, 5, 10, MRR and nDCG at 10: the report's tables and the methods' claims read those). None or
        an empty string: the defaults."""
        if not spec or not spec.strip():
            return cls()
        values = []
        for item in spec.split(","):
            item = item.strip()
            try:
                k = int(item)
            except ValueError:
                raise TigragError(f"--cutoffs {spec!r}: {item!r} is not an integer (expected e.g. 1,2,5,10,20,100)") \
                    from None
            if k < 1:
                raise TigragError(f"--cutoffs {spec!r}: every cutoff must be >= 1, got {k}")
            values.append(k)
        return cls(tuple(sorted(set(RECALL_KS) | set(values))), tuple(sorted({RANK_K} | set(values))))


#: the cutoffs of `tigrag eval` without --cutoffs
DEFAULT_CUTOFFS = Cutoffs()


def recall_at_k(ranked_titles: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int) -> float:
    """Mean over queries of the fraction of gold titles among the titles of the top-k chunks."""
    if len(ranked_titles) != len(gold):
        raise ValueError("one ranking per query is needed")
    return _mean([per_query_recall(r, g, k) for r, g in zip(ranked_titles, gold)])


def per_query_recall(ranked_titles: Sequence[str], gold: Sequence[str], k: int) -> float:
    gold_set = set(gold)
    if not gold_set:
        return 0.0
    return len(gold_set & set(ranked_titles[:k])) / len(gold_set)


def dedup_titles(ranked_titles: Sequence[str]) -> list[str]:
    """Titles in rank order with repeats removed (a passage ranks at its best chunk)."""
    return list(dict.fromkeys(ranked_titles))


def per_query_rr(ranked: Sequence[str], gold: Sequence[str], k: int) -> float:
    """Reciprocal rank of the first gold passage within the top k (0 when none)."""
    gold_set = set(gold)
    return next((1.0 / (i + 1) for i, key in enumerate(ranked[:k]) if key in gold_set), 0.0)


def per_query_ndcg(ranked: Sequence[str], grades: dict[str, int], k: int) -> float:
    """nDCG@k of one ranking with linear gains (as trec_eval's ndcg_cut): Σ grade / log2(rank + 1), over the ideal."""
    dcg = sum(grades.get(key, 0) / np.log2(i + 2) for i, key in enumerate(ranked[:k]))
    ideal = sorted(grades.values(), reverse=True)[:k]
    idcg = sum(grade / np.log2(i + 2) for i, grade in enumerate(ideal))
    return dcg / idcg if idcg > 0 else 0.0


def mrr_at_k(ranked: Sequence[Sequence[str]], gold: Sequence[Sequence[str]], k: int = 10) -> float:
    """Mean reciprocal rank of the first gold passage within the top k (0 when none)."""
    return _mean([per_query_rr(r, g, k) for r, g in zip(ranked, gold)])


def ndcg_at_k(ranked: Sequence[Sequence[str]], grades: Sequence[dict[str, int]], k: int = 10) -> float:
    """nDCG@k with linear gains (as pytrec_eval / BEIR): Σ grade / log2(rank + 1), over the ideal."""
    return _mean([per_query_ndcg(r, g, k) for r, g in zip(ranked, grades)])


def _mean(values: Sequence[float]) -> float:
    return float(np.mean(values)) if len(values) else 0.0


def per_query_metrics(ranked: Sequence[Sequence[str]], queries: Sequence[Query],
                      contexts: Sequence[int] | None = None,
                      cutoffs: Cutoffs = DEFAULT_CUTOFFS) -> dict[str, list[float]]:
    """Each metric's value for each query, in query order: recall@k and recall_dedup@k for each k of
    `cutoffs.recall`, mrr@k and ndcg@k (de-duplicated ranking) for each k of `cutoffs.rank`, and with
    `contexts` context_recall. `score_rankings` reports their means."""
    if len(ranked) != len(queries) or (contexts is not None and len(contexts) != len(queries)):
        raise ValueError("one ranking per query is needed")
    unique = [dedup_titles(r) for r in ranked]
    gold = [q.gold for q in queries]
    values: dict[str, list[float]] = {}
    for k in cutoffs.recall:
        values[f"recall@{k}"] = [per_query_recall(r, g, k) for r, g in zip(ranked, gold)]
        values[f"recall_dedup@{k}"] = [per_query_recall(r, g, k) for r, g in zip(unique, gold)]
    for k in cutoffs.rank:
        values[f"mrr@{k}"] = [per_query_rr(r, g, k) for r, g in zip(unique, gold)]
    for k in cutoffs.rank:
        values[f"ndcg@{k}"] = [float(per_query_ndcg(r, q.grades(), k)) for r, q in zip(unique, queries)]
    if contexts is not None:
        values["context_recall"] = [per_query_recall(r, g, size) for r, g, size in zip(ranked, gold, contexts)]
    return values


def score_rankings(ranked: Sequence[Sequence[str]], queries: Sequence[Query],
                   contexts: Sequence[int] | None = None, cutoffs: Cutoffs = DEFAULT_CUTOFFS) -> dict[str, Any]:
    """Every retrieval metric of one system: the mean over queries of each of `per_query_metrics`
    (recall@k and recall_dedup@k for each recall cutoff, MRR@k and nDCG@k on the de-duplicated
    ranking), and recall@2/5 per question type (`by_type`, when the queries carry types). `ranked`
    holds each query's passage keys in chunk-rank order, deep enough for the de-duplicated cut at the
    deepest cutoff. With `contexts` (chunks in each query's context), also `context_recall` (recall over
    the whole context) and `context_chunks` (its mean size): the figure of a method whose context is
    adaptive (SpectRAG)."""
    values = per_query_metrics(ranked, queries, contexts, cutoffs)
    metrics: dict[str, Any] = {}
    for k in cutoffs.recall:
        metrics[f"recall@{k}"] = _mean(values[f"recall@{k}"])
        metrics[f"recall_dedup@{k}"] = _mean(values[f"recall_dedup@{k}"])
    for name in values:
        if name not in metrics:
            metrics[name] = _mean(values[name])
    if contexts is not None:
        metrics["context_chunks"] = float(np.mean(contexts)) if len(contexts) else 0.0
    types = sorted({q.qtype for q in queries if q.qtype})
    if types:
        metrics["by_type"] = {}
        for t in types:
            pairs = [(r, q.gold) for r, q in zip(ranked, queries) if q.qtype == t]
            metrics["by_type"][t] = {f"recall@{k}": recall_at_k([r for r, _ in pairs], [g for _, g in pairs], k)
                                     for k in TYPE_KS} | {"queries": len(pairs)}
    return metrics
