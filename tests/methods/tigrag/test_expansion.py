"""The vectors of the expanded queries μ ⊕ e (methods/tigrag/expansion.py, `tigrag.fusion.expansion_vectors`):
the paper's texts and passes unchanged under "text", the "sum" vectors as specified, the setting's checks."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from helpers import QUESTIONS
from gpu_tigrag.backend import get_backend
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.encoders.base import QUERY
from gpu_tigrag.errors import TigragError
from gpu_tigrag.methods.tigrag.config import FusionConfig
from gpu_tigrag.methods.tigrag.expansion import (combine, contained_entities, expanded_query_vectors, expansion_texts,
                                                names_entity, repeats_question)
from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
from gpu_tigrag.presets import preset, preset_with


class Recording:
    """An encoder that passes every call on to `inner` and records the texts of each call."""

    def __init__(self, inner):
        self.inner, self.calls = inner, []
        self.name, self.fingerprint, self.backend, self.dim = inner.name, inner.fingerprint, inner.backend, inner.dim

    def encode(self, texts, show_progress=False, kind="passage", **options):
        self.calls.append(list(texts))
        return self.inner.encode(texts, show_progress, kind=kind)


def recording_retriever(example_index, config: RetrievalConfig, backend: str = "numpy"):
    index = example_index.index
    encoder = Recording(load_encoder(index.config.encoder))
    return TigragRetriever(index, config, encoder=encoder, backend=backend), encoder


def stub_retriever(be, encoder, fusion: FusionConfig):
    """The parts of a retriever `expanded_query_vectors` reads: settings, backend, `encode`."""
    def encode(texts):
        return be.asarray(encoder.encode(list(texts), kind=QUERY))
    return SimpleNamespace(settings=SimpleNamespace(fusion=fusion), be=be, encode=encode)


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


QUESTION_ENTITIES = (["Where was the director born?", "Who wrote the opera?"],
                     [["Mirela Vantz", "Korvath"], ["Ansel Brightwater", "Mirela Vantz"]])


def test_paper_embeds_question_entity_texts_one_each(example_index):
    """"text" (the paper's default): one text "question entity" per pair, in order, nothing else."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions, entities = QUESTION_ENTITIES
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig()), questions, entities)
    assert encoder.calls == [["Where was the director born? Mirela Vantz", "Where was the director born? Korvath",
                              "Who wrote the opera? Ansel Brightwater", "Who wrote the opera? Mirela Vantz"]]
    assert owner.tolist() == [0, 0, 1, 1]
    np.testing.assert_allclose(vectors, encoder.inner.encode(encoder.calls[0], kind=QUERY), atol=1e-6)


def test_paper_preset_sends_the_question_then_its_question_entity_texts(example_index):
    """End to end under `paper`: the batch's questions, then exactly one "question entity" text per
    expanded entity of each expanded question (the traces' entities), as before the setting existed."""
    assert preset("paper").tigrag.fusion.expansion_vectors == "text"
    retriever, encoder = recording_retriever(example_index, preset("paper"))
    results = retriever.retrieve(QUESTIONS, k=5)
    assert encoder.calls[0] == QUESTIONS
    expected = expansion_texts([q for q, r in zip(QUESTIONS, results) if len(r.hops) > 1],
                               [r.hops[0].new_entities for r in results if len(r.hops) > 1])
    assert expected and sorted(expected) == sorted(t for call in encoder.calls[1:] for t in call)
    assert retriever.timer.encoded_texts == len(QUESTIONS) + len(expected)


