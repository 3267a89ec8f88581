"""Sparse PPR (forward push, `tigrag.ppr.algorithm=push`) against the exact iterate (issue 24, item 1).

On 2Wiki and MuSiQue-100, over each query's seed tokens (hop 1), in batches of B:
- top-γ agreement with the exact iterate (γ = 100): mean overlap of the top-100 sets and mean L1
  distance of their normalised weights, with the work of the push (nodes touched, rounds, edge visits),
  for both threshold rules (`mass`: r(u) ≥ ε; `edges`: r(u) ≥ ε·edges of u) over a range of ε;
- PPR queries/s of the push and of the exact iterate in the same run (each the best of --repeat
  interleaved passes, seeds to top-γ), as a ratio;
- on 2Wiki, python-igraph's personalized_pagerank (prpack, one query per call) on the same graph and
  seeds (the first --igraph-queries), timed in turn with both modes, and the ratio of each mode to it
  (where python-igraph is installed);
- recall (R@2/R@5/R@10) of the `paper` and `best` presets in both modes through the evaluation path
  (Experiment, cached encoder), and the share of queries whose top 5 is the exact mode's;
- on synthetic Zipf token graphs (gpu_tigrag.synth.zipf_token_csr, no stopwords removed) of growing
  size: queries/s of both modes on the same seeds, to show which one grows with the graph.

Usage: python bench/studies/ppr_sparse.py [--datasets ...] [--batch 256] [--repeat 3] [--smoke]
Writes bench/results/ppr_sparse.{json,md}; --smoke runs a small synthetic graph only and writes nothing.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import dataset_runs, igraph_graph, write_results

from gpu_tigrag.backend import get_backend
from gpu_tigrag.evaluate.experiment import Experiment, query_dataset
from gpu_tigrag.methods.tigrag.config import PPRConfig
from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix, top_gamma
from gpu_tigrag.ops.push_ppr import PushGraph, push_pagerank
from gpu_tigrag.presets import preset_with
from gpu_tigrag.text.tokens import valid_tokens

GAMMA = PPRConfig().top_gamma
#: (threshold rule, ε) of the agreement table
SETTINGS = [("mass", e) for e in (1e-4, 3e-5, 1e-5, 1e-6)] + [("edges", e) for e in (1e-5, 1e-6, 3e-7, 1e-7)]
#: (threshold rule, ε) of the push in the recall table (besides the exact mode)
RECALL_SETTINGS = (("edges", 1e-5), ("edges", 1e-6), ("edges", 1e-7), ("mass", 1e-5))
#: synthetic graphs: (chunks, vocabulary) at mean 60 tokens per chunk, window 4, and the push settings tried
SYNTHETIC = ((10_000, 20_000), (100_000, 200_000), (300_000, 600_000))
SYNTHETIC_SETTINGS = (("edges", 1e-6), ("edges", 1e-7), ("mass", 1e-5))


def query_seeds(index, texts: list[str]) -> list[np.ndarray]:
    """Each query's seed tokens, as `BaseRetriever.query_seeds` finds them."""
    cfg = index.config
    return [index.vocab.encode(valid_tokens(t, cfg.tokens, cfg.chunk.language)) for t in texts]


def exact_tops(be, transition, seeds, n_vocab: int, config: PPRConfig, batch: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, weights), queries × γ, of the exact iterate, block by block."""
    ids, weights = [], []
    for i in range(0, len(seeds), batch):
        block = seeds[i:i + batch]
        scores, _ = personalized_pagerank(be, transition, seed_matrix(be, block, n_vocab), config)
        got = top_gamma(be, scores, config.top_gamma)
        ids.append(be.to_host(got[0]).T)
        weights.append(be.to_host(got[1]).T)
    return np.concatenate(ids), np.concatenate(weights)


def push_tops(be, graph, seeds, config: PPRConfig, batch: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(ids, weights, stats), queries × γ, of the push, block by block."""
    ids, weights, stats = [], [], []
    for i in range(0, len(seeds), batch):
        result = push_pagerank(be, graph, seeds[i:i + batch], config)
        got = result.top_gamma(be, config.top_gamma)
        ids.append(be.to_host(got[0]).T)
        weights.append(be.to_host(got[1]).T)
        stats.append(result.stats)
    return np.concatenate(ids), np.concatenate(weights), np.concatenate(stats)


