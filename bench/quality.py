"""Retrieval quality in one run: TIGRAG 1-hop and 2-hop, NaiveRAG and BM25 on the same chunks
and the same encoder, on 2Wiki (dev 499) and MuSiQue-100.

Usage: python bench/quality.py [--datasets ...] [--rebuild]
Writes bench/results/quality.{json,md}. Index builds are cached under .cache/bench.
"""

from __future__ import annotations

import argparse
import dataclasses

from common import dataset_index, dataset_queries, write_results

from gpu_tigrag.config import RetrievalConfig, config_to_dict
from gpu_tigrag.evaluate.run import DEDUP_DEPTH, evaluate_tigrag, recall_metrics, titles_of
from gpu_tigrag.index.embed import CachingEncoder, load_encoder
from gpu_tigrag.retrieve.baselines import bm25_search, naive_rag
from gpu_tigrag.retrieve.retriever import Retriever

#: TIGRAG minus NaiveRAG on 2Wiki in the paper's Table 2 (percentage points).
PAPER_MARGIN = {"recall@2": 72.98 - 64.35, "recall@5": 87.20 - 70.40}


def run_dataset(name: str, rebuild: bool) -> dict:
    index = dataset_index(name, rebuild)
    queries = dataset_queries(name)
    texts = [q.text for q in queries]
    encoder = CachingEncoder(load_encoder(index.config.encoder))
    systems: dict[str, dict] = {}
    for hops in (1, 2):
        config = RetrievalConfig(hops=hops)
        report = evaluate_tigrag(Retriever(index, config, encoder=encoder, backend="numpy"), queries)
        systems[f"TIGRAG {hops}-hop"] = {**report["metrics"], "mean_pool_size_hop1": report["mean_pool_size_hop1"],
                                         "dense_fallbacks": report["dense_fallbacks"]}
    diagnostics = diagnose(index, queries, report["results"])
    retriever = Retriever(index, RetrievalConfig(), encoder=encoder, backend="numpy")
    depth = DEDUP_DEPTH * 5
    systems["NaiveRAG"] = recall_metrics(titles_of(retriever, naive_rag(retriever, texts, depth)), queries)
    systems["BM25"] = recall_metrics(titles_of(retriever, bm25_search(retriever, texts, depth)), queries)
    tig, naive = systems["TIGRAG 2-hop"], systems["NaiveRAG"]
    margin = {k: 100 * (tig[k] - naive[k]) for k in PAPER_MARGIN}
    return {"dataset": name, "queries": len(queries), "chunks": index.n_chunks, "systems": systems,
            "margin_over_naive_pp": margin,
            "meets_paper_margin": {k: margin[k] >= PAPER_MARGIN[k] for k in PAPER_MARGIN},
            "graph_statistics": index.stats, "diagnostics_2hop": diagnostics}


def diagnose(index, queries, results) -> dict:
    """Where the 2-hop evidence comes from: hop-1 precision, entity counts, deeper recall."""
    def fraction(flags):
        return float(sum(flags) / len(flags)) if flags else 0.0

    top_gold = [bool(r.hops[0].top_chunks) and index.chunk_title(r.hops[0].top_chunks[0]) in q.gold
                for r, q in zip(results, queries)]
    entity_is_gold = [bool({e.lower() for e in r.hops[0].new_entities} & {g.lower() for g in q.gold})
                      for r, q in zip(results, queries)]
    deeper = {f"recall@{k}": sum(len(set(r.titles[:k]) & set(q.gold)) / len(q.gold)
                                 for r, q in zip(results, queries)) / len(queries) for k in (10, 20)}
    return {
        "hop1_top_chunk_is_gold": fraction(top_gold),
        "hop2_ran": fraction([len(r.hops) > 1 for r in results]),
        "mean_new_entities_hop1": sum(len(r.hops[0].new_entities) for r in results) / len(results),
        "hop1_entity_equals_a_gold_title": fraction(entity_is_gold),
        "mean_pool_fraction_hop1": sum(r.hops[0].pool_size for r in results) / len(results) / index.n_chunks,
        **deeper,
    }


