"""The GPU check: parity tests and throughput on one NVIDIA GPU, each GPU figure next to the
CPU figure from the same code. Run through bench/gpu_check.sh (see bench/README.md).

Sections (each recorded, an error in one does not hide the others; exit status 1 if any failed):
  parity    pytest's CuPy cases and the kernel checks
  indexing  graph + BM25 of synthetic Zipf corpora generated on the device (100k and 1M chunks)
  pair_count  counting those corpora's window pair keys: sort (xp.unique) vs hash (atomics kernel)
  ppr       batched PPR queries/s on the 2Wiki graph at B = 256, 1024, 4096, and bytes/s
  engine    end-to-end 2-hop retrieval queries/s on the 2Wiki index, encoder excluded
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from gpu_tigrag.backend import Backend, get_backend  # noqa: E402
from gpu_tigrag.config import BM25Config, PPRConfig, RetrievalConfig  # noqa: E402

COPY_BANDWIDTH_H200 = 4.3e12  # bytes/s, device-to-device copy measured on an H200


def synchronize(be: Backend) -> None:
    if be.is_gpu:
        be.xp.cuda.Stream.null.synchronize()


def timed(be: Backend, fn: Callable[[], Any], repeat: int = 1) -> tuple[float, Any]:
    fn()  # warm-up: kernel compilation, memory pool
    synchronize(be)
    start = time.perf_counter()
    for _ in range(repeat):
        result = fn()
    synchronize(be)
    return (time.perf_counter() - start) / repeat, result


def device_info() -> dict[str, Any]:
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(0)
    free, total = cupy.cuda.Device(0).mem_info
    import numba

    return {"name": props["name"].decode() if isinstance(props["name"], bytes) else props["name"],
            "memory_total_gib": total / 2**30, "memory_free_gib": free / 2**30, "cupy": cupy.__version__,
            "numba": numba.__version__, "python": platform.python_version(), "cpus": os.cpu_count()}


def run_parity(out: Path) -> dict[str, Any]:
    tests = ["tests/test_graph_bm25.py", "tests/test_ppr.py", "tests/test_scoring.py", "tests/test_multihop.py",
             "tests/test_kernels.py", "tests/test_pair_count.py", "tests/test_add.py",
             "tests/test_stream.py::test_streaming_build_equals_in_memory_build"]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", *tests], cwd=ROOT, capture_output=True,
                          text=True, timeout=600)
    (out / "parity_pytest.txt").write_text(proc.stdout + proc.stderr)
    summary = [line for line in proc.stdout.splitlines() if " passed" in line or " failed" in line]
    return {"returncode": proc.returncode, "summary": summary[-1] if summary else proc.stdout[-500:],
            "ok": proc.returncode == 0}


def synthetic_tokens(xp: Any, n_chunks: int, n_vocab: int, mean_length: int, seed: int) -> tuple[Any, Any]:
    """Token-id CSR of a Zipf(1.1) corpus generated on the backend (no text, no host round trip)."""
    rng = xp.random.RandomState(seed)
    lengths = xp.clip(rng.poisson(mean_length, n_chunks), 1, None).astype(xp.int64)
    indptr = xp.zeros(n_chunks + 1, dtype=xp.int64)
    indptr[1:] = xp.cumsum(lengths)
    weights = 1.0 / xp.arange(1, n_vocab + 1, dtype=xp.float64) ** 1.1
    cdf = xp.cumsum(weights)
    cdf /= cdf[-1]
    ids = xp.searchsorted(cdf, rng.random_sample(int(indptr[-1]))).astype(xp.int32)
    return indptr, xp.minimum(ids, n_vocab - 1)


#: backends compared: the device one first; `--smoke` on a CPU machine runs "numpy" twice
BACKENDS = ["cupy", "numpy"]


SYNTH_VOCAB, SYNTH_MEAN_LENGTH = 200_000, 60


def synthetic_corpora(sizes: list[int], cpu_max: int):
    """(backend name, backend, chunks, indptr, ids) per size and backend; the CPU only up to `cpu_max`."""
    for n in sizes:
        for position, name in enumerate(BACKENDS):
            if position == 1 and n > cpu_max:
                continue
            be = get_backend(name)
            yield (name, be, n, *synthetic_tokens(be.xp, n, SYNTH_VOCAB, SYNTH_MEAN_LENGTH, seed=0))


def bench_indexing(sizes: list[int], cpu_max: int) -> list[dict[str, Any]]:
    from gpu_tigrag.index.bm25 import bm25_matrix
    from gpu_tigrag.index.graph import cooccurrence_graph

    rows = []
    for name, be, n, indptr, ids in synthetic_corpora(sizes, cpu_max):

        def build():
            graph = cooccurrence_graph(be, indptr, ids, SYNTH_VOCAB, 4)
            bm25 = bm25_matrix(be, indptr, ids, SYNTH_VOCAB, BM25Config())
            return graph.nnz, bm25.nnz

        seconds, (graph_nnz, bm25_nnz) = timed(be, build)
        rows.append({"backend": name, "chunks": n, "tokens": int(indptr[-1]), "seconds": seconds,
                     "chunks_per_second": n / seconds, "graph_nnz": int(graph_nnz), "bm25_nnz": int(bm25_nnz)})
        print(f"indexing {name} {n:,} chunks: {seconds:.2f} s", file=sys.stderr, flush=True)
    return rows


def bench_pair_count(sizes: list[int], cpu_max: int) -> dict[str, Any]:
    """bench/pair_count.py's comparison on the indexing section's corpora (all their keys).

    "ok" is false when the two methods disagree, which fails the section but keeps the figures.
    """
    from pair_count import compare  # bench/pair_count.py (it imports this file's helpers in turn)

    from gpu_tigrag.index.graph import window_pair_keys

    rows = []
    for _name, be, n, indptr, ids in synthetic_corpora(sizes, cpu_max):
        keys = window_pair_keys(be, indptr, ids, SYNTH_VOCAB, 4)
        rows.append({**compare(be, keys, repeat=1), "chunks": n})
            print(f"pair_count {name} {n:,} chunks: hash/sort {rows[-1]['hash_over_sort']:.2f}", file=sys.stderr,
                  flush=True)
            del indptr, ids, keys
            be.release_cached_memory()
    return {"ok": all(row["equal"] for row in rows), "rows": rows}


def bench_ppr(index, seeds: list[np.ndarray], batches: list[int], cpu_max: int) -> list[dict[str, Any]]:
    from gpu_tigrag.graph.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma

    config = PPRConfig()
    rows = []
    for position, name in enumerate(BACKENDS):
        be = get_backend(name)
        transition = TransitionMatrix.from_adjacency(be, index.graph)
        nnz, n = transition.matrix.nnz, index.n_vocab
        for b in batches:
            if position == 1 and b > cpu_max:
                continue
            block = [seeds[i % len(seeds)] for i in range(b)]

            def run():
                scores, sweeps = personalized_pagerank(be, transition, seed_matrix(be, block, n), config)
                top_gamma(be, scores, config.top_gamma)
                return sweeps

            seconds, sweeps = timed(be, run, repeat=3)
            # bytes one sweep must move at least: CSR once, x gathered per nonzero, v read, out written
            sweep_bytes = nnz * 8 + (n + 1) * 4 + nnz * b * 4 + 3 * n * b * 4
            rows.append({"backend": name, "batch": b, "seconds": seconds, "sweeps": int(sweeps),
                         "queries_per_second": b / seconds,
                         "bytes_per_second": sweep_bytes * sweeps / seconds,
                         "fraction_of_copy_bandwidth": sweep_bytes * sweeps / seconds / COPY_BANDWIDTH_H200})
            print(f"ppr {name} B={b}: {b / seconds:,.0f} q/s", file=sys.stderr, flush=True)
    return rows


def bench_engine(index, queries: list[str], encoder, batches: list[int], cpu_max: int) -> list[dict[str, Any]]:
    from gpu_tigrag.retrieve.retriever import Retriever

    rows = []
    for position, name in enumerate(BACKENDS):
        for b in batches:
            if position == 1 and b > cpu_max:
                continue
            workload = [queries[i % len(queries)] for i in range(max(b, len(queries)))]
            retriever = Retriever(index, RetrievalConfig(batch_size=b, memory_budget_mb=64_000), encoder=encoder,
                                  backend=name)
            retriever.retrieve(workload[:b])  # warm-up
            retriever.timer.seconds.clear()
            start = time.perf_counter()
            retriever.retrieve(workload)
            synchronize(retriever.be)
            elapsed = time.perf_counter() - start
            encode = retriever.timer.seconds.get("encode", 0.0)
            rows.append({"backend": name, "batch": b, "effective_batch": retriever.batch_size(),
                         "queries": len(workload), "seconds": elapsed, "encoder_lookup_seconds": encode,
                         "queries_per_second_without_encoder": len(workload) / (elapsed - encode),
                         "stage_seconds": dict(retriever.timer.seconds)})
            print(f"engine {name} B={b}: {len(workload) / (elapsed - encode):,.0f} q/s", file=sys.stderr, flush=True)
    return rows


REPORT_FILE = "gpu_check.json"


def section(report: dict[str, Any], name: str, fn: Callable[[], Any], out: Path) -> None:
    """Run one section; the report is rewritten after each, so a run stopped by its time limit
    keeps what it had measured."""
    start = time.perf_counter()
    try:
        report[name] = fn()
    except Exception as exc:  # recorded, never hidden: the exit status says a section failed
        report[name] = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        print(f"section {name} FAILED: {exc}", file=sys.stderr, flush=True)
    report.setdefault("section_seconds", {})[name] = time.perf_counter() - start
    (out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "gpu")
    parser.add_argument("--index", type=Path, default=ROOT / ".cache" / "bench" / "index_2wikimultihopqa")
    parser.add_argument("--inputs", type=Path, default=ROOT / ".cache" / "bench" / "gpu_inputs")
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000])
    parser.add_argument("--batches", type=int, nargs="+", default=[256, 1024, 4096])
    parser.add_argument("--cpu-max-chunks", type=int, default=100_000, help="largest synthetic corpus also run on CPU")
    parser.add_argument("--cpu-max-batch", type=int, default=1024, help="largest batch also run on CPU")
    parser.add_argument("--smoke", action="store_true", help="CPU-only dry run of this script (numpy for both)")
    args = parser.parse_args()
    if args.smoke:
        BACKENDS[0] = "numpy"
    args.out.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"started": time.strftime("%Y-%m-%d %H:%M:%S")}
    if not args.smoke:
        section(report, "device", device_info, args.out)
    section(report, "parity", lambda: run_parity(args.out), args.out)
    section(report, "indexing", lambda: bench_indexing(args.sizes, args.cpu_max_chunks), args.out)
    section(report, "pair_count", lambda: bench_pair_count(args.sizes, args.cpu_max_chunks), args.out)

    def load():
        from gpu_tigrag.index.embed import PrecomputedEncoder
        from gpu_tigrag.index.store import load_index

        index = load_index(args.index)
        queries = json.loads((args.inputs / "queries.json").read_text())
        return index, queries, PrecomputedEncoder.load(args.inputs / "vectors.npz")

    loaded: dict[str, Any] = {}
    section(report, "load_2wiki", lambda: loaded.setdefault("v", load()) and {"ok": True}, args.out)
    if "v" in loaded:
        index, queries, encoder = loaded["v"]
        from gpu_tigrag.retrieve.retriever import Retriever

        seeds = Retriever(index, RetrievalConfig(), encoder=encoder, backend="numpy").query_seeds(queries)
        section(report, "ppr", lambda: bench_ppr(index, [s for s in seeds if len(s)], args.batches, args.cpu_max_batch),
                args.out)
        section(report, "engine", lambda: bench_engine(index, queries, encoder, args.batches, args.cpu_max_batch),
                args.out)
    report["finished"] = time.strftime("%Y-%m-%d %H:%M:%S")
    (args.out / REPORT_FILE).write_text(json.dumps(report, indent=2, default=str) + "\n")
    failed = [k for k, v in report.items() if isinstance(v, dict) and ("error" in v or v.get("ok") is False)]
    print(json.dumps({k: v for k, v in report.items() if k != "section_seconds"}, indent=1, default=str)[:6000])
    print(f"wrote {args.out / REPORT_FILE}; failed sections: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
