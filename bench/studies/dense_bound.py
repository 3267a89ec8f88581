"""How far exact dense search can scale on this CPU (issue 33 item 4): NaiveRAG, Hybrid and SpectRAG are asked
for q/s at 100,000 passages ≥ 0.5 × q/s at 10,000, and each holds an exact dense first stage (FlatSearch) whose
work is chunks × dimensions per query.

Per size (bench/scale.py's stand-in indexes in .cache/bench/scale_N, read-only), in one process:
1. the machine's float32 limit: a 4096² × 4096 product on every core (the BLAS at its best shape);
2. FlatSearch.search of 256 stand-in queries (k 10, the engine's path: a BLAS screen, then the near-ties
   re-scored in k order) and its screening product alone, best of 3: GFLOP/s and their share of (1);
3. the floor: the product's FLOPs at (1)'s rate, per query.
Then NaiveRAG's q/s through `tigrag bench` (a fresh process per size, 1000 queries, batch 256), and the rate it
would reach at the largest size if its search cost only the floor while everything else cost what it costs at
the smallest size: the bound on its ratio with exact search on this machine.

Usage: python bench/studies/dense_bound.py [--sizes 10000 100000] [--smoke]
Writes bench/results/dense_bound.{json,md} (not with --smoke: 1,000 passages, built in a scratch folder).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, cpu_name, write_results

QUERIES = 256
K = 10


def best_of(fn, repeats: int = 3) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - start)
    return best


def float32_limit() -> float:
    """GFLOP/s of a square float32 product on every core."""
    from threadpoolctl import threadpool_limits

    a = np.random.default_rng(0).random((4096, 4096), dtype=np.float32)
    with threadpool_limits(os.cpu_count() or 1):
        return 2 * 4096 ** 3 / best_of(lambda: a @ a) / 1e9


def search_figures(index_dir: Path) -> dict[str, Any]:
    """FlatSearch and its screening product on the index's vectors, 256 of the benchmark's queries."""
    from bench.query_scale import synthetic_queries
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.encoders import index_encoder_config, load_encoder
    from gpu_tigrag.index.store import load_index
    from gpu_tigrag.retrieve import first_stage
    from gpu_tigrag.threads import apply_thread_policy, wide_blas

    apply_thread_policy(None, force=True)
    index = load_index(index_dir)
    rows = np.ascontiguousarray(index.embeddings, dtype=np.float32)
    encoder = load_encoder(index_encoder_config(index))
    vectors = np.ascontiguousarray(encoder.encode(synthetic_queries(len(index.passage_ids), QUERIES), kind="query"),
                                   dtype=np.float32)
    flat = first_stage.FlatSearch(get_backend("numpy"), rows)
    search = best_of(lambda: flat.search(vectors, K))
    block = first_stage.SCREEN_BLOCK_ROWS
    out = np.empty(QUERIES * block, dtype=np.float32)

    def product() -> None:
        with wide_blas():
            for start in range(0, rows.shape[0], block):
                part = rows[start:start + block]
                np.matmul(vectors, part.T, out=out[:QUERIES * part.shape[0]].reshape(QUERIES, part.shape[0]))

    flops = 2.0 * rows.shape[0] * rows.shape[1] * QUERIES
    return {"n_passages": len(index.passage_ids), "chunks": int(rows.shape[0]), "dim": int(rows.shape[1]),
            "search_s": search,
            "product_s": best_of(product), "flops": flops}


def naive_rate(index_dir: Path, n_passages: int, scratch: Path) -> float:
    """NaiveRAG's q/s through `tigrag bench` (bench/method_scale.py's queries and batch)."""
    from bench.method_scale import bench, query_file

    queries = query_file(n_passages, 1000, scratch)
    return bench(index_dir, queries, ["NaiveRAG"], 256, None)[0]["batches"][0]["queries_per_second"]


def render(payload: dict[str, Any]) -> str:
    limit = payload["float32_limit_gflops"]
    lines = [
        "# Exact dense search against corpus size: the bound on this CPU (issue 33, item 4)",
        "",
        f"Command: `{payload['command']}`. CPU: {payload['cpu']}, {payload['cores']} cores. Stand-in indexes "
        "(bench/scale.py, `hashing:256` vectors), 256 of the benchmark's queries, k 10; the search is FlatSearch "
        "(a BLAS screen, near-ties re-scored in k order: ops/screen.py), best of 3; the product is its screening "
        "product alone (the same blocks, into one buffer). The float32 limit is a 4096² × 4096 product on every "
        f"core: **{limit:,.0f} GFLOP/s**.",
        "",
        "| passages | chunks | search ms / query | product ms / query | search GFLOP/s | product GFLOP/s | product ÷ limit "
        "| floor ms / query | NaiveRAG q/s (tigrag bench) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in payload["sizes"]:
        per = 1e3 / QUERIES
        lines.append(f"| {row['passages']:,} | {row['chunks']:,} | {row['search_s'] * per:.3f} | "
                     f"{row['product_s'] * per:.3f} | {row['flops'] / row['search_s'] / 1e9:,.0f} | "
                     f"{row['flops'] / row['product_s'] / 1e9:,.0f} | {row['flops'] / row['product_s'] / 1e9 / limit:.2f} | "
                     f"{row['flops'] / limit / 1e9 * per:.3f} | {row['naive_qps']:,.1f} |")
    first, last = payload["sizes"][0], payload["sizes"][-1]
    other = 1.0 / first["naive_qps"] - first["search_s"] / QUERIES  # per query, all but the search, at the smallest
    floor = last["flops"] / limit / 1e9 / QUERIES
    bound = 1.0 / (other + floor)
    lines += [
        "",
        f"NaiveRAG at {first['passages']:,} passages spends {other * 1e3:.3f} ms per query outside the search. If "
        f"that stayed and the search at {last['passages']:,} passages ran at the float32 limit ({floor * 1e3:.3f} ms "
        f"per query), NaiveRAG would answer {bound:,.0f} q/s there: **{bound / first['naive_qps']:.2f}** of its "
        f"{first['passages']:,}-passage rate (measured: {last['naive_qps'] / first['naive_qps']:.2f}). "
        + ("With exact search the target (0.5) is out of reach on this machine whatever the code: the search's work "
           "grows with the chunks, and its product already runs at the share of the limit shown above. Hybrid and "
           "SpectRAG add their own work (BM25 lists, candidates) to the same search, so their bound is lower still."
           if bound / first["naive_qps"] < 0.5 else
           "At these sizes the bound does not rule the target (0.5) out."),
        "",
        "Approximate search does not lift it in batches of 256 either (bench/results/ann.md, the same stand-ins): at "
        "128,639 chunks the fastest ANN setting measured, HNSW at ef_search 32, answered 4,040 q/s with recall@10 "
        "0.26, and IVF at the default nprobe 128 ran at 0.79× exact search's rate. On a GPU the product is a "
        "cuBLAS GEMM at tens of TFLOP/s, where the same search costs microseconds per query: the GPU check's scale "
        "section is where these methods can meet the ratio.",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    sizes = [1_000] if args.smoke else args.sizes
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        limit = float32_limit()
        for n in sizes:
            index_dir = CACHE / f"scale_{n}" if not args.smoke else Path(scratch) / "index"
            if not (index_dir / "manifest.json").is_file():
                from bench.scale import index_command, synth

                subprocess.run(index_command(synth(n), index_dir, 8192), check=True)
            row = {"passages": n, **search_figures(index_dir)}
            row["naive_qps"] = naive_rate(index_dir, row.pop("n_passages"), Path(scratch))
            rows.append(row)
            print(f"{n:,}: search {row['search_s'] * 1e3:.1f} ms, product {row['product_s'] * 1e3:.1f} ms per "
                  f"{QUERIES} queries; NaiveRAG {row['naive_qps']:,.1f} q/s", file=sys.stderr, flush=True)
    payload = {"command": " ".join(["python bench/studies/dense_bound.py", *sys.argv[1:]]), "cpu": cpu_name(),
               "cores": os.cpu_count(), "float32_limit_gflops": limit, "sizes": rows}
    markdown = render(payload)
    print(markdown)
    if not args.smoke:
        write_results("dense_bound", payload, markdown)
    return 0


if __name__ == "__main__":
    sys.exit(main())
