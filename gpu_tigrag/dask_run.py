"""Query runs on Dask workers (`tigrag run --workers N` or `--scheduler ADDRESS`): the
multi-process counterpart of `batch_run.py`.

Every worker loads the index once (cached per process) and answers shards of queries; the
client streams the query file, keeps a bounded number of shards in flight, and writes the
results in input order as shards complete, with the same output format, fsync and `--resume`
as a single-process run (`batch_run.py`). The shard of a worker that dies is re-run on another
by the Dask scheduler (up to its `allowed-failures` setting, 3 by default); tested by killing
one. The client holds the output's writer lock and checks a resume exactly as the
single-process run does (the index is identified by its manifest's sha256, as there). The Dask
client itself comes from `cluster.py`.
"""

from __future__ import annotations

import json
import logging
import time
from itertools import islice
from pathlib import Path
from typing import Any, Iterator

from .batch_run import QueryRecord, open_run, result_record
from .cluster import dask_client
from .config import RetrievalConfig, config_from_dict, config_to_dict
from .evaluate.datasets import QuerySource
from .progress import counter

log = logging.getLogger(__name__)

_WORKER_CACHE: dict[tuple[str, str], Any] = {}
_WORKER_THREADS: Any = None  # the thread policy this worker process applied (gpu_tigrag.threads)


def _worker_threads(threads: dict[str, Any]) -> None:
    """This worker's share of its host's cores (gpu_tigrag.threads), applied once per process before
    its index loads: the run's `--threads` (else the host's cores) divided among the workers on the
    same host. `threads`: {"threads": N or None, "per_host": {host: workers}}."""
    global _WORKER_THREADS
    if _WORKER_THREADS is not None:
        return
    from distributed import get_worker

    from .threads import apply_thread_policy

    host = _host(get_worker().address)
    _WORKER_THREADS = apply_thread_policy(threads["threads"], workers=int(threads["per_host"].get(host, 1)), force=True)
    log.debug("worker %s: %s", host, _WORKER_THREADS.describe())


def _host(address: str) -> str:
    """The host part of a Dask address ("tcp://10.0.0.5:40123" -> "10.0.0.5")."""
    return address.split("://", 1)[-1].rsplit(":", 1)[0]


def workers_per_host(client: Any) -> dict[str, int]:
    """How many of the client's workers run on each host (they share its cores)."""
    counts: dict[str, int] = {}
    for address in client.scheduler_info()["workers"]:
        counts[_host(address)] = counts.get(_host(address), 0) + 1
    return counts


def _worker_retriever(index_path: str, config: dict[str, Any], backend: str, encoder_options: dict[str, Any],
                      threads: dict[str, Any] | None = None):
    """The retriever of this worker process, built on first use. `encoder_options`: the vector cache
    folder (or None) and its bound in MiB, and whether mixed encoder runtimes are allowed; `threads`:
    see `_worker_threads`."""
    key = (index_path, json.dumps([config, backend, encoder_options], sort_keys=True))
    if threads is not None:
        _worker_threads(threads)
    if key not in _WORKER_CACHE:
        from .encoders import VectorCache
        from .index.store import load_index
        from .retrieve.factory import make_retriever

        folder = encoder_options.get("vector_cache")
        cache = VectorCache(folder, encoder_options["vector_cache_mib"] << 20) if folder is not None else None
        _WORKER_CACHE[key] = make_retriever(load_index(index_path), config_from_dict(RetrievalConfig, config),
                                            backend=backend, vector_cache=cache,
                                            allow_mixed_encoder=bool(encoder_options.get("allow_mixed_encoder")))
    return _WORKER_CACHE[key]


def retrieve_shard(index_path: str, config: dict[str, Any], backend: str, encoder_options: dict[str, Any],
                   shard: list[tuple[int, str, str]], k: int, threads: dict[str, Any] | None = None) -> list[dict]:
    """Task run on a worker: output rows of one shard, in shard order (`threads`: `_worker_threads`)."""
    retriever = _worker_retriever(index_path, config, backend, encoder_options, threads)
    results = retriever.retrieve([text for _, _, text in shard], k=k)
    return [result_record(QueryRecord(*item), result) for item, result in zip(shard, results)]


def run_distributed(index_path: str | Path, config: RetrievalConfig, queries_path: str | Path | QuerySource,
                    output: str | Path,
                    k: int = 5, workers: int = 2, scheduler: str | None = None, backend: str = "auto",
                    shard_size: int | None = None, resume: bool = False, show_progress: bool = False,
                    vector_cache: str | None = None, vector_cache_mib: int = 2048,
                    allow_mixed_encoder: bool = False, fmt: str | None = None, tag: str = "tigrag",
                    threads: int | None = None) -> dict[str, Any]:
    """Spread the queries over Dask workers; results stream into `output` in input order.
    `vector_cache` is a folder the workers share for their query vectors (see encoders.VectorCache).
    Each worker's pools get `threads` (None: its host's cores) divided among the workers on its host.

    Shards default to the configured batch size, so every shard is computed exactly as the
    single-process run computes that batch and the two outputs are identical byte for byte
    (other shard sizes change BLAS blocking, hence the last bits of some scores).
    """
    from .index.store import pinned_generation

    shard_size = shard_size or config.batch_size
    # one generation for the whole run (a clear error here, not on every worker): every worker
    # loads it, whatever a writer commits meanwhile
    with pinned_generation(index_path) as (folder, digest), \
            open_run(queries_path, output, resume, f"manifest:{digest}", config_to_dict(config), k, fmt, tag) \
            as (sink, done, records), \
            dask_client(scheduler, workers) as client:
        encoder_options = {"vector_cache": vector_cache, "vector_cache_mib": vector_cache_mib,
                           "allow_mixed_encoder": allow_mixed_encoder}
        settings = (str(folder.resolve()), config_to_dict(config), backend, encoder_options)
        thread_options = {"threads": threads, "per_host": workers_per_host(client)}
        return _run_on(client, sink, done, records, settings, shard_size, k, show_progress, thread_options)


def _run_on(client: Any, sink: Any, done: int, records: Iterator[QueryRecord], settings: tuple, shard_size: int,
            k: int, show_progress: bool, thread_options: dict[str, Any] | None = None) -> dict[str, Any]:
    from distributed import as_completed

    n_workers = len(client.scheduler_info()["workers"])
    log.info("%d Dask worker(s), shards of %d queries", n_workers, shard_size)
    bar = counter(0, "run", show_progress, unit="query")
    written, start = 0, time.perf_counter()
    try:
        pending: dict[int, list[dict]] = {}
        next_shard = submitted = 0
        in_flight = as_completed(loop=client.loop)  # this client's loop, not the default client's
        futures: dict[Any, int] = {}

        def submit() -> bool:
            nonlocal submitted
            shard = [(r.position, r.qid, r.text) for r in islice(records, shard_size)]
            if not shard:
                return False
            future = client.submit(retrieve_shard, *settings, shard, k, threads=thread_options, pure=False)
            futures[future] = submitted
            in_flight.add(future)
            submitted += 1
            return True

        for _ in range(2 * max(n_workers, 1)):
            if not submit():
                break
        for future in in_flight:
            pending[futures.pop(future)] = future.result()
            submit()
            while next_shard in pending:  # write completed shards in input order
                rows = pending.pop(next_shard)
                sink.write(rows)
                written += len(rows)
                bar.update(len(rows))
                next_shard += 1
    finally:
        bar.close()
    elapsed = time.perf_counter() - start
    return {"skipped_done": done, "written": written, "seconds": elapsed, "workers": n_workers,
            "queries_per_second": written / elapsed if elapsed else 0.0}
