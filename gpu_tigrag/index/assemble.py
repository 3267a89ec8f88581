"""The one assembly path of an index, shared by the in-memory build, `add` and the streaming build.

All three compute the same pieces (chunks, vocabulary, token table, token graph, BM25, embeddings,
entity lists) in their own order and memory shape, then hand them to `assemble_index`, which
builds the entity table and the token graph's statistics and returns the `Index`; so an index grown by
`add` or streamed partition by partition equals a full in-memory build array for array (tested,
and fingerprinted by bench/checks/identity.py). Stage timings use one helper, `timed`.

Named-entity recognition needs only the chunk texts, so `EntityThread` runs it beside the encoder:
spaCy's NER is one thread of Python and Cython, the encoder's runtime releases the GIL while it
computes, and on 2 cores the encoder alone gains only ~1.3× from its second thread (measured in
bench/results/build_overlap.md). Both produce what they produce alone: the same vectors (the
encoder's per-row contract) and the same entity lists.
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

import numpy as np

from ..config import IndexConfig
from ..encoders import Encoder
from ..text.tokens import Vocabulary
from .entities import entities_from_lists, extract_entities
from .index import Index
from .stats import graph_statistics

log = logging.getLogger(__name__)

#: maps chunk texts to (surface form, label) lists, one list per chunk
EntityExtractor = Callable[[Sequence[str]], list[list[tuple[str, str]]]]
#: what an entity list holds once read back from an index or a checkpoint: (text, label or label mask)
EntityLists = list[list[tuple[str, str]]] | list[list[tuple[str, int]]]


@contextmanager
def timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    """Add the block's wall time to `timings[stage]` (a stage may run once per partition) and log it
    (DEBUG: the CLI prints the totals when the build ends)."""
    start = time.perf_counter()
    yield
    elapsed = time.perf_counter() - start
    timings[stage] = timings.get(stage, 0.0) + elapsed
    log.debug("%s: %.2f s", stage, elapsed)


def chunk_entities(texts: Sequence[str], config: IndexConfig, extractor: EntityExtractor | None = None,
                   show_progress: bool = False) -> list[list[tuple[str, str]]]:
    """(surface form, label) lists of `texts`: `extractor`, or the spaCy model of `config.entities`."""
    if extractor is not None:
        return extractor(texts)
    return extract_entities(texts, config.entities, show_progress)


#: run NER in a thread beside the encoder (False: in line, after it; the bench measures both)
OVERLAP_NER = True


def load_entity_model(config: IndexConfig, extractor: EntityExtractor | None = None) -> None:
    """Import and load the NER model `chunk_entities` will use, in the calling thread.

    The NER thread then only recognises. Imports in two threads at once are not safe on every
    Python: CPython 3.11.7 shares one AST-construction depth counter between threads, and
    libraries that parse source while they import (anyio's lazy importer, reached from both
    sentence-transformers and spaCy) failed a CI run with "AST constructor recursion depth
    mismatch" when spaCy loaded in the thread while the encoder loaded beside it.
    """
    if extractor is None and config.entities.model != "capitalized":
        from .entities import load_ner

        load_ner(config.entities.model)


class EntityThread:
    """`chunk_entities(texts, ...)` started at construction in a daemon thread (in line at `result()`
    where OVERLAP_NER is off). `result()` waits for the lists and re-raises the thread's error;
    `seconds` is the recognition's own wall time, `waited` how long `result()` waited for it."""

    def __init__(self, texts: Sequence[str], config: IndexConfig, extractor: EntityExtractor | None = None,
                 show_progress: bool = False):
        self._call = (texts, config, extractor, show_progress)
        self._done = threading.Event()
        self._lists: list[list[tuple[str, str]]] | None = None
        self._error: BaseException | None = None
        self.seconds = self.waited = self._loading = 0.0
        if OVERLAP_NER:
            start = time.perf_counter()
            load_entity_model(config, extractor)  # imports stay in this thread (load_entity_model)
            self._loading = time.perf_counter() - start  # counted in the recognition's own seconds
            threading.Thread(target=self._run, name="tigrag-ner", daemon=True).start()

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            self._lists = chunk_entities(*self._call)
        except BaseException as exc:  # handed to the thread that asks for the result
            self._error = exc
        finally:
            self.seconds = self._loading + time.perf_counter() - start
            self._done.set()

    def result(self) -> list[list[tuple[str, str]]]:
        start = time.perf_counter()
        if not OVERLAP_NER and not self._done.is_set():
            self._run()
        self._done.wait()
        self.waited = time.perf_counter() - start
        if self._error is not None:
            raise self._error
        assert self._lists is not None
        return self._lists

    def record(self, timings: dict[str, float], prefix: str = "") -> None:
        record_ner(timings, self.seconds, self.waited, prefix)


def record_ner(timings: dict[str, float], seconds: float, waited: float, prefix: str = "") -> None:
    """Add NER's own seconds to `timings` as `{prefix}ner` and the build's wait for it as `{prefix}ner_wait`."""
    for key, value in ((f"{prefix}ner", seconds), (f"{prefix}ner_wait", waited)):
        timings[key] = timings.get(key, 0.0) + value


def assemble_index(
    *, config: IndexConfig, passage_titles: list[str], passage_ids: list[str], chunk_texts: list[str],
    chunk_passage: np.ndarray, vocab: Vocabulary, token_indptr: np.ndarray, token_ids: np.ndarray,
    graph, bm25, embeddings: np.ndarray, entity_lists: EntityLists, encoder: Encoder | tuple[str, str, str],
    timings: dict[str, float],
) -> Index:
    """The Index of host arrays (`graph`: the token co-occurrence graph): the entity table (in chunk
    order) and the token graph's statistics are computed here, the same way for every build path.
    `encoder` (or its recorded identity: name, fingerprint, backend) is what computed `embeddings`."""
    entities = entities_from_lists(entity_lists, vocab, config.tokens)
    name, fingerprint, backend = (encoder if isinstance(encoder, tuple)
                                  else (encoder.name, encoder.fingerprint, encoder.backend))
    return Index(
        config=config, passage_titles=passage_titles, passage_ids=passage_ids, chunk_texts=chunk_texts,
        chunk_passage=chunk_passage, vocab=vocab, token_indptr=token_indptr, token_ids=token_ids, graph=graph,
        bm25=bm25, embeddings=embeddings, entities=entities, encoder_name=name, encoder_fingerprint=fingerprint,
        encoder_backend=backend, stats=graph_statistics(graph, bm25), timings=timings,
    )
