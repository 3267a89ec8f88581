"""The `best` preset's title-link bonuses across encoders: in cosine units (the old calibration,
tuned on all-MiniLM-L6-v2) and in units of each query's cosine standard deviation over all chunks
(`fusion.link_bonus_unit`), on 2Wiki and MuSiQue-100, R@2/R@5.

    python bench/studies/link_bonus.py
    python bench/studies/link_bonus.py --encoders multilingual-e5-small/torch --grid cosine_std:5,2 cosine_std:3,1.2 --append

Chunk vectors come from bench/studies/encoders.py's cache (the other index stages do not depend on the
encoder). Writes bench/results/link_bonus.md and .json.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, RESULTS, write_results
from bench.studies.encoders import DATASETS, base_index, candidate_encoder, embeddings, with_encoder

from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import Experiment
from gpu_tigrag.presets import preset, preset_with

ENCODERS = ("all-MiniLM-L6-v2/torch", "multilingual-e5-small/torch")
#: (unit, question bonus, bridge bonus); the first is the old `best`, the second the new default
GRID = (("absolute", 0.5, 0.2), ("cosine_std", 5.0, 2.0), ("cosine_std", 3.0, 1.2), ("cosine_std", 8.0, 3.2),
        ("cosine_std", 2.0, 0.8))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--encoders", nargs="+", default=list(ENCODERS))
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa", "musique_train100"])
    parser.add_argument("--grid", nargs="+", metavar="UNIT:Q,B", help="(unit, question, bridge) points instead of GRID")
    parser.add_argument("--append", action="store_true", help="keep the rows of bench/results/link_bonus.json")
    args = parser.parse_args()
    grid = GRID if not args.grid else [(g.split(":")[0], *map(float, g.split(":")[1].split(","))) for g in args.grid]
    rows = []
    for spec in args.encoders:
        encoder = candidate_encoder(spec)
        for name in args.datasets:
            base = base_index(name)
            index = with_encoder(base, encoder, embeddings(name, base, encoder))
            experiment = Experiment(index, load_dataset(DATA / DATASETS[name]), backend="numpy", encoder=encoder)
            vectors = experiment.encoder.encode(experiment.texts, kind="query")
            spread = float(np.mean((index.embeddings @ vectors.T).std(axis=0)))
            for unit, question, bridge in grid:
                config = preset_with("best", {"tigrag.fusion.link_bonus_unit": unit, "tigrag.fusion.question_link_bonus": question,
                                              "tigrag.fusion.bridge_link_bonus": bridge})
                metrics = experiment.report(experiment.run_config("best", config))["metrics"]
                row = {"encoder": spec, "dataset": name, "unit": unit, "question": question, "bridge": bridge,
                       "mean_cosine_std": spread, "recall@2": metrics["recall@2"], "recall@5": metrics["recall@5"],
                       "is_preset": config == preset("best")}
                rows.append(row)
                print(row, file=sys.stderr, flush=True)
    if args.append and (RESULTS / "link_bonus.json").is_file():
        rows = json.loads((RESULTS / "link_bonus.json").read_text())["rows"] + rows
        rows.sort(key=lambda r: (r["encoder"], r["dataset"]))
    for r in rows:  # the preset may have changed since a row was measured
        r["is_preset"] = (r["unit"], r["question"], r["bridge"]) == (
            preset("best").tigrag.fusion.link_bonus_unit, preset("best").tigrag.fusion.question_link_bonus,
            preset("best").tigrag.fusion.bridge_link_bonus)
    write_results("link_bonus", {"rows": rows}, markdown(rows))
    return 0


def markdown(rows: list[dict]) -> str:
    lines = ["# Title-link bonuses of the `best` preset across encoders", "",
             "Command: `python bench/studies/link_bonus.py`. `absolute`: bonuses added in cosine units (the old calibration, "
             "tuned on MiniLM); `cosine_std`: in standard deviations of the query's cosine over all chunks. "
             "**bold**: the `best` preset.", "",
             "| encoder | dataset | mean cosine std | unit | question bonus | bridge bonus | R@2 | R@5 |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mark = "**" if r["is_preset"] else ""
        lines.append(f"| {r['encoder']} | {r['dataset']} | {r['mean_cosine_std']:.3f} | {mark}{r['unit']}{mark} | "
                     f"{r['question']} | {r['bridge']} | {100 * r['recall@2']:.2f} | {100 * r['recall@5']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
