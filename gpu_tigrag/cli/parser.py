"""The `tigrag` argument parser; the choices (methods, backends, presets, systems) come from the code."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from .. import __version__
from ..backend import BACKEND_NAMES
from .commands import (cmd_add, cmd_bench, cmd_datasets, cmd_eval, cmd_extend, cmd_index, cmd_methods, cmd_query, cmd_report, cmd_run,
                       cmd_settings, cmd_trec)


def add_query_source_options(parser: argparse.ArgumentParser) -> None:
    """--data-dir and --split of the commands that read a query file (`evaluate.datasets.query_source`)."""
    parser.add_argument("--data-dir", help="folder holding local dataset copies, when QUERIES is a dataset name")
    parser.add_argument("--split", help="of a BEIR dataset, answer only the queries this split's qrels judge (as "
                                        "`eval --split` does); default: every query of queries.jsonl, or the split "
                                        "an ir_datasets id names")


def add_retrieval_options(parser: argparse.ArgumentParser) -> None:
    from ..presets import DEFAULT_PRESET, PRESETS

    parser.add_argument("--preset", default=DEFAULT_PRESET, choices=list(PRESETS),
                        help="retrieval configuration: 'best' (default; title links, hybrid first hop, bridging "
                             "choice, passage de-duplication) or 'paper' (TIGRAG exactly as published); --set "
                             "overrides apply on top")
    from ..methods.registry import methods, stage_methods

    parser.add_argument("--method", default="tigrag", choices=[m.name for m in methods()],
                        help="retrieval method (default tigrag): " + "; ".join(f"{m.name}: {m.description}"
                                                                              for m in methods())
                             + f". {', '.join(m.name for m in stage_methods())} need their index stage "
                             "(`tigrag extend INDEX --methods NAME`); a method's settings: --set NAME.KEY=VALUE")
    parser.add_argument("--backend", default="auto", choices=list(BACKEND_NAMES),
                        help=f"array backend, one of {', '.join(BACKEND_NAMES)} (default: auto, the GPU when CuPy "
                             "sees one; index, add and extend default to numpy)")
    parser.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                        help="override a retrieval parameter, parsed by its declared type, e.g. --set tigrag.ppr.top_gamma=50 --set "
                             "h=1 --set tigrag.entity_labels=PERSON,ORG --set tigrag.rerank=false (booleans: true/false, 1/0, "
                             "yes/no); the paper's symbols th, beta, iota, h, gamma, damping name their settings; a "
                             "method's settings: NAME.KEY, TIGRAG's also without their tigrag. prefix (every setting: `tigrag settings`)")
    parser.add_argument("--no-verify", action="store_true", help="skip checksum verification when loading")
    parser.add_argument("--vector-cache", nargs="?", const="", default=None, metavar="DIR",
                        help="keep query and expansion vectors in an on-disk cache shared by runs (default folder: "
                             "$TIGRAG_CACHE_DIR, else ~/.cache/gpu_tigrag); bounded by --vector-cache-mib")
    parser.add_argument("--vector-cache-mib", type=int, default=2048, metavar="MIB",
                        help="size bound of the vector cache; least recently used vectors go first (default 2048)")
    parser.add_argument("--allow-mixed-encoder", action="store_true",
                        help="accept query vectors from another runtime than the index's passage vectors "
                             "(e.g. onnx-int8 queries on a torch-built index)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tigrag", description="TIGRAG graph-RAG retrieval engine",
                                     epilog=EXIT_CODES_HELP, formatter_class=HelpFormatter)
    parser.add_argument("--version", action="version", version=f"gpu_tigrag {__version__}")
    parser.add_argument("-v", "--verbose", action="store_true", help=VERBOSE_HELP)
    parser.add_argument("-q", "--quiet", action="store_true", help=QUIET_HELP)
    parser.add_argument("--threads", type=threads_option, default=None, metavar="N", help=THREADS_HELP)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("index", help="build an index from corpus files", description=(
        "Chunk, tokenise and index corpus files (JSON list, JSON title->sentences, JSONL, BEIR "
        "corpus.jsonl or directory, Parquet) into INDEX_DIR."))
    p.add_argument("corpus", nargs="+", type=Path, help="corpus file(s) or BEIR directory")
    p.add_argument("-o", "--output", type=Path, required=True, help="index directory to write")
    p.add_argument("--backend", default="numpy", choices=list(BACKEND_NAMES),
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
                   help="processes tokenising and counting partitions, and embedding them with --embed-on workers "
                        "(default: all cores, shared among them)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="tokenise, count and (--embed-on auto or workers) embed partitions on the workers of this "
                        "Dask scheduler instead (implies --stream; the output must be on a filesystem the workers share)")
    p.add_argument("--embed-on", choices=["auto", "here", "workers"], default="auto",
                   help="where a --stream build computes the chunk vectors: 'workers' (each worker process encodes "
                        "the partitions it tokenised, one encoder per worker: on a cluster of GPU workers, one per "
                        "GPU), 'here' (this process, beside the workers' text work) or 'auto' (default: workers on "
                        "a --scheduler, else here)")
    p.add_argument("--partition-passages", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--drop-duplicates", action="store_true",
                   help="index one copy of passages with the same title and text (without it they are indexed "
                        "and counted in a warning)")
    add_method_options(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("add", help="append passages to an existing index",
                       description="Add the passages of CORPUS files to INDEX_DIR; the result equals a full rebuild "
                                   "on the union (graph counts and BM25 statistics are merged, only new chunks "
                                   "are embedded and tagged). The index is rewritten atomically.")
    p.add_argument("index", type=Path, help="index directory to grow")
    p.add_argument("corpus", nargs="+", type=Path, help="corpus file(s) with the new passages")
    p.add_argument("--backend", default="numpy", choices=list(BACKEND_NAMES),
                   help=f"array backend for graph and BM25, one of {', '.join(BACKEND_NAMES)} (default: numpy)")
    p.add_argument("--drop-duplicates", action="store_true",
                   help="skip passages repeating another's title and text, or the title and id of a passage already "
                        "in the index (without it they are added and counted in a warning)")
    p.set_defaults(func=cmd_add)

    p = sub.add_parser("extend", help="add a method's index stage (SpectRAG's chunk graph, LiteSemRAG's semantic "
                                      "graph) or the ANN of the chunk vectors to an index",
                       description="Build the index stage of each of --methods over INDEX_DIR (rebuilding one that is "
                                   "there), and with --ann the ANN index of its chunk vectors, and write the index "
                                   "back atomically, holding its writer lock.")
    p.add_argument("index", type=Path, help="index directory to extend")
    p.add_argument("--backend", default="numpy", choices=list(BACKEND_NAMES),
                   help="array backend for the similarity products and SpGEMM (default: numpy)")
    p.add_argument("--set", dest="sets", action="append", metavar="KEY=VALUE",
                   help="override a setting of the stage, e.g. --set spectrag.weights=config1 --set "
                        "spectrag.question_signal=sentences --set litesemrag.layer=-1 --set ann.kind=hnsw")
    add_method_options(p, default=None, required=False)
    p.add_argument("--ann", action="store_true",
                   help="build (or rebuild) the ANN index of the chunk vectors that the dense first stage searches "
                        "(FAISS; settings ann.*, default kind ivf whatever the size; --set ann.kind=none drops it)")
    p.add_argument("--eigensolver", choices=["host", "device"],
                   help="the same as --set spectrag.eigensolver=host|device (SpectRAG's spectral coordinates: SciPy, "
                        "the public code's solver, by default; or Lanczos on the --backend)")
    p.set_defaults(func=cmd_extend)

    p = sub.add_parser("query", help="retrieve chunks for one or more questions",
                       description="Retrieve the top-k chunks of INDEX_DIR for each question.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("question", nargs="+", help="question text(s); an empty question is an error")
    p.add_argument("-k", type=int, default=5, help="chunks to return, >= 1 (default 5 = β)")
    p.add_argument("--json", action="store_true", help="print results as JSON")
    add_retrieval_options(p)
    p.set_defaults(func=cmd_query)

    from ..evaluate.metrics import DEFAULT_CUTOFFS
    from ..evaluate.significance import ALPHA, PERMUTATIONS, SEED
    from ..methods.registry import systems

    names = list(systems())
    recall_ks = "/".join(map(str, DEFAULT_CUTOFFS.recall))
    rank_ks = "/".join(map(str, DEFAULT_CUTOFFS.rank))
    p = sub.add_parser("eval", help="recall on a query file, or a full evaluation run",
                       description=f"Without --systems/--sweep/--out/--qa-endpoint: R@{recall_ks} (chunks, HippoRAG's), "
                                   f"their de-duplicated passage variants, MRR@{rank_ks}, nDCG@{rank_ks} and context "
                                   "recall of --method (default TIGRAG with --preset), at more cutoffs with "
                                   f"--cutoffs. With them: any of the {len(names)} named systems of every method, "
                                   "sweeps and QA in one run, with paired significance tests against --baseline, "
                                   "written to --out as results.json, report.md, per_query.tsv and plots. "
                                   "--save-runs writes TREC runs and qrels for external scorers.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", help="query file (JSON/JSONL), HippoRAG-protocol folder or BEIR folder, or with "
                                   "--data-dir a dataset name (scifact) or ir_datasets id (beir/scifact/test); an empty "
                                   "query is an error naming its record. Gold passages missing from the index are "
                                   "counted in a warning (an error when none is there)")
    p.add_argument("--json", action="store_true", help="print a JSON object with 'metrics' (or the full run)")
    p.add_argument("--limit", type=int, default=0, help="evaluate only the first N queries (default 0: all)")
    p.add_argument("--split", default="test", help="BEIR qrels split (default test)")
    p.add_argument("--data-dir", help="folder holding local dataset copies, when QUERIES is a dataset name")
    p.add_argument("--systems", nargs="+", metavar="SYSTEM",
                   help=f"systems to run (case does not matter; quote names with spaces), or 'all', the {len(names)} "
                        "systems (those whose method's index stage the index lacks are skipped with a warning): "
                        + ", ".join(repr(n) for n in names))
    p.add_argument("--system", action="append", metavar="NAME=BASE,KEY=VALUE,...",
                   help="a system of your choosing, run beside --systems (alone without it): the system BASE with "
                        "the query settings KEY=VALUE on top, e.g. --system \"best-th0.5=TIGRAG best,th=0.5\"; "
                        "repeatable, a later one may build on an earlier NAME; compared with --baseline like any other")
    p.add_argument("--run", action="append", metavar="NAME=FILE",
                   help="a TREC run made elsewhere (pyserini, bm25s, another engine; doc ids as the index's passage "
                        "ids), scored and compared as a system beside the others (alone without --systems/--system); "
                        "repeatable; a run sharing no doc id with the index is an error")
    p.add_argument("--metrics", metavar="\"AP P@5 nDCG@10 ...\"",
                   help="measures computed by ir_measures on each system's passage run against the qrels (both named "
                        "by passage id, as --save-runs writes them), beside the built-in metrics and in the "
                        "significance tests; e.g. \"AP P@5 nDCG@10 R@100 Judged@10\" (needs `pip install ir-measures`)")
    p.add_argument("--test", choices=("randomization", "t", "wilcoxon"), default="randomization",
                   help="the paired test the significance markers follow (every test's p-values are in results.json)")
    p.add_argument("--correction", choices=("none", "holm", "bonferroni"), default="none",
                   help="multiple-comparison correction of the marker test's p-values, over the systems compared "
                        "with --baseline on each metric (default none, as ranx; the report says which)")
    p.add_argument("--cutoffs", metavar="K1,K2,...",
                   help=f"cutoffs of every metric, e.g. 1,2,5,10,20,100, added to the default ones (recall at "
                        f"{recall_ks.replace('/', ', ')}; MRR and nDCG at {rank_ks}); retrieval goes to 4 × the "
                        "deepest (at least 40 chunks)")
    p.add_argument("--baseline", metavar="SYSTEM",
                   help="the system the others are tested against (paired t-test and paired randomisation test, "
                        f"{PERMUTATIONS:,} swaps, seed {SEED}; report marker at p < {ALPHA} in the randomisation "
                        "test); default: the first of --systems")
    p.add_argument("--save-runs", metavar="DIR",
                   help="write one TREC run per system (DIR/SYSTEM.trec: each passage once, at its best chunk) and "
                        "the gold as qrels (DIR/qrels.tsv, BEIR; DIR/qrels.trec), every passage named by its passage "
                        "id as `tigrag run` names it (the corpus's own id, the title where a passage has none; "
                        "gold titles mapped to those ids)")
    p.add_argument("--save-qrels", metavar="FILE",
                   help="write the gold of the queries as qrels (BEIR TSV for FILE.tsv, TREC qrels otherwise), named "
                        "by passage id like every run file, so that `tigrag run`'s TREC runs score against it")
    p.add_argument("--sweep", action="append", metavar="NAME=V1,V2",
                   help="sensitivity sweep of th, beta, iota, h, gamma, damping or w, e.g. --sweep th=0.1,0.5,0.8")
    p.add_argument("--out", help="run directory for results.json, report.md and PNG plots (checked writable before "
                                 "the run; if writing fails at the end, the error names where the results went)")
    p.add_argument("--qa-endpoint", help="OpenAI-compatible base URL (e.g. http://localhost:8000/v1) for QA")
    p.add_argument("--qa-model", help="model name sent to the QA endpoint")
    p.add_argument("--qa-cache", help="answer cache folder (default RUN_DIR/qa_cache)")
    p.add_argument("--qa-concurrency", type=int, default=8, help="concurrent QA requests (default 8)")
    p.add_argument("--qa-rate", type=float, default=0.0, help="max QA requests per second (default: no limit)")
    p.add_argument("--force", action="store_true",
                   help="let --out, --save-runs and --save-qrels replace existing files that gpu_tigrag did not "
                        "write (without it they are refused; a file it wrote there is replaced, never a folder, "
                        "link, device, an input of the command or a file inside an index)")
    add_retrieval_options(p)
    p.set_defaults(func=cmd_eval)

    from ..batch_run import FORMATS

    p = sub.add_parser("run", help="stream a query file through the engine into JSONL, TREC or Parquet",
                       description="Retrieve for every query of a query file in micro-batches, writing the results "
                                   "in input order: one JSONL line per query, a TREC run (one line per passage at "
                                   "its best chunk) or Parquet parts; --resume continues an interrupted JSONL or "
                                   "Parquet run without losing or repeating a query.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", help="query file: JSONL ({id, question} or strings, read lazily), a JSON list (as "
                                   "`eval` takes), Parquet, a HippoRAG-protocol or BEIR dataset folder (its "
                                   "queries), or with --data-dir a dataset name (scifact) or ir_datasets id "
                                   "(beir/scifact/test: that split's queries); read once before the run: an empty (or "
                                   "whitespace-only) query is an error naming its index and id")
    add_query_source_options(p)
    p.add_argument("-o", "--output", required=True,
                   help="results: a JSONL file, a TREC run file, or a folder of Parquet parts (by --format, else by "
                        "the name: *.parquet Parquet, *.trec or *.run TREC, anything else JSONL)")
    p.add_argument("--format", choices=list(FORMATS),
                   help="output format: jsonl (one object per query, chunk and corpus passage ids), trec (qid Q0 "
                        "docid rank score tag, docid the corpus's passage id, each passage once at its best chunk, "
                        "so at most -k lines a query) or parquet (the JSONL fields as columns); default: from the "
                        "output's name")
    p.add_argument("--tag", help="the TREC run's tag (last column); default: the method, with the preset for tigrag")
    p.add_argument("-k", type=int, default=5, help="chunks per query, >= 1 (default 5 = β)")
    p.add_argument("--resume", action="store_true", help="continue an existing output (JSONL or Parquet; a TREC run "
                                                         "cannot be resumed)")
    p.add_argument("--workers", type=int, default=0, help="spread shards over N local Dask worker processes")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (tcp://host:8786)")
    p.add_argument("--shard-size", type=int, default=0,
                   help="queries per distributed task (default: the batch size, which keeps results bit-identical)")
    add_retrieval_options(p)
    p.set_defaults(func=cmd_run)

    from ..benchmark import DEFAULT_BATCH_SIZES

    p = sub.add_parser("bench", help="throughput of chosen systems on your index and queries",
                       description="Time every query of QUERIES through each chosen system on INDEX, at each batch "
                                   "size and thread count, each (system, threads) in a fresh process: start-up, index "
                                   "load and encoder load seconds, then per batch size queries/s end to end (query "
                                   "encoding included) and without the encoder, the encoder's share and texts per "
                                   "query, latency percentiles (a query waits for its batch) and peak RSS. No "
                                   "vector cache: every batch size pays its encoder.")
    p.add_argument("index", type=Path, help="index directory")
    p.add_argument("queries", help="query file, as `tigrag run` reads it (JSONL, JSON list, Parquet, dataset folder, "
                                   "dataset name or ir_datasets id)")
    add_query_source_options(p)
    p.add_argument("--systems", nargs="+", metavar="SYSTEM",
                   help="named systems to time (as `eval --systems`; 'all' for every one); default: --method with "
                        "--preset")
    p.add_argument("--system", action="append", metavar="NAME=BASE,KEY=VALUE,...",
                   help="a system of your choosing, as `eval --system` defines it; repeatable")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=list(DEFAULT_BATCH_SIZES), metavar="B",
                   help=f"batch sizes to time (default {' '.join(map(str, DEFAULT_BATCH_SIZES))})")
    p.add_argument("--thread-counts", type=int, nargs="+", metavar="N",
                   help="thread counts to time, each in its own process (default: --threads, else the machine's)")
    p.add_argument("--limit", type=int, default=0, help="time only the first N queries (default 0: all)")
    p.add_argument("-k", type=int, default=10, help="chunks per query (default 10)")
    p.add_argument("--json", action="store_true", help="print the results as JSON instead of the table")
    p.add_argument("--out", help="also write the results as JSON to this file")
    p.add_argument("--force", action="store_true", help="let --out replace a file gpu_tigrag did not write")
    add_retrieval_options(p)
    p.set_defaults(func=cmd_bench)

    p = sub.add_parser("trec", help="convert the JSONL output of `tigrag run` into a TREC run file",
                       description="Write the TREC run (qid Q0 docid rank score tag; each passage once, at its best "
                                   "chunk, named by its corpus id) of a complete JSONL output of `tigrag run`, e.g. "
                                   "one written with --resume. A run that is unfinished or still being written is "
                                   "refused (its record says how many queries it must hold), unless --partial.")
    p.add_argument("results", type=Path, help="JSONL output of `tigrag run`")
    p.add_argument("-o", "--output", type=Path, required=True, help="TREC run file to write")
    p.add_argument("--tag", help="the run's tag (last column); default: the run's method")
    p.add_argument("--partial", action="store_true",
                   help="convert a run that is unfinished, killed or still being written (without it, refused): "
                        "its complete lines only, and the TREC run's record (OUTPUT.meta.json) says it is partial")
    p.add_argument("--force", action="store_true",
                   help="replace an existing OUTPUT that gpu_tigrag did not write (never the input, a folder, link, "
                        "device or a file inside an index)")
    p.set_defaults(func=cmd_trec)

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
    p.add_argument("--metrics", default="recall@2 recall@5 ndcg@10", metavar="\"M1 M2 ...\"",
                   help="the metrics compared (any the runs hold, ir_measures measures of `eval --metrics` included; "
                        "default: recall@2 recall@5 ndcg@10)")
    p.add_argument("--format", choices=("markdown", "csv", "latex"), default="markdown",
                   help="the table's format (default markdown); † / $^\\dagger$ mark what each run's own significance "
                        "test marked")
    p.add_argument("--out", help="also write the table to this file (an existing file gpu_tigrag did not write is "
                                 "refused, unless --force)")
    p.add_argument("--force", action="store_true", help="let --out replace a file gpu_tigrag did not write")
    p.set_defaults(func=cmd_report)
    p = sub.add_parser("methods", help="list the retrieval methods, their index stages and evaluation systems")
    p.set_defaults(func=cmd_methods)
    p = sub.add_parser("settings", help="list every setting (--set KEY=VALUE) with its type, default and help")
    p.add_argument("--markdown", action="store_true", help="as the Markdown table of docs/settings.md")
    p.set_defaults(func=cmd_settings)
    for command in sub.choices.values():
        add_verbosity(command)
    return parser


def add_method_options(parser: argparse.ArgumentParser, default: str | None = "tigrag",
                       required: bool | None = None) -> None:
    """--methods of `index` and `extend` (required when it has no default, unless `required` says)."""
    from ..methods.registry import method_names, stage_methods

    required = default is None if required is None else required
    parser.add_argument("--methods", default=default, required=required, metavar="M1,M2",
                        help=f"retrieval methods whose index stages to build, comma-separated, of {', '.join(method_names())}"
                             + f" (methods with a stage: {', '.join(m.name for m in stage_methods())}"
                             + (f"; default {default})" if default else ")"))


VERBOSE_HELP = "also show debug messages (e.g. the seconds of every stage and partition); before or after the command"
THREADS_HELP = ("threads of this process's compute pools (numba kernels, the encoder; BLAS keeps 1), or 'auto' "
                "(default: $TIGRAG_THREADS, else the cores this process may use); a --workers run shares them among "
                "its workers; before or after the command")


def threads_option(value: str) -> int | None:
    """--threads N (>= 1) or 'auto' (None); argparse's usage error otherwise."""
    from ..errors import TigragError
    from ..threads import parse_threads

    try:
        return parse_threads(value)
    except TigragError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--threads ")) from None