def agreement(ids: np.ndarray, weights: np.ndarray, ref_ids: np.ndarray, ref_weights: np.ndarray) -> dict:
    """Mean overlap of the top-γ sets and mean L1 distance of the normalised weights (0 off a set)."""
    overlaps, l1 = [], []
    for a, wa, b, wb in zip(ids, weights, ref_ids, ref_weights):
        mine = {int(k): float(v) for k, v in zip(a, wa) if v > 0}
        ref = {int(k): float(v) for k, v in zip(b, wb) if v > 0}
        overlaps.append(len(mine.keys() & ref.keys()) / max(len(ref), 1))
        l1.append(sum(abs(mine.get(k, 0.0) - ref.get(k, 0.0)) for k in mine.keys() | ref.keys()))
    return {"top_gamma_overlap": float(np.mean(overlaps)), "weights_l1": float(np.mean(l1))}


def best_of(runs: list[Callable[[], Any]], repeat: int) -> list[float]:
    """Seconds of each callable, the best of `repeat` passes run in turn (warm-up pass first)."""
    for run in runs:
        run()
    best = [float("inf")] * len(runs)
    for _ in range(repeat):
        for i, run in enumerate(runs):
            start = time.perf_counter()
            run()
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def igraph_run(adjacency, seeds: list[np.ndarray], damping: float) -> Callable[[], Any] | None:
    """A pass of python-igraph's prpack PPR over `seeds`, one query per call; None without igraph."""
    try:
        import igraph  # noqa: F401
    except ImportError:
        return None
    graph = igraph_graph(adjacency)

    def run() -> None:
        for s in seeds:
            graph.personalized_pagerank(directed=False, damping=damping, reset_vertices=np.unique(s).tolist(),
                                        weights="weight", implementation="prpack")
    return run


def ppr_section(be, name: str, index, seeds: list[np.ndarray], args) -> tuple[list[dict], dict]:
    """Agreement and speed rows of one dataset, and its igraph comparison (2Wiki only)."""
    exact_cfg = PPRConfig()
    transition = TransitionMatrix.from_adjacency(be, index.graph)
    graph = PushGraph.from_adjacency(be, index.graph)
    ref_ids, ref_weights = exact_tops(be, transition, seeds, index.n_vocab, exact_cfg, args.batch)
    rows = []
    for rule, epsilon in SETTINGS:
        cfg = PPRConfig(algorithm="push", push_threshold=rule, push_epsilon=epsilon)
        ids, weights, stats = push_tops(be, graph, seeds, cfg, args.batch)
        exact_s, push_s = best_of([lambda: exact_tops(be, transition, seeds, index.n_vocab, exact_cfg, args.batch),
                                   lambda: push_tops(be, graph, seeds, cfg, args.batch)], args.repeat)
        row = {"dataset": name, "threshold": rule, "epsilon": epsilon, **agreement(ids, weights, ref_ids, ref_weights),
               "touched": float(stats[:, 0].mean()), "rounds": float(stats[:, 1].mean()),
               "edge_visits": float(stats[:, 2].mean()), "exact_qps": len(seeds) / exact_s,
               "push_qps": len(seeds) / push_s, "push_over_exact": exact_s / push_s}
        rows.append(row)
        print(row, file=sys.stderr, flush=True)
    versus = {}
    wanted = name == "2wikimultihopqa" and args.igraph_queries > 0
    igraph = igraph_run(index.graph, seeds[:args.igraph_queries], exact_cfg.damping) if wanted else None
    if igraph is not None:
        cfg = PPRConfig(algorithm="push", push_epsilon=args.epsilon)
        exact_s, push_s, igraph_s = best_of([
            lambda: exact_tops(be, transition, seeds, index.n_vocab, exact_cfg, args.batch),
            lambda: push_tops(be, graph, seeds, cfg, args.batch), igraph], args.repeat)
        igraph_qps = min(args.igraph_queries, len(seeds)) / igraph_s
        versus = {"queries": len(seeds), "igraph_queries": min(args.igraph_queries, len(seeds)),
                  "igraph_qps": igraph_qps, "exact_qps": len(seeds) / exact_s, "push_qps": len(seeds) / push_s,
                  "push_threshold": cfg.push_threshold, "push_epsilon": cfg.push_epsilon,
                  "exact_over_igraph": len(seeds) / exact_s / igraph_qps,
                  "push_over_igraph": len(seeds) / push_s / igraph_qps}
        print(versus, file=sys.stderr, flush=True)
    return rows, versus


