"""LiteSemRAG beside the baselines, TIGRAG and SpectRAG on the same chunks (issue 14, part 5).

    python bench/litesemrag.py                         # SciFact, 2Wiki and MuSiQue-100
    python bench/litesemrag.py --datasets musique_train100 --smoke
    python bench/litesemrag.py --sweep                 # layer × τ_conc on SciFact's training queries
    python bench/litesemrag.py --passage-chunks        # SciFact with one chunk per passage (the paper's unit)
    python bench/litesemrag.py --diagnose              # what the matched nodes reach, per dataset
    python bench/litesemrag.py --best                  # the `LiteSemRAG best` sweep (litesemrag_best.md)

For each dataset: the cached reference index (bench/studies/encoders.py's `base_index`: all-MiniLM-L6-v2),
its LiteSemRAG stage (built once, timed, and cached beside it as `index_<name>_litesemrag`), its
SpectRAG stage built in memory, then NaiveRAG, BM25, Hybrid, TIGRAG (both presets), SpectRAG and
LiteSemRAG with its ablation, each to the evaluation depth through the one evaluation path.
LiteSemRAG's paper reports Recall@10 and MRR@10 on BEIR HotpotQA, SciFact and FEVER; only SciFact
is here, and this copy of the paper lost its table values, so the claim checked is the ordering:
LiteSemRAG's MRR@10 the best of the systems on SciFact. Writes bench/results/litesemrag.md/.json.

`--passage-chunks` (notes, open question 10): SciFact on an index whose chunks are whole passages
(`chunk.sentences_per_chunk=1000`, no overlap), the unit LiteSemRAG's code gives a JSON record and
its paper's chunk-level gold; every system ranks those units. Writes litesemrag_passages.md/.json.

`--diagnose`: per dataset, how many semantic nodes a query matches at each level, how many are
connected, how many queries have none connected (all their results come from recovery), and
how many gold passages hold at least one matched node at all (an upper bound on what the
node-based ranking can find). Writes litesemrag_diagnosis.md/.json.

`--best` (issue 22, item 4): the sweep that chose `LiteSemRAG best`: dense fusion × BM25 fusion ×
recovery order on 2Wiki's first 250 queries (the developer split; no other 2Wiki
queries exist here), chosen by R@5 (then R@10, R@2); then Hybrid, LiteSemRAG, LiteSemRAG best and
its ablations on the other 249 2Wiki queries, MuSiQue-100 and SciFact's test queries, none seen by
the sweep. Writes bench/results/litesemrag_best.md/.json.

`--sweep` (notes, open question 9): the token-state layer in {-1, -2, -3} × τ_conc in {.80, .85,
.90, .95}, then chunk-level aggregation on at the best pair, on SciFact's 809 *training* queries
(the test queries stay unseen); one forward pass gives all layers' span vectors. Writes
bench/results/litesemrag_sweep.md/.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, DATA, write_results
from bench.studies.encoders import DATASETS, base_index

from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.errors import IndexFormatError
from gpu_tigrag.methods.litesemrag.config import LitesemragIndexConfig
from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import Experiment, system_config
from gpu_tigrag.methods.litesemrag import BEST, BEST_WITHOUT_LIFT, best_ablations
from gpu_tigrag.methods.litesemrag.config import LitesemragQueryConfig
from gpu_tigrag.methods.registry import System, systems as registered_systems
from gpu_tigrag.index.build import add_method
from gpu_tigrag.index.store import load_index, save_index

SYSTEMS = ("NaiveRAG", "BM25", "Hybrid", "TIGRAG paper", "TIGRAG best", "SpectRAG", "SpectRAG best", "LiteSemRAG",
           "LiteSemRAG without recovery share", "LiteSemRAG best")
LABELS = {"2wikimultihopqa": "2Wiki", "musique_train100": "MuSiQue-100", "beir_scifact": "SciFact"}
ORDER = ("beir_scifact", "2wikimultihopqa", "musique_train100")
LAYERS = (-1, -2, -3)
CONCENTRATIONS = (0.80, 0.85, 0.90, 0.95)


def stage_index(name: str, passage_chunks: bool = False):
    """The reference index of `name` (or its one-chunk-per-passage twin) with its LiteSemRAG stage
    (default settings), cached on disk."""
    suffix = "_passages" if passage_chunks else ""
    path = CACHE / f"index_{name}{suffix}_litesemrag"
    if (path / "manifest.json").is_file():
        index = load_index(path)
        if index.config.litesemrag == LitesemragIndexConfig():
            try:
                index.stage("litesemrag")
                return index
            except IndexFormatError as exc:  # a stage of older rules (its stage_version)
                print(f"[{name}] {exc}: rebuilding it", file=sys.stderr)
        else:
            print(f"[{name}] the cached stage has other settings than the defaults: rebuilding it", file=sys.stderr)
    else:
        index = passage_index(name) if passage_chunks else base_index(name)
    index = add_method(index, "litesemrag", config=LitesemragIndexConfig(), show_progress=True)
    save_index(index, path)
    return index


def passage_index(name: str):
    """The reference configuration with one chunk per passage (sentence windows of 1000, no overlap)."""
    from bench.common import bench_index_config

    from gpu_tigrag.config import ChunkConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.build import build_index

    config = dataclasses.replace(bench_index_config(), chunk=ChunkConfig(sentences_per_chunk=1000, overlap=0))
    passages = load_corpus(load_dataset(DATA / DATASETS[name]).corpus_paths)
    print(f"[{name}] building the one-chunk-per-passage index", file=sys.stderr)
    return build_index(passages, config, show_progress=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(ORDER), choices=list(DATASETS))
    parser.add_argument("--smoke", action="store_true", help="the first 20 queries only, no results written")
    parser.add_argument("--sweep", action="store_true", help="the layer × τ_conc sweep on SciFact's training queries")
    parser.add_argument("--diagnose", action="store_true", help="matched-node statistics (litesemrag_diagnosis)")
    parser.add_argument("--best", action="store_true", help="the LiteSemRAG best sweep and held-out evaluation")
    parser.add_argument("--passage-chunks", action="store_true",
                        help="SciFact on an index with one chunk per passage (results: litesemrag_passages)")
    args = parser.parse_args()
    if args.sweep:
        return sweep(args.smoke)
    if args.best:
        return best(args.smoke)
    if args.passage_chunks:
        return compare(["beir_scifact"], args.smoke, passage_chunks=True)
    if args.diagnose:
        return diagnose(args.datasets, args.smoke)
    return compare(args.datasets, args.smoke)


def compare(names: list[str], smoke: bool, passage_chunks: bool = False) -> int:
    out: dict[str, dict] = {}
    for name in names:
        index = stage_index(name, passage_chunks)
        start = time.perf_counter()
        index = add_method(index, "spectrag")
        spectrag_seconds = time.perf_counter() - start
        dataset = load_dataset(DATA / DATASETS[name])
        if smoke:
            dataset.queries = dataset.queries[:20]
        experiment = Experiment(index, dataset, backend="numpy")
        experiment.encoder.encode(experiment.texts, kind="query")  # every dense system then reads cached vectors
        systems = {}
        for system in SYSTEMS:
            report = experiment.report(experiment.run_system(system))
            report.pop("config", None)
            report.pop("per_query", None)  # the per-query tables stay in `tigrag eval --out`; here: the figures
            systems[system] = report
            m = report["metrics"]
            print(f"[{name}] {system}: R@10 {m['recall@10']:.4f} MRR@10 {m['mrr@10']:.4f} R@2 {m['recall@2']:.4f} "
                  f"R@5 {m['recall@5']:.4f} ({report['queries_per_second'] or 0:.1f} q/s)", file=sys.stderr)
        stats = index.litesemrag.stats
        out[name] = {"chunks": index.n_chunks, "queries": len(dataset.queries), "encoder": index.encoder_name,
                     "litesemrag_stats": stats, "litesemrag_step_seconds": float(sum(stats["seconds"].values())),
                     "spectrag_step_seconds": spectrag_seconds,
                     "tigrag_build_seconds": float(sum(v for k, v in index.timings.items()
                                                       if k not in ("spectrag", "litesemrag"))),
                     "systems": systems}
    if not smoke:
        stem = "litesemrag_passages" if passage_chunks else "litesemrag"
        write_results(stem, {"datasets": out, "passage_chunks": passage_chunks}, markdown(out, passage_chunks))
    return 0


def markdown(out: dict[str, dict], passage_chunks: bool = False) -> str:
    units = ("one chunk per passage (`chunk.sentences_per_chunk=1000`, no overlap: the unit LiteSemRAG's code gives "
             "a JSON record)" if passage_chunks else "the cached indexes of the benchmark scripts")
    command = "python bench/litesemrag.py" + (" --passage-chunks" if passage_chunks else "")
    lines = ["# LiteSemRAG beside the baselines, TIGRAG and SpectRAG (issues 14 and 22)"
             + (": SciFact, one chunk per passage" if passage_chunks else ""), "",
             f"Command: `{command}` (2-core CPU, numpy backend; {units}: every system ranks the same chunks, "
             "the dense ones with all-MiniLM-L6-v2). LiteSemRAG's token "
             f"states come from all-MiniLM-L6-v2's layer {LitesemragIndexConfig().layer} (the code takes DeBERTa-v3-large's −2; "
             "the layer measured on SciFact's training queries, litesemrag_sweep.md; DeBERTa: no offline "
             "package ships), its spans from the project's spaCy model by the public code's rules, a prototype matched "
             "twice kept twice, as there (its defaults, the `paper` behaviour: faithfulness_litesemrag.md, issue 22). "
             "Stage seconds are those recorded when the cached stage was built. Its paper evaluates on BEIR HotpotQA, SciFact "
             "and FEVER with Recall@10 and MRR@10; this copy of the paper lost its table values, so no figure can be "
             "compared, and the claim checked is the ordering on SciFact (the one of its datasets here): "
             "LiteSemRAG's MRR@10 the best of these systems (its baselines there, GraphRAG and LightRAG, need an "
             "LLM and are not run). `LiteSemRAG best`: " + ", ".join(f"`{k}={v}`" for k, v in BEST.items())
             + ", chosen on 2Wiki's first 250 queries (litesemrag_best.md, which reports it and its ablations on "
             "held-out queries; the 2Wiki table here holds those 250 too). SpectRAG best: spectrag_best.md.", ""]
    for name, d in out.items():
        stats = d["litesemrag_stats"]
        lines += [f"## {LABELS.get(name, name)} ({d['queries']} queries, {d['chunks']:,} chunks)", "",
                  f"LiteSemRAG stage: {d['litesemrag_step_seconds']:.1f} s ("
                  + ", ".join(f"{k} {v:.1f} s" for k, v in stats["seconds"].items())
                  + f"); SpectRAG stage {d['spectrag_step_seconds']:.1f} s; TIGRAG build recorded "
                  f"{d['tigrag_build_seconds']:.1f} s. {stats['spans']:,} spans ({stats['dropped_spans']:,} past the "
                  f"encoder's window), {stats['strings']:,} strings, {stats['prototypes']:,} prototypes; "
                  f"{stats['frequent_strings']:,} strings with >= 100 occurrences, {stats['concentrated_strings']:,} "
                  f"of them concentrated single words, {stats['multi_sense_strings']:,} with several senses.", "",
                  "| system | R@10 | MRR@10 | R@2 | R@5 | nDCG@10 | queries/s |", "|---|---|---|---|---|---|---|"]
        for system, s in d["systems"].items():
            m = s["metrics"]
            lines.append(f"| {system} | {100 * m['recall@10']:.2f} | {100 * m['mrr@10']:.2f} | "
                         f"{100 * m['recall@2']:.2f} | {100 * m['recall@5']:.2f} | {100 * m['ndcg@10']:.2f} | "
                         f"{s['queries_per_second'] or 0:.1f} |")
        systems = d["systems"]
        best = max(systems, key=lambda k: systems[k]["metrics"]["mrr@10"])
        mrr = {s: systems[s]["metrics"]["mrr@10"] for s in ("LiteSemRAG", "LiteSemRAG best") if s in systems}
        lines += ["", f"Best MRR@10: {best} ({100 * systems[best]['metrics']['mrr@10']:.2f}); "
                  + ", ".join(f"{s} {100 * v:.2f}" for s, v in mrr.items())
                  + f": the paper's ordering (LiteSemRAG best) {'holds' if best.startswith('LiteSemRAG') else 'does not hold'}"
                  " here.", ""]
    lines.append("Queries/s: the retrieval call; for the dense systems the query vectors are encoded beforehand, "
                 "LiteSemRAG's count includes its own span extraction (spaCy) and token states.")
    return "\n".join(lines)


def diagnose(names: list[str], smoke: bool) -> int:
    import numpy as np

    from gpu_tigrag.methods.litesemrag.retriever import LitesemragRetriever

    out = {}
    for name in names:
        index = stage_index(name)
        dataset = load_dataset(DATA / DATASETS[name])
        if smoke:
            dataset.queries = dataset.queries[:20]
        retriever = LitesemragRetriever(index, RetrievalConfig(method="litesemrag"), backend="numpy")
        batch = retriever.prepare([q.text for q in dataset.queries])
        nodes = retriever.match(batch)
        _, connected = retriever._cooccurrence(nodes)
        n = len(dataset.queries)
        keys = index.passage_titles if dataset.match == "title" else index.passage_ids
        holds = retriever.graph.tf.tocsr()
        gold_total = gold_reached = 0
        for q, query in enumerate(dataset.queries):
            chunks = np.unique(holds[nodes.proto[nodes.query == q]].indices)
            reached = {keys[int(index.chunk_passage[c])] for c in chunks}
            gold_total += len(query.gold)
            gold_reached += sum(g in reached for g in query.gold)
        per_query_connected = np.bincount(nodes.query[connected], minlength=n)
        out[name] = {"queries": n, "spans_per_query": float(np.mean([len(s) for s in batch.spans])),
                     "nodes_per_query": len(nodes) / n,
                     "nodes_by_level": np.bincount(nodes.level, minlength=4).tolist(),
                     "connected_nodes": int(connected.sum()),
                     "queries_without_connected_node": int((per_query_connected == 0).sum()),
                     "gold_passages": gold_total, "gold_passages_holding_a_matched_node": gold_reached}
        print(f"[{name}] {out[name]}", file=sys.stderr)
    if not smoke:
        lines = ["# LiteSemRAG: what the matched semantic nodes reach", "",
                 "Command: `python bench/litesemrag.py --diagnose` (the stages of `bench/litesemrag.py`). Levels: "
                 "0 exact entity, 1 exact other or partial entity, 2 partial other, 3 similarity. A query without a "
                 "connected node takes all its results from recovery. A gold passage none of whose chunks holds a "
                 "matched node cannot be found by the node scores at all.", "",
                 "| dataset | queries | spans / query | nodes / query | nodes by level 0/1/2/3 | connected nodes | "
                 "queries without a connected node | gold passages holding a matched node |",
                 "|---|---|---|---|---|---|---|---|"]
        for name, d in out.items():
            lines.append(f"| {LABELS.get(name, name)} | {d['queries']} | {d['spans_per_query']:.1f} | "
                         f"{d['nodes_per_query']:.1f} | {'/'.join(map(str, d['nodes_by_level']))} | "
                         f"{d['connected_nodes']:,} | {d['queries_without_connected_node']} | "
                         f"{d['gold_passages_holding_a_matched_node']:,} of {d['gold_passages']:,} "
                         f"({100 * d['gold_passages_holding_a_matched_node'] / max(d['gold_passages'], 1):.1f} %) |")
        write_results("litesemrag_diagnosis", {"datasets": out}, "\n".join(lines))
    return 0


def sweep(smoke: bool) -> int:
    from gpu_tigrag.methods.litesemrag.semantic_graph import assemble_semantic_graph, extract_occurrences

    name = "beir_scifact"
    index = base_index(name)
    dataset = load_dataset(DATA / DATASETS[name], split="train")
    if smoke:
        dataset.queries = dataset.queries[:20]
    start = time.perf_counter()
    found = extract_occurrences(index.chunk_texts, LitesemragIndexConfig(), show_progress=True, layers=list(LAYERS))
    extract_seconds = time.perf_counter() - start
    rows = []

    def run(layer: int, config: LitesemragIndexConfig) -> dict:
        t = time.perf_counter()
        graph = assemble_semantic_graph(found, LAYERS.index(layer), config)
        assemble = time.perf_counter() - t
        variant = dataclasses.replace(index, config=index.config.with_section("litesemrag", config),
                                      stages={**index.stages, "litesemrag": graph})
        experiment = Experiment(variant, dataset, backend="numpy")
        report = experiment.report(experiment.run_config("LiteSemRAG", RetrievalConfig(method="litesemrag")))
        m = report["metrics"]
        row = {"layer": layer, "concentration": config.concentration, "chunk_aggregation": config.chunk_aggregation,
               "recall@10": m["recall@10"], "mrr@10": m["mrr@10"], "prototypes": graph.stats["prototypes"],
               "multi_sense_strings": graph.stats["multi_sense_strings"], "assemble_seconds": assemble}
        print(f"[sweep] {row}", file=sys.stderr)
        rows.append(row)
        return row

    for layer in LAYERS:
        for tau in CONCENTRATIONS:
            run(layer, dataclasses.replace(LitesemragIndexConfig(), layer=layer, concentration=tau))
    best = max(rows, key=lambda r: (r["mrr@10"], r["recall@10"]))
    run(best["layer"], dataclasses.replace(LitesemragIndexConfig(), layer=best["layer"],
                                           concentration=best["concentration"], chunk_aggregation=True))
    if not smoke:
        write_results("litesemrag_sweep", {"dataset": name, "split": "train", "queries": len(dataset.queries),
                                           "extract_seconds": extract_seconds, "rows": rows}, sweep_markdown(rows, len(dataset.queries), extract_seconds))
    return 0


def sweep_markdown(rows: list[dict], queries: int, extract_seconds: float) -> str:
    default = LitesemragIndexConfig()
    lines = ["# LiteSemRAG: token-state layer × τ_conc (and chunk-level aggregation) on SciFact's training queries", "",
             f"Command: `python bench/litesemrag.py --sweep` ({queries} training queries of BEIR SciFact, the reference "
             f"index's chunks, all-MiniLM-L6-v2 token states; spans and all three layers' vectors extracted once in "
             f"{extract_seconds:.0f} s, one stage assembled per row). Default: layer {default.layer}, τ_conc "
             f"{default.concentration}, aggregation off.", "",
             "| layer | τ_conc | chunk aggregation | R@10 | MRR@10 | prototypes | strings with several senses | "
             "assembly s |", "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['concentration']:.2f} | {'on' if r['chunk_aggregation'] else 'off'} | "
                     f"{100 * r['recall@10']:.2f} | {100 * r['mrr@10']:.2f} | {r['prototypes']:,} | "
                     f"{r['multi_sense_strings']:,} | {r['assemble_seconds']:.1f} |")
    return "\n".join(lines)


#: the sweep of --best (settings of LitesemragQueryConfig)
DENSE_FUSIONS = (0.0, 0.5, 1.0, 2.0, 4.0)
LEXICAL_FUSIONS = (0.0, 0.5, 1.0, 2.0, 4.0)
RECOVERY_ORDERS = ("levels", "weighted")
SWEPT = ("dense_fusion", "lexical_fusion", "recovery_order")
BEST_METRICS = ("recall@2", "recall@5", "recall@10", "mrr@10", "ndcg@10")


def best_systems() -> tuple[str, ...]:
    return ("Hybrid", "TIGRAG best", "LiteSemRAG", "LiteSemRAG best", *best_ablations())


def _best_experiment(name: str, queries: slice, split: str | None = None) -> Experiment:
    dataset = load_dataset(DATA / DATASETS[name], split=split) if split else load_dataset(DATA / DATASETS[name])
    dataset.queries = dataset.queries[queries]
    experiment = Experiment(stage_index(name), dataset, backend="numpy")
    experiment.encoder.encode(experiment.texts, kind="query")
    return experiment


def _best_metrics(experiment: Experiment, name: str, config) -> dict[str, float]:
    m = experiment.report(experiment.run_config(name, config))["metrics"]
    return {k: float(m[k]) for k in BEST_METRICS}


def best(smoke: bool) -> int:
    """The sweep on 2Wiki's developer split, then best_systems() on the held-out splits."""
    import itertools

    half = 250 if not smoke else 20
    dev = _best_experiment("2wikimultihopqa", slice(0, half))
    # the sweep does not depend on BEST: its rows are kept (CACHE) so that a new BEST is evaluated
    # without sweeping again; a row is reused only for the same settings, queries and LiteSemRAG code
    cache = CACHE / "litesemrag_best_sweep.json"
    version = _method_digest()
    kept = {}
    if cache.is_file() and not smoke:
        saved = json.loads(cache.read_text())
        kept = {tuple(r[k] for k in SWEPT): r for r in saved["rows"]} if saved.get("key") == [version, half] else {}
    sweep_rows = []
    for dense, lexical, order in itertools.product(DENSE_FUSIONS, LEXICAL_FUSIONS, RECOVERY_ORDERS):
        row = dict(zip(SWEPT, (dense, lexical, order)))
        if (dense, lexical, order) in kept:
            sweep_rows.append(kept[(dense, lexical, order)])
            continue
        overrides = {f"litesemrag.{k}": v for k, v in row.items()}
        m = _best_metrics(dev, "sweep", system_config(System("sweep", "litesemrag", overrides), dev.base))
        sweep_rows.append({**row, **m})
        print(f"[sweep] {row}: R@2 {m['recall@2']:.4f} R@5 {m['recall@5']:.4f} R@10 {m['recall@10']:.4f} "
              f"MRR@10 {m['mrr@10']:.4f}", file=sys.stderr)
        if not smoke:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_text(json.dumps({"key": [version, half], "rows": sweep_rows}))
    chosen = max(sweep_rows, key=lambda r: (round(r["recall@5"], 6), round(r["recall@10"], 6), round(r["recall@2"], 6)))
    splits = {"2Wiki dev (first half, swept)": dev,
              "2Wiki held out (second half)": _best_experiment("2wikimultihopqa", slice(half, None if not smoke else 2 * half)),
              "MuSiQue-100": _best_experiment("musique_train100", slice(0, None if not smoke else half)),
              "SciFact (test queries)": _best_experiment("beir_scifact", slice(0, None if not smoke else half))}
    known = registered_systems()
    results = {}
    for label, experiment in splits.items():
        results[label] = {"queries": len(experiment.dataset.queries),
                          "systems": {s: _best_metrics(experiment, s, system_config(known[s], experiment.base))
                                      for s in best_systems()}}
        for s, m in results[label]["systems"].items():
            print(f"[{label}] {s}: R@2 {m['recall@2']:.4f} R@5 {m['recall@5']:.4f} R@10 {m['recall@10']:.4f} "
                  f"MRR@10 {m['mrr@10']:.4f}", file=sys.stderr)
    if not smoke:
        write_results("litesemrag_best", {"sweep": sweep_rows, "chosen": chosen, "best": BEST, "splits": results},
                      best_markdown(sweep_rows, chosen, results))
    return 0