def test_sum_vectors_are_normalised_question_plus_weighted_entity(example_index, backend):
    """"sum": normalize(vec(q) + w·vec(e)); each distinct entity embedded once, alone; the questions
    embedded again when no hop-1 vectors are passed, not at all when they are."""
    inner = load_encoder(example_index.index.config.encoder)
    questions, entities = QUESTION_ENTITIES
    q_vec, e_vec = inner.encode(questions, kind=QUERY), inner.encode(["Mirela Vantz", "Korvath", "Ansel Brightwater"],
                                                                      kind=QUERY)
    expected = unit(np.stack([q_vec[0] + 0.3 * e_vec[0], q_vec[0] + 0.3 * e_vec[1],
                              q_vec[1] + 0.3 * e_vec[2], q_vec[1] + 0.3 * e_vec[0]]))
    fusion = FusionConfig(expansion_vectors="sum", expansion_weight=0.3)

    encoder = Recording(inner)
    vectors, owner = expanded_query_vectors(stub_retriever(backend, encoder, fusion), questions, entities)
    assert owner.tolist() == [0, 0, 1, 1]
    assert encoder.calls == [["Mirela Vantz", "Korvath", "Ansel Brightwater"], questions]
    np.testing.assert_allclose(backend.to_host(vectors), expected, atol=1e-5)

    encoder = Recording(inner)
    vectors, _ = expanded_query_vectors(stub_retriever(backend, encoder, fusion), questions, entities,
                                        question_vectors=backend.asarray(q_vec))
    assert encoder.calls == [["Mirela Vantz", "Korvath", "Ansel Brightwater"]]
    np.testing.assert_allclose(backend.to_host(vectors), expected, atol=1e-5)
    assert vectors.dtype == backend.xp.float32


def test_sum_weight_changes_the_vectors_and_the_paper_text_vectors_differ_from_sum(example_index):
    inner = load_encoder(example_index.index.config.encoder)
    be = get_backend("numpy")
    questions, entities = QUESTION_ENTITIES
    light, _ = expanded_query_vectors(stub_retriever(be, inner, FusionConfig(expansion_vectors="sum",
                                                                             expansion_weight=0.1)), questions, entities)
    heavy, _ = expanded_query_vectors(stub_retriever(be, inner, FusionConfig(expansion_vectors="sum",
                                                                             expansion_weight=3.0)), questions, entities)
    q_vec = inner.encode(questions, kind=QUERY)
    # a light entity keeps the vector near its question's; a heavy one pulls it towards the entity
    assert (light * q_vec[[0, 0, 1, 1]]).sum(axis=1).min() > (heavy * q_vec[[0, 0, 1, 1]]).sum(axis=1).max()


def test_joint_embeds_one_text_per_question_with_all_its_entities(example_index):
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions, entities = QUESTION_ENTITIES
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig(expansion_vectors="joint")),
                                            questions, entities)
    assert encoder.calls == [["Where was the director born? Mirela Vantz Korvath",
                              "Who wrote the opera? Ansel Brightwater Mirela Vantz"]]
    assert owner.tolist() == [0, 1]
    np.testing.assert_allclose(vectors, encoder.inner.encode(encoder.calls[0], kind=QUERY), atol=1e-6)
    # a question without an entity gets no vector (its rerank is -inf everywhere, as under "text")
    encoder.calls.clear()
    _, owner = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig(expansion_vectors="joint")),
                                      ["Q0?", "Q1?", "Q2?"], [["A"], [], ["B", "C"]])
    assert encoder.calls == [["Q0? A", "Q2? B C"]] and owner.tolist() == [0, 2]


def test_combine_handles_no_pairs_and_a_zero_sum():
    be = get_backend("numpy")
    empty = combine(be, None, np.zeros((0, 4), np.float32), np.zeros(0, np.int64), np.zeros(0, np.int64), 1.0)
    assert empty.shape == (0, 4) and empty.dtype == np.float32
    q = np.array([[1.0, 0, 0, 0]], np.float32)
    out = combine(be, q, -q, np.array([0]), np.array([0]), 1.0)
    assert np.all(np.isfinite(out)) and np.allclose(out, 0)


