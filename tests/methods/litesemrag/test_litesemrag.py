"""LiteSemRAG: the span rules of the public code (cleaning, keys, index and query spans, with the real
spaCy model), span vectors' overlap weights, prototypes, the semantic-graph stage (BM25, phrase
index, storage, add, extend), span matching on a hand-made graph (a prototype matched twice stays
twice and links to itself with weight 1), the merge, the whole retriever against a plain reference
written with loops and dicts on the bundled example corpus, and the `paper` figures on MuSiQue-100
(data, slow)."""

from __future__ import annotations

import dataclasses
import json
import math
from collections import defaultdict

import numpy as np
import pytest
import scipy.sparse

from helpers import EXAMPLES, QUESTIONS, logged_messages, string_entities
from gpu_tigrag.checksums import sha256_file
from gpu_tigrag.config import EncoderConfig, EntityConfig, IndexConfig, RetrievalConfig, replace_path
from gpu_tigrag.methods.litesemrag.config import LitesemragQueryConfig, LitesemragIndexConfig
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.encoders import load_encoder
from gpu_tigrag.errors import IndexFormatError, TigragError
from gpu_tigrag.methods.litesemrag.prototypes import build_prototypes, unit_rows
from gpu_tigrag.methods.litesemrag.semantic_graph import SemanticGraph, check_stage
from gpu_tigrag.methods.litesemrag.spans import ENTITY, PHRASE, TOKEN, Span
from gpu_tigrag.methods.litesemrag.token_states import overlap_weights
from gpu_tigrag.methods.litesemrag.retriever import (LitesemragRetriever, MatchedNodes, SpanBatch, match_spans,
                                            merge_rankings, recovery_order)

CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"))
#: small enough that a few strings of the example corpus are clustered (and some get several senses:
#: with the hdbscan package's neighbourhood, offset 1, these few occurrences form no second cluster)
STAGE = LitesemragIndexConfig(min_occurrences=3, concentration=0.99, min_samples_offset=0)
QUERIES = QUESTIONS[:6] + [
    "Which students of the Royal Conservatory of Halden were born in Halden?",
    "quantum chromodynamics of orchards",
    "?? !!",
    "The film director and the novelist married in the harbour town",
    "Which film, novel, town, village, painter, composer, prize, festival, coast or population?",
]


# --- span extraction: the public code's rules (text_processing.py; bench/results/faithfulness_litesemrag.md)

def test_clean_text_follows_the_public_rules():
    from gpu_tigrag.methods.litesemrag.spans import clean_text

    assert clean_text("gene expres-\nsion") == "gene expression"  # a word broken at a line end
    assert clean_text("a  b\n\nc\t d ") == "a b c d"  # newlines, then any whitespace: one space; stripped
    assert clean_text("The NASA rover") == "the NASA rover"  # ALLCAPS kept
    assert clean_text("Barack Obama met Angela Merkel today") == "Barack Obama met Angela Merkel today"
    assert clean_text("Obama spoke. Then he left") == "obama spoke. then he left"  # a lone capital: lowercased
    assert clean_text("Obama spoke. Then he left", protect_single_capitals=True) == "Obama spoke. Then he left"
    # ASCII quotes go, apostrophes inside words too; typographic quotes stay
    assert clean_text('He said "Hi" and \u2018bye\u2019, don\'t') == "he said hi and \u2018bye\u2019, dont"
    assert clean_text("Barack Obama's car") == "Barack Obamas car"
    # a kept string is kept wherever it occurs, inside other words too, and the first run found wins
    assert clean_text("US troops and USB drives") == "US troops and USb drives"
    assert clean_text("USB drives and US troops") == "USB drives and US troops"
    assert clean_text("New York and New York City") == "New York and New York city"
    assert clean_text("Ronald McDonald and Jos\u00e9 Mart\u00ed") == "ronald mcdonald and jos\u00e9 mart\u00ed"  # ASCII runs only
    assert clean_text("") == ""


def test_span_keys_drop_a_leading_article_and_keep_words_with_two_capitals():
    from gpu_tigrag.methods.litesemrag.spans import span_key

    assert span_key("the big red ball") == "big red ball"
    assert span_key("A NASA rover") == "NASA rover"
    assert span_key("An  Apple  Pie") == "apple pie"
    assert span_key("his state-of-the-art car") == "his state-of-the-art car"  # only an article leaves the key
    assert span_key("the the end") == "the end"
    assert span_key("USb Drives") == "USb drives"
    assert span_key("The") == ""


#: sentences whose spans were checked against the public code's `extract_important_spans` (index side)
#: and `extract_important_phrases` + `extract_important_tokens` (query side) with the same spaCy model
SPAN_CASES = [
    ("Who was the president of the American Institute of Physics when Barack Obama's first album came out?",
     # the noun chunk "Barack Obamas first album" holds the entity "Barack Obamas": the longer phrase stays
     [("american institute of physics", ENTITY), ("barack obamas first album", PHRASE), ("president", TOKEN)],
     # the query keeps the entity beside the phrase, and every word is a token of its own
     [("american institute of physics", ENTITY), ("barack obamas", ENTITY), ("barack obamas first album", PHRASE),
      ("president", TOKEN), ("american", TOKEN), ("institute", TOKEN), ("physics", TOKEN), ("barack", TOKEN),
      ("obamas", TOKEN), ("album", TOKEN)]),
    ("The famous Barack Obama visited the NASA headquarters with his state-of-the-art electric car.",
     [("famous barack obama", PHRASE), ("NASA headquarters", PHRASE), ("his state-of-the-art electric car", PHRASE)],
     [("barack obama", ENTITY), ("NASA", ENTITY), ("famous barack obama", PHRASE), ("NASA headquarters", PHRASE),
      ("his state-of-the-art electric car", PHRASE), ("famous", TOKEN), ("barack", TOKEN), ("obama", TOKEN),
      ("NASA", TOKEN), ("headquarters", TOKEN), ("state-of-the-art", TOKEN), ("electric", TOKEN), ("car", TOKEN)]),
    # "the café owner" fails the ASCII phrase filter, "his first album" has one word that is not a stop word
    ("The big red ball rolled past the café owner and his first album.",
     [("café", ENTITY), ("first", ENTITY), ("big red ball", PHRASE), ("owner", TOKEN), ("album", TOKEN)],
     [("café", ENTITY), ("first", ENTITY), ("big red ball", PHRASE), ("big", TOKEN), ("red", TOKEN), ("ball", TOKEN),
      ("café", TOKEN), ("owner", TOKEN), ("album", TOKEN)]),
    # all-digit entities go only when every word is digits; "US troops" has one word that is not a stop word
    ("US troops and USB drives: the US Army bought 1990-2000 models.",
     [("US", ENTITY), ("US", ENTITY), ("1990-2000 models", PHRASE), ("troops", TOKEN), ("USb", TOKEN), ("army", TOKEN)],
     [("US", ENTITY), ("US", ENTITY), ("1990-2000", ENTITY), ("1990-2000 models", PHRASE), ("troops", TOKEN),
      ("USb", TOKEN), ("army", TOKEN), ("1990-2000", TOKEN), ("models", TOKEN)]),
    ('Gene expres-\nsion of   stem cells,\n\nin "vitro".',
     [("gene expression", PHRASE), ("stem cells", PHRASE)],
     [("gene expression", PHRASE), ("stem cells", PHRASE), ("gene", TOKEN), ("expression", TOKEN), ("stem", TOKEN),
      ("cells", TOKEN)]),
]


@pytest.fixture(scope="module")
def span_nlp():
    pytest.importorskip("spacy")
    pytest.importorskip(EntityConfig().model)
    from gpu_tigrag.methods.litesemrag.spans import load_span_pipeline

    return load_span_pipeline()


def test_index_and_query_spans_follow_the_public_rules(span_nlp):
    from gpu_tigrag.methods.litesemrag.spans import clean_text, extract_spans, parse_spans, query_spans, span_key

    texts = [text for text, _, _ in SPAN_CASES]
    index_side, query_side = extract_spans(texts, nlp=span_nlp, batch_size=2), query_spans(texts, nlp=span_nlp)
    for (text, want_index, want_query), got_index, got_query in zip(SPAN_CASES, index_side, query_side):
        assert [(s.text, s.kind) for s in got_index] == want_index, text
        assert [(s.text, s.kind) for s in got_query] == want_query, text
        cleaned = clean_text(text)
        for s in got_index + got_query:  # offsets index the cleaned text; the key is that text's key
            assert span_key(cleaned[s.start_char : s.end_char]) == s.text and s.n_words == len(s.text.split())
    assert [extract_spans([t], nlp=span_nlp)[0] for t in texts] == index_side  # batches change nothing
    # BM25 lengths: tokens of the raw text under the span tokenizer (the last text: 15; its cleaned text has 9)
    _, lengths = parse_spans(texts, nlp=span_nlp)
    assert lengths.tolist() == [19, 14, 14, 13, 15]
    assert extract_spans([], nlp=span_nlp) == []


def test_a_text_longer_than_spacys_limit_is_parsed_in_pieces(span_nlp):
    """A text over spaCy's max_length (E088 otherwise) is parsed in pieces cut at sentence ends, its
    spans' offsets moved back into the whole cleaned text: here the same spans as parsed whole."""
    from gpu_tigrag.methods.litesemrag.spans import clean_text, parse_spans

    text = "\n".join(["The Glass Orchard is a drama film directed by Mirela Vantz in Korvath."] * 150)
    whole, whole_lengths = parse_spans([text], span_nlp)
    limit = span_nlp.max_length
    span_nlp.max_length = 5000  # the text has ~10,600 characters: three pieces
    try:
        pieces, lengths = parse_spans([text], span_nlp)
    finally:
        span_nlp.max_length = limit
    assert len(whole[0]) == len(pieces[0]) == 600 and lengths.tolist() == whole_lengths.tolist()
    same = set(pieces[0]) & set(whole[0])
    assert len(same) >= 596  # the two cuts: the span right after each may be parsed otherwise (phrase, entity)
    cleaned = clean_text(text)
    assert all(cleaned[x.start_char:x.end_char].lower().endswith(x.text.split()[-1]) for x in pieces[0])
    assert cleaned[pieces[0][-1].start_char:pieces[0][-1].end_char] == "korvath"


