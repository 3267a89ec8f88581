"""`tigrag` command line: index a corpus, query an index, evaluate recall on a query set.

Results (statistics, answers, `--json`) go to standard output. Progress and warnings are log
messages of the modules' own loggers (`logging.getLogger(__name__)` under `gpu_tigrag`), which
`main` sends to standard error as plain lines: INFO and above by default, WARNING and above with
`-q/--quiet`, everything with `-v/--verbose`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Sequence

from . import __version__
from .config import IndexConfig, RetrievalConfig, replace_path
from .errors import CorpusError, OutputError, TigragError

if TYPE_CHECKING:
    from .corpus import Passage

log = logging.getLogger(__name__)

#: the logger every module of the package logs under, configured once per command by `main`
PACKAGE_LOGGER = "gpu_tigrag"


def _parse_sets(config: Any, assignments: Sequence[str]) -> Any:
    for item in assignments or []:
        key, sep, value = item.partition("=")
        if not sep:
            raise TigragError(f"--set expects KEY=VALUE (e.g. ppr.damping=0.5), got {item!r}")
        try:
            config = replace_path(config, key.strip(), value.strip())
        except TigragError as exc:
            raise TigragError(f"--set {item}: {exc}") from None
    return config


#: smallest accepted value of each numeric option (dest -> (flag, minimum)); checked before any work
MINIMUMS: dict[str, tuple[str, float]] = {
    "k": ("-k", 1), "limit": ("--limit", 0), "shard_size": ("--shard-size", 0), "memory_budget": ("--memory-budget", 1),
    "partition_passages": ("--partition-passages", 0), "qa_concurrency": ("--qa-concurrency", 1),
    "qa_rate": ("--qa-rate", 0),
}


def check_options(args: argparse.Namespace) -> None:
    """Numeric options in range (TigragError otherwise): -k >= 1, --limit >= 0, ..."""
    bounds = dict(MINIMUMS, workers=("--workers", 1 if args.command == "index" else 0))
    for dest, (flag, minimum) in bounds.items():
        value = getattr(args, dest, None)
        if value is not None and value < minimum:
            raise TigragError(f"{flag} must be >= {minimum}, got {value}")


def check_writable(folder: str | Path, what: str) -> None:
    """Create `folder` (and its parents) and a probe file in it, so that an unwritable output fails
    before the work starts, in one line naming `what` (the option)."""
    import tempfile

    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".tigrag-probe-"):
            pass
    except OSError as exc:
        raise TigragError(f"{what}: cannot write in {folder} ({exc.strerror or exc})") from None


def check_query_file(path: str | Path) -> int:
    """Read every query of a `run` query file once before any output is opened: an unreadable file
    (not JSONL or Parquet, damaged) or an empty query is an error naming the file and the query."""
    from .batch_run import stream_queries

    count = 0
    try:
        for record in stream_queries(path):
            if not record.text.strip():
                raise CorpusError(f"{path}: the query at index {record.position} (id {record.qid!r}) is empty; "
                                  "empty queries are errors: remove them or give them text")
            count += 1
    except TigragError:
        raise
    except Exception as exc:  # pyarrow raises several types for a file that is not Parquet
        raise CorpusError(f"{path}: not a readable query file ({type(exc).__name__}: {exc})") from None
    return count


def _retrieval_config(args: argparse.Namespace) -> RetrievalConfig:
    """The preset named by --preset with --method, and the --set overrides applied on top."""
    import dataclasses

    from .presets import preset

    return _parse_sets(dataclasses.replace(preset(args.preset), method=args.method), args.sets)


def _add_retrieval_options(parser: argparse.ArgumentParser) -> None:
    from .presets import DEFAULT_PRESET, PRESETS

    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                        help="retrieval configuration: 'best' (default; title links, hybrid first hop, bridging "
                             "choice, passage de-duplication) or 'paper' (TIGRAG exactly as published); --set "
                             "overrides apply on top")
    from .methods.registry import methods, stage_methods

    parser.add_argument("--method", default="tigrag", choices=[m.name for m in methods()],
                        help="retrieval method (default tigrag): " + "; ".join(f"{m.name}: {m.description}"
                                                                              for m in methods())
                             + f". {', '.join(m.name for m in stage_methods())} need their index stage "
                             "(`tigrag extend INDEX --methods NAME`); a method's settings: --set NAME.KEY=VALUE")
    parser.add_argument("--backend", default="auto", choices=["auto", "numpy", "cupy"],
                        help="array backend (default: auto, the GPU when CuPy sees one)")
    parser.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                        help="override a retrieval parameter, parsed by its declared type, e.g. --set ppr.top_gamma=50 --set "
                             "h=1 --set entity_labels=PERSON,ORG --set rerank=false (booleans: true/false, 1/0, "
                             "yes/no); the paper's symbols th, beta, iota, h, gamma, damping name their settings")
    parser.add_argument("--no-verify", action="store_true", help="skip checksum verification when loading")
    parser.add_argument("--vector-cache", nargs="?", const="", default=None, metavar="DIR",
                        help="keep query and expansion vectors in an on-disk cache shared by runs (default folder: "
                             "$TIGRAG_CACHE_DIR, else ~/.cache/gpu_tigrag); bounded by --vector-cache-mib")
    parser.add_argument("--vector-cache-mib", type=int, default=2048, metavar="MIB",
                        help="size bound of the vector cache; least recently used vectors go first (default 2048)")
    parser.add_argument("--allow-mixed-encoder", action="store_true",
                        help="accept query vectors from another runtime than the index's passage vectors "
                             "(e.g. onnx-int8 queries on a torch-built index)")


def _encoder_options(args: argparse.Namespace) -> dict[str, Any]:
    """Retriever keyword arguments of --vector-cache and --allow-mixed-encoder."""
    cache = None
    if args.vector_cache is not None:
        from .encoders import VectorCache

        if args.vector_cache_mib < 1:
            raise TigragError(f"--vector-cache-mib must be >= 1, got {args.vector_cache_mib}")
        cache = VectorCache(args.vector_cache or None, max_bytes=args.vector_cache_mib << 20)
    return {"vector_cache": cache, "allow_mixed_encoder": args.allow_mixed_encoder}


def cmd_index(args: argparse.Namespace) -> int:
    from .backend import get_backend
    from .corpus import load_corpus
    from .index.build import build_index, check_methods
    from .index.stats import format_statistics
    from .index.store import INDEX_WRITE, save_index
    from .locking import writer_lock

    config = _parse_sets(IndexConfig(), args.sets)
    methods = check_methods(args.methods)
    check_writable(Path(args.output).resolve().parent, f"-o {args.output}")
    if args.stream or args.resume or args.scheduler:
        return _index_streaming(args, config, methods)
    passages = load_corpus(args.corpus)
    log.info("loaded %s passages from %d file(s)", f"{len(passages):,}", len(args.corpus))
    if args.drop_duplicates:
        passages = _drop_duplicates(passages)
    start = time.perf_counter()
    with writer_lock(args.output, INDEX_WRITE):  # held from the build on: a second writer fails before any work
        index = build_index(passages, config, backend=get_backend(args.backend), show_progress=not args.quiet,
                            methods=methods)
        path = save_index(index, args.output)
    total = time.perf_counter() - start
    print(format_statistics(index.stats))
    _print_stages(index)
    print("build seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in index.timings.items()) + f"; total {total:.2f}")
    print(f"index written to {path}")
    return 0


def _drop_duplicates(passages: list[Passage], known: set[tuple[str, str]] | None = None) -> list[Passage]:
    """Passages without title-and-text repeats, and without those whose (title, id) is in `known`."""
    from .corpus import drop_duplicate_passages

    kept = [p for p in drop_duplicate_passages(passages) if not known or (p.title, p.doc_id) not in known]
    if len(kept) < len(passages):
        log.warning("dropped %s duplicate passage(s)", f"{len(passages) - len(kept):,}")
    return kept


def _print_stages(index: Any) -> None:
    """One line per method stage the index holds (e.g. SpectRAG's chunk graph)."""
    from .methods.registry import stage_methods

    for method in stage_methods():
        if index.has_stage(method.name):
            line = method.stage.summary(index, index.stage(method.name))
            if line:
                print(line)


def _index_streaming(args: argparse.Namespace, config: IndexConfig, methods: tuple[str, ...]) -> int:
    from .index.stats import format_statistics
    from .index.stream import build_index_streaming

    start = time.perf_counter()
    index = build_index_streaming(
        args.corpus, args.output, config, memory_budget_mb=args.memory_budget, workers=args.workers,
        resume=args.resume, partition_size=args.partition_passages or None, show_progress=not args.quiet,
        scheduler=args.scheduler, backend=args.backend, drop_duplicates=args.drop_duplicates, methods=methods)
    print(format_statistics(index.stats))
    _print_stages(index)
    print("build seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in index.timings.items())
          + f"; total {time.perf_counter() - start:.2f}")
    print(f"index written to {Path(args.output).resolve()}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from .index.store import INDEX_WRITE
    from .locking import writer_lock

    with writer_lock(args.index, INDEX_WRITE):  # held from the read to the atomic write: a second add fails at once
        return _add(args)


def _add(args: argparse.Namespace) -> int:
    from .backend import get_backend
    from .corpus import load_corpus
    from .index.add import add_passages
    from .index.build import warn_duplicates
    from .index.stats import format_statistics
    from .index.store import load_index, save_index

    index = load_index(args.index)
    passages = load_corpus(args.corpus)
    known = set(zip(index.passage_titles, index.passage_ids))
    if args.drop_duplicates:
        passages = _drop_duplicates(passages, known)
        if not passages:
            raise TigragError(f"every passage of {', '.join(map(str, args.corpus))} is already in {args.index}")
    warn_duplicates(passages)
    again = sum((p.title, p.doc_id) in known for p in passages)
    if again:
        log.warning("%d of %d added passages have the title and id of a passage already in the index (added "
                    "twice?); --drop-duplicates skips them", again, len(passages))
    start = time.perf_counter()
    grown = add_passages(index, passages, backend=get_backend(args.backend), show_progress=not args.quiet)
    save_index(grown, args.index)
    print(format_statistics(grown.stats))
    _print_stages(grown)
    print(f"added {len(passages):,} passages ({grown.n_chunks - index.n_chunks:,} chunks) to {args.index} "
          f"in {time.perf_counter() - start:.2f} s")
    return 0


def cmd_extend(args: argparse.Namespace) -> int:
    from .index.store import INDEX_WRITE
    from .locking import writer_lock

    with writer_lock(args.index, INDEX_WRITE):  # held from the read to the atomic write, as `add`
        return _extend(args)


def _extend(args: argparse.Namespace) -> int:
    from .backend import get_backend
    from .index.build import add_method
    from .index.store import load_index, save_index
    from .methods.registry import check_methods, stage_methods

    staged = [m.name for m in stage_methods()]
    methods = [m for m in check_methods(args.methods) if m in staged]
    if not methods:
        raise TigragError(f"--methods names no method with an index stage (those with one: {', '.join(staged)}); "
                          "the others need only the base index")
    for item in args.sets or []:
        owner = item.partition("=")[0].strip().partition(".")[0]
        if owner not in staged:
            raise TigragError(f"--set {item}: extend takes only the settings of a method stage "
                              f"({', '.join(m + '.*' for m in staged)}); the base index's settings need `tigrag index`")
        if owner not in methods:
            raise TigragError(f"--set {item}: sets a setting of {owner}, which --methods does not build")
    _parse_sets(IndexConfig(), args.sets)  # a mistyped setting fails before the index is read
    index = load_index(args.index)
    config = _parse_sets(index.config, args.sets)
    start = time.perf_counter()
    for method in methods:
        index = add_method(index, method, config=getattr(config, method), backend=get_backend(args.backend),
                           show_progress=not args.quiet, eigensolver=args.eigensolver)
    save_index(index, args.index)
    _print_stages(index)
    print(f"added {', '.join(methods)} to {args.index} in {time.perf_counter() - start:.2f} s")
    return 0


def _retriever(args: argparse.Namespace):
    from .index.store import load_index
    from .methods.registry import make_retriever

    config = _retrieval_config(args)  # a mistyped --set fails before the index is read
    index = load_index(args.index, verify_checksums=not args.no_verify)
    return make_retriever(index, config, backend=args.backend, **_encoder_options(args))


def cmd_query(args: argparse.Namespace) -> int:
    empty = [i for i, q in enumerate(args.question, start=1) if not q.strip()]
    if empty:
        raise TigragError(f"question {empty[0]} is empty; empty queries are errors")
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
            if r.context is not None and rank == r.context + 1:
                print(f"-- the context ends here ({r.context} chunks); below: the rest of the ranking --")
            print(f"{rank}. [{score:.3f}] {title} (chunk {chunk})\n   {text[:240]}{'…' if len(text) > 240 else ''}")
        for hop in r.hops:
            ents = ", ".join(hop.new_entities) or "none"
            print(f"hop {hop.hop}: {hop.seeds} seed tokens, pool {hop.pool_size} chunks, new entities: {ents}")
    return 0


def _dataset(args: argparse.Namespace):
    from .evaluate.datasets import load_dataset

    path = Path(args.queries)
    if not path.exists() and args.data_dir:
        path = Path(args.data_dir) / args.queries
    dataset = load_dataset(path, split=args.split)
    if args.limit:
        dataset.queries = dataset.queries[: args.limit]
    return dataset


def _full_run_wanted(args: argparse.Namespace) -> bool:
    return bool(args.systems or args.sweep or args.out or args.qa_endpoint)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.out:
        check_writable(args.out, f"--out {args.out}")
    dataset = _dataset(args)
    if _full_run_wanted(args):
        return _eval_experiment(args, dataset)
    # the quick path is the full run with the one system of the method with its settings (for TIGRAG:
    # "TIGRAG", the --preset configuration)
    from .evaluate.experiment import run_experiment
    from .index.store import load_index

    config = _retrieval_config(args)
    index = load_index(args.index, verify_checksums=not args.no_verify)
    from .methods.registry import get_method

    system = get_method(config.method).systems[0].name
    results = run_experiment(index, dataset, [system], backend=args.backend, base=config,
                             show_progress=not args.quiet, **_encoder_options(args))
    report = {"queries": len(dataset.queries), **results["systems"][system]}
    if "vector_cache" in results:
        report["vector_cache"] = results["vector_cache"]
    report.pop("config")  # the same as retrieval_config below
    report.update(index=str(args.index), queries_file=str(args.queries), preset=args.preset,
                  retrieval_config=_config_dict(config))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print(f"method: {config.method}, preset: {args.preset}" + (f" with {', '.join(args.sets)}" if args.sets else ""))
    metrics = dict(report["metrics"])
    for t, row in metrics.pop("by_type", {}).items():
        print(f"{t} ({row['queries']} queries): recall@2 {row['recall@2']:.4f}, recall@5 {row['recall@5']:.4f}")
    for name, value in metrics.items():
        print(f"{name}: {value:.4f}")
    print(f"{report['queries']} queries in {report['seconds']:.2f} s "
          f"({report['queries_per_second']:.1f} q/s; {report['queries_per_second_without_encoder']:.1f} q/s "
          f"without the encoder's {report['stage_seconds'].get('encode', 0.0):.2f} s)")
    return 0


def _eval_experiment(args: argparse.Namespace, dataset) -> int:
    import shlex

    from .evaluate.experiment import all_systems, available_systems, parse_sweeps, run_experiment
    from .index.store import load_index

    every = not args.systems or args.systems == ["all"]
    systems = list(all_systems()) if every else args.systems
    unknown = [s for s in systems if s not in all_systems()]
    if unknown:
        raise TigragError(f"unknown system(s) {', '.join(map(repr, unknown))}; choose from {', '.join(all_systems())}")
    base = _retrieval_config(args)
    sweeps = parse_sweeps(args.sweep, base)
    index = load_index(args.index, verify_checksums=not args.no_verify)
    systems, missing = available_systems(index, systems)
    if missing:
        stages = ",".join(dict.fromkeys(missing.values()))
        if not every:
            raise TigragError(f"{args.index} lacks the index stage ({stages}) that {', '.join(missing)} need(s); "
                              f"build it with `tigrag extend {args.index} --methods {stages}`")
        log.warning("skipping %s: %s lacks their index stage (%s); build it with `tigrag extend %s --methods %s`",
                    ", ".join(missing), args.index, stages, args.index, stages)
    qa = None
    if args.qa_endpoint:
        from .evaluate.qa import QAConfig

        if not args.qa_model:
            raise TigragError("--qa-endpoint needs --qa-model")
        cache = Path(args.qa_cache) if args.qa_cache else Path(args.out or ".") / "qa_cache"
        qa = QAConfig(endpoint=args.qa_endpoint, model=args.qa_model, cache_dir=cache,
                      api_key=os.environ.get("OPENAI_API_KEY"), concurrency=args.qa_concurrency,
                      requests_per_second=args.qa_rate)
    elif not args.quiet:
        print("question answering skipped: no --qa-endpoint given", file=sys.stderr)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    results = run_experiment(index, dataset, systems, sweeps, backend=args.backend, base=base, qa=qa,
                             show_progress=not args.quiet, **_encoder_options(args))
    payload = {
        "run": {"dataset": dataset.name, "queries": len(dataset.queries), "chunks": index.n_chunks,
                "match": dataset.match, "dataset_sha256": dataset.checksums, "index": str(args.index),
                "index_config": _config_dict(index.config), "preset": args.preset,
                "retrieval_config": _config_dict(base),
                "encoder": index.encoder_name, "backend": args.backend, "code_version": _code_version(),
                "package_version": __version__, "started": started,
                "command": "tigrag " + " ".join(shlex.quote(a) for a in sys.argv[1:])},
        "results": results,
    }
    if args.out:
        folder = _write_run(args.out, payload)
        if not args.quiet:
            print(f"wrote {folder / 'results.json'}, {folder / 'report.md'} and {len(payload['plots'])} plot(s)",
                  file=sys.stderr)
    if args.json:
        json.dump(payload, sys.stdout, indent=2, default=float)
        print()
    else:
        for name, system in results["systems"].items():
            m = system["metrics"]
            print(f"{name:<28} R@2 {m['recall@2']:.4f}  R@5 {m['recall@5']:.4f}  nDCG@10 {m['ndcg@10']:.4f}")
    return 0


def _write_run(out: str, payload: dict[str, Any]) -> Path:
    """write_run into `out`; when that fails (disk full, folder removed), the results go to a temporary
    file (or, failing that, standard output) that the one-line error names."""
    import tempfile

    from .evaluate.report import write_run

    try:
        return write_run(out, payload)
    except (OSError, OutputError) as exc:  # atomic.py reports I/O failures as OutputError
        reason = getattr(exc, "strerror", None) or str(exc)
    try:
        handle, name = tempfile.mkstemp(prefix="tigrag-eval-", suffix=".json")
        with os.fdopen(handle, "w") as file:
            json.dump(payload, file, indent=2, default=float)
        saved = f"saved in {name}"
    except OSError:
        json.dump(payload, sys.stdout, default=float)
        print()
        saved = "printed on standard output"
    raise TigragError(f"--out {out}: cannot write the run ({reason}); its results are {saved}")


def _code_version() -> str:
    import subprocess

    try:
        root = Path(__file__).resolve().parents[1]
        proc = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty"], capture_output=True, text=True)
        return proc.stdout.strip() or "unknown"
    except OSError:
        return "unknown"


def cmd_datasets(args: argparse.Namespace) -> int:
    from .evaluate.fetch import REGISTRY, fetch

    if args.action == "list":
        for name, sources in sorted(REGISTRY.items()):
            print(f"{name}: " + ", ".join(s.url for s in sources))
        return 0
    if not args.name or not args.to:
        raise TigragError("usage: tigrag datasets fetch NAME --to DIR")
    pins = {}
    for item in args.sha256 or []:
        file, sep, digest = item.partition("=")
        if not sep:
            raise TigragError(f"--sha256 expects FILE=HEX, got {item!r}")
        pins[file] = digest
    folder = fetch(args.name, args.to, pins)
    print(f"{args.name} is in {folder}")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    check_query_file(args.queries)
    check_writable(Path(args.output).resolve().parent, f"-o {args.output}")
    if args.workers or args.scheduler:
        from .dask_run import run_distributed
        from .encoders import default_cache_dir
        from .index.store import read_manifest

        manifest = read_manifest(args.index)  # fail here, not on every worker
        config = _retrieval_config(args)
        from .methods.registry import get_method

        if get_method(config.method).stage is not None and config.method not in manifest.get("methods", {}):
            raise TigragError(f"{args.index} has no {config.method} stage; build it with "
                              f"`tigrag extend {args.index} --methods {config.method}`")
        stats = run_distributed(args.index, config, args.queries, args.output,
                                k=args.k, workers=args.workers or 0, scheduler=args.scheduler, backend=args.backend,
                                shard_size=args.shard_size or None, resume=args.resume, show_progress=not args.quiet,
                                vector_cache=(args.vector_cache or str(default_cache_dir()))
                                if args.vector_cache is not None else None,
                                vector_cache_mib=args.vector_cache_mib, allow_mixed_encoder=args.allow_mixed_encoder)
    else:
        from .batch_run import run_queries

        retriever = _retriever(args)
        stats = run_queries(retriever, args.queries, args.output, k=args.k, resume=args.resume,
                            show_progress=not args.quiet)
    log.info("%d queries written to %s in %.1f s (%.1f q/s)%s", stats["written"], args.output, stats["seconds"],
             stats["queries_per_second"],
             f"; {stats['skipped_done']} were already done" if stats["skipped_done"] else "")
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from .evaluate.report import compare

    table = compare(args.runs)
    if args.out:
        try:
            Path(args.out).write_text(table)
        except OSError as exc:
            raise TigragError(f"--out {args.out}: cannot write the table ({exc.strerror or exc})") from None
    print(table, end="")
    return 0


def _config_dict(config: Any) -> dict[str, Any]:
    from .config import config_to_dict

    return config_to_dict(config)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tigrag", description="TIGRAG graph-RAG retrieval engine")
    parser.add_argument("--version", action="version", version=f"gpu_tigrag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="build an index from corpus files", description=(
        "Chunk, tokenise and index corpus files (JSON list, JSON title->sentences, JSONL, BEIR "
        "corpus.jsonl or directory, Parquet) into INDEX_DIR."))
    p.add_argument("corpus", nargs="+", type=Path, help="corpus file(s) or BEIR directory")
    p.add_argument("-o", "--output", type=Path, required=True, help="index directory to write")
    p.add_argument("--backend", default="numpy", choices=["auto", "numpy", "cupy"],
                   help="array backend for graph and BM25 (default: numpy)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override an index parameter, parsed by its declared type, e.g. --set graph.window=5 (or w=5) "
                        "--set bm25.k1=1.2 --set chunk.title_in_chunk=false")
    p.add_argument("--stream", action="store_true",
                   help="partitioned build for corpora larger than memory, checkpointed per partition and stage")
    p.add_argument("--resume", action="store_true", help="continue an interrupted --stream build (implies --stream)")
    p.add_argument("--memory-budget", type=int, default=2048, metavar="MB",
                   help="working memory of a --stream build above the runtime's own (interpreter and libraries); "
                        "sets the partition size (default 2048)")
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="processes tokenising and counting partitions (default: all cores)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="tokenise and count partitions on the workers of this Dask scheduler instead (implies "
                        "--stream; the output must be on a filesystem the workers share)")
    p.add_argument("--partition-passages", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--drop-duplicates", action="store_true",
                   help="index one copy of passages with the same title and text (without it they are indexed "
                        "and counted in a warning)")
    _add_method_options(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("add", help="append passages to an existing index",
                       description="Add the passages of CORPUS files to INDEX_DIR; the result equals a full rebuild "
                                   "on the union (graph counts and BM25 statistics are merged, only new chunks "
                                   "are embedded and tagged). The index is rewritten atomically.")
    p.add_argument("index", type=Path, help="index directory to grow")
    p.add_argument("corpus", nargs="+", type=Path, help="corpus file(s) with the new passages")
    p.add_argument("--backend", default="numpy", choices=["auto", "numpy", "cupy"])
    p.add_argument("--drop-duplicates", action="store_true",
                   help="skip passages repeating another's title and text, or the title and id of a passage already "
                        "in the index (without it they are added and counted in a warning)")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("extend", help="add a method's index stage (SpectRAG's chunk graph, LiteSemRAG's semantic "
                                      "graph) to an index",
                       description="Build the index stage of each of --methods over INDEX_DIR (rebuilding one that is "
                                   "there) and write the index back atomically, holding its writer lock.")
    p.add_argument("index", type=Path, help="index directory to extend")
    p.add_argument("--backend", default="numpy", choices=["auto", "numpy", "cupy"],
                   help="array backend for the similarity products and SpGEMM (default: numpy)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override a setting of the stage, e.g. --set spectrag.weights=config1 --set "
                        "spectrag.question_signal=sentences --set litesemrag.layer=-1")
    _add_method_options(p, default=None)
    p.add_argument("--eigensolver", default="host", choices=["host", "device"],
                   help="SpectRAG's spectral coordinates: host (SciPy, the public code's solver; default) or "
                        "device (Lanczos on the --backend)")
    p.set_defaults(func=cmd_extend)

    p = sub.add_parser("query", help="retrieve chunks for one or more questions",
                       description="Retrieve the top-k chunks of INDEX_DIR for each question.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("question", nargs="+", help="question text(s); an empty question is an error")
    p.add_argument("-k", type=int, default=5, help="chunks to return, >= 1 (default 5 = β)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    _add_retrieval_options(p)
    p.set_defaults(func=cmd_query)

    p = sub.add_parser("eval", help="recall on a query file, or a full evaluation run",
                       description="Without --systems/--sweep/--out/--qa-endpoint: recall@2 and recall@5 (HippoRAG's "
                                   "definition) of TIGRAG. With them: baselines, TIGRAG, the Table-10 ablations, "
                                   "sweeps and QA in one run, written to --out as results.json, report.md and plots.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", help="query file (JSON/JSONL), HippoRAG-protocol folder or BEIR folder; an empty "
                                   "query is an error naming its record. Gold passages missing from the index are "
                                   "counted in a warning (an error when none is there)")
    p.add_argument("--json", action="store_true", help="print a JSON object with 'metrics' (or the full run)")
    p.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries (default 0: all)")
    p.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    p.add_argument("--data-dir", help="folder holding local dataset copies, when QUERIES is a dataset name")
    p.add_argument("--systems", nargs="+", metavar="SYSTEM",
                   help="systems to run ('all' = NaiveRAG, BM25, TIGRAG, TIGRAG 1-hop and the three ablations)")
    p.add_argument("--sweep", action="append", metavar="NAME=V1,V2",
                   help="sensitivity sweep of th, beta, iota, h, gamma, damping or w, e.g. --sweep th=0.1,0.5,0.8")
    p.add_argument("--out", help="run directory for results.json, report.md and PNG plots (checked writable before "
                                 "the run; if writing fails at the end, the error names where the results went)")
    p.add_argument("--qa-endpoint", help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1) for QA")
    p.add_argument("--qa-model", help="model name sent to the QA endpoint")
    p.add_argument("--qa-cache", help="answer cache folder (default RUN_DIR/qa_cache)")
    p.add_argument("--qa-concurrency", type=int, default=8, help="concurrent QA requests (default 8)")
    p.add_argument("--qa-rate", type=float, default=0.0, help="max QA requests per second (default: no limit)")
    _add_retrieval_options(p)
    p.set_defaults(func=cmd_eval)

    p = sub.add_parser("run", help="stream a query file through the engine into JSONL",
                       description="Retrieve for every query of a JSONL or Parquet file (read lazily) in micro-batches, "
                                   "writing one JSONL line per query in input order; --resume continues an "
                                   "interrupted run without losing or repeating a query.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", help="JSONL ({id, question} or strings) or Parquet query file, read once before the "
                                   "run: an empty (or whitespace-only) query is an error naming its index and id")
    p.add_argument("-o", "--output", required=True, help="JSONL results file, or a folder of Parquet parts if named *.parquet")
    p.add_argument("-k", type=int, default=5, help="chunks per query, >= 1 (default 5 = β)")
    p.add_argument("--resume", action="store_true", help="continue an existing output file")
    p.add_argument("--workers", type=int, default=0, help="spread shards over N local Dask worker processes")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786)")
    p.add_argument("--shard-size", type=int, default=0,
                   help="queries per distributed task (default: the batch size, which keeps results bit-identical)")
    _add_retrieval_options(p)
    p.set_defaults(func=cmd_run)

    p = sub.add_parser("datasets", help="list or download public evaluation sets",
                       description="Download HippoRAG-protocol sets and BEIR zips with sha256 verification; "
                                   "an interrupted download resumes.")
    p.add_argument("action", choices=["list", "fetch"])
    p.add_argument("name", nargs="?", help="dataset name (see `tigrag datasets list`)")
    p.add_argument("--to", help="destination folder (the dataset lands in DIR/NAME)")
    p.add_argument("--sha256", action="append", metavar="FILE=HEX", help="pin a file's checksum")
    p.set_defaults(func=cmd_datasets)

    p = sub.add_parser("report", help="compare evaluation runs side by side",
                       description="Print a Markdown table of R@2 / R@5 / nDCG@10 per system for each run directory.")
    p.add_argument("runs", nargs="+", help="run directories written by `tigrag eval --out`")
    p.add_argument("--out", help="also write the table to this file")
    p.set_defaults(func=cmd_report)
    for command in sub.choices.values():
        _add_verbosity(command)
    return parser


def _add_method_options(parser: argparse.ArgumentParser, default: str | None = "tigrag") -> None:
    """--methods of `index` and `extend`."""
    from .methods.registry import method_names, stage_methods

    parser.add_argument("--methods", default=default, required=default is None, metavar="M1,M2",
                        help=f"retrieval methods whose index stages to build, comma-separated, of {', '.join(method_names())}"
                             + f" (methods with a stage: {', '.join(m.name for m in stage_methods())}"
                             + (f"; default {default})" if default else ")"))


VERBOSE_HELP = "also show debug messages (e.g. the seconds of every stage and partition)"


def _add_verbosity(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet and -v/--verbose on a command (-v also works before the command)."""
    parser.add_argument("-q", "--quiet", action="store_true",
                        help="no progress bars and no progress messages, only warnings and errors")
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)


class _StderrHandler(logging.StreamHandler):
    """Writes each message as a plain line to the `sys.stderr` of the moment (a caller, or a test,
    may have replaced it since the handler was made)."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))

    @property
    def stream(self):  # type: ignore[override]
        return sys.stderr

    @stream.setter
    def stream(self, value) -> None:
        pass


@contextmanager
def logging_to_stderr(verbose: bool = False, quiet: bool = False) -> Iterator[None]:
    """For the block, send the package's log messages to standard error as plain lines: INFO and
    above, WARNING and above when `quiet`, DEBUG and above when `verbose` (which wins over `quiet`).
    The package logger's handler and level are restored afterwards, so a process running several
    commands (the tests) neither repeats messages nor keeps one command's level for the next."""
    logger = logging.getLogger(PACKAGE_LOGGER)
    handler, level = _StderrHandler(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING if quiet else logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _quiet_libraries()
    try:
        with logging_to_stderr(verbose=args.verbose, quiet=args.quiet):
            check_options(args)
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
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # read when dask.distributed is imported
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    for name in ("sentence_transformers", "transformers", "huggingface_hub"):
        logging.getLogger(name).setLevel(logging.ERROR)


if __name__ == "__main__":
    sys.exit(main())