QUIET_HELP = "no progress bars and no progress messages, only warnings and errors; before or after the command"


def _exit_codes_help() -> str:
    from ..errors import EXIT_CODES

    import textwrap

    return "exit codes:\n" + "\n".join(textwrap.fill(meaning, 78, initial_indent=f"  {code:<4} ",
                                                      subsequent_indent=" " * 7) for code, meaning in EXIT_CODES.items())


EXIT_CODES_HELP = _exit_codes_help()


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, keeping the line breaks of the exit-code table."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith("exit codes:"):
            return "".join(indent + line for line in text.splitlines(keepends=True))
        return super()._fill_text(text, width, indent)


def add_verbosity(parser: argparse.ArgumentParser) -> None:
    """-q/--quiet, -v/--verbose and --threads on a command; all also work before the command (the
    command's flag, when given, leaves the value set before it: SUPPRESS as default)."""
    parser.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help=QUIET_HELP)
    parser.add_argument("-v", "--verbose", action="store_true", default=argparse.SUPPRESS, help=VERBOSE_HELP)
    parser.add_argument("--threads", type=threads_option, default=argparse.SUPPRESS, metavar="N", help=THREADS_HELP)
    parser.epilog = EXIT_CODES_HELP
    parser.formatter_class = HelpFormatter
