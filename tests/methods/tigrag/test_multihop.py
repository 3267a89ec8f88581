"""Multi-hop on a hand-made corpus with hand-set entities and the hashing stand-in encoder."""

import numpy as np
import pytest

from gpu_tigrag.config import EncoderConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.corpus import Passage
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.methods.tigrag.retriever import Retriever

PASSAGES = [
    Passage("The Glass Orchard", "The Glass Orchard is a drama film directed by Mirela Vantz.", "0"),
    Passage("Mirela Vantz", "Mirela Vantz is a film director born in the harbour town Korvath.", "1"),
    Passage("Korvath", "Korvath is a harbour town with a lighthouse and a fishing fleet.", "2"),
    Passage("Winter Tide", "Winter Tide is a thriller film directed by Oskar Helm.", "3"),
    Passage("Oskar Helm", "Oskar Helm is a film director born in the mountain village Dravna.", "4"),
]
ENTITIES = [[("Mirela Vantz", "PERSON")], [("Korvath", "GPE")], [], [("Oskar Helm", "PERSON")], [("Dravna", "GPE")]]
QUERIES = [
    "Where was the director of the drama The Glass Orchard born?",
    "Korvath lighthouse fishing fleet",
    "?? !!",
]


@pytest.fixture(scope="module")
def index():
    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
    return build_index(PASSAGES, config, encoder=load_encoder(config.encoder), entity_extractor=lambda texts: ENTITIES)


def run(index, backend, hops):
    retriever = Retriever(index, RetrievalConfig.of("tigrag", hops=hops, iota=1), backend=backend)
    return retriever, retriever.retrieve(QUERIES, k=index.n_chunks)


def test_merge_is_max_over_hops_and_stops_without_new_entities(index, backend):
    _, one = run(index, backend, hops=1)
    retriever, two = run(index, backend, hops=2)
    encoder = retriever.encoder

    # query 0: hop 1 ranks the film's chunk first, its entity drives hop 2
    q0 = two[0]
    assert q0.hops[0].top_chunks == [0] and q0.hops[0].new_entities == ["Mirela Vantz"]
    assert len(q0.hops) == 2
    sigma1 = dict(zip(one[0].chunk_ids, one[0].scores))
    expanded = encoder.encode([QUERIES[0] + " Mirela Vantz"])[0]
    sigma2 = index.embeddings @ expanded
    for chunk, score in zip(q0.chunk_ids, q0.scores):
        candidates = [sigma1.get(chunk, -np.inf), sigma2[chunk]]
        assert score == pytest.approx(max(candidates), abs=1e-5)  # eq. 3.16
    assert set(sigma1) <= set(q0.chunk_ids)
    assert q0.scores == sorted(q0.scores, reverse=True)

    # query 1: its top chunk (Korvath) has no entity -> the process terminates after hop 1
    q1 = two[1]
    assert q1.hops[0].top_chunks == [2] and q1.hops[0].new_entities == []
    assert len(q1.hops) == 1 and q1.chunk_ids == one[1].chunk_ids

    # query 2: no valid token -> dense retrieval over every chunk, flagged
    q2 = two[2]
    assert q2.dense_fallback and q2.hops[0].dense_fallback and q2.hops[0].seeds == 0
    assert len(q2.chunk_ids) == index.n_chunks


def test_entities_already_seen_are_not_new(index, backend):
    retriever = Retriever(index, RetrievalConfig.of("tigrag", hops=3, iota=1), backend=backend)
    result = retriever.retrieve([QUERIES[0]], k=3)[0]
    seen = [e for hop in result.hops for e in hop.new_entities]
    assert len(seen) == len(set(seen))
    assert result.hops[0].new_entities == ["Mirela Vantz"]
    assert len(result.hops) <= 3


def test_entity_labels_choose_which_entities_drive_a_hop(index, backend):
    retriever = Retriever(index, RetrievalConfig.of("tigrag", hops=2, entity_labels=("DATE",)), backend=backend)
    result = retriever.retrieve([QUERIES[0]], k=3)[0]
    assert len(result.hops) == 1 and result.hops[0].new_entities == []


def test_batch_size_shrinks_to_the_memory_budget(index, backend):
    small = Retriever(index, RetrievalConfig(batch_size=256, memory_budget_mb=0), backend=backend)
    assert small.batch_size() == 1
    big = Retriever(index, RetrievalConfig(batch_size=256), backend=backend)
    assert big.batch_size() == 256
    # blocks of one query give the same answers as one block of three
    a = small.retrieve(QUERIES, k=3)
    b = big.retrieve(QUERIES, k=3)
    assert [r.chunk_ids for r in a] == [r.chunk_ids for r in b]


