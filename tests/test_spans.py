"""LiteSemRAG span extraction (gpu_tigrag/index/spans.py) with the real offline spaCy model."""

from __future__ import annotations

import pytest

from gpu_tigrag.config import EntityConfig
from gpu_tigrag.methods.litesemrag.spans import Span, clean_text, extract_spans, query_spans, span_key, spans_of_doc

pytest.importorskip("spacy")
pytest.importorskip(EntityConfig().model)

TEXTS = [
    'Barack Obama visited the NASA headquarters in 1990 with "his" state-of-the-art electric car.',
    "The red ball was under the big red ball.",
    "An ox pulled the heavy cart while we measured the water.",
    "Apple quickly released 3 phones in 2021 and they sold well.",
    "Gene expres-\nsion of stem cells is a key factor in regenerative medicine.",
]


@pytest.fixture(scope="module")
def nlp():
    from gpu_tigrag.methods.litesemrag.spans import load_span_pipeline

    return load_span_pipeline()


@pytest.fixture(scope="module")
def spans(nlp):
    return extract_spans(TEXTS, nlp=nlp, batch_size=2)


def _of(spans: list[Span], kind: str) -> list[str]:
    return [s.text for s in spans if s.kind == kind]


def test_clean_text():
    assert clean_text("gene expres-\nsion") == "gene expression"
    assert clean_text("a state-of-the-art car") == "a state-of-the-art car"
    assert clean_text("The NASA rover") == "the NASA rover"
    assert clean_text("Barack Obama met Angela Merkel today") == "Barack Obama met Angela Merkel today"
    assert clean_text("NASA Ames Research is near") == "NASA Ames Research is near"
    assert clean_text("Obama spoke. Then he left") == "obama spoke. then he left"  # the paper's behaviour (notes B6)
    assert clean_text("Obama spoke", protect_single_capitals=True) == "Obama spoke"
    assert clean_text('He said "Hi" and \u2018bye\u2019, don\'t') == "he said hi and bye, don't"
    assert clean_text("") == ""


def test_entities_and_all_digit_dropped(spans):
    first = spans[0]
    assert _of(first, "entity") == ["barack obama", "nasa"]
    assert all("1990" not in s.text for s in first)
    assert all(s.text not in ("3", "2021") for s in spans[3])
    assert next(s for s in first if s.text == "barack obama").n_words == 2


def test_noun_chunk_rules(spans):
    # the chunk "the NASA headquarters" overlaps an entity: only its remaining noun is a token;
    # the hyphen infix rule is gone, so "state-of-the-art" stays one word of the phrase
    assert _of(spans[0], "phrase") == ["state-of-the-art electric car"]
    assert _of(spans[0], "token") == ["headquarters"]
    # "the red ball" is contained in "the big red ball": dropped, its words fall back to tokens
    assert _of(spans[1], "phrase") == ["big red ball"]
    assert _of(spans[1], "token") == ["red", "ball"]
    # "the water" has a single content token: a token, not a phrase
    assert _of(spans[2], "phrase") == ["heavy cart"]
    assert _of(spans[2], "token") == ["water"]
    assert _of(spans[4], "phrase") == ["gene expression", "stem cells", "key factor", "regenerative medicine"]
    assert all(s.n_words >= 2 and s.is_phrase_node for s in spans[4])


def test_noun_chunk_root_must_be_noun(nlp):
    from spacy.tokens import Doc

    words = ["big", "red", "ball", "fell"]
    heads, deps = [2, 2, 3, 3], ["amod", "amod", "nsubj", "ROOT"]
    noun = Doc(nlp.vocab, words=words, pos=["ADJ", "ADJ", "NOUN", "VERB"], heads=heads, deps=deps)
    pron = Doc(nlp.vocab, words=words, pos=["ADJ", "ADJ", "PRON", "VERB"], heads=heads, deps=deps)
    assert [(s.text, s.kind) for s in spans_of_doc(noun)] == [("big red ball", "phrase")]
    assert [(s.text, s.kind) for s in spans_of_doc(pron)] == [("big", "token"), ("red", "token")]


def test_token_rules(spans):
    tokens = [s.text for doc in spans for s in doc if s.kind == "token"]
    for absent in ("the", "with", "his", "under", "we", "1990", "2021", "3", "ox", "visited", "pulled",
                   "quickly", "released", "sold", "well", "."):
        assert absent not in tokens
    assert "apple" in _of(spans[3], "token")  # lowercased by clean_text, so a NOUN, not an entity
    assert all(s.n_words == 1 and len(s.text) >= 2 for doc in spans for s in doc if s.kind == "token")


def test_kinds_ordered_and_disjoint(spans):
    rank = {"entity": 0, "phrase": 1, "token": 2}
    for doc in spans:
        kinds = [rank[s.kind] for s in doc]
        assert kinds == sorted(kinds)
        intervals = sorted((s.start_char, s.end_char) for s in doc)
        assert all(a[1] <= b[0] for a, b in zip(intervals, intervals[1:]))


def test_offsets_index_the_cleaned_text(spans):
    for text, doc in zip(TEXTS, spans):
        cleaned = clean_text(text)
        assert doc
        for s in doc:
            assert span_key(cleaned[s.start_char : s.end_char]) == s.text


def test_batch_equals_one_by_one(nlp, spans):
    assert [extract_spans([t], nlp=nlp)[0] for t in TEXTS] == spans
    assert query_spans(TEXTS, nlp=nlp) == spans
    assert extract_spans([], nlp=nlp) == []
