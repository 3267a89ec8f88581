"""An LLM-free signal of SpectRAG's own: title links in the utility-question slot (issue 35, item 2).

    python bench/studies/spectrag_links.py [--datasets musique_train100 2wikimultihopqa] [--encoders e5 MiniLM]

SpectRAG's heaviest signal (weight 0.28 of config2) is the edge between chunks whose LLM-written utility
questions are near; without an LLM it is dropped. `spectrag.question_signal=links` puts there what those
questions mostly ask on a Wikipedia-style corpus: a chunk that names another passage's title is linked to that
passage's chunks (gpu_tigrag/methods/spectrag/chunk_signals.py: link_signal). Each variant is SpectRAG's stage
built with or without the links, queried with the paper's settings or `SpectRAG best`'s, at α (the proximity's
share) 0.05 (best's), 0.2-0.4 and 0.5 (the paper's); "query links" adds the same pairs when the retriever starts
(`spectrag.title_links` = 0.28, a query setting: the stage and its spectral coordinates stay the code's, so a
preset can hold it); Hybrid and NaiveRAG on the same index are the reference.
Choices are read on developer queries only (2Wiki's first half, MuSiQue-100); 2Wiki's second half is held back.
Each row's R@5 is tested against Hybrid's on the same queries (paired randomisation test, two-sided).
Writes bench/results/spectrag_links.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, dataset_index, write_results  # noqa: E402
from bench.studies.spectrag_default_index import CUTOFFS, e5_index, halves  # noqa: E402

LINKS = {"question_signal": "links"}
BEST = {"spectrag.alpha": 0.05, "spectrag.ppr_norm": "rank", "spectrag.relevance_scale": "spread"}
#: the same pairs added when the retriever starts (a query setting: the stage stays the code's, the spectral
#: coordinates without them), at the utility-question signal's weight in config2
QUERY_LINKS = {"spectrag.title_links": 0.28}
VARIANTS = {  # name -> (index settings of the stage, query settings)
    "SpectRAG paper": ({}, {}),
    "SpectRAG paper + links": (LINKS, {}),
    "SpectRAG best": ({}, BEST),
    "SpectRAG best + links": (LINKS, BEST),
    "SpectRAG best, α 0.2": ({}, {**BEST, "spectrag.alpha": 0.2}),
    "SpectRAG best + links, α 0.2": (LINKS, {**BEST, "spectrag.alpha": 0.2}),
    "SpectRAG best + links, α 0.3": (LINKS, {**BEST, "spectrag.alpha": 0.3}),
    "SpectRAG best + links, α 0.4": (LINKS, {**BEST, "spectrag.alpha": 0.4}),
    "SpectRAG best, α 0.5": ({}, {**BEST, "spectrag.alpha": 0.5}),
    "SpectRAG best + links, α 0.5": (LINKS, {**BEST, "spectrag.alpha": 0.5}),
    "SpectRAG paper + query links": ({}, QUERY_LINKS),
    **{f"SpectRAG best + query links{'' if alpha == 0.05 else f', α {alpha}'}":
       ({}, {**BEST, **QUERY_LINKS, "spectrag.alpha": alpha}) for alpha in (0.05, 0.2, 0.3, 0.4, 0.5)},
}


def recall(index, dataset, queries, system: str, settings: dict) -> dict:
    """R@2/5/10 in points, and each query's R@5 (the paired test's input)."""
    from dataclasses import replace

    from gpu_tigrag.evaluate.experiment import run_experiment

    part = replace(dataset, queries=queries)
    report = run_experiment(index, part, [system], backend="numpy", settings=settings)["systems"][system]
    return {"recall": [100 * report["metrics"][f"recall_dedup@{k}"] for k in CUTOFFS],
            "r5": [float(v) for v in report["per_query"]["recall_dedup@5"]]}


def brief(row: dict) -> dict:
    return {key: value["recall"] if isinstance(value, dict) else value for key, value in row.items()}


def against(row: dict, hybrid: dict) -> str:
    """R@5 minus Hybrid's, in points, and the paired randomisation test's p-value."""
    from gpu_tigrag.evaluate.significance import randomization_test

    delta = 100 * (sum(row["r5"]) - sum(hybrid["r5"])) / len(row["r5"])
    return f"{delta:+.1f} (p {randomization_test(row['r5'], hybrid['r5']):.3f})"


def choice(datasets: dict) -> list[str]:
    """The SpectRAG variant of the best developer score on each index: the mean of R@2/5/10 over the developer
    queries (MuSiQue-100, 2Wiki's first half), each dataset weighing the same."""
    developer = [(name, "all" if name != "2wikimultihopqa" else "first half") for name in datasets]
    lines = ["## Chosen on the developer queries", ""]
    for encoder in ("e5", "MiniLM"):
        scores = {}
        for row_name in next(iter(datasets.values())):
            if not row_name.startswith(f"{encoder}: SpectRAG"):
                continue
            per = [sum(datasets[name][row_name][part]["recall"]) / 3 for name, part in developer]
            scores[row_name.split(": ", 1)[1]] = sum(per) / len(per)
        if scores:
            best = max(scores, key=scores.get)
            query_side = {name: score for name, score in scores.items() if not VARIANTS[name][0]}
            preset = max(query_side, key=query_side.get)
            lines.append(f"- {encoder}: **{best}** ({scores[best]:.2f}; `SpectRAG best` {scores['SpectRAG best']:.2f}), "
                         "mean R@2/5/10 over " + " and ".join(f"{name} ({part})" for name, part in developer) + "; "
                         f"of the query-side variants (a preset can hold them): **{preset}** ({query_side[preset]:.2f}).")
    return lines + [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--encoders", nargs="+", default=["e5", "MiniLM"], choices=["e5", "MiniLM"])
    args = parser.parse_args()
    from dataclasses import replace

    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.methods.spectrag.config import SpectragIndexConfig

    command = "python bench/studies/spectrag_links.py " + " ".join(["--datasets", *args.datasets, "--encoders",
                                                                    *args.encoders])
    payload: dict = {"command": command, "datasets": {}}
    lines = ["# SpectRAG with title links in the utility-question slot", "",
             f"Command: `{command}`. e5: the engine's default index (multilingual-e5-small, onnx-int8); MiniLM: the "
             "benchmark indexes (all-MiniLM-L6-v2). Recall@2/5/10 (passage-level, HippoRAG's definition), in points. "
             "'title links': the chunk pairs the links signal joins (0 where the stage has none); 'vs Hybrid': R@5 minus "
             "Hybrid's, in points, with the paired randomisation test's p-value (two-sided). `SpectRAG best`: "
             f"{', '.join(f'{k}={v}' for k, v in BEST.items())}.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        parts = halves(name, dataset)
        rows: dict = {}
        for encoder in args.encoders:
            base = e5_index(name) if encoder == "e5" else dataset_index(name)
            stages = {}
            for variant, (stage_settings, query_settings) in VARIANTS.items():
                key = tuple(sorted(stage_settings.items()))
                if key not in stages:
                    stages[key] = add_method(base, "spectrag", config=replace(SpectragIndexConfig(), **stage_settings))
                index = stages[key]
                links = index.stage("spectrag").stats["signals"]["question"]["edges"]
                rows[f"{encoder}: {variant}"] = {"links": links, **{
                    label: recall(index, dataset, queries, "SpectRAG", query_settings) for label, queries in parts.items()}}
                print(name, encoder, variant, brief(rows[f"{encoder}: {variant}"]), file=sys.stderr, flush=True)
            for system in ("NaiveRAG", "Hybrid"):
                rows[f"{encoder}: {system}"] = {"links": None, **{
                    label: recall(base, dataset, queries, system, {}) for label, queries in parts.items()}}
                print(name, encoder, system, brief(rows[f"{encoder}: {system}"]), file=sys.stderr, flush=True)
        payload["datasets"][name] = rows
        header = " | ".join(f"{label} R@2 / R@5 / R@10 | {label} R@5 vs Hybrid" for label in parts)
        lines += [f"## {name} ({len(dataset.queries)} queries)", "", f"| index: system | title links | {header} |",
                  "|---|---|" + "---|---|" * len(parts)]
        for row_name, row in rows.items():
            hybrid = rows[row_name.split(":")[0] + ": Hybrid"]
            figures = " | ".join(" / ".join(f"{v:.2f}" for v in row[label]["recall"]) + " | "
                                 + ("" if row_name.endswith(": Hybrid") else against(row[label], hybrid[label]))
                                 for label in parts)
            links = "" if row["links"] is None else f"{row['links']:,}"
            lines.append(f"| {row_name} | {links} | {figures} |")
        lines.append("")
    lines += choice(payload["datasets"])
    text = "\n".join(lines)
    print(text)
    write_results("spectrag_links", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
