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
Usage: python bench/studies/ann.py [--datasets ...] [--sizes 100000 300000 1000000] [--subsets 30000]
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
    sys.path[0] = str(Path(__file__).resolve().parents[2])
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
    if not corpus.is_file():
        print(f"[scale {size}] {corpus} is missing: skipped", file=sys.stderr)
        return None
    if (path / "manifest.json").is_file():
        source = f"scale_{size}"
        encoder_name = read_manifest(path)["encoder"]["name"]
        with pinned_generation(path) as (folder, _):
            vectors = np.load(folder / "embeddings.npy", mmap_mode="r")
            vectors = np.array(vectors[:rows] if rows else vectors, dtype=np.float32)
    else:  # the index is not built (yet): its passages' vectors, "title text" each, with the stand-in encoder
        source, encoder_name = f"passages of synth_{size} (no index)", STAND_IN
        vectors = passage_vectors(corpus, size)[:rows]
    with open(corpus) as handle:
        texts = [" ".join(json.loads(line)["text"].split()[3:9]) for _, line in zip(range(n_queries), handle)]
    queries = np.ascontiguousarray(load_encoder(EncoderConfig(model=encoder_name)).encode(texts), dtype=np.float32)
    return vectors, queries, source


#: the stand-in encoder of the synthetic indexes (bench/scale.py)
STAND_IN = "hashing:256"


def passage_vectors(corpus: Path, size: int, block: int = 50_000) -> np.ndarray:
    """The stand-in vectors of every passage of `corpus` ("title text"), cached beside it."""
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import load_encoder

    cache = CACHE / f"ann_passage_vectors_{size}.npy"
    if cache.is_file():
        return np.load(cache, allow_pickle=False)
    encoder = load_encoder(EncoderConfig(model=STAND_IN))
    parts, texts = [], []
    with open(corpus) as handle:
        for line in handle:
            record = json.loads(line)
            texts.append(f"{record['title']} {record['text']}")
            if len(texts) == block:
                parts.append(np.asarray(encoder.encode(texts), dtype=np.float32))
                texts = []
    if texts:
        parts.append(np.asarray(encoder.encode(texts), dtype=np.float32))
    vectors = np.concatenate(parts)
    np.save(cache, vectors, allow_pickle=False)
    return vectors


