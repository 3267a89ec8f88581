"""The shared retriever base: what every method's retriever does alike.

`BaseRetriever` owns batching (a memory plan from the method's bytes per query, halving a block on
an out-of-memory error), `k` checks, the passage encoder's set-up and timing, the ranked top-k
and result assembly; a method writes its scoring (`_retrieve_batch`) and, when its host-side
preparation differs, `prepare`. Every retriever answers `prepare(queries)` / `run_prepared(batch,
k)` (the two halves `run` overlaps), `retrieve(queries, k)`, `batch_size()` and keeps a `timer`.
"""

from __future__ import annotations

import abc

import logging
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, ClassVar, Sequence

import numpy as np

from ..backend import Backend, get_backend
from ..config import RetrievalConfig
from ..encoders import QUERY, CachingEncoder, Encoder, VectorCache, check_compatible
from ..encoders.lazy import LazyEncoder, query_encoder
from ..errors import ResourceError, TigragError
from ..ops.topk import ranked_top_k
from ..progress import counter
from ..records import replace_surrogates
from ..text.tokens import valid_tokens
from .device import DeviceIndex
from .results import HopTrace, QueryResult

#: the token ids of a query whose method does not read them (`BaseRetriever.uses_query_tokens`)
NO_TOKENS = np.zeros(0, dtype=np.int32)

log = logging.getLogger(__name__)


@dataclass
class StepTimer:
    """Seconds spent per query step (`encode`, `ppr`, `rerank`, ...), summed over batches; `encode` is
    the encoder alone. `encoded_texts` counts the texts sent to the encoder (queries and expanded
    queries μ ⊕ e). (A *stage* is a method's index arrays, `IndexStage`; a query runs steps.)"""

    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    encoded_texts: int = 0

    def add(self, step: str, start: float) -> float:
        now = time.perf_counter()
        self.seconds[step] += now - start
        return now


@dataclass
class PreparedBatch:
    """The host-side work of a batch, done ahead: seed token ids and query embeddings."""

    queries: list[str]
    seeds: list[np.ndarray]
    vectors: Any  # B × dim: host, or on the backend when the encoder hands them over directly

    def __len__(self) -> int:
        return len(self.queries)

    def part(self, start: int, stop: int) -> "PreparedBatch":
        return PreparedBatch(self.queries[start:stop], self.seeds[start:stop], self.vectors[start:stop])


def check_queries(queries: Any) -> list[str]:
    """The queries, checked: TigragError unless `queries` is a sequence of non-empty strings (as the
    CLI requires); a lone surrogate (invalid Unicode, which tokenizers refuse) is replaced by
    U+FFFD with a warning, as the query files' reader does (`records.py`)."""
    if isinstance(queries, str):
        queries = [queries]  # one query: a list of one result
    if isinstance(queries, bytes):
        raise TigragError("retrieve() takes query strings (str), not bytes: decode them first")
    if not isinstance(queries, Sequence):
        raise TigragError(f"retrieve() takes a sequence (list, tuple) of query strings, got {type(queries).__name__}")
    for position, query in enumerate(queries, start=1):
        if not isinstance(query, str):
            raise TigragError(f"query {position} is a {type(query).__name__}, not a string")
        if not query.strip():
            raise TigragError(f"query {position} is empty; empty queries are errors")
    checked = []
    for position, query in enumerate(queries, start=1):
        fixed, count = replace_surrogates(query)
        if count:
            log.warning("query %d holds %d lone surrogate(s) (invalid Unicode: half of a UTF-16 pair), replaced by "
                        "U+FFFD", position, count)
        checked.append(fixed)
    return checked


def check_retriever_arguments(index: Any, config: Any) -> None:
    """TigragError for the common wrong arguments of a retriever: a path instead of a loaded index,
    anything but a RetrievalConfig (or None) as the configuration."""
    import os

    if isinstance(index, (str, bytes, os.PathLike)):
        raise TigragError(f"a retriever takes a loaded index (gpu_tigrag.load_index({str(index)!r})), not a path")
    if config is not None and not isinstance(config, RetrievalConfig):
        raise TigragError(f"config must be a RetrievalConfig (e.g. preset('best') or RetrievalConfig.of('spectrag')), "
                          f"got {type(config).__name__} {config!r}"[:300])


