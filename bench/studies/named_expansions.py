"""Expanded queries whose entity the question already names: the question's own vector instead of an encoder pass (issue 31, item 3).

    python bench/studies/named_expansions.py [--datasets musique_train100 2wikimultihopqa]

Under `best`, 16-19% of the texts "question entity" embedded for hop 2 repeat a name the question already holds
(its title tokens a run of the question's). `tigrag.fusion.named_expansions=question` gives those the question's
hop-1 vector instead (gpu_tigrag/methods/tigrag/expansion.py); `unlinked` (best only: it needs title links) gives it
also to every entity that names no passage beyond hop 1's. On the default (e5) indexes: recall@2/5/10 and
encoder texts per question of `best` and `paper` with each setting; 2Wiki's first half is the developer half,
its second half held back; MuSiQue-100 whole. Each row's R@5 is tested against the same preset with "text"
(paired randomisation test). Writes bench/results/named_expansions.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, write_results  # noqa: E402
from bench.studies.spectrag_default_index import CUTOFFS, e5_index, halves  # noqa: E402

SETTING = "tigrag.fusion.named_expansions"


def run(index, dataset, queries, system: str, settings: dict) -> dict:
    from dataclasses import replace

    from gpu_tigrag.evaluate.experiment import run_experiment

    part = replace(dataset, queries=queries)
    report = run_experiment(index, part, [system], backend="numpy", settings=settings)
    row = report["systems"][system]
    return {"recall": [100 * row["metrics"][f"recall_dedup@{k}"] for k in CUTOFFS],
            "r5": [float(v) for v in row["per_query"]["recall_dedup@5"]],
            "texts_per_query": row["encoder_texts_per_query"]}


def run_halves(name: str, label: str, index, dataset, system: str, settings: dict) -> dict:
    """`run` on each part of `halves(name, dataset)`, {part: row}, with a progress line labelled `label`."""
    rows = {part: run(index, dataset, queries, system, settings) for part, queries in halves(name, dataset).items()}
    print(name, label, {p: (r["recall"], r["texts_per_query"]) for p, r in rows.items()}, file=sys.stderr, flush=True)
    return rows


def delta_table(name: str, dataset, rows: dict, reference: str) -> list[str]:
    """Markdown lines of `rows` ({variant: run_halves' row}) for each part of `halves(name, dataset)`: recall, texts
    per question, and Δ R@2 / Δ R@5 against the row `reference`, R@5 with the paired randomisation test's p-value."""
    from gpu_tigrag.evaluate.significance import randomization_test

    parts = list(halves(name, dataset))
    lines = [f"## {name} ({len(dataset.queries)} queries)", "",
             "| variant | " + " | ".join(f"{p} R@2 / R@5 / R@10 | texts | Δ R@2 | Δ R@5" for p in parts) + " |",
             "|---|" + "---|---|---|---|" * len(parts)]
    for label, row in rows.items():
        cells = []
        for part in parts:
            r, b = row[part], rows[reference][part]
            d5 = sum(x - y for x, y in zip(r["r5"], b["r5"])) * 100 / len(r["r5"])
            delta = (" | " if label == reference else f"{r['recall'][0] - b['recall'][0]:+.2f} | {d5:+.2f} "
                     f"(p {randomization_test(r['r5'], b['r5']):.3f})")
            cells.append(f"{' / '.join(f'{v:.2f}' for v in r['recall'])} | {r['texts_per_query']:.2f} | {delta}")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines + [""]


def end_to_end(index, dataset, variants: dict[str, dict], system: str = "best", rounds: int = 2) -> dict:
    """End to end q/s of preset `system` under each of `variants` ({label: settings}), the index's encoder with no
    vector cache (the figure a user sees), rounds alternating between the variants in one process; best round
    of each, and its encoder texts per question."""
    import time

    from gpu_tigrag.encoders import index_encoder_config, load_encoder
    from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
    from gpu_tigrag.presets import preset_with

    questions = [q.text for q in dataset.queries]
    encoder = load_encoder(index_encoder_config(index))
    encoder.encode(questions[:8], kind="query")  # loaded and warm before the first timed round
    seconds: dict[str, list[float]] = {label: [] for label in variants}
    texts: dict[str, float] = {}
    for _ in range(rounds):
        for label, settings in variants.items():
            retriever = TigragRetriever(index, preset_with(system, settings), encoder=encoder, backend="numpy")
            start = time.perf_counter()
            retriever.retrieve(questions, k=10)
            seconds[label].append(time.perf_counter() - start)
            texts[label] = retriever.timer.encoded_texts / len(questions)
    return {label: {"queries_per_second": len(questions) / min(runs), "seconds": runs, "texts_per_query": texts[label]}
            for label, runs in seconds.items()}


def end_to_end_line(dataset, before: str, old: dict, after: str, new: dict) -> list[str]:
    """Markdown lines: `end_to_end`'s q/s and texts per question of the variant labelled `before` (`old`) and of
    `after` (`new`), and their ratio."""
    return [f"End to end, all {len(dataset.queries)} questions, the index's encoder with no vector cache, best of 2 "
            f"alternating rounds: {before} {old['queries_per_second']:.2f} q/s ({old['texts_per_query']:.2f} texts per "
            f"question), {after} {new['queries_per_second']:.2f} q/s ({new['texts_per_query']:.2f}): "
            f"**{new['queries_per_second'] / old['queries_per_second']:.2f}×**.", ""]


def index_label(index) -> str:
    """The index's encoder and runtime, as its manifest records them."""
    return f"{index.encoder_name} ({index.encoder_backend})"


#: `best`'s expansion passes before the answer-type order (bench/studies/typed_expansions.py): the studies that were
#: measured against that `best` pin it, so that a rerun gives the rows their results pages recorded
BRIDGE_FIVE = {"tigrag.fusion.expansion_passes": 5, "tigrag.fusion.expansion_order": "bridge"}


def variant_study(doc: str, script: str, variants: dict[str, tuple[str, dict]], reference: str,
                  speed_variants: dict[str, dict], results: str, pairs: tuple | None = None,
                  best_base: dict | None = None) -> int:
    """The command line of a study that runs `variants` ({label: (system, settings)}) on each dataset's e5 or MiniLM
    index (`--index`), 2Wiki by halves, and tables them against the row `reference` (`delta_table`); `--speed` also
    times the two `speed_variants` ({label: settings}, before then after) end to end. `doc` is the study's module
    doc (its first line the title), `script` its path under bench/, `results` the name of its results files
    (`_minilm` added for the MiniLM indexes). `pairs`, (compute, render): with `--pairs`, `compute(index, dataset)`
    is stored per dataset and `render(name, its value)` gives its markdown lines. `best_base`: settings under every
    `best` row's own (and the speed variants'), e.g. `BRIDGE_FIVE`."""
    base = best_base or {}
    variants = {label: (system, {**base, **settings} if system == "TIGRAG best" else settings)
                for label, (system, settings) in variants.items()}
    speed_variants = {label: {**base, **settings} for label, settings in speed_variants.items()}
    from bench.common import dataset_index
    from gpu_tigrag.evaluate.datasets import load_dataset

    indexes = {"e5": e5_index, "minilm": dataset_index}
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--index", choices=list(indexes), default="e5",
                        help="e5: the engine's default index; minilm: the bench's all-MiniLM-L6-v2 index")
    parser.add_argument("--speed", action="store_true", help="also time `best` end to end before and after")
    if pairs is not None:
        parser.add_argument("--pairs", action="store_true", help="also split the pairs of value (module doc)")
    args = parser.parse_args()
    with_pairs = pairs is not None and args.pairs
    command = (f"python {script} --datasets " + " ".join(args.datasets) + f" --index {args.index}"
               + (" --speed" if args.speed else "") + (" --pairs" if with_pairs else ""))
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {doc.splitlines()[0]}", "", f"Command: `{command}`. Recall@2/5/10 (passage-level) in points; texts: "
             "encoder texts per question (the question and its expanded queries); Δ against "
             f"`{reference}`, R@5 with the paired randomisation test's p-value.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = indexes[args.index](name)
        rows = {label: run_halves(name, label, index, dataset, system, settings)
                for label, (system, settings) in variants.items()}
        payload["datasets"][name] = {"index": index_label(index), **rows}
        lines += [f"Index: {index_label(index)}.", ""] + delta_table(name, dataset, rows, reference)
        if args.speed:
            timing = payload["datasets"][name]["speed"] = end_to_end(index, dataset, speed_variants)
            (before, old), (after, new) = ((label, timing[label]) for label in speed_variants)
            lines += end_to_end_line(dataset, before, old, after, new)
        if with_pairs:
            compute, render = pairs
            payload["datasets"][name]["pairs"] = computed = compute(index, dataset)
            lines += render(name, computed)
    text = "\n".join(lines)
    print(text)
    write_results(results + ("" if args.index == "e5" else f"_{args.index}"), payload, text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.significance import randomization_test

    command = "python bench/studies/named_expansions.py --datasets " + " ".join(args.datasets)
    payload: dict = {"command": command, "datasets": {}}
    lines = ["# Expanded queries that repeat a name of the question", "", f"Command: `{command}`. The default "
             "multilingual-e5-small (onnx-int8) indexes; recall@2/5/10 (passage-level, HippoRAG's definition) in "
             "points; texts: encoder texts per question (the question and its expanded queries); Δ R@5: against the "
             "same preset with `named_expansions=text`, with the paired randomisation test's p-value. `unlinked`: the "
             "question's vector also for every entity that names no passage beyond hop 1's (a NER entity without a "
             "title in the corpus), so only entities that lead to a passage are embedded.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = e5_index(name)
        rows: dict = {}
        for system in ("TIGRAG paper", "TIGRAG best"):
            for value in ("text", "question") + (("unlinked",) if system == "TIGRAG best" else ()):
                label = f"{system}, named_expansions={value}"
                rows[label] = run_halves(name, label, index, dataset, system, {SETTING: value})
        payload["datasets"][name] = rows
        parts = list(halves(name, dataset))
        lines += [f"## {name} ({len(dataset.queries)} queries)", "",
                  "| system | " + " | ".join(f"{p} R@2 / R@5 / R@10 | texts | Δ R@5" for p in parts) + " |",
                  "|---|" + "---|---|---|" * len(parts)]
        for label, row in rows.items():
            base = rows[label.replace("=question", "=text").replace("=unlinked", "=text")]
            cells = []
            for part in parts:
                r = row[part]
                delta = ""
                if not label.endswith("=text"):
                    d = sum(a - b for a, b in zip(r["r5"], base[part]["r5"])) * 100 / len(r["r5"])
                    delta = f"{d:+.2f} (p {randomization_test(r['r5'], base[part]['r5']):.3f})"
                cells.append(f"{' / '.join(f'{v:.2f}' for v in r['recall'])} | {r['texts_per_query']:.2f} | {delta}")
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    write_results("named_expansions", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