def test_sum_retrieval_embeds_fewer_texts_and_agrees_across_backends(example_index, backend):
    """End to end under "sum": the questions, then per batch the distinct entities (each entity once however
    many questions expand it; the questions' hop-1 vectors are reused), so fewer texts than the paper's pairs."""
    config = preset_with("paper", {"tigrag.fusion.expansion_vectors": "sum", "tigrag.fusion.expansion_weight": 0.3})
    retriever, encoder = recording_retriever(example_index, config, backend.name)
    results = retriever.retrieve(QUESTIONS, k=5)
    expanded = [r for r in results if len(r.hops) > 1]
    distinct = {e for r in expanded for e in r.hops[0].new_entities}
    assert encoder.calls[0] == QUESTIONS
    assert sorted(encoder.calls[1]) == sorted(distinct) and len(encoder.calls[1]) == len(distinct)
    assert len(encoder.calls) == 2
    pairs = sum(len(r.hops[0].new_entities) for r in expanded)
    assert len(distinct) < pairs and retriever.timer.encoded_texts == len(QUESTIONS) + len(distinct)
    reference, _ = recording_retriever(example_index, config, "numpy")
    assert [r.chunk_ids for r in reference.retrieve(QUESTIONS, k=5)] == [r.chunk_ids for r in results]


def test_names_entity_matches_whole_normalised_runs():
    assert names_entity("Who directed The Glass Orchard?", "The Glass Orchard")
    assert names_entity("Where was Mirela Vântz born?", "mirela vantz")  # accents folded, case ignored
    assert not names_entity("Who directed The Glass Orchards?", "The Glass Orchard")  # whole tokens only
    assert not names_entity("Who directed it?", "Korvath") and not names_entity("Who?", "--")


def test_contained_entities_are_runs_of_another_or_repeats_of_an_earlier_one():
    marks = contained_entities([["Ameena Begum", "Begum", "The Begum Palace", "ameena"],
                                ["Mirela Vântz", "Mirela Vantz", "Vantzig"], ["Begum"], [], ["--", "Korvath"]])
    assert marks.tolist() == [False, True, False, True,  # "Begum" and "ameena" are runs of "Ameena Begum"
                              False, True, False,  # the same tokens as the earlier "Mirela Vântz"; whole tokens only
                              False,  # another question's entities do not count
                              False, False]  # no tokens, nothing contains it


