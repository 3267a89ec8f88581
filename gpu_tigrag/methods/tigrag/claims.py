"""TIGRAG's claims (paper Tables 2 and 10) checked on an evaluation run's metrics."""

from __future__ import annotations

from typing import Any

ABLATED = ("TIGRAG without BM25", "TIGRAG degree centrality", "TIGRAG without reranking")


def claims(m: dict[str, dict[str, Any]], per_query: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """One line per claim the run's systems can check, each saying whether it holds (TIGRAG > NaiveRAG with the
    paired randomisation test of each recall, where the run kept per-query values)."""
    from ...evaluate.significance import claim_pvalue

    lines = []
    if "TIGRAG" in m and "NaiveRAG" in m:
        d2 = m["TIGRAG"]["recall@2"] - m["NaiveRAG"]["recall@2"]
        d5 = m["TIGRAG"]["recall@5"] - m["NaiveRAG"]["recall@5"]
        verdict = "holds" if d2 > 0 and d5 > 0 else "does not hold"
        p = {k: claim_pvalue(per_query, ("TIGRAG", k), ("NaiveRAG", k)) for k in ("recall@2", "recall@5")}
        tested = f", p {p['recall@2']:.3f} / {p['recall@5']:.3f}" if None not in p.values() else ""
        lines.append(f"- TIGRAG > NaiveRAG: {verdict} (R@2 {100 * d2:+.2f} pp, R@5 {100 * d5:+.2f} pp{tested}).")
    ablated = [a for a in ABLATED if a in m]
    if "TIGRAG" in m and ablated:
        # drop = mean of the R@2 and R@5 drops, in points
        drop = {a: 50 * sum(m["TIGRAG"][k] - m[a][k] for k in ("recall@2", "recall@5")) for a in ablated}
        if "TIGRAG degree centrality" in drop:
            worst = max(drop, key=drop.get)
            verdict = "holds" if worst == "TIGRAG degree centrality" else f"does not hold (largest drop: {worst})"
            lines.append(f"- Removing PPR (degree centrality) hurts most: {verdict} "
                         f"(mean R@2/R@5 drop {drop['TIGRAG degree centrality']:.2f} pp).")
        if "TIGRAG without reranking" in drop:
            d = drop["TIGRAG without reranking"]
            lines.append(f"- Removing the rerank hurts: {'holds' if d > 0 else 'does not hold'} "
                         f"(mean R@2/R@5 drop {d:.2f} pp).")
        if "TIGRAG without BM25" in drop:
            d = drop["TIGRAG without BM25"]
            lines.append(f"- Removing BM25 barely matters (|drop| ≤ 1 pp): {'holds' if abs(d) <= 1 else 'does not hold'} "
                         f"(mean R@2/R@5 drop {d:.2f} pp).")
    return lines
