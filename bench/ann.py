"""The dense first stage, exact against ANN (issue 24 item 3): what `ann.kind`, `ann.min_chunks` and
`dense.nprobe` / `dense.ef_search` default to, and why.

1. Quality on the evaluation sets: NaiveRAG's R@2/@5/@10 on 2Wiki (dev 499) and MuSiQue-100 with exact
   search and with each ANN (IVF, HNSW) at the default query setting, forced onto these small indexes
   (below `ann.min_chunks` they hold none by default); the top-10 overlap of the two rankings.
2. Scale on synthetic corpora (the stand-in vectors `hashing:256` of .cache/bench/scale_N, read-only):
   per size, exact search and the IVF ANN at several `nprobe` (HNSW where asked): build seconds, bytes of
   the ANN file against the vectors', recall@10 of the ANN against exact search (overlap of the top 10),
   queries/s of both for batches of 1 and 256 queries, measured side by side in the same run.

Queries of the synthetic corpora are words 3-9 of the first passages' texts (as bench/scale.py).
Usage: python bench/ann.py [--datasets ...] [--sizes 100000 300000 1000000] [--subsets 30000]
       [--hnsw-sizes 100000] [--queries 1000] [--smoke]
Writes bench/results/ann.{json,md} (not with --smoke, which runs a small synthetic set only).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, dataset_index, dataset_queries, write_results

from gpu_tigrag.backend import get_backend
from gpu_tigrag.config import AnnConfig, DenseSearchConfig, RetrievalConfig
from gpu_tigrag.index.ann import build_ann
from gpu_tigrag.retrieve.first_stage import AnnSearch, FlatSearch

NUMPY = get_backend("numpy")
KINDS = ("ivf", "hnsw")
NPROBES = (16, 32, 64, 128, 256)
EF_SEARCHES = (32, 64, 128, 256)
ONE_QUERY_RUNS = 32  # one-query searches timed per system (exact search at 1M takes ~0.1-0.3 s each)


def ann_bytes(ann: Any) -> int:
    """Bytes of the ANN's file (FAISS's format, as the index stores it)."""
    import faiss

    size = [0]

    def count(data: bytes) -> int:
        size[0] += len(data)
        return len(data)

    writer = faiss.PyCallbackIOWriter(count)
    faiss.write_index(ann.faiss_index(), writer)
    del writer
    return size[0]


def overlap(ids: np.ndarray, truth: np.ndarray) -> float:
    """Mean share of each query's exact top-k (rows of `truth`) that `ids` holds."""
    return float(np.mean([len(set(a) & set(b)) / len(b) for a, b in zip(ids, truth)]))


def queries_per_second(search: Any, queries: np.ndarray, batch: int, k: int = 10, limit: int | None = None) -> float:
    """Queries/s of `search` over `queries` in batches of `batch` (at most `limit` queries), after a warm-up."""
    queries = queries[:limit] if limit else queries
    search.search(queries[:batch], k)
    start = time.perf_counter()
    for first in range(0, len(queries), batch):
        search.search(queries[first:first + batch], k)
    return len(queries) / (time.perf_counter() - start)


# ---- 1. quality on the evaluation sets ------------------------------------------------------------

def dataset_quality(name: str) -> dict[str, Any]:
    from gpu_tigrag.evaluate.experiment import Experiment, query_dataset

    index = dataset_index(name)
    experiment = Experiment(index, query_dataset(name, dataset_queries(name)), backend="numpy")
    exact = experiment.run_config("NaiveRAG exact", RetrievalConfig(method="naiverag",
                                                                     dense=DenseSearchConfig(search="exact")))
    rows = {"exact": {**experiment.report(exact)["metrics"], "seconds": exact.seconds}}
    exact_top = [r.chunk_ids[:10] for r in exact.results]
    for kind in KINDS:
        ann = build_ann(index.embeddings, AnnConfig(kind=kind))
        with_ann = dataclasses.replace(index, ann=ann)
        for value in (NPROBES if kind == "ivf" else EF_SEARCHES):
            key = "nprobe" if kind == "ivf" else "ef_search"
            config = RetrievalConfig(method="naiverag", dense=DenseSearchConfig(**{key: value}))
            run = experiment.run_config(f"NaiveRAG {kind} {key} {value}", config, index=with_ann)
            metrics = experiment.report(run)["metrics"]
            rows[f"{kind} {key} {value}"] = {
                **metrics, "kind": kind, key: value, "seconds": run.seconds, "build_seconds": ann.seconds,
                "bytes": ann_bytes(ann), "params": ann.params,
                "top10_overlap": overlap([r.chunk_ids[:10] for r in run.results], exact_top)}
    for row in rows.values():
        row.pop("by_type", None)
    return {"chunks": index.n_chunks, "dim": int(index.embeddings.shape[1]), "queries": len(exact.results),
            "systems": rows}


