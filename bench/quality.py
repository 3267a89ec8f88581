"""Retrieval quality in one run: TIGRAG 1-hop and 2-hop, NaiveRAG and BM25 on the same chunks
and the same encoder, on 2Wiki (dev 499) and MuSiQue-100.

Usage: python bench/quality.py [--datasets ...] [--rebuild]
Writes bench/results/quality.{json,md}. Index builds are cached under .cache/bench.
"""

from __future__ import annotations

import argparse
import dataclasses

from common import CachedEncoder, dataset_index, dataset_queries, write_results

from gpu_tigrag.config import RetrievalConfig, config_to_dict
from gpu_tigrag.evaluate.run import DEDUP_DEPTH, evaluate_tigrag, recall_metrics, titles_of
from gpu_tigrag.index.embed import load_encoder
from gpu_tigrag.retrieve.baselines import bm25_search, naive_rag
from gpu_tigrag.retrieve.retriever import Retriever

#: TIGRAG minus NaiveRAG on 2Wiki in the paper's Table 2 (percentage points).
PAPER_MARGIN = {"recall@2": 72.98 - 64.35, "recall@5": 87.20 - 70.40}


def run_dataset(name: str, rebuild: bool) -> dict:
    index = dataset_index(name, rebuild)
    queries = dataset_queries(name)
    texts = [q.text for q in queries]
    encoder = CachedEncoder(load_encoder(index.config.encoder))
    systems: dict[str, dict] = {}
    for hops in (1, 2):
        config = RetrievalConfig(hops=hops)
        report = evaluate_tigrag(Retriever(index, config, encoder=encoder, backend="numpy"), queries)
        systems[f"TIGRAG {hops}-hop"] = {**report["metrics"], "mean_pool_size_hop1": report["mean_pool_size_hop1"],
                                         "dense_fallbacks": report["dense_fallbacks"]}
    retriever = Retriever(index, RetrievalConfig(), encoder=encoder, backend="numpy")
    depth = DEDUP_DEPTH * 5
    systems["NaiveRAG"] = recall_metrics(titles_of(retriever, naive_rag(retriever, texts, depth)), queries)
    systems["BM25"] = recall_metrics(titles_of(retriever, bm25_search(retriever, texts, depth)), queries)
    tig, naive = systems["TIGRAG 2-hop"], systems["NaiveRAG"]
    margin = {k: 100 * (tig[k] - naive[k]) for k in PAPER_MARGIN}
    return {"dataset": name, "queries": len(queries), "chunks": index.n_chunks, "systems": systems,
            "margin_over_naive_pp": margin,
            "meets_paper_margin": {k: margin[k] >= PAPER_MARGIN[k] for k in PAPER_MARGIN},
            "graph_statistics": index.stats}


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
        lines += ["", f"TIGRAG 2-hop minus NaiveRAG: R@2 {m['recall@2']:+.2f} pp, R@5 {m['recall@5']:+.2f} pp "
                  f"(paper, 2Wiki: +{PAPER_MARGIN['recall@2']:.2f} / +{PAPER_MARGIN['recall@5']:.2f}).", ""]
    return "\n".join(lines)


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
