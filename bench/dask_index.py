"""Streaming index build with partitions on local processes vs on Dask workers (same run).

Both builds use 2 workers and the same budget; a LocalCluster of 2 single-threaded worker
processes stands in for a multi-node cluster (same code path as `--scheduler tcp://...`).
Peak memory is the RSS of every process started here (the CLI, its workers, the cluster).

Usage: python bench/dask_index.py [--passages 100000] [--budget 8192]
Writes bench/results/scale_dask.{json,md}.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import time
from pathlib import Path

import psutil

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, write_results
from bench.scale import files_of, index_command, synth, tree_rss


def measure(command: list[str]) -> dict:
    """Seconds and peak RSS (MiB) of `command`, counting every descendant of this process."""
    me = psutil.Process()
    own = me.memory_info().rss
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak, start = 0, time.perf_counter()
    while proc.poll() is None:
        peak = max(peak, tree_rss(me) - own)
        time.sleep(0.2)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed: {proc.stderr.read().decode()[-2000:]}")
    return {"seconds": time.perf_counter() - start, "peak_rss_mib": peak / 2**20}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passages", type=int, default=100_000)
    parser.add_argument("--budget", type=int, default=8192)
    args = parser.parse_args()
    from distributed import LocalCluster

    corpus, n = synth(args.passages), args.passages
    local, spread = CACHE / f"dask_index_{n}_local", CACHE / f"dask_index_{n}_dask"
    for out in (local, spread):
        shutil.rmtree(out, ignore_errors=True)
    rows = {"processes": measure(index_command(corpus, local, args.budget))}
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster:
        rows["dask"] = measure(index_command(corpus, spread, args.budget) + ["--scheduler", cluster.scheduler_address])
    for row in rows.values():
        row["passages_per_second"] = n / row["seconds"]
    payload = {"passages": n, "budget_mib": args.budget, "runs": rows,
               "dask_over_processes": rows["dask"]["passages_per_second"] / rows["processes"]["passages_per_second"],
               "identical_files": files_of(local) == files_of(spread)}
    lines = ["# Streaming build: local processes vs Dask workers", "", "Command: `python bench/dask_index.py`", "",
             f"{n:,} synthetic passages, 2 workers each way, memory budget {args.budget:,} MiB, stand-in encoder and NER.",
             "", "| partitions on | seconds | passages/s | peak RSS, all processes (MiB) |", "|---|---|---|---|"]
    for name, row in rows.items():
        label = "2 spawned processes" if name == "processes" else "2 Dask workers (LocalCluster, --scheduler)"
        lines.append(f"| {label} | {row['seconds']:.1f} | {row['passages_per_second']:,.0f} | "
                     f"{row['peak_rss_mib']:,.0f} |")
    lines += ["", f"Dask / processes throughput: {payload['dask_over_processes']:.2f}×; identical data files: "
              f"{payload['identical_files']}."]
    write_results("scale_dask", payload, "\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