# ---- 2. scale on synthetic corpora ----------------------------------------------------------------

def synthetic_vectors(size: int, rows: int | None, n_queries: int) -> tuple[np.ndarray, np.ndarray, str] | None:
    """(passage vectors, query vectors, encoder) of the synthetic index of `size` passages (its first
    `rows` chunks when given); None when that index is not there."""
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.index.store import pinned_generation, read_manifest

    path, corpus = CACHE / f"scale_{size}", CACHE / f"synth_{size}.jsonl"
    if not (path / "manifest.json").is_file() or not corpus.is_file():
        print(f"[scale {size}] {path} or {corpus} is missing: skipped", file=sys.stderr)
        return None
    encoder_name = read_manifest(path)["encoder"]["name"]
    with pinned_generation(path) as (folder, _):
        vectors = np.load(folder / "embeddings.npy", mmap_mode="r")
        vectors = np.array(vectors[:rows] if rows else vectors, dtype=np.float32)
    with open(corpus) as handle:
        texts = [" ".join(json.loads(line)["text"].split()[3:9]) for _, line in zip(range(n_queries), handle)]
    queries = np.ascontiguousarray(load_encoder(EncoderConfig(model=encoder_name)).encode(texts), dtype=np.float32)
    return vectors, queries, encoder_name


def scale_row(label: str, vectors: np.ndarray, queries: np.ndarray, kinds: tuple[str, ...]) -> dict[str, Any]:
    n = vectors.shape[0]
    print(f"[{label}] {n:,} vectors, {len(queries):,} queries", file=sys.stderr, flush=True)
    flat = FlatSearch(NUMPY, vectors)
    flat.search(queries[:256], 10)  # warm-up: the top-k kernel's compilation
    start = time.perf_counter()
    truth = np.concatenate([flat.search(queries[i:i + 256], 10)[0].T for i in range(0, len(queries), 256)])
    row: dict[str, Any] = {"label": label, "chunks": n, "dim": int(vectors.shape[1]), "queries": len(queries),
                           "vector_bytes": int(vectors.nbytes),
                           "exact": {"qps_256": len(queries) / (time.perf_counter() - start),
                                     "qps_1": queries_per_second(flat, queries, 1, limit=ONE_QUERY_RUNS)}}
    for kind in kinds:
        ann = build_ann(vectors, AnnConfig(kind=kind))
        entry: dict[str, Any] = {"build_seconds": ann.seconds, "bytes": ann_bytes(ann), "params": ann.params,
                                 "settings": []}
        for value in (NPROBES if kind == "ivf" else EF_SEARCHES):
            settings = DenseSearchConfig(nprobe=value) if kind == "ivf" else DenseSearchConfig(ef_search=value)
            search = AnnSearch(NUMPY, vectors, ann, settings)
            search.search(queries[:256], 10)
            start = time.perf_counter()
            found = np.concatenate([search.search(queries[i:i + 256], 10)[0].T for i in range(0, len(queries), 256)])
            qps_256 = len(queries) / (time.perf_counter() - start)
            entry["settings"].append({"nprobe" if kind == "ivf" else "ef_search": value,
                                      "recall_at_10": overlap(found, truth), "qps_256": qps_256,
                                      "qps_1": queries_per_second(search, queries, 1, limit=ONE_QUERY_RUNS * 4),
                                      "exact_fills": search.exact_fills})
            print(f"  {kind} {value}: recall@10 {entry['settings'][-1]['recall_at_10']:.3f}, "
                  f"{qps_256:.0f} q/s (256)", file=sys.stderr, flush=True)
        row[kind] = entry
        del ann
    return row


# ---- report ---------------------------------------------------------------------------------------