def _method_digest() -> str:
    """sha256 of the sources a LiteSemRAG ranking depends on (its method package and the ops it calls)."""
    import hashlib

    root = Path(__file__).resolve().parents[1] / "gpu_tigrag"
    files = [path for path in sorted((root / "methods" / "litesemrag").glob("*.py")) if path.name != "__init__.py"]
    files += [root / "ops" / "fusion.py", root / "ops" / "topk.py"]  # not __init__.py: BEST and the systems
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.name.encode() + path.read_bytes())
    return digest.hexdigest()[:16]


def _chosen_overrides(row: dict) -> dict:
    """The settings of a sweep row that differ from the paper's (LitesemragQueryConfig's defaults)."""
    paper = LitesemragQueryConfig()
    return {f"litesemrag.{k}": row[k] for k in SWEPT if row[k] != getattr(paper, k)}


def best_markdown(sweep_rows: list[dict], chosen: dict, results: dict) -> str:
    lines = ["# LiteSemRAG best: its mechanisms chosen on developer queries (issue 22, item 4)", "",
             "Command: `python bench/litesemrag.py --best` (2-core CPU, numpy backend, the cached LiteSemRAG stages "
             "of bench/litesemrag.py: all-MiniLM-L6-v2 token states, layer -1; the dense list from the same "
             "all-MiniLM-L6-v2 passage vectors every dense system uses). No 2Wiki queries outside "
             "2wikimultihopqa_dev500.json exist here, so the sweep runs on its first 250 queries (the developer split) "
             "and the systems are reported on the other 249, on MuSiQue-100 and on SciFact's 300 test queries, none "
             "seen by the sweep.", "",
             f"Sweep: litesemrag.dense_fusion ∈ {list(DENSE_FUSIONS)} × lexical_fusion ∈ {list(LEXICAL_FUSIONS)} × "
             f"recovery_order ∈ {list(RECOVERY_ORDERS)} (LiteSemRAG's own list weight 1, recovery share the paper's "
             "0.2: an earlier grid that also swept 0.0 found it no better); chosen by R@5, then R@10, then R@2: " + ", ".join(f"{k} {chosen[k]}" for k in SWEPT)
             + f" (R@5 {100 * chosen['recall@5']:.2f}). `LiteSemRAG best` = "
             + ", ".join(f"`{k}={v}`" for k, v in BEST.items())
             + (" (the sweep's choice, with the title-link lift chosen later: litesemrag_lift.md)."
                if BEST_WITHOUT_LIFT == _chosen_overrides(chosen) else
                " — NOT the sweep's choice: update BEST in gpu_tigrag/methods/litesemrag/__init__.py and rerun."),
             "Ablations (each mechanism back at the paper's value): "
             + "; ".join(f"{name}: " + ", ".join(f"`{k}={v}`" for k, v in o.items() if BEST.get(k) != v)
                         for name, o in best_ablations().items()) + ".", ""]
    lines += ["Against Hybrid (the issue's target: at least its R@5 on 2Wiki and MuSiQue-100), LiteSemRAG best minus "
              "Hybrid, R@2 / R@5 / R@10 / MRR@10 points:", ""]
    for label, d in results.items():
        best, hybrid = d["systems"]["LiteSemRAG best"], d["systems"]["Hybrid"]
        lines.append(f"- {label}: " + " / ".join(f"{100 * (best[k] - hybrid[k]):+.2f}" for k in BEST_METRICS[:4]))
    scifact = results.get("SciFact (test queries)")
    if scifact:
        others = {s: m for s, m in scifact["systems"].items() if not s.startswith("LiteSemRAG")}
        top = max(others, key=lambda s: others[s]["mrr@10"])
        mrr = scifact["systems"]["LiteSemRAG best"]["mrr@10"]
        lines += ["", f"The paper's claim on SciFact (LiteSemRAG's MRR@10 the best), among the systems here: LiteSemRAG "
                  f"best {100 * mrr:.2f} vs {top} {100 * others[top]['mrr@10']:.2f} — "
                  f"{'holds' if mrr > others[top]['mrr@10'] else 'does not hold'}; LiteSemRAG (paper) "
                  f"{100 * scifact['systems']['LiteSemRAG']['mrr@10']:.2f}. Beside every system (SpectRAG best "
                  "included): litesemrag.md."]
    lines.append("")
    for label, d in results.items():
        lines += [f"## {label} ({d['queries']} queries)", "",
                  "| system | R@2 | R@5 | R@10 | MRR@10 | nDCG@10 |", "|---|---|---|---|---|---|"]
        for s, m in d["systems"].items():
            lines.append(f"| {s} | " + " | ".join(f"{100 * m[k]:.2f}" for k in BEST_METRICS) + " |")
        lines.append("")
    lines += ["## The sweep (2Wiki developer split, 250 queries)", "",
              "| dense fusion | BM25 fusion | recovery order | R@2 | R@5 | R@10 | MRR@10 |",
              "|---|---|---|---|---|---|---|"]
    for r in sorted(sweep_rows, key=lambda r: (-r["recall@5"], -r["recall@10"])):
        lines.append(f"| {r['dense_fusion']} | {r['lexical_fusion']} | {r['recovery_order']} | "
                     + " | ".join(f"{100 * r[k]:.2f}" for k in BEST_METRICS[:4]) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    raise SystemExit(main())