def test_span_tokenizer_is_the_public_codes(span_nlp):
    """Prefix and suffix rules, infixes without "-" only, no special cases, no URL matcher."""
    words = [t.text for t in span_nlp.tokenizer("state-of-the-art 1990-2000 word,word don't U.S. end...")]
    assert words == ["state-of-the-art", "1990-2000", "word,word", "don't", "U.S.", "end", "..."]


def test_noun_chunk_root_must_be_noun(span_nlp):
    from spacy.tokens import Doc

    from gpu_tigrag.methods.litesemrag.spans import query_spans_of_doc, spans_of_doc

    words = ["big", "red", "ball", "fell"]
    heads, deps = [2, 2, 3, 3], ["amod", "amod", "nsubj", "ROOT"]
    noun = Doc(span_nlp.vocab, words=words, pos=["ADJ", "ADJ", "NOUN", "VERB"], heads=heads, deps=deps)
    pron = Doc(span_nlp.vocab, words=words, pos=["ADJ", "ADJ", "PRON", "VERB"], heads=heads, deps=deps)
    assert [(s.text, s.kind) for s in spans_of_doc(noun)] == [("big red ball", PHRASE)]
    assert [(s.text, s.kind) for s in query_spans_of_doc(noun)] == [("big red ball", PHRASE), ("big", TOKEN),
                                                                      ("red", TOKEN), ("ball", TOKEN)]
    assert [(s.text, s.kind) for s in spans_of_doc(pron)] == [("big", TOKEN), ("red", TOKEN)]


# --- overlap weights -----------------------------------------------------------------------------

def test_overlap_weights_on_hand_made_offsets():
    # [CLS] bar ack obama [SEP], an empty sub-word at (3, 3) and two pads (one with offsets, masked out)
    offsets = np.array([[0, 0], [0, 3], [3, 6], [7, 12], [0, 0], [3, 3], [0, 0], [7, 12]])
    mask = np.array([1, 1, 1, 1, 1, 1, 0, 0], dtype=bool)
    spans = [Span("barack", TOKEN, 0, 6, 1), Span("obama", TOKEN, 7, 12, 1), Span("x", TOKEN, 2, 8, 1),
             Span("gone", TOKEN, 13, 20, 1), Span("space", TOKEN, 6, 7, 1)]
    w = overlap_weights(offsets, mask, spans)
    assert w.dtype == np.float32 and w.shape == (5, 8)
    np.testing.assert_allclose(w[0], [0, 0.5, 0.5, 0, 0, 0, 0, 0])  # the empty sub-word inside it never counts
    np.testing.assert_allclose(w[1], [0, 0, 0, 1, 0, 0, 0, 0])  # nor the masked pad with offsets (7, 12)
    np.testing.assert_allclose(w[2], [0, 1 / 3, 1 / 3, 1 / 3, 0, 0, 0, 0])
    assert not w[3].any() and not w[4].any()  # past the text; only a gap between sub-words
    assert not w[:, [0, 4, 5, 6, 7]].any()  # special tokens (empty offsets) and padding: never


# --- prototypes ----------------------------------------------------------------------------------

D = 16


def _blob(rng, direction, n, noise):
    return direction[None, :] + noise * rng.standard_normal((n, D))


def _axis(i):
    e = np.zeros(D)
    e[i] = 1.0
    return e


def synthetic_occurrences(seed=0):
    """(string_ids, vectors, chunk_ids, truth): string 0 rare; 1 two orthogonal senses (+ 3 outliers
    near sense A); 2 one tight sense; 3 two senses 26° apart (concentrated as a whole). `truth` maps
    occurrence -> sense label (0/1) for strings 1 and 3."""
    rng = np.random.default_rng(seed)
    v = 0.9 * _axis(3) + math.sqrt(1 - 0.81) * _axis(4)
    parts = [
        (0, rng.standard_normal((5, D)) * rng.uniform(0.5, 3, (5, 1)), None, None),
        (1, _blob(rng, _axis(0), 150, 0.05), 0, np.arange(50).repeat(3)),
        (1, _blob(rng, _axis(1), 150, 0.05), 1, 50 + np.arange(50).repeat(3)),
        (1, np.stack([_axis(0) + 0.5 * _axis(5 + i) for i in range(3)]), 0, np.array([0, 1, 2])),
        (2, _blob(rng, _axis(2), 120, 0.02), None, None),
        (3, _blob(rng, _axis(3), 75, 0.01), 0, None),
        (3, _blob(rng, v, 75, 0.01), 1, None),
    ]
    ids, vecs, chunks, truth = [], [], [], []
    for s, x, label, ch in parts:
        ids.append(np.full(len(x), s))
        vecs.append(x)
        chunks.append(ch if ch is not None else 200 + rng.integers(0, 40, len(x)))
        truth.append(np.full(len(x), -1 if label is None else label))
    perm = rng.permutation(sum(len(i) for i in ids))  # occurrences of every string interleaved
    return (np.concatenate(ids)[perm], np.concatenate(vecs).astype(np.float32)[perm], np.concatenate(chunks)[perm],
            np.concatenate(truth)[perm])


def check_consistent(protos, string_ids, n_strings):
    ptr = protos.ptr
    assert ptr.shape == (n_strings + 1,) and ptr[0] == 0 and (np.diff(ptr) >= 1).all()
    assert protos.vectors.shape == (ptr[-1], D) and protos.stats["prototypes"] == ptr[-1]
    np.testing.assert_allclose(np.linalg.norm(protos.vectors, axis=1), 1, atol=1e-5)
    a = protos.assignment
    assert a.shape == string_ids.shape
    assert ((ptr[string_ids] <= a) & (a < ptr[string_ids + 1])).all()
    assert set(a.tolist()) == set(range(int(ptr[-1])))  # every prototype has occurrences


def senses_recovered(protos, string_ids, truth, s, directions):
    """Every occurrence of string s is assigned to the prototype nearest its true sense's direction."""
    lo, hi = protos.ptr[s], protos.ptr[s + 1]
    assert hi - lo == len(directions)
    cos = protos.vectors[lo:hi] @ np.stack(directions).T  # prototypes × senses
    nearest = np.argmax(cos, axis=0)
    assert sorted(nearest.tolist()) == list(range(len(directions)))  # a prototype per sense
    assert (cos.max(axis=0) > 0.99).all()
    occ = string_ids == s
    np.testing.assert_array_equal(protos.assignment[occ], lo + nearest[truth[occ]])


def test_build_prototypes_on_synthetic_senses():
    string_ids, vectors, chunks, truth = synthetic_occurrences()
    single = np.array([True, True, True, False])
    cfg = LitesemragIndexConfig(min_occurrences=100)
    protos = build_prototypes(string_ids, vectors, chunks, 4, single, cfg)
    check_consistent(protos, string_ids, 4)
    # a rare string: one prototype, the normalised mean of its unit vectors
    rare = vectors[string_ids == 0].astype(np.float64)
    mean = (rare / np.linalg.norm(rare, axis=1, keepdims=True)).mean(axis=0)
    np.testing.assert_allclose(protos.vectors[protos.ptr[0]], mean / np.linalg.norm(mean), atol=1e-5)
    # two orthogonal senses: two prototypes, every occurrence (outliers too) at its own
    senses_recovered(protos, string_ids, truth, 1, [_axis(0), _axis(1)])
    # a tight single word: one prototype; the multi-word string 3 is clustered although concentrated
    assert protos.ptr[3] - protos.ptr[2] == 1
    v = 0.9 * _axis(3) + math.sqrt(1 - 0.81) * _axis(4)
    senses_recovered(protos, string_ids, truth, 3, [_axis(3), v])
    assert protos.stats == {"strings": 4, "prototypes": 6, "frequent_strings": 3, "concentrated_strings": 1,
                            "clustered_strings": 2, "multi_sense_strings": 2}
    # the same occurrences of string 3 as one word: concentrated (mean cosine ~.97 > .9), one prototype
    as_word = build_prototypes(string_ids, vectors, chunks, 4, np.ones(4, dtype=bool), cfg)
    assert as_word.ptr[4] - as_word.ptr[3] == 1 and as_word.stats["concentrated_strings"] == 2
    assert as_word.stats["clustered_strings"] == 1
    # τ_conc above every mean cosine: string 2 is clustered too; below min_occurrences nothing is
    assert build_prototypes(string_ids, vectors, chunks, 4, single,
                            LitesemragIndexConfig(min_occurrences=100, concentration=1.0)).stats["concentrated_strings"] == 0
    few = build_prototypes(string_ids, vectors, chunks, 4, single, LitesemragIndexConfig(min_occurrences=1000))
    assert few.ptr.tolist() == [0, 1, 2, 3, 4] and few.stats["clustered_strings"] == 0
    for s in range(4):
        x = vectors[string_ids == s].astype(np.float64)
        m = (x / np.linalg.norm(x, axis=1, keepdims=True)).mean(axis=0)
        np.testing.assert_allclose(few.vectors[s], m / np.linalg.norm(m), atol=1e-5)
        assert (few.assignment[string_ids == s] == s).all()


def test_build_prototypes_with_chunk_aggregation():
    string_ids, vectors, chunks, truth = synthetic_occurrences(seed=1)
    # two occurrences of string 1's sense B inside chunks 3 and 4 of sense A: they follow their chunk
    string_ids = np.concatenate([string_ids, [1, 1]])
    vectors = np.concatenate([vectors, unit_rows(np.stack([_axis(1) + 0.05 * _axis(6), _axis(1) + 0.05 * _axis(7)]))])
    chunks = np.concatenate([chunks, [3, 4]])
    truth = np.concatenate([truth, [0, 0]])
    cfg = LitesemragIndexConfig(min_occurrences=100, chunk_aggregation=True)
    protos = build_prototypes(string_ids, vectors, chunks, 4, np.array([True, True, True, False]), cfg)
    check_consistent(protos, string_ids, 4)
    senses_recovered(protos, string_ids, truth, 1, [_axis(0), _axis(1)])
    # without the aggregation they go to sense B
    alone = build_prototypes(string_ids, vectors, chunks, 4, np.array([True, True, True, False]),
                             LitesemragIndexConfig(min_occurrences=100))
    b = alone.ptr[1] + int(np.argmax(alone.vectors[alone.ptr[1]:alone.ptr[2]] @ _axis(1)))
    assert alone.assignment[-2:].tolist() == [b, b]
    # every occurrence follows its chunk's mean: one prototype per chunk (string 1's chunks are all
    # clean, so no chunk mean is HDBSCAN noise here; see the xfail test below for a noise chunk)
    occ = string_ids == 1
    per_chunk = defaultdict(set)
    for c, p in zip(chunks[occ].tolist(), protos.assignment[occ].tolist()):
        per_chunk[c].add(p)
    assert len(per_chunk) == 100 and all(len(p) == 1 for p in per_chunk.values())
    # the strings under min_occurrences or concentrated are not aggregated: as without it
    plain = build_prototypes(string_ids, vectors, chunks, 4, np.array([True, True, True, False]),
                             LitesemragIndexConfig(min_occurrences=100))
    for s in (0, 2):
        np.testing.assert_array_equal(protos.vectors[protos.ptr[s]], plain.vectors[plain.ptr[s]])