def test_contained_expansions_take_the_question_vector_without_an_encoder_pass(example_index):
    """contained_expansions="question": a pair whose entity is contained in another of its question gets the
    question's hop-1 vector, the container keeps its own pass, and the cap counts only what is still to embed."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions = ["Who was the husband of the singer?", "Who wrote the opera?"]
    entities = [["Begum", "Ameena Begum", "Vienna"], ["Ansel Brightwater", "Brightwater Hall"]]
    own = encoder.inner.encode(questions, kind=QUERY)
    fusion = FusionConfig(contained_expansions="question", expansion_passes=2)
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, fusion), questions, entities, own,
                                            entity_ranks=[[0, 1, 2], [0, 1]])
    assert encoder.calls == [["Who was the husband of the singer? Ameena Begum", "Who was the husband of the singer? Vienna",
                              "Who wrote the opera? Ansel Brightwater", "Who wrote the opera? Brightwater Hall"]]
    assert owner.tolist() == [0, 0, 0, 1, 1]
    np.testing.assert_array_equal(vectors[0], own[0])
    np.testing.assert_allclose(vectors[1:], encoder.inner.encode(encoder.calls[0], kind=QUERY), atol=1e-6)
    vectors, _ = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig()), questions, entities, own)
    assert len(encoder.calls[-1]) == 5 and not np.array_equal(vectors[0], own[0])  # the paper embeds all five


def test_contained_expansions_end_to_end_encode_fewer_texts():
    """Through the retriever, on the example corpus with "Halden" an entity too (so that it and "Royal Conservatory of
    Halden" are bridging entities of one question): every pair is embedded but the contained ones."""
    from helpers import ENTITIES, EXAMPLE_ENCODER, EXAMPLES
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.index.build import build_index

    names = {**ENTITIES, "Halden": "GPE"}
    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    index = build_index(load_corpus(EXAMPLES / "corpus.json"), config, encoder=load_encoder(config.encoder),
                        entity_extractor=lambda texts: [[(n, label) for n, label in names.items() if n in t]
                                                        for t in texts])
    for setting, skips in (("question", True), ("text", False)):
        encoder = Recording(load_encoder(config.encoder))
        retriever = TigragRetriever(index, preset_with("paper", {"tigrag.fusion.contained_expansions": setting}),
                                    encoder=encoder, backend="numpy")
        results = retriever.retrieve(QUESTIONS, k=5)
        entity_texts = [sorted(r.hops[0].new_entities, key=str.lower) if len(r.hops) > 1 else [] for r in results]
        pairs = [(q, e) for q, entities in zip(QUESTIONS, entity_texts) for e in entities]
        contained = contained_entities(entity_texts) & skips
        assert contained.any() == skips
        assert retriever.timer.encoded_texts == len(QUESTIONS) + len(pairs) - int(contained.sum())
        assert sorted(t for call in encoder.calls[1:] for t in call) == sorted(
            f"{q} {e}" for (q, e), skip in zip(pairs, contained) if not skip)


def test_named_expansions_take_the_question_vector_without_an_encoder_pass(example_index):
    """named_expansions="question": a pair whose entity the question names gets the question's hop-1 vector
    (passed in), the others their "question entity" text's, in the pairs' order."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions = ["Where was the director of The Glass Orchard born?", "Who wrote the opera?"]
    entities = [["The Glass Orchard", "Mirela Vantz"], ["Ansel Brightwater"]]
    own = encoder.inner.encode(questions, kind=QUERY)
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig(named_expansions="question")),
                                            questions, entities, own)
    assert encoder.calls == [["Where was the director of The Glass Orchard born? Mirela Vantz",
                              "Who wrote the opera? Ansel Brightwater"]]
    assert owner.tolist() == [0, 0, 1]
    np.testing.assert_array_equal(vectors[0], own[0])
    np.testing.assert_allclose(vectors[1:], encoder.inner.encode(encoder.calls[0], kind=QUERY), atol=1e-6)
    text, _ = expanded_query_vectors(stub_retriever(be, encoder, FusionConfig()), questions, entities, own)
    assert len(encoder.calls[-1]) == 3 and not np.array_equal(text[0], own[0])  # the paper embeds all three


def test_named_expansions_end_to_end_encode_fewer_texts(example_index):
    config = preset_with("paper", {"tigrag.fusion.named_expansions": "question"})
    retriever, encoder = recording_retriever(example_index, config)
    results = retriever.retrieve(QUESTIONS, k=5)
    pairs = [(q, e) for q, r in zip(QUESTIONS, results) if len(r.hops) > 1 for e in r.hops[0].new_entities]
    named = [p for p in pairs if names_entity(*p)]
    assert retriever.timer.encoded_texts == len(QUESTIONS) + len(pairs) - len(named)
    assert sorted(t for call in encoder.calls[1:] for t in call) == sorted(f"{q} {e}" for q, e in pairs
                                                                          if not names_entity(q, e))


def test_repeats_question_needs_a_shared_token_and_at_most_one_new_beside_two_shared():
    question = np.array([10, 11, 12, 13])
    assert repeats_question(np.array([10, 11]), question)  # every token the question's
    assert repeats_question(np.array([11, 11]), question)  # a NER duplicate ("Fawell Fawell"): tokens, not counts
    assert repeats_question(np.array([10, 99, 11]), question)  # one new beside two shared ("Jonathan Douglass Reid")
    assert not repeats_question(np.array([99, 11]), question)  # one new beside one shared ("Henry Ford", "Edsel Ford")
    assert not repeats_question(np.array([98, 99, 10, 11]), question)  # two new
    assert not repeats_question(np.array([99]), question)  # nothing shared
    assert not repeats_question(np.array([], dtype=np.int64), question)  # no graph tokens: its pass stays


def test_repeated_expansions_take_the_question_vector_without_an_encoder_pass(example_index):
    """named_expansions="repeats": the question's vector for an entity it names and for one whose graph tokens repeat
    its own (given `entity_repeats`); "question" ignores the repeats, and without them "repeats" is "question"."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions = ["Where was the director of The Glass Orchard born?", "Who wrote the opera?"]
    entities = [["The Glass Orchard", "Mirela Vantz", "Orchard Glass Hall"], ["Ansel Brightwater"]]
    repeats = [[False, False, True], [False]]
    own = encoder.inner.encode(questions, kind=QUERY)
    fusion = FusionConfig(named_expansions="repeats")
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, fusion), questions, entities, own,
                                            entity_repeats=repeats)
    assert encoder.calls == [["Where was the director of The Glass Orchard born? Mirela Vantz",
                              "Who wrote the opera? Ansel Brightwater"]]
    assert owner.tolist() == [0, 0, 0, 1]
    for row in (0, 2):
        np.testing.assert_array_equal(vectors[row], own[0])
    np.testing.assert_allclose(vectors[[1, 3]], encoder.inner.encode(encoder.calls[0], kind=QUERY), atol=1e-6)
    for other, given in ((FusionConfig(named_expansions="question"), repeats), (fusion, None)):
        expanded_query_vectors(stub_retriever(be, encoder, other), questions, entities, own, entity_repeats=given)
        assert len(encoder.calls[-1]) == 3 and encoder.calls[-1][1].endswith("Orchard Glass Hall")


