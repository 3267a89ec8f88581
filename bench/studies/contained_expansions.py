"""Expanded queries whose entity another entity of the question contains: the question's vector instead of a pass
(issue 31, item 3).

    python bench/studies/contained_expansions.py [--datasets musique_train100 2wikimultihopqa] [--index e5|minilm]
        [--speed]

A hop's bridging entities often come in pairs where one name is part of the other: "Begum" beside "Ameena Begum",
a passage title "Halden" beside the entity "Royal Conservatory of Halden". The max-cosine rerank takes the best of
a question's vectors, and the pass over "question Ameena Begum" already holds the shorter name, so
`tigrag.fusion.contained_expansions=question` gives the contained entity the question's hop-1 vector instead of its
own pass (gpu_tigrag/methods/tigrag/expansion.py; its tokens still seed the hop). Under `best`'s cap of 5 passes
the passes it saves go to the next entities of the bridging order. Rows: `best` (which takes it), `best` without it,
both uncapped, and with the cap at 4 and 3 passes (the issue's ≤ 4 texts per question); `paper` with and without.
2Wiki's first half is the developer half, its second half held back; MuSiQue-100 whole. Each row's R@5 is tested
against `best` with every expansion embedded (paired randomisation test). `--speed` also times `best` end to end
with and without it. Writes bench/results/contained_expansions[_minilm].{json,md}.
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

SETTING = "tigrag.fusion.contained_expansions"
PASSES = "tigrag.fusion.expansion_passes"
INDEXES = {"e5": e5_index, "minilm": dataset_index}
REFERENCE = "best, every expansion embedded"
VARIANTS = {  # label -> (preset, settings)
    REFERENCE: ("TIGRAG best", {SETTING: "text", PASSES: 0}),
    "best, contained from the question, uncapped": ("TIGRAG best", {PASSES: 0}),
    "best without contained (5 passes)": ("TIGRAG best", {SETTING: "text"}),
    "**best** (contained from the question, 5 passes)": ("TIGRAG best", {}),
    "best, 4 passes": ("TIGRAG best", {PASSES: 4}),
    "best, 3 passes": ("TIGRAG best", {PASSES: 3}),
    "paper": ("TIGRAG paper", {}),
    "paper + contained from the question": ("TIGRAG paper", {SETTING: "question"}),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--index", choices=list(INDEXES), default="e5",
                        help="e5: the engine's default index; minilm: the bench's all-MiniLM-L6-v2 index")
    parser.add_argument("--speed", action="store_true", help="also time `best` end to end with and without it")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = ("python bench/studies/contained_expansions.py --datasets " + " ".join(args.datasets)
               + f" --index {args.index}" + (" --speed" if args.speed else ""))
    encoder = ("the default multilingual-e5-small (onnx-int8) indexes" if args.index == "e5"
               else "the bench's all-MiniLM-L6-v2 indexes")
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. {encoder[0].upper() + encoder[1:]}; "
             "recall@2/5/10 (passage-level) in points; texts: encoder texts per question (the question and its "
             f"expanded queries); Δ against `{REFERENCE}` (`contained_expansions=text`, `expansion_passes=0`), R@5 with "
             "the paired randomisation test's p-value.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = INDEXES[args.index](name)
        rows = {label: run_halves(name, label, index, dataset, system, settings)
                for label, (system, settings) in VARIANTS.items()}
        payload["datasets"][name] = rows
        lines += delta_table(name, dataset, rows, REFERENCE)
        if args.speed:
            timing = payload["datasets"][name]["speed"] = end_to_end(
                index, dataset, {"without": {SETTING: "text"}, "best": {}})
            old, new = timing["without"], timing["best"]
            lines += end_to_end_line(dataset, "`best` without contained", old, "`best`", new)
    text = "\n".join(lines)
    print(text)
    write_results("contained_expansions" + ("" if args.index == "e5" else f"_{args.index}"), payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