class BaseRetriever(abc.ABC):
    """Batched retrieval of one method over an `Index` (module doc). A method's retriever sets `method`
    and writes the two abstract methods, `_retrieve_batch(batch, k)` (one block's results) and
    `bytes_per_query()` (its working memory per query, which sizes the blocks); it may override
    `prepare` (what a block needs from the host) and `default_k`."""

    #: the registered method this retriever answers
    method: ClassVar[str] = ""
    #: constructor options this retriever takes (make_retriever drops the others)
    OPTIONS: ClassVar[frozenset[str]] = frozenset({"encoder", "backend", "vector_cache", "allow_mixed_encoder"})
    #: whether queries are embedded by the index's passage encoder
    uses_passage_encoder: ClassVar[bool] = True
    #: whether `_retrieve_batch` reads the queries' token ids (`query_seeds`): a method that ranks by the vectors
    #: alone (NaiveRAG) skips the tokenising, 0.1 ms a query (bench/results/method_scale.md)
    uses_query_tokens: ClassVar[bool] = True

    def __init__(self, index: Any, config: RetrievalConfig | None = None, encoder: Encoder | None = None,
                 backend: str | Backend = "auto", vector_cache: VectorCache | None = None,
                 allow_mixed_encoder: bool = False):
        """`encoder` defaults to the model and runtime that embedded the index; another one is an
        error unless `allow_mixed_encoder`. `vector_cache` keeps query vectors on disk across runs."""
        check_retriever_arguments(index, config)
        self.index = index
        self.config = config if config is not None else self.default_config()
        self.be = backend if isinstance(backend, Backend) else get_backend(backend)
        self.device = DeviceIndex.of(index, self.be)
        self.timer = StepTimer()
        if self.uses_passage_encoder:
            self.encoder = encoder or query_encoder(index, allow_mixed_encoder)  # loaded on the first text
            check_compatible(index.encoder_identity, self.encoder, allow_mixed_encoder)
            dim = getattr(self.encoder, "dim", None)
            if dim is not None and index.embeddings.ndim == 2 and dim != index.embeddings.shape[1]:
                raise TigragError(f"the query encoder gives {dim}-dimensional vectors, the index's passage vectors "
                                  f"have {index.embeddings.shape[1]} dimensions")
            if vector_cache is not None:
                self.encoder = CachingEncoder(self.encoder, vector_cache)

    @classmethod
    def default_config(cls) -> RetrievalConfig:
        """The configuration when none is given: the method's defaults."""
        return RetrievalConfig(method=cls.method)

    # -- host side --------------------------------------------------------------------------
    def query_seeds(self, queries: Sequence[str]) -> list[np.ndarray]:
        """The valid token ids of each query in the index's vocabulary (V_μ ∩ V)."""
        cfg = self.index.config
        return [self.index.vocab.encode(valid_tokens(q, cfg.tokens, cfg.chunk.language)) for q in queries]

    def encode_queries(self, texts: Sequence[str]) -> Any:
        """Query vectors, timed as `encode`: on the host, or already on the backend where the encoder
        can hand them over directly (a CUDA model to CuPy: no host round trip). A model loaded on
        this first use is loaded before the clock starts, as it was at start-up before it was lazy."""
        if isinstance(self.encoder, LazyEncoder) and len(texts):
            self.encoder.load()
        t = time.perf_counter()
        if self.be.is_gpu and getattr(self.encoder, "supports_device_output", False):
            vectors = self.encoder.encode(texts, kind=QUERY, device_output=True)
        else:
            vectors = self.encoder.encode(texts, kind=QUERY)
        self.timer.add("encode", t)
        self.timer.encoded_texts += len(texts)
        return vectors

    def encode(self, texts: Sequence[str]) -> Any:
        """Query vectors on the backend."""
        return self.be.asarray(self.encode_queries(texts))

    def prepare(self, queries: Sequence[str]) -> Any:
        """Tokenise and embed a batch (CPU work; may run in another thread ahead of `run_prepared`).
        The vectors stay where the encoder made them (`be.asarray` moves them once, if at all)."""
        queries = list(queries)
        seeds = self.query_seeds(queries) if self.uses_query_tokens else [NO_TOKENS] * len(queries)
        return PreparedBatch(queries, seeds, self.encode_queries(queries))

    # -- batches -----------------------------------------------------------------------------
    def retrieve(self, queries: str | Sequence[str], k: int | None = None,
                 show_progress: bool = False) -> list[QueryResult]:
        """The ranked chunks of every query, to depth k (default: the method's, `default_k`); one string
        is one query (a list of one result)."""
        queries = check_queries(queries)
        k = self._check_k(k)
        size = self.batch_size()
        results: list[QueryResult] = []
        bar = counter(len(queries), "retrieve", show_progress, unit="query")
        try:
            for start in range(0, len(queries), size):
                batch = self.prepare(queries[start : start + size])
                results.extend(self._retrieve_splitting(batch, k))
                bar.update(len(batch))
        finally:
            bar.close()
        return results

    def run_prepared(self, prepared: Any, k: int | None = None) -> list[QueryResult]:
        """The device part of a batch prepared by `prepare`, split on out-of-memory errors."""
        return self._retrieve_splitting(prepared, self._check_k(k))

    def default_k(self) -> int:
        """Results per query when k is None: β."""
        return self.config.beta

    def _check_k(self, k: int | None) -> int:
        """k, or `default_k()` when it is None; an error below 1. A k above the index's chunk count
        is that count: no query has more results, and a method's k-wide buffers stay bounded
        (k = 10**12 would otherwise ask for terabytes)."""
        if k is None:
            return self.default_k()
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise TigragError(f"k (results per query) must be an integer >= 1, got {k!r}")
        return int(min(k, max(self.index.n_chunks, 1)))

    @abc.abstractmethod
    def bytes_per_query(self) -> int:
        """Working memory of one query in a block (the dense blocks alive at once)."""

    def batch_size(self) -> int:
        """Queries per block: the configured size, lowered so one block fits `memory_budget_mb`
        and, on a GPU, 80% of the device memory free now."""
        budget = self.config.memory_budget_mb << 20
        free = self.be.free_memory_bytes()
        if free is not None:
            budget = min(budget, int(0.8 * free))
        fits = max(1, budget // max(self.bytes_per_query(), 1))
        return int(min(self.config.batch_size, fits))

    def _retrieve_splitting(self, batch: Any, k: int) -> list[QueryResult]:
        """One block; on an out-of-memory error it is halved and retried, so no query is lost. A block
        larger than the memory plan allows now (a plan that follows the candidates a method has met may
        shrink after the block was made) is cut to the plan first. Every result carries the corpus ids
        of its passages (`doc_ids`), also where a method built it itself."""
        size = self.batch_size()
        if len(batch) > size:
            return [result for start in range(0, len(batch), size)
                    for result in self._retrieve_splitting(batch.part(start, start + size), k)]
        try:
            results = self._retrieve_batch(batch, k)
        except self.be.out_of_memory_errors:
            if len(batch) == 1:
                raise ResourceError(
                    "out of memory on a single query; lower memory_budget_mb or use a machine with more memory"
                ) from None
            self.be.release_cached_memory()
            half = len(batch) // 2
            return (self._retrieve_splitting(batch.part(0, half), k)
                    + self._retrieve_splitting(batch.part(half, len(batch)), k))
        for r in results:
            if len(r.doc_ids) != len(r.passage_ids):
                r.doc_ids = [self.index.passage_ids[p] for p in r.passage_ids]
        return results

    @abc.abstractmethod
    def _retrieve_batch(self, batch: Any, k: int) -> list[QueryResult]:
        """The results of one block (a `PreparedBatch`, or what `prepare` returns), k chunks each."""

    # -- ranking and results ------------------------------------------------------------------
    def top_k(self, scores: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """(ids, scores), B × k on the host, of a chunks × B score block, best first; equal scores
        in chunk-id order on every backend."""
        ids, vals = ranked_top_k(self.be, scores, k)
        return self.be.to_host(ids).T, self.be.to_host(vals).T

    def result(self, query: str, chunk_ids: Sequence[int], scores: Sequence[float], dense_fallback: bool = False,
               hops: list[HopTrace] | None = None, context: int | None = None) -> QueryResult:
        """A `QueryResult` with the titles, passage positions and corpus passage ids of `chunk_ids`."""
        index = self.index
        chunk_ids = [int(c) for c in chunk_ids]
        passages = [int(index.chunk_passage[c]) for c in chunk_ids]
        return QueryResult(query=query, chunk_ids=chunk_ids, scores=[float(s) for s in scores],
                           titles=[index.passage_titles[p] for p in passages], passage_ids=passages,
                           dense_fallback=bool(dense_fallback), hops=hops or [], context=context,
                           doc_ids=[index.passage_ids[p] for p in passages])
