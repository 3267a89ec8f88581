"""Why SpectRAG `paper` falls on the engine's default index: the encoder's cosine scale, suspect by suspect.

    python bench/studies/spectrag_default_index.py [--datasets musique_train100 2wikimultihopqa]

The same chunks embedded by all-MiniLM-L6-v2 (the benchmark indexes, .cache/bench/index_NAME) and by the
default multilingual-e5-small (onnx-int8, built once under .cache/bench/e5_NAME), each with SpectRAG's stage
built over it; then SpectRAG with each suspect changed alone and together:

* `spectrag.semantic_threshold` (0.75 in the public code, a cosine of MiniLM's range): e5's cosines are
  compressed high, so 0.75 links most nearest-neighbour pairs; 0.9 links about as many as 0.75 does on MiniLM;
* `spectrag.relevance_scale` "max" (the code's cos / max cos: every chunk near 1 on e5, so the proximity
  terms decide) against "spread" ((cos - mean) / (max - mean), the same on any encoder), and "auto" (the
  default, what `paper` runs: "max" on the code's encoder, MiniLM, "spread" on any other).

NaiveRAG and Hybrid on the same index are the reference. 2Wiki reports its first half (the developer half)
and its second half apart. Writes bench/results/spectrag_default_index.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, dataset_index, default_encoder_index, write_results  # noqa: E402

MAX, SPREAD = {"spectrag.relevance_scale": "max"}, {"spectrag.relevance_scale": "spread"}
BEST_WITHOUT_SCALE = {"spectrag.alpha": 0.05, "spectrag.ppr_norm": "rank"}
VARIANTS = {  # name -> (index settings of the stage, query settings)
    "SpectRAG, the code's scale (threshold 0.75, scale max)": ({}, MAX),
    "threshold 0.9": ({"semantic_threshold": 0.9}, MAX),
    "scale spread": ({}, SPREAD),
    "threshold 0.9 + scale spread": ({"semantic_threshold": 0.9}, SPREAD),
    "SpectRAG paper (scale auto: max on MiniLM, spread on e5)": ({}, {}),
    "SpectRAG best with the max scale": ({}, {**BEST_WITHOUT_SCALE, **MAX}),
    "SpectRAG best (scale spread)": ({}, {**BEST_WITHOUT_SCALE, **SPREAD}),
}
CUTOFFS = (2, 5, 10)


def e5_index(name: str):
    """The dataset's corpus indexed with the engine's defaults (multilingual-e5-small), built once."""
    return default_encoder_index(name)


def halves(name: str, dataset) -> dict[str, list]:
    """{label: queries}: every query, and for 2Wiki its developer (first) and held-back (second) half."""
    queries = dataset.queries
    if name != "2wikimultihopqa":
        return {"all": queries}
    half = len(queries) // 2
    return {"first half": queries[:half], "second half": queries[half:]}


def recall(index, dataset, queries, system: str, settings: dict) -> list[float]:
    from dataclasses import replace

    from gpu_tigrag.evaluate.experiment import run_experiment

    part = replace(dataset, queries=queries)
    metrics = run_experiment(index, part, [system], backend="numpy", settings=settings)["systems"][system]["metrics"]
    return [100 * metrics[f"recall_dedup@{k}"] for k in CUTOFFS]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    args = parser.parse_args()
    from dataclasses import replace

    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.methods.spectrag.config import SpectragIndexConfig

    payload: dict = {"datasets": {}}
    lines = ["# SpectRAG on the default index: the encoder's cosine scale, suspect by suspect", "",
             "Command: `python bench/studies/spectrag_default_index.py`. The same chunks embedded by all-MiniLM-L6-v2 "
             "and by the default multilingual-e5-small (onnx-int8); SpectRAG's stage built over each; recall@2/5/10 "
             "(passage-level, HippoRAG's definition), in points. 'semantic links': the nearest-neighbour pairs the "
             "semantic signal links at that threshold (before the combined edge threshold).", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        parts = halves(name, dataset)
        rows: dict = {}
        for encoder, base in (("MiniLM", dataset_index(name)), ("e5", e5_index(name))):
            stages = {}
            for variant, (stage_settings, query_settings) in VARIANTS.items():
                key = tuple(sorted(stage_settings.items()))
                if key not in stages:
                    stages[key] = add_method(base, "spectrag", config=replace(SpectragIndexConfig(), **stage_settings))
                index = stages[key]
                links = index.stage("spectrag").stats["signals"]["semantic"]["edges"]
                rows[f"{encoder}: {variant}"] = {"links": links, **{
                    label: recall(index, dataset, queries, "SpectRAG", query_settings) for label, queries in parts.items()}}
                print(name, encoder, variant, rows[f"{encoder}: {variant}"], file=sys.stderr, flush=True)
            for system in ("NaiveRAG", "Hybrid"):
                rows[f"{encoder}: {system}"] = {"links": None, **{
                    label: recall(base, dataset, queries, system, {}) for label, queries in parts.items()}}
        payload["datasets"][name] = rows
        header = " | ".join(f"{label} R@2 / R@5 / R@10" for label in parts)
        lines += [f"## {name} ({len(dataset.queries)} queries)", "", f"| index: system | semantic links | {header} |",
                  "|---|---|" + "---|" * len(parts)]
        for row_name, row in rows.items():
            figures = " | ".join(" / ".join(f"{v:.2f}" for v in row[label]) for label in parts)
            links = "" if row["links"] is None else f"{row['links']:,}"
            lines.append(f"| {row_name} | {links} | {figures} |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    write_results("spectrag_default_index", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