# with chunk_aggregation, a chunk whose *mean* HDBSCAN calls noise goes to its mean's nearest prototype
# and all its occurrences follow (a per-occurrence reassignment would split the chunk)
def test_chunk_aggregation_noise_chunk_follows_its_mean():
    from gpu_tigrag.methods.litesemrag.prototypes import cluster_senses

    rng = np.random.default_rng(0)
    e = np.eye(8)
    u, v = e[0], 0.9 * e[0] + math.sqrt(0.19) * e[1]
    unit = np.concatenate([u + 0.01 * rng.standard_normal((40, 8)), v + 0.01 * rng.standard_normal((40, 8)),
                           [u, v, e[2], e[2]]])  # the last chunk: one occurrence of each sense and two far off
    unit = unit_rows(unit)
    chunks = np.concatenate([np.arange(20).repeat(2), 20 + np.arange(20).repeat(2), [40] * 4])
    centres, labels = cluster_senses(unit, chunks, LitesemragIndexConfig(chunk_aggregation=True, cluster_divisor=5))
    assert len(centres) == 2
    mean = unit_rows(unit[-4:].mean(axis=0, keepdims=True))[0]
    assert labels[-4:].tolist() == [int(np.argmax(centres @ mean))] * 4  # got [0, 1, 1, 1]


# --- the stage's arrays --------------------------------------------------------------------------

def plain_bm25(tf, lengths, k1, b):
    n = len(lengths)
    avg = sum(lengths) / n
    out = {}
    for p, row in enumerate(tf):
        df = sum(1 for x in row if x > 0)
        idf = math.log((n + 1) / (df + 1)) + 1
        for c, x in enumerate(row):
            if x > 0:
                out[p, c] = idf * x * (k1 + 1) / (x + k1 * (1 - b + b * lengths[c] / avg))
    return out


def hand_graph(strings, ptr, vectors, tf, lengths):
    return SemanticGraph(strings=strings, proto_ptr=np.asarray(ptr, dtype=np.int64),
                         proto_vectors=np.asarray(vectors, dtype=np.float32),
                         tf=scipy.sparse.csr_matrix(np.asarray(tf, dtype=np.float32)),
                         chunk_len=np.asarray(lengths, dtype=np.int32))


def test_bm25_against_a_plain_formula_and_the_phrase_index():
    tf = [[1, 0, 3, 0], [0, 2, 0, 0], [1, 1, 1, 1], [0, 0, 0, 5]]
    lengths = [4, 10, 6, 2]
    strings = ["big red ball", "red", "red car", "ball"]
    graph = hand_graph(strings, [0, 1, 2, 3, 4], np.eye(4), tf, lengths)
    for k1, b in ((1.2, 0.75), (2.0, 0.3), (0.9, 0.0), (1.5, 1.0)):
        got = graph.bm25(k1, b)
        assert got.dtype == np.float32 and got.shape == (4, 4)
        coo = got.tocoo()
        got_dict = {(int(i), int(j)): float(v) for i, j, v in zip(coo.row, coo.col, coo.data)}
        expected = plain_bm25(tf, lengths, k1, b)
        assert got_dict.keys() == expected.keys()
        for key, value in expected.items():
            assert got_dict[key] == pytest.approx(value, rel=1e-6), (k1, b, key)
    index = {w: ids.tolist() for w, ids in graph.phrase_index.items()}
    assert index == {"big": [0], "red": [0, 2], "ball": [0], "car": [2]}
    assert graph.string_ids == {"big red ball": 0, "red": 1, "red car": 2, "ball": 3}
    two = hand_graph(["a", "b c"], [0, 3, 4], np.eye(4), np.ones((4, 2)), [1, 1])
    assert two.proto_string.tolist() == [0, 0, 0, 1] and two.n_prototypes == 4 and two.n_chunks == 2
    check_stage(two, 2)
    with pytest.raises(TigragError, match="covers 2 chunks but the index has 3.*tigrag extend"):
        check_stage(two, 3)
    with pytest.raises(TigragError, match="pointers do not match"):
        check_stage(dataclasses.replace(two, proto_ptr=np.array([0, 3])), 2)


# --- span matching on a hand-made graph ------------------------------------------------------------

DM = 16
MATCH_STRINGS = ["barack obama", "barack obama library", "red ball", "big red ball", "car", "engine room",
                 "john smith jr", "dr john smith", "smith", "apple", "obama", "ball"]
#: prototypes: P0..P13 are the axes e0..e13; "car" owns P4, P5 and "dr john smith" P8, P9
MATCH_PTR = [0, 1, 2, 3, 4, 6, 7, 8, 10, 11, 12, 13, 14]


def _u(*pairs):
    v = np.zeros(DM)
    for i, w in pairs:
        v[i] += w
    return v / np.linalg.norm(v)


def match_graph():
    n_protos = MATCH_PTR[-1]
    return hand_graph(MATCH_STRINGS, MATCH_PTR, np.eye(n_protos, DM), np.ones((n_protos, 3)), [3, 3, 3])


def make_batch(queries):
    """A SpanBatch of [(span, vector, keep), ...] per query."""
    spans = [[s for s, _, _ in q] for q in queries]
    rows = [(v, k) for q in queries for _, v, k in q]
    vectors = np.array([v for v, _ in rows], dtype=np.float32).reshape(-1, DM)
    keep = np.array([k for _, k in rows], dtype=bool)
    offsets = np.concatenate([[0], np.cumsum([len(q) for q in queries])]).astype(np.int64)
    return SpanBatch([f"q{i}" for i in range(len(queries))], spans, vectors, keep, offsets)


def numpy_matchers(graph, vectors):
    """Plain NumPy matchers: every (span, prototype) pair of a slot scored, the best first (equal: lower id)."""
    protos = graph.proto_vectors

    def slot_best(rows, lists, ptr, ps):
        best = np.full(rows.size, -1, dtype=np.int64)
        for s, row in enumerate(rows):
            candidates = ps[ptr[lists[s]]:ptr[lists[s] + 1]] if lists[s] >= 0 else ps[:0]
            if candidates.size:
                scores = protos[candidates] @ vectors[row]
                best[s] = candidates[np.lexsort((candidates, -scores))[0]]
        return best

    return slot_best, lambda rows: np.argmax(vectors[rows] @ protos.T, axis=1)


def sp(text, kind):
    return Span(text, kind, 0, 1, len(text.split()))


def test_match_spans_levels_order_and_repeats():
    graph = match_graph()
    q0 = [
        (sp("barack obama", ENTITY), _u((0, 1)), True),  # exact P0 (level 0); partial of an entity: P1 (1), after
        (sp("john smith", ENTITY), _u((7, .2), (8, .3), (9, .9)), True),  # no exact: partial, best of P7, P8, P9
        (sp("red ball", PHRASE), _u((2, 1)), True),  # exact P2 (1); partial "big red ball" P3 (2), after
        (sp("obama", TOKEN), _u((12, 1)), True),  # a word of the matched entity: skipped
        (sp("ball", TOKEN), _u((13, 1)), True),  # a word of the matched phrase: skipped
        (sp("car", TOKEN), _u((4, .3), (5, .9)), True),  # exact: the nearer of the string's two prototypes, P5
        (sp("engine", TOKEN), _u((6, 1)), True),  # no exact: partial of a token, P6 (2), in reading order
        (sp("smith", TOKEN), _u((10, 1), (8, .1)), True),  # "john smith" was no exact match: P10; partial P8 after
        (sp("apple", TOKEN), _u((11, 1)), False),  # past the encoder's window: ignored
        (sp("zebra", TOKEN), _u((14, .95), (5, .3)), True),  # similarity: P5 again, a second node (3) at its place
        (sp("quokka", TOKEN), _u((15, .9), (13, .4)), True),  # similarity: P13 (3)
    ]
    q1 = [
        (sp("ball", TOKEN), _u((13, 1), (2, .2)), True),  # exact P13 (1); partial P2 (2), after
        (sp("red", TOKEN), _u((2, 1)), True),  # partial P2 (2) in reading order: P2 twice
    ]
    q3 = [  # a token before the entity it is a word of is not skipped; its partial P0 comes after P0 itself
        (sp("obama", TOKEN), _u((12, 1), (0, .1)), True),
        (sp("barack obama", ENTITY), _u((0, 1)), True),
    ]
    batch = make_batch([q0, q1, [], q3])
    nodes = match_spans(graph, batch, *numpy_matchers(graph, batch.vectors))
    got = defaultdict(list)
    for q, p, level in zip(nodes.query.tolist(), nodes.proto.tolist(), nodes.level.tolist()):
        got[q].append((p, level))
    assert got[0] == [(0, 0), (9, 1), (2, 1), (5, 1), (6, 2), (10, 1), (5, 3), (13, 3), (1, 1), (3, 2), (8, 2)]
    assert got[1] == [(13, 1), (2, 2), (2, 2)]
    assert 2 not in got
    assert got[3] == [(12, 1), (0, 0), (0, 2), (1, 1)]
    assert isinstance(nodes, MatchedNodes) and len(nodes) == 18
    assert nodes.query.tolist() == sorted(nodes.query.tolist())
    # the matchers' answers decide: P4 nearer for "car" moves its node
    flipped = [(s, _u((4, .9), (5, .3)) if s.text == "car" else v, k) for s, v, k in q0]
    batch = make_batch([flipped])
    nodes = match_spans(graph, batch, *numpy_matchers(graph, batch.vectors))
    assert nodes.proto.tolist()[3] == 4 and nodes.proto.tolist().count(5) == 1  # "zebra" alone has P5 (3)
    assert nodes.level.tolist()[nodes.proto.tolist().index(5)] == 3


