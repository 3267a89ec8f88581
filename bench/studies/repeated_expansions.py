"""Expanded queries whose entity repeats the question's tokens: the question's vector instead of a pass
(issue 31, item 3).

    python bench/studies/repeated_expansions.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]
        [--speed]

Many bridging entities only say the question's subject again in another form: "Jonathan Douglass Reid" or "Peter
Phillip Bonetti" for a question about "Jonathan Reid" or "Peter Bonetti", a NER duplicate "Harris W. Fawell
Fawell". `tigrag.fusion.named_expansions=repeats` gives such an entity the question's hop-1 vector instead of an
encoder pass over "question entity" when its graph tokens are all the question's, or all but one with at least two
shared (`repeats_question` in gpu_tigrag/methods/tigrag/expansion.py; its tokens still seed the hop). Under the cap
on passes the passes it saves go to the next entities of the bridging order. Rows: `best` with and without it,
uncapped and under 5, 4 and 3 passes. 2Wiki's first half is the developer half, its second half held back;
MuSiQue-100 whole. Each row's R@5 is tested against `best` before it (named_expansions=question, 5 passes; paired
randomisation test). `--speed` also times `best` end to end with and without it. Writes
bench/results/repeated_expansions[_minilm].{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, dataset_index, write_results  # noqa: E402
from bench.studies.named_expansions import delta_table, end_to_end, end_to_end_line, run_halves  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402

SETTING = "tigrag.fusion.named_expansions"
PASSES = "tigrag.fusion.expansion_passes"
INDEXES = {"e5": e5_index, "minilm": dataset_index}
REFERENCE = "best before (named from the question, 5 passes)"
VARIANTS = {  # label -> (preset, settings)
    REFERENCE: ("TIGRAG best", {SETTING: "question", PASSES: 5}),
    "**best** (repeats from the question, 5 passes)": ("TIGRAG best", {PASSES: 5}),
    "best before, uncapped": ("TIGRAG best", {SETTING: "question", PASSES: 0}),
    "best, repeats, uncapped": ("TIGRAG best", {PASSES: 0}),
    "best before, 4 passes": ("TIGRAG best", {SETTING: "question", PASSES: 4}),
    "best, repeats, 4 passes": ("TIGRAG best", {PASSES: 4}),
    "best, repeats, 3 passes": ("TIGRAG best", {PASSES: 3}),
}


def runtime_of(index) -> str:
    """The index's encoder and runtime, as its manifest records them."""
    return f"{index.encoder_name} ({index.encoder_backend})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--index", choices=list(INDEXES), default="e5",
                        help="e5: the engine's default index; minilm: the bench's all-MiniLM-L6-v2 index")
    parser.add_argument("--speed", action="store_true", help="also time `best` end to end with and without it")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = ("python bench/studies/repeated_expansions.py --datasets " + " ".join(args.datasets)
               + f" --index {args.index}" + (" --speed" if args.speed else ""))
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. Recall@2/5/10 (passage-level) in points; "
             "texts: encoder texts per question (the question and its expanded queries); Δ against "
             f"`{REFERENCE}`, R@5 with the paired randomisation test's p-value.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = INDEXES[args.index](name)
        rows = {label: run_halves(name, label, index, dataset, system, settings)
                for label, (system, settings) in VARIANTS.items()}
        payload["datasets"][name] = {"index": runtime_of(index), **rows}
        lines += [f"Index: {runtime_of(index)}.", ""] + delta_table(name, dataset, rows, REFERENCE)
        if args.speed:
            timing = payload["datasets"][name]["speed"] = end_to_end(
                index, dataset, {"before": {SETTING: "question"}, "best": {}})
            lines += end_to_end_line(dataset, "`best` before", timing["before"], "`best`", timing["best"])
    text = "\n".join(lines)
    print(text)
    write_results("repeated_expansions" + ("" if args.index == "e5" else f"_{args.index}"), payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
