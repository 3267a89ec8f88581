"""Query throughput with one GPU Dask worker against CPU Dask workers, in the same run (issue 5).

Everything is made on the machine it runs on: a synthetic Zipf corpus (gpu_tigrag/synth.py), its
streaming index (stand-in encoder `hashing:256` and NER `capitalized`, so no model weights
are needed; pairs counted on the GPU), and two-hop queries drawn from its text. Then
`tigrag run` answers the same queries with `--workers 1 --backend cupy` (at the default
batch and at a large one) and with `--workers K --backend numpy`. Times include the cluster
start and each worker's index load, as a user sees them. The rankings of the runs are
compared (top-5 chunk ids per query); "ok" is false, and the exit status 1, unless they are identical.

Usage: python bench/gpu_workers.py --out DIR [--passages 20000] [--queries 4000] [--cpu-workers 8] [--work DIR]
       python bench/gpu_workers.py --smoke --out DIR   (CPU dry run: numpy in the GPU's place)
Writes DIR/gpu_workers.json after every step, so a run stopped by a time limit keeps what it
measured. bench/checks/gpu_check.py runs it as its `workers` section; bench/gpu_workers.sh runs it alone.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from gpu_tigrag.synth import passages, write_corpus

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "bench"
STAND_INS = ["--set", "encoder.model=hashing:256", "--set", "entities.model=capitalized"]


def tigrag(*args: str) -> float:
    """Seconds taken by one `tigrag` command (it must succeed)."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args, "-q"], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tigrag {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return time.perf_counter() - start


def top_ids(path: Path) -> list[list[int]]:
    return [json.loads(line)["chunk_ids"][:5] for line in path.read_text().splitlines()]


def write_report(out: Path, report: dict[str, Any]) -> None:
    (out / "gpu_workers.json").write_text(json.dumps(report, indent=2) + "\n")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--passages", type=int, default=20_000)
    parser.add_argument("--queries", type=int, default=4_000)
    parser.add_argument("--cpu-workers", type=int, default=min(8, os.cpu_count() or 1))
    parser.add_argument("--large-batch", type=int, default=2048)
    parser.add_argument("--work", type=Path, help="scratch folder (default .cache/bench/gpu_workers_PASSAGES)")
    parser.add_argument("--smoke", action="store_true", help="CPU dry run: numpy plays the GPU's part")
    args = parser.parse_args()
    gpu = "numpy" if args.smoke else "cupy"
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.work or CACHE / f"gpu_workers_{args.passages}"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    corpus, index = work / "corpus.jsonl", work / "index"
    write_corpus(corpus, passages(args.passages))  # what `python bench/synth.py N -o FILE` writes
    report: dict[str, Any] = {"passages": args.passages, "gpu_backend": gpu, "cpu_workers": args.cpu_workers}
    report["index_seconds"] = tigrag("index", str(corpus), "-o", str(index), "--stream", "--backend", gpu,
                                     "--workers", str(args.cpu_workers), *STAND_INS)
    write_report(args.out, report)
    words = [json.loads(line)["text"].split()[3:9] for line in corpus.open()][: args.queries]
    queries = work / "queries.jsonl"
    queries.write_text("".join(json.dumps({"id": i, "question": " ".join(w)}) + "\n" for i, w in enumerate(words)))

    runs = {
        "gpu_1_worker": ["--workers", "1", "--backend", gpu],
        f"gpu_1_worker_batch_{args.large_batch}": ["--workers", "1", "--backend", gpu,
                                                    "--set", f"batch_size={args.large_batch}",
                                                    "--set", "memory_budget_mb=32000"],
        f"cpu_{args.cpu_workers}_workers": ["--workers", str(args.cpu_workers), "--backend", "numpy"],
    }
    report["queries"] = len(words)
    rows: dict[str, dict[str, Any]] = {}
    report["runs"] = rows
    for name, options in runs.items():
        out = work / f"{name}.jsonl"
        seconds = tigrag("run", str(index), str(queries), "-o", str(out), *options)
        rows[name] = {"seconds": seconds, "queries_per_second": len(words) / seconds, "options": options}
        print(f"{name}: {len(words) / seconds:,.1f} q/s", file=sys.stderr, flush=True)
        write_report(args.out, report)
    reference = top_ids(work / f"cpu_{args.cpu_workers}_workers.jsonl")
    for name in rows:
        ids = top_ids(work / f"{name}.jsonl")
        same = sum(a == b for a, b in zip(ids, reference)) / len(reference) if len(ids) == len(reference) else 0.0
        rows[name]["same_top5_as_cpu"] = same
    cpu = rows[f"cpu_{args.cpu_workers}_workers"]["queries_per_second"]
    report["gpu_over_cpu_workers"] = {name: r["queries_per_second"] / cpu for name, r in rows.items()}
    report["ok"] = bool(reference) and all(r["same_top5_as_cpu"] == 1.0 for r in rows.values())
    write_report(args.out, report)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