def test_match_spans_on_nothing():
    graph = match_graph()
    batch = make_batch([[], [(sp("apple", TOKEN), _u((11, 1)), False)]])
    nodes = match_spans(graph, batch, *numpy_matchers(graph, batch.vectors))
    assert len(nodes) == 0


# --- merge ---------------------------------------------------------------------------------------

def ranked(ids, base=100.0):
    return [(c, base - i) for i, c in enumerate(ids)]


def test_merge_takes_eight_connected_then_two_recovered():
    con = ranked(range(12))
    rec = ranked([3, 100, 9, 101, 102], base=50.0)  # 3 is already taken; 9 is recovered before its connected rank
    out = merge_rankings(con, rec, 10, 8)
    ids = [c for c, _ in out]
    assert ids[:10] == [0, 1, 2, 3, 4, 5, 6, 7, 100, 9]
    assert ids[10:] == [8, 10, 11, 101, 102]  # past K: the remaining connected, then the remaining recovery
    assert out[9] == (9, 48.0) and out[3] == (3, 97.0)  # the score of the list that placed it
    assert len(ids) == len(set(ids)) == 15


def test_merge_when_one_side_runs_short():
    # connected short: recovery fills the first K
    out = [c for c, _ in merge_rankings(ranked([5, 6, 7]), ranked(range(20, 30)), 10, 8)]
    assert out == [5, 6, 7, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29]
    # recovery short: the connected list is read on from where it stopped (no chunk twice)
    out = [c for c, _ in merge_rankings(ranked(range(15)), ranked([40]), 10, 8)]
    assert out[:10] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 40]
    assert out == [0, 1, 2, 3, 4, 5, 6, 7, 8, 40, 9, 10, 11, 12, 13, 14]
    # recovery short because it repeats connected chunks
    out = [c for c, _ in merge_rankings(ranked(range(15)), ranked([2, 12, 5]), 10, 8)]
    assert out[:10] == [0, 1, 2, 3, 4, 5, 6, 7, 8, 12] and len(out) == len(set(out)) == 15
    # both short; nothing at all
    assert [c for c, _ in merge_rankings(ranked([1, 2]), ranked([2, 3]), 10, 8)] == [1, 2, 3]
    assert merge_rankings([], [], 10, 8) == []
    # recovery_share 0 and 1
    assert [c for c, _ in merge_rankings(ranked(range(12)), ranked([50, 51]), 10, 10)][:10] == list(range(10))
    # (the first K list their connected chunks first, fill included, then the recovered ones)
    assert [c for c, _ in merge_rankings(ranked(range(3)), ranked([50, 51]), 10, 0)] == [0, 1, 2, 50, 51]


def test_recovery_order_reads_levels_in_order_each_chunk_once():
    levels = [(np.array([4, 2, -1, 9]), np.array([3.0, 2.0, 0.0, 5.0])),  # -1 ends a level
              (np.zeros(0, np.int64), np.zeros(0)),
              (np.array([2, 7, 4, 1]), np.array([9.0, 8.0, 7.0, 6.0])),
              (np.array([-1]), np.array([0.0]))]
    assert recovery_order(levels) == [(4, "recovered level 0 R=3"), (2, "recovered level 0 R=2"),
                                      (7, "recovered level 2 R=8"), (1, "recovered level 2 R=6")]


def merge_values(result) -> list[float]:
    """Each ranked chunk's S(c) or R_ℓ(c), read from its source (the score is the merge's 1/rank)."""
    return [float(source.rsplit("=", 1)[1]) for source in result.sources]


# --- the retriever on the example corpus -----------------------------------------------------------

