"""The CPU int8 encoder runtimes on recall, end-to-end speed and build time (issue 31): for each dataset and each
runtime (onnx-int8, numba-int8), the dataset indexed with the defaults on that runtime (`tigrag index --set
encoder.backend=B`, its stage seconds), then `tigrag eval --preset paper|best --json` (queries embedded by the
index's runtime, no vector cache): R@2/5/10, q/s with query encoding, encoder texts per question. The runtimes
alternate per dataset; each command is a fresh process.

    python bench/studies/encoder_runtime_recall.py [--datasets 2wikimultihopqa musique_train100]
    python bench/studies/encoder_runtime_recall.py --smoke   # the example corpus, all-MiniLM-L6-v2, writes nothing

Writes bench/results/encoder_runtime_recall.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, ROOT, cpu_name, write_results  # noqa: E402

COMMAND = "python bench/studies/encoder_runtime_recall.py"
RUNTIMES = ("onnx-int8", "numba-int8")
PRESETS = ("paper", "best")


def tigrag(*args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args], capture_output=True, text=True, cwd=ROOT)
    if done.returncode:
        raise SystemExit(f"tigrag {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def build(corpus: Path, out: Path, runtime: str, model: str | None) -> dict[str, float]:
    """Index `corpus` with `runtime`; the build's stage seconds (its `build seconds:` line)."""
    extra = ["--set", f"encoder.model={model}"] if model else []
    done = tigrag("index", str(corpus), "-o", str(out), "-q", "--set", f"encoder.backend={runtime}", *extra)
    line = next((line for line in (done.stdout + done.stderr).splitlines() if "build seconds:" in line), "")
    return {stage: float(value) for stage, value in re.findall(r"(\w+) ([\d.]+)(?=[,;( ]|$)", line.split(":", 1)[-1])}


def evaluate(index: Path, questions: Path, preset: str) -> dict[str, float]:
    result = json.loads(tigrag("eval", str(index), str(questions), "--preset", preset, "--json").stdout)
    metrics = result.get("metrics", result)
    return {**{f"R@{k}": 100 * metrics[f"recall@{k}"] for k in (2, 5, 10)},
            "qps": result["queries_per_second_with_query_encoding"],
            "texts_per_question": result["encoder_texts_per_query"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))
    parser.add_argument("--smoke", action="store_true", help="the example corpus, all-MiniLM-L6-v2, writes nothing")
    args = parser.parse_args()
    if args.smoke:
        sets = {"example": (ROOT / "examples" / "corpus.json", ROOT / "examples" / "questions.json")}
        model = "all-MiniLM-L6-v2"
    else:
        sets = {name: (DATA / DATASETS[name][0], DATA / DATASETS[name][1]) for name in args.datasets}
        model = None
    rows: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (corpus, questions) in sets.items():
            rows[name] = {}
            for runtime in RUNTIMES:
                index = Path(tmp) / f"{name}_{runtime}"
                seconds = build(corpus, index, runtime, model)
                rows[name][runtime] = {"build_seconds": seconds,
                                       **{preset: evaluate(index, questions, preset) for preset in PRESETS}}
                print(name, runtime, json.dumps(rows[name][runtime]), file=sys.stderr, flush=True)
    if args.smoke:
        print("smoke run: nothing written", file=sys.stderr)
        return 0
    command = f"{COMMAND} --datasets {' '.join(args.datasets)}"
    lines = ["# The CPU int8 encoder runtimes on recall, end-to-end speed and build time", "",
             f"Command: `{command}`. CPU: {cpu_name()}. Default settings and encoder (multilingual-e5-small); each "
             "dataset indexed once per runtime (`--set encoder.backend=B`), then `tigrag eval --preset P --json` "
             "(queries embedded by the index's runtime, no vector cache); every command a fresh process, one run each.",
             "", "| dataset | preset | runtime | R@2 | R@5 | R@10 | q/s (with query encoding) | encoder texts / question |",
             "|---|---|---|---|---|---|---|---|"]
    for name, runtimes in rows.items():
        for preset in PRESETS:
            for runtime in RUNTIMES:
                r = runtimes[runtime][preset]
                lines.append(f"| {name} | {preset} | {runtime} | {r['R@2']:.2f} | {r['R@5']:.2f} | {r['R@10']:.2f} | "
                             f"{r['qps']:.1f} | {r['texts_per_question']:.2f} |")
    lines += ["", "Build stage seconds (NER runs beside the encoder: `ner` overlaps `embed`):", "",
              "| dataset | runtime | embed | ner | total |", "|---|---|---|---|---|"]
    for name, runtimes in rows.items():
        for runtime in RUNTIMES:
            s = runtimes[runtime]["build_seconds"]
            lines.append(f"| {name} | {runtime} | {s.get('embed', float('nan')):.1f} | {s.get('ner', float('nan')):.1f} | "
                         f"{s.get('total', float('nan')):.1f} |")
    write_results("encoder_runtime_recall", {"command": command, "rows": rows}, "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
