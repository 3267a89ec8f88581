"""Incremental add: append passages to an index so that it equals a full rebuild on the union.

Co-occurrence counts and BM25 statistics are additive over chunks. The new chunks are
tokenised, the vocabulary is merged (ids follow sorted token order, so old ids are remapped),
the old token graph is remapped and the new chunks' counts are added. BM25 is recomputed from the
merged token table, because N and avgdl change. Only the new chunks are embedded and run
through NER, and the entity table is rebuilt in chunk order, as a rebuild would.

A method stage the index holds (e.g. SpectRAG's chunk graph) is rebuilt over the grown index,
not patched: each method's stage says why (`IndexStage.rebuilt_because`).
The ANN of the chunk vectors (`ann.py`) is rebuilt over every chunk too, where `ann.kind` asks for
one at the grown size, so the grown index holds what a full build of the union would.

An added passage whose own id is already the id of a passage of the index is an error naming both,
unless it is that passage again (same title and chunk texts: added twice, which the CLI warns about
or `--drop-duplicates` skips): one id would name two passages in runs and qrels.

The grown index remembers the directory its base was read from, so `save_index` refuses to
write it back over a directory that another writer replaced meanwhile; `add_to_index_dir`
holds that directory's writer lock from the read to the write, so a second `add` fails at once.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Sequence

import numpy as np
import scipy.sparse

from ..backend import Backend, get_backend
from ..corpus import Passage, check_unique_ids
from ..errors import CorpusError
from ..locking import writer_lock
from ..text.pipeline import chunk_and_tokenise, split_passages
from ..text.tokens import Vocabulary, token_csr
from .ann import ann_for
from .assemble import EntityExtractor, EntityThread, assemble_index, timed
from .bm25 import bm25_matrix
from ..encoders import PASSAGE, Encoder, check_compatible, index_encoder_config, load_encoder
from .graph import cooccurrence_graph
from ..methods.registry import stage_methods
from .build import build_method_stage
from .index import Index
from .store import INDEX_WRITE, derive_origin, load_index, save_index

log = logging.getLogger(__name__)


def _old_entity_lists(index: Index) -> list[list[tuple[str, int]]]:
    """Each old chunk's entity occurrences as (text, label mask), in reading order."""
    return [index.entities.occurrences(c) for c in range(index.n_chunks)]


def check_added_ids(index: Index, passages: Sequence[Passage],
                    chunks: tuple[Sequence[str], Sequence[int]] | None = None) -> None:
    """CorpusError when two of `passages` share an own id (`check_unique_ids`), or when one's own id is
    the id of a passage of `index` that is another passage (another title, or other chunk texts under
    the index's chunking); the error names the added record, the id and the index's passage. A passage
    equal to the index's (added again) passes: the caller warns or drops it. `chunks`: the added
    passages' (chunk texts, passage of each chunk) where already made; else only the passages whose id
    the index has are chunked."""
    check_unique_ids(passages)
    known: dict[str, int] = {}
    for position, doc_id in enumerate(index.passage_ids):
        known.setdefault(doc_id, position)
    clashes = [(i, known[p.doc_id]) for i, p in enumerate(passages) if p.has_own_id and p.doc_id in known]
    if not clashes:
        return
    if chunks is None:
        subset = [passages[i] for i, _ in clashes]
        cfg = index.config
        texts, owner, _ = chunk_and_tokenise(subset, split_passages(subset, cfg.chunk.language), cfg.chunk, cfg.tokens)
        owner = [clashes[o][0] for o in owner]
    else:
        texts, owner = chunks
    added: dict[int, list[str]] = {}
    for text, p in zip(texts, owner):
        added.setdefault(int(p), []).append(text)
    order = np.argsort(index.chunk_passage, kind="stable")  # the chunks of each passage, whatever their order
    firsts = np.searchsorted(index.chunk_passage[order], [q for _, q in clashes], side="left")
    lasts = np.searchsorted(index.chunk_passage[order], [q for _, q in clashes], side="right")
    for (i, q), lo, hi in zip(clashes, firsts, lasts):
        passage = passages[i]
        theirs = [index.chunk_texts[c] for c in order[lo:hi]]
        if index.passage_titles[q] != passage.title or theirs != added.get(i, []):
            raise CorpusError(
                f"{passage.describe(i)}: passage id {passage.doc_id!r} is already the id of passage {q} of the index "
                f"(title {index.passage_titles[q]!r}), another passage (other title or text); passage ids must be "
                "unique: they name the passages in runs, qrels and doc_ids, where two passages of one id would be "
                "one (give the new passage another id, or rebuild the index to replace that passage)")