@pytest.fixture(scope="module")
def token_encoder():
    pytest.importorskip("spacy")
    pytest.importorskip(EntityConfig().model)
    from gpu_tigrag.errors import ModelError
    from gpu_tigrag.methods.litesemrag import token_states

    try:
        encoder = token_states.TokenStateEncoder(STAGE.token_encoder, STAGE.layer, STAGE.max_length, STAGE.batch_size)
    except ModelError as exc:
        pytest.skip(f"token encoder unavailable: {exc}")
    # the library builds its own encoder per stage build and retriever: reuse loaded ones in this module
    real = token_states.TokenStateEncoder
    cache = {(STAGE.token_encoder, STAGE.layer, STAGE.max_length, STAGE.batch_size): encoder}

    def cached(model, layer=-2, max_length=512, batch_size=32, device="auto"):
        key = (model, layer, max_length, batch_size)
        if key not in cache:
            cache[key] = real(model, layer, max_length, batch_size, device)
        return cache[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(token_states, "TokenStateEncoder", cached)
        yield encoder


@pytest.fixture(scope="module")
def base_index(token_encoder):
    from gpu_tigrag.index.build import build_index

    return build_index(load_corpus(EXAMPLES / "corpus.json"), CONFIG, encoder=load_encoder(CONFIG.encoder),
                       entity_extractor=string_entities)


@pytest.fixture(scope="module")
def staged(base_index):
    from gpu_tigrag.index.build import add_method

    return add_method(base_index, "litesemrag", config=STAGE)


@pytest.fixture(scope="module")
def retriever(staged, token_encoder):
    return LitesemragRetriever(staged, RetrievalConfig(method="litesemrag"), backend="numpy", encoder=token_encoder)


def test_token_states_padding_and_window(token_encoder):
    from gpu_tigrag.methods.litesemrag.spans import clean_text, extract_spans
    from gpu_tigrag.methods.litesemrag.token_states import TokenStateEncoder as Cached  # this module's cache (fixture)

    texts = ["The Glass Orchard is a drama film directed by Mirela Vantz in the harbour town.",
             "A short lighthouse."]
    spans = extract_spans(texts)
    cleaned = [clean_text(t) for t in texts]
    both, keep = token_encoder.span_vectors(cleaned, spans)
    alone, _ = token_encoder.span_vectors(cleaned[1:], spans[1:])
    assert keep.all() and both.shape == (sum(map(len, spans)), token_encoder.dim)
    tolerance = 1e-4 if token_encoder.device == "cpu" else 2e-2  # fp16 on CUDA
    np.testing.assert_allclose(both[len(spans[0]):], alone, atol=tolerance)  # padding in a batch changes nothing
    short = Cached(STAGE.token_encoder, STAGE.layer, 8, 4)  # 6 sub-words of text: later spans are dropped
    vectors, kept = short.span_vectors(cleaned[:1], spans[:1])
    # "the glass orchard is a drama": the entity "mirela vantz" and "harbour town" lie past the cut,
    # "drama film" overlaps a kept sub-word and keeps a vector
    assert [s.text for s in spans[0]] == ["mirela vantz", "glass orchard", "drama film", "harbour town"]
    assert kept.tolist() == [False, True, True, False] and not vectors[~kept].any() and vectors[kept].any(axis=1).all()


def test_stage_on_the_example_corpus(staged):
    graph = staged.litesemrag
    check_stage(graph, staged.n_chunks)
    assert graph.n_chunks == staged.n_chunks == 30 and graph.strings == sorted(set(graph.strings))
    assert graph.stats["multi_sense_strings"] >= 2 and graph.stats["dropped_spans"] == 0
    assert staged.config.litesemrag == STAGE and "litesemrag" in staged.timings
    assert graph.tf.sum() == graph.stats["spans"]  # every span occurrence is posted once
    assert "mirela vantz" in graph.string_ids and "lighthouse" in graph.string_ids


def plain_reference(graph, bm25, nodes, settings, k):
    """(chunk ids, scores, connected pool) of one query from its matched nodes [(prototype, level)]."""
    tf = graph.tf.tocsr()
    chunks = {p: set(tf.indices[tf.indptr[p]:tf.indptr[p + 1]].tolist()) for p, _ in nodes}
    bm = {p: {int(c): float(v) for c, v in zip(bm25.indices[bm25.indptr[p]:bm25.indptr[p + 1]],
                                                 bm25.data[bm25.indptr[p]:bm25.indptr[p + 1]])} for p, _ in nodes}
    owner = {p: s for s in range(len(graph.strings)) for p in range(graph.proto_ptr[s], graph.proto_ptr[s + 1])}
    total = []  # a prototype matched twice is two nodes: each counts the other (weight 1)
    for i, (a, _) in enumerate(nodes):
        total.append(sum(len(chunks[a] & chunks[b]) / math.sqrt(len(chunks[a]) * len(chunks[b]))
                         for j, (b, _) in enumerate(nodes) if j != i))
    score, seen = defaultdict(float), set()
    for (a, level), t in zip(nodes, total):
        if t > 0:
            for c, v in sorted(bm[a].items()):
                if (owner[a], c) not in seen:  # a string counts once per chunk: its first node
                    seen.add((owner[a], c))
                    score[c] += settings.level_weights[level] * t * v
    connected = sorted((c for c in score if score[c] > 0), key=lambda c: (-score[c], c))
    recovery, placed = [], set()
    weighted = settings.recovery_order == "weighted"  # one list by Σ λ_ℓ R_ℓ instead of level by level
    for level in range(1 if weighted else 4):
        r = defaultdict(float)
        for a, lv in nodes:
            if lv == level or weighted:
                for c, v in bm[a].items():
                    r[c] += (settings.level_weights[lv] if weighted else 1.0) * v
        for c in sorted((c for c in r if r[c] > 0), key=lambda c: (-r[c], c)):
            if c not in placed:
                placed.add(c)
                recovery.append((c, r[c]))
    # merge, written from the spec: n_con connected then n_rec recovered, either side filling for the other
    split = settings.split_depth
    n_rec = math.floor(split * settings.recovery_share)
    n_con = split - n_rec
    out, taken = [], set()
    con = [(c, score[c]) for c in connected]

    def take(item):
        out.append(item)
        taken.add(item[0])

    for item in con[:n_con]:
        take(item)
    rec_free = [item for item in recovery if item[0] not in taken]
    rec_head = rec_free[:max(n_rec, split - len(out))]
    i = n_con
    while len(out) + len(rec_head) < split and i < len(con):
        if con[i][0] not in {c for c, _ in rec_head}:
            take(con[i])
        i += 1
    for item in rec_head:
        take(item)
    for item in con[i:] + recovery:
        if item[0] not in taken:
            take(item)
    return [c for c, _ in out[:k]], [s for _, s in out[:k]], len(connected), total


def nodes_of(retriever, batch):
    graph = retriever.graph
    nodes = match_spans(graph, batch, *numpy_matchers(graph, batch.vectors))
    return [[(int(p), int(lv)) for qq, p, lv in zip(nodes.query, nodes.proto, nodes.level) if qq == q]
            for q in range(len(batch))]


@pytest.mark.parametrize("settings", [LitesemragQueryConfig(), LitesemragQueryConfig(level_weights=(0.3, 2.0, 1.0, 0.1),
                                                                           recovery_share=0.5, split_depth=4),
                                      LitesemragQueryConfig(level_weights=(0.3, 2.0, 1.0, 0.1), recovery_order="weighted",
                                                            recovery_share=0.5, split_depth=4)],
                         ids=["default", "custom", "weighted recovery"])
def test_retriever_equals_the_plain_reference(staged, token_encoder, settings):
    retriever = LitesemragRetriever(staged, RetrievalConfig(method="litesemrag", sections={"litesemrag": settings}),
                                    backend="numpy", encoder=token_encoder)
    k = 12
    batch = retriever.prepare(QUERIES)
    results = retriever.run_prepared(batch, k)
    bm25 = staged.litesemrag.bm25(STAGE.k1, STAGE.b).tocsr()
    connected_seen = isolated_seen = 0
    for query, nodes, result in zip(QUERIES, nodes_of(retriever, batch), results):
        ids, scores, pool, total = plain_reference(staged.litesemrag, bm25, nodes, settings, k)
        assert result.chunk_ids == ids, query
        np.testing.assert_allclose(merge_values(result), scores, rtol=1e-5, atol=1e-5)
        assert result.scores == [1.0 / rank for rank in range(1, len(ids) + 1)]  # decreasing down the ranking
        assert result.hops[0].seeds == len(nodes) and result.hops[0].pool_size == pool
        assert result.passage_ids == [int(staged.chunk_passage[c]) for c in ids] and not result.dense_fallback
        connected_seen += sum(t > 0 for t in total)
        isolated_seen += sum(t == 0 for t in total)
    assert connected_seen >= 3 and isolated_seen >= 3  # both kinds of node occur, so the test means something
    assert results[QUERIES.index("?? !!")].chunk_ids == []
    assert {"spans", "encode", "match", "cooccurrence", "score", "recover", "merge"} <= set(retriever.timer.seconds)


def hand_staged(staged):
    """(retriever, graph) of a hand-made stage on the example's 30 chunks: prototypes conservatory P0;
    halden P1, P2; music P3; zebra P4; "halden music" P5."""
    n = staged.n_chunks
    rows = {0: [0, 1, 5], 1: [0, 1, 2], 2: [1, 2, 3], 3: [3, 7], 4: [20], 5: [21, 22]}
    tf = np.zeros((6, n))
    for p, cs in rows.items():
        tf[p, cs] = np.arange(1, len(cs) + 1)
    graph = hand_graph(["conservatory", "halden", "music", "zebra", "halden music"], [0, 1, 3, 4, 5, 6],
                       np.eye(6, DM), tf, staged.litesemrag.chunk_len)

    class Fixed:
        dim = DM

        def span_vectors(self, texts, spans):
            raise AssertionError("not used")

    index = staged.with_stage("litesemrag", graph)
    return LitesemragRetriever(index, RetrievalConfig(method="litesemrag"), backend="numpy", encoder=Fixed()), graph


def test_a_string_counts_once_per_chunk(staged):
    """Two prototypes of one string in one query share chunks; each chunk takes the string's first
    node only."""
    retriever, graph = hand_staged(staged)
    batch = make_batch([[(sp("halden", TOKEN), _u((1, 1)), True), (sp("conservatory", TOKEN), _u((0, 1)), True),
                         (sp("halden", TOKEN), _u((2, 1)), True), (sp("zebra", TOKEN), _u((4, 1)), True)]])
    nodes = nodes_of(retriever, batch)[0]
    assert [p for p, _ in nodes] == [1, 0, 2, 4, 5, 5]  # then "halden music" (partial of each halden, after)
    result = retriever.run_prepared(batch, 30)[0]
    bm25 = graph.bm25(STAGE.k1, STAGE.b).tocsr()
    ids, scores, pool, total = plain_reference(graph, bm25, nodes, retriever.settings, 30)
    assert result.chunk_ids == ids
    np.testing.assert_allclose(merge_values(result), scores, rtol=1e-5)
    assert [t > 0 for t in total] == [True, True, True, False, True, True]  # P5 twice: linked to itself
    # the rule matters here: chunks 1 and 2 hold both halden prototypes
    naive = defaultdict(float)
    for (a, level), t in zip(nodes, total):
        for c in bm25.indices[bm25.indptr[a]:bm25.indptr[a + 1]]:
            naive[int(c)] += (1.0 * t * bm25[a, c]) if t > 0 else 0.0
    assert naive[1] > dict(zip(ids, scores))[1] + 1e-3


def test_a_prototype_matched_twice_links_to_itself_with_weight_one(staged):
    """The public code keeps both nodes of a prototype a query matches twice: they share all their
    chunks, so each has co-occurrence weight 1 with the other, and a node that would be isolated
    (zebra: chunk 20 only) is connected; its string still counts once per chunk."""
    retriever, graph = hand_staged(staged)
    zebra, conservatory = (sp("zebra", TOKEN), _u((4, 1)), True), (sp("conservatory", TOKEN), _u((0, 1)), True)
    batch = make_batch([[zebra, conservatory, zebra], [zebra, conservatory]])
    found = match_spans(retriever.graph, batch, *numpy_matchers(retriever.graph, batch.vectors))
    assert found.proto.tolist() == [4, 0, 4, 4, 0] and found.level.tolist() == [1] * 5
    weight, connected = retriever._cooccurrence(found)
    np.testing.assert_allclose(weight, [1.0, 0.0, 1.0, 0.0, 0.0])  # λ_1 = 1.0 × the other zebra node's 1
    assert connected.tolist() == [True, False, True, False, False]
    twice, once = retriever.run_prepared(batch, 30)
    bm25 = graph.bm25(STAGE.k1, STAGE.b).tocsr()
    assert twice.chunk_ids[0] == 20 and merge_values(twice)[0] == pytest.approx(bm25[4, 20], rel=1e-5)  # counted once
    assert twice.hops[0].pool_size == 1 and once.hops[0].pool_size == 0  # alone, zebra is isolated
    for result, nodes in zip((twice, once), nodes_of(retriever, batch)):
        ids, scores, _, _ = plain_reference(graph, bm25, nodes, retriever.settings, 30)
        assert result.chunk_ids == ids
        np.testing.assert_allclose(merge_values(result), scores, rtol=1e-5)


def test_deeper_k_keeps_the_top_k_and_blocks_split_alike(retriever, monkeypatch):
    ten = retriever.retrieve(QUERIES, k=10)
    deep = retriever.retrieve(QUERIES, k=30)
    one = retriever.retrieve(QUERIES, k=1)
    for a, b, c in zip(ten, deep, one):
        assert a.chunk_ids == b.chunk_ids[:10] and c.chunk_ids == a.chunk_ids[:1]
        assert len(set(b.chunk_ids)) == len(b.chunk_ids)
    assert max(len(b.chunk_ids) for b in deep) > 10
    beyond = retriever.retrieve(QUERIES, k=100)  # more than the 30 chunks
    assert [r.chunk_ids for r in beyond] == [r.chunk_ids for r in deep]
    real = LitesemragRetriever._retrieve_batch

    def fail_on_big(self, batch, k):
        if len(batch) > 1:
            raise MemoryError
        return real(self, batch, k)

    monkeypatch.setattr(LitesemragRetriever, "_retrieve_batch", fail_on_big)
    split = retriever.run_prepared(retriever.prepare(QUERIES), k=10)
    assert [r.chunk_ids for r in split] == [r.chunk_ids for r in ten]
    with pytest.raises(TigragError, match="k"):
        retriever.retrieve(QUERIES, k=0)
    one = retriever.retrieve("one query")  # one string: one question, a list of one result
    assert len(one) == 1 and one[0].chunk_ids == retriever.retrieve(["one query"])[0].chunk_ids


def test_cupy_results_equal_numpy(staged, token_encoder, backend):
    if not backend.is_gpu:
        pytest.skip("compares the CuPy backend with NumPy: needs a CUDA device")
    cfg = RetrievalConfig(method="litesemrag")
    cpu = LitesemragRetriever(staged, cfg, backend="numpy", encoder=token_encoder)
    gpu = LitesemragRetriever(staged, cfg, backend=backend, encoder=token_encoder)
    batch = cpu.prepare(QUERIES)  # the same span vectors for both
    for a, b in zip(cpu.run_prepared(batch, 20), gpu.run_prepared(batch, 20)):
        assert a.chunk_ids == b.chunk_ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-5)
        assert a.hops[0].seeds == b.hops[0].seeds and a.hops[0].pool_size == b.hops[0].pool_size


# --- wiring, configuration ------------------------------------------------------------------------

