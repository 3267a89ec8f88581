"""In-memory index construction: chunks -> graph, BM25, embeddings, entities, with per-stage timings."""

from __future__ import annotations

import logging
from typing import Sequence

from ..backend import Backend, get_backend
from ..config import IndexConfig
from ..corpus import Passage, duplicate_passages
from ..text.pipeline import assemble_chunks, chunk_and_tokenise, split_passages
from .assemble import EntityExtractor, assemble_index, chunk_entities, timed
from .bm25 import bm25_matrix
from ..encoders import Encoder, load_encoder
from .graph import cooccurrence_graph
from .index import Index

log = logging.getLogger(__name__)


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
    entity_extractor: EntityExtractor | None = None,
) -> Index:
    """Build every stage of the TIGRAG index over `passages`; arrays come back on the host.

    `entity_extractor` maps chunk texts to (surface form, label) lists; the default runs the
    spaCy model of `config.entities`.
    """
    warn_duplicates(passages)
    be = backend or get_backend("numpy")
    timings: dict[str, float] = {}
    with timed(timings, "split"):
        sentences = split_passages(passages, config.chunk.language, show_progress)
    with timed(timings, "tokenise"):
        chunks = assemble_chunks(*chunk_and_tokenise(passages, sentences, config.chunk, config.tokens, show_progress))
    n_vocab = len(chunks.vocab)
    with timed(timings, "graph"):
        graph = be.to_host(cooccurrence_graph(be, chunks.token_indptr, chunks.token_ids, n_vocab, config.graph.window))
    with timed(timings, "bm25"):
        bm25 = be.to_host(bm25_matrix(be, chunks.token_indptr, chunks.token_ids, n_vocab, config.bm25))
    with timed(timings, "embed"):
        encoder = encoder or load_encoder(config.encoder)
        embeddings = encoder.encode(chunks.texts, show_progress=show_progress)
    with timed(timings, "ner"):
        names = chunk_entities(chunks.texts, config, entity_extractor, show_progress)
    return assemble_index(
        config=config, passage_titles=[p.title for p in passages], passage_ids=[p.doc_id for p in passages],
        chunk_texts=chunks.texts, chunk_passage=chunks.passage_of_chunk, vocab=chunks.vocab,
        token_indptr=chunks.token_indptr, token_ids=chunks.token_ids, graph=graph, bm25=bm25,
        embeddings=embeddings, entity_lists=names, encoder=encoder, timings=timings,
    )
