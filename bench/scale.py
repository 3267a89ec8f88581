"""Scale on this machine: streaming index build of synthetic Zipf corpora (throughput, peak
memory of the whole process tree), the transformer encoder's own rate, query throughput with
1 and 2 local Dask workers, and resume-after-kill giving an identical index.

The large builds use the declared stand-ins `hashing:256` (encoder) and `capitalized` (NER):
a transformer runs at ~100 chunks/s on 2 cores, so its rate is measured apart.

Usage: python bench/scale.py [--sizes 10000 100000 1000000] [--budget 8192]
Writes bench/results/scale.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, write_results

from gpu_tigrag.synth import passages, write_corpus

STAND_INS = ["--set", "encoder.model=hashing:256", "--set", "entities.model=capitalized"]


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_measured(command: list[str], kill_after: float | None = None) -> dict:
    """Run a command, sampling the RSS of its process tree; optionally SIGKILL it after some seconds."""
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    ps, peak, start = psutil.Process(proc.pid), 0, time.perf_counter()
    while proc.poll() is None:
        peak = max(peak, tree_rss(ps))
        if kill_after is not None and time.perf_counter() - start > kill_after:
            for child in ps.children(recursive=True):
                child.kill()
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            return {"killed": True, "seconds": time.perf_counter() - start}
        time.sleep(0.2)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-2000:]}")
    return {"seconds": time.perf_counter() - start, "peak_rss_mib": peak / 2**20}


def synth(n: int) -> Path:
    path = CACHE / f"synth_{n}.jsonl"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_corpus(path, passages(n))  # what `python bench/synth.py N -o PATH` writes
    return path


def index_command(corpus: Path, out: Path, budget: int) -> list[str]:
    return [sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "-o", str(out), "--stream",
            "--memory-budget", str(budget), "--workers", "2", "-q", *STAND_INS]


def files_of(index: Path) -> dict:
    return json.loads((index / "manifest.json").read_text())["files"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000, 1_000_000])
    parser.add_argument("--budget", type=int, default=8192, help="MiB given to --memory-budget")
    parser.add_argument("--transformer-passages", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    CACHE.mkdir(parents=True, exist_ok=True)
    payload: dict = {"budget_mib": args.budget, "indexing": [], "stand_ins": STAND_INS}

    for n in args.sizes:
        out = CACHE / f"scale_{n}"
        measured = run_measured(index_command(synth(n), out, args.budget))
        manifest = json.loads((out / "manifest.json").read_text())
        row = {"passages": n, "chunks": manifest["counts"]["chunks"], **measured,
               "passages_per_second": n / measured["seconds"], "step_seconds": manifest["build_seconds"]}
        payload["indexing"].append(row)
        print(row, file=sys.stderr, flush=True)

    # resume after a kill at a random point of the middle-sized build: same data files
    n = args.sizes[min(1, len(args.sizes) - 1)]
    clean, killed = CACHE / f"scale_{n}", CACHE / f"scale_{n}_killed"
    build_seconds = next(r["seconds"] for r in payload["indexing"] if r["passages"] == n)
    kill_at = random.Random(7).uniform(0.2, 0.8) * build_seconds
    run_measured(index_command(synth(n), killed, args.budget), kill_after=kill_at)
    run_measured(index_command(synth(n), killed, args.budget) + ["--resume"])
    payload["resume"] = {"passages": n, "killed_after_seconds": kill_at,
                         "identical_files": files_of(killed) == files_of(clean)}

    # query throughput with 1 and 2 local workers on that index; identical outputs
    words = [json.loads(line)["text"].split()[3:9] for line in open(synth(n))][: args.queries]
    queries = CACHE / "scale_queries.jsonl"
    queries.write_text("".join(json.dumps({"id": i, "question": " ".join(w)}) + "\n" for i, w in enumerate(words)))
    runs = {}
    for workers in (1, 2):
        out = CACHE / f"scale_run_{workers}.jsonl"
        out.unlink(missing_ok=True)
        measured = run_measured([sys.executable, "-m", "gpu_tigrag.cli", "run", str(clean), str(queries), "-o", str(out),
                                 "--workers", str(workers), "--backend", "numpy", "-q"])
        runs[workers] = {"queries": len(words), **measured, "queries_per_second": len(words) / measured["seconds"]}
    payload["query_workers"] = {**{str(k): v for k, v in runs.items()},
                                "speedup_2_over_1": runs[2]["queries_per_second"] / runs[1]["queries_per_second"],
                                "identical_results": (CACHE / "scale_run_1.jsonl").read_text()
                                == (CACHE / "scale_run_2.jsonl").read_text()}

    # the transformer's own rate, on its own
    from gpu_tigrag.encoders import load_encoder

    texts = [json.loads(line)["text"] for line in open(synth(args.sizes[0]))][: args.transformer_passages]
    encoder = load_encoder()
    start = time.perf_counter()
    encoder.encode(texts)
    seconds = time.perf_counter() - start
    payload["transformer"] = {"model": encoder.name, "passages": len(texts), "seconds": seconds,
                              "passages_per_second": len(texts) / seconds}

    lines = ["# Scale on this machine (2 cores, streaming build)", "", "Command: `python bench/scale.py`", "",
             f"Encoder and NER are the declared stand-ins ({' '.join(STAND_INS)}); memory budget {args.budget} MiB.", "",
             "| passages | chunks | seconds | passages/s | peak RSS of the process tree (MiB) |", "|---|---|---|---|---|"]
    for r in payload["indexing"]:
        lines.append(f"| {r['passages']:,} | {r['chunks']:,} | {r['seconds']:.1f} | {r['passages_per_second']:,.0f} | "
                     f"{r['peak_rss_mib']:,.0f} |")
    over = [r for r in payload["indexing"] if r["peak_rss_mib"] > args.budget]
    lines += ["", "Peak memory within the budget: " + ("yes, at every size." if not over else
              "no: " + ", ".join(f"{r['passages']:,} passages peaked at {r['peak_rss_mib']:,.0f} MiB" for r in over)
              + f" (budget {args.budget:,} MiB). Partitions respect it; the final assembly holds the whole index "
              "in memory and grows with the corpus.")]
    res, q, t = payload["resume"], payload["query_workers"], payload["transformer"]
    lines += ["", f"Resume: the {res['passages']:,}-passage build killed after {res['killed_after_seconds']:.1f} s and "
              f"resumed gives identical data files: {res['identical_files']}.", "",
              f"Queries ({q['1']['queries']:,}, 2-hop) with 1 worker: {q['1']['queries_per_second']:.1f} q/s; with 2: "
              f"{q['2']['queries_per_second']:.1f} q/s (speed-up {q['speedup_2_over_1']:.2f}×, cluster start and index "
              f"loading included); identical results: {q['identical_results']}.", "",
              f"Transformer ({t['model']}) alone: {t['passages_per_second']:.1f} passages/s on {t['passages']:,} passages."]
    write_results("scale", payload, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
