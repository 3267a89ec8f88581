"""The `paper` and `best` presets on a hand-made corpus: title links, bridging choice, de-duplication."""

import pytest

from gpu_tigrag.config import EncoderConfig, IndexConfig, RetrievalConfig
from gpu_tigrag.methods.tigrag.config import FusionConfig
from gpu_tigrag.corpus import Passage
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.build import build_index
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.presets import preset
from gpu_tigrag.methods.tigrag.retriever import Retriever

LONG = " ".join(f"Sentence {i} of the long Harbour Almanac mentions tides and boats." for i in range(20))
PASSAGES = [
    Passage("The Glass Orchard", "The Glass Orchard is a drama film directed by Mirela Vantz.", "0"),
    Passage("Mirela Vantz", "Mirela Vantz is a film director born in the harbour town Korvath.", "1"),
    Passage("Korvath", "Korvath is a harbour town with a lighthouse and a fishing fleet.", "2"),
    Passage("Winter Tide", "Winter Tide is a thriller film directed by Oskar Helm, starring Ada Brun and Ivo Pell.", "3"),
    Passage("Oskar Helm", "Oskar Helm is a film director born in the mountain village Dravna.", "4"),
    Passage("Harbour Almanac", LONG, "5"),
]
ENTITIES = {"The Glass Orchard": [("Mirela Vantz", "PERSON")], "Mirela Vantz": [("Korvath", "GPE")],
            "Winter Tide": [("Oskar Helm", "PERSON"), ("Ada Brun", "PERSON"), ("Ivo Pell", "PERSON")],
            "Oskar Helm": [("Dravna", "GPE")]}


@pytest.fixture(scope="module")
def index():
    config = IndexConfig(encoder=EncoderConfig(model="hashing:64"))

    def ner(texts):
        return [next((v for title, v in ENTITIES.items() if text.startswith(title)), []) for text in texts]

    return build_index(PASSAGES, config, encoder=load_encoder(config.encoder), entity_extractor=ner)


def test_presets_paper_is_the_dataclass_default_and_best_is_the_retriever_default(index):
    assert preset("paper") == RetrievalConfig()
    assert preset("best").tigrag.fusion.title_links and preset("best").tigrag.fusion.dedup_passages
    from gpu_tigrag.methods.tigrag.config import resolve_modes

    ran = preset("best").with_section("tigrag", resolve_modes(preset("best").tigrag, index.n_chunks)[0])
    assert Retriever(index, backend="numpy").config == ran  # with "auto" resolved: the config says what runs
    with pytest.raises(TigragError, match="unknown preset"):
        preset("fastest")


def test_best_links_the_named_passage_and_its_bridge_first(index, backend):
    question = "Where was the director of Winter Tide born?"
    best = Retriever(index, preset("best"), backend=backend).retrieve([question], k=3)[0]
    assert best.titles[:2] == ["Winter Tide", "Oskar Helm"]  # named by the question, then by its bridging entity
    assert best.hops[0].new_entities[0] == "Oskar Helm"  # the entity naming a passage ranks first


def test_bridge_choice_caps_the_expanded_entities(index, backend):
    config = RetrievalConfig.of("tigrag", fusion=FusionConfig(bridge_entities=1))
    result = Retriever(index, config, backend=backend).retrieve(["Who directed the thriller Winter Tide?"], k=3)[0]
    assert len(result.hops[0].new_entities) == 1
    every = Retriever(index, RetrievalConfig(), backend=backend).retrieve(["Who directed the thriller Winter Tide?"], k=3)[0]
    assert len(every.hops[0].new_entities) == 3


def test_dedup_keeps_one_chunk_per_passage(index, backend):
    assert (index.chunk_passage == 5).sum() >= 3  # the almanac spans several chunks
    query = ["Which film director was born in a harbour town, per the long almanac of tides and boats?"]
    plain = Retriever(index, RetrievalConfig.of("tigrag", hops=1), backend=backend).retrieve(query, k=index.n_chunks)[0]
    assert plain.titles.count("Harbour Almanac") >= 2
    dedup = Retriever(index, RetrievalConfig.of("tigrag", hops=1, fusion=FusionConfig(dedup_passages=True)),
                      backend=backend).retrieve(query, k=4)[0]
    first = list(dict.fromkeys(plain.passage_ids))[:4]  # each passage at the rank of its best chunk
    assert len(first) >= 2
    assert dedup.passage_ids == first
    assert dedup.chunk_ids == [plain.chunk_ids[plain.passage_ids.index(p)] for p in first]


def test_fusion_config_rejects_unknown_modes():
    with pytest.raises(TigragError, match="first_hop"):
        FusionConfig(first_hop="magic")
    with pytest.raises(TigragError, match="hop_fusion"):
        FusionConfig(hop_fusion="sum")


def test_k_below_one_is_an_error_not_beta(index):
    retriever = Retriever(index, backend="numpy")
    for bad in (0, -1, 2.5):
        with pytest.raises(TigragError, match="k .* must be an integer >= 1"):
            retriever.retrieve(["Who directed Winter Tide?"], k=bad)
    assert len(retriever.retrieve(["Who directed Winter Tide?"])[0].chunk_ids) <= retriever.config.beta