def scale_row(label: str, vectors: np.ndarray, queries: np.ndarray, kinds: tuple[str, ...]) -> dict[str, Any]:
    n = vectors.shape[0]
    print(f"[{label}] {n:,} vectors, {len(queries):,} queries", file=sys.stderr, flush=True)
    flat = FlatSearch(NUMPY, vectors)
    flat.search(queries[:256], 10)  # warm-up: the top-k kernel's compilation
    start = time.perf_counter()
    truth = np.concatenate([flat.search(queries[i:i + 256], 10)[0].T for i in range(0, len(queries), 256)])
    row: dict[str, Any] = {"label": label, "chunks": n, "dim": int(vectors.shape[1]), "queries": len(queries),
                           "measured_at": time.strftime("%Y-%m-%d %H:%M:%S"),
                           "load_average": " ".join(f"{v:.1f}" for v in os.getloadavg()),
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


def crossover(rows: list[dict[str, Any]], batch: str) -> dict[str, Any] | None:
    """Where the IVF ANN at the default `dense.nprobe` becomes as fast as exact search for batches of
    `batch` ("1" or "256"): the chunks at which their q/s ratio crosses 1, interpolated linearly in
    log(chunks) between the two measured sizes around it; None when no measured pair brackets it."""
    nprobe = DenseSearchConfig().nprobe
    points = []
    for row in sorted(rows, key=lambda r: r["chunks"]):
        setting = next((s for s in row.get("ivf", {}).get("settings", []) if s["nprobe"] == nprobe), None)
        if setting is not None:
            points.append((row["chunks"], setting[f"qps_{batch}"] / row["exact"][f"qps_{batch}"]))
    for (n0, r0), (n1, r1) in zip(points, points[1:]):
        if r0 < 1 <= r1:
            t = (np.log(1) - np.log(r0)) / (np.log(r1) - np.log(r0))
            return {"chunks": int(round(np.exp(np.log(n0) + t * (np.log(n1) - np.log(n0))))), "between": [n0, n1],
                    "ratios": [r0, r1], "nprobe": nprobe}
    return None


# ---- report ---------------------------------------------------------------------------------------

def markdown(payload: dict[str, Any]) -> str:
    d = DenseSearchConfig()
    a = AnnConfig()
    out = ["# The dense first stage: exact search against a FAISS ANN (issue 24, item 3)", "",
           f"Generated {payload.get('generated', '')}; machine shared with three other engineers' jobs (2 cores, "
           f"load {payload['load_average']} at the start): speeds are ratios within one run, exact beside ANN.",
           "", "Commands (from the repository root; the second rewrites this file from the JSON):", "", "```bash",
           *(".venv/bin/" + c.strip() for c in payload.get("commands") or [payload["command"]]),
           ".venv/bin/python bench/studies/ann.py --markdown-only", "```", "",
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
            when = f", {row['measured_at'][11:16]}, load {row['load_average'].split()[0]}" if row.get("measured_at") else ""
            out.append(f"| {row['chunks']:,} ({row['label']}{when}) | exact | | 1 | {exact['qps_1']:.1f} | {exact['qps_256']:.1f} | 1 | 1 | | "
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
    if any("no index" in row["label"] for row in payload.get("scale", [])):
        out += ["Rows marked \"no index\": the synthetic index of that size was not built when this ran, so its "
                "passages' vectors (\"title text\", the same stand-in encoder) stand in for its chunks' vectors.", ""]
    for batch, found in (payload.get("crossover") or {}).items():
        if found:
            out.append(f"Crossover, batches of {batch}: IVF at nprobe {found['nprobe']} matches exact search at about "
                       f"{found['chunks']:,} chunks (× exact {found['ratios'][0]:.2f} at {found['between'][0]:,}, "
                       f"{found['ratios'][1]:.2f} at {found['between'][1]:,}; interpolated in log chunks).")
        else:
            out.append(f"Crossover, batches of {batch}: not bracketed by the measured sizes (see the × exact column).")
    out.append("")
    out += decision(payload)
    return "\n".join(out)


def _delta(entry: dict[str, Any], system: str) -> str:
    exact, row = entry["systems"]["exact"], entry["systems"].get(system)
    if row is None:
        return "not measured"
    return " / ".join(f"{100 * (row[m] - exact[m]):+.2f}" for m in ("recall@2", "recall@5", "recall@10"))


def decision(payload: dict[str, Any]) -> list[str]:
    """The defaults this study chose and the figures behind them (read from `payload`)."""
    d = DenseSearchConfig()
    ivf, hnsw = f"ivf nprobe {d.nprobe}", f"hnsw ef_search {d.ef_search}"
    out = ["## Decision", ""]
    for name, entry in (payload.get("datasets") or {}).items():
        out.append(f"* {name}: NaiveRAG R@2 / R@5 / R@10 minus exact, in points: IVF at nprobe {d.nprobe} "
                   f"{_delta(entry, ivf)}; HNSW at ef_search {d.ef_search} {_delta(entry, hnsw)}; IVF at nprobe "
                   f"{d.nprobe // 2} {_delta(entry, f'ivf nprobe {d.nprobe // 2}')} (the target: within 0.5).")
    both = [r for r in payload.get("scale", []) if "hnsw" in r and "ivf" in r]
    for row in both:
        best_ivf = next(s for s in row["ivf"]["settings"] if s["nprobe"] == d.nprobe)
        best_hnsw = max(row["hnsw"]["settings"], key=lambda s: s["recall_at_10"])
        out.append(f"* IVF, not HNSW, for `auto`: on {row['chunks']:,} stand-in vectors IVF builds in "
                   f"{row['ivf']['build_seconds']:.0f} s against {row['hnsw']['build_seconds']:.0f} s, stores "
                   f"{row['ivf']['bytes'] / row['vector_bytes']:.2f}× the vectors' bytes against "
                   f"{row['hnsw']['bytes'] / row['vector_bytes']:.2f}×, and reaches recall@10 {best_ivf['recall_at_10']:.3f} "
                   f"at nprobe {d.nprobe} where HNSW's best is {best_hnsw['recall_at_10']:.3f} (ef_search "
                   f"{best_hnsw['ef_search']}); it adds vectors to its lists without retraining. On the real "
                   "MiniLM vectors above HNSW is as good or better per unit of work, so `ann.kind=hnsw` stays a "
                   "choice: these stand-in vectors (hashed words, nearly orthogonal) are the hard case for a graph.")
    cross = (payload.get("crossover") or {}).get("256")
    singles = [(r["chunks"], next(x for x in r["ivf"]["settings"] if x["nprobe"] == d.nprobe)["qps_1"] / r["exact"]["qps_1"])
               for r in sorted(payload.get("scale", []), key=lambda r: r["chunks"]) if "ivf" in r]
    faster = [n for n, ratio in singles if ratio > 1]
    single = (f"one query at a time the ANN is faster at every measured size (× {singles[0][1]:.1f} at "
              f"{singles[0][0]:,})" if singles and len(faster) == len(singles) else
              f"one query at a time the ANN is faster from {faster[0]:,} chunks" if faster else
              "one query at a time the ANN was faster at no measured size")
    if cross:
        out.append(f"* `ann.min_chunks` {AnnConfig().min_chunks:,}: below it exact search is the default. For "
                   f"batches of 256 (the engine's batch) IVF at nprobe {d.nprobe} passes exact search at about "
                   f"{cross['chunks']:,} chunks (between the sizes measured in one run; the ratios move by tens of percent between runs on this loaded machine), while its recall on these vectors is below 1 there; {single}, so a latency-bound "
                   "user can set `ann.kind=ivf` (or `tigrag extend INDEX --ann`) on a smaller index.")
    largest = max(payload.get("scale", []), key=lambda r: r["chunks"], default=None)
    if largest and "ivf" in largest:
        s = next(s for s in largest["ivf"]["settings"] if s["nprobe"] == d.nprobe)
        out.append(f"* At {largest['chunks']:,} vectors, nprobe {d.nprobe}: {s['qps_1'] / largest['exact']['qps_1']:.1f}× "
                   f"exact search's q/s one query at a time, {s['qps_256'] / largest['exact']['qps_256']:.2f}× in "
                   f"batches of 256, recall@10 {s['recall_at_10']:.3f} on the stand-in vectors; build "
                   f"{largest['ivf']['build_seconds']:.0f} s, {largest['ivf']['bytes']:,} bytes. Exact search in "
                   "batches is one BLAS product per block, hard to beat below a million vectors; the IVF's cost per "
                   "query grows as √chunks (nlist = 4·√chunks, nprobe fixed), exact search's as chunks.")
    out += ["", "The GPU backend searches exactly (FlatSearch); faiss-gpu and cuVS are not on the GPU machines.", ""]
    return out


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
    parser.add_argument("--merge", action="store_true",
                        help="keep bench/results/ann.json's rows of the datasets and sizes not measured now (each row "
                             "records when and at what load it was measured)")
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite bench/results/ann.md from bench/results/ann.json (no measurement)")
    args = parser.parse_args()
    if args.markdown_only:
        from bench.common import RESULTS

        payload = json.loads((RESULTS / "ann.json").read_text())
        (RESULTS / "ann.md").write_text(markdown(payload).rstrip() + "\n")
        return
    if args.smoke:
        rng = np.random.default_rng(0)
        vectors = rng.standard_normal((3000, 32)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        row = scale_row("smoke", vectors, vectors[:300] + 0.1, KINDS)
        print(markdown({"command": "smoke", "load_average": "-", "scale": [row]}))
        return
    payload: dict[str, Any] = {"command": "python bench/studies/ann.py " + " ".join(sys.argv[1:]),
                               "load_average": " ".join(f"{v:.1f}" for v in os.getloadavg())}
    payload["datasets"] = {name: dataset_quality(name) for name in args.datasets}
    rows = []
    sizes = sorted(args.sizes)
    for subset in args.subsets:
        larger = [s for s in sizes if s > subset]
        if larger:
            found = synthetic_vectors(larger[0], subset, args.queries)
            if found is not None:
                rows.append(scale_row(f"first {subset:,} of {found[2]}", found[0], found[1], ("ivf",)))
    for size in sizes:
        found = synthetic_vectors(size, None, args.queries)
        if found is not None:
            kinds = KINDS if size in args.hnsw_sizes else ("ivf",)
            rows.append(scale_row(found[2], found[0], found[1], kinds))
            del found
    if args.merge:
        payload, rows = merged(payload, rows, set(sizes) | set(args.subsets))
    payload["scale"] = sorted(rows, key=lambda r: r["chunks"])
    payload["crossover"] = {batch: crossover(rows, batch) for batch in ("1", "256")}
    write_results("ann", payload, markdown(payload))


def merged(payload: dict[str, Any], rows: list[dict[str, Any]], sizes: set[int]) -> tuple[dict[str, Any], list]:
    """`payload` and `rows` with the previous run's datasets and synthetic rows of other sizes kept."""
    import re

    from bench.common import RESULTS

    old = json.loads((RESULTS / "ann.json").read_text())

    def size_of(row: dict[str, Any]) -> int:
        found = re.match(r"first ([\d,]+) of", row["label"]) or re.search(r"(?:scale|synth)_(\d+)", row["label"])
        return int(found.group(1).replace(",", ""))

    kept = [r for r in old.get("scale", []) if size_of(r) not in sizes]
    for row in kept:
        row.setdefault("measured_at", old.get("generated"))
        row.setdefault("load_average", old.get("load_average"))
    commands = old.get("commands") or [old["command"]]
    payload = {**payload, "datasets": {**old.get("datasets", {}), **payload["datasets"]},
               "commands": commands + [payload["command"]],
               "load_average": f"{old.get('load_average')}; then {payload['load_average']}"}
    return payload, kept + rows


if __name__ == "__main__":
    main()