def add_passages(
    index: Index,
    passages: Sequence[Passage],
    encoder: Encoder | None = None,
    backend: Backend | None = None,
    show_progress: bool = False,
    entity_extractor: EntityExtractor | None = None,
) -> Index:
    """A new Index holding `index` plus `passages` (the input index is not modified). A passage whose
    own id names another passage, of the index or of `passages`, is a CorpusError (`check_added_ids`)."""
    be = backend or get_backend("numpy")
    cfg = index.config
    timings: dict[str, float] = {}
    with timed(timings, "add_split_tokenise"):
        sentences = split_passages(passages, cfg.chunk.language, show_progress)
        texts, owner, sequences = chunk_and_tokenise(passages, sentences, cfg.chunk, cfg.tokens, show_progress)
    check_added_ids(index, passages, (texts, owner))

    with timed(timings, "add_graph_bm25"):
        vocab = Vocabulary(sorted(set(index.vocab.tokens).union(*map(set, sequences))))
        remap = np.array([vocab.get(t) for t in index.vocab.tokens], dtype=np.int64)
        new_indptr, new_ids = token_csr(sequences, vocab)
        token_indptr = np.concatenate([index.token_indptr, index.token_indptr[-1] + new_indptr[1:]]).astype(np.int64)
        token_ids = np.concatenate([remap[index.token_ids].astype(np.int32), new_ids])
        n_vocab = len(vocab)
        old = index.graph.tocoo()
        token_graph = scipy.sparse.coo_matrix((old.data, (remap[old.row], remap[old.col])),
                                              shape=(n_vocab, n_vocab)).tocsr()
        added = cooccurrence_graph(be, new_indptr, new_ids, n_vocab, cfg.graph.window)
        token_graph = (token_graph + be.to_host(added)).tocsr().astype(np.float32)
        token_graph.sort_indices()
        bm25 = be.to_host(bm25_matrix(be, token_indptr, token_ids, n_vocab, cfg.bm25))

    with timed(timings, "add_embed"):
        encoder = encoder or load_encoder(index_encoder_config(index), first_kind=PASSAGE)
        check_compatible(index.encoder_identity, encoder)  # the new passages' vectors must match the old ones
        entities = EntityThread(texts, cfg, entity_extractor, show_progress)  # beside the encoder
        embeddings = np.concatenate([index.embeddings, encoder.encode(texts, show_progress=show_progress)])
    names = entities.result()
    entities.record(timings, "add_")

    first_passage = len(index.passage_titles)
    grown = assemble_index(
        config=cfg,
        passage_titles=index.passage_titles + [p.title for p in passages],
        passage_ids=index.passage_ids + [p.doc_id for p in passages],
        chunk_texts=index.chunk_texts + texts,
        chunk_passage=np.concatenate([index.chunk_passage, np.asarray(owner, dtype=np.int32) + first_passage]),
        vocab=vocab, token_indptr=token_indptr, token_ids=token_ids, graph=token_graph, bm25=bm25,
        embeddings=embeddings, entity_lists=_old_entity_lists(index) + names,
        encoder=index.encoder_identity,
        timings={**index.timings, **timings},
    )
    grown.ann = ann_for(grown)  # rebuilt over every chunk (not patched), as a full build would hold it
    if index.ann is not None and grown.ann is not None:
        log.info("rebuilt the %s ANN over the grown index (%s chunks)", grown.ann.kind, f"{grown.n_chunks:,}")
    for method in stage_methods():
        if index.has_stage(method.name):
            grown.stages[method.name] = build_method_stage(grown, method.name, be, encoder, show_progress)
            log.info("rebuilt the %s stage over the grown index (%s chunks): %s", method.label,
                     f"{grown.n_chunks:,}", method.stage.rebuilt_because)
    return derive_origin(index, grown)


def add_to_index_dir(
    path: str | Path,
    passages: Sequence[Passage],
    encoder: Encoder | None = None,
    backend: Backend | None = None,
    show_progress: bool = False,
    entity_extractor: EntityExtractor | None = None,
) -> tuple[Index, Index]:
    """(old, grown): add `passages` to the index in directory `path`, holding its writer lock from
    the read to the atomic write, so a concurrent writer fails at once and no add is lost."""
    with writer_lock(path, INDEX_WRITE):
        index = load_index(path)
        grown = add_passages(index, passages, encoder, backend, show_progress, entity_extractor)
        save_index(grown, path)
    return index, grown
