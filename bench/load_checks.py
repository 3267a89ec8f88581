"""What the value checks at load cost (issue 30): `load_index` of a 2Wiki-sized index with the checks
of gpu_tigrag/index/validate.py on and off, in one run, interleaved.

    python bench/load_checks.py [--index DIR | --corpus FILE] [--rounds 40]
    python bench/load_checks.py --smoke     # the example corpus, 3 rounds, writes nothing

Without --index the index is built once (cached under .cache/bench/) from the 2Wiki corpus with the
fast stand-ins `encoder.model=hashing:384` and `entities.model=capitalized`: the real 2Wiki sizes
(7,870 chunks, 384-dimensional vectors, a 37k-token graph) without a model. Each round loads the
index once with the checks and once without (`load_index(path, validate=False)`: checksums, the
finite-value check and the shape checks that existed before stay on), alternating which goes first;
the figures are medians over the rounds, for both checksum modes (verified, the default, and
--no-verify). The checks alone (`validate.check_base` over the loaded arrays) are timed too.
Writes bench/results/load_checks.json and .md.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import CACHE, DATA, ROOT, write_results  # noqa: E402

CORPUS = DATA / "2wikimultihopqa" / "2wikimultihopqa_corpus.json"
FAST = ["--set", "encoder.model=hashing:384", "--set", "entities.model=capitalized"]
SMOKE_FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
COMMAND = "python bench/load_checks.py"


def build(corpus: Path, out: Path, settings: list[str]) -> None:
    tigrag = [sys.executable, "-m", "gpu_tigrag.cli"]
    done = subprocess.run([*tigrag, "index", str(corpus), "-o", str(out), *settings, "-q"], cwd=ROOT,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the index of {corpus} failed:\n{done.stderr[-2000:]}")


def load_seconds(path: Path, validate: bool, verify: bool) -> float:
    from gpu_tigrag.index.store import load_index

    gc.collect()
    start = time.perf_counter()
    index = load_index(path, verify_checksums=verify, validate=validate)
    seconds = time.perf_counter() - start
    del index
    return seconds


def checks_alone_seconds(path: Path, rounds: int) -> float:
    """Median seconds of `validate.check_base` over the arrays of the loaded index (no file reading)."""
    from gpu_tigrag.index.store import generation_folder, load_index, read_manifest
    from gpu_tigrag.index.stage_arrays import csr_arrays
    from gpu_tigrag.index.validate import check_base

    index = load_index(path)
    e = index.entities
    arrays = {"chunk_passage": index.chunk_passage, "token_indptr": index.token_indptr, "token_ids": index.token_ids,
              "embeddings": index.embeddings, "entity_chunk_indptr": e.chunk_indptr, "entity_chunk_ids": e.chunk_ids,
              "entity_chunk_masks": e.chunk_masks, "entity_token_indptr": e.token_indptr,
              "entity_token_ids": e.token_ids, **csr_arrays("graph", index.graph), **csr_arrays("bm25", index.bm25)}
    encoder = read_manifest(path)["encoder"]
    folder = generation_folder(path)
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        check_base(folder, arrays, passages=len(index.passage_titles), chunks=index.n_chunks, vocab=index.n_vocab,
                   entities=len(e.texts), dim=encoder.get("dim"), encoder_backend=encoder.get("backend", ""))
        times.append(time.perf_counter() - start)
    return statistics.median(times)


class CheckClock:
    """Wraps `load.check_base` to time it inside each load (cold caches, as a load sees them)."""

    def __init__(self) -> None:
        import gpu_tigrag.index.load as load

        self.load, self.inner, self.seconds = load, load.check_base, []

    def __enter__(self) -> "CheckClock":
        def timed(*args, **kwargs):
            start = time.perf_counter()
            self.inner(*args, **kwargs)
            self.seconds.append(time.perf_counter() - start)
        self.load.check_base = timed
        return self

    def __exit__(self, *exc) -> None:
        self.load.check_base = self.inner


def measure(path: Path, rounds: int) -> dict:
    from gpu_tigrag.index.store import load_index, read_manifest

    index = load_index(path)
    sizes = {"chunks": index.n_chunks, "dim": int(index.embeddings.shape[1]), "vocab": index.n_vocab,
             "graph_entries": int(index.graph.nnz), "bm25_entries": int(index.bm25.nnz),
             "entities": len(index.entities.texts), "bytes": sum(int(f["bytes"]) for f in
                                                                   read_manifest(path)["files"].values())}
    del index
    modes = {}
    for verify in (True, False):
        for validate in (True, False):  # warm-up: page cache, imports, first allocations
            load_seconds(path, validate, verify)
        on, off = [], []
        with CheckClock() as clock:
            for r in range(rounds):
                order = (True, False) if r % 2 == 0 else (False, True)
                for validate in order:
                    (on if validate else off).append(load_seconds(path, validate, verify))
        med_on, med_off = statistics.median(on), statistics.median(off)
        modes["verified" if verify else "no_verify"] = {
            "checks_on_s": med_on, "checks_off_s": med_off, "ratio": med_on / med_off,
            "paired_ratio": statistics.median(a / b for a, b in zip(on, off)),
            "checks_in_load_s": statistics.median(clock.seconds), "on_s": on, "off_s": off}
    return {"sizes": sizes, "rounds": rounds, "modes": modes, "checks_alone_s": checks_alone_seconds(path, rounds),
            "load_average": os.getloadavg()[0]}


def markdown(result: dict, source: str) -> str:
    s = result["sizes"]
    lines = [
        "# Value checks at load: cost",
        "",
        f"`load_index` of {source} ({s['chunks']:,} chunks, {s['dim']}-dimensional vectors, {s['vocab']:,} tokens, "
        f"{s['graph_entries']:,} graph and {s['bm25_entries']:,} BM25 entries, {s['entities']:,} entities; "
        f"{s['bytes'] / 2**20:.1f} MiB of files), with the checks of `gpu_tigrag/index/validate.py` on and off "
        f"(`validate=False`), {result['rounds']} interleaved rounds each, medians; load average "
        f"{result['load_average']:.1f} (2 cores shared).",
        "",
        "| checksums | checks off | checks on | ratio of medians | median of round ratios | the checks in the load |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for mode, label in (("verified", "verified (default)"), ("no_verify", "--no-verify")):
        m = result["modes"][mode]
        lines.append(f"| {label} | {m['checks_off_s'] * 1e3:.1f} ms | {m['checks_on_s'] * 1e3:.1f} ms | "
                     f"{m['ratio']:.3f} | {m['paired_ratio']:.3f} | {m['checks_in_load_s'] * 1e3:.2f} ms "
                     f"({100 * m['checks_in_load_s'] / m['checks_off_s']:.1f} %) |")
    lines += ["", "The last column times `validate.check_base` inside each load with the checks on (its share of the "
                  "load without them in brackets); over the arrays already loaded and in cache it takes "
                  f"{result['checks_alone_s'] * 1e3:.2f} ms. The target is at most 10 % more load time. Whole loads "
                  "vary between rounds by more than the checks cost on a shared machine: the time of the checks "
                  "themselves is the steadier figure. Checks that are always on (npy header against the file size, "
                  "Parquet column types, the finite-value and shape checks that existed before) are in both columns.",
              "", f"Command: `{result['command']}`", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--index", type=Path, help="an existing index directory (default: build the 2Wiki one)")
    parser.add_argument("--corpus", type=Path, default=CORPUS, help="corpus to index when --index is not given")
    parser.add_argument("--rounds", type=int, default=40, help="interleaved rounds (default 40)")
    parser.add_argument("--smoke", action="store_true", help="the example corpus, 3 rounds; writes no result")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.smoke:
            path, source, rounds = Path(tmp) / "index", "the example corpus", 3
            build(ROOT / "examples" / "corpus.json", path, SMOKE_FAST)
        elif args.index is not None:
            path, source, rounds = args.index, f"`{args.index}`", args.rounds
        else:
            if not args.corpus.is_file():
                raise SystemExit(f"{args.corpus}: no such corpus (../shared/data, or --corpus FILE, or --index DIR)")
            path = CACHE / f"load_checks-{args.corpus.stem}-hashing384"
            if not (path / "manifest.json").is_file():
                build(args.corpus, path, FAST)
            source, rounds = f"the index of {args.corpus.name}, built with {' '.join(FAST)}", args.rounds
        result = measure(path, rounds)
    result["command"] = " ".join([COMMAND, *(argv if argv is not None else sys.argv[1:])]).strip()
    for mode, m in result["modes"].items():
        print(f"{mode}: checks off {m['checks_off_s'] * 1e3:.1f} ms, on {m['checks_on_s'] * 1e3:.1f} ms, "
              f"ratio {m['ratio']:.3f} (rounds: {m['paired_ratio']:.3f}; the checks {m['checks_in_load_s'] * 1e3:.2f} ms)")
    print(f"checks alone {result['checks_alone_s'] * 1e3:.2f} ms")
    if not args.smoke:
        write_results("load_checks", result, markdown(result, source))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