def test_repeated_expansions_end_to_end_skip_entities_made_of_the_questions_tokens(example_index, monkeypatch):
    """Through the retriever: a hop-1 candidate whose graph tokens are two of its question's seeds is embedded under
    "question" and takes the question's vector under "repeats"; every other pair is embedded as before."""
    from gpu_tigrag.methods.tigrag.bridging import Bridge, BridgeFinder
    from gpu_tigrag.text.tokens import valid_tokens

    index = example_index.index
    found = BridgeFinder.candidates
    echo_of: dict[str, str] = {}  # question -> its echo entity's text

    def with_echo(self, chunk_lists):
        out = found(self, chunk_lists)
        if len(out) == len(QUESTIONS) and not echo_of:  # hop 1 of the whole batch
            for i, (question, bridges) in enumerate(zip(QUESTIONS, out)):
                ids = index.vocab.encode(valid_tokens(question))[:2]  # the question's first two seeds
                if len(set(ids.tolist())) == 2:
                    echo_of[question] = "Echo " + " ".join(index.vocab.tokens[t] for t in ids)
                    bridges.append(Bridge(10**9 + i, echo_of[question], ids))  # an entity id no table holds
        return out

    monkeypatch.setattr(BridgeFinder, "candidates", with_echo)
    embedded = {}
    for mode in ("question", "repeats"):
        echo_of.clear()
        retriever, encoder = recording_retriever(example_index, preset_with("paper", {
            "tigrag.fusion.named_expansions": mode}))
        retriever.retrieve(QUESTIONS, k=5)
        embedded[mode] = {t for call in encoder.calls[1:] for t in call}
    echoes = {f"{q} {e}" for q, e in echo_of.items()}
    assert echoes and echoes <= embedded["question"] and not echoes & embedded["repeats"]
    assert embedded["question"] - echoes == embedded["repeats"]


