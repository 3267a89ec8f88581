"""`tigrag` command line: index a corpus, query an index, evaluate recall on a query set."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from . import __version__
from .config import IndexConfig, RetrievalConfig, replace_path
from .errors import TigragError

log = logging.getLogger("gpu_tigrag")


def _parse_sets(config: Any, assignments: Sequence[str]) -> Any:
    for item in assignments or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TigragError(f"--set expects KEY=VALUE (e.g. ppr.damping=0.5), got {item!r}")
        try:
            config = replace_path(config, key.strip(), value.strip())
        except ValueError as exc:
            raise TigragError(f"--set {item}: {exc}") from None
    return config


def _add_retrieval_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"],
                        help="array backend (default: auto, the GPU when CuPy sees one)")
    parser.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                        help="override a retrieval parameter, e.g. --set ppr.top_gamma=50 --set hops=1")
    parser.add_argument("--no-verify", action="store_true", help="skip checksum verification when loading")


def cmd_index(args: argparse.Namespace) -> int:
    from .backend import get_backend
    from .corpus import load_corpus
    from .index.build import build_index
    from .index.stats import format_statistics
    from .index.store import save_index

    config = _parse_sets(IndexConfig(), args.sets)
    passages = load_corpus(args.corpus)
    print(f"loaded {len(passages):,} passages from {len(args.corpus)} file(s)", file=sys.stderr)
    start = time.perf_counter()
    index = build_index(passages, config, backend=get_backend(args.backend), show_progress=not args.quiet)
    path = save_index(index, args.output)
    total = time.perf_counter() - start
    print(format_statistics(index.stats))
    print("build seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in index.timings.items()) + f"; total {total:.2f}")
    print(f"index written to {path}")
    return 0


def _retriever(args: argparse.Namespace):
    from .index.store import load_index
    from .retrieve.retriever import Retriever

    index = load_index(args.index, verify_checksums=not args.no_verify)
    config = _parse_sets(RetrievalConfig(), args.sets)
    return Retriever(index, config, backend=args.backend)


def cmd_query(args: argparse.Namespace) -> int:
    retriever = _retriever(args)
    result = retriever.retrieve(args.question, k=args.k)
    if args.json:
        json.dump([r.to_dict() for r in result], sys.stdout, indent=2)
        print()
        return 0
    index = retriever.index
    for r in result:
        if r.dense_fallback:
            print("(no query token is in the graph: answered by dense retrieval)")
        for rank, (chunk, score, title) in enumerate(zip(r.chunk_ids, r.scores, r.titles), start=1):
            text = index.chunk_texts[chunk].replace("\n", " ")
            print(f"{rank}. [{score:.3f}] {title} (chunk {chunk})\n   {text[:240]}{'…' if len(text) > 240 else ''}")
        for hop in r.hops:
            ents = ", ".join(hop.new_entities) or "none"
            print(f"hop {hop.hop}: {hop.seeds} seed tokens, pool {hop.pool_size} chunks, new entities: {ents}")
    return 0


def cmd_eval(args: argparse.Namespace) -> int:
    from .evaluate.queries import load_queries
    from .evaluate.run import evaluate_tigrag

    queries = load_queries(args.queries)
    if args.limit:
        queries = queries[: args.limit]
    retriever = _retriever(args)
    report = evaluate_tigrag(retriever, queries, show_progress=not args.quiet)
    report.pop("results")
    report["index"] = str(args.index)
    report["queries_file"] = str(args.queries)
    report["retrieval_config"] = _config_dict(retriever.config)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    for name, value in report["metrics"].items():
        print(f"{name}: {value:.4f}")
    print(f"{report['queries']} queries in {report['seconds']:.2f} s "
          f"({report['queries_per_second']:.1f} q/s; {report['queries_per_second_without_encoder']:.1f} q/s "
          f"without the encoder's {report['stage_seconds'].get('encode', 0.0):.2f} s)")
    return 0


def _config_dict(config: Any) -> dict[str, Any]:
    from .config import config_to_dict

    return config_to_dict(config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tigrag", description="TIGRAG graph-RAG retrieval engine")
    parser.add_argument("--version", action="version", version=f"gpu_tigrag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help="log stage timings")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="build an index from corpus files", description=(
        "Chunk, tokenise and index corpus files (JSON list, JSON title->sentences, JSONL, BEIR "
        "corpus.jsonl or directory, Parquet) into INDEX_DIR."))
    p.add_argument("corpus", nargs="+", type=Path, help="corpus file(s) or BEIR directory")
    p.add_argument("-o", "--output", type=Path, required=True, help="index directory to write")
    p.add_argument("--backend", default="numpy", choices=["auto", "numpy", "cupy"],
                   help="array backend for graph and BM25 (default: numpy)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override an index parameter, e.g. --set graph.window=5 --set bm25.k1=1.2")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("query", help="retrieve chunks for one or more questions",
                       description="Retrieve the top-k chunks of INDEX_DIR for each question.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("question", nargs="+", help="question text(s)")
    p.add_argument("-k", type=int, default=5, help="chunks to return (default 5 = β)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    _add_retrieval_options(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("eval", help="recall@2 / recall@5 on a query file",
                       description="Evaluate recall@2 and recall@5 (HippoRAG's definition) of TIGRAG on a query file "
                                   "(2Wiki, MuSiQue, HotpotQA or {question, gold_titles} records).")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", type=Path, help="query file (JSON list or JSONL)")
    p.add_argument("--json", action="store_true", help="print a JSON object with 'metrics'")
    p.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    _add_retrieval_options(p)
    p.set_defaults(func=cmd_eval)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    _quiet_libraries()
    try:
        return args.func(args)
    except TigragError as exc:
        print(f"tigrag: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("tigrag: interrupted", file=sys.stderr)
        return 130


def _quiet_libraries() -> None:
    import os
    import warnings

    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
