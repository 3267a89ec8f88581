"""LiteSemRAG's title-link lift: the bridging entities of its top chunks that are another passage's subject (issue 35).

    python bench/studies/litesemrag_lift.py [--datasets musique_train100 2wikimultihopqa beir_scifact] [--encoders e5 MiniLM]

LiteSemRAG's semantic graph links a query's matched spans to the chunks that hold them; what its top chunks name
and the query does not, it never follows. On a Wikipedia-style corpus such a name is often the title of the passage
the next hop needs. `litesemrag.link_seeds` r and `litesemrag.link_lift` λ: the ranking's first r chunks and every
chunk of each passage they name by title (directed title links, text/titles.forward_title_links) score λ × the
query's top score more, and the ranking is sorted again (ops/title_lift.py).

Rows: the grid r × λ on top of `LiteSemRAG best` without the lift (chosen on the developer queries: MuSiQue-100
and 2Wiki's first half, mean R@2/5/10; 2Wiki's second half is held back), then the registered systems: the paper's
behaviour, the paper's plus the lift alone, `LiteSemRAG best` and each of its mechanisms removed (SciFact, where
passages do not name each other's titles, is the check that the lift does no harm: registered systems only). e5: the default
index (multilingual-e5-small, onnx-int8, default chunks) with its LiteSemRAG stage (default settings), cached as
method_claims.py caches it; MiniLM: the benchmark index (all-MiniLM-L6-v2) with its stage, as litesemrag.py caches
it. R@5 is tested against Hybrid's on the same queries (paired randomisation test,
two-sided). Writes bench/results/litesemrag_lift.{json,md}.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, write_results  # noqa: E402
from bench.studies.spectrag_default_index import halves  # noqa: E402
from bench.studies.lift_study import CHECK_ONLY, developer_choice, grid, run_rows, table, without_per_query  # noqa: E402


def registered() -> dict[str, tuple[str, dict]]:
    """{row: (system, settings)}: Hybrid, NaiveRAG and the LiteSemRAG systems that hold the lift or its ablations."""
    from gpu_tigrag.methods.litesemrag import BEST_ABLATIONS

    rows = {name: (name, {}) for name in ("Hybrid", "NaiveRAG", "LiteSemRAG", "LiteSemRAG + title-link lift",
                                          "LiteSemRAG best")}
    rows.update({name: (name, {}) for name in BEST_ABLATIONS})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa", "beir_scifact"],
                        choices=list(DATASETS))
    parser.add_argument("--encoders", nargs="+", default=["e5", "MiniLM"], choices=["e5", "MiniLM"])
    args = parser.parse_args()
    from bench.litesemrag import stage_index
    from bench.method_claims import default_index
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.methods.litesemrag import BEST_WITHOUT_LIFT

    command = "python bench/studies/litesemrag_lift.py " + " ".join(["--datasets", *args.datasets, "--encoders",
                                                                     *args.encoders])
    payload: dict = {"command": command, "datasets": {}}
    lines = ["# LiteSemRAG's title-link lift", "", f"Command: `{command}`. " + " ".join(
        __doc__.split("\n\n", 2)[2].split("Writes")[0].split()), ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        parts = halves(name, dataset)
        rows: dict = {}
        for encoder in args.encoders:
            index = default_index(name) if encoder == "e5" else stage_index(name)
            variants = registered() if name in CHECK_ONLY else {**registered(),
                                                                **grid("litesemrag", "LiteSemRAG", BEST_WITHOUT_LIFT)}
            run_rows(index, dataset, name, parts, variants, encoder, rows)
        payload["datasets"][name] = rows
        lines += table(name, len(dataset.queries), rows, parts)
    lines += developer_choice(payload)
    text = "\n".join(lines)
    print(text)
    write_results("litesemrag_lift", without_per_query(payload), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
