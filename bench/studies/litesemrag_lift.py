"""LiteSemRAG's title-link lift: the bridging entities of its top chunks that are another passage's subject (issue 35).

    python bench/studies/litesemrag_lift.py [--datasets musique_train100 2wikimultihopqa] [--encoders e5 MiniLM]

LiteSemRAG's semantic graph links a query's matched spans to the chunks that hold them; what its top chunks name
and the query does not, it never follows. On a Wikipedia-style corpus such a name is often the title of the passage
the next hop needs. `litesemrag.link_seeds` r and `litesemrag.link_lift` λ: the ranking's first r chunks and every
chunk of each passage they name by title (directed title links, text/titles.forward_title_links) score λ × the
query's top score more, and the ranking is sorted again (ops/title_lift.py).

Rows: the grid r × λ on top of `LiteSemRAG best` without the lift (chosen on the developer queries: MuSiQue-100
and 2Wiki's first half, mean R@2/5/10; 2Wiki's second half is held back), then the registered systems: the paper's
behaviour, the paper's plus the lift alone, `LiteSemRAG best` and each of its mechanisms removed. e5: the default
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
from bench.studies.spectrag_links import against, recall  # noqa: E402
from bench.studies.spectrag_lift import DEVELOPER, LIFTS, SEEDS  # noqa: E402


def registered() -> dict[str, tuple[str, dict]]:
    """{row: (system, settings)}: Hybrid, NaiveRAG and the LiteSemRAG systems that hold the lift or its ablations."""
    from gpu_tigrag.methods.litesemrag import BEST_ABLATIONS

    rows = {name: (name, {}) for name in ("Hybrid", "NaiveRAG", "LiteSemRAG", "LiteSemRAG + title-link lift",
                                          "LiteSemRAG best")}
    rows.update({name: (name, {}) for name in BEST_ABLATIONS})
    return rows


def grid(best_without_lift: dict) -> dict[str, tuple[str, dict]]:
    return {f"best without lift + lift r {r}, λ {lift}": ("LiteSemRAG", {**best_without_lift,
                                                                       "litesemrag.link_seeds": r,
                                                                       "litesemrag.link_lift": lift})
            for r in SEEDS for lift in LIFTS}


def developer_choice(tables: dict) -> tuple[str, float] | None:
    """The grid row of the best mean R@2/5/10 over the developer queries, each dataset weighing the same."""
    if not all(name in tables for name in DEVELOPER):
        return None
    scores = {row: sum(sum(tables[name][row][part]["recall"]) / 3 for name, part in DEVELOPER.items()) / 2
              for row in tables["2wikimultihopqa"] if row.startswith("e5: best without lift + lift")}
    best = max(scores, key=scores.get)
    return best, scores[best]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"],
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
            for row, (system, settings) in {**registered(), **grid(BEST_WITHOUT_LIFT)}.items():
                rows[f"{encoder}: {row}"] = {label: recall(index, dataset, queries, system, settings)
                                             for label, queries in parts.items()}
                print(name, encoder, row, {label: [round(v, 2) for v in value["recall"]]
                                           for label, value in rows[f"{encoder}: {row}"].items()},
                      file=sys.stderr, flush=True)
        payload["datasets"][name] = rows
        header = " | ".join(f"{label} R@2 / R@5 / R@10 | {label} R@5 vs Hybrid" for label in parts)
        lines += [f"## {name} ({len(dataset.queries)} queries)", "", f"| index: system | {header} |",
                  "|---|" + "---|---|" * len(parts)]
        for row_name, row in rows.items():
            hybrid = rows[row_name.split(":")[0] + ": Hybrid"]
            figures = " | ".join(" / ".join(f"{v:.2f}" for v in row[label]["recall"]) + " | "
                                 + ("" if row_name.endswith(": Hybrid") else against(row[label], hybrid[label]))
                                 for label in parts)
            lines.append(f"| {row_name} | {figures} |")
        lines.append("")
    chosen = developer_choice(payload["datasets"])
    if chosen:
        payload["chosen"] = {"row": chosen[0], "developer_score": chosen[1]}
        lines += ["## Chosen on the developer queries", "",
                  f"- **{chosen[0].split(': ', 1)[1]}** ({chosen[1]:.2f}): mean R@2/5/10 over "
                  + " and ".join(f"{name} ({part})" for name, part in DEVELOPER.items()) + " on the e5 index.", ""]
    for rows in payload["datasets"].values():
        for row in rows.values():
            for part in row.values():
                part.pop("r5", None)
    text = "\n".join(lines)
    print(text)
    write_results("litesemrag_lift", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
