"""Does a query's vector, and so its ranking, depend on how it was batched? The default CPU encoder
(multilingual-e5-small on onnx-int8) with per-row activation scales (today's recipe) against the
per-tensor scales of plain dynamic quantisation (the recipe before, FORMAT 1: one activation scale
per batch tensor, the first half of the feed-forward output projections kept float) and against fp32
torch, on 2Wiki and MuSiQue-100.

    python bench/studies/determinism.py                     # both datasets (~30-40 min on 2 quiet cores)
    python bench/studies/determinism.py --datasets musique_train100 --smoke

1. Batch dependence: every query encoded alone, in length-sorted batches of 64 (what `eval` and
   `run` do) and in batches of 7 in a shuffled order; per recipe, the largest change of a vector,
   and how many queries get another top-10 in dense retrieval over the dataset's passages.
2. Quality: dense passage retrieval (each passage "title\\ntext" embedded once, each query ranked
   against all of them by cosine; R@2/R@5/R@10 as gpu_tigrag.evaluate.metrics computes them) per
   recipe, and the cosine of each recipe's query and passage vectors to fp32 torch.
3. Speed: texts/s of each runtime on a sample of passages and on the queries, in interleaved
   rounds (best round and median), after a warm-up call; the load average is recorded.

Writes bench/results/determinism.{json,md}. Passage vectors are cached under
.cache/bench/determinism/ (keyed by runtime, recipe and texts); timings are always measured afresh.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, DATA, write_results

from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.encoders.base import PASSAGE, QUERY
from gpu_tigrag.evaluate.metrics import recall_at_k

MODEL = "multilingual-e5-small"
FILES = {"2wikimultihopqa": ("2wikimultihopqa_corpus.json", "2wikimultihopqa_dev500.json"),
         "musique_train100": ("musique_train_corpus.json", "musique_train.json")}
LABELS = {"2wikimultihopqa": "2Wiki", "musique_train100": "MuSiQue-100"}
RECIPES = ("per-row int8 (today)", "per-tensor int8 (before)", "fp32 torch")
#: the recipe before per-row scales (onnx_int8.py FORMAT 1)
PER_TENSOR = {"weight_type": "QInt8", "per_channel": True, "reduce_range": False, "float_ffn_output_layers": 0.5}


def load(name: str) -> tuple[list[str], list[str], list[list[str]], list[str]]:
    """(passage texts, passage titles, gold titles per query, query texts) of a shared dataset."""
    corpus_file, query_file = FILES[name]
    corpus = json.loads((DATA / name / corpus_file).read_text())
    raw = json.loads((DATA / name / query_file).read_text())
    texts = [f"{p['title']}\n{p['text']}" for p in corpus]
    titles = [p["title"] for p in corpus]
    if name == "musique_train100":
        gold = [[p["title"] for p in q["paragraphs"] if p["is_supporting"]] for q in raw]
    else:
        gold = [list(q["supporting_titles"]) for q in raw]
    return texts, titles, gold, [q["question"] for q in raw]


@contextlib.contextmanager
def per_tensor_recipe():
    """onnx_int8 building its model with the recipe before per-row scales (in a cache of its own)."""
    from gpu_tigrag.encoders import onnx_int8, onnx_rows

    saved = (onnx_int8.QUANTIZATION, onnx_int8.FORMAT, onnx_int8.DISABLED_OPTIMIZERS, onnx_rows.per_row_activation_scales)
    onnx_int8.QUANTIZATION, onnx_int8.FORMAT, onnx_int8.DISABLED_OPTIMIZERS = PER_TENSOR, 1, ()  # its fusion was on
    onnx_rows.per_row_activation_scales = lambda model: 0
    try:
        yield
    finally:
        (onnx_int8.QUANTIZATION, onnx_int8.FORMAT, onnx_int8.DISABLED_OPTIMIZERS,
         onnx_rows.per_row_activation_scales) = saved


def encoders() -> dict[str, object]:
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.encoders.onnx_int8 import OnnxInt8Encoder

    config = EncoderConfig(model=MODEL, backend="onnx-int8", device="cpu")
    out = {RECIPES[0]: OnnxInt8Encoder(config)}
    with per_tensor_recipe():
        out[RECIPES[1]] = OnnxInt8Encoder(config, cache_root=CACHE / "determinism" / "onnx-per-tensor")
    out[RECIPES[2]] = load_encoder(EncoderConfig(model=MODEL, backend="torch", device="cpu"))
    return out


def passage_vectors(encoder, recipe: str, texts: list[str]) -> np.ndarray:
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    key = hashlib.sha256(f"{recipe}|{encoder.fingerprint}".encode()).hexdigest()[:16]
    path = CACHE / "determinism" / f"passages-{key}-{digest}.npy"
    if path.is_file():
        return np.load(path)
    vectors = encoder.encode(texts, kind=PASSAGE)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp.npy")
    np.save(tmp, vectors)
    os.replace(tmp, path)
    return vectors


def encode_batched(encoder, texts: list[str], batch_size: int, order: list[int] | None = None) -> np.ndarray:
    """Query vectors with `batch_size` (in `order`, returned in input order)."""
    order = order or list(range(len(texts)))
    saved = encoder.batch_size
    encoder.batch_size = batch_size
    try:
        vectors = encoder.encode([texts[i] for i in order], kind=QUERY)
    finally:
        encoder.batch_size = saved
    out = np.empty_like(vectors)
    out[order] = vectors
    return out


def top10(queries: np.ndarray, passages: np.ndarray) -> np.ndarray:
    scores = queries @ passages.T
    return np.argsort(-scores, axis=1, kind="stable")[:, :10]


def batch_dependence(encoder, texts: list[str], passages: np.ndarray) -> dict:
    alone = np.stack([encoder.encode([t], kind=QUERY)[0] for t in texts])
    order = list(range(len(texts)))
    random.Random(0).shuffle(order)
    ways = {"batches of 64": encode_batched(encoder, texts, 64), "batches of 7, shuffled": encode_batched(encoder, texts, 7, order)}
    reference = top10(alone, passages)
    out = {}
    for label, vectors in ways.items():
        other = top10(vectors, passages)
        out[label] = {"max_abs_change": float(np.abs(vectors - alone).max()),
                      "min_cosine": float((vectors * alone).sum(axis=1).min()),
                      "queries_with_another_top10": int((other != reference).any(axis=1).sum())}
    return out


def quality(queries: np.ndarray, passages: np.ndarray, titles: list[str], gold: list[list[str]]) -> dict:
    ranked = [[titles[i] for i in row] for row in top10(queries, passages)]
    return {f"recall@{k}": recall_at_k(ranked, gold, k) for k in (2, 5, 10)}


def speed(runtimes: dict, texts: list[str], kind: str, rounds: int) -> dict:
    for encoder in runtimes.values():
        encoder.encode(texts[:16], kind=kind)  # warm-up
    seen: dict[str, list[float]] = {name: [] for name in runtimes}
    for _ in range(rounds):
        for name, encoder in runtimes.items():
            start = time.perf_counter()
            encoder.encode(texts, kind=kind)
            seen[name].append(len(texts) / (time.perf_counter() - start))
    return {name: {"best": max(v), "median": float(np.median(v))} for name, v in seen.items()}


def subsample(texts: list[str], titles: list[str], gold: list[list[str]], limit: int) -> tuple[list[str], list[str]]:
    """At most `limit` passages: every passage whose title is a gold title, then a seeded random sample
    of the others (the corpus order kept)."""
    if len(texts) <= limit:
        return texts, titles
    wanted = {t for g in gold for t in g}
    keep = [i for i, t in enumerate(titles) if t in wanted]
    others = [i for i, t in enumerate(titles) if t not in wanted]
    keep += random.Random(0).sample(others, max(0, limit - len(keep)))
    keep.sort()
    return [texts[i] for i in keep], [titles[i] for i in keep]


def run_dataset(name: str, runtimes: dict, smoke: bool, max_passages: int) -> dict:
    texts, titles, gold, queries = load(name)
    if smoke:
        texts, titles, queries, gold = texts[:200], titles[:200], queries[:20], gold[:20]
    texts, titles = subsample(texts, titles, gold, max_passages)
    print(f"{name}: {len(texts)} passages, {len(queries)} queries", file=sys.stderr)
    corpus = len(load(name)[0]) if not smoke else 200
    out: dict = {"passages": len(texts), "corpus_passages": corpus, "queries": len(queries), "recipes": {}}
    reference_q = runtimes[RECIPES[2]].encode(queries, kind=QUERY)
    reference_p = passage_vectors(runtimes[RECIPES[2]], RECIPES[2], texts)
    for recipe, encoder in runtimes.items():
        start = time.perf_counter()
        passages = reference_p if recipe == RECIPES[2] else passage_vectors(encoder, recipe, texts)
        query_vectors = encode_batched(encoder, queries, 64)
        row = {"quality": quality(query_vectors, passages, titles, gold),
               "cosine_to_fp32": {"queries_mean": float((query_vectors * reference_q).sum(1).mean()),
                                  "queries_min": float((query_vectors * reference_q).sum(1).min()),
                                  "passages_mean": float((passages * reference_p).sum(1).mean()),
                                  "passages_min": float((passages * reference_p).sum(1).min())},
               "batch_dependence": batch_dependence(encoder, queries, passages)}
        out["recipes"][recipe] = row
        print(f"  {recipe}: {row['quality']} ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    return out


def markdown(payload: dict) -> str:
    lines = ["# Determinism: query vectors and rankings independent of batching (default CPU encoder)", "",
             f"Command: `{payload['command']}`. Encoder {MODEL}; passages embedded once each (\"title\\ntext\"), "
             "queries ranked against all passages by cosine (dense passage retrieval, the encoder's own effect; the "
             "engine's rankings through every entry point are tested in tests/interface/test_determinism.py). Load average "
             f"at start {payload['load_start']}, at end {payload['load_end']} (the machine was shared: speed "
             "figures are best rounds of interleaved runs).", ""]
    for name, data in payload["datasets"].items():
        sampled = data.get("corpus_passages", data["passages"]) > data["passages"]
        where = (f"{data['passages']} of its {data['corpus_passages']} passages: every gold passage and a seeded "
                 "sample of the others" if sampled else f"all {data['passages']} passages")
        lines += [f"## {LABELS[name]} ({where}; {data['queries']} queries)", "",
                  "| recipe | R@2 | R@5 | R@10 | cosine to fp32, queries mean / min | passages mean / min |",
                  "|---|---|---|---|---|---|"]
        for recipe, row in data["recipes"].items():
            q, c = row["quality"], row["cosine_to_fp32"]
            lines.append(f"| {recipe} | {100 * q['recall@2']:.2f} | {100 * q['recall@5']:.2f} | "
                         f"{100 * q['recall@10']:.2f} | {c['queries_mean']:.5f} / {c['queries_min']:.5f} | "
                         f"{c['passages_mean']:.5f} / {c['passages_min']:.5f} |")
        lines += ["", "Each query encoded alone vs in another batching:", "",
                  "| recipe | batching | largest change of a vector element | lowest cosine | queries with another top-10 |",
                  "|---|---|---|---|---|"]
        for recipe, row in data["recipes"].items():
            for way, d in row["batch_dependence"].items():
                lines.append(f"| {recipe} | {way} | {d['max_abs_change']:.2e} | {d['min_cosine']:.6f} | "
                             f"{d['queries_with_another_top10']} of {data['queries']} |")
        lines.append("")
    if payload.get("speed"):
        lines += ["## Speed (texts/s, 2 threads, best round (median))", "", "| runtime | passages | queries | passages vs torch |",
                  "|---|---|---|---|"]
        p, q = payload["speed"]["passages"], payload["speed"]["queries"]
        for recipe in p:
            ratio = p[recipe]["best"] / p[RECIPES[2]]["best"]
            lines.append(f"| {recipe} | {p[recipe]['best']:.1f} ({p[recipe]['median']:.1f}) | "
                         f"{q[recipe]['best']:.1f} ({q[recipe]['median']:.1f}) | {ratio:.2f}× |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", nargs="+", default=list(FILES), choices=list(FILES))
    parser.add_argument("--smoke", action="store_true", help="200 passages and 20 queries; writes no result")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved speed rounds")
    parser.add_argument("--no-speed", action="store_true")
    parser.add_argument("--max-passages", type=int, default=2000,
                        help="passages per dataset at most: every gold passage, then a seeded sample of the others "
                             "(2Wiki has 6,119; the fp32 torch pass over all of them takes ~45 min on 2 cores)")
    parser.add_argument("--markdown-only", action="store_true",
                        help="rewrite determinism.md from the stored determinism.json (no measurement)")
    args = parser.parse_args()
    if args.markdown_only:
        from bench.common import RESULTS

        payload = json.loads((RESULTS / "determinism.json").read_text())
        (RESULTS / "determinism.md").write_text(markdown(payload).rstrip() + "\n")
        return 0
    missing = [name for name in args.datasets if not (DATA / name).is_dir()]
    if missing:
        print(f"determinism: {DATA} lacks {', '.join(missing)}; nothing measured", file=sys.stderr)
        return 0
    load_start = os.getloadavg()
    runtimes = encoders()
    payload = {"command": "python bench/studies/determinism.py " + " ".join(sys.argv[1:]), "model": MODEL,
               "datasets": {name: run_dataset(name, runtimes, args.smoke, args.max_passages) for name in args.datasets}}
    if not args.no_speed:
        texts, _, _, queries = load(args.datasets[0])
        sample = random.Random(0).sample(texts, min(200 if not args.smoke else 20, len(texts)))
        payload["speed"] = {"passages": speed(runtimes, sample, PASSAGE, args.rounds),
                            "queries": speed(runtimes, queries, QUERY, args.rounds)}
    payload["load_start"] = ", ".join(f"{x:.2f}" for x in load_start)
    payload["load_end"] = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    if args.smoke:
        print(markdown(payload))
        return 0
    write_results("determinism", payload, markdown(payload))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
