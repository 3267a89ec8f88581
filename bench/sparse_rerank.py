"""The sparse mode's rerank against the dense mode's, before and after a change, in one run (issue 33).

    python bench/sparse_rerank.py --code DIR [--datasets 2wikimultihopqa musique_train100] [--rounds 2]
    python bench/sparse_rerank.py --smoke      # MuSiQue-100, 20 queries, this checkout only; writes nothing

For each dataset, both presets in the dense mode (the defaults) and the sparse mode (`tigrag.blocks=sparse`,
`tigrag.ppr.algorithm=push`): the retrieval seconds without the encoder and the rerank stage's seconds, over
every question with the vectors already encoded (a VectorCache shared by both checkouts, filled by an untimed
first call). Each measurement runs in a fresh process of its checkout (this one, and `--code DIR`, the code
before), the checkouts alternating round by round; the figure is the fastest round. The rankings of both
checkouts are compared too (top-10 chunk ids, every question). Writes bench/results/sparse_rerank.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__" and not __package__:  # `python bench/X.py`: the `bench` package of this checkout
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import CACHE, ROOT, code_version, write_results  # noqa: E402

#: a worker: `measure` loaded from this file, with the checkout measured first on sys.path (gpu_tigrag and
#: bench.common both from there) and the bench cache shared
WORKER = """import importlib.util, json, sys
sys.path.insert(0, sys.argv[1])
spec = importlib.util.spec_from_file_location("sparse_rerank_worker", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
limit = int(sys.argv[6]) if sys.argv[6] != "0" else None
open(sys.argv[4], "w").write(json.dumps(module.measure(sys.argv[3], limit, module.Path(sys.argv[5]))))
"""

MODES = {"dense": {}, "sparse": {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"}}
PRESETS = ("paper", "best")


def measure(dataset: str, limit: int | None, vectors: Path) -> dict:
    """Worker: every (preset, mode) on `dataset` with the checkout on sys.path (untimed fill, then timed)."""
    from bench.common import dataset_index, dataset_queries
    from gpu_tigrag.encoders import CachingEncoder, VectorCache, index_encoder_config, load_encoder
    from gpu_tigrag.retrieve.factory import make_retriever
    from gpu_tigrag.presets import preset_with

    index = dataset_index(dataset)
    queries = [q.text for q in dataset_queries(dataset)][:limit]
    encoder = CachingEncoder(load_encoder(index_encoder_config(index)), VectorCache(vectors))
    out = {}
    for preset_name in PRESETS:
        for mode, overrides in MODES.items():
            retriever = make_retriever(index, preset_with(preset_name, overrides), encoder=encoder, backend="numpy")
            retriever.retrieve(queries, k=10)  # untimed: compilation, and every text's vector into the cache
            retriever.timer.seconds.clear()
            start = time.perf_counter()
            results = retriever.retrieve(queries, k=10)
            seconds = time.perf_counter() - start
            stages = dict(retriever.timer.seconds)
            out[f"{preset_name} {mode}"] = {"seconds_without_encoder": seconds - stages.get("encode", 0.0),
                                            "rerank_seconds": stages.get("rerank", 0.0),
                                            "top10": [r.chunk_ids[:10] for r in results]}
    return out


def run_worker(checkout: Path, dataset: str, limit: int | None, vectors: Path) -> dict:
    env = dict(os.environ, TIGRAG_BENCH_CACHE=str(CACHE))
    out = CACHE / f"sparse_rerank_{dataset}_{os.getpid()}.json"
    command = [sys.executable, "-c", WORKER, str(checkout), str(Path(__file__).resolve()), dataset, str(out),
               str(vectors), str(limit or 0)]
    done = subprocess.run(command, cwd=checkout, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"the worker on {checkout} failed:\n{done.stderr[-3000:]}")
    data = json.loads(out.read_text())
    out.unlink()
    return data


def checkout_version(path: Path) -> str:
    found = subprocess.run(["git", "-C", str(path), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return found.stdout.strip() or str(path)


def markdown(payload: dict) -> str:
    lines = ["# The sparse rerank against the dense one, before and after", "",
             f"Command: `{payload['command']}`. Retrieval seconds without the encoder over every question (vectors "
             f"cached), the fastest of {payload['rounds']} alternating rounds, each in a fresh process; numpy backend, "
             f"2 CPU cores. Before: {payload['before']}; after: {payload['after']}.", ""]
    for dataset, rows in payload["datasets"].items():
        lines += [f"## {dataset} ({rows['queries']} questions)", "",
                  "| preset, mode | before: s without encoder | rerank s | after: s without encoder | rerank s | "
                  "after ÷ before | sparse ÷ dense, after | top-10 identical to before |", "|---|---|---|---|---|---|---|---|"]
        for key, row in rows["runs"].items():
            dense = rows["runs"][f"{key.split()[0]} dense"]["after"]["seconds_without_encoder"]
            lines.append(f"| {key} | {row['before']['seconds_without_encoder']:.2f} | {row['before']['rerank_seconds']:.2f} | "
                         f"{row['after']['seconds_without_encoder']:.2f} | {row['after']['rerank_seconds']:.2f} | "
                         f"{row['after']['seconds_without_encoder'] / row['before']['seconds_without_encoder']:.2f} | "
                         f"{row['after']['seconds_without_encoder'] / dense:.2f} | {100 * row['identical']:.1f}% |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--code", type=Path, help="the checkout before (a git worktree)")
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--smoke", action="store_true", help="MuSiQue-100, 20 queries, this checkout; writes nothing")
    parser.add_argument("--vectors", type=Path, default=CACHE / "sparse_rerank_vectors", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.smoke:
        data = measure("musique_train100", 20, args.vectors)
        print(json.dumps({k: {m: v for m, v in row.items() if m != "top10"} for k, row in data.items()}, indent=1))
        return
    if args.code is None:
        parser.error("--code DIR (the checkout before) is needed outside --smoke")
    payload = {"command": " ".join(["python bench/sparse_rerank.py", *sys.argv[1:]]), "rounds": args.rounds,
               "before": checkout_version(args.code), "after": code_version(), "datasets": {}}
    for dataset in args.datasets:
        best: dict[str, dict] = {"before": {}, "after": {}}
        for round_ in range(args.rounds):
            order = [("before", args.code), ("after", ROOT)]
            for label, checkout in (order if round_ % 2 == 0 else order[::-1]):
                for key, row in run_worker(checkout, dataset, args.limit, args.vectors).items():
                    kept = best[label].get(key)
                    if kept is None or row["seconds_without_encoder"] < kept["seconds_without_encoder"]:
                        best[label][key] = row
                print(f"[{dataset} round {round_}] {label} done", file=sys.stderr, flush=True)
        runs = {}
        for key in best["after"]:
            a, b = best["after"][key], best["before"][key]
            runs[key] = {"before": {k: v for k, v in b.items() if k != "top10"},
                         "after": {k: v for k, v in a.items() if k != "top10"},
                         "identical": sum(x == y for x, y in zip(a["top10"], b["top10"])) / max(len(a["top10"]), 1)}
        payload["datasets"][dataset] = {"queries": len(next(iter(best["after"].values()))["top10"]), "runs": runs}
    write_results("sparse_rerank", payload, markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
