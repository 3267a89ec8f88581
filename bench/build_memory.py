"""Where an index build's memory goes: the resident set of a fresh process building the 2Wiki index
(default encoder and NER, NER beside the encoder), sampled every 0.1 s and at each stage's start and
end, and, in a second fresh process, what loading the default encoder costs piece by piece (ONNX
Runtime, the tokenizer, the int8 model's bytes, the session) and what embedding adds.

Usage: python bench/build_memory.py [--passages N] [--smoke]
Writes bench/results/build_memory.{json,md} (not with --smoke).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import DATA, DATASETS, ROOT, write_results

MIB = 2 ** 20


def build_profile(passages: int | None, encoder: str, ner: str | None) -> dict[str, Any]:
    """RSS at each stage boundary of an in-memory build, and the peak within each stage."""
    import psutil

    import gpu_tigrag.index.build as build_module
    from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.assemble import timed as plain_timed

    process = psutil.Process()
    samples: list[tuple[float, int]] = []
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            samples.append((time.perf_counter(), process.memory_info().rss))
            time.sleep(0.1)

    stages: list[dict[str, Any]] = []

    @contextmanager
    def timed(timings: dict[str, float], stage: str):
        start, before = time.perf_counter(), process.memory_info().rss
        with plain_timed(timings, stage):
            yield
        end = time.perf_counter()
        peak = max([rss for t, rss in samples if start <= t <= end] + [before, process.memory_info().rss])
        stages.append({"stage": stage, "rss_before_mib": before / MIB, "rss_after_mib": process.memory_info().rss / MIB,
                       "peak_mib": peak / MIB, "seconds": end - start})

    threading.Thread(target=sample, daemon=True).start()
    corpus = load_corpus(DATA / DATASETS["2wikimultihopqa"][0])
    corpus = corpus[:passages] if passages else corpus
    loaded = process.memory_info().rss / MIB
    build_module.timed = timed
    config = IndexConfig(encoder=EncoderConfig(model=encoder), entities=EntityConfig(model=ner) if ner else EntityConfig())
    index = build_module.build_index(corpus, config)
    done.set()
    return {"passages": len(corpus), "chunks": len(index.chunk_texts), "corpus_loaded_mib": loaded,
            "stages": stages, "peak_mib": max(rss for _, rss in samples) / MIB}


def encoder_profile(texts: int, encoder: str) -> dict[str, Any]:
    """RSS after each piece of loading the onnx-int8 encoder, then after embedding `texts` 2Wiki chunks."""
    import psutil

    process = psutil.Process()
    rss = lambda: process.memory_info().rss / MIB  # noqa: E731
    steps = [("interpreter", rss())]
    import onnxruntime as ort

    steps.append(("onnxruntime imported", rss()))
    from gpu_tigrag.encoders.models import resolve_model
    from gpu_tigrag.encoders.onnx_int8 import _tokenizer, cache_folder, prepare, read_pipeline

    resolved = resolve_model(encoder)
    pipeline = read_pipeline(resolved.folder)
    steps.append(("engine modules, model resolved", rss()))
    _tokenizer(pipeline.transformer, pipeline.max_seq_length)
    steps.append(("tokenizer", rss()))
    data, _, _ = prepare(resolved, pipeline, cache_folder(resolved).parent)
    steps.append((f"int8 model bytes ({len(data) / MIB:.0f} MiB)", rss()))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])
    steps.append(("ONNX Runtime session", rss()))
    del data, session
    from gpu_tigrag.config import EncoderConfig
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.corpus import load_corpus

    loaded = load_encoder(EncoderConfig(model=encoder))
    steps.append(("the engine's encoder (a second copy of all the above)", rss()))
    corpus = load_corpus(DATA / DATASETS["2wikimultihopqa"][0])
    loaded.encode([p.text for p in corpus[:texts]])
    steps.append((f"after embedding {texts} passages", rss()))
    return {"steps": [{"step": name, "rss_mib": value} for name, value in steps]}


def child(mode: str, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.build_memory", "--child", mode, "--encoder", args.encoder,
               *(["--passages", str(args.passages)] if args.passages else []), *(["--ner", args.ner] if args.ner else [])]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def render(payload: dict[str, Any]) -> str:
    build, load = payload["build"], payload["encoder_load"]
    lines = ["# Where an index build's memory goes", "",
             f"`{payload['command']}` — {build['passages']:,} 2Wiki passages, {build['chunks']:,} chunks, encoder "
             f"{payload['encoder']} (onnx-int8), default NER beside it; each part in a fresh process; RSS sampled "
             "every 0.1 s.", "",
             f"Build: **peak {build['peak_mib']:,.0f} MiB**; {build['corpus_loaded_mib']:,.0f} MiB once the corpus "
             "is read.", "", "| stage | s | RSS before MiB | peak during MiB | RSS after MiB |", "|---|---|---|---|---|"]
    for s in build["stages"]:
        lines.append(f"| {s['stage']} | {s['seconds']:.1f} | {s['rss_before_mib']:,.0f} | {s['peak_mib']:,.0f} | "
                     f"{s['rss_after_mib']:,.0f} |")
    lines += ["", "The NER thread starts with the graph stage, so spaCy's model loads during `graph`; `embed` "
              "includes loading the encoder.", "", "Loading the encoder, step by step:", "",
              "| after | RSS MiB | added MiB |", "|---|---|---|"]
    previous = None
    for step in load["steps"]:
        added = "" if previous is None else f"{step['rss_mib'] - previous:+,.0f}"
        lines.append(f"| {step['step']} | {step['rss_mib']:,.0f} | {added} |")
        previous = step["rss_mib"]
    steps = {step["step"].split(" (")[0]: step["rss_mib"] for step in load["steps"]}
    names = [step["step"].split(" (")[0] for step in load["steps"]]
    added = {name: steps[name] - steps[names[i - 1]] for i, name in enumerate(names) if i}
    graph = next(s for s in build["stages"] if s["stage"] == "graph")
    lines += ["", f"So the build's memory follows what it loads, not its batches: the encoder's tokenizer (the "
              f"multilingual vocabulary) {added['tokenizer']:,.0f} MiB, the int8 model "
              f"({added['int8 model bytes']:,.0f} MiB of bytes read, {added['ONNX Runtime session']:,.0f} MiB more for "
              "its session), "
              f"spaCy's NER about {graph['peak_mib'] - graph['rss_before_mib']:,.0f} MiB (loaded during `graph`); "
              f"embedding adds {added[names[-1]]:,.0f} MiB for its activations (batches bounded by "
              "`OnnxInt8Encoder.batch_tokens`). Converting the model (torch export and quantisation) happens once per "
              "machine, into the cache; a build that finds the cache, as this one did, never holds torch's copy."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, help="only the first N passages of the corpus")
    parser.add_argument("--encoder", default="multilingual-e5-small")
    parser.add_argument("--ner", help="NER model (default: the index default)")
    parser.add_argument("--smoke", action="store_true", help="60 passages, stand-in NER, no result file")
    parser.add_argument("--child", choices=("build", "encoder"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "build":
        print(json.dumps(build_profile(args.passages, args.encoder, args.ner)))
        return 0
    if args.child == "encoder":
        print(json.dumps(encoder_profile(args.passages or 1000, args.encoder)))
        return 0
    if args.smoke:
        args.passages, args.ner = 60, "capitalized"
    payload = {"command": " ".join(["python bench/build_memory.py", *sys.argv[1:]]), "encoder": args.encoder,
               "build": child("build", args), "encoder_steps_passages": args.passages or 1000}
    payload["encoder_load"] = child("encoder", args)
    text = render(payload)
    print(text)
    if not args.smoke:
        write_results("build_memory", payload, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
