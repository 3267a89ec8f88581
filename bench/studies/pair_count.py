"""Counting windowed co-occurrence pairs: sort (`xp.unique`) against hash (kernels/pair_count.py).

Both methods count the same packed pair keys, emitted by the window kernel from synthetic Zipf
tokens (`gpu_tigrag.synth.zipf_token_csr`, as in the GPU check: vocabulary 200k, mean chunk length 60, w = 4),
the first N keys of a corpus large enough. Each timing is the mean of `--repeat` runs after one
warm-up (JIT compilation, memory pool), the device synchronised before the clock stops; the
two results are checked equal. Tables are allocated inside the timed call, as in indexing.

Usage: python bench/studies/pair_count.py [--sizes 1000000 10000000 50000000] [--backends numpy cupy] [--smoke]
Writes bench/results/pair_count.{json,md} (`--smoke`: 20,000 keys, one repeat, nothing written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import timed, write_results

from gpu_tigrag.backend import Backend, cuda_available, get_backend
from gpu_tigrag.index.graph import count_pairs, window_pair_keys
from gpu_tigrag.synth import zipf_token_csr

N_VOCAB, MEAN_LENGTH, WINDOW = 200_000, 60, 4
METHODS = ("sort", "hash")


def pair_keys(be: Backend, n_keys: int, seed: int = 0) -> tuple[Any, int]:
    """The first `n_keys` window pair keys of a synthetic corpus (on the backend) and its chunk count."""
    n_chunks = max(1_000, n_keys // 250)  # ~320 keys per chunk at these settings
    while True:
        indptr, ids = zipf_token_csr(be.xp, n_chunks, N_VOCAB, MEAN_LENGTH, seed)
        keys = window_pair_keys(be, indptr, ids, N_VOCAB, WINDOW)
        if keys.size >= n_keys:
            return keys[:n_keys].copy(), n_chunks
        n_chunks *= 2


def compare(be: Backend, keys: Any, repeat: int) -> dict[str, Any]:
    """Seconds of each method on the same keys, keys/s, the time ratio hash/sort, and equality."""
    row: dict[str, Any] = {"backend": be.name, "keys": int(keys.size)}
    results = {}
    for method in METHODS:
        seconds, results[method] = timed(be, lambda m=method: count_pairs(be, keys, m), repeat=repeat)
        row[f"{method}_seconds"] = seconds
        row[f"{method}_keys_per_second"] = keys.size / seconds
    (sorted_keys, sorted_counts), (hashed_keys, hashed_counts) = results["sort"], results["hash"]
    row["distinct"] = int(sorted_keys.size)
    row["equal"] = bool((sorted_keys.size == hashed_keys.size) and (sorted_keys == hashed_keys).all()
                        and (sorted_counts == hashed_counts).all())
    row["hash_over_sort"] = row["hash_seconds"] / row["sort_seconds"]
    return row


def markdown(rows: list[dict[str, Any]], repeat: int) -> str:
    lines = [
        "# Pair counting: sort (`xp.unique`) vs hash (open addressing, atomics on GPU)",
        "",
        f"Window pair keys of synthetic Zipf tokens (vocabulary {N_VOCAB:,}, mean length {MEAN_LENGTH}, "
        f"w = {WINDOW}); mean of {repeat} runs after a warm-up. Ratio = hash seconds / sort seconds "
        "(> 1: hash slower). `python bench/studies/pair_count.py`",
        "",
        "| backend | keys | distinct | sort s | hash s | sort keys/s | hash keys/s | hash/sort | equal |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r['backend']} | {r['keys']:,} | {r['distinct']:,} | {r['sort_seconds']:.3f} | "
                     f"{r['hash_seconds']:.3f} | {r['sort_keys_per_second']:.3g} | {r['hash_keys_per_second']:.3g} | "
                     f"{r['hash_over_sort']:.2f} | {r['equal']} |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000_000, 10_000_000, 50_000_000])
    parser.add_argument("--backends", nargs="+", default=["numpy", *(["cupy"] if cuda_available() else [])])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--smoke", action="store_true", help="20,000 keys, one repeat, no results written")
    args = parser.parse_args()
    if args.smoke:
        args.sizes, args.repeat = [20_000], 1
    rows = []
    for name in args.backends:
        be = get_backend(name)
        for n in args.sizes:
            keys, n_chunks = pair_keys(be, n)
            row = {**compare(be, keys, args.repeat), "chunks": n_chunks}
            rows.append(row)
            print(f"{name} {n:,} keys: sort {row['sort_seconds']:.3f} s, hash {row['hash_seconds']:.3f} s "
                  f"(hash/sort {row['hash_over_sort']:.2f})", file=sys.stderr, flush=True)
            del keys
    text = markdown(rows, args.repeat)
    if args.smoke:
        print(text)
        return 0 if all(r["equal"] for r in rows) else 1
    write_results("pair_count", {"repeat": args.repeat, "n_vocab": N_VOCAB, "mean_length": MEAN_LENGTH,
                                 "window": WINDOW, "rows": rows}, text)
    print(text)
    return 0 if all(r["equal"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