def test_out_of_memory_splits_the_batch_and_loses_no_query(index, backend, monkeypatch):
    queries = QUERIES + ["Winter Tide thriller", "Oskar Helm Dravna"]
    retriever = Retriever(index, RetrievalConfig(batch_size=len(queries)), backend=backend)
    expected = [r.chunk_ids for r in retriever.retrieve(queries, k=3)]
    original = retriever._retrieve_batch
    sizes = []

    def fail_when_large(batch, k):
        sizes.append(len(batch))
        assert batch.seeds is not None and len(batch.vectors) == len(batch)
        if len(batch) > 2:
            raise MemoryError("simulated allocation failure")
        return original(batch, k)

    monkeypatch.setattr(retriever, "_retrieve_batch", fail_when_large)
    got = retriever.retrieve(queries, k=3)
    assert [r.query for r in got] == queries
    assert [r.chunk_ids for r in got] == expected
    assert sizes == [5, 2, 3, 1, 2]


@pytest.mark.gpu
@pytest.mark.skipif(not __import__("gpu_tigrag.backend").backend.cuda_available(), reason="no CUDA device")
def test_cupy_results_equal_numpy_results(index):
    """Parity of the whole batched pipeline: same top-k ids, scores to rtol 1e-5."""
    cpu = Retriever(index, RetrievalConfig(), backend="numpy").retrieve(QUERIES, k=index.n_chunks)
    gpu = Retriever(index, RetrievalConfig(), backend="cupy").retrieve(QUERIES, k=index.n_chunks)
    for a, b in zip(cpu, gpu):
        assert a.chunk_ids == b.chunk_ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5)
        assert [h.new_entities for h in a.hops] == [h.new_entities for h in b.hops]


def test_ablations_change_only_their_stage(index, backend):
    full = Retriever(index, RetrievalConfig(), backend=backend)
    no_rerank = Retriever(index, RetrievalConfig.of("tigrag", rerank=False), backend=backend)
    seeds = full.query_seeds(QUERIES[:1])
    hop = full.graph_hop(seeds)
    ranked = no_rerank.retrieve(QUERIES[:1], k=index.n_chunks)[0]
    rho = backend.to_host(hop.rho)[:, 0]
    first_hop = ranked.hops[0]
    assert first_hop.top_chunks == [int(np.argmax(rho))]  # the pool is ordered by ρ, not by cosine

    bm25_before = index.bm25.data.copy()
    presence = Retriever(index, RetrievalConfig.of("tigrag", scoring="graph"), backend=backend)
    assert set(backend.to_host(presence.bm25.data).tolist()) == {1.0}
    np.testing.assert_array_equal(index.bm25.data, bm25_before)  # the index itself is untouched

    degree = Retriever(index, RetrievalConfig.of("tigrag", expansion="degree"), backend=backend)
    a, b = (backend.to_host(degree.graph_hop(degree.query_seeds([q])).rho) for q in QUERIES[:2])
    np.testing.assert_array_equal(a, b)  # degree expansion ignores the query


def test_query_time_ner_equals_the_index_lookup(index):
    def ner(texts):  # the same NER as the build's, run again on the hop's chunk texts
        return [ENTITIES[index.chunk_texts.index(t)] for t in texts]

    lookup = Retriever(index, RetrievalConfig(), backend="numpy").retrieve(QUERIES, k=index.n_chunks)
    at_query = Retriever(index, RetrievalConfig.of("tigrag", entities_at="query"), backend="numpy",
                         entity_extractor=ner).retrieve(QUERIES, k=index.n_chunks)
    assert [r.chunk_ids for r in at_query] == [r.chunk_ids for r in lookup]
    assert [r.scores for r in at_query] == [r.scores for r in lookup]
    assert [[h.new_entities for h in r.hops] for r in at_query] == [[h.new_entities for h in r.hops] for r in lookup]


def test_query_time_ner_filters_by_the_label_of_the_occurrence(index):
    def ner(texts):  # here tagged DATE (not a bridging label; PERSON in the table); one name is new
        return [[("Mirela Vantz", "DATE"), ("Korvath Lighthouse", "FAC")] if "Glass Orchard" in t else []
                for t in texts]

    lookup = Retriever(index, RetrievalConfig(), backend="numpy").retrieve(QUERIES[:1], k=index.n_chunks)[0]
    assert lookup.hops[0].new_entities == ["Mirela Vantz"]
    result = Retriever(index, RetrievalConfig.of("tigrag", entities_at="query"), backend="numpy",
                       entity_extractor=ner).retrieve(QUERIES[:1], k=index.n_chunks)[0]
    assert result.hops[0].new_entities == ["Korvath Lighthouse"]  # unknown to the table: a fresh entity
    assert len(result.hops) == 2
    assert 2 in result.chunk_ids and 2 not in lookup.chunk_ids  # hop 2 on "korvath lighthouse" pooled Korvath
    with pytest.raises(Exception, match="entities_at"):
        RetrievalConfig.of("tigrag", entities_at="later")
