"""The answer-type order of the expansion passes (tigrag.fusion.expansion_order="typed", issue 31 item 3): the
question's type nouns as NER labels, each entity's labels, the order the passes follow, and its effect end to end."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from helpers import QUESTIONS
from gpu_tigrag.config import TokenConfig
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.entities import entities_from_lists, label_mask
from gpu_tigrag.methods.tigrag import retriever as retriever_module
from gpu_tigrag.methods.tigrag.bridging import Bridge
from gpu_tigrag.methods.tigrag.entity_source import IndexEntities, QueryTimeEntities
from gpu_tigrag.methods.tigrag.expansion import typed_ranks
from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
from gpu_tigrag.presets import preset_with
from gpu_tigrag.text.answer_types import expected_label_mask
from gpu_tigrag.text.tokens import Vocabulary

PLACE = label_mask(["GPE", "LOC", "FAC", "NORP"])


@pytest.mark.parametrize("question, labels", [
    ("In which village was the director of Winter Tide born?", ["GPE", "LOC", "FAC", "NORP", "PERSON"]),
    ("What is the usual snowfall in the city where the performers of Brother were formed?",
     ["GPE", "LOC", "FAC", "NORP", "PERSON"]),
    ("Which countries border the lakes?", ["GPE", "LOC", "FAC", "NORP"]),  # plurals: -ies, -s
    ("Which churches did the band play in?", ["FAC", "LOC", "ORG"]),  # -es; "play" (a verb here) names no type
    ("Who first climbed the highest peak of the Ostrel range?", []),
    ("", []),
])
def test_expected_label_mask_reads_the_type_nouns(question, labels):
    assert expected_label_mask(question) == label_mask(labels)


def test_typed_ranks_put_passage_names_then_the_asked_types_then_the_bridging_order():
    tokens = np.array([1])
    person = Bridge("a", "Mirela Vantz", tokens, (), label_mask(["PERSON"]))
    linked = Bridge("b", "The Glass Orchard", tokens, (4,))
    place = Bridge("c", "Korvath", tokens, (), label_mask(["GPE"]))
    nothing = Bridge("d", "Elsin", tokens)
    bridges, ranks = [person, linked, place, nothing], [0, 1, 2, 3]
    assert typed_ranks("In which city was it made?", bridges, ranks) == [2, 0, 1, 3]
    assert typed_ranks("Who was the director?", bridges, ranks) == [1, 0, 2, 3]
    assert typed_ranks("When was it made?", bridges, ranks) == [1, 0, 2, 3]  # no type: the bridging order
    assert typed_ranks("In which city was it made?", bridges, [3, 2, 1, 0]) == [3, 0, 1, 2]  # rank within a group
    assert typed_ranks("In which city was it made?", bridges[::-1], [3, 2, 1, 0]) == [3, 1, 0, 2]


def test_an_entitys_labels_are_every_label_ner_gave_it():
    vocab = Vocabulary(sorted(["korvath", "mirela", "vantz"]))
    table = entities_from_lists([[("Korvath", "GPE"), ("Mirela Vantz", "PERSON")], [("Korvath", "LOC")]], vocab,
                                TokenConfig())
    entities = IndexEntities(SimpleNamespace(entities=table), ["PERSON", "GPE", "LOC"])
    korvath, mirela = table.texts.index("Korvath"), table.texts.index("Mirela Vantz")
    assert entities.labels(korvath) == label_mask(["GPE", "LOC"])
    assert entities.labels(mirela) == label_mask(["PERSON"])


def test_query_time_entities_keep_the_labels_of_names_the_table_lacks(example_index):
    index = example_index.index
    found = [[("Dravna Vale", "GPE"), ("Korvath", "GPE")], [("Dravna Vale", "LOC")]]
    entities = QueryTimeEntities(index, ["PERSON", "GPE", "LOC"], extractor=lambda texts: found[:len(texts)])
    ids = entities.of_chunks([[0], [1]])
    fresh = ids[0][0]
    assert fresh >= len(index.entities.texts) and ids[1] == [fresh]
    assert entities.labels(fresh) == label_mask(["GPE", "LOC"])
    korvath = index.entities.texts.index("Korvath")
    assert ids[0][1] == korvath and entities.labels(korvath) == label_mask(["GPE"])


def passes_taken(example_index, monkeypatch, order: str) -> tuple[dict, dict]:
    """Under one expansion pass per question in `order`: {question: the entity its pass embeds} and {question:
    [(entity, names a passage, its labels meet the question's types)]} of its candidates."""
    engine = retriever_module.expanded_query_vectors
    candidates: dict[str, list] = {}

    def recording(retriever, questions, entity_texts, question_vectors=None, entity_links=None, entity_ranks=None,
                  entity_repeats=None):
        table = retriever.index.entities
        for question, texts, links in zip(questions, entity_texts, entity_links):
            labels = {text: retriever.entities.labels(table.texts.index(text)) if text in table.texts else 0
                      for text in texts}
            candidates[question] = [(text, bool(link), bool(labels[text] & expected_label_mask(question)))
                                    for text, link in zip(texts, links)]
        return engine(retriever, questions, entity_texts, question_vectors, entity_links, entity_ranks, entity_repeats)

    monkeypatch.setattr(retriever_module, "expanded_query_vectors", recording)
    from gpu_tigrag.encoders import load_encoder

    inner, calls = load_encoder(example_index.index.config.encoder), []

    def encode(texts, show_progress=False, kind="passage"):
        calls.append(list(texts))
        return inner.encode(texts, show_progress, kind=kind)

    encoder = SimpleNamespace(name=inner.name, fingerprint=inner.fingerprint, backend=inner.backend, dim=inner.dim,
                              encode=encode)
    config = preset_with("best", {"tigrag.fusion.expansion_passes": 1, "tigrag.fusion.expansion_order": order})
    TigragRetriever(example_index.index, config, encoder=encoder, backend="numpy").retrieve(QUESTIONS, k=5)
    embedded = {}
    for text in (t for call in calls[1:] for t in call):
        question = next(q for q in QUESTIONS if text.startswith(q + " "))
        assert question not in embedded  # one pass per question
        embedded[question] = text[len(question) + 1:]
    return embedded, candidates


def test_typed_order_spends_the_passes_on_passage_names_and_asked_types(example_index, monkeypatch):
    typed, candidates = passes_taken(example_index, monkeypatch, "typed")
    bridge, _ = passes_taken(example_index, monkeypatch, "bridge")
    assert typed and set(typed) == set(bridge)
    for question, entity in typed.items():
        kinds = {text: (linked, asked) for text, linked, asked in candidates[question]}
        if any(linked for linked, _ in kinds.values()):
            assert kinds[entity][0], (question, entity)
        elif any(asked for _, asked in kinds.values()):
            assert kinds[entity][1], (question, entity)
    assert typed != bridge  # the order changes which entity some question embeds


def test_expansion_order_is_checked():
    with pytest.raises(TigragError, match="expansion_order must be 'bridge' or 'typed'"):
        preset_with("best", {"tigrag.fusion.expansion_order": "type"})
