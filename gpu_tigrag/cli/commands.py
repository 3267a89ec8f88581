"""The `tigrag` commands: each reads its parsed options, calls the library and prints the result."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

from .. import __version__
from ..config import IndexConfig
from ..errors import TigragError
from ..corpus import drop_duplicates
from ..evaluate.datasets import query_file, query_source
from ..evaluate.report import code_version, write_run_or_keep
from .display import one_line
from .options import (check_method_sets, check_query_file, check_writable, encoder_options, parse_sets, set_values,
                      retrieval_config, set_owners)

log = logging.getLogger(__name__)


def cmd_index(args: argparse.Namespace) -> int:
    from ..backend import get_backend
    from ..corpus import load_corpus
    from ..index.build import build_index, check_methods
    from ..index.stats import format_statistics
    from ..index.store import INDEX_WRITE, save_index
    from ..locking import writer_lock

    config = parse_sets(IndexConfig(), args.sets)
    methods = check_methods(args.methods)
    for item, path, owner in set_owners(IndexConfig, args.sets):
        if owner not in methods:
            log.warning("--set %s: %s's stage is not built (--methods %s); the setting is stored in the index and "
                        "used by a later `tigrag extend %s --methods %s`", item, owner, ",".join(methods),
                        args.output, owner)
    from ..index.store import check_index_output

    check_index_output(args.output)  # new, empty or an index: never a folder of someone else's files
    check_writable(Path(os.path.abspath(args.output)).parent, f"-o {args.output}")  # not through a link
    if args.stream or args.resume or args.scheduler:
        return _index_streaming(args, config, methods)
    passages = load_corpus(args.corpus)
    log.info("loaded %s passages from %d file(s)", f"{len(passages):,}", len(args.corpus))
    if args.drop_duplicates:
        passages = drop_duplicates(passages)
    start = time.perf_counter()
    with writer_lock(args.output, INDEX_WRITE):  # held from the build on: a second writer fails before any work
        index = build_index(passages, config, backend=get_backend(args.backend), show_progress=not args.quiet,
                            methods=methods)
        path = save_index(index, args.output)
    total = time.perf_counter() - start
    print(format_statistics(index.stats))
    _print_stages(index)
    print(f"build seconds: {build_seconds(index.timings)}; total {total:.2f}")
    print(f"index written to {path}")
    return 0


#: what a stage's `_wait` timing means on the console
BESIDE = {"ner": "beside the encoder", "embed": "on the workers, added up"}


def build_seconds(timings: dict[str, float]) -> str:
    """The build's stage seconds for the console: NER ran beside the encoder (assemble.EntityThread), so
    its seconds overlap the embedding's, and the build waited only `ner_wait` for it; a streamed build's
    workers may embed too (`embed_wait`)."""
    parts = []
    for key, seconds in timings.items():
        if key.endswith("_wait"):
            continue
        wait = timings.get(f"{key}_wait")
        where = BESIDE.get(key, "beside the build")
        parts.append(f"{key} {seconds:.2f}" + (f" ({where}; waited {wait:.2f})" if wait is not None else ""))
    return ", ".join(parts)


def _print_stages(index: Any) -> None:
    """One line per method stage the index holds (e.g. SpectRAG's chunk graph), and one for its ANN."""
    from ..methods.registry import stage_methods

    ann = index.ann
    if ann is not None and ann.stored is None:  # built by this command (a stored one is carried over unread)
        params = ", ".join(f"{k} {v}" for k, v in ann.params.items())
        print(f"ANN of the chunk vectors: {ann.kind} ({params}) over {ann.n_chunks:,} chunks, built in {ann.seconds:.2f} s")

    for method in stage_methods():
        if index.stage_loaded(method.name):  # a stage carried over unread (extend of another) is not read here
            line = method.stage.summary(index, index.stage(method.name))
            if line:
                print(line)


def _index_streaming(args: argparse.Namespace, config: IndexConfig, methods: tuple[str, ...]) -> int:
    from ..index.stats import format_statistics
    from ..index.stream import build_index_streaming

    start = time.perf_counter()
    index = build_index_streaming(
        args.corpus, args.output, config, memory_budget_mb=args.memory_budget, workers=args.workers,
        resume=args.resume, partition_size=args.partition_passages or None, show_progress=not args.quiet,
        scheduler=args.scheduler, backend=args.backend, drop_duplicates=args.drop_duplicates, methods=methods,
        embed_on=args.embed_on, threads=args.threads)
    print(format_statistics(index.stats))
    _print_stages(index)
    print(f"build seconds: {build_seconds(index.timings)}; total {time.perf_counter() - start:.2f}")
    print(f"index written to {Path(args.output).resolve()}")
    return 0


def cmd_add(args: argparse.Namespace) -> int:
    from ..index.store import INDEX_WRITE
    from ..locking import writer_lock

    with writer_lock(args.index, INDEX_WRITE):  # held from the read to the atomic write: a second add fails at once
        return _add(args)


def _add(args: argparse.Namespace) -> int:
    from ..backend import get_backend
    from ..corpus import load_corpus
    from ..index.add import add_passages, check_added_ids
    from ..index.build import warn_duplicates
    from ..index.stats import format_statistics
    from ..index.store import load_index, save_index

    index = load_index(args.index)
    passages = load_corpus(args.corpus)
    check_added_ids(index, passages)  # an id naming another passage of the index: an error, before any drop
    known = set(zip(index.passage_titles, index.passage_ids))
    if args.drop_duplicates:
        passages = drop_duplicates(passages, known)
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
    from ..index.store import INDEX_WRITE
    from ..locking import writer_lock

    with writer_lock(args.index, INDEX_WRITE):  # held from the read to the atomic write, as `add`
        return _extend(args)


def _extend(args: argparse.Namespace) -> int:
    from ..backend import get_backend
    from ..index.ann import with_ann
    from ..index.build import add_method
    from ..index.store import load_index, save_index
    from ..methods.registry import check_methods, stage_methods

    staged = [m.name for m in stage_methods()]
    if args.methods is None and not args.ann:
        raise TigragError("extend needs --methods (a method's index stage), --ann (the ANN of the chunk vectors) "
                          "or both")
    methods = [m for m in check_methods(args.methods) if m in staged] if args.methods is not None else []
    if args.methods is not None and not methods:
        raise TigragError(f"--methods names no method with an index stage (those with one: {', '.join(staged)}); "
                          "the others need only the base index")
    owners = staged + (["ann"] if args.ann else [])
    if args.eigensolver is not None:  # the older spelling of the setting
        args.sets = [*(args.sets or []), f"spectrag.eigensolver={args.eigensolver}"]
    for item in args.sets or []:
        owner = item.partition("=")[0].strip().partition(".")[0]
        if owner not in owners:
            raise TigragError(f"--set {item}: extend takes only the settings of a method stage "
                              f"({', '.join(m + '.*' for m in staged)}) or, with --ann, ann.*; the base index's "
                              "settings need `tigrag index`")
        if owner != "ann" and owner not in methods:
            raise TigragError(f"--set {item}: sets a setting of {owner}, which --methods does not build")
    parse_sets(IndexConfig(), args.sets)  # a mistyped setting fails before the index is read
    index = load_index(args.index)
    config = parse_sets(index.config, args.sets)
    start = time.perf_counter()
    for method in methods:
        index = add_method(index, method, config=getattr(config, method), backend=get_backend(args.backend),
                           show_progress=not args.quiet)
    if args.ann:
        index = with_ann(index, config.ann)
    save_index(index, args.index)
    _print_stages(index)
    built = methods + ([f"the {index.ann.kind} ANN" if index.ann is not None else "no ANN (ann.kind=none)"]
                       if args.ann else [])
    print(f"added {', '.join(built)} to {args.index} in {time.perf_counter() - start:.2f} s")
    return 0


def _retriever(args: argparse.Namespace):
    from ..index.store import load_index
    from ..retrieve.factory import make_retriever

    config = retrieval_config(args)  # a mistyped --set fails before the index is read
    index = load_index(args.index, verify_checksums=not args.no_verify)
    return make_retriever(index, config, backend=args.backend, **encoder_options(args))


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
    trace = getattr(retriever, "trace_lines", None)  # a method's own trace; TIGRAG's hop lines otherwise
    for r in result:
        if r.dense_fallback and trace is None:
            print("(no query token is in the graph: answered by dense retrieval)")
        for rank, (chunk, score, title) in enumerate(zip(r.chunk_ids, r.scores, r.titles), start=1):
            text = index.chunk_texts[chunk]
            if r.context is not None and rank == r.context + 1:
                print(f"-- the context ends here ({r.context} chunks); below: the rest of the ranking --")
            print(f"{rank}. [{score:.3f}] {one_line(title)} (chunk {chunk})\n"
                  f"   {one_line(text[:240], breaks=' ')}{'…' if len(text) > 240 else ''}")
        if trace is not None:
            for line in trace(r):
                print(one_line(line))
            continue
        for hop in r.hops:
            ents = ", ".join(one_line(e) for e in hop.new_entities) or "none"
            print(f"hop {hop.hop}: {hop.seeds} seed tokens, pool {hop.pool_size} chunks, new entities: {ents}")
    return 0


def _dataset(args: argparse.Namespace):
    from ..evaluate.datasets import choose_split, dataset_path, load_dataset

    split = choose_split(args.queries, None if args.split == "test" else args.split) or "test"  # eval's default
    dataset = load_dataset(dataset_path(args.queries, args.data_dir), split=split)
    if args.limit:
        dataset.queries = dataset.queries[: args.limit]
    return dataset


def _full_run_wanted(args: argparse.Namespace) -> bool:
    return bool(args.systems or args.system or args.run or args.sweep or args.out or args.qa_endpoint)


def _external_runs(args: argparse.Namespace) -> dict:
    """{name: file} of the --run specs (`external.parse_run_spec`), names unique."""
    from ..evaluate.external import parse_run_spec

    runs: dict = {}
    for spec in args.run or []:
        name, path = parse_run_spec(spec)
        if name in runs:
            raise TigragError(f"--run {spec!r}: {name!r} names two runs")
        runs[name] = path
    return runs


def _custom_systems(args: argparse.Namespace) -> tuple[dict, dict]:
    """({name: System}, {name: [member, ...]}) of the --system specs: systems with settings, each checked
    (`experiment.parse_system`), and reciprocal-rank fusions `NAME=rrf(A,B,...)` (`evaluate.fused`)."""
    from ..evaluate.experiment import parse_system
    from ..evaluate.fused import fusion_members

    custom: dict = {}
    fusions: dict = {}
    for spec in args.system or []:
        name, _, rest = spec.partition("=")
        members = fusion_members(rest)
        name = " ".join(name.split())
        if name in custom or name in fusions:
            raise TigragError(f"--system {spec!r}: {name!r} is defined twice")
        if members is not None:
            if not name:
                raise TigragError(f"--system {spec!r}: expected NAME=rrf(A,B,...)")
            fusions[name] = members
            continue
        system = parse_system(spec, custom)
        custom[system.name] = system
    return custom, fusions


def _eval_inputs(args: argparse.Namespace) -> list[Path]:
    """The files `eval` reads (the query file, or a dataset folder's files): no output may be one of them."""
    from ..evaluate.datasets import dataset_path

    path = dataset_path(args.queries, args.data_dir)
    if path.is_dir():
        return [p for p in path.rglob("*") if p.is_file()][:10_000]
    return [path]


def _eval_systems(args: argparse.Namespace) -> list[str]:
    """The systems `eval` runs: --systems, else the first system of --method."""
    from ..methods.registry import get_method

    custom, fusions = (list(d) for d in _custom_systems(args))
    external = list(_external_runs(args))
    if args.systems:
        from ..evaluate.experiment import resolve_systems

        return list(resolve_systems(args.systems)[0]) + custom + external + fusions
    return (custom + external + fusions) or [get_method(args.method).systems[0].name]


def _eval_outputs(args: argparse.Namespace):
    """The cutoffs of --cutoffs, with --out, --save-runs, --save-qrels and --qa-cache checked before any work: writable,
    and replacing nothing gpu_tigrag did not write (`outputs.py`), unless --force."""
    from ..evaluate.metrics import Cutoffs
    from ..evaluate.report import REPORT_KIND, report_files
    from ..evaluate.runfiles import QRELS, RUNS_FOLDER
    from ..outputs import OutputFolder, check_file_output

    cutoffs = Cutoffs.parse(args.cutoffs)
    inputs = _eval_inputs(args)
    if args.out:
        folder = OutputFolder(args.out, REPORT_KIND, f"--out {args.out}", inputs, args.force)
        folder.check(report_files(Path(args.out)))
        check_writable(args.out, f"--out {args.out}")
    if args.save_runs:
        from ..evaluate.runfiles import run_file_names

        runs = OutputFolder(args.save_runs, RUNS_FOLDER, f"--save-runs {args.save_runs}", inputs, args.force)
        runs.check(["qrels.tsv", "qrels.trec", *run_file_names(_eval_systems(args)).values()])
        check_writable(args.save_runs, f"--save-runs {args.save_runs}")
    if args.save_qrels:
        check_file_output(args.save_qrels, QRELS, f"--save-qrels {args.save_qrels}", inputs, args.force)
        check_writable(Path(os.path.abspath(args.save_qrels)).parent, f"--save-qrels {args.save_qrels}")
    if args.qa_endpoint:
        from ..evaluate.qa import check_cache_dir

        cache = _qa_cache(args)
        what = f"--qa-cache {cache}" if args.qa_cache else f"the QA cache {cache}"
        check_cache_dir(cache, what)
        check_writable(cache, what)
    return cutoffs


def _qa_cache(args: argparse.Namespace) -> Path:
    """The answer cache folder: --qa-cache, else qa_cache in --out (or here)."""
    return Path(args.qa_cache) if args.qa_cache else Path(args.out or ".") / "qa_cache"


def _save_qrels(args: argparse.Namespace, dataset, index) -> None:
    """--save-qrels: the gold named by passage id, as every run file names passages (one doc-id space)."""
    if args.save_qrels:
        from ..evaluate.experiment import RUN_KEY_NOTE, gold_as_passage_ids
        from ..evaluate.runfiles import write_qrels

        write_qrels(args.save_qrels, gold_as_passage_ids(index, dataset), force=args.force, doc_ids=RUN_KEY_NOTE)
        log.info("wrote the qrels of %d queries to %s (passages named by %s)", len(dataset.queries),
                 args.save_qrels, RUN_KEY_NOTE)


def cmd_eval(args: argparse.Namespace) -> int:
    cutoffs = _eval_outputs(args)
    dataset = _dataset(args)
    if _full_run_wanted(args):
        return _eval_experiment(args, dataset, cutoffs)
    # the quick path is the full run with the one system of the method with its settings (for TIGRAG:
    # "TIGRAG", the --preset configuration)
    from ..evaluate.experiment import run_experiment
    from ..index.store import load_index

    from ..evaluate.measures import parse_measures

    measures = parse_measures(args.metrics)
    config = retrieval_config(args)
    index = load_index(args.index, verify_checksums=not args.no_verify)
    _save_qrels(args, dataset, index)
    from ..methods.registry import get_method

    system = get_method(config.method).systems[0].name
    if args.baseline:
        raise TigragError("--baseline needs two systems or more (--systems)")
    results = run_experiment(index, dataset, [system], backend=args.backend, base=config,
                             show_progress=not args.quiet, cutoffs=cutoffs, save_runs=args.save_runs, overwrite=args.force,
                             measures=measures, **encoder_options(args))
    report = {"queries": len(dataset.queries), **results["systems"][system]}
    for key in ("vector_cache", "run_files"):
        if results.get(key):
            report[key] = results[key]
    report.pop("config")  # the same as retrieval_config below
    report.update(index=str(args.index), queries_file=str(args.queries), preset=args.preset,
                  retrieval_config=_config_dict(config))
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        print()
        return 0
    print(f"method: {config.method}, preset: {args.preset}" + (f" with {', '.join(args.sets)}" if args.sets else ""))
    if report.get("run_files"):
        print(f"TREC run and qrels in {report['run_files']['folder']}", file=sys.stderr)
    metrics = dict(report["metrics"])
    for t, row in metrics.pop("by_type", {}).items():
        print(f"{t} ({row['queries']} queries): recall@2 {row['recall@2']:.4f}, recall@5 {row['recall@5']:.4f}")
    for name, value in metrics.items():
        print(f"{name}: {value:.4f}")
    for line in throughput_lines(report["queries"], report, results.get("query_encode_seconds")):
        print(line)
    return 0


def throughput_lines(queries: int, row: dict[str, Any], query_encode_seconds: float | None) -> list[str]:
    """The console's throughput of one system (an entry of `run_experiment`'s results), end to end first:
    query encoding plus retrieval; then retrieval with the question vectors given (an expanded hop still
    encodes its texts), then without any encoder second. Start-up, index and model loading are never in."""
    encode = query_encode_seconds if row.get("uses_query_encoder") else 0.0
    end_to_end = row["seconds"] + (encode or 0.0)
    first = (f"{queries} queries in {end_to_end:.2f} s end to end: {queries / max(end_to_end, 1e-9):.1f} q/s "
             + (f"(query encoding {encode:.2f} s + retrieval {row['seconds']:.2f} s; " if encode else "(")
             + "start-up and loading not counted)")
    given = [f"{row['queries_per_second']:.1f} q/s with the question vectors given"] if encode else []
    encoder = row.get("step_seconds", row.get("stage_seconds", {})).get("encode", 0.0)  # stage_seconds: older runs
    rest = f"{row['queries_per_second_without_encoder']:.1f} q/s without the encoder" + (
        f" (its {encoder:.2f} s inside the retrieval left out too)" if encoder else "")
    return [first, "; ".join(given + [rest])]


def _eval_experiment(args: argparse.Namespace, dataset, cutoffs) -> int:
    import shlex

    from ..evaluate.experiment import available_systems, parse_sweeps, resolve_system, resolve_systems, run_experiment
    from ..index.store import load_index

    from ..methods.registry import systems as system_table

    from ..evaluate.measures import parse_measures

    measures = parse_measures(args.metrics)
    (custom, fusions), external = _custom_systems(args), _external_runs(args)
    systems, every = (resolve_systems(args.systems) if args.systems or not (custom or external or fusions)
                      else ([], False))
    systems += [name for name in custom if name not in systems]
    baseline = resolve_system(args.baseline, [*systems, *external, *fusions]) if args.baseline else None
    base = retrieval_config(args, one_method=False)
    table = {**system_table(), **custom}
    used = list(dict.fromkeys(table[s].method for s in systems))
    check_method_sets(args.sets, used, "--systems " + ", ".join(systems))
    sweeps = parse_sweeps(args.sweep, base)
    index = load_index(args.index, verify_checksums=not args.no_verify)
    _save_qrels(args, dataset, index)
    systems, missing = available_systems(index, systems, custom)
    if missing:
        stages = ",".join(dict.fromkeys(missing.values()))
        if not every:
            raise TigragError(f"{args.index} lacks the index stage ({stages}) that {', '.join(missing)} need(s); "
                              f"build it with `tigrag extend {args.index} --methods {stages}`")
        log.warning("skipping %s: %s lacks their index stage (%s); build it with `tigrag extend %s --methods %s`",
                    ", ".join(missing), args.index, stages, args.index, stages)
        if baseline in missing:
            raise TigragError(f"--baseline {baseline!r} cannot run on {args.index} (it lacks the {missing[baseline]} "
                              "stage)")
    qa = None
    if args.qa_endpoint:
        from ..evaluate.qa import QAConfig

        if not args.qa_model:
            raise TigragError("--qa-endpoint needs --qa-model")
        qa = QAConfig(endpoint=args.qa_endpoint, model=args.qa_model, cache_dir=_qa_cache(args),
                      api_key=os.environ.get("OPENAI_API_KEY"), concurrency=args.qa_concurrency,
                      requests_per_second=args.qa_rate)
    elif not args.quiet:
        print("question answering skipped: no --qa-endpoint given", file=sys.stderr)
    started = time.strftime("%Y-%m-%d %H:%M:%S")
    results = run_experiment(index, dataset, systems, sweeps, backend=args.backend, base=base, qa=qa,
                             show_progress=not args.quiet, cutoffs=cutoffs, baseline=baseline,
                             save_runs=args.save_runs, overwrite=args.force, settings=set_values(args.sets),
                             custom_systems=custom, external_runs=external, test=args.test,
                             correction=args.correction, measures=measures, fusions=fusions, **encoder_options(args))
    payload = {
        "run": {"dataset": dataset.name, "queries": len(dataset.queries), "chunks": index.n_chunks,
                "match": dataset.match, "dataset_sha256": dataset.checksums, "index": str(args.index),
                "index_config": _config_dict(index.config), "preset": args.preset,
                "retrieval_config": _config_dict(base),
                "encoder": index.encoder_name, "backend": args.backend, "code_version": code_version(),
                "package_version": __version__, "started": started,
                "command": "tigrag " + " ".join(shlex.quote(a) for a in sys.argv[1:])},
        "results": results,
    }
    if args.out:
        folder = write_run_or_keep(args.out, payload, args.force)
        if not args.quiet:
            extra = f", {folder / payload['per_query_file']}" if payload.get("per_query_file") else ""
            print(f"wrote {folder / 'results.json'}, {folder / 'report.md'}{extra} and {len(payload['plots'])} "
                  "plot(s)", file=sys.stderr)
    if results.get("run_files") and not args.quiet:
        print(f"wrote {len(results['run_files']['runs'])} TREC run(s) and the qrels to {results['run_files']['folder']}",
              file=sys.stderr)
    if args.json:
        json.dump(payload, sys.stdout, indent=2, default=float)
        print()
    else:
        significance = results.get("significance")
        flags = (significance or {}).get("systems", {})
        for name, system in results["systems"].items():
            m = system["metrics"]
            mark = {key: "†" if flags.get(name, {}).get(key, {}).get("significant") else " "
                    for key in ("recall@2", "recall@5", "ndcg@10")}
            encode = results.get("query_encode_seconds") if system.get("uses_query_encoder") else 0.0
            speed = (f"{len(dataset.queries) / max(system['seconds'] + (encode or 0.0), 1e-9):8.1f} q/s"
                     if system["seconds"] else ("     (fused)" if "fusion" in system["config"] else "  (run file)"))
            print(f"{name:<28} R@2 {m['recall@2']:.4f}{mark['recall@2']} R@5 {m['recall@5']:.4f}{mark['recall@5']} "
                  f"nDCG@10 {m['ndcg@10']:.4f}{mark['ndcg@10']} {speed}")
        print("q/s: end to end with query encoding (start-up and loading not counted); report.md's resources "
              "table breaks it down")
        if significance:
            from ..evaluate.report import marker_phrase

            print(f"†: p < {significance['alpha']} against {significance['baseline']} in the {marker_phrase(significance)}")
    return 0


def cmd_datasets(args: argparse.Namespace) -> int:
    from ..evaluate.fetch import REGISTRY, fetch

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


def _run_tag(args: argparse.Namespace) -> str:
    """The TREC tag of `run`: --tag, else the method, with the preset for tigrag (`tigrag-best`)."""
    from ..evaluate.runfiles import run_tag

    if args.tag:
        return run_tag(args.tag)
    return run_tag(f"{args.method}-{args.preset}" if args.method == "tigrag" else args.method)


def cmd_run(args: argparse.Namespace) -> int:
    from ..batch_run import check_resumable, output_format

    fmt = output_format(args.output, args.format)
    check_resumable(fmt, args.resume)
    queries = query_source(args.queries, args.data_dir, args.split)
    check_query_file(queries, unique_ids=fmt == "trec")
    check_writable(Path(os.path.abspath(args.output)).parent, f"-o {args.output}")  # not through a link
    if args.workers or args.scheduler:
        from ..dask_run import run_distributed
        from ..encoders import default_cache_dir
        from ..index.store import read_manifest

        manifest = read_manifest(args.index)  # fail here, not on every worker
        if args.vector_cache is not None:
            from ..outputs import check_outside_indexes

            check_outside_indexes(args.vector_cache or default_cache_dir(), "--vector-cache")
        config = retrieval_config(args)
        from ..methods.registry import get_method

        if get_method(config.method).stage is not None and config.method not in manifest.get("methods", {}):
            raise TigragError(f"{args.index} has no {config.method} stage; build it with "
                              f"`tigrag extend {args.index} --methods {config.method}`")
        stats = run_distributed(args.index, config, queries, args.output,
                                k=args.k, workers=args.workers or 0, scheduler=args.scheduler, backend=args.backend,
                                shard_size=args.shard_size or None, resume=args.resume, show_progress=not args.quiet,
                                vector_cache=(args.vector_cache or str(default_cache_dir()))
                                if args.vector_cache is not None else None,
                                vector_cache_mib=args.vector_cache_mib, allow_mixed_encoder=args.allow_mixed_encoder,
                                fmt=fmt, tag=_run_tag(args), threads=args.threads)
    else:
        from ..batch_run import run_queries

        retriever = _retriever(args)
        stats = run_queries(retriever, queries, args.output, k=args.k, resume=args.resume,
                            show_progress=not args.quiet, fmt=fmt, tag=_run_tag(args))
    log.info("%d queries written to %s in %.1f s (%.1f q/s)%s", stats["written"], args.output, stats["seconds"],
             stats["queries_per_second"],
             f"; {stats['skipped_done']} were already done" if stats["skipped_done"] else "")
    return 0


def cmd_bench(args: argparse.Namespace) -> int:
    """Throughput of the chosen systems on INDEX and QUERIES, each (system, threads) in a fresh process
    (gpu_tigrag.benchmark)."""
    from ..batch_run import stream_queries
    from ..benchmark import BenchSpec, run_child, table
    from ..config import config_to_dict
    from ..index.store import read_manifest
    from ..outputs import check_file_output, record_file

    if any(size < 1 for size in args.batch_sizes):
        raise TigragError(f"--batch-sizes {' '.join(map(str, args.batch_sizes))}: each must be >= 1")
    configs = _bench_configs(args)
    read_manifest(args.index)  # a folder that is not an index fails here, not in every child
    source = query_source(args.queries, args.data_dir, args.split)
    queries = [record.text for record in stream_queries(source)][: args.limit or None]
    if not queries:
        raise TigragError(f"{source}: no queries")
    if args.out:
        check_file_output(args.out, "benchmark results", f"--out {args.out}", inputs=[query_file(source.path)],
                          force=args.force)
    rows = []
    for name, config in configs:
        for threads in args.thread_counts or [args.threads]:
            log.info("benchmarking %s on %s thread(s), batches %s", name, threads or "auto",
                     ", ".join(map(str, args.batch_sizes)))
            spec = BenchSpec(index=str(args.index), queries=queries, system=name, config=config_to_dict(config),
                             threads=threads, batch_sizes=tuple(args.batch_sizes), backend=args.backend, k=args.k,
                             spawned=0.0, verify=not args.no_verify, allow_mixed_encoder=args.allow_mixed_encoder)
            rows.append(run_child(spec))
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    else:
        print(table(rows))
    if args.out:
        from ..atomic import atomic_write_json

        atomic_write_json(Path(args.out), {"index": str(args.index), "queries": str(source),
                                           "count": len(queries), "results": rows}, indent=1)
        record_file(args.out, "benchmark results", systems=len(configs))
        log.info("results written to %s", args.out)
    return 0


def _bench_configs(args: argparse.Namespace) -> list[tuple[str, Any]]:
    """(name, RetrievalConfig) of each system `bench` times: --systems and --system as `eval` reads them
    (their presets with --set on top), else the --method/--preset configuration."""
    from ..evaluate.experiment import resolve_systems, system_config
    from ..methods.registry import systems
    from ..config import RetrievalConfig

    custom, fusions = _custom_systems(args)
    if fusions:
        raise TigragError("bench times retrieval systems; a fusion of runs (rrf) has no retrieval of its own")
    if not args.systems and not custom:
        config = retrieval_config(args)
        return [(f"{config.method} {args.preset}" if config.method == "tigrag" else config.method, config)]
    named = resolve_systems(args.systems)[0] if args.systems else []
    table = {**systems(), **custom}
    settings = set_values(args.sets)
    base = parse_sets(RetrievalConfig(), args.sets or [])  # for systems without a preset of their own
    return [(name, system_config(table[name], base, settings)) for name in [*named, *custom]]


def cmd_trec(args: argparse.Namespace) -> int:
    """A TREC run file from the JSONL output of `tigrag run`."""
    from ..evaluate.runfiles import jsonl_to_trec

    done = jsonl_to_trec(args.results, args.output, args.tag, partial=args.partial, force=args.force)
    if not done.complete:
        held = f"{done.queries:,} of {done.expected:,}" if done.expected is not None else f"{done.queries:,} (of an unknown number of)"
        log.warning("%s: a partial run: %s queries%s; %s records it as partial", args.output, held,
                    f", {args.results} still being written by {done.writer}" if done.writer else "",
                    f"{args.output}.meta.json")
    log.info("%d lines (%d queries) written to %s", done.lines, done.queries, args.output)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..evaluate.report import compare

    from ..atomic import atomic_write_text
    from ..outputs import check_file_output, record_file

    if args.out:
        inputs = [Path(run) / "results.json" for run in args.runs]
        check_file_output(args.out, "a comparison table", f"--out {args.out}", inputs, args.force)
    table = compare(args.runs, args.metrics.replace(",", " ").split(), args.format)
    if args.out:
        from ..errors import OutputError

        try:
            atomic_write_text(args.out, table)
        except OutputError as exc:
            raise OutputError(f"--out {args.out}: cannot write the table ({str(exc).partition(': cannot write (')[2]}"
                              ) from None
        record_file(args.out, "a comparison table")
    print(table, end="")
    return 0


def _config_dict(config: Any) -> dict[str, Any]:
    from ..config import config_to_dict

    return config_to_dict(config)


def cmd_methods(args: argparse.Namespace) -> int:
    """The registered methods: name, index stage, evaluation systems, what each does."""
    from ..methods.registry import methods

    for method in methods():
        stage = "own index stage" if method.stage is not None else "base index only"
        print(f"{method.name:<11} {method.label}: {method.description} ({stage})")
        print(f"{'':<11} systems: {', '.join(s.name for s in method.systems)}")
    return 0


def cmd_settings(args: argparse.Namespace) -> int:
    """Every setting with its type, default and help: index settings (`tigrag index --set`) and
    retrieval settings (`query`/`eval`/`run --set`), each method's under its name."""
    from ..config import describe_settings, settings_markdown

    if args.markdown:
        print(settings_markdown(), end="")
        return 0
    for side, rows in describe_settings().items():
        print(f"{side} settings:")
        for row in rows:
            where = f", range {row.range}" if row.range else ""
            print(f"  {row.path} ({row.type}, default {row.default}{where}): {row.help}")
    return 0
