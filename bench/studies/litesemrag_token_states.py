"""LiteSemRAG with multilingual-e5-small's token states instead of all-MiniLM-L6-v2's (issue 35, item 2).

    python bench/studies/litesemrag_token_states.py [--datasets musique_train100 2wikimultihopqa]

On each dataset's default index (multilingual-e5-small passage vectors, .cache/bench/e5_NAME), LiteSemRAG's stage
built twice: with the default token encoder (all-MiniLM-L6-v2, the stand-in the notes name for the paper's
DeBERTa; cached by bench/method_claims.py as e5_NAME_litesemrag) and with `litesemrag.token_encoder=
multilingual-e5-small` (cached as e5_NAME_litesemrag_e5states). LiteSemRAG `paper` and `best` and Hybrid on each,
R@2 / R@5 / R@10 / MRR@10 in points; 2Wiki by halves (the first is the developer half). Writes
bench/results/litesemrag_token_states.{json,md}.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, DATA, default_encoder_index, write_results  # noqa: E402

SYSTEMS = ("Hybrid", "LiteSemRAG", "LiteSemRAG best")
METRICS = ("recall_dedup@2", "recall_dedup@5", "recall_dedup@10", "mrr@10")


def staged(name: str, token_encoder: str | None):
    """The default index of `name` with a LiteSemRAG stage of `token_encoder` (None: the default), built once."""
    from bench.method_claims import default_index
    from gpu_tigrag.index.build import add_method
    from gpu_tigrag.index.store import load_index, save_index
    from gpu_tigrag.methods.litesemrag.config import LitesemragIndexConfig

    if token_encoder is None:
        return default_index(name)
    path = CACHE / f"e5_{name}_litesemrag_e5states"
    if not (path / "manifest.json").is_file():
        config = dataclasses.replace(LitesemragIndexConfig(), token_encoder=token_encoder)
        save_index(add_method(default_encoder_index(name), "litesemrag", config=config, show_progress=True), path)
    return load_index(path)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=["musique_train100", "2wikimultihopqa"],
                        choices=["musique_train100", "2wikimultihopqa", "beir_scifact"])
    args = parser.parse_args()
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.experiment import run_experiment

    command = "python bench/studies/litesemrag_token_states.py --datasets " + " ".join(args.datasets)
    payload: dict = {"command": command, "datasets": {}}
    lines = ["# LiteSemRAG's token states: all-MiniLM-L6-v2 against multilingual-e5-small", "",
             f"Command: `{command}`. The default index (multilingual-e5-small passage vectors) of each dataset, its "
             "LiteSemRAG stage built with each token encoder; R@2 / R@5 / R@10 / MRR@10 in points (passage-level "
             "recall). 2Wiki's first half is the developer half.", ""]
    for name in args.datasets:
        dataset = load_dataset(DATA / name)
        n = len(dataset.queries)
        parts = {"all": slice(0, n)} if name != "2wikimultihopqa" else {"first half": slice(0, n // 2),
                                                                         "second half": slice(n // 2, n)}
        rows: dict = {}
        for label, encoder in (("MiniLM token states", None), ("e5 token states", "multilingual-e5-small")):
            index = staged(name, encoder)
            for part, span in parts.items():
                subset = dataclasses.replace(dataset, queries=dataset.queries[span])
                report = run_experiment(index, subset, list(SYSTEMS), backend="numpy")["systems"]
                for system in SYSTEMS:
                    rows.setdefault(f"{label}: {system}", {})[part] = [100 * report[system]["metrics"][m]
                                                                       for m in METRICS]
        payload["datasets"][name] = rows
        header = " | ".join(f"{part} R@2 / R@5 / R@10 / MRR@10" for part in parts)
        lines += [f"## {name} ({n} queries)", "", f"| token states: system | {header} |", "|---|" + "---|" * len(parts)]
        for row_name, row in rows.items():
            lines.append(f"| {row_name} | " + " | ".join(" / ".join(f"{v:.2f}" for v in row[part]) for part in parts)
                         + " |")
        lines.append("")
    text = "\n".join(lines)
    print(text)
    write_results("litesemrag_token_states", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
