"""The exact dense first stage (retrieve/first_stage.py: FlatSearch, the one NaiveRAG ranks with and
TIGRAG's dense fallback and fused list ask) against faiss `IndexFlatIP` over the same vectors, batched
(every question in one call) and one question per call, top-k identical.

Vectors: the chunk vectors of an index (default: the 2Wiki bench index) and its 2Wiki questions'
vectors from the index's encoder (encoded once, before any clock starts). Both sides run with this
process's thread policy (numba and faiss's OpenMP on the machine's cores). Each measurement is the
median of `--rounds` rounds, the two sides alternating within a round.

Usage: python bench/first_stage.py [--index DIR] [--rounds 7] [--k 10] [--smoke]
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index", type=Path, help="index folder (default: the 2Wiki bench index)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    import faiss

    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.ops.dense_dot import RowTiles
    from gpu_tigrag.retrieve.first_stage import FlatSearch
    from gpu_tigrag.threads import current_policy

    if args.smoke:
        args.rounds = 2
    embeddings, questions, where = inputs(args.index, args.smoke)
    faiss.omp_set_num_threads(current_policy().numba)  # the same cores as the engine's kernels
    flat = FlatSearch(get_backend("numpy"), embeddings, RowTiles(embeddings))  # as first_stage(device) makes it
    index = faiss.IndexFlatIP(embeddings.shape[1])
    index.add(embeddings)
    k = args.k

    def ours_batch():
        return flat.search(questions, k)

    def faiss_batch():
        return index.search(questions, k)

    def ours_each():
        for row in questions:
            flat.search(row[None, :], k)

    def faiss_each():
        for row in questions:
            index.search(row[None, :], k)

    for fn in (ours_batch, faiss_batch, ours_each, faiss_each):
        fn()  # warm-up: compilation, thread pools
    times: dict[str, list[float]] = {name: [] for name in ("ours_batch", "faiss_batch", "ours_each", "faiss_each")}
    for r in range(args.rounds):
        order = list(times) if r % 2 == 0 else list(reversed(times))
        for name in order:
            times[name] += median_seconds(locals()[name], 1)
    ids, _ = flat.search(questions, k)
    _, faiss_ids = faiss_batch()
    same = float(np.mean([set(ids[:, q].tolist()) == set(faiss_ids[q].tolist()) for q in range(len(questions))]))
    n = len(questions)
    med = {name: statistics.median(values) for name, values in times.items()}
    payload = {"command": " ".join(["python bench/first_stage.py", *sys.argv[1:]]), "vectors": where,
               "chunks": int(embeddings.shape[0]), "dim": int(embeddings.shape[1]), "questions": n, "k": k,
               "rounds": args.rounds, "threads": current_policy().numba, "faiss_threads": faiss.omp_get_max_threads(),
               "seconds": times, "median_seconds": med, "same_top_k": same,
               "batch_ratio": med["ours_batch"] / med["faiss_batch"], "per_call_ratio": med["ours_each"] / med["faiss_each"]}
    lines = ["# The exact dense first stage against faiss flat", "",
             f"`{payload['command']}` — {payload['chunks']:,} chunk vectors × {payload['dim']} of {where}, {n} "
             f"questions, top-{k}; medians of {args.rounds} alternating rounds; numba {payload['threads']} threads, "
             f"faiss {payload['faiss_threads']} OpenMP threads.", "",
             "| how | FlatSearch ms/question | faiss IndexFlatIP ms/question | FlatSearch ÷ faiss (time) |",
             "|---|---|---|---|",
             f"| all questions in one call | {1e3 * med['ours_batch'] / n:.3f} | {1e3 * med['faiss_batch'] / n:.3f} | "
             f"{payload['batch_ratio']:.2f} |",
             f"| one question per call | {1e3 * med['ours_each'] / n:.3f} | {1e3 * med['faiss_each'] / n:.3f} | "
             f"{payload['per_call_ratio']:.2f} |", "",
             f"Same top-{k} set as faiss for {100 * same:.1f}% of the questions (FlatSearch's cosines are each one "
             "k-ordered float32 sum, the same bits in any batch; faiss's come from sgemm/sgemv, so exact ties may "
             "order differently)."]
    print("\n".join(lines))
    if not args.smoke:
        write_results("first_stage", payload, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