def test_make_retriever_and_a_missing_stage(staged, base_index, token_encoder):
    from gpu_tigrag.methods.registry import method_available
    from gpu_tigrag.retrieve.factory import make_retriever

    made = make_retriever(staged, RetrievalConfig(method="litesemrag"), backend="numpy", encoder=token_encoder)
    assert isinstance(made, LitesemragRetriever)
    assert method_available(staged, "litesemrag") and not method_available(base_index, "litesemrag")
    with pytest.raises(TigragError, match="no LiteSemRAG stage.*tigrag extend INDEX --methods litesemrag"):
        make_retriever(base_index, RetrievalConfig(method="litesemrag"), backend="numpy")
    broken = staged.with_stage("litesemrag", dataclasses.replace(
        staged.litesemrag, chunk_len=staged.litesemrag.chunk_len[:-1]))
    with pytest.raises(TigragError, match="covers 29 chunks but the index has 30"):
        LitesemragRetriever(broken, backend="numpy", encoder=token_encoder)
    other = staged.with_stage("litesemrag", dataclasses.replace(
        staged.litesemrag, stats={**staged.litesemrag.stats, "token_encoder_fingerprint": "sha256:other"}))
    with pytest.raises(TigragError, match="was built with sha256:other.*tigrag extend"):
        LitesemragRetriever(other, backend="numpy")  # the stage's own encoder, other weights

    class Narrow:
        dim = 8

        def span_vectors(self, texts, spans):
            raise AssertionError("not used")

    with pytest.raises(TigragError, match="8-d vectors but the stage's prototypes are 384-d"):
        LitesemragRetriever(staged, backend="numpy", encoder=Narrow())
    small = LitesemragRetriever(staged, RetrievalConfig(method="litesemrag", memory_budget_mb=0), backend="numpy",
                                encoder=token_encoder)
    assert small.batch_size() == 1
    assert LitesemragRetriever(staged, RetrievalConfig(method="litesemrag", batch_size=7), backend="numpy",
                               encoder=token_encoder).batch_size() == 7


def test_config_validation_and_set_parsing():
    from gpu_tigrag.cli import parse_sets as _parse_sets

    for bad in (dict(level_weights=(1.0, 1.0, 1.0)), dict(level_weights=(1.0, -1.0, 1.0, 1.0)),
                dict(level_weights=(1e308, 1.0, 1.0, 1.0)),  # overflows the float32 scores to inf
                dict(recovery_share=1.5), dict(recovery_share=-0.1), dict(split_depth=0),
                dict(recovery_order="levelled"), dict(dense_fusion=-1.0), dict(lexical_fusion=float("nan")),
                dict(fusion_depth=0), dict(fusion_rrf_k=-1)):
        with pytest.raises(TigragError, match="litesemrag"):
            LitesemragQueryConfig(**bad)
    with pytest.raises(TigragError, match="litesemrag.layer"):
        LitesemragIndexConfig(layer=0)
    with pytest.raises(TigragError, match="litesemrag.min_samples_offset must be in \\[0, 2147483647\\]"):
        LitesemragIndexConfig(min_samples_offset=-1)
    with pytest.raises(TigragError, match="method must be one of naiverag, bm25, hybrid, bm25passages, tigrag, spectrag, litesemrag"):
        RetrievalConfig(method="lite")
    config = replace_path(RetrievalConfig(), "litesemrag.level_weights", "1,1,1,1")
    assert config.litesemrag.level_weights == (1.0, 1.0, 1.0, 1.0)
    assert _parse_sets(RetrievalConfig(), ["litesemrag.level_weights=1,2,3,4", "litesemrag.split_depth=5"]) \
        .litesemrag == LitesemragQueryConfig(level_weights=(1.0, 2.0, 3.0, 4.0), split_depth=5)
    with pytest.raises(TigragError, match="level_weights must be 4"):
        _parse_sets(RetrievalConfig(), ["litesemrag.level_weights=1,1,1"])
    with pytest.raises(TigragError, match="litesemrag.layer must be"):
        _parse_sets(IndexConfig(), ["litesemrag.layer=0"])
    assert replace_path(IndexConfig(), "litesemrag.min_occurrences", "7").litesemrag.min_occurrences == 7


def test_fusion_is_the_reciprocal_rank_sum_of_the_three_lists(staged, token_encoder, retriever):
    """`dense_fusion`/`lexical_fusion`: the merged ranking (to `fusion_depth`), the dense cosine ranking
    and the BM25 ranking fused by weighted reciprocal ranks, written here from the rule with the
    baselines' own rankings; chunks in no list follow by cosine; scores decrease down the ranking."""
    from gpu_tigrag.methods.baselines.retriever import Bm25Retriever, NaiveragRetriever

    depth, rrf, k = 15, 60, 25
    settings = LitesemragQueryConfig(dense_fusion=2.0, lexical_fusion=0.5, fusion_depth=depth, fusion_rrf_k=rrf)
    fused = LitesemragRetriever(staged, RetrievalConfig(method="litesemrag", sections={"litesemrag": settings}),
                                backend="numpy", encoder=token_encoder)
    assert fused.uses_passage_encoder and not retriever.uses_passage_encoder  # the dense list needs it
    queries = [q for q in QUERIES if q != "?? !!"] + ["?? !!"]
    own = retriever.retrieve(queries, k=depth)
    dense = NaiveragRetriever(staged, backend="numpy").retrieve(queries, k=staged.n_chunks)
    lexical = Bm25Retriever(staged, backend="numpy").retrieve(queries, k=depth)
    results = fused.retrieve(queries, k=k)
    for o, d, b, r in zip(own, dense, lexical, results):
        total = defaultdict(float)
        for weight, ids in ((1.0, o.chunk_ids[:depth]), (2.0, d.chunk_ids[:depth]),
                            (0.5, [c for c, v in zip(b.chunk_ids, b.scores) if v > 0][:depth])):
            for rank, c in enumerate(ids, start=1):
                total[c] += weight / (rrf + rank)
        listed = sorted(total, key=lambda c: (-total[c], c))
        expected = (listed + [c for c in d.chunk_ids if c not in total])[:k]  # the rest by cosine
        assert r.chunk_ids == expected, r.query
        np.testing.assert_allclose(r.scores[:len(listed)], [total[c] for c in listed[:k]], rtol=1e-5)
        assert all(a >= b for a, b in zip(r.scores, r.scores[1:]))
        own_source = dict(zip(o.chunk_ids, o.sources))
        assert [s for c, s in zip(r.chunk_ids, r.sources) if c in own_source] == \
            [own_source[c] for c in r.chunk_ids if c in own_source]
    assert results[-1].chunk_ids and not own[-1].chunk_ids  # no span matched: the dense list still answers
    assert "fuse" in fused.timer.seconds


def test_title_link_lift_reranks_the_ranking_as_the_block_function_does(staged, token_encoder, retriever):
    """`link_seeds`/`link_lift`: the ranking's first chunks and the chunks their passages' titles name (directed
    title links) lifted by link_lift × the top score, then ranked again: `ops.title_lift.lift_named` on the
    unlifted ranking, whose own test holds it to a per-query reference; lifted chunks say so in their source."""
    from gpu_tigrag.ops.title_lift import lift_named
    from gpu_tigrag.text.titles import forward_title_links

    links = forward_title_links(staged.chunk_texts, staged.chunk_passage, staged.passage_titles,
                                staged.config.chunk.title_in_chunk)
    assert links.nnz > 0  # the example corpus names its own titles
    k = 12
    settings = LitesemragQueryConfig(link_seeds=1, link_lift=1.0)
    lifted = LitesemragRetriever(staged, RetrievalConfig(method="litesemrag", sections={"litesemrag": settings}),
                                 backend="numpy", encoder=token_encoder).retrieve(QUERIES, k=k)
    plain = retriever.retrieve(QUERIES, k=k)
    width = max(len(r.chunk_ids) for r in plain)
    ids = np.array([r.chunk_ids + [-1] * (width - len(r.chunk_ids)) for r in plain], dtype=np.int64)
    scores = np.array([r.scores + [0.0] * (width - len(r.scores)) for r in plain])
    want_ids, want_scores, want_lifted = lift_named(ids, scores, links, 1, 1.0, k)
    changed = 0
    for q, (got, before) in enumerate(zip(lifted, plain)):
        row = [int(c) for c in want_ids[q] if c >= 0]
        assert got.chunk_ids == row, got.query
        np.testing.assert_allclose(got.scores, want_scores[q, :len(row)])
        assert [s.endswith("lifted by a title link") for s in got.sources] == want_lifted[q, :len(row)].tolist()
        changed += got.chunk_ids != before.chunk_ids
    assert changed  # some first chunk names a passage the ranking had lower or lacked


def test_query_prints_the_litesemrag_trace_and_scores_in_rank_order(staged, tmp_path, capsys):
    """`tigrag query --method litesemrag` prints LiteSemRAG's own trace (matched nodes, where each chunk
    came from), not TIGRAG's hop lines, and its printed scores decrease down the ranking."""
    import re

    from gpu_tigrag.cli import main
    from gpu_tigrag.index.store import save_index

    path = save_index(staged, tmp_path / "idx")
    assert main(["query", str(path), QUERIES[6], "--method", "litesemrag", "-k", "8"]) == 0
    out = capsys.readouterr().out
    scores = [float(x) for x in re.findall(r"^\d+\. \[([0-9.]+)\]", out, flags=re.M)]
    assert 3 <= len(scores) <= 8 and scores == sorted(scores, reverse=True)
    assert "LiteSemRAG:" in out and "matched semantic nodes" in out and "hop 1:" not in out
    assert re.search(r"^  1\. chunk \d+: (connected S=|recovered level \d R=)", out, flags=re.M)


# --- storage, add --------------------------------------------------------------------------------

