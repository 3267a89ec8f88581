"""The entity table: occurrences with their own labels, looked up as NER on the chunk would return them."""

from gpu_tigrag.config import TokenConfig
from gpu_tigrag.index.entities import entities_from_lists
from gpu_tigrag.text.tokens import Vocabulary

VOCAB = Vocabulary(sorted(["2011", "detroit", "motor", "city"]))


def test_a_lookup_keeps_reading_order_and_filters_each_occurrence_by_its_label():
    table = entities_from_lists([[("2011", "DATE"), ("Detroit", "GPE"), ("2011", "ORG"), ("detroit", "GPE")],
                                 [("Motor City", "LOC")], []], VOCAB, TokenConfig())
    assert table.texts == ["2011", "Detroit", "Motor City"]
    default = ("PERSON", "ORG", "GPE", "LOC")
    assert [table.texts[e] for e in table.of_chunk(0, default)] == ["Detroit", "2011"]  # 2011 counts as ORG only
    assert [table.texts[e] for e in table.of_chunk(0, ("DATE",))] == ["2011"]
    assert table.of_chunk(0, ("PERSON",)) == [] and table.of_chunk(2) == []
    assert table.occurrences(1) == [("Motor City", table.chunk_masks[4])]
    assert VOCAB.tokens[table.tokens_of(2)[0]] in ("motor", "city") and len(table.tokens_of(2)) == 2


def test_occurrences_rebuild_the_same_table():
    lists = [[("Ann Lee", "PERSON"), ("Ann Lee", "WORK_OF_ART")], [("Oslo", "GPE")]]
    table = entities_from_lists(lists, VOCAB, TokenConfig())
    again = entities_from_lists([table.occurrences(c) for c in range(2)], VOCAB, TokenConfig())
    assert again.texts == table.texts
    assert again.chunk_ids.tolist() == table.chunk_ids.tolist() and again.chunk_masks.tolist() == table.chunk_masks.tolist()