def test_unlinked_expansions_embed_only_the_entities_that_name_a_passage(example_index):
    """named_expansions="unlinked": the question's vector for a named entity and for one that names no passage;
    an encoder pass only for the linked, unnamed ones, in the pairs' order."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions = ["Where was the director of The Glass Orchard born?", "Who wrote the opera?"]
    entities = [["The Glass Orchard", "Mirela Vantz", "Vienna"], ["Ansel Brightwater"]]
    links = [[True, True, False], [False]]
    own = encoder.inner.encode(questions, kind=QUERY)
    fusion = FusionConfig(title_links=True, named_expansions="unlinked")
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, fusion), questions, entities, own, links)
    assert encoder.calls == [["Where was the director of The Glass Orchard born? Mirela Vantz"]]
    assert owner.tolist() == [0, 0, 0, 1]
    for row, question in ((0, 0), (2, 0), (3, 1)):
        np.testing.assert_array_equal(vectors[row], own[question])
    np.testing.assert_allclose(vectors[1], encoder.inner.encode(encoder.calls[0], kind=QUERY)[0], atol=1e-6)
    # without links (a caller that has none) every entity counts as linked: "question"'s vectors
    same, _ = expanded_query_vectors(stub_retriever(be, encoder, fusion), questions, entities, own)
    assert encoder.calls[-1] == ["Where was the director of The Glass Orchard born? Mirela Vantz",
                                 "Where was the director of The Glass Orchard born? Vienna",
                                 "Who wrote the opera? Ansel Brightwater"]
    np.testing.assert_array_equal(same[1], vectors[1])


def test_unlinked_expansions_end_to_end_encode_only_linked_entities(example_index, monkeypatch):
    """Through the retriever: after the questions, exactly the pairs whose entity names a passage and that the
    question does not name are embedded. The example's entities all name a passage, so the passages of every
    other candidate are dropped (as for a NER entity with no title in the corpus)."""
    from dataclasses import replace

    from gpu_tigrag.methods.tigrag.bridging import BridgeFinder

    found = BridgeFinder.candidates
    linked: list[dict[str, bool]] = []  # hop 1's candidates, per question: whether each names a passage

    def some_unlinked(self, chunk_lists):
        out = [[b if i % 2 == 0 else replace(b, passages=()) for i, b in enumerate(bridges)]
               for bridges in found(self, chunk_lists)]
        if not linked:
            linked.extend({b.text: bool(b.passages) for b in bridges} for bridges in out)
        return out

    monkeypatch.setattr(BridgeFinder, "candidates", some_unlinked)
    retriever, encoder = recording_retriever(example_index, preset_with("best", {"tigrag.fusion.named_expansions":
                                                                                "unlinked"}))
    results = retriever.retrieve(QUESTIONS, k=5)
    pairs = [(i, q, e) for i, (q, r) in enumerate(zip(QUESTIONS, results)) if len(r.hops) > 1
             for e in r.hops[0].new_entities]
    expected = sorted(f"{q} {e}" for i, q, e in pairs if linked[i][e] and not names_entity(q, e))
    assert 0 < len(expected) < len([p for p in pairs if not names_entity(*p[1:])])
    assert sorted(t for call in encoder.calls[1:] for t in call) == expected
    assert retriever.timer.encoded_texts == len(QUESTIONS) + len(expected)


def test_expansion_passes_leave_sum_and_joint_as_they_are(example_index):
    """The cap is of "text" passes: `best` (5 passes) with "sum" or "joint" is accepted and embeds what those
    embed, as with no cap."""
    for vectors in ("sum", "joint"):
        capped, encoder = recording_retriever(example_index, preset_with("best", {"tigrag.fusion.expansion_vectors":
                                                                                 vectors}))
        uncapped, plain = recording_retriever(example_index, preset_with("best", {"tigrag.fusion.expansion_vectors":
                                                                                  vectors,
                                                                                  "tigrag.fusion.expansion_passes": 0}))
        assert [r.chunk_ids for r in capped.retrieve(QUESTIONS, k=5)] == [r.chunk_ids for r in
                                                                           uncapped.retrieve(QUESTIONS, k=5)]
        assert encoder.calls == plain.calls


def test_first_passes_keeps_each_questions_first_candidates_by_rank():
    from gpu_tigrag.methods.tigrag.expansion import first_passes

    owner = np.array([0, 0, 0, 0, 1, 1, 2])
    candidates = np.array([True, False, True, True, True, True, False])
    ranks = np.array([3, 0, 1, 2, 1, 0, 0])
    keep = first_passes(owner, candidates, ranks, 2)
    assert keep.tolist() == [False, False, True, True, True, True, False]  # question 0: ranks 1 and 2 (0 is no candidate)
    assert first_passes(owner, candidates, ranks, 1).tolist() == [False, False, True, False, False, True, False]
    assert first_passes(owner, candidates, None, 1).tolist() == [True, False, False, False, True, False, False]
    assert first_passes(owner, candidates, ranks, 9).tolist() == candidates.tolist()


def test_expansion_passes_embed_only_the_first_pairs_of_each_question(example_index):
    """expansion_passes=1: one encoder pass per question, for its best-ranked pair the question does not name; the
    other pairs take the question's vector."""
    encoder = Recording(load_encoder(example_index.index.config.encoder))
    be = get_backend("numpy")
    questions = ["Where was the director of The Glass Orchard born?", "Who wrote the opera?"]
    entities = [["The Glass Orchard", "Mirela Vantz", "Vienna"], ["Ansel Brightwater", "Korvath"]]
    ranks = [[0, 2, 1], [1, 0]]
    own = encoder.inner.encode(questions, kind=QUERY)
    fusion = FusionConfig(named_expansions="question", expansion_passes=1)
    vectors, owner = expanded_query_vectors(stub_retriever(be, encoder, fusion), questions, entities, own,
                                            entity_ranks=ranks)
    assert encoder.calls == [["Where was the director of The Glass Orchard born? Vienna", "Who wrote the opera? Korvath"]]
    assert owner.tolist() == [0, 0, 0, 1, 1]
    for row, question in ((0, 0), (1, 0), (3, 1)):
        np.testing.assert_array_equal(vectors[row], own[question])
    embedded = encoder.inner.encode(encoder.calls[0], kind=QUERY)
    np.testing.assert_allclose(vectors[[2, 4]], embedded, atol=1e-6)