def recall_section(name: str, index, queries, encoder) -> list[dict]:
    """R@2/5/10 of both presets, exact and push, through the evaluation path."""
    experiment = Experiment(index, query_dataset(name, queries), backend="numpy", encoder=encoder)
    rows = []
    for preset_name in ("paper", "best"):
        reference = None
        for method, rule, epsilon in [("exact", None, None)] + [("push", *s) for s in RECALL_SETTINGS]:
            overrides = {"tigrag.ppr.algorithm": method}
            if method == "push":
                overrides.update({"tigrag.ppr.push_threshold": rule, "tigrag.ppr.push_epsilon": epsilon})
            run = experiment.run_config(f"{preset_name} {method}", preset_with(preset_name, overrides))
            report = experiment.report(run)
            ranked = [r.chunk_ids[:5] for r in run.results]
            reference = reference or ranked
            row = {"dataset": name, "preset": preset_name, "method": method, "threshold": rule, "epsilon": epsilon,
                   **{k: report["metrics"][k] for k in ("recall@2", "recall@5", "recall@10")},
                   "ppr_seconds": report["step_seconds"].get("ppr"),
                   "identical_top5": sum(a == b for a, b in zip(ranked, reference)) / len(ranked)}
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    return rows


def synthetic_section(be, sizes, n_queries: int, batch: int, repeat: int,
                      settings: tuple[tuple[str, float], ...]) -> list[dict]:
    """Both modes on Zipf token graphs of growing size, same seeds: q/s, agreement and push work."""
    from gpu_tigrag.index.graph import cooccurrence_graph
    from gpu_tigrag.synth import zipf_token_csr

    rows = []
    for chunks, vocab in sizes:
        indptr, ids = zipf_token_csr(np, chunks, vocab, 60, seed=1)
        adjacency = cooccurrence_graph(be, indptr, ids, vocab, 4)
        rng = np.random.default_rng(7)
        used = np.flatnonzero(np.diff(adjacency.indptr) > 0)
        seeds = [rng.choice(used[used >= 100], size=6) for _ in range(n_queries)]  # content-like tokens
        exact_cfg = PPRConfig()
        configs = [PPRConfig(algorithm="push", push_threshold=rule, push_epsilon=eps) for rule, eps in settings]
        transition = TransitionMatrix.from_adjacency(be, adjacency)
        graph = PushGraph.from_adjacency(be, adjacency)
        ref = exact_tops(be, transition, seeds, vocab, exact_cfg, batch)
        runs = [lambda: exact_tops(be, transition, seeds, vocab, exact_cfg, batch)]
        runs += [lambda cfg=cfg: push_tops(be, graph, seeds, cfg, batch) for cfg in configs]
        seconds = best_of(runs, repeat)
        for cfg, push_s in zip(configs, seconds[1:]):
            got = push_tops(be, graph, seeds, cfg, batch)
            row = {"chunks": chunks, "vocab": vocab, "edges": int(adjacency.nnz),
                   "max_edges": int(np.diff(adjacency.indptr).max()), "queries": n_queries,
                   "threshold": cfg.push_threshold, "push_epsilon": cfg.push_epsilon,
                   **agreement(got[0], got[1], *ref), "touched": float(got[2][:, 0].mean()),
                   "edge_visits": float(got[2][:, 2].mean()), "exact_qps": n_queries / seconds[0],
                   "push_qps": n_queries / push_s, "push_over_exact": seconds[0] / push_s}
            rows.append(row)
            print(row, file=sys.stderr, flush=True)
    return rows


def recall_summary(rows: list[dict]) -> list[str]:
    """One line per push setting: its largest recall change from the exact mode over datasets, presets, cutoffs."""
    exact = {(r["dataset"], r["preset"]): r for r in rows if r["method"] == "exact"}
    worst: dict[tuple[str, float], float] = {}
    for r in rows:
        if r["method"] == "push":
            ref = exact[(r["dataset"], r["preset"])]
            change = max(abs(r[k] - ref[k]) for k in ("recall@2", "recall@5", "recall@10"))
            key = (r["threshold"], r["epsilon"])
            worst[key] = max(worst.get(key, 0.0), change)
    default = (PPRConfig().push_threshold, PPRConfig().push_epsilon)
    return [""] + [f"- push, {rule}, ε = {eps:g}{' (the default)' if (rule, eps) == default else ''}: largest recall "
                   f"change from exact **{100 * change:.2f} points**" for (rule, eps), change in worst.items()]


