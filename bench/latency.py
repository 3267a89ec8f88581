"""One query at a time, and the engine's threads (issue 24, item 6), on the cached 2Wiki index.

Sections, each timed in this run (speeds are same-run ratios: the machine is shared, its load is recorded):
- one-query latency (median of --queries) through `make_retriever(...).retrieve([q])` for naiverag,
  bm25, tigrag paper and tigrag best, and the batch throughput of the same queries in blocks of --batch.
  The query vectors (questions and TIGRAG's expanded texts) come from a warm vector cache
  (CachingEncoder over a VectorCache under .cache/bench/latency_vectors, filled by a warm-up pass):
  the encoder is excluded, the in-memory cache lookup is included; the run checks no text was encoded;
- thread settings, each in its own process (children alternate, --rounds each): `before` (numba 2
  threads, OpenBLAS 2 threads, libgomp's default spinning wait: the engine before the thread policy),
  `policy` (gpu_tigrag.threads' defaults: numba = cores, BLAS 1, passive wait) and `policy-1`
  (--threads 1). Each child reports PPR queries/s on 1 and 2 numba threads (499 2Wiki questions,
  blocks of 256, seeds to top-γ, as bench/throughput.py times it) and the one-query latencies above;
- BM25 against bm25s (same chunk tokens, k1 = 1.5, b = 0.75, Lucene idf, as the index's): one query
  per call (median) and all questions in one call, pre-tokenised on both sides, top-5;
  our side is the BM25 baseline's top-k (MaxScore over the postings, ops.fusion.bm25_top); also the
  two block products it replaced (bm25_block_scores, and the matrix product of before) with a ranked top-k;
- `tigrag query` wall time (process start to exit, median of 3) on the cached index with the warm vector
  cache, for bm25, naiverag and tigrag paper.

Usage: python bench/latency.py [--queries 100] [--rounds 2] [--batch 100] [--smoke]
Writes bench/results/latency.{json,md}; --smoke runs every section briefly on the bundled example
corpus (stand-in encoder) and writes nothing.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, ROOT, write_results

#: the systems of the one-query table: (label, method, preset or None)
SYSTEMS = (("naiverag", "naiverag", None), ("bm25", "bm25", None), ("tigrag paper", "tigrag", "paper"),
           ("tigrag best", "tigrag", "best"))
#: thread settings of the child processes: label -> environment
SETTINGS = {
    "before": {"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2", "_LATENCY_SPIN": "1"},
    "policy": {},
    "policy-1": {"TIGRAG_THREADS": "1"},
}
PPR_BATCH = 256


def load_state() -> float:
    return os.getloadavg()[0]


def median_ms(values: list[float]) -> float:
    return float(np.median(values) * 1e3)


# -- inputs -----------------------------------------------------------------------------------------
def dataset(smoke: bool, folder: Path | None = None) -> tuple[Any, list[str], Any, Path]:
    """(index, questions, caching encoder, index folder): the cached 2Wiki index and its 499 questions,
    or with `smoke` the bundled example built with the stand-in encoder into `folder`."""
    from gpu_tigrag.encoders import CachingEncoder, VectorCache

    if smoke:
        from gpu_tigrag.config import EncoderConfig, IndexConfig
        from gpu_tigrag.corpus import load_corpus
        from gpu_tigrag.encoders import load_encoder
        from gpu_tigrag.index.build import build_index
        from gpu_tigrag.index.store import save_index

        config = IndexConfig(encoder=EncoderConfig(model="hashing:128"))
        encoder = load_encoder(config.encoder)
        index = build_index(load_corpus(ROOT / "examples" / "corpus.json"), config, encoder=encoder,
                            entity_extractor=lambda texts: [[] for _ in texts])
        save_index(index, folder / "index")
        questions = [q["question"] for q in json.loads((ROOT / "examples" / "questions.json").read_text())]
        return index, questions, CachingEncoder(encoder, VectorCache(folder / "vectors", 64 << 20)), folder / "index"
    from bench.common import dataset_index, dataset_queries
    from gpu_tigrag.encoders.lazy import query_encoder

    index = dataset_index("2wikimultihopqa")
    questions = [q.text for q in dataset_queries("2wikimultihopqa")]
    cache = VectorCache(CACHE / "latency_vectors", 1 << 30)
    return index, questions, CachingEncoder(query_encoder(index, False), cache), CACHE / "index_2wikimultihopqa"


def retrievers(index: Any, encoder: Any) -> dict[str, Any]:
    from gpu_tigrag.config import RetrievalConfig
    from gpu_tigrag.retrieve.factory import make_retriever
    from gpu_tigrag.presets import preset

    out = {}
    for label, method, name in SYSTEMS:
        config = preset(name) if name else RetrievalConfig.of(method)
        out[label] = make_retriever(index, config, encoder=encoder, backend="numpy")
    return out


# -- sections ---------------------------------------------------------------------------------------
def one_query_latency(systems: dict[str, Any], questions: list[str], encoder: Any, batch: int) -> dict[str, Any]:
    """Median ms of retrieve([q]) per system, and queries/s of the same questions in blocks of `batch`."""
    for retriever in systems.values():  # warm-up: numba, the vector cache, the device index
        retriever.retrieve(questions)
    encoded = encoder.encoded
    rows = {}
    for label, retriever in systems.items():
        times = []
        for q in questions:
            start = time.perf_counter()
            retriever.retrieve([q])
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        for i in range(0, len(questions), batch):
            retriever.retrieve(questions[i:i + batch])
        block = time.perf_counter() - start
        rows[label] = {"one_query_ms_median": median_ms(times), "one_query_ms_p90": float(np.percentile(times, 90) * 1e3),
                       "batch_queries_per_second": len(questions) / block}
    if encoder.encoded != encoded:
        raise RuntimeError(f"{encoder.encoded - encoded} texts were encoded during the timed passes: the vectors were "
                           "not all cached")
    return rows


def ppr_rate(index: Any, questions: list[str], threads: int, repeat: int = 2) -> float:
    """PPR + top-γ queries/s (best of `repeat`) on `threads` numba threads, as bench/throughput.py times it."""
    import numba

    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.methods.tigrag.config import PPRConfig
    from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma
    from gpu_tigrag.text.tokens import valid_tokens

    be = get_backend("numpy")
    cfg = index.config
    seeds = [s for s in (index.vocab.encode(valid_tokens(t, cfg.tokens, cfg.chunk.language)) for t in questions)
             if len(s)]
    transition = TransitionMatrix.from_adjacency(be, index.graph)
    config = PPRConfig()
    numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    best = 0.0
    try:
        for _ in range(repeat + 1):  # the first pass compiles/loads the kernels
            start = time.perf_counter()
            for i in range(0, len(seeds), PPR_BATCH):
                scores, _ = personalized_pagerank(be, transition, seed_matrix(be, seeds[i:i + PPR_BATCH], index.n_vocab),
                                                  config)
                top_gamma(be, scores, config.top_gamma)
            best = max(best, len(seeds) / (time.perf_counter() - start))
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return best


def bm25_against_bm25s(index: Any, questions: list[str], retriever: Any, k: int = 5) -> dict[str, Any]:
    """Per call (one query, median ms) and per batch (every question in one call) for our BM25 top-k
    (MaxScore, `bm25_top`), the blocks it replaced (postings or matrix, whichever is cheaper; the matrix
    product alone) with a ranked top-k, and bm25s over the same chunk tokens; with the share of top-k sets
    ours and bm25s agree on."""
    import bm25s

    from gpu_tigrag.ops.fusion import bm25_block_scores, bm25_scores, bm25_top
    from gpu_tigrag.ops.topk import ranked_top_k

    be, device = retriever.be, retriever.device
    seeds = retriever.query_seeds(questions)
    corpus = [[str(t) for t in index.token_ids[index.token_indptr[c]:index.token_indptr[c + 1]]]
              for c in range(index.n_chunks)]
    model = bm25s.BM25(k1=index.config.bm25.k1, b=index.config.bm25.b, method="lucene")
    model.index(corpus, show_progress=False)
    queries = [[str(t) for t in s] for s in seeds]
    kept = [i for i, q in enumerate(queries) if q]
    queries, seeds = [queries[i] for i in kept], [seeds[i] for i in kept]

    def block_top(scores):  # B × k ids of a chunks × B block, best first
        return be.to_host(ranked_top_k(be, scores, k)[0]).T

    rankers: dict[str, Callable] = {
        "ours": lambda block: bm25_top(be, device.bm25, device.postings, device.postings_max_weight, block,
                                       index.n_vocab, k)[0],
        "ours_block_before": lambda block: block_top(bm25_block_scores(be, device.bm25, device.postings, block,
                                                                       index.n_vocab)),
        "ours_matrix_before": lambda block: block_top(bm25_scores(be, device.bm25, block, index.n_vocab)),
    }
    rows: dict[str, Any] = {}
    for name, ranker in rankers.items():
        ranker([seeds[0]])
        times = []
        for s in seeds:
            start = time.perf_counter()
            ranker([s])
            times.append(time.perf_counter() - start)
        start = time.perf_counter()
        ids = ranker(seeds)
        rows[name] = {"per_call_ms_median": median_ms(times), "batch_seconds": time.perf_counter() - start}
        if name == "ours":
            ours_top = ids
    model.retrieve([queries[0]], k=k, show_progress=False)
    times = []
    for q in queries:
        start = time.perf_counter()
        model.retrieve([q], k=k, show_progress=False)
        times.append(time.perf_counter() - start)
    start = time.perf_counter()
    theirs, _ = model.retrieve(queries, k=k, show_progress=False)
    rows["bm25s"] = {"per_call_ms_median": median_ms(times), "batch_seconds": time.perf_counter() - start}
    agree = float(np.mean([len(set(a) & set(b)) / k for a, b in zip(ours_top, theirs)]))
    return {"queries": len(queries), "k": k, "rows": rows, "top_k_set_agreement_with_bm25s": agree,
            "bm25s_version": bm25s.__version__}


def cli_wall(index_folder: Path, question: str, vector_cache: Path, runs: int) -> dict[str, float]:
    """Median seconds of `tigrag query` (process start to exit) per method, with the warm vector cache."""
    out = {}
    for label, extra in (("bm25", ["--method", "bm25"]), ("naiverag", ["--method", "naiverag"]),
                         ("tigrag paper", ["--preset", "paper"])):
        command = [sys.executable, "-m", "gpu_tigrag.cli", "query", str(index_folder), question, "-q", "--no-verify",
                   "--vector-cache", str(vector_cache), "--backend", "numpy", *extra]
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
            times.append(time.perf_counter() - start)
            if proc.returncode != 0:
                raise RuntimeError(f"{' '.join(command)} failed:\n{proc.stderr[-2000:]}")
        out[label] = float(np.median(times))
    return out


# -- child: one thread setting ----------------------------------------------------------------------
def child(args: argparse.Namespace) -> None:
    from gpu_tigrag.threads import apply_thread_policy

    policy = apply_thread_policy()
    if os.environ.get("_LATENCY_SPIN"):  # before libgomp loads: its default wait (spin, then sleep)
        os.environ.pop("OMP_WAIT_POLICY", None)
    with tempfile.TemporaryDirectory() as scratch:
        index, questions, encoder, _ = dataset(args.smoke, Path(scratch))
        sample = questions[:args.queries]
        systems = retrievers(index, encoder)
        latency = one_query_latency(systems, sample, encoder, args.batch)
        ppr = {str(t): ppr_rate(index, questions, t, repeat=1 if args.smoke else 2) for t in (1, 2)}
    from threadpoolctl import threadpool_info

    print(json.dumps({"policy": policy.describe(), "latency": latency, "ppr_queries_per_second": ppr,
                      "blas_threads": [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"],
                      "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY", "unset (libgomp default)")}))


def run_child(label: str, args: argparse.Namespace) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("TIGRAG_THREADS", "NUMBA_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS",
                        "OMP_WAIT_POLICY")}
    env.update(SETTINGS[label])
    command = [sys.executable, str(Path(__file__).resolve()), "--child", "--queries", str(args.queries),
               "--batch", str(args.batch)] + (["--smoke"] if args.smoke else [])
    proc = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"child {label} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def merge_rounds(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over a setting's rounds."""
    latency = {system: {key: float(np.median([r["latency"][system][key] for r in rounds]))
                        for key in rounds[0]["latency"][system]} for system in rounds[0]["latency"]}
    ppr = {t: float(np.median([r["ppr_queries_per_second"][t] for r in rounds])) for t in rounds[0]["ppr_queries_per_second"]}
    return {"policy": rounds[0]["policy"], "blas_threads": rounds[0]["blas_threads"],
            "omp_wait_policy": rounds[0]["omp_wait_policy"], "latency": latency, "ppr_queries_per_second": ppr,
            "rounds": len(rounds)}


