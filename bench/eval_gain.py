"""`tigrag eval` end to end, this checkout against another, on the same index and questions, in one run.

    python bench/eval_gain.py --code DIR [--presets best paper] [--rounds 3]
    python bench/eval_gain.py --smoke      # the bundled example, this checkout only, one round; writes nothing

DIR is a checkout of the code before (e.g. `git worktree add /tmp/base <commit>`). Each round runs, for each code in
turn, a fresh `python -m gpu_tigrag.cli eval INDEX QUESTIONS --preset P --json` process (its package first on the
path) over the 2Wiki default index (multilingual-e5-small, `bench.common.default_encoder_index`) and its 499
questions, after one untimed run of each code (numba's caches). Reports per code the medians of q/s with query
encoding, the retrieval seconds and the seconds of each retrieval step, each round's ratio, and whether the two
codes' metrics are equal. The queries are encoded by the runtime the index records, so both codes run the same
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
            "steps": {s: statistics.median(r["step_seconds"].get(s, 0.0) for r in runs) for s in STEPS}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, help="the checkout before")
    parser.add_argument("--presets", nargs="+", default=["best", "paper"])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            index, questions = Path(tmp) / "index", ROOT / "examples" / "questions.json"
            subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "index", str(ROOT / "examples" / "corpus.json"),
                            "-o", str(index), "--quiet"], check=True, cwd=ROOT)
            codes, args.rounds, args.presets = [ROOT], 1, args.presets[:1]
        else:
            if args.code is None or not (args.code / "gpu_tigrag").is_dir():
                raise SystemExit("--code DIR: a checkout of the code before (a folder holding gpu_tigrag/)")
            default_encoder_index("2wikimultihopqa")  # built once, cached
            index, questions = CACHE / "e5_2wikimultihopqa", DATA / DATASETS["2wikimultihopqa"][1]
            codes = [args.code.resolve(), ROOT]
        rows = {}
        for preset in args.presets:
            runs: dict[Path, list[dict]] = {code: [] for code in codes}
            for code in codes:
                evaluate(code, index, questions, preset)  # untimed: numba's caches, the tokenizer subset
            for _ in range(args.rounds):
                for code in codes:
                    runs[code].append(evaluate(code, index, questions, preset))
            row = {"codes": {str(code): summary(r) for code, r in runs.items()}}
            if len(codes) == 2:
                before, after = (runs[code] for code in codes)
                row["ratios"] = [b["queries_per_second_with_query_encoding"] / a["queries_per_second_with_query_encoding"]
                                 for a, b in zip(before, after)]
                row["metrics_equal"] = all(a["metrics"] == b["metrics"] for a, b in zip(before, after))
            rows[preset] = row
            print(preset, json.dumps(row), file=sys.stderr, flush=True)
    if args.smoke:
        print("smoke run: nothing written", file=sys.stderr)
        return 0
    before, after = (str(code) for code in codes)
    lines = ["# `tigrag eval` end to end, this checkout against the code before", "",
             f"Command: `{COMMAND} --code {args.code} --presets {' '.join(args.presets)} --rounds {args.rounds}`. "
             f"CPU: {cpu_name()}. The 2Wiki default index (e5, its runtime as recorded) and its 499 questions; each "
             f"code in a fresh process per round, {args.rounds} alternating rounds after one untimed run each; medians.",
             "", "| preset | code | q/s with query encoding | retrieval seconds | "
             + " | ".join(f"{s} s" for s in STEPS) + " |", "|---|---|---|---|" + "---|" * len(STEPS)]
    for preset, row in rows.items():
        for label, code in (("before (--code)", before), ("this checkout", after)):
            x = row["codes"][code]
            lines.append(f"| {preset} | {label} | {x['qps']:.1f} | {x['seconds']:.2f} | "
                         + " | ".join(f"{x['steps'][s]:.2f}" for s in STEPS) + " |")
    lines += [""] + [f"`{preset}`: this ÷ before, per round {', '.join(f'{r:.2f}×' for r in row['ratios'])} "
                     f"(median **{statistics.median(row['ratios']):.2f}×**); metrics equal in every round: "
                     f"{'yes' if row['metrics_equal'] else 'NO'}." for preset, row in rows.items()]
    write_results("eval_gain", {"command": COMMAND, "code": str(args.code), "rounds": args.rounds, "rows": rows},
                  "\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
