"""The benchmark runner, from the repository root:

    python -m bench list [--kind KIND] [--json]   the registered benchmarks (bench/__init__.py)
    python -m bench run NAME [ARGS...]            run one: its script with its fixed arguments, then ARGS
    python -m bench smoke NAME [--tmp DIR]        its smoke run (a quick run that writes no result)

`run` and `smoke` start the script in a fresh interpreter (`python -m bench.<module>`, e.g. bench.studies.ann, or bash for a .sh
script) in the current folder and exit with its status. A study is a frozen decision record: running
it again rewrites the result file that records the decision, which `run` says before it starts.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from bench import KINDS, REGISTRY, ROOT, Benchmark, get


def command(bench: Benchmark, args: list[str]) -> list[str]:
    if bench.script.endswith(".sh"):
        return ["bash", str(bench.path), *bench.args, *args]
    return [sys.executable, "-m", bench.module, *bench.args, *args]


def execute(bench: Benchmark, args: list[str]) -> int:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [env.get("PYTHONPATH")])])
    return subprocess.run(command(bench, args), env=env).returncode


def list_benchmarks(kind: str | None, as_json: bool) -> int:
    chosen = [b for b in REGISTRY if kind is None or b.kind == kind]
    if as_json:
        print(json.dumps([b.as_dict() for b in chosen], indent=1))
        return 0
    width = max(len(b.name) for b in chosen) if chosen else 0
    for k, label in KINDS.items():
        group = [b for b in chosen if b.kind == k]
        if not group:
            continue
        print(f"{label}:")
        for b in group:
            flags = ", ".join(filter(None, ["needs ../shared/data" if b.data else "",
                                            "smoke" if b.smoke is not None else ""]))
            script = " ".join([f"bench/{b.script}", *b.args])
            print(f"  {b.name:<{width}}  {b.description}")
            print(f"  {'':<{width}}  [{script}{'; ' + flags if flags else ''}]"
                  + (f" → {', '.join(b.results)}" if b.results else ""))
            if b.decision:
                print(f"  {'':<{width}}  decision: {b.decision}")
        print()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    listing = sub.add_parser("list", help="the registered benchmarks")
    listing.add_argument("--kind", choices=list(KINDS))
    listing.add_argument("--json", action="store_true", help="as JSON (every field of the registry)")
    run = sub.add_parser("run", help="run one benchmark with extra arguments",
                         description="run NAME's script with its fixed arguments, then ARGS (passed on unchanged)")
    run.add_argument("name")
    run.add_argument("args", nargs=argparse.REMAINDER)
    smoke = sub.add_parser("smoke", help="run one benchmark's smoke mode")
    smoke.add_argument("name")
    smoke.add_argument("--tmp", type=Path, help="scratch folder for its files (kept; default: a temporary one)")
    args = parser.parse_args(argv)
    if args.command == "list":
        return list_benchmarks(args.kind, args.json)
    try:
        bench = get(args.name)
    except KeyError as exc:
        print(f"python -m bench: error: {exc.args[0]}", file=sys.stderr)
        return 2
    if args.command == "run":
        if bench.kind == "study" and not {"-h", "--help"} & set(args.args):
            print(f"[bench] {bench.name} is a study, a frozen decision record ({bench.decision}); a full run rewrites "
                  f"bench/results/{', '.join(bench.results)}", file=sys.stderr)
        return execute(bench, args.args)
    if bench.smoke is None:
        print(f"python -m bench: error: {bench.name} has no smoke mode", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix=f"bench-{bench.name}-") as scratch:
        folder = args.tmp or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        return execute(bench, [a.replace("{tmp}", str(folder)) for a in bench.smoke])


if __name__ == "__main__":
    sys.exit(main())
