"""Wall time of a one-question process (issue 31, item 5): `tigrag query` on the example index built with
the default encoder (e5-small on the CPU runtime `auto` picks there: numba-int8 or onnx-int8), with the encoder loaded and on a warm vector cache, for this
checkout and, with --code DIR, another checkout's package (e.g. a worktree of the code before), rounds
interleaved so that load from other processes falls on both alike; medians and ranges. Also the import
time of the modules the issue named (numba.cuda, nltk) in a query process of each checkout.

    python bench/startup.py [--code DIR] [--rounds 5]
    python bench/startup.py --smoke      # hashing stand-in encoder, 1 round, writes nothing

Writes bench/results/startup.json and .md.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import ROOT, checkout_environment, write_results

COMMAND = "python bench/startup.py"
QUESTION = "Where was the director of the film The Glass Orchard born?"
CHECKED = ("numba.cuda", "nltk", "scipy.stats")


def tigrag(code: Path, *args: str) -> float:
    """Seconds of one `tigrag ...` process whose package comes from `code`."""
    env = checkout_environment(code)
    start = time.perf_counter()
    # cwd: `python -m` puts the current folder before PYTHONPATH
    subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", *args], env=env, cwd=code, check=True,
                   stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def package_of(code: Path) -> Path:
    """The gpu_tigrag package a process started as `tigrag` does imports from `code` (checked: --code took effect)."""
    env = checkout_environment(code)
    out = subprocess.run([sys.executable, "-c", "import gpu_tigrag; print(gpu_tigrag.__file__)"], env=env, cwd=code,
                         check=True, capture_output=True, text=True).stdout.strip()
    package = Path(out).resolve().parent
    if package.parent != code.resolve():
        raise SystemExit(f"{code}: its processes import gpu_tigrag from {package}, not from it")
    return package


def imported(code: Path, index: Path) -> dict[str, float | None]:
    """Cumulative import seconds of CHECKED in one query process (None: not imported)."""
    env = checkout_environment(code)
    proc = subprocess.run([sys.executable, "-X", "importtime", "-m", "gpu_tigrag.cli", "query", str(index), QUESTION],
                          env=env, cwd=code, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    found: dict[str, float | None] = {name: None for name in CHECKED}
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[2].strip() in found:
            found[parts[2].strip()] = int(parts[1]) / 1e6
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, help="another checkout whose package is timed beside this one")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    encoder = "hashing:64" if args.smoke else "multilingual-e5-small"
    rounds = 1 if args.smoke else args.rounds
    codes = {"this checkout": ROOT, **({"--code": args.code.resolve()} if args.code else {})}
    for code in codes.values():
        package_of(code)
    with tempfile.TemporaryDirectory() as tmp:
        # each code builds its own index (an index records its settings; an older code refuses newer fields)
        # and warms its own vector cache, bytecode and model caches, untimed
        indexes = {name: Path(tmp) / f"index_{i}" for i, name in enumerate(codes)}
        caches = {name: Path(tmp) / f"vectors_{i}" for i, name in enumerate(codes)}
        for name, code in codes.items():
            tigrag(code, "index", str(ROOT / "examples" / "corpus.json"), "-o", str(indexes[name]), "-q",
                   "--set", f"encoder.model={encoder}")
            tigrag(code, "query", str(indexes[name]), QUESTION, "--vector-cache", str(caches[name]))
            tigrag(code, "query", str(indexes[name]), QUESTION)
        times: dict[str, dict[str, list[float]]] = {name: {"encoder loaded": [], "warm vector cache": []}
                                                   for name in codes}
        for _ in range(rounds):
            for name, code in codes.items():
                times[name]["encoder loaded"].append(tigrag(code, "query", str(indexes[name]), QUESTION))
                times[name]["warm vector cache"].append(tigrag(code, "query", str(indexes[name]), QUESTION,
                                                               "--vector-cache", str(caches[name])))
        imports = {name: imported(code, indexes[name]) for name, code in codes.items()}
        runtimes = {name: runtime_of(indexes[name]) for name in codes}
    if args.smoke:
        print(times, imports)
        return 0
    rows = [f"| {name} | {runtimes[name]} | {mode} | {statistics.median(values):.2f} | {min(values):.2f}-{max(values):.2f} |"
            for name, modes in times.items() for mode, values in modes.items()]
    import_rows = [f"| {name} | " + " | ".join("not imported" if s is None else f"{s:.2f} s" for s in found.values())
                   + " |" for name, found in imports.items()]
    command = COMMAND + (f" --code {args.code}" if args.code else "") + f" --rounds {rounds}"
    markdown = "\n".join([
        "# Start-up of a one-question process",
        "",
        f"`tigrag query INDEX \"{QUESTION}\"` on the example corpus (examples/corpus.json) indexed with "
        f"{encoder} (each code's default CPU runtime: the table's runtime column), {rounds} interleaved rounds; `--code` is "
        f"{args.code or '(not given)'}. Command: `{command}`.",
        "",
        "| code | runtime | mode | median s | range s |",
        "|---|---|---|---|---|",
        *rows,
        "",
        "Import time (cumulative, `python -X importtime`) in one query process with the encoder loaded:",
        "",
        "| code | " + " | ".join(CHECKED) + " |",
        "|---|" + "---|" * len(CHECKED),
        *import_rows,
    ])
    write_results("startup", {"command": command, "encoder": encoder, "runtimes": runtimes, "rounds": rounds, "times": times,
                              "imports": imports, "code": str(args.code) if args.code else None}, markdown)
    return 0


def runtime_of(index: Path) -> str:
    """The encoder runtime an index was built with (its generation's manifest)."""
    import json

    for manifest in sorted(index.rglob("manifest.json"), reverse=True):
        encoder = json.loads(manifest.read_text()).get("encoder")
        if isinstance(encoder, dict) and encoder.get("backend"):
            return str(encoder["backend"])
    return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
