"""What index generations cost (issue 23): `tigrag add` (one passage) and a save of an unchanged
index, with unchanged files hard-linked from the generation read or written again, and, with
`--old CHECKOUT`, the same commands of the code before generations (one folder, renamed into place).

    python bench/generations.py --passages 10000 [--old /tmp/wt_old] [-o bench/results/generations.md]

Each figure is the median of `--repeat` runs in fresh processes (`add`) or in this process (save).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--set", "encoder.model=hashing:384", "--set", "entities.model=capitalized"]

SAVE = """
import json, sys, time
import gpu_tigrag.index.store as store
links = sys.argv[2] == "links"
if hasattr(store, "generation_folder"):
    import gpu_tigrag.index.generation_files as files
    files.HARD_LINKS = links
index = store.load_index(sys.argv[1])
index.timings = {**index.timings, "again": time.time()}
start = time.perf_counter()
store.save_index(index, sys.argv[1])
print(json.dumps(time.perf_counter() - start))
"""


def cli(code: Path, *args: str) -> float:
    """Seconds of one `tigrag` command of the checkout `code` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args], check=True, cwd=code, env=env,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def save_seconds(code: Path, index: Path, mode: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(code)}
    out = subprocess.run([sys.executable, "-c", SAVE, str(index), mode], check=True, cwd=code, env=env,
                         capture_output=True, text=True).stdout
    return float(json.loads(out.strip().splitlines()[-1]))


def size_mb(folder: Path) -> float:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--old", type=Path, help="a checkout of the code before generations")
    parser.add_argument("-o", "--output", type=Path)
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    from gpu_tigrag.synth import passages, write_corpus

    rows = []
    with tempfile.TemporaryDirectory(prefix="tigrag-generations-") as tmp:
        folder = Path(tmp)
        write_corpus(folder / "corpus.jsonl", passages(args.passages))
        extra = folder / "extra.json"
        extra.write_text(json.dumps([{"title": "Zebrine Quay", "text": "Zebrine Quay is a new pier near Korvath."}]))
        codes = {"generations": ROOT, **({"before (one folder)": args.old} if args.old else {})}
        for label, code in codes.items():
            index = folder / f"idx-{len(rows)}"
            cli(code, "index", str(folder / "corpus.jsonl"), "-o", str(index), "-q", *FAST)
            row = {"code": label, "index MB": round(size_mb(index), 1)}
            modes = ["links", "copies"] if code == ROOT else ["copies"]
            for mode in modes:
                name = "unchanged files hard-linked" if mode == "links" else "every file written"
                row[f"save, {name} s"] = statistics.median(save_seconds(code, index, mode) for _ in range(args.repeat))
            row["add 1 passage s"] = statistics.median(
                cli(code, "add", str(index), str(extra), "-q") for _ in range(args.repeat))
            rows.append(row)
    keys = list(dict.fromkeys(k for row in rows for k in row))
    table = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        table.append("| " + " | ".join(f"{row[k]:.2f}" if isinstance(row.get(k), float) else str(row.get(k, "–"))
                                       for k in keys) + " |")
    text = (f"# Index generations: cost of a save ({args.passages:,} synthetic passages, hashing:384)\n\n"
            f"Median of {args.repeat} runs; `add` is a whole command in a fresh process.\n\n" + "\n".join(table) + "\n")
    print(text)
    if args.output:
        args.output.write_text(text)


if __name__ == "__main__":
    main()
