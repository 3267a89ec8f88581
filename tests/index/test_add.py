"""Incremental add equals a full rebuild on the union."""

import numpy as np

from helpers import EXAMPLES, QUESTIONS, string_entities
from gpu_tigrag.config import EncoderConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.index.add import add_passages
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.methods.tigrag.retriever import Retriever


def test_add_equals_rebuild(backend):
    passages = load_corpus(EXAMPLES / "corpus.json")
    passages.append(Passage("Zebrine Quay", "Zebrine Quay is a new pier near Korvath built by Marta Quell.", "z"))
    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
    encoder = load_encoder(config.encoder)
    full = build_index(passages, config, encoder=encoder, entity_extractor=string_entities)
    base = build_index(passages[:18], config, encoder=encoder, entity_extractor=string_entities)
    grown = add_passages(base, passages[18:], encoder=encoder, backend=backend, entity_extractor=string_entities)
    assert grown.vocab.tokens == full.vocab.tokens and len(grown.vocab) > len(base.vocab)
    np.testing.assert_array_equal(grown.token_ids, full.token_ids)
    np.testing.assert_array_equal(grown.token_indptr, full.token_indptr)
    assert (grown.graph != full.graph).nnz == 0
    np.testing.assert_allclose(grown.bm25.toarray(), full.bm25.toarray(), rtol=1e-6)
    np.testing.assert_array_equal(grown.embeddings, full.embeddings)
    assert grown.entities.texts == full.entities.texts
    np.testing.assert_array_equal(grown.entities.chunk_masks, full.entities.chunk_masks)
    np.testing.assert_array_equal(grown.entities.chunk_ids, full.entities.chunk_ids)
    np.testing.assert_array_equal(grown.entities.token_ids, full.entities.token_ids)
    assert grown.stats == full.stats and grown.passage_titles == full.passage_titles
    a = Retriever(grown, RetrievalConfig(), encoder=encoder, backend=backend).retrieve(QUESTIONS, k=5)
    b = Retriever(full, RetrievalConfig(), encoder=encoder, backend=backend).retrieve(QUESTIONS, k=5)
    assert [r.chunk_ids for r in a] == [r.chunk_ids for r in b]
    assert [r.scores for r in a] == [r.scores for r in b]
