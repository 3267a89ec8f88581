"""Index construction: chunks -> graph, BM25, embeddings, entities, with per-stage timings."""

from __future__ import annotations

import logging
import time
from contextlib import contextmanager
from typing import Callable, Iterator, Sequence

from ..backend import Backend, get_backend
from ..config import IndexConfig
from ..corpus import Passage, duplicate_passages
from ..text.pipeline import assemble_chunks, chunk_and_tokenise, split_passages
from .bm25 import bm25_matrix
from .embed import Encoder, load_encoder
from .entities import entities_from_lists, extract_entities
from .graph import cooccurrence_graph
from .index import Index
from .stats import graph_statistics

log = logging.getLogger(__name__)


@contextmanager
def _timed(timings: dict[str, float], stage: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    timings[stage] = time.perf_counter() - start
    log.info("%s: %.2f s", stage, timings[stage])


def warn_duplicates(passages: Sequence[Passage]) -> int:
    """Log a warning with the count of passages repeating an earlier one's title and text; returns it."""
    repeated = duplicate_passages(passages)
    if repeated:
        log.warning("%d of %d passages repeat an earlier passage's title and text (a corpus given twice?): each "
                    "copy is indexed and competes for the top k; --drop-duplicates (tigrag index, add) keeps one",
                    repeated, len(passages))
    return repeated


def build_index(
    passages: Sequence[Passage],
    config: IndexConfig = IndexConfig(),
    encoder: Encoder | None = None,
    backend: Backend | None = None,
    show_progress: bool = False,
    entity_extractor: Callable[[Sequence[str]], list[list[tuple[str, str]]]] | None = None,
) -> Index:
    """Build every stage of the TIGRAG index over `passages`; arrays come back on the host.

    `entity_extractor` maps chunk texts to (surface form, label) lists; the default runs the
    spaCy model of `config.entities`.
    """
    warn_duplicates(passages)
    be = backend or get_backend("numpy")
    timings: dict[str, float] = {}
    with _timed(timings, "split"):
        sentences = split_passages(passages, config.chunk.language, show_progress)
    with _timed(timings, "tokenise"):
        chunks = assemble_chunks(*chunk_and_tokenise(passages, sentences, config.chunk, config.tokens, show_progress))
    n_vocab = len(chunks.vocab)
    with _timed(timings, "graph"):
        graph = cooccurrence_graph(be, chunks.token_indptr, chunks.token_ids, n_vocab, config.graph.window)
    with _timed(timings, "bm25"):
        bm25 = bm25_matrix(be, chunks.token_indptr, chunks.token_ids, n_vocab, config.bm25)
    graph, bm25 = be.to_host(graph), be.to_host(bm25)
    with _timed(timings, "embed"):
        encoder = encoder or load_encoder(config.encoder)
        embeddings = encoder.encode(chunks.texts, show_progress=show_progress)
    with _timed(timings, "ner"):
        if entity_extractor is None:
            names = extract_entities(chunks.texts, config.entities, show_progress)
        else:
            names = entity_extractor(chunks.texts)
        entities = entities_from_lists(names, chunks.vocab, config.tokens)
    return Index(
        config=config,
        passage_titles=[p.title for p in passages],
        passage_ids=[p.doc_id for p in passages],
        chunk_texts=chunks.texts,
        chunk_passage=chunks.passage_of_chunk,
        vocab=chunks.vocab,
        token_indptr=chunks.token_indptr,
        token_ids=chunks.token_ids,
        graph=graph,
        bm25=bm25,
        embeddings=embeddings,
        entities=entities,
        encoder_name=encoder.name,
        encoder_fingerprint=encoder.fingerprint,
        stats=graph_statistics(graph, bm25),
        timings=timings,
    )
