"""ONNX Runtime's idle threads spinning or sleeping: on query texts end to end, and on passages in a build.

    python bench/studies/encoder_spinning.py [--rounds 3] [--smoke]

`onnx-int8` keeps a session per kind of text (gpu_tigrag/encoders/onnx_int8.py). On query texts its intra-op
threads spin while a run lasts and stop when it returns (`threads.ONNX_QUERY_SPINNING`); on passages they sleep
(`threads.ONNX_ALLOW_SPINNING`). This study times each choice against the other, each measurement in a fresh
process, the two variants alternating, medians over rounds:

* `queries`: query spinning off (the code before) against on (the default): the 499 2Wiki questions' texts/s,
  and `best` and `paper` end to end through the retriever over MuSiQue-100's 100 questions on its default (e5)
  index (the index's encoder, no vector cache);
* `build`: passage spinning off (the default) against on: seconds of an in-memory build of the MuSiQue-100
  corpus with the defaults, whose spaCy NER thread runs beside the encoder.

Writes bench/results/encoder_spinning.{json,md}. `--smoke`: the example corpus and questions, one round, the
stand-in NER ("capitalized"), writes nothing.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import DATA, DATASETS, ROOT, checkout_environment, write_results  # noqa: E402

COMMAND = "python bench/studies/encoder_spinning.py"
#: part -> variant -> (ONNX_QUERY_SPINNING, ONNX_ALLOW_SPINNING) in the child
VARIANTS = {"queries": {"off": ("0", "0"), "on": ("1", "0")}, "build": {"off": ("1", "0"), "on": ("1", "1")}}


def child(part: str, variant: str, smoke: bool) -> dict:
    """One measurement in this process (a fresh one per call): `part` under `VARIANTS[part][variant]`."""
    import time

    from gpu_tigrag.threads import apply_thread_policy

    apply_thread_policy()
    import gpu_tigrag.encoders.onnx_int8 as onnx_int8

    onnx_int8.ONNX_QUERY_SPINNING, onnx_int8.ONNX_ALLOW_SPINNING = VARIANTS[part][variant]
    from gpu_tigrag.config import EntityConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.index.build import build_index

    config = IndexConfig(entities=EntityConfig(model="capitalized")) if smoke else IndexConfig()
    if smoke:
        corpus = load_corpus(ROOT / "examples" / "corpus.json")
        questions = [q.text for q in load_queries(ROOT / "examples" / "questions.json")]
    else:
        dataset = load_dataset(DATA / "musique_train100")
        corpus, questions = load_corpus(dataset.corpus_paths), [q.text for q in dataset.queries]
    if part == "build":
        start = time.perf_counter()
        build_index(corpus, config)
        return {"build_seconds": time.perf_counter() - start}
    from bench.common import default_encoder_index
    from gpu_tigrag.encoders import index_encoder_config, load_encoder
    from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
    from gpu_tigrag.presets import preset

    index = build_index(corpus, config) if smoke else default_encoder_index("musique_train100")
    encoder = load_encoder(index_encoder_config(index))
    texts = questions if smoke else [q.text for q in load_queries(DATA / DATASETS["2wikimultihopqa"][1])]
    encoder.encode(texts[:16], kind="query")  # warm-up: thread pools, first-batch allocations
    start = time.perf_counter()
    encoder.encode(texts, kind="query")
    out = {"query_texts_per_s": len(texts) / (time.perf_counter() - start)}
    for name in ("best", "paper"):
        retriever = TigragRetriever(index, preset(name), encoder=encoder, backend="numpy")
        start = time.perf_counter()
        retriever.retrieve(questions, k=10)
        out[f"{name}_queries_per_s"] = len(questions) / (time.perf_counter() - start)
    return out


def measure(part: str, variant: str, smoke: bool) -> dict:
    command = [sys.executable, str(Path(__file__).resolve()), "--child", part, variant] + (["--smoke"] if smoke else [])
    done = subprocess.run(command, cwd=ROOT, env=checkout_environment(ROOT), capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"{part}/{variant}: the measurement failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--child", nargs=2, metavar=("PART", "VARIANT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child, args.smoke)))
        return 0
    rounds = 1 if args.smoke else args.rounds
    runs: dict[str, dict[str, list[dict]]] = {part: {v: [] for v in variants} for part, variants in VARIANTS.items()}
    for part, variants in VARIANTS.items():
        for _ in range(rounds):
            for variant in variants:
                runs[part][variant].append(measure(part, variant, args.smoke))
                print(part, variant, runs[part][variant][-1], file=sys.stderr, flush=True)
    medians = {part: {variant: {key: statistics.median(r[key] for r in got) for key in got[0]}
                      for variant, got in variants.items()} for part, variants in runs.items()}
    # the machine's speed drifts between rounds: each round's on ÷ off pair is the fair ratio, and their median the figure
    ratios = {part: {key: statistics.median(on[key] / off[key] for off, on in zip(got["off"], got["on"]))
                     for key in got["off"][0]} for part, got in runs.items()}
    command = f"{COMMAND} --rounds {rounds}"
    q, b = medians["queries"], medians["build"]
    lines = [f"# {__doc__.splitlines()[0]}", "",
             f"Command: `{command}`. multilingual-e5-small on onnx-int8, each measurement in a fresh process, the two "
             f"variants alternating, {rounds} rounds (bench/studies/encoder_spinning.py's doc says what each measures); "
             "the rates are medians over rounds, the ratio the median of each round's spin ÷ sleep (the machine's "
             "speed drifts between rounds, the two runs of a round are neighbours).", "",
             "| measured | threads sleep | threads spin | spin ÷ sleep |", "|---|---|---|---|"]
    for key, label in (("query_texts_per_s", "2Wiki questions, texts/s"),
                       ("best_queries_per_s", "`best` end to end on MuSiQue-100, q/s"),
                       ("paper_queries_per_s", "`paper` end to end on MuSiQue-100, q/s")):
        lines.append(f"| {label} | {q['off'][key]:.1f} | {q['on'][key]:.1f} | **{ratios['queries'][key]:.2f}×** |")
    lines.append(f"| MuSiQue-100 build, seconds (passages; NER beside the encoder) | {b['off']['build_seconds']:.1f} | "
                 f"{b['on']['build_seconds']:.1f} | **{ratios['build']['build_seconds']:.2f}×** |")
    lines += ["", "The default: query texts spin (stopped when a run returns), passages sleep."]
    text = "\n".join(lines)
    print(text)
    if not args.smoke:
        write_results("encoder_spinning", {"command": command, "variants": VARIANTS, "runs": runs, "medians": medians,
                                           "ratios": ratios}, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
