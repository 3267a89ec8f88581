"""Memory of LiteSemRAG's stage assembly: the prototypes from a corpus's span vectors (issue 33, large-corpus builds).

    python bench/studies/litesemrag_assemble_memory.py [--spans 2000000] [--code DIR]

A 100,000-passage stage build peaked at 16 GB (bench/results/method_scale.md): the span vectors, one 384-d row per
span occurrence, are its largest array, and the assembly copied them three times (the kept rows, the quotient of
the normalisation, its cast). Here `assemble_semantic_graph` runs in a fresh process on synthetic occurrences
(Zipf strings, 20 spans per chunk, random vectors; no string clustered, so only the arrays count) as a build calls
it; the peak RSS before and after the call, for this checkout and, with `--code`, another (the code before the
change). Writes bench/results/litesemrag_assemble_memory.{json,md}.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import cpu_name, write_results  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import json, resource, sys, time
import numpy as np
from gpu_tigrag.methods.litesemrag import semantic_graph as sg
from gpu_tigrag.methods.litesemrag.config import LitesemragIndexConfig
from gpu_tigrag.methods.litesemrag.spans import Span

n, per_chunk, dim = int(sys.argv[1]), 20, 384
rng = np.random.default_rng(0)
words = [f"w{i}" for i in range(200_000)]
ids = np.minimum(rng.zipf(1.3, n) - 1, 99_999)
ids = np.where(rng.random(n) < 0.3, ids + 100_000, ids)  # a third are two-word phrases
texts = [words[i] if i < 100_000 else f"{words[i]} x" for i in ids]
spans = [[Span(texts[j], "token", 0, 1, 1) for j in range(c, min(c + per_chunk, n))] for c in range(0, n, per_chunk)]
vectors = rng.standard_normal((n, dim), dtype=np.float32)
found = sg.SpanOccurrences(spans, np.full(len(spans), 100, np.int32), [vectors], np.ones(n, bool), "x", "x", 512, {})
del vectors
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
start = time.perf_counter()
config = LitesemragIndexConfig(min_occurrences=10**9)
try:  # a build's call: the span vectors are not used again
    graph = sg.assemble_semantic_graph(found, 0, config, in_place=True)
except TypeError:  # code without the in-place assembly
    graph = sg.assemble_semantic_graph(found, 0, config)
seconds = time.perf_counter() - start
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps({"spans": n, "strings": len(graph.strings), "vectors_mib": n * dim * 4 / 2**20,
                  "peak_rss_before_mib": before, "peak_rss_after_mib": after, "seconds": seconds}))
"""


def measure(code: Path, spans: int) -> dict:
    env = {**os.environ, "PYTHONPATH": str(code)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(spans)], capture_output=True, text=True, env=env, cwd=code)
    if done.returncode:
        raise SystemExit(f"the assembly at {code} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--spans", type=int, default=2_000_000)
    parser.add_argument("--code", type=Path, help="another checkout, measured the same way")
    args = parser.parse_args()
    command = "python bench/studies/litesemrag_assemble_memory.py --spans " + str(args.spans) + (
        f" --code {args.code}" if args.code else "")
    rows = {"this checkout": measure(ROOT, args.spans)}
    if args.code:
        rows = {"--code": measure(args.code, args.spans), **rows}
    lines = [f"# {__doc__.splitlines()[0]}", "", f"Command: `{command}` ({cpu_name()}, 2 cores). Each row a fresh "
             "process; 'added': the peak RSS after the assembly minus before it, also as a multiple of the span "
             "vectors' bytes.", "",
             "| code | spans | strings | span vectors MiB | peak RSS before MiB | peak RSS after MiB | added | seconds |",
             "|---|---|---|---|---|---|---|---|"]
    for label, r in rows.items():
        added = r["peak_rss_after_mib"] - r["peak_rss_before_mib"]
        lines.append(f"| {label} | {r['spans']:,} | {r['strings']:,} | {r['vectors_mib']:,.0f} | "
                     f"{r['peak_rss_before_mib']:,.0f} | {r['peak_rss_after_mib']:,.0f} | {added:,.0f} "
                     f"({added / r['vectors_mib']:.2f}×) | {r['seconds']:.1f} |")
    text = "\n".join(lines + [""])
    print(text)
    write_results("litesemrag_assemble_memory", {"command": command, "rows": rows}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
