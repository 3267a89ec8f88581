"""Fingerprints of everything retrieval produces, to prove a restructuring changed nothing.

For 2Wiki and MuSiQue-100 (cached indexes of bench/common.py) and both presets, the sha256 of
the ranked chunk ids and scores of every query, with R@2/R@5, and on MuSiQue-100 the same for
SpectRAG (its stage built in memory) and LiteSemRAG (its stage cached by bench/litesemrag.py);
then, on the MuSiQue corpus, the
per-array sha256 of a fresh in-memory build, of a streaming build and of a build grown by `add`
(manifest checksums). Run it before and after a change and compare the two files:

    python bench/checks/identity.py --out bench/results/identity_before.json
    (change the code)
    python bench/checks/identity.py --out bench/results/identity_after.json --compare bench/results/identity_before.json

Any difference is listed and the exit code is 1. Takes ~8 min on 2 cores (plus ~6 min the first
time, to build the MuSiQue LiteSemRAG stage).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, code_version, dataset_index, dataset_queries

from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import CachingEncoder, index_encoder_config, load_encoder


def _ranking_digest(results) -> str:
    digest = hashlib.sha256()
    for r in results:
        digest.update(np.asarray(r.chunk_ids, dtype=np.int64).tobytes())
        digest.update(np.asarray(r.scores, dtype=np.float32).tobytes())
    return digest.hexdigest()


def retrieval_fingerprints() -> dict[str, dict[str, object]]:
    from gpu_tigrag.evaluate.metrics import recall_at_k
    from gpu_tigrag.presets import preset
    from gpu_tigrag.methods.tigrag.retriever import Retriever

    out: dict[str, dict[str, object]] = {}
    for name in DATASETS:
        index, queries = dataset_index(name), dataset_queries(name)
        encoder = CachingEncoder(load_encoder(index_encoder_config(index)))
        for preset_name in ("paper", "best"):
            start = time.perf_counter()
            results = Retriever(index, preset(preset_name), encoder=encoder, backend="numpy").retrieve(
                [q.text for q in queries], k=20)
            titles = [r.titles for r in results]
            gold = [q.gold for q in queries]
            out[f"{name}/{preset_name}"] = {
                "rankings_sha256": _ranking_digest(results),
                "recall@2": recall_at_k(titles, gold, 2), "recall@5": recall_at_k(titles, gold, 5),
            }
            print(f"{name}/{preset_name}: {out[f'{name}/{preset_name}']} "
                  f"({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    out.update(method_fingerprints("musique_train100"))
    return out


def method_fingerprints(name: str) -> dict[str, dict[str, object]]:
    """SpectRAG's and LiteSemRAG's rankings (default settings, depth 20) on dataset `name`."""
    from bench.litesemrag import stage_index

    from gpu_tigrag.config import RetrievalConfig
    from gpu_tigrag.evaluate.metrics import recall_at_k
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.retrieve.factory import make_retriever

    queries = dataset_queries(name)
    base = dataset_index(name)
    indexes = {"spectrag": add_method(base, "spectrag"), "litesemrag": stage_index(name)}
    out: dict[str, dict[str, object]] = {}
    for method, index in indexes.items():
        start = time.perf_counter()
        options = {"encoder": CachingEncoder(load_encoder(index_encoder_config(index)))} if method != "litesemrag" else {}
        results = make_retriever(index, RetrievalConfig(method=method), backend="numpy", **options).retrieve(
            [q.text for q in queries], k=20)
        titles, gold = [r.titles for r in results], [q.gold for q in queries]
        out[f"{name}/{method}"] = {"rankings_sha256": _ranking_digest(results),
                                   "recall@2": recall_at_k(titles, gold, 2), "recall@5": recall_at_k(titles, gold, 5)}
        print(f"{name}/{method}: {out[f'{name}/{method}']} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    return out


def _array_checksums(folder: Path) -> dict[str, str]:
    from gpu_tigrag.index.store import read_manifest

    manifest = read_manifest(folder)  # the current generation's (an index before generations: its own)
    return {name: entry["sha256"] for name, entry in sorted(manifest["files"].items())}


def build_fingerprints() -> dict[str, dict[str, str]]:
    from gpu_tigrag.index.add import add_to_index_dir
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import save_index
    from gpu_tigrag.index.stream import build_index_streaming

    corpus_path = DATA / DATASETS["musique_train100"][0]
    passages = load_corpus(corpus_path)
    encoder = CachingEncoder(load_encoder())
    out: dict[str, dict[str, str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        save_index(build_index(passages, encoder=encoder), root / "memory")
        out["build"] = _array_checksums(root / "memory")
        half = len(passages) // 2
        save_index(build_index(passages[:half], encoder=encoder), root / "grown")
        add_to_index_dir(root / "grown", passages[half:], encoder=encoder)
        out["build+add"] = _array_checksums(root / "grown")
        build_index_streaming([corpus_path], root / "stream", partition_size=300, encoder=encoder)
        out["stream"] = _array_checksums(root / "stream")
    print(f"builds: {len(out['build'])} arrays each", file=sys.stderr)
    return out


def compare(now: dict, before: dict) -> list[str]:
    diffs = []
    for section in ("retrieval", "builds"):
        for key in sorted(set(now[section]) | set(before[section])):
            if now[section].get(key) != before[section].get(key):
                diffs.append(f"{section}/{key}: {before[section].get(key)} -> {now[section].get(key)}")
    return diffs


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="JSON file to write")
    parser.add_argument("--compare", help="an earlier output of this script; differences fail the run")
    args = parser.parse_args()
    payload = {"code_version": code_version(), "generated": time.strftime("%Y-%m-%d %H:%M:%S"),
               "retrieval": retrieval_fingerprints(), "builds": build_fingerprints()}
    Path(args.out).write_text(json.dumps(payload, indent=1) + "\n")
    print(f"wrote {args.out}", file=sys.stderr)
    if args.compare:
        diffs = compare(payload, json.loads(Path(args.compare).read_text()))
        for line in diffs:
            print(line)
        print(f"{len(diffs)} difference(s) from {args.compare}")
        return 1 if diffs else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