def markdown(runs: list[dict]) -> str:
    lines = ["# Retrieval quality: TIGRAG vs baselines (same chunks, same encoder all-MiniLM-L6-v2)", "",
             "Command: `python bench/quality.py`. R@k as HippoRAG defines it (top-k chunks -> their passages); "
             "'dedup' collapses repeated passages in the chunk ranking before cutting at k.", ""]
    for run in runs:
        lines += [f"## {run['dataset']} ({run['queries']} queries, {run['chunks']:,} chunks)", "",
                  "| system | R@2 | R@5 | R@2 dedup | R@5 dedup |", "|---|---|---|---|---|"]
        for system, m in run["systems"].items():
            lines.append(f"| {system} | {100 * m['recall@2']:.2f} | {100 * m['recall@5']:.2f} | "
                         f"{100 * m['recall_dedup@2']:.2f} | {100 * m['recall_dedup@5']:.2f} |")
        m = run["margin_over_naive_pp"]
        d = run["diagnostics_2hop"]
        lines += ["", f"TIGRAG 2-hop minus NaiveRAG: R@2 {m['recall@2']:+.2f} pp, R@5 {m['recall@5']:+.2f} pp "
                  f"(paper, 2Wiki: +{PAPER_MARGIN['recall@2']:.2f} / +{PAPER_MARGIN['recall@5']:.2f}).", "",
                  f"2-hop diagnostics: hop-1 pool holds {100 * d['mean_pool_fraction_hop1']:.1f}% of all chunks; "
                  f"hop-1 top chunk is gold for {100 * d['hop1_top_chunk_is_gold']:.1f}% of queries; hop 2 ran for "
                  f"{100 * d['hop2_ran']:.1f}%; {d['mean_new_entities_hop1']:.1f} new entities per query at hop 1, "
                  f"one of them equal to a gold title for {100 * d['hop1_entity_equals_a_gold_title']:.1f}%; "
                  f"deeper recall R@10 {100 * d['recall@10']:.2f}, R@20 {100 * d['recall@20']:.2f}.", ""]
    lines += ["## Why the margin over NaiveRAG is smaller than the paper's", "", WHY]
    return "\n".join(lines)


WHY = """\
1. Hop 1 is close to dense retrieval. At th = 0.8 the pool keeps a large share of all chunks
   (diagnostics above), so the cosine rerank, not the graph, decides the 1-hop order, and
   TIGRAG 1-hop lands within about a point of NaiveRAG. The paper shows the same thing in
   its Table 8: on 2Wiki, h = 1 gives R@2 61.92, under its NaiveRAG's 64.35. The whole margin
   comes from the entity hop.
2. The encoder is weaker. all-MiniLM-L6-v2 (384-d) stands in for nomic-embed-text-v1.5, which
   is not available offline. Hop 2 ranks bridge passages by the cosine of M(μ ⊕ entity), so
   its gain depends on the encoder; our NaiveRAG is already about 12 pp under the paper's
   on 2Wiki R@2.
3. There are many entities. The top chunk brings several new named entities per query, and
   the embeddings of unrelated ones (nationalities, co-stars) compete for the top slots.
   Deeper recall (R@10, R@20) shows that much of the missing evidence is retrieved, but
   ranked below 5.
4. Chunks repeat passages. A long passage gives several chunks, which can take several of
   the k slots; the 'dedup' columns show what collapsing them would recover.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--rebuild", action="store_true", help="rebuild cached indexes")
    args = parser.parse_args()
    runs = [run_dataset(name, args.rebuild) for name in args.datasets]
    payload = {"retrieval_config": config_to_dict(RetrievalConfig()), "paper_margin_pp": PAPER_MARGIN, "runs": runs}
    write_results("quality", payload, markdown(runs))
    print(markdown(runs))


if __name__ == "__main__":
    main()