def test_save_load_round_trip_and_damage(staged, tmp_path, retriever, token_encoder):
    from gpu_tigrag.index.store import generation_folder, load_index, save_index
    from gpu_tigrag.methods.litesemrag.stage import ARRAYS as LITESEMRAG_ARRAYS

    path = save_index(staged, tmp_path / "idx")
    loaded = load_index(path)
    stage, back = staged.litesemrag, loaded.litesemrag
    assert back.strings == stage.strings and loaded.config.litesemrag == STAGE
    np.testing.assert_array_equal(back.proto_ptr, stage.proto_ptr)
    np.testing.assert_array_equal(back.proto_vectors, stage.proto_vectors)
    np.testing.assert_array_equal(back.chunk_len, stage.chunk_len)
    assert (back.tf != stage.tf).nnz == 0 and back.tf.shape == stage.tf.shape
    assert back.stats == json.loads(json.dumps(stage.stats))
    manifest = json.loads((generation_folder(path) / "manifest.json").read_text())
    assert all(f"{name}.npy" in manifest["files"] for name in LITESEMRAG_ARRAYS)
    assert "litesemrag_strings.parquet" in manifest["files"]
    again = LitesemragRetriever(loaded, RetrievalConfig(method="litesemrag"), backend="numpy", encoder=token_encoder)
    assert [r.chunk_ids for r in again.retrieve(QUERIES, k=10)] == [r.chunk_ids for r in retriever.retrieve(QUERIES, k=10)]
    # a well-formed file of the wrong length, its manifest entry rewritten: the file is named
    ptr = generation_folder(path) / "litesemrag_proto_ptr.npy"
    good = ptr.read_bytes()
    np.save(ptr, stage.proto_ptr[:-1])
    entry = dict(manifest["files"]["litesemrag_proto_ptr.npy"])
    manifest["files"]["litesemrag_proto_ptr.npy"] = {"sha256": sha256_file(ptr), "bytes": ptr.stat().st_size}
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    n = len(stage.strings)
    with pytest.raises(IndexFormatError, match=rf"litesemrag_proto_ptr.npy: int64 array of shape \({n},\), "
                                               rf"expected \({n + 1},\)"):
        load_index(path).stage("litesemrag")  # the base index loads; the stage fails when used
    ptr.write_bytes(good)
    manifest["files"]["litesemrag_proto_ptr.npy"] = entry
    # prototypes that do not match the pointers
    vectors = generation_folder(path) / "litesemrag_proto_vectors.npy"
    np.save(vectors, stage.proto_vectors[:-1])
    manifest["files"]["litesemrag_proto_vectors.npy"] = {"sha256": sha256_file(vectors),
                                                        "bytes": vectors.stat().st_size}
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="litesemrag_(proto_vectors|tf_indptr).npy"):
        load_index(path, verify_checksums=False).stage("litesemrag")
    # a stage configuration that differs from the index's
    path = save_index(staged, tmp_path / "idx2")
    manifest = json.loads((generation_folder(path) / "manifest.json").read_text())
    manifest["methods"]["litesemrag"]["config"]["min_occurrences"] = 50
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="methods.litesemrag.config differs"):
        load_index(path).stage("litesemrag")
    manifest["methods"]["litesemrag"]["config"]["layer"] = 0
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(IndexFormatError, match="methods.litesemrag has no valid configuration"):
        load_index(path).stage("litesemrag")


def test_a_stage_of_older_rules_is_refused_and_extend_rebuilds_it(staged, tmp_path, capsys, token_encoder):
    """A stage built before the public code's span rules (no `stage_version` in its stats, or another
    one) loads with the base index but is refused when used, naming the command that rebuilds it."""
    from gpu_tigrag.cli import main
    from gpu_tigrag.errors import EXIT_DAMAGED_INDEX
    from gpu_tigrag.index.store import generation_folder, load_index, save_index

    assert staged.litesemrag.stats["stage_version"] == 2
    path = save_index(staged, tmp_path / "idx")
    manifest = json.loads((generation_folder(path) / "manifest.json").read_text())
    del manifest["methods"]["litesemrag"]["stats"]["stage_version"]
    (generation_folder(path) / "manifest.json").write_text(json.dumps(manifest))
    old = load_index(path)
    assert old.n_chunks == staged.n_chunks
    with pytest.raises(IndexFormatError, match="rules of version 1.*tigrag extend INDEX --methods litesemrag"):
        old.stage("litesemrag")
    assert main(["query", str(path), QUERIES[0], "--method", "litesemrag"]) == EXIT_DAMAGED_INDEX
    err = capsys.readouterr().err
    assert "tigrag extend INDEX --methods litesemrag" in err and "Traceback" not in err
    assert main(["extend", str(path), "--methods", "litesemrag", "-q"]) == 0  # the index's own stage settings
    capsys.readouterr()
    rebuilt = load_index(path)
    assert rebuilt.config.litesemrag == STAGE and rebuilt.litesemrag.strings == staged.litesemrag.strings


def test_add_passages_rebuilds_the_stage(staged, token_encoder):
    from gpu_tigrag.index.add import add_passages
    from gpu_tigrag.index.build import add_method, build_index

    passages = load_corpus(EXAMPLES / "corpus.json")
    encoder = load_encoder(CONFIG.encoder)
    base = add_method(build_index(passages[:20], CONFIG, encoder=encoder, entity_extractor=string_entities),
                      "litesemrag", config=STAGE)
    with logged_messages() as messages:
        grown = add_passages(base, passages[20:], encoder=encoder, entity_extractor=string_entities)
    assert any("rebuilt the LiteSemRAG stage over the grown index (30 chunks): prototypes are built" in m for m in messages)
    stage = grown.litesemrag
    check_stage(stage, grown.n_chunks)
    assert grown.n_chunks == 30 > base.litesemrag.n_chunks and grown.config.litesemrag == STAGE
    # as a full build: the same strings, lengths and string × chunk counts
    full = staged.litesemrag
    assert stage.strings == full.strings
    np.testing.assert_array_equal(stage.chunk_len, full.chunk_len)

    def by_string(g):
        owner = scipy.sparse.csr_matrix((np.ones(g.n_prototypes), (g.proto_string, np.arange(g.n_prototypes))),
                                        shape=(len(g.strings), g.n_prototypes))
        return (owner @ g.tf).toarray()

    np.testing.assert_array_equal(by_string(stage), by_string(full))
    # a string only in the new passages is found, in the new chunks
    new = set(stage.strings) - set(base.litesemrag.strings)
    assert new
    for s in new:
        p = stage.string_ids[s]
        chunks = stage.tf[stage.proto_ptr[p]:stage.proto_ptr[p + 1]].tocoo().col
        assert chunks.size and (chunks >= base.n_chunks).all()
    title = passages[25].title
    result = LitesemragRetriever(grown, RetrievalConfig(method="litesemrag"), backend="numpy",
                                 encoder=token_encoder).retrieve([f"Tell me about {title}"], k=5)[0]
    assert 25 in result.passage_ids


# --- command line -------------------------------------------------------------------------------

def test_cli_extend_and_query(base_index, staged, retriever, tmp_path, capsys):
    from gpu_tigrag.cli import main
    from gpu_tigrag.index.store import load_index, save_index

    path = save_index(base_index, tmp_path / "idx")
    question = QUERIES[0]
    assert main(["query", str(path), question, "--method", "litesemrag"]) == 2
    err = capsys.readouterr().err
    assert "tigrag extend INDEX --methods litesemrag" in err and "Traceback" not in err
    assert main(["extend", str(path), "--methods", "litesemrag", "--set", "litesemrag.layer=0", "-q"]) == 2
    err = capsys.readouterr().err
    assert "litesemrag.layer must be a hidden-states layer other than 0" in err and "Traceback" not in err
    assert load_index(path).litesemrag is None  # nothing written
    assert main(["extend", str(path), "--methods", "litesemrag", "--set", "litesemrag.min_occurrences=3",
                 "--set", "litesemrag.concentration=0.99", "--set", "litesemrag.min_samples_offset=0", "-q"]) == 0
    out = capsys.readouterr().out
    assert "LiteSemRAG semantic graph:" in out and "added litesemrag" in out
    extended = load_index(path)
    assert extended.config.litesemrag == STAGE and extended.litesemrag.strings == staged.litesemrag.strings
    assert main(["query", str(path), question, "--method", "litesemrag", "--backend", "numpy", "-k", "5",
                 "--json"]) == 0
    got = json.loads(capsys.readouterr().out)[0]
    assert got["chunk_ids"] == retriever.retrieve([question], k=5)[0].chunk_ids and got["chunk_ids"]
    assert main(["query", str(path), question, "--method", "litesemrag", "--backend", "numpy", "-k", "3",
                 "--set", "litesemrag.level_weights=1,1,1,1"]) == 0
    out = capsys.readouterr().out
    assert "1. [" in out and "(chunk " in out
    assert main(["query", str(path), question, "--method", "litesemrag", "--set",
                 "litesemrag.recovery_share=2"]) == 2
    assert "recovery_share must be in [0, 1]" in capsys.readouterr().err


# --- CPU/GPU parity without spaCy or the token encoder (the GPU machine has neither) -------------

class _NoTokenEncoder:
    """Stands for the token encoder where the spans come prepared: only its dimension is read."""

    name, fingerprint = "synthetic", "sha256:synthetic"

    def __init__(self, dim: int):
        self.dim = dim

    def span_vectors(self, texts, spans, show_progress=False):  # pragma: no cover - never called here
        raise AssertionError("the prepared batch already holds the span vectors")


