"""In-memory index construction: chunks -> token graph, BM25, embeddings, entities, with per-stage timings."""

from __future__ import annotations

import dataclasses
import logging
import time
from typing import Any, Sequence

from ..backend import Backend, get_backend
from ..config import IndexConfig
from ..errors import TigragError
from ..corpus import Passage, as_passages, check_unique_ids, duplicate_passages
from ..text.pipeline import assemble_chunks, chunk_and_tokenise, split_passages
from .ann import ann_for
from .assemble import EntityExtractor, EntityThread, assemble_index, timed
from .bm25 import bm25_matrix
from ..methods.registry import check_methods, get_method, stage_methods
from ..encoders import PASSAGE, Encoder, load_encoder
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


def check_passages(passages: Any) -> None:
    """TigragError unless `passages` is a non-empty sequence of Passage records with some text; a
    CorpusError when two of them share an id of their own and are not one passage repeated whole."""
    if isinstance(passages, (str, bytes)) or not isinstance(passages, Sequence):
        raise TigragError(f"passages must be a sequence (list) of Passage records, got {type(passages).__name__}")
    for position, passage in enumerate(passages, start=1):
        if not isinstance(passage, Passage):
            raise TigragError(f"passage {position} is a {type(passage).__name__}, not a gpu_tigrag.Passage "
                              "(build them with Passage(title, text, doc_id) or load_corpus)")
    if not any(p.text.strip() or p.title.strip() for p in passages):
        raise TigragError("no passage has any text: an index needs at least one non-empty passage")
    check_unique_ids(passages)


def build_index(
    passages: Sequence[Passage | dict | tuple[str, str]],
    config: IndexConfig = IndexConfig(),
    encoder: Encoder | None = None,
    backend: Backend | None = None,
    show_progress: bool = False,
    entity_extractor: EntityExtractor | None = None,
    methods: Sequence[str] = ("tigrag",),
) -> Index:
    """Build every stage of the TIGRAG index over `passages`; arrays come back on the host.

    `entity_extractor` maps chunk texts to (surface form, label) lists; the default runs the
    spaCy model of `config.entities`. `methods` naming "spectrag" also builds SpectRAG's chunk
    graph (settings `config.spectrag`) over the finished base index. `passages` may be Passage
    records, dicts read as corpus records (`title`, `text`, an optional `id`) or `(title, text)` pairs.
    """
    methods = check_methods(methods)
    passages = as_passages(passages)
    check_passages(passages)
    warn_duplicates(passages)
    be = backend or get_backend("numpy")
    timings: dict[str, float] = {}
    with timed(timings, "split"):
        sentences = split_passages(passages, config.chunk.language, show_progress)
    with timed(timings, "tokenise"):
        chunks = assemble_chunks(*chunk_and_tokenise(passages, sentences, config.chunk, config.tokens, show_progress))
    loading = time.perf_counter()
    encoder = encoder or load_encoder(config.encoder, first_kind=PASSAGE)  # before the NER thread starts: imports stay in one thread
    loading = time.perf_counter() - loading
    entities = EntityThread(chunks.texts, config, entity_extractor, show_progress)  # beside what follows
    n_vocab = len(chunks.vocab)
    with timed(timings, "graph"):
        token_graph = be.to_host(cooccurrence_graph(be, chunks.token_indptr, chunks.token_ids, n_vocab,
                                                    config.graph.window))
    with timed(timings, "bm25"):
        bm25 = be.to_host(bm25_matrix(be, chunks.token_indptr, chunks.token_ids, n_vocab, config.bm25))
    with timed(timings, "embed"):
        embeddings = encoder.encode(chunks.texts, show_progress=show_progress)
    timings["embed"] += loading  # the encoder's loading is part of its stage
    names = entities.result()
    entities.record(timings)
    index = assemble_index(
        config=config, passage_titles=[p.title for p in passages], passage_ids=[p.doc_id for p in passages],
        chunk_texts=chunks.texts, chunk_passage=chunks.passage_of_chunk, vocab=chunks.vocab,
        token_indptr=chunks.token_indptr, token_ids=chunks.token_ids, graph=token_graph, bm25=bm25,
        embeddings=embeddings, entity_lists=names, encoder=encoder, timings=timings,
    )
    index.ann = ann_for(index)  # the ANN of the chunk vectors, when `config.ann` asks for one at this size
    return build_stages(index, methods, be, encoder, show_progress)


def build_stages(index: Index, methods: Sequence[str], backend: Backend | None = None, encoder: Encoder | None = None,
                 show_progress: bool = False) -> Index:
    """`index` with the stage of each method of `methods` that has one built over it (in place)."""
    for method in stage_methods():
        if method.name in methods:
            index.stages[method.name] = build_method_stage(index, method.name, backend, encoder, show_progress)
    return index


def build_method_stage(index: Index, method: str, backend: Backend | None = None, encoder: Encoder | None = None,
                       show_progress: bool = False):
    """The index stage of `method` over `index` with the settings in `index.config` (timed into
    `index.timings[method]`), e.g. SpectRAG's chunk graph or LiteSemRAG's semantic graph."""
    spec = get_method(method)
    if spec.stage is None:
        raise TigragError(f"method {method!r} has no index stage of its own (stages: "
                          f"{', '.join(m.name for m in stage_methods())})")
    start = time.perf_counter()
    stage = spec.stage.build(index, getattr(index.config, method), backend, encoder, show_progress)
    index.timings[method] = time.perf_counter() - start
    return stage


def add_method(index: Index, method: str, config: Any = None,
               backend: Backend | None = None, show_progress: bool = False, encoder: Encoder | None = None) -> Index:
    """A copy of `index` with the index stage of `method` built (rebuilt if there was one), e.g. SpectRAG's
    chunk graph; `config` replaces the index's settings of that stage (recorded in its configuration).
    The input is not modified; the copy remembers the directory the input was read from, as a
    modified index (so saving it back checks that nobody replaced that directory meanwhile)."""
    from .provenance import derive_origin

    (method,) = check_methods([method])
    if get_method(method).stage is None:
        raise TigragError(f"{method} needs only the base index, built by `tigrag index`; there is no stage to add")
    settings = index.config if config is None else index.config.with_section(method, config)
    grown = dataclasses.replace(index, config=settings, timings=dict(index.timings), stages=dict(index.stages))
    rebuilt = index.has_stage(method)
    grown.stages[method] = build_method_stage(grown, method, backend, encoder, show_progress)
    if rebuilt:
        log.info("rebuilt the %s stage over the index's %s chunks", method, f"{index.n_chunks:,}")
    return derive_origin(index, grown)
