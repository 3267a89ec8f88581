"""What the two title-link lift studies share (spectrag_lift.py, litesemrag_lift.py): the r × λ grid on top of a
method's best without the lift, the developer choice, the runs and their tables."""

from __future__ import annotations

import sys

from bench.studies.spectrag_links import against, recall

SEEDS = (1, 2, 3)
LIFTS = (0.1, 0.2, 0.3, 0.5, 0.7, 1.0)
#: the datasets whose developer queries choose (label of the developer part per dataset)
DEVELOPER = {"musique_train100": "all", "2wikimultihopqa": "first half"}
GRID_ROW = "best without lift + lift"
#: SciFact is the check that the lift does no harm where passages do not name each other: registered systems only
CHECK_ONLY = ("beir_scifact",)


def grid(method: str, label: str, best_without_lift: dict) -> dict[str, tuple[str, dict]]:
    """{row: (system, settings)}: `method`'s best without the lift plus the lift at each r and λ."""
    return {f"{GRID_ROW} r {r}, λ {lift}": (label, {**best_without_lift, f"{method}.link_seeds": r,
                                                  f"{method}.link_lift": lift})
            for r in SEEDS for lift in LIFTS}


def run_rows(index, dataset, name: str, parts: dict, variants: dict, encoder: str, rows: dict) -> None:
    """Each variant's recall on each part of dataset `name`, into `rows` under "encoder: variant"."""
    for row, (system, settings) in variants.items():
        rows[f"{encoder}: {row}"] = {label: recall(index, dataset, queries, system, settings)
                                     for label, queries in parts.items()}
        print(name, encoder, row,
              {label: [round(v, 2) for v in value["recall"]] for label, value in rows[f"{encoder}: {row}"].items()},
              file=sys.stderr, flush=True)


def table(name: str, n_queries: int, rows: dict, parts: dict) -> list[str]:
    """The dataset's markdown table: R@2/5/10 per part and R@5 against the same index's Hybrid."""
    header = " | ".join(f"{label} R@2 / R@5 / R@10 | {label} R@5 vs Hybrid" for label in parts)
    lines = [f"## {name} ({n_queries} queries)", "", f"| index: system | {header} |", "|---|" + "---|---|" * len(parts)]
    for row_name, row in rows.items():
        hybrid = rows[row_name.split(":")[0] + ": Hybrid"]
        figures = " | ".join(" / ".join(f"{v:.2f}" for v in row[label]["recall"]) + " | "
                             + ("" if row_name.endswith(": Hybrid") else against(row[label], hybrid[label]))
                             for label in parts)
        lines.append(f"| {row_name} | {figures} |")
    return lines + [""]


def developer_choice(payload: dict) -> list[str]:
    """The grid row of the best mean R@2/5/10 over the developer queries of the e5 index (each dataset weighing the
    same), recorded in `payload` as "chosen"; its markdown lines (none without both developer datasets)."""
    tables = payload["datasets"]
    if not all(name in tables for name in DEVELOPER):
        return []
    scores = {row: sum(sum(tables[name][row][part]["recall"]) / 3 for name, part in DEVELOPER.items()) / 2
              for row in tables["2wikimultihopqa"] if row.startswith(f"e5: {GRID_ROW}")}
    best = max(scores, key=scores.get)
    payload["chosen"] = {"row": best, "developer_score": scores[best]}
    return ["## Chosen on the developer queries", "",
            f"- **{best.split(': ', 1)[1]}** ({scores[best]:.2f}): mean R@2/5/10 over "
            + " and ".join(f"{name} ({part})" for name, part in DEVELOPER.items()) + " on the e5 index.", ""]


def without_per_query(payload: dict) -> dict:
    """`payload` without the per-query R@5 lists the paired tests read (the JSON keeps the means)."""
    for rows in payload["datasets"].values():
        for row in rows.values():
            for part in row.values():
                part.pop("r5", None)
    return payload


def run_study(script: str, title: str, doc: str, method: str, label: str, registered: dict, best_without_lift: dict,
              index_of, extra=None) -> int:
    """A lift study's whole run from the command line (--datasets, --encoders): per dataset, on each encoder's
    index (`index_of(name, encoder)`), the registered rows and, except on CHECK_ONLY datasets, the grid; then the
    tables, `extra(name, dataset, encoders, payload)`'s lines, the developer choice; writes bench/results/<stem>."""
    import argparse

    from bench.common import DATA, write_results
    from bench.studies.encoders import DATASETS
    from bench.studies.spectrag_default_index import halves
    from gpu_tigrag.evaluate.datasets import load_dataset

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa", "beir_scifact"],
                        choices=list(DATASETS))
    parser.add_argument("--encoders", nargs="+", default=["e5", "MiniLM"], choices=["e5", "MiniLM"])
    args = parser.parse_args()
    command = f"python bench/studies/{script} " + " ".join(["--datasets", *args.datasets, "--encoders", *args.encoders])
    payload: dict = {"command": command, "datasets": {}}
    lines = [f"# {title}", "", f"Command: `{command}`. " + " ".join(doc.split("\n\n", 2)[2].split("Writes")[0].split()),
             ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        parts = halves(name, dataset)
        rows: dict = {}
        variants = registered if name in CHECK_ONLY else {**registered, **grid(method, label, best_without_lift)}
        for encoder in args.encoders:
            run_rows(index_of(name, encoder), dataset, name, parts, variants, encoder, rows)
        payload["datasets"][name] = rows
        lines += table(name, len(dataset.queries), rows, parts)
        lines += extra(name, dataset, args.encoders, payload) if extra else []
    lines += developer_choice(payload)
    text = "\n".join(lines)
    print(text)
    write_results(script.removesuffix(".py"), without_per_query(payload), text)
    return 0
