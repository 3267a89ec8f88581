"""`tigrag eval` end to end, this checkout against another, on the same index and questions, in one run.

    python bench/eval_gain.py --code DIR [--presets best paper] [--rounds 3] [--datasets 2wikimultihopqa ...]
    python bench/eval_gain.py --smoke      # the bundled example, this checkout only, one round; writes nothing

DIR is a checkout of the code before (e.g. `git worktree add /tmp/base <commit>`). Each round runs, for each code in
turn, a fresh `python -m gpu_tigrag.cli eval INDEX QUESTIONS --preset P --json` process (its package first on the
path) over each dataset's default index (multilingual-e5-small, `bench.common.default_encoder_index`; 2Wiki's
499 questions by default), after one untimed run of each code (numba's caches). Reports per code the medians of
q/s with query encoding, the retrieval seconds and the seconds of each retrieval step, the encoder texts per
question, the encoder's share of the time (1 − q/s with encoding ÷ q/s without the encoder), R@2 / R@5, each
round's ratio, and whether the two codes' metrics are equal. The queries are encoded by the runtime the index records, so both codes run the same
encoder runtime (each with its own kernels). Writes bench/results/eval_gain.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import (CACHE, DATA, DATASETS, ROOT, checkout_environment, cpu_name,  # noqa: E402
                          default_encoder_index, write_results)

COMMAND = "python bench/eval_gain.py"
STEPS = ("encode", "ppr", "rerank")


def evaluate(code: Path, index: Path, questions: Path, preset: str) -> dict:
    """One `tigrag eval --json` of checkout `code` in a fresh process: its JSON."""
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "eval", str(index), str(questions), "--preset",
                           preset, "--json"], capture_output=True, text=True, cwd=code, env=checkout_environment(code))
    if done.returncode:
        raise SystemExit(f"{code}: tigrag eval --preset {preset} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def summary(runs: list[dict]) -> dict:
    return {"qps": statistics.median(r["queries_per_second_with_query_encoding"] for r in runs),
            "seconds": statistics.median(r["seconds"] for r in runs),
            "steps": {s: statistics.median(r["step_seconds"].get(s, 0.0) for r in runs) for s in STEPS},
            "texts_per_query": runs[-1]["encoder_texts_per_query"],
            "encoder_share": statistics.median(1 - r["queries_per_second_with_query_encoding"]
                                               / r["queries_per_second_without_encoder"] for r in runs),
            "recall": [runs[-1]["metrics"][f"recall@{k}"] for k in (2, 5)]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, help="the checkout before")
    parser.add_argument("--presets", nargs="+", default=["best", "paper"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--datasets", nargs="+", default=["2wikimultihopqa"], choices=list(DATASETS))
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            index, questions = Path(tmp) / "index", ROOT / "examples" / "questions.json"
            subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "index", str(ROOT / "examples" / "corpus.json"),
                            "-o", str(index), "--quiet"], check=True, cwd=ROOT)
            codes, args.rounds, args.presets = [ROOT], 1, args.presets[:1]
            targets = {"example": (index, questions)}
        else:
            if args.code is None or not (args.code / "gpu_tigrag").is_dir():
                raise SystemExit("--code DIR: a checkout of the code before (a folder holding gpu_tigrag/)")
            targets = {}
            for name in args.datasets:
                default_encoder_index(name)  # built once, cached
                targets[name] = (CACHE / f"e5_{name}", DATA / DATASETS[name][1])
            codes = [args.code.resolve(), ROOT]
        rows = {}
        for name, (index, questions) in targets.items():
            for preset in args.presets:
                runs: dict[Path, list[dict]] = {code: [] for code in codes}
                for code in codes:
                    evaluate(code, index, questions, preset)  # untimed: numba's caches, the tokenizer subset
                for _ in range(args.rounds):
                    for code in codes:
                        runs[code].append(evaluate(code, index, questions, preset))
                row = {"dataset": name, "preset": preset, "codes": {str(code): summary(r) for code, r in runs.items()}}
                if len(codes) == 2:
                    before, after = (runs[code] for code in codes)
                    row["ratios"] = [b["queries_per_second_with_query_encoding"]
                                     / a["queries_per_second_with_query_encoding"] for a, b in zip(before, after)]
                    row["metrics_equal"] = all(a["metrics"] == b["metrics"] for a, b in zip(before, after))
                rows[f"{name} {preset}"] = row
                print(name, preset, json.dumps(row), file=sys.stderr, flush=True)
    if args.smoke:
        print("smoke run: nothing written", file=sys.stderr)
        return 0
    before, after = (str(code) for code in codes)
    datasets = " ".join(args.datasets)
    lines = ["# `tigrag eval` end to end, this checkout against the code before", "",
             f"Command: `{COMMAND} --code {args.code} --presets {' '.join(args.presets)} --rounds {args.rounds} "
             f"--datasets {datasets}`. CPU: {cpu_name()}. Each dataset's default index (e5, its runtime as recorded) "
             f"and its questions, no vector cache; each code in a fresh process per round, {args.rounds} alternating "
             "rounds after one untimed run each; medians. Texts: encoder texts per question; encoder share: 1 − q/s "
             "with query encoding ÷ q/s without the encoder.",
             "", "| dataset | preset | code | q/s with query encoding | texts | encoder share | R@2 / R@5 | "
             "retrieval seconds | " + " | ".join(f"{s} s" for s in STEPS) + " |",
             "|---|---|---|---|---|---|---|---|" + "---|" * len(STEPS)]
    for row in rows.values():
        for label, code in (("before (--code)", before), ("this checkout", after)):
            x = row["codes"][code]
            lines.append(f"| {row['dataset']} | {row['preset']} | {label} | {x['qps']:.1f} | {x['texts_per_query']:.2f} "
                         f"| {100 * x['encoder_share']:.0f}% | {100 * x['recall'][0]:.2f} / {100 * x['recall'][1]:.2f} "
                         f"| {x['seconds']:.2f} | " + " | ".join(f"{x['steps'][s]:.2f}" for s in STEPS) + " |")
    lines += [""] + [f"{row['dataset']} `{row['preset']}`: this ÷ before, per round "
                     f"{', '.join(f'{r:.2f}×' for r in row['ratios'])} (median **{statistics.median(row['ratios']):.2f}×**); "
                     f"metrics equal in every round: {'yes' if row['metrics_equal'] else 'no'}." for row in rows.values()]
    write_results("eval_gain", {"command": COMMAND, "code": str(args.code), "rounds": args.rounds,
                                "datasets": args.datasets, "rows": rows}, "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
