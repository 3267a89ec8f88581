"""`tigrag bench INDEX QUERIES`: the throughput of chosen systems on a user's own index and queries.

Each (system, threads) pair runs in a fresh process, so its start-up, memory and caches are its own:
the child reports the seconds from its spawn to the engine's imports done (interpreter, configuration,
index and registry modules), the index load, the retriever's set-up (its method's modules and device
arrays), the encoder load, then, for each batch size, every query through `retrieve` in batches of that
size (after one warm-up batch: kernel compilation), split into query encoding (the retriever's own
`encode` timer: questions and expanded texts) and the rest, with per-query latency percentiles (a
query waits for its whole batch) and the process's peak RSS. No vector cache: each batch size pays its
encoder as a user would. The figures come from `time.perf_counter` around real calls; nothing is
extrapolated.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Sequence

from .errors import TigragError

#: batch sizes and percentiles of the default run
DEFAULT_BATCH_SIZES = (1, 32, 256)
PERCENTILES = (50, 95, 99)


@dataclass(frozen=True)
class BenchSpec:
    """What one child process measures."""

    index: str
    queries: list[str]
    system: str
    config: dict[str, Any]
    threads: int | None
    batch_sizes: tuple[int, ...]
    backend: str
    k: int
    spawned: float  # time.time() in the parent just before the child started
    verify: bool = True
    allow_mixed_encoder: bool = False


def percentiles(values: Sequence[float]) -> dict[str, float]:
    import numpy as np

    return {f"p{p}_ms": float(np.percentile(np.asarray(values) * 1e3, p)) for p in PERCENTILES}


def measure(spec: BenchSpec) -> dict[str, Any]:
    """Run `spec` in this process (the child's side); a dict of seconds, rates and bytes."""
    from .threads import apply_thread_policy

    apply_thread_policy(spec.threads, force=True)
    from .config import RetrievalConfig, config_from_dict
    from .encoders.lazy import LazyEncoder
    from .index.store import load_index
    from .retrieve.factory import make_retriever

    ready = time.time()
    start = time.perf_counter()
    index = load_index(spec.index, verify_checksums=spec.verify)
    index_load = time.perf_counter() - start
    config = config_from_dict(RetrievalConfig, spec.config)
    start = time.perf_counter()
    retriever = make_retriever(index, config, backend=spec.backend, allow_mixed_encoder=spec.allow_mixed_encoder)
    setup = time.perf_counter() - start
    encoder_load = 0.0  # a method without an encoder (BM25) loads none
    if isinstance(getattr(retriever, "encoder", None), LazyEncoder) and retriever.uses_passage_encoder:
        start = time.perf_counter()
        retriever.encoder.load()
        encoder_load = time.perf_counter() - start
    out: dict[str, Any] = {"system": spec.system, "threads": spec.threads, "queries": len(spec.queries),
                           "startup_s": ready - spec.spawned, "index_load_s": index_load,
                           "retriever_setup_s": setup, "encoder_load_s": encoder_load,
                           "modes": dict(getattr(retriever, "chosen_modes", None) or {}), "backend": retriever.be.name, "batches": []}
    queries = spec.queries
    for size in spec.batch_sizes:
        retriever.retrieve(queries[:size], k=spec.k)  # warm-up: compilation, pools
        encode_before = retriever.timer.seconds.get("encode", 0.0)
        texts_before = retriever.timer.encoded_texts
        latencies: list[float] = []
        start = time.perf_counter()
        for first in range(0, len(queries), size):
            batch = queries[first:first + size]
            t = time.perf_counter()
            retriever.retrieve(batch, k=spec.k)
            latencies += [time.perf_counter() - t] * len(batch)
        wall = time.perf_counter() - start
        encode = retriever.timer.seconds.get("encode", 0.0) - encode_before
        out["batches"].append({
            "batch": size, "seconds": wall, "encode_s": encode, "retrieval_s": wall - encode,
            "queries_per_second": len(queries) / wall,
            "queries_per_second_without_encoder": len(queries) / max(wall - encode, 1e-12),
            "encoder_share": encode / wall if wall else 0.0,
            "encoded_texts_per_query": (retriever.timer.encoded_texts - texts_before) / len(queries),
            **percentiles(latencies)})
    out["peak_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def run_child(spec: BenchSpec, timeout: float | None = None) -> dict[str, Any]:
    """`measure(spec)` in a fresh interpreter; its last stdout line is the result."""
    spec = BenchSpec(**{**spec.__dict__, "spawned": time.time()})
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.benchmark"], input=json.dumps(spec.__dict__),
                          capture_output=True, text=True, timeout=timeout)
    if done.returncode:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise TigragError(f"benchmark of {spec.system} (threads {spec.threads or 'auto'}) failed:\n{tail}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def table(rows: list[dict[str, Any]]) -> str:
    """The console table: one line per (system, threads, batch), then the start-up line per process."""
    head = (f"{'system':<22} {'thr':>3} {'batch':>5} {'q/s':>8} {'q/s w/o enc':>11} {'enc %':>6} {'texts/q':>7} "
            f"{'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8}")
    lines = ["end to end = query encoding + retrieval, per batch size (after one warm-up batch):", head,
             "-" * len(head)]
    for row in rows:
        for b in row["batches"]:
            lines.append(f"{row['system'][:22]:<22} {row['threads'] or 'auto':>3} {b['batch']:>5} "
                         f"{b['queries_per_second']:>8.1f} {b['queries_per_second_without_encoder']:>11.1f} "
                         f"{100 * b['encoder_share']:>5.0f}% {b['encoded_texts_per_query']:>7.2f} "
                         f"{b['p50_ms']:>8.1f} {b['p95_ms']:>8.1f} {b['p99_ms']:>8.1f}")
    lines += ["", "each (system, threads) in a fresh process:",
              f"{'system':<22} {'thr':>3} {'start-up s':>10} {'index load s':>12} {'retriever s':>11} "
              f"{'encoder load s':>14} {'peak RSS MiB':>12}"]
    for row in rows:
        lines.append(f"{row['system'][:22]:<22} {row['threads'] or 'auto':>3} {row['startup_s']:>10.2f} "
                     f"{row['index_load_s']:>12.2f} {row['retriever_setup_s']:>11.2f} {row['encoder_load_s']:>14.2f} "
                     f"{row['peak_rss_mib']:>12,.0f}")
    return "\n".join(lines)


def main() -> int:
    """The child's entry point: a BenchSpec as JSON on stdin, the result as one JSON line on stdout."""
    spec = BenchSpec(**json.loads(sys.stdin.read()))
    spec = BenchSpec(**{**spec.__dict__, "batch_sizes": tuple(spec.batch_sizes)})
    try:
        result = measure(spec)
    except TigragError as exc:  # a user's mistake: its message, no traceback
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(json.dumps(result) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
