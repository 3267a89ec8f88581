"""Query cost against corpus size (issues 24, 33): TIGRAG's q/s and peak memory at 10k-1M synthetic passages
under the defaults (`auto`: the engine chooses by the index's size), the exact mode (full chunks × B blocks,
exact PPR: the reference) and the sparse mode (`tigrag.blocks=sparse`, `tigrag.ppr.algorithm=push`), both
presets; and recall of each mode on 2Wiki and MuSiQue-100.

Each measurement runs in a fresh process (`--worker`), which loads the index, warms up on 8 queries and
times `Retriever.retrieve` over the queries; the parent samples the RSS of that process tree (peak
RSS, index load included). The synthetic indexes are `bench/scale.py`'s (stand-ins `hashing:256` and
`capitalized`, built once under .cache/bench/scale_N); queries are 6 words from a passage's text,
as there. The exact mode at 300k+ passages runs fewer queries (it answers ~1 q/s); q/s is per query.

Usage: python bench/query_scale.py [--sizes 10000 100000 300000 1000000] [--queries 2000] [--no-recall] [--latency N]
Writes bench/results/query_scale.{json,md}; `--sizes` with no size, or `--no-recall`, keeps that
section's rows from the previous run (each row records its code version and the machine's load).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

if not __package__:
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import CACHE, RESULTS, code_version, dataset_runs, write_results
from bench.scale import index_command, run_measured, synth

#: "defaults": no setting given, so `auto` chooses by the index's size (tigrag.sparse_min_chunks); then both
#: explicit modes
MODES = {"defaults": {},
         "exact": {"tigrag.blocks": "full", "tigrag.ppr.algorithm": "exact"},
         "sparse": {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "push"}}
PRESETS = ("paper", "best")
#: the recall table's modes: both above, and the sparse blocks without caps over the exact PPR, whose
#: rankings should be the exact mode's (the sparse computation alone, no approximation)
RECALL_MODES = {"exact": MODES["exact"], "defaults": MODES["defaults"], "sparse": MODES["sparse"],
                "sparse, no caps, exact PPR": {"tigrag.blocks": "sparse", "tigrag.ppr.algorithm": "exact",
                                                         "tigrag.pool_max": 0, "tigrag.postings_max": 0}}


def synthetic_queries(n: int, count: int) -> list[str]:
    with open(synth(n)) as lines:
        return [" ".join(json.loads(line)["text"].split()[3:9]) for _, line in zip(range(count), lines)]


def worker(index_path: str, preset_name: str, mode: str, queries_file: str) -> None:
    """Time retrieval of the queries in `queries_file` (one per line) and print one JSON line."""
    from gpu_tigrag.index.store import load_index
    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    queries = Path(queries_file).read_text().splitlines()
    start = time.perf_counter()
    index = load_index(index_path)
    load_seconds = time.perf_counter() - start
    retriever = Retriever(index, preset_with(preset_name, MODES[mode]), backend="numpy")
    retriever.retrieve(queries[:8], k=10)  # warm-up: kernels compiled, device arrays prepared
    chosen = dict(retriever.chosen_modes)
    retriever.timer.seconds.clear()
    start = time.perf_counter()
    results = retriever.retrieve(queries, k=10)
    seconds = time.perf_counter() - start
    pools = sorted(h.pool_size for r in results for h in r.hops)
    print(json.dumps({"queries": len(queries), "seconds": seconds, "queries_per_second": len(queries) / seconds,
                      "load_seconds": load_seconds, "batch_size": retriever.batch_size(),
                      "median_pool": pools[len(pools) // 2] if pools else 0, "auto_chose": chosen,
                      "step_seconds": dict(retriever.timer.seconds)}))


def measured_worker(n: int, preset_name: str, mode: str, queries: list[str]) -> dict:
    """`measure` under run_measured's RSS sampling (peak RSS of the worker's process tree)."""
    path = CACHE / f"scale_queries_{n}_{len(queries)}.txt"
    path.write_text("\n".join(queries) + "\n")
    out = CACHE / f"scale_query_{n}_{preset_name}_{mode}.json"
    command = [sys.executable, __file__, "--worker", str(CACHE / f"scale_{n}"), preset_name, mode, str(path),
               "--out", str(out)]
    sampled = run_measured(command)
    return {**json.loads(out.read_text()), "peak_rss_mib": sampled["peak_rss_mib"]}


def index_bytes(n: int) -> int:
    manifest = json.loads((CACHE / f"scale_{n}" / "manifest.json").read_text())
    folder = CACHE / f"scale_{n}" / manifest.get("generation", "")
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def n_chunks(n: int) -> int:
    """Chunks of the synthetic index of n passages (its generation's manifest)."""
    pointer = json.loads((CACHE / f"scale_{n}" / "manifest.json").read_text())
    manifest = json.loads((CACHE / f"scale_{n}" / pointer.get("generation", "") / "manifest.json").read_text())
    return int(manifest["counts"]["chunks"])


def sparse_min_chunks() -> int:
    from gpu_tigrag.methods.tigrag.config import TigragQueryConfig

    return TigragQueryConfig().sparse_min_chunks


def mode_label(row: dict) -> str:
    """The row's mode; for the defaults, what `auto` chose ("defaults → sparse, push")."""
    chose = row.get("auto_chose")
    if row["mode"] != "defaults" or chose is None:
        return row["mode"]
    return f"defaults → {chose.get('tigrag.blocks', '?')}, {chose.get('tigrag.ppr.algorithm', '?')}"


def scale_section(sizes: list[int], count: int) -> list[dict]:
    rows = []
    for n in sizes:
        if not (CACHE / f"scale_{n}" / "manifest.json").is_file():
            run_measured(index_command(synth(n), CACHE / f"scale_{n}", 8192))
        for preset_name in PRESETS:
            for mode in MODES:
                slow = mode == "exact" or (mode == "defaults" and n_chunks(n) < sparse_min_chunks())
                queries = synthetic_queries(n, max(100, count // 10) if slow and n > 100_000 else count)
                row = {"passages": n, "preset": preset_name, "mode": mode, "index_mib": index_bytes(n) / 2**20,
                       "code_version": code_version(), "load": list(os.getloadavg()),
                       **measured_worker(n, preset_name, mode, queries)}
                rows.append(row)
                print({k: v for k, v in row.items() if k != "step_seconds"}, file=sys.stderr, flush=True)
    return rows


def recall_section(names: list[str]) -> list[dict]:
    """R@2/5/10 of both presets in both modes through the evaluation path; share of identical top-10s."""
    from gpu_tigrag.evaluate.experiment import Experiment, query_dataset
    from gpu_tigrag.presets import preset_with

    rows = []
    for name, index, queries, encoder in dataset_runs(names):
        experiment = Experiment(index, query_dataset(name, queries), backend="numpy", encoder=encoder)
        for preset_name in PRESETS:
            reference = None
            for mode, overrides in RECALL_MODES.items():
                run = experiment.run_config(f"{preset_name} {mode}", preset_with(preset_name, overrides))
                report = experiment.report(run)
                ranked = [r.chunk_ids[:10] for r in run.results]
                reference = reference or ranked
                pools = sorted(h.pool_size for r in run.results for h in r.hops)
                row = {"dataset": name, "preset": preset_name, "mode": mode, "code_version": code_version(),
                       **{k: report["metrics"][k] for k in ("recall@2", "recall@5", "recall@10")},
                       "identical_top10": sum(a == b for a, b in zip(ranked, reference)) / len(ranked),
                       "median_pool": pools[len(pools) // 2], "max_pool": pools[-1]}
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    return rows


def latency_section(name: str, count: int) -> list[dict]:
    """One query at a time (`retrieve([q])`) in both modes, both presets, on a dataset's first `count`
    questions, interleaved query by query; vectors cached first (the encoder is excluded)."""
    import statistics

    from gpu_tigrag.methods.tigrag.retriever import Retriever
    from gpu_tigrag.presets import preset_with

    rows = []
    for _, index, queries, encoder in dataset_runs([name]):
        texts = [q.text for q in list(queries)[:count]]
        retrievers = {(p, mode): Retriever(index, preset_with(p, overrides), encoder=encoder, backend="numpy")
                      for p in PRESETS for mode, overrides in MODES.items()}
        for retriever in retrievers.values():
            retriever.retrieve(texts)  # warm: vectors cached, kernels compiled, device arrays prepared
        times: dict = {key: [] for key in retrievers}
        for text in texts:
            for key, retriever in retrievers.items():
                start = time.perf_counter()
                retriever.retrieve([text])
                times[key].append(1000 * (time.perf_counter() - start))
        for (preset_name, mode), ms in times.items():
            rows.append({"dataset": name, "preset": preset_name, "mode": mode, "queries": len(texts),
                         "median_ms": statistics.median(ms), "p90_ms": sorted(ms)[int(0.9 * len(ms))],
                         "code_version": code_version(), "load": list(os.getloadavg())})
            print(rows[-1], file=sys.stderr, flush=True)
    return rows


def markdown(payload: dict) -> str:
    lines = ["# Query cost against corpus size: the defaults, the exact and the sparse mode", "",
             "2 cores, NumPy backend (each row records the machine's load). Defaults: no mode setting given, so "
             "`tigrag.blocks=auto` and `tigrag.ppr.algorithm=auto` choose by the index's size (the sparse path from "
             f"`tigrag.sparse_min_chunks` = {sparse_min_chunks():,} chunks; the row says what they chose). "
             "Exact mode: full chunks × B blocks and exact PPR (the reference, "
             "`tigrag.blocks=full`, `tigrag.ppr.algorithm=exact`); sparse mode: `tigrag.blocks=sparse` and "
             "`tigrag.ppr.algorithm=push` (with the defaults `tigrag.pool_max` and `tigrag.postings_max`).", ""]
    rows = payload["scale"]
    if rows:
        lines += ["## Synthetic corpora (stand-ins `hashing:256`, `capitalized`)", "",
                  f"Command: `{payload.get('scale_command', '')}`.", "",
                  "Each row is a fresh process: index load, 8 warm-up queries, then the timed queries (2 hops, "
                  "k = 10); peak RSS of the process, index load included; growths are against the smallest size "
                  "(the process's own ~0.5 GB of libraries and compiled kernels are in every row).", "",
                  "| passages | preset | mode | queries | q/s | q/s ÷ q/s at the smallest size | batch | median pool | "
                  "peak RSS (MiB) | index on disk (MiB) | RSS growth | index growth |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        smallest = min(r["passages"] for r in rows)
        base = {(r["preset"], r["mode"]): r["queries_per_second"] for r in rows if r["passages"] == smallest}
        first = {(r["preset"], r["mode"]): r for r in rows if r["passages"] == smallest}
        for r in rows:
            ratio = r["queries_per_second"] / base[(r["preset"], r["mode"])]
            start = first[(r["preset"], r["mode"])]
            lines.append(f"| {r['passages']:,} | {r['preset']} | {mode_label(r)} | {r['queries']:,} | "
                         f"{r['queries_per_second']:.1f} | {ratio:.2f} | {r['batch_size']} | {r['median_pool']:,} | "
                         f"{r['peak_rss_mib']:,.0f} | {r['index_mib']:,.0f} | "
                         f"{r['peak_rss_mib'] / start['peak_rss_mib']:.1f}× | {r['index_mib'] / start['index_mib']:.1f}× |")
        largest = max(r["passages"] for r in rows)
        lines += ["", "Ratio of q/s at the largest size to q/s at the smallest (target ≥ 0.5):", ""]
        for (preset_name, mode), q in base.items():
            top = next(r for r in rows if r["passages"] == largest and (r["preset"], r["mode"]) == (preset_name, mode))
            lines.append(f"- {preset_name}, {mode}: {top['queries_per_second'] / q:.2f} "
                         f"({largest:,} vs {smallest:,} passages)")
    if payload.get("latency"):
        lines += ["", "## One query at a time (2Wiki)", "", f"Command: `{payload.get('latency_command', '')}`. "
                  "`retrieve([q])` per question, the four retrievers interleaved query by query, query vectors cached "
                  "beforehand (the encoder excluded).", "", "| preset | mode | queries | median ms | p90 ms |",
                  "|---|---|---|---|---|"]
        for r in payload["latency"]:
            lines.append(f"| {r['preset']} | {r['mode']} | {r['queries']} | {r['median_ms']:.1f} | {r['p90_ms']:.1f} |")
    if payload["recall"]:
        lines += ["", "## Recall on the shared data (all-MiniLM-L6-v2 reference indexes)", "",
                  f"Command: `{payload.get('recall_command', '')}`.", "",
                  "| dataset | preset | mode | R@2 | R@5 | R@10 | top-10 identical to exact | median / max pool |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in payload["recall"]:
            lines.append(f"| {r['dataset']} | {r['preset']} | {r['mode']} | {100 * r['recall@2']:.2f} | "
                         f"{100 * r['recall@5']:.2f} | {100 * r['recall@10']:.2f} | {100 * r['identical_top10']:.1f}% | "
                         f"{r['median_pool']:,} / {r['max_pool']:,} |")
        for mode in [m for m in RECALL_MODES if m != "exact"]:
            changes = [s[k] - e[k] for s in payload["recall"] if s["mode"] == mode
                       for e in payload["recall"] if e["mode"] == "exact"
                       and (e["dataset"], e["preset"]) == (s["dataset"], s["preset"])
                       for k in ("recall@2", "recall@5", "recall@10")]
            if changes:
                loss, gain = max(0.0, -min(changes)), max(0.0, max(changes))
                lines += ["", f"{mode}: largest recall loss from the exact mode {100 * loss:.2f} points "
                              f"({'within' if loss <= 0.005 else 'outside'} the 0.5-point tolerance), largest gain "
                              f"{100 * gain:.2f} points."]
    return "\n".join(lines)


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        import contextlib
        import io

        args = sys.argv[2:]
        out = None
        if "--out" in args:
            out = args[args.index("--out") + 1]
            args = args[: args.index("--out")]
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            worker(*args)
        text = buffer.getvalue()
        if out:
            Path(out).write_text(text.strip().splitlines()[-1])
        print(text, end="")
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[10_000, 100_000, 300_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument("--datasets", nargs="*", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--latency", type=int, default=0, metavar="N",
                        help="also time N 2Wiki questions one at a time in both modes (0: keep the previous rows)")
    parser.add_argument("--render", action="store_true", help="rewrite the markdown from the JSON, running nothing")
    args = parser.parse_args()
    if args.render:
        payload = json.loads((RESULTS / "query_scale.json").read_text())
        (RESULTS / "query_scale.md").write_text(markdown(payload).rstrip() + "\n")
        return
    previous_path = RESULTS / "query_scale.json"
    previous = json.loads(previous_path.read_text()) if previous_path.is_file() else {}
    command = "python bench/query_scale.py" + "".join(f" {a}" for a in sys.argv[1:])
    payload = {"arguments": command, "load": list(os.getloadavg()), "modes": MODES}
    # a section not run now keeps its rows (and command) from the previous run; each row records its code version
    if args.sizes:
        payload["scale"], payload["scale_command"] = scale_section(args.sizes, args.queries), command
    else:
        payload["scale"] = previous.get("scale", [])
        payload["scale_command"] = previous.get("scale_command", previous.get("arguments", ""))
    if args.no_recall:
        payload["recall"] = previous.get("recall", [])
        payload["recall_command"] = previous.get("recall_command", previous.get("arguments", ""))
    else:
        payload["recall"], payload["recall_command"] = recall_section(args.datasets), command
    if args.latency:
        payload["latency"], payload["latency_command"] = latency_section("2wikimultihopqa", args.latency), command
    else:
        payload["latency"] = previous.get("latency", [])
        payload["latency_command"] = previous.get("latency_command", "")
    write_results("query_scale", payload, markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