def _synthetic_stage(seed: int = 3):
    """An Index of 60 chunks with a synthetic LiteSemRAG stage (words, phrases, several senses) and a
    prepared batch of 12 queries mixing exact, partial, similarity and repeated-string matches."""
    from gpu_tigrag.index.entities import ChunkEntities
    from gpu_tigrag.index.index import Index
    from gpu_tigrag.text.tokens import Vocabulary

    rng = np.random.default_rng(seed)
    n_chunks, dim = 60, 16
    words = [f"w{i}" for i in range(14)]
    strings = sorted(set(words + [f"{a} {b}" for a, b in rng.choice(words, size=(12, 2)) if a != b]))
    senses = rng.integers(1, 3, size=len(strings))
    ptr = np.concatenate([[0], np.cumsum(senses)]).astype(np.int64)
    protos = unit_rows(rng.standard_normal((int(ptr[-1]), dim)).astype(np.float32))
    rows, cols = [], []
    for p in range(protos.shape[0]):
        chunks = rng.choice(n_chunks, size=int(rng.integers(1, 8)), replace=False)
        rows += [p] * len(chunks) * 2
        cols += list(chunks) * 2  # tf 2 where a chunk is drawn twice below
    tf = scipy.sparse.csr_matrix((np.ones(len(rows), np.float32), (rows, cols)), shape=(protos.shape[0], n_chunks))
    tf.sum_duplicates()
    graph = SemanticGraph(strings=strings, proto_ptr=ptr, proto_vectors=protos, tf=tf,
                          chunk_len=rng.integers(20, 90, size=n_chunks).astype(np.int32),
                          stats={"token_encoder_fingerprint": "sha256:synthetic"})
    empty = np.zeros(0, dtype=np.int32)
    index = Index(config=IndexConfig(), passage_titles=[f"p{i}" for i in range(n_chunks)],
                  passage_ids=[str(i) for i in range(n_chunks)], chunk_texts=[f"chunk {i}" for i in range(n_chunks)],
                  chunk_passage=np.arange(n_chunks, dtype=np.int32), vocab=Vocabulary([]),
                  token_indptr=np.zeros(n_chunks + 1, np.int64), token_ids=empty,
                  graph=scipy.sparse.csr_matrix((0, 0), dtype=np.float32),
                  bm25=scipy.sparse.csr_matrix((n_chunks, 0), dtype=np.float32),
                  embeddings=np.zeros((n_chunks, 4), np.float32),
                  entities=ChunkEntities([], np.zeros(n_chunks + 1, np.int64), empty, empty, np.zeros(1, np.int64),
                                         empty),
                  encoder_name="synthetic", encoder_fingerprint="sha256:synthetic", stages={"litesemrag": graph})
    queries, spans = [], []
    pool = strings + ["unknown thing", "zz", "w3 w99"]
    for q in range(12):
        picked = list(rng.choice(pool, size=int(rng.integers(1, 6))))
        if q % 4 == 0:
            picked.append(picked[0])  # a repeated string
        kinds = [ENTITY if " " in s and rng.random() < .5 else (PHRASE if " " in s else TOKEN) for s in picked]
        order = sorted(range(len(picked)), key=lambda i: (ENTITY, PHRASE, TOKEN).index(kinds[i]))
        spans.append([Span(picked[i], kinds[i], 0, 1, len(picked[i].split())) for i in order])
        queries.append(" ".join(picked))
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in spans])]).astype(np.int64)
    vectors = unit_rows(rng.standard_normal((int(offsets[-1]), dim)).astype(np.float32))
    keep = rng.random(int(offsets[-1])) > 0.1
    return index, SpanBatch(queries, spans, vectors, keep, offsets), _NoTokenEncoder(dim)


def test_synthetic_stage_cupy_equals_numpy(backend):
    """The device path (pair cosines, similarity GEMM, SpGEMM co-occurrence, sparse scores, top-k)
    against NumPy on a synthetic stage; runs on the GPU machine, which has no spaCy."""
    index, batch, encoder = _synthetic_stage()
    cfg = RetrievalConfig(method="litesemrag")
    cpu = LitesemragRetriever(index, cfg, backend="numpy", encoder=encoder)
    other = LitesemragRetriever(index, cfg, backend=backend, encoder=encoder)
    expected, got = cpu.run_prepared(batch, 15), other.run_prepared(batch, 15)
    assert sum(r.hops[0].pool_size > 0 for r in expected) >= 3  # connected nodes occur: the test means something
    assert any(len(r.chunk_ids) for r in expected)
    for a, b in zip(expected, got):
        assert a.chunk_ids == b.chunk_ids
        np.testing.assert_allclose(a.scores, b.scores, rtol=1e-5, atol=1e-5)
        assert (a.hops[0].seeds, a.hops[0].pool_size) == (b.hops[0].seeds, b.hops[0].pool_size)


def test_streaming_build_with_the_stage(tmp_path, staged):
    """`--stream` builds the stage over the assembled index: the same strings, prototypes and postings
    as the stage added to an in-memory build (the spaCy model of the stage, not entities.model)."""
    from gpu_tigrag.index.store import load_index
    from gpu_tigrag.index.stream import build_index_streaming

    config = dataclasses.replace(CONFIG.with_section("litesemrag", STAGE), entities=EntityConfig(model="capitalized"))
    streamed = build_index_streaming([EXAMPLES / "corpus.json"], tmp_path / "idx", config, partition_size=7,
                                     workers=1, encoder=load_encoder(CONFIG.encoder), entity_extractor=string_entities,
                                     methods=("tigrag", "litesemrag"))
    assert streamed.chunk_texts == staged.chunk_texts
    got, want = streamed.litesemrag, staged.litesemrag
    assert got.strings == want.strings
    np.testing.assert_array_equal(got.proto_ptr, want.proto_ptr)
    np.testing.assert_allclose(got.proto_vectors, want.proto_vectors, atol=1e-5)
    assert (got.tf != want.tf).nnz == 0
    assert load_index(tmp_path / "idx").litesemrag.strings == want.strings


# --- the `paper` figures on MuSiQue-100 (data, slow) ------------------------------------------------

#: LiteSemRAG with its defaults on MuSiQue-100, one chunk per passage (the unit of its public code),
#: all-MiniLM-L6-v2 token states at layer -1, in percent to 2 decimals: the engine's side of
#: bench/results/faithfulness_litesemrag.md (the public code there: see that page)
PAPER_PINNED = {"recall@2": 38.33, "recall@5": 50.0, "recall@10": 58.0, "mrr@10": 75.2}


@pytest.mark.data
@pytest.mark.slow
def test_paper_figures_on_musique_are_pinned():
    """Builds MuSiQue-100 with one chunk per passage and the LiteSemRAG stage (~4 min on 2 cores; the
    passage encoder and NER, which LiteSemRAG does not read, are stand-ins) and runs the "LiteSemRAG"
    system through the evaluation runner `tigrag eval` uses."""
    from helpers import SHARED_DATA, require_data
    from gpu_tigrag.config import ChunkConfig
    from gpu_tigrag.evaluate.experiment import Experiment, query_dataset
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.index.build import build_index

    folder = require_data(SHARED_DATA / "musique_train100")
    pytest.importorskip("spacy")
    pytest.importorskip(EntityConfig().model)
    config = dataclasses.replace(CONFIG, chunk=ChunkConfig(sentences_per_chunk=1000, overlap=0))
    index = build_index(load_corpus(folder / "musique_train_corpus.json"), config, encoder=load_encoder(CONFIG.encoder),
                        entity_extractor=lambda texts: [[] for _ in texts], methods=("tigrag", "litesemrag"))
    assert index.n_chunks == 1890 and index.config.litesemrag == LitesemragIndexConfig()
    experiment = Experiment(index, query_dataset("musique", load_queries(folder / "musique_train.json")), "numpy")
    metrics = experiment.report(experiment.run_system("LiteSemRAG"))["metrics"]
    assert {key: round(100 * metrics[key], 2) for key in PAPER_PINNED} == PAPER_PINNED


def test_similarity_matching_is_the_exact_argmax_whatever_the_other_spans(retriever):
    """A span with no exact or partial candidate takes the prototype of highest cosine among all (equal cosines: the
    lower id): the same prototype alone and beside any other spans, and the float64 argmax where it is clear."""
    protos = np.asarray(retriever.protos, dtype=np.float32)
    rng = np.random.default_rng(5)
    vectors = rng.standard_normal((300, protos.shape[1])).astype(np.float32)
    vectors[7] = protos[3]  # its own prototype
    vectors[8] = protos[3] + protos[5]  # a tie when the two prototypes are as close: the lower id
    rows = np.arange(300, dtype=np.int64)
    together = retriever._global_best(vectors, rows)
    for row in (0, 7, 8, 299):
        assert retriever._global_best(vectors, np.array([row]))[0] == together[row]
        assert retriever._global_best(vectors, np.array([row, *range(0, 40)]))[0] == together[row]
    exact = vectors.astype(np.float64) @ protos.T.astype(np.float64)
    clear = np.sort(exact, axis=1)[:, -1] - np.sort(exact, axis=1)[:, -2] > 1e-4
    assert clear.sum() > 250 and (together[clear] == exact.argmax(axis=1)[clear]).all()
    assert together[7] == int(np.argmax(protos @ protos[3]))
    assert retriever._global_best(vectors, rows[:0]).shape == (0,)


def test_unit_rows_in_place_has_the_bits_of_unit_rows():
    from gpu_tigrag.ops.rows import unit_rows_in_place

    x = np.random.default_rng(3).standard_normal((1003, 24)).astype(np.float32) * 7
    x[4] = 0  # a zero row stays zero
    expected = unit_rows(x, compute_dtype=None)
    got = x.copy()
    assert unit_rows_in_place(got, block_rows=100) is got  # blocks that do not divide the rows
    np.testing.assert_array_equal(got, expected)
    with pytest.raises(ValueError, match="float32"):
        unit_rows_in_place(x.astype(np.float64))


def test_build_prototypes_in_place_normalises_the_given_rows_to_the_same_stage():
    string_ids, vectors, chunks, _ = synthetic_occurrences()
    single = np.array([True, True, True, False])
    cfg = LitesemragIndexConfig(min_occurrences=100)
    given = np.ascontiguousarray(vectors, dtype=np.float32) * 3  # not unit: the build normalises them
    kept = given.copy()
    copied = build_prototypes(string_ids, given, chunks, 4, single, cfg)
    np.testing.assert_array_equal(given, kept)  # without in_place the caller's rows are left as they were
    owned = build_prototypes(string_ids, given, chunks, 4, single, cfg, in_place=True)
    np.testing.assert_array_equal(owned.vectors, copied.vectors)
    np.testing.assert_array_equal(owned.assignment, copied.assignment)
    np.testing.assert_array_equal(given, unit_rows(kept, compute_dtype=None))  # normalised where they lay


def test_summed_in_order_adds_each_pairs_values_one_after_another():
    """The repeated-string correction: a (query, chunk) pair's values added in their order, each add in float64
    stored as float32 (what a float32 block's `+=` gives), whatever the number of pairs and repeats."""
    from gpu_tigrag.methods.litesemrag.retriever import _summed_in_order

    rng = np.random.default_rng(0)
    shape = (7, 30)
    for n in (0, 1, 50, 5000):
        queries, chunks = rng.integers(0, shape[0], n), rng.integers(0, shape[1], n)
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-3, 4, n)  # rounding differs by order here
        want: dict[tuple[int, int], np.float32] = {}
        for q, c, v in zip(queries.tolist(), chunks.tolist(), values.tolist()):
            want[q, c] = np.float32(np.float64(want.get((q, c), np.float32(0))) + v)
        got = _summed_in_order(queries, chunks, values, shape).tocoo()
        assert {(int(q), int(c)): v for q, c, v in zip(got.row, got.col, got.data)} == want
        assert got.dtype == np.float32
