"""The CPU power iteration in blocks of columns: how wide a block should be.

    python bench/studies/ppr_columns.py [--datasets 2wikimultihopqa musique_train100] [--copies 1 2] [--rounds 5]
        [--widths 32 64 96 128 256]

Each query's PPR column converges and stops on its own (gpu_tigrag/ops/ppr.py), so a batch can be iterated block
by block of columns with the same scores, bit for bit (checked here for every width). One block of the whole batch
keeps vocab × B iterates (74 MB for 499 questions on 2Wiki) beyond the cache. Per dataset (its e5 index and its
questions, `--copies` times over for wider batches): the seconds of `personalized_pagerank` over the whole batch
with each block width and with one block, rounds alternating in one process (the order reversed every other round),
medians, and the median of the per-round ratios to one block. Writes bench/results/ppr_columns.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, cpu_name, write_results  # noqa: E402
from bench.studies.spectrag_default_index import e5_index  # noqa: E402

import numpy as np  # noqa: E402

WHOLE = "one block"


def timings(index, questions: list[str], widths: list[int], rounds: int) -> dict:
    """{label: seconds per round} of the batch's PPR in blocks of each width and in one block, and whether every
    width gave the one block's scores bit for bit."""
    from gpu_tigrag.backend import get_backend
    from gpu_tigrag.ops.ppr import TransitionMatrix, personalized_pagerank, seed_matrix
    from gpu_tigrag.presets import preset
    from gpu_tigrag.text.tokens import valid_tokens

    be = get_backend("numpy")
    transition = TransitionMatrix.from_adjacency(be, index.graph)
    v = seed_matrix(be, [index.vocab.encode(valid_tokens(q)) for q in questions], index.n_vocab)
    config = preset("best").tigrag.ppr
    from gpu_tigrag.ops.ppr import cpu_block_columns

    blocks = {WHOLE: v.shape[1], f"default (≤ {cpu_block_columns(index.n_vocab)})": None,
              **{f"≤ {w}": w for w in widths}}
    reference, _ = personalized_pagerank(be, transition, v, config, block_columns=v.shape[1])
    identical = all(np.array_equal(personalized_pagerank(be, transition, v, config, block_columns=w)[0], reference)
                    for w in blocks.values())
    seconds: dict[str, list[float]] = {label: [] for label in blocks}
    for r in range(rounds):
        for label in (list(blocks) if r % 2 == 0 else list(blocks)[::-1]):
            start = time.perf_counter()
            personalized_pagerank(be, transition, v, config, block_columns=blocks[label])
            seconds[label].append(time.perf_counter() - start)
    return {"columns": v.shape[1], "vocab": index.n_vocab, "identical": identical, "seconds": seconds}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique_train100"], choices=list(DATASETS))
    parser.add_argument("--copies", nargs="+", type=int, default=[1, 2], help="the questions this many times over")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--widths", nargs="+", type=int, default=[32, 64, 96, 128, 256],
                        help="block widths at most (the blocks of a batch have equal widths)")
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset

    command = ("python bench/studies/ppr_columns.py --datasets " + " ".join(args.datasets) + " --copies "
               + " ".join(map(str, args.copies)) + f" --rounds {args.rounds} --widths " + " ".join(map(str, args.widths)))
    payload: dict = {"command": command, "cpu": cpu_name(), "runs": []}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}`, on {cpu_name()}, the numpy backend (2 "
             "threads). Seconds of `personalized_pagerank` over the batch (`best`'s PPR settings), medians of "
             f"{args.rounds} alternating rounds; ratio: the median of the per-round ratios of one block's time to "
             "this width's (above 1: faster than one block). Identical: every width gave one block's scores bit for "
             "bit.", "",
             "| dataset | tokens | columns | blocks of | seconds | ratio to one block | identical |",
             "|---|---|---|---|---|---|---|"]
    for name in args.datasets:
        index = e5_index(name)
        questions = [q.text for q in load_dataset(DATA / name).queries]
        for copies in args.copies:
            run = timings(index, questions * copies, args.widths, args.rounds)
            payload["runs"].append({"dataset": name, "copies": copies, **run})
            whole = run["seconds"][WHOLE]
            for label, seconds in run["seconds"].items():
                ratio = statistics.median(a / b for a, b in zip(whole, seconds))
                lines.append(f"| {name} | {run['vocab']:,} | {run['columns']:,} | {label} | "
                             f"{statistics.median(seconds):.3f} | {ratio:.2f} | {'yes' if run['identical'] else 'NO'} |")
            print("\n".join(lines[-len(run["seconds"]):]), file=sys.stderr, flush=True)
    text = "\n".join(lines + [""])
    print(text)
    write_results("ppr_columns", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
