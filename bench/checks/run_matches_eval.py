"""`tigrag run`'s TREC files scored elsewhere give `tigrag eval`'s figures: one doc-id space for runs and qrels.

    python bench/checks/run_matches_eval.py [--datasets beir_scifact 2wikimultihopqa musique_train100]
    python bench/checks/run_matches_eval.py --smoke     # the bundled example, writes nothing

For each dataset and preset: `tigrag run INDEX DATASET [--split test] -o run.trec -k 100` (the queries the
split judges, passages named by corpus id), `tigrag eval INDEX DATASET --save-qrels qrels.trec --json`, then
ir_measures scores run.trec against qrels.trec; every measure must equal eval's figure (R@k =
recall_dedup@k, RR@10 = mrr@10, nDCG@k = ndcg@k) to 1e-9, else the check fails (exit status 1). The
datasets cover both gold shapes: SciFact's qrels name corpus ids, 2Wiki's and MuSiQue's gold names titles,
mapped to ids. The indexes are bench/bm25_parity.py's (stand-in vectors and entities, cached under
.cache/bench/): the check is about names and depth, not about the encoder. Writes
bench/results/run_matches_eval.json and .md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])

from bench.bm25_parity import CORPORA, STANDINS, build  # noqa: E402
from bench.common import CACHE, DATA, ROOT, write_results  # noqa: E402

PRESETS = ("paper", "best")
#: ir_measures' name -> the engine's metric
MEASURES = {"R@2": "recall_dedup@2", "R@5": "recall_dedup@5", "R@10": "recall_dedup@10", "RR@10": "mrr@10",
            "nDCG@10": "ndcg@10"}
TOLERANCE = 1e-9
SPLITS = {"beir_scifact": "test"}  # BEIR sets: the split scored; the others are HippoRAG-protocol folders


def tigrag(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"tigrag {' '.join(args)} failed:\n{done.stderr[-2000:]}")
    return done.stdout


def compare(index: Path, dataset: Path, split: str | None, preset: str, work: Path) -> dict:
    """eval's figures and ir_measures' on run's TREC file, for one preset."""
    import ir_measures

    split_args = ["--split", split] if split else []
    run_file, qrels_file = work / f"{preset}.trec", work / f"{preset}.qrels"
    tigrag("run", str(index), str(dataset), *split_args, "-o", str(run_file), "-k", "100", "--preset", preset, "-q")
    engine = json.loads(tigrag("eval", str(index), str(dataset), *split_args, "--save-qrels", str(qrels_file),
                               "--json", "--cutoffs", "2,5,10", "--preset", preset, "-q"))
    measures = [ir_measures.parse_measure(name) for name in MEASURES]
    scored = ir_measures.calc_aggregate(measures, ir_measures.read_trec_qrels(str(qrels_file)),
                                        ir_measures.read_trec_run(str(run_file)))
    external = {str(measure): float(value) for measure, value in scored.items()}
    rows = {name: {"eval": engine["metrics"][metric], "ir_measures": external[name],
                   "difference": abs(engine["metrics"][metric] - external[name])} for name, metric in MEASURES.items()}
    run_queries = {line.split()[0] for line in run_file.read_text().splitlines()}
    return {"queries": engine["queries"], "run_queries": len(run_queries), "measures": rows,
            "agree": len(run_queries) == engine["queries"] and all(r["difference"] <= TOLERANCE
                                                                   for r in rows.values())}


def markdown(payload: dict) -> str:
    lines = ["# `tigrag run`'s TREC files scored by ir_measures equal `tigrag eval`'s figures", "",
             "Command: `python bench/checks/run_matches_eval.py`. Per dataset and preset: `tigrag run INDEX DATASET "
             "[--split test] -o run.trec -k 100`, `tigrag eval INDEX DATASET --save-qrels qrels.trec --json`, "
             "ir_measures on the two files. Indexes with stand-in vectors and entities (bench/bm25_parity.py's): "
             "the check is about passage names and depth, so the figures are low and not the methods' quality.", "",
             f"| dataset | preset | queries (eval / run) | {' | '.join(MEASURES)} | max difference | agree |",
             "|---|---|---|" + "---|" * len(MEASURES) + "---|---|"]
    for name, presets in payload["datasets"].items():
        for preset, row in presets.items():
            figures = " | ".join(f"{row['measures'][m]['ir_measures']:.4f}" for m in MEASURES)
            worst = max(r["difference"] for r in row["measures"].values())
            lines.append(f"| {name} | {preset} | {row['queries']} / {row['run_queries']} | {figures} | {worst:.1e} | "
                         f"{'yes' if row['agree'] else '**no**'} |")
    lines += ["", "Each figure is ir_measures' on run's file; eval's differs from it by at most the difference shown."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--smoke", action="store_true", help="the bundled example only; writes nothing")
    args = parser.parse_args(argv)
    payload: dict = {"tolerance": TOLERANCE, "datasets": {}}
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch)
        if args.smoke:
            examples = ROOT / "examples"
            index = work / "example_index"
            tigrag("index", str(examples / "corpus.json"), "-o", str(index), *STANDINS, "-q")
            targets = [("example", index, examples / "questions.json", None)]
        else:
            targets = []
            for name in args.datasets:
                index = CACHE / f"bm25_{name}"
                build(DATA / CORPORA[name], index)
                targets.append((name, index, DATA / name, SPLITS.get(name)))
        for name, index, dataset, split in targets:
            (work / name).mkdir()
            payload["datasets"][name] = {preset: compare(index, dataset, split, preset, work / name)
                                         for preset in PRESETS}
            print(name, {p: r["agree"] for p, r in payload["datasets"][name].items()}, file=sys.stderr)
    text = markdown(payload)
    print(text)
    if not args.smoke:
        write_results("run_matches_eval", payload, text)
    return 0 if all(row["agree"] for presets in payload["datasets"].values() for row in presets.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
