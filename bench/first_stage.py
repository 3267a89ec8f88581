"""The exact dense first stage (retrieve/first_stage.py: FlatSearch, the one NaiveRAG ranks with and
TIGRAG's dense fallback and fused list ask) against its plain scan (`FlatSearch.scan`: every cosine by
`query_dot`, what FlatSearch did before it screened with a BLAS product, ops/screen.py) and faiss
`IndexFlatIP` over the same vectors, batched (every question in one call) and one question per call.
FlatSearch's top k must be the scan's, ids and cosines bit for bit (checked, and reported).

Vectors: the chunk vectors of an index (default: the 2Wiki bench index) and its 2Wiki questions'
vectors from the index's encoder (encoded once, before any clock starts); with `--rows N ...`, also N
random unit vectors of the same dimension per size (a corpus of that size; the same questions). All sides
run with this process's thread policy (numba and faiss's OpenMP on the machine's cores). Each measurement
is the median of `--rounds` rounds, the sides alternating within a round.

Usage: python bench/first_stage.py [--index DIR] [--rows 131072 ...] [--rounds 7] [--k 10] [--smoke]
Writes bench/results/first_stage.{json,md} (not with --smoke).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import DATA, DATASETS, ROOT, dataset_index, write_results


def inputs(index_dir: Path | None, smoke: bool) -> tuple[np.ndarray, np.ndarray, str]:
    """(chunk vectors, question vectors, description)."""
    from gpu_tigrag.encoders import index_encoder_config, load_encoder
    from gpu_tigrag.encoders.base import QUERY
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.index.store import load_index

    if smoke:
        from gpu_tigrag.config import EncoderConfig, IndexConfig
        from gpu_tigrag.corpus import load_corpus
        from gpu_tigrag.index.build import build_index

        config = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
        index = build_index(load_corpus(ROOT / "examples" / "corpus.json"), config,
                            entity_extractor=lambda texts: [[] for _ in texts])
        texts = [q.text for q in load_queries(ROOT / "examples" / "questions.json")]
        where = "the bundled example (stand-in encoder)"
    else:
        index = load_index(index_dir) if index_dir else dataset_index("2wikimultihopqa")
        texts = [q.text for q in load_queries(DATA / DATASETS["2wikimultihopqa"][1])]
        where = f"{index_dir or '2Wiki bench index'} ({index.encoder_name})"
    encoder = load_encoder(index_encoder_config(index))
    vectors = np.ascontiguousarray(encoder.encode(texts, kind=QUERY), dtype=np.float32)
    return np.ascontiguousarray(index.embeddings, dtype=np.float32), vectors, where


def median_seconds(fn: Callable[[], Any], rounds: int) -> list[float]:
    out = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        out.append(time.perf_counter() - start)
    return out


def measure(embeddings: np.ndarray, questions: np.ndarray, k: int, rounds: int, per_call: int) -> dict[str, Any]:
    """Seconds of each side, batched and one question per call (the first `per_call` questions), and
    whether FlatSearch's answer is the scan's bit for bit."""
    import faiss

    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.ops.dense_dot import RowTiles
    from gpu_tigrag.retrieve.first_stage import FlatSearch

    flat = FlatSearch(get_backend("numpy"), embeddings, RowTiles(embeddings))  # as first_stage(device) makes it
    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(embeddings)
    single = questions[:per_call]
    sides: dict[str, Callable[[], Any]] = {
        "ours_batch": lambda: flat.search(questions, k),
        "scan_batch": lambda: flat.scan(questions, k),
        "faiss_batch": lambda: index.search(questions, k),
        "ours_each": lambda: [flat.search(row[None, :], k) for row in single],
        "scan_each": lambda: [flat.scan(row[None, :], k) for row in single],
        "faiss_each": lambda: [index.search(row[None, :], k) for row in single],
    }
    for fn in sides.values():
        fn()  # warm-up: compilation, thread pools, the tiles
    times: dict[str, list[float]] = {name: [] for name in sides}
    for r in range(rounds):
        for name in (list(sides) if r % 2 == 0 else list(reversed(sides))):
            times[name] += median_seconds(sides[name], 1)
    ids, vals = flat.search(questions, k)
    scan_ids, scan_vals = flat.scan(questions, k)
    identical = bool(np.array_equal(ids, scan_ids) and np.array_equal(vals, scan_vals))
    each_identical = all(
        all(np.array_equal(a, b) for a, b in zip(flat.search(row[None, :], k), flat.scan(row[None, :], k)))
        for row in single)
    _, faiss_ids = index.search(questions, k)
    same = float(np.mean([set(ids[:, q].tolist()) == set(faiss_ids[q].tolist()) for q in range(len(questions))]))
    med = {name: statistics.median(values) for name, values in times.items()}
    return {"chunks": int(embeddings.shape[0]), "dim": int(embeddings.shape[1]), "questions": len(questions),
            "per_call_questions": len(single), "seconds": times, "median_seconds": med,
            "identical_to_scan": identical and each_identical, "same_top_k_as_faiss": same}


def random_rows(n: int, dim: int, seed: int = 0) -> np.ndarray:
    """n random unit vectors (a corpus of that size for the search's cost; its cosines are not real ones)."""
    rows = np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: the 2Wiki bench index)")
    parser.add_argument("--rows", type=int, nargs="*", default=[], help="also random corpora of these sizes")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--per-call", type=int, default=100, help="questions searched one per call (time)")
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import faiss

    from gpu_tigrag.threads import current_policy

    if args.smoke:
        args.rounds, args.rows, args.per_call = 2, [3000], 5
    embeddings, questions, where = inputs(args.index, args.smoke)
    faiss.omp_set_num_threads(current_policy().numba)  # the same cores as the engine's kernels
    runs = [dict(measure(embeddings, questions, args.k, args.rounds, args.per_call), vectors=where)]
    for n in args.rows:
        runs.append(dict(measure(random_rows(n, embeddings.shape[1]), questions, args.k, args.rounds, args.per_call),
                         vectors=f"{n:,} random unit vectors"))
    payload = {"command": " ".join(["python bench/first_stage.py", *sys.argv[1:]]), "k": args.k,
               "rounds": args.rounds, "threads": current_policy().numba, "faiss_threads": faiss.omp_get_max_threads(),
               "runs": runs}
    lines = ["# The exact dense first stage: FlatSearch against its plain scan and faiss flat", "",
             f"`{payload['command']}` — top-{args.k}; medians of {args.rounds} alternating rounds; numba "
             f"{payload['threads']} threads, faiss {payload['faiss_threads']} OpenMP threads; ms per question.", "",
             "FlatSearch screens with a BLAS product and re-scores the candidates near each query's cut in k order "
             "(ops/screen.py) from 2,048 chunks and 256 chunks per result asked, for 8 queries a call or more; "
             "the plain scan computes every cosine in k order (`query_dot`). Both give the same top k, ids and "
             "cosines bit for bit (the \"identical\" column checks it on every question of the run).", "",
             "| vectors | chunks | how | FlatSearch | plain scan | faiss IndexFlatIP | scan ÷ FlatSearch | "
             "FlatSearch ÷ faiss (time) | identical to the scan | same top-k set as faiss |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for run in runs:
        med = run["median_seconds"]
        for how, key, count in (("all questions in one call", "batch", run["questions"]),
                                ("one question per call", "each", run["per_call_questions"])):
            ours, scan, flat = (1e3 * med[f"{side}_{key}"] / count for side in ("ours", "scan", "faiss"))
            lines.append(f"| {run['vectors']} | {run['chunks']:,} | {how} ({count}) | {ours:.3f} | {scan:.3f} | "
                         f"{flat:.3f} | {scan / ours:.2f} | {ours / flat:.2f} | "
                         f"{'yes' if run['identical_to_scan'] else 'NO'} | {100 * run['same_top_k_as_faiss']:.1f}% |")
    lines += ["", "faiss's cosines come from sgemm/sgemv, whose bits follow the batch, so its exact ties may order "
              "differently; FlatSearch's are each one k-ordered float32 sum, the same bits in any batch."]
    print("\n".join(lines))
    if not args.smoke:
        write_results("first_stage", payload, "\n".join(lines))
    return 0 if all(run["identical_to_scan"] for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