# -- report -----------------------------------------------------------------------------------------
def markdown(payload: dict[str, Any]) -> str:
    threads = payload["threads"]
    lines = ["# One query at a time, and threads (2Wiki, CPU)", "",
             f"Command: `{payload['command']}`. Machine: {payload['cores']} cores, shared; load average "
             f"{payload['load_before']:.2f} before and {payload['load_after']:.2f} after the run: compare rows of one "
             "run only. Query vectors from a warm vector cache (the encoder is excluded, the cache lookup included; "
             "no text was encoded in the timed passes).", "",
             f"## One-query latency, this process ({payload['queries']} questions, median; batch of {payload['batch']})",
             "", "| system | retrieve([q]) ms (median) | p90 ms | batch q/s | batch ms/query |", "|---|---|---|---|---|"]
    for system, row in payload["latency"].items():
        lines.append(f"| {system} | {row['one_query_ms_median']:.2f} | {row['one_query_ms_p90']:.2f} | "
                     f"{row['batch_queries_per_second']:.1f} | {1e3 / row['batch_queries_per_second']:.2f} |")
    lines += ["", f"## Thread settings (each in its own process, medians of {threads['before']['rounds']} alternating "
              "rounds)", "", "| setting | pools | OMP wait | PPR q/s, 1 numba thread | PPR q/s, 2 numba threads | "
              + " | ".join(f"{s} ms" for s in payload["latency"]) + f" | tigrag paper q/s, blocks of {payload['batch']} |",
              "|---|---|---|---|---|" + "---|" * len(payload["latency"]) + "---|"]
    for label, row in threads.items():
        lines.append(f"| {label} | {row['policy']}; BLAS now {row['blas_threads']} | {row['omp_wait_policy']} | "
                     f"{row['ppr_queries_per_second']['1']:.0f} | {row['ppr_queries_per_second']['2']:.0f} | "
                     + " | ".join(f"{row['latency'][s]['one_query_ms_median']:.2f}" for s in payload["latency"])
                     + f" | {row['latency']['tigrag paper']['batch_queries_per_second']:.1f} |")
    before, after = threads["before"], threads["policy"]
    lines += ["", "Same-run ratios, `before` over `policy` (one-query ms): "
              + ", ".join(f"{s} {before['latency'][s]['one_query_ms_median'] / after['latency'][s]['one_query_ms_median']:.1f}×"
                          for s in payload["latency"])
              + f"; PPR 2 threads over 1 thread: before {before['ppr_queries_per_second']['2'] / before['ppr_queries_per_second']['1']:.2f}, "
              f"policy {after['ppr_queries_per_second']['2'] / after['ppr_queries_per_second']['1']:.2f}.", ""]
    bm = payload["bm25"]
    if bm is None:
        lines += ["(bm25s not installed: no BM25 comparison)", ""]
    else:
        lines += [f"## BM25 against bm25s {bm['bm25s_version']} ({bm['queries']} questions, top-{bm['k']}, same tokens)",
                  "", "| implementation | per call ms (one query, median) | all questions in one call, s |", "|---|---|---|"]
        for name, row in bm["rows"].items():
            lines.append(f"| {name} | {row['per_call_ms_median']:.3f} | {row['batch_seconds']:.3f} |")
        rows = bm["rows"]
        lines += ["", f"Per call, ours / bm25s: {rows['ours']['per_call_ms_median'] / rows['bm25s']['per_call_ms_median']:.2f}× "
                  f"(before: {rows['ours_matrix_before']['per_call_ms_median'] / rows['bm25s']['per_call_ms_median']:.2f}×); "
                  f"per batch: {rows['ours']['batch_seconds'] / rows['bm25s']['batch_seconds']:.2f}×. Top-{bm['k']} sets "
                  f"agree on {100 * bm['top_k_set_agreement_with_bm25s']:.1f}% (both Lucene BM25, k1 = 1.5, b = 0.75).", ""]
    lines += ["## `tigrag query` wall time (process start to exit, median of 3, warm vector cache)", "",
              "| command | seconds |", "|---|---|"]
    for label, seconds in payload["cli_seconds"].items():
        lines.append(f"| {label} | {seconds:.2f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100, help="questions timed one at a time (default 100)")
    parser.add_argument("--rounds", type=int, default=2, help="alternating rounds of each thread setting")
    parser.add_argument("--batch", type=int, default=100, help="block size of the batch column")
    parser.add_argument("--smoke", action="store_true", help="the bundled example, briefly; writes nothing")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        args.queries, args.rounds = min(args.queries, 3), 1
    if args.child:
        return child(args)
    load_before = load_state()
    with tempfile.TemporaryDirectory() as scratch:
        index, questions, encoder, folder = dataset(args.smoke, Path(scratch))
        sample = questions[:args.queries]
        systems = retrievers(index, encoder)
        latency = one_query_latency(systems, sample, encoder, args.batch)  # also warms the disk cache
        print(f"latency: {json.dumps(latency)}", file=sys.stderr, flush=True)
        if args.smoke and importlib.util.find_spec("bm25s") is None:  # a bench dependency (pip install -e '.[bench]')
            print("bm25s is not installed: its section is left out of the smoke run", file=sys.stderr)
            bm25 = None
        else:
            bm25 = bm25_against_bm25s(index, sample if args.smoke else questions, systems["bm25"])
            print(f"bm25: {json.dumps(bm25['rows'])}", file=sys.stderr, flush=True)
        cli = cli_wall(folder, sample[0], encoder.disk.folder, 1 if args.smoke else 3)
        print(f"cli: {json.dumps(cli)}", file=sys.stderr, flush=True)
        rounds: dict[str, list] = {label: [] for label in SETTINGS}
        for _ in range(args.rounds):
            for label in SETTINGS:
                rounds[label].append(run_child(label, args))
                print(f"{label}: {json.dumps(rounds[label][-1]['ppr_queries_per_second'])}", file=sys.stderr, flush=True)
    payload = {"dataset": "example (smoke)" if args.smoke else "2wikimultihopqa", "queries": len(sample),
               "batch": args.batch, "cores": len(os.sched_getaffinity(0)),
               "command": "python bench/latency.py " + " ".join(sys.argv[1:]),
               "load_before": load_before, "load_after": load_state(), "latency": latency, "bm25": bm25,
               "cli_seconds": cli, "threads": {label: merge_rounds(r) for label, r in rounds.items()}}
    text = markdown(payload)
    if args.smoke:
        print(text)
        return
    write_results("latency", payload, text)


if __name__ == "__main__":
    main()