def test_expansion_passes_end_to_end_cap_the_encoder_texts(example_index):
    """Through the retriever: at most n texts per question after the question itself, and the ranking of n = 0
    is the preset's own."""
    base, _ = recording_retriever(example_index, preset("best"))
    expected = base.retrieve(QUESTIONS, k=5)
    same, _ = recording_retriever(example_index, preset_with("best", {"tigrag.fusion.expansion_passes": 0}))
    assert [r.chunk_ids for r in same.retrieve(QUESTIONS, k=5)] == [r.chunk_ids for r in expected]
    capped, encoder = recording_retriever(example_index, preset_with("best", {"tigrag.fusion.expansion_passes": 1}))
    capped.retrieve(QUESTIONS, k=5)
    per_question: dict[str, int] = {}
    for text in (t for call in encoder.calls[1:] for t in call):
        question = next(q for q in QUESTIONS if text.startswith(q + " "))
        per_question[question] = per_question.get(question, 0) + 1
    assert per_question and max(per_question.values()) == 1
    assert capped.timer.encoded_texts == len(QUESTIONS) + sum(per_question.values()) < base.timer.encoded_texts


@pytest.mark.parametrize("overrides, message", [
    ({"tigrag.fusion.named_expansions": "skip"}, "named_expansions must be 'text', 'question', 'repeats' or 'unlinked'"),
    ({"tigrag.fusion.named_expansions": "unlinked"}, "'unlinked' needs tigrag.fusion.title_links=true"),
    ({"tigrag.fusion.expansion_vectors": "mean"}, "expansion_vectors must be 'text', 'sum' or 'joint'"),
    ({"tigrag.fusion.expansion_passes": -1}, "expansion_passes"),
    ({"tigrag.fusion.contained_expansions": "unlinked"}, "contained_expansions must be 'text' or 'question'"),
    ({"tigrag.fusion.expansion_weight": 0.0}, "expansion_weight must be in \\(0, 1e6\\]"),
    ({"tigrag.fusion.expansion_weight": -1.0}, "expansion_weight must be in \\(0, 1e6\\]"),
    ({"tigrag.fusion.expansion_weight": float("nan")}, "expansion_weight must be in \\(0, 1e6\\]"),
    ({"tigrag.fusion.expansion_weight": float("inf")}, "expansion_weight must be in \\(0, 1e6\\]"),
    ({"tigrag.fusion.expansion_weight": "inf"}, "expansion_weight"),
])
def test_setting_validation(overrides, message):
    with pytest.raises(TigragError, match=message):
        preset_with("paper", overrides)


def test_settings_parse_from_strings_as_set_does():
    config = preset_with("paper", {"tigrag.fusion.expansion_vectors": "sum", "tigrag.fusion.expansion_weight": "0.25"})
    assert config.tigrag.fusion.expansion_vectors == "sum" and config.tigrag.fusion.expansion_weight == 0.25
    assert FusionConfig().expansion_vectors == "text"  # the paper's behaviour is the default