def markdown(payload: dict[str, Any]) -> str:
    d = DenseSearchConfig()
    a = AnnConfig()
    out = ["# The dense first stage: exact search against a FAISS ANN (issue 24, item 3)", "",
           f"Generated {payload.get('generated', '')}; machine shared with three other engineers' jobs (2 cores, "
           f"load {payload['load_average']} at the start): speeds are ratios within one run, exact beside ANN.",
           "", "Commands:", "", "```bash", payload["command"], "```", "",
           f"Defaults: `ann.kind` {a.kind} (= ivf at or above `ann.min_chunks` {a.min_chunks:,} chunks), "
           f"`dense.search` {d.search}, `dense.nprobe` {d.nprobe}, `dense.ef_search` {d.ef_search}. The ANN's "
           "candidates are re-scored exactly, so its cosines are the exact ones; only the candidate set is "
           "approximate.", ""]
    if payload.get("datasets"):
        out += ["## NaiveRAG on the evaluation sets (the ANN forced onto these small indexes)", "",
                "| dataset | chunks | search | R@2 | R@5 | R@10 | Δ R@5 vs exact (points) | top-10 overlap | "
                "build s | ANN bytes |", "|---|---|---|---|---|---|---|---|---|---|"]
        for name, entry in payload["datasets"].items():
            exact = entry["systems"]["exact"]
            for system, row in entry["systems"].items():
                delta = "" if system == "exact" else f"{100 * (row['recall@5'] - exact['recall@5']):+.2f}"
                extra = "| | |" if system == "exact" else \
                    f"{row['top10_overlap']:.4f} | {row['build_seconds']:.2f} | {row['bytes']:,} |"
                label = system if system == "exact" else \
                    f"{system} ({', '.join(f'{k} {v}' for k, v in row['params'].items() if k != 'train_vectors')})"
                out.append(f"| {name} | {entry['chunks']:,} | {label} | {100 * row['recall@2']:.2f} | "
                           f"{100 * row['recall@5']:.2f} | {100 * row['recall@10']:.2f} | {delta} | {extra}")
        out.append("")
    if payload.get("scale"):
        out += ["## Synthetic corpora (stand-in vectors hashing:256)", "",
                "Recall@10: the share of exact search's top 10 the ANN returns. q/s 1: one query per call; "
                "q/s 256: batches of 256. Bytes: the ANN file; the passage vectors' own bytes beside.", "",
                "| chunks | search | setting | recall@10 | q/s 1 | q/s 256 | × exact (1) | × exact (256) | build s | "
                "bytes (vectors) |", "|---|---|---|---|---|---|---|---|---|---|"]
        for row in payload["scale"]:
            exact = row["exact"]
            out.append(f"| {row['chunks']:,} | exact | | 1 | {exact['qps_1']:.1f} | {exact['qps_256']:.1f} | 1 | 1 | | "
                       f"({row['vector_bytes']:,}) |")
            for kind in KINDS:
                if kind not in row:
                    continue
                entry = row[kind]
                for i, s in enumerate(entry["settings"]):
                    key = "nprobe" if kind == "ivf" else "ef_search"
                    first = i == 0
                    out.append(f"| {row['chunks']:,} | {kind} ({', '.join(f'{k} {v}' for k, v in entry['params'].items())})"
                               f" | {key} {s[key]} | {s['recall_at_10']:.3f} | {s['qps_1']:.1f} | {s['qps_256']:.1f} | "
                               f"{s['qps_1'] / exact['qps_1']:.1f} | {s['qps_256'] / exact['qps_256']:.2f} | "
                               f"{entry['build_seconds']:.1f} | {entry['bytes']:,} |" if first else
                               f"| | | {key} {s[key]} | {s['recall_at_10']:.3f} | {s['qps_1']:.1f} | "
                               f"{s['qps_256']:.1f} | {s['qps_1'] / exact['qps_1']:.1f} | "
                               f"{s['qps_256'] / exact['qps_256']:.2f} | | |")
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="*", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--sizes", nargs="*", type=int, default=[10000, 100000, 300000, 1000000],
                        help="synthetic indexes .cache/bench/scale_N to measure whole")
    parser.add_argument("--subsets", nargs="*", type=int, default=[30000],
                        help="also measure the first N chunks of the smallest larger synthetic index")
    parser.add_argument("--hnsw-sizes", nargs="*", type=int, default=[100000],
                        help="sizes (of --sizes) where HNSW is measured beside IVF (its build is the slow one)")
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--smoke", action="store_true", help="a small random set only; writes nothing")
    args = parser.parse_args()
    if args.smoke:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((3000, 32)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        row = scale_row("smoke", vectors, vectors[:300] + 0.1, KINDS)
        print(markdown({"command": "smoke", "load_average": "-", "scale": [row]}))
        return
    payload: dict[str, Any] = {"command": "python bench/ann.py " + " ".join(sys.argv[1:]),
                               "load_average": " ".join(f"{v:.1f}" for v in os.getloadavg())}
    payload["datasets"] = {name: dataset_quality(name) for name in args.datasets}
    rows = []
    sizes = sorted(args.sizes)
    for subset in args.subsets:
        larger = [s for s in sizes if s > subset]
        if larger:
            found = synthetic_vectors(larger[0], subset, args.queries)
            if found is not None:
                rows.append(scale_row(f"first {subset:,} of scale_{larger[0]}", found[0], found[1], ("ivf",)))
    for size in sizes:
        found = synthetic_vectors(size, None, args.queries)
        if found is not None:
            kinds = KINDS if size in args.hnsw_sizes else ("ivf",)
            rows.append(scale_row(f"scale_{size}", found[0], found[1], kinds))
            del found
    payload["scale"] = sorted(rows, key=lambda r: r["chunks"])
    write_results("ann", payload, markdown(payload))


if __name__ == "__main__":
    main()
