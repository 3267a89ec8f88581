"""Fewer encoder passes per question: only the first n expanded queries of the bridging order get their own
vector (issue 31, item 3).

    python bench/studies/expansion_passes.py [--datasets musique_train100 2wikimultihopqa] [--passes 3 4 5]
        [--orders bridge unlinked] [--index e5|minilm]

Without the cap (`expansion_passes=0`), `best` embeds "question entity" for each of up to 8 bridging entities the
question does not name (6.5-6.9 encoder texts per question). `tigrag.fusion.expansion_passes=n` keeps n of those passes per question; the other
entities take the question's hop-1 vector for the rerank (their tokens still seed the hop's PPR). Which n come
first: `bridge`, the bridging order (entities naming a passage, then by PPR mass on their tokens), or
`unlinked`, entities naming no passage first (a linked entity's passage also arrives through its link bonus; an
unlinked one's only route is its vector). Chosen on the developer data (2Wiki's first half, MuSiQue-100),
reported on 2Wiki's second half (`best` took 5 passes, bridging order). Each row's R@5 is tested against `best`
without the cap (paired randomisation test). Writes bench/results/expansion_passes[_minilm].{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, dataset_index, write_results  # noqa: E402
from bench.studies.named_expansions import delta_table, end_to_end, end_to_end_line, run_halves  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402

SETTING = "tigrag.fusion.expansion_passes"
#: the order both of this study's orders start from (its "unlinked" re-ranks the bridging order), as `best` had then
ORDER = "tigrag.fusion.expansion_order"
INDEXES = {"e5": e5_index, "minilm": dataset_index}


@contextmanager
def pass_order(order: str):
    """The order `expansion_passes` keeps the first of: the engine's ("bridge"), or entities naming no passage
    first ("unlinked": the study's alternative, by re-ranking the pairs before the engine's choice)."""
    from gpu_tigrag.methods.tigrag import expansion

    engine = expansion._named_from_question

    def unlinked_first(retriever, questions, entity_texts, texts, owner, question_vectors, links=None, ranks=None,
                       repeats=None):
        if links is not None and ranks is not None and ranks.size:
            ranks = ranks + links.astype(np.int64) * (int(ranks.max()) + 1)
        return engine(retriever, questions, entity_texts, texts, owner, question_vectors, links, ranks, repeats)

    if order == "unlinked":
        expansion._named_from_question = unlinked_first
    try:
        yield
    finally:
        expansion._named_from_question = engine


def speed(index, dataset, passes: int, rounds: int = 2) -> dict:
    """End to end q/s of `best` uncapped and with `passes` (`end_to_end`), keyed by the number of passes."""
    return end_to_end(index, dataset, {str(n): {SETTING: n, ORDER: "bridge"} for n in (0, passes)}, rounds=rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--passes", nargs="+", type=int, default=[3, 4, 5])
    parser.add_argument("--orders", nargs="+", default=["bridge", "unlinked"])
    parser.add_argument("--system", default="TIGRAG best")
    parser.add_argument("--speed", type=int, default=5, metavar="N",
                        help="also time `best` end to end, uncapped against N passes (0: no timing)")
    parser.add_argument("--index", choices=list(INDEXES), default="e5",
                        help="e5: the engine's default index; minilm: the bench's all-MiniLM-L6-v2 index")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = ("python bench/studies/expansion_passes.py --datasets " + " ".join(args.datasets) + " --passes "
               + " ".join(map(str, args.passes)) + " --orders " + " ".join(args.orders) + f" --index {args.index} --speed {args.speed}")
    payload: dict = {"command": command, "datasets": {}}
    encoder = ("the default multilingual-e5-small (onnx-int8) indexes" if args.index == "e5"
               else "the bench's all-MiniLM-L6-v2 indexes")
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`. {encoder[0].upper() + encoder[1:]}, preset `best`; recall@2/5/10 (passage-level) in points; texts: encoder texts per question (the "
             "question and its expanded queries); Δ R@5 against `best` without the cap (every expansion embedded, "
             "`expansion_passes=0`), with the paired randomisation test's p-value.", ""]
    uncapped = "best, every expansion embedded"
    variants = [(uncapped, 0, "bridge")] + [(f"passes={n}, {order} first", n, order)
                                           for order in args.orders for n in args.passes]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        index = INDEXES[args.index](name)
        rows: dict = {}
        for label, passes, order in variants:
            with pass_order(order):
                rows[label] = run_halves(name, label, index, dataset, args.system, {SETTING: passes, ORDER: "bridge"})
        payload["datasets"][name] = rows
        lines += delta_table(name, dataset, rows, uncapped)
        if args.speed:
            timing = payload["datasets"][name]["speed"] = speed(index, dataset, args.speed)
            every, capped = timing["0"], timing[str(args.speed)]
            lines += end_to_end_line(dataset, "uncapped", every, f"expansion_passes={args.speed}", capped)
    text = "\n".join(lines)
    print(text)
    write_results("expansion_passes" + ("" if args.index == "e5" else f"_{args.index}"), payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