def decision(payload: dict) -> list[str]:
    """Why the push's defaults are what they are, with this run's figures."""
    cfg = PPRConfig()
    default = [r for r in payload["agreement"]
               if (r["threshold"], r["epsilon"]) == (cfg.push_threshold, cfg.push_epsilon)]
    changes = [abs(r[k] - e[k]) for r in payload["recall"] if r["method"] == "push"
               and (r["threshold"], r["epsilon"]) == (cfg.push_threshold, cfg.push_epsilon)
               for e in payload["recall"] if e["method"] == "exact" and (e["dataset"], e["preset"]) == (r["dataset"], r["preset"])
               for k in ("recall@2", "recall@5", "recall@10")]
    worst = 100 * max(changes) if changes else float("nan")
    synthetic = [r for r in payload.get("synthetic", [])
                 if (r["threshold"], r["push_epsilon"]) == (cfg.push_threshold, cfg.push_epsilon)]
    growth = ""
    if len(synthetic) > 1:
        small, large = synthetic[0], synthetic[-1]
        growth = (f" (from {small['edges']:,} to {large['edges']:,} edges, its queries/s falls "
                  f"{small['push_qps'] / large['push_qps']:.1f}×, the exact iterate's "
                  f"{small['exact_qps'] / large['exact_qps']:.1f}×)")
    lines = ["", "## Decision", "",
             "- **Threshold rule `edges`** (Andersen-Chung-Lang: push u while r(u) ≥ ε·edges of u). Each push moves "
             "at least (1 − d)·ε of mass per edge it visits, so a query visits at most 1/((1 − d)·ε) edges whatever "
             f"the graph: on the synthetic graphs its work stays bounded{growth}. The `mass` rule (r(u) ≥ ε) agrees better at equal ε but pushes the frequent tokens too, whose "
             "edges grow with the corpus: its work grows with the graph (synthetic table), and at equal work it "
             "agrees less on 2Wiki and MuSiQue (compare rows with similar edge visits). Both report p(u) + "
             "(1 − d)·r(u), which keeps the scores at most PPR and restores the frequent tokens' share that `edges` "
             "leaves unpushed.",
             f"- **ε = {cfg.push_epsilon:g}**: largest recall change from the exact mode {worst:.2f} points over both "
             "datasets, both presets and R@2/5/10 (the other settings: the lines above; a larger ε saves work and "
             "moves recall more, a smaller one costs more than the exact iterate on these small graphs)"
             + "".join(f"; {r['dataset']}: {100 * r['top_gamma_overlap']:.1f}% top-100 overlap, "
                       f"{r['push_over_exact']:.2f}× the exact iterate's PPR queries/s" for r in default) + ".",
             f"- **Default method stays `exact`** (unchanged, bit for bit). The push at its defaults "
             f"{'meets' if worst <= 0.5 else 'misses'} the 0.5-point recall criterion on 2Wiki and MuSiQue-100 for "
             "both presets; making it the default is the engineer's decision. Its agreement with the exact top-γ "
             "falls slowly as the graph grows at a fixed ε (synthetic table), which a larger corpus should re-measure."]
    return lines


