"""A streamed build with the default encoder: chunk vectors computed in the build process or on the workers.

    python bench/stream_embed.py [--passages 1000] [--partition 250]
    python bench/stream_embed.py --smoke      # 40 passages, stand-in encoder, writes nothing

Each run is `tigrag index CORPUS --stream --workers W --embed-on E` in a fresh process on the first N
passages of 2Wiki (multilingual-e5-small onnx-int8, spaCy NER, the default settings), sampling the RSS of
the whole process tree. Rows: 1 and 2 workers with the vectors computed in the build process (`here`) and
on the workers (`workers`: each worker loads its own encoder and encodes the partitions it tokenised, on
its share of the cores; within a partition the encoder orders texts by length). Reported: wall seconds,
chunks/s, peak RSS, and each build's vectors against the first row's (max |difference|, identical or not).
Writes bench/results/stream_embed.json and .md.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import DATA, DATASETS, ROOT, write_results  # noqa: E402
from bench.scale import run_measured  # noqa: E402

RUNS = (("1 worker, vectors here", 1, "here"), ("2 workers, vectors here", 2, "here"),
        ("1 worker, vectors on the worker", 1, "workers"), ("2 workers, vectors on the workers", 2, "workers"))
STAND_INS = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--partition", type=int, default=250, help="passages per partition")
    parser.add_argument("--smoke", action="store_true", help="40 passages, stand-in encoder and NER, no result file")
    args = parser.parse_args()
    from gpu_tigrag.cli.commands import build_seconds
    from gpu_tigrag.index.store import load_index

    n = 40 if args.smoke else args.passages
    corpus_passages = json.loads((DATA / DATASETS["2wikimultihopqa"][0]).read_text())[:n] if not args.smoke else \
        json.loads((ROOT / "examples" / "corpus.json").read_text())[:n]
    rows: dict = {}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        corpus = work / "corpus.json"
        corpus.write_text(json.dumps(corpus_passages))
        reference = None
        for name, workers, embed_on in RUNS:
            out = work / f"idx_{workers}_{embed_on}"
            command = [sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "-o", str(out), "--stream",
                       "--workers", str(workers), "--embed-on", embed_on, "--partition-passages",
                       str(10 if args.smoke else args.partition), *(STAND_INS if args.smoke else [])]
            row = run_measured(command)
            built = load_index(out)
            row["build_seconds"] = build_seconds(built.timings)  # as the build printed them
            vectors = built.embeddings
            row["chunks"] = int(vectors.shape[0])
            row["chunks_per_second"] = row["chunks"] / row["seconds"]
            if reference is None:
                reference = vectors
            row["max_abs_difference"] = float(np.max(np.abs(vectors - reference)))
            row["identical"] = bool(np.array_equal(vectors, reference))
            rows[name] = row
            shutil.rmtree(out)
            print(name, {k: v for k, v in row.items() if k != "build_seconds"}, file=sys.stderr, flush=True)
    base = rows[RUNS[0][0]]["chunks_per_second"]
    lines = ["# Streamed build with the default encoder: vectors in the build process or on the workers", "",
             f"Command: `python bench/stream_embed.py --passages {n} --partition {args.partition}`: the first {n:,} "
             f"2Wiki passages ({rows[RUNS[0][0]]['chunks']:,} chunks), `tigrag index --stream --workers W --embed-on E "
             f"--partition-passages {args.partition}`, default encoder (multilingual-e5-small, onnx-int8) and NER, "
             "each build a fresh process; peak RSS of the whole process tree.", "",
             "| run | wall s | chunks/s | vs first row | peak RSS MiB | vectors vs first row |", "|---|---|---|---|---|---|"]
    for name, row in rows.items():
        same = "identical" if row["identical"] else f"max abs diff {row['max_abs_difference']:.1e}"
        lines.append(f"| {name} | {row['seconds']:.1f} | {row['chunks_per_second']:.2f} | "
                     f"{row['chunks_per_second'] / base:.2f}× | {row['peak_rss_mib']:,.0f} | {same} |")
    lines += ["", "Stage seconds as each build printed them:", ""]
    lines += [f"- {name}: {row['build_seconds']}" for name, row in rows.items()]
    text = "\n".join(lines)
    print(text)
    if not args.smoke:
        write_results("stream_embed", {"passages": n, "partition": args.partition, "runs": rows}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
