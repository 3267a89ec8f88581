"""The default encoder against the code it was when issue 31 was filed, on this machine, in one run.

    python bench/encoder_gain.py --code DIR [--passages 1000] [--rounds 2]
    python bench/encoder_gain.py --smoke          # this checkout only, a few texts, writes nothing

DIR is a checkout of the code before (e.g. `git worktree add /tmp/filed fa907cf`, the parent of the first
issue-31 commit). Each round runs, for each code in turn, a fresh process that loads the default encoder
(multilingual-e5-small on the CPU runtime its `auto` picks: each code's is recorded) and embeds the first `--passages` chunk texts of the 2Wiki default index
(passage prompt) and the 499 2Wiki questions (query prompt), timing each after one untimed warm-up batch. The
older code keeps its int8 model in a cache folder of its own (its cache format differs). Reports texts/s per
code (median over rounds), the ratio, and whether the vectors agree (cosine of each text's two vectors).
Writes bench/results/encoder_gain.json and .md.
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
from bench.common import CACHE, DATA, DATASETS, ROOT, checkout_environment, write_results  # noqa: E402

COMMAND = "python bench/encoder_gain.py"
CHILD = r"""
import json, sys, time
import numpy as np
from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.encoders import load_encoder
texts = json.load(open(sys.argv[1]))
encoder = load_encoder(EncoderConfig())
out = {}
for kind, group in (("passage", texts["passages"]), ("query", texts["questions"])):
    encoder.encode(group[:32], kind=kind)  # warm-up: thread pools, first-batch allocations
    start = time.perf_counter()
    vectors = encoder.encode(group, kind=kind)
    out[kind] = len(group) / (time.perf_counter() - start)
    np.save(sys.argv[2] + "_" + kind + ".npy", np.asarray(vectors, dtype=np.float32))
out["backend"] = encoder.backend
print(json.dumps(out))
"""


def texts(passages: int, smoke: bool) -> dict[str, list[str]]:
    if smoke:
        corpus = json.loads((ROOT / "examples" / "corpus.json").read_text())
        return {"passages": [p["text"] for p in corpus], "questions": [q["question"] for q in json.loads(
            (ROOT / "examples" / "questions.json").read_text())]}
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.index.store import load_index

    index = load_index(CACHE / "e5_2wikimultihopqa")  # bench/studies/spectrag_default_index.py builds it
    questions = [q.text for q in load_queries(DATA / DATASETS["2wikimultihopqa"][1])]
    return {"passages": list(index.chunk_texts[:passages]), "questions": questions}


def measure(code: Path, inputs: Path, vectors: Path, cache: Path | None) -> dict[str, float]:
    env = checkout_environment(code)
    if cache is not None:
        env["TIGRAG_CACHE_DIR"] = str(cache)
    done = subprocess.run([sys.executable, "-c", CHILD, str(inputs), str(vectors)], env=env, cwd=code,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{code}: the encoder run failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, help="a checkout of the code before")
    parser.add_argument("--passages", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--smoke", action="store_true")
    args = parser.parse_args()
    if not args.smoke and args.code is None:
        parser.error("--code DIR is required (the code before), or --smoke")
    import numpy as np

    codes = {"this checkout": (ROOT, None)}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        if args.code is not None:
            codes["--code"] = (args.code.resolve(), CACHE / "encoder_gain_before_cache")
        inputs = scratch / "texts.json"
        inputs.write_text(json.dumps(texts(args.passages, args.smoke)))
        rates: dict[str, dict[str, list[float]]] = {name: {"passage": [], "query": []} for name in codes}
        runtimes: dict[str, str] = {}
        for _ in range(1 if args.smoke else args.rounds):
            for name, (code, cache) in codes.items():
                got = measure(code, inputs, scratch / name.replace(" ", "_").strip("-"), cache)
                runtimes[name] = str(got.pop("backend", "onnx-int8"))  # codes before this field: onnx-int8
                for kind, value in got.items():
                    rates[name][kind].append(value)
                print(name, got, flush=True)
        agreement = {}
        if "--code" in codes:
            for kind in ("passage", "query"):
                a = np.load(scratch / f"this_checkout_{kind}.npy")
                b = np.load(scratch / f"code_{kind}.npy")
                agreement[kind] = float(np.min(np.sum(a * b, axis=1)))
    if args.smoke:
        return 0
    med = {name: {kind: statistics.median(v) for kind, v in kinds.items()} for name, kinds in rates.items()}
    n_passages = args.passages
    command = f"{COMMAND} --code {args.code} --passages {n_passages} --rounds {args.rounds}"
    lines = ["# The default encoder against the code when issue 31 was filed", "",
             f"Command: `{command}`. multilingual-e5-small on each code's default CPU runtime (this checkout: "
             f"{runtimes['this checkout']}, --code: {runtimes['--code']}), each code in a fresh "
             f"process per round, {args.rounds} alternating rounds, medians; texts: the first {n_passages:,} chunks of "
             "the 2Wiki default index (passage prompt) and the 499 2Wiki questions (query prompt).", "",
             "| texts | --code texts/s, median (range) | this checkout texts/s, median (range) | this ÷ --code, "
             "medians | each round's ratio, median (range) |", "|---|---|---|---|---|"]
    ratios = {kind: [a / b for a, b in zip(rates["this checkout"][kind], rates["--code"][kind])]
              for kind in ("passage", "query")}
    for kind, label in (("passage", "passage chunks"), ("query", "questions")):
        spans = {name: f"{med[name][kind]:.1f} ({min(rates[name][kind]):.1f}-{max(rates[name][kind]):.1f})"
                 for name in codes}
        lines.append(f"| {label} | {spans['--code']} | {spans['this checkout']} | "
                     f"**{med['this checkout'][kind] / med['--code'][kind]:.2f}×** | "
                     f"{statistics.median(ratios[kind]):.2f}× ({min(ratios[kind]):.2f}-{max(ratios[kind]):.2f}) |")
    lines += ["", "The two codes of a round run one after the other, so each round's ratio compares neighbours in time "
              "(this machine's speed drifts between rounds)."]
    lines += ["", "Least cosine between a text's vectors from the two codes: passages "
              f"{agreement['passage']:.6f}, questions {agreement['query']:.6f} (1.0 where bit-identical; another "
              "runtime or quantisation recipe rounds differently)."]
    write_results("encoder_gain", {"command": command, "runtimes": runtimes, "rates": rates, "medians": med,
                                   "round_ratios": ratios,
                                   "agreement": agreement,
                                   "passages": n_passages}, "\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