def markdown(payload: dict) -> str:
    lines = ["# Sparse PPR: forward push against the exact iterate (issue 24, item 1)", "",
             "Command: `python bench/studies/ppr_sparse.py`", "",
             f"numpy backend, this machine (2 shared cores: timings are ratios measured in the same run), "
             f"batch {payload['batch']}, γ = {GAMMA}, damping {PPRConfig().damping}; exact = the default iterate "
             f"(tol {PPRConfig().tol:g}). Seeds: each query's tokens (hop 1).", "",
             "## Top-γ agreement and speed", "",
             "| dataset | threshold | ε | top-100 overlap | L1 of weights | nodes touched | rounds | edge visits "
             "| exact q/s | push q/s | push / exact |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in payload["agreement"]:
        lines.append(f"| {r['dataset']} | {r['threshold']} | {r['epsilon']:g} | {100 * r['top_gamma_overlap']:.2f}% | "
                     f"{r['weights_l1']:.4f} | {r['touched']:,.0f} | {r['rounds']:.1f} | {r['edge_visits']:,.0f} | "
                     f"{r['exact_qps']:.0f} | {r['push_qps']:.0f} | {r['push_over_exact']:.2f}× |")
    versus = payload.get("igraph") or {}
    if versus:
        lines += ["", "## Against python-igraph (prpack, one query per call), 2Wiki", "",
                  f"Each the best of {payload['repeat']} passes run in turn (exact and push over the "
                  f"{versus['queries']} queries, igraph over the first {versus['igraph_queries']}).", "",
                  f"- igraph: {versus['igraph_qps']:.1f} queries/s",
                  f"- exact iterate: {versus['exact_qps']:.0f} queries/s, **{versus['exact_over_igraph']:.1f}×** igraph",
                  f"- push ({versus['push_threshold']}, ε = {versus['push_epsilon']:g}): {versus['push_qps']:.0f} queries/s, "
                  f"**{versus['push_over_igraph']:.1f}×** igraph"]
    lines += ["", "## Recall through the evaluation path", "",
              "| dataset | preset | method | threshold | ε | R@2 | R@5 | R@10 | top-5 identical to exact | PPR seconds |",
              "|---|---|---|---|---|---|---|---|---|---|"]
    for r in payload["recall"]:
        eps = "" if r["epsilon"] is None else f"{r['epsilon']:g}"
        lines.append(f"| {r['dataset']} | {r['preset']} | {r['method']} | {r['threshold'] or ''} | {eps} | "
                     f"{100 * r['recall@2']:.2f} | "
                     f"{100 * r['recall@5']:.2f} | {100 * r['recall@10']:.2f} | {100 * r['identical_top5']:.1f}% | "
                     f"{r['ppr_seconds']:.2f} |")
    for summary in recall_summary(payload["recall"]):
        lines.append(summary)
    lines += ["", "## Synthetic Zipf token graphs (no stopwords removed), same seeds for both modes", "",
              "| chunks | vocabulary | edges (most on a node) | threshold | ε | top-100 overlap | L1 of weights "
              "| nodes touched | edge visits | exact q/s | push q/s | push / exact |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in payload["synthetic"]:
        lines.append(f"| {r['chunks']:,} | {r['vocab']:,} | {r['edges']:,} ({r['max_edges']:,}) | {r['threshold']} | "
                     f"{r['push_epsilon']:g} | "
                     f"{100 * r['top_gamma_overlap']:.2f}% | {r['weights_l1']:.4f} | {r['touched']:,.0f} | "
                     f"{r['edge_visits']:,.0f} | {r['exact_qps']:.1f} | {r['push_qps']:.1f} | "
                     f"{r['push_over_exact']:.2f}× |")
    if payload["recall"]:
        lines += decision(payload)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--epsilon", type=float, default=PPRConfig().push_epsilon,
                        help="push ε of the igraph comparison (default threshold rule)")
    parser.add_argument("--igraph-queries", type=int, default=100,
                        help="2Wiki queries of each igraph pass (0: no igraph comparison)")
    parser.add_argument("--synthetic-queries", type=int, default=256)
    parser.add_argument("--no-recall", action="store_true", help="skip the recall table (PPR only)")
    parser.add_argument("--smoke", action="store_true", help="a small synthetic graph only; writes nothing")
    args = parser.parse_args()
    be = get_backend("numpy")
    if args.smoke:
        rows = synthetic_section(be, ((2_000, 4_000),), 16, 8, 1, (("edges", 1e-7),))
        assert rows[0]["top_gamma_overlap"] > 0.9, rows
        print(markdown({"batch": 8, "repeat": 1, "agreement": [], "recall": [], "synthetic": rows}))
        return
    payload: dict[str, Any] = {"batch": args.batch, "repeat": args.repeat, "agreement": [], "recall": [], "igraph": {}}
    for name, index, queries, encoder in dataset_runs(args.datasets):
        seeds = [s for s in query_seeds(index, [q.text for q in queries]) if len(s)]
        rows, versus = ppr_section(be, name, index, seeds, args)
        payload["agreement"] += rows
        payload["igraph"] = payload["igraph"] or versus
        if not args.no_recall:
            payload["recall"] += recall_section(name, index, queries, encoder)
    payload["synthetic"] = synthetic_section(be, SYNTHETIC, args.synthetic_queries, args.batch, args.repeat,
                                             SYNTHETIC_SETTINGS)
    text = markdown(payload)
    write_results("ppr_sparse", payload, text)
    print(text)


if __name__ == "__main__":
    main()
