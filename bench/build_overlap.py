"""An index build with named-entity recognition beside the encoder against the same build with NER
after it (index.assemble.OVERLAP_NER), each in its own fresh process, alternating, on the 2Wiki corpus
with the default encoder (multilingual-e5-small, onnx-int8) and spaCy NER: stage seconds, wall
seconds of the build and peak RSS of the process, and whether the two give the same arrays (sha256 of
the embeddings and of the entity table).

Usage: python bench/build_overlap.py [--rounds N] [--passages N] [--smoke]
Writes bench/results/build_overlap.{json,md} (not with --smoke).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])
from bench.common import DATA, DATASETS, ROOT, write_results

MODES = ("in line", "beside the encoder")


def one_build(overlap: bool, passages: int | None, encoder: str, ner: str) -> dict[str, Any]:
    """Build the 2Wiki index in this process (nothing saved) and describe it."""
    from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index import assemble
    from gpu_tigrag.index.build import build_index

    assemble.OVERLAP_NER = overlap
    corpus = load_corpus(DATA / DATASETS["2wikimultihopqa"][0])
    corpus = corpus[:passages] if passages else corpus
    config = IndexConfig(encoder=EncoderConfig(model=encoder), entities=EntityConfig(model=ner))
    start = time.perf_counter()
    index = build_index(corpus, config)
    wall = time.perf_counter() - start
    entities = hashlib.sha256()
    for array in (index.entities.chunk_ids, index.entities.token_ids):
        entities.update(array.tobytes())
    entities.update(json.dumps(index.entities.texts).encode())
    return {"overlap": overlap, "passages": len(corpus), "chunks": len(index.chunk_texts), "wall_s": wall,
            "stages_s": index.timings, "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "embeddings_sha256": hashlib.sha256(index.embeddings.tobytes()).hexdigest(),
            "entities_sha256": entities.hexdigest()}


def run_child(overlap: bool, passages: int | None, encoder: str, ner: str) -> dict[str, Any]:
    command = [sys.executable, "-m", "bench.build_overlap", "--child", "--encoder", encoder, "--ner", ner,
               *(["--overlap"] if overlap else []), *(["--passages", str(passages)] if passages else [])]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    if done.returncode:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def render(payload: dict[str, Any]) -> str:
    rows = payload["runs"]
    lines = ["# NER beside the encoder in an index build", "",
             f"`{payload['command']}` — {rows[0]['passages']:,} 2Wiki passages, {rows[0]['chunks']:,} chunks, encoder "
             f"{payload['encoder']}, NER {payload['ner']}; each build in its own fresh process, the two modes "
             f"alternating, {payload['rounds']} round(s); {payload['cpus']} CPU cores.", "",
             "| mode | build wall s (median) | range | embed s | ner s | waited for ner s | peak RSS MiB |",
             "|---|---|---|---|---|---|---|"]
    for mode, overlap in zip(MODES, (False, True)):
        mine = [r for r in rows if r["overlap"] == overlap]
        walls = [r["wall_s"] for r in mine]
        med = lambda key: statistics.median(r["stages_s"].get(key, 0.0) for r in mine)  # noqa: E731
        lines.append(f"| {mode} | {statistics.median(walls):.1f} | {min(walls):.1f}-{max(walls):.1f} | "
                     f"{med('embed'):.1f} | {med('ner'):.1f} | {med('ner_wait'):.1f} | "
                     f"{statistics.median(r['peak_rss_mib'] for r in mine):,.0f} |")
    lines += ["", f"Speed-up of the build (median walls): **{payload['speedup']:.2f}×**. "
              f"Same embeddings and entity table in every build: **{payload['identical']}**.", "",
              "Why it helps: spaCy's NER is one thread, and the ONNX Runtime encoder gains little from its second "
              "thread on 2 cores, so the NER thread fills the second core while the encoder runs; the NER "
              "thread's seconds overlap the embedding's (`ner` is its own wall time, `waited` what the build "
              "spent on it after the encoder finished)."]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--passages", type=int, help="only the first N passages of the corpus")
    parser.add_argument("--encoder", default="multilingual-e5-small")
    parser.add_argument("--ner", help="NER model (default: the index default)")
    parser.add_argument("--smoke", action="store_true", help="60 passages, stand-in encoder and NER, one round, no result file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--overlap", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(one_build(args.overlap, args.passages, args.encoder, args.ner)))
        return 0
    if args.smoke:
        args.rounds, args.passages, args.encoder, args.ner = 1, 60, "hashing:64", "capitalized"
    if args.ner is None:
        from gpu_tigrag.config import EntityConfig

        args.ner = EntityConfig().model
    runs = []
    for r in range(args.rounds):
        for overlap in (False, True) if r % 2 == 0 else (True, False):
            runs.append(run_child(overlap, args.passages, args.encoder, args.ner))
            print(f"round {r + 1} {MODES[overlap]}: {runs[-1]['wall_s']:.1f} s, peak RSS "
                  f"{runs[-1]['peak_rss_mib']:,.0f} MiB", file=sys.stderr, flush=True)
    walls = {o: statistics.median(r["wall_s"] for r in runs if r["overlap"] == o) for o in (False, True)}
    identical = len({(r["embeddings_sha256"], r["entities_sha256"]) for r in runs}) == 1
    import os

    payload = {"command": " ".join(["python bench/build_overlap.py", *sys.argv[1:]]), "encoder": args.encoder,
               "ner": args.ner, "rounds": args.rounds, "cpus": os.cpu_count(), "runs": runs,
               "speedup": walls[False] / walls[True], "identical": identical}
    print(render(payload))
    if not identical:
        print("the two modes gave different arrays", file=sys.stderr)
        return 1
    if not args.smoke:
        write_results("build_overlap", payload, render(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
