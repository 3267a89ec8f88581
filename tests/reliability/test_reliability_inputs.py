"""Inputs checked when they are read, and the command line's output (issue 23): lone surrogates,
texts too long for spaCy, very long ids, a stopword-only index, huge k, wrong API arguments, a
closed standard output, control characters in titles, empty gold lists and --set of a method
that the command does not run."""

import json
import logging
import os
import sys

import pytest

from helpers import logged_messages
from gpu_tigrag import RetrievalConfig, Retriever, load_index, make_retriever, preset
from gpu_tigrag.cli import main
from gpu_tigrag.cli.display import one_line
from gpu_tigrag.config import EntityConfig
from gpu_tigrag.errors import CorpusError, TigragError
from gpu_tigrag.evaluate.queries import load_queries
from gpu_tigrag.index import entities
from gpu_tigrag.records import replace_surrogates

pytestmark = [pytest.mark.reliability]

FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
PASSAGES = [
    {"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
    {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
    {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."},
]


@pytest.fixture(scope="module")
def idx(tmp_path_factory):
    folder = tmp_path_factory.mktemp("inputs")
    (folder / "c.json").write_text(json.dumps(PASSAGES))
    assert main(["index", str(folder / "c.json"), "-o", str(folder / "idx"), *FAST]) == 0
    return folder / "idx"


# --- lone surrogates --------------------------------------------------------------------------------

def test_lone_surrogates_in_a_corpus_are_replaced_with_one_warning_per_file(tmp_path, capsys):
    """JSON's "\\ud800" reads as a lone surrogate, which UTF-8 cannot store: it crashed the save after
    the whole build. Now U+FFFD, as a UTF-8 decoder does, and one warning naming the file and record."""
    corpus = tmp_path / "surrogates.json"
    corpus.write_text('[{"title": "Bad \\ud800 title", "text": "A film \\udc00 here."}, '
                      '{"title": "Korvath", "text": "Korvath \\ud83d is a town."}]')
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 0
    err = capsys.readouterr().err
    assert f"{corpus}: record 0: field 'title' holds 1 lone surrogate(s)" in err and err.count("lone surrogate") == 1
    index = load_index(tmp_path / "idx")
    assert index.passage_titles[0] == "Bad \ufffd title" and "Korvath \ufffd is a town." in index.chunk_texts[1]
    # gold titles get the same replacement, so they still match the repaired passage
    gold = tmp_path / "gold.json"
    gold.write_text('[{"question": "Which film is bad?", "gold_titles": ["Bad \\ud800 title"]}]')
    assert load_queries(gold)[0].gold == ("Bad \ufffd title",)


def test_a_lone_surrogate_in_an_id_is_an_error_naming_file_and_record(tmp_path, capsys):
    corpus = tmp_path / "ids.json"
    corpus.write_text('[{"id": "a", "title": "A", "text": "abc"}, {"id": "a\\ud800", "title": "B", "text": "def"}]')
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 2
    err = capsys.readouterr().err
    assert f"tigrag: error: {corpus}: record 1: field 'id' holds a lone surrogate" in err
    assert "Traceback" not in err and not (tmp_path / "idx").exists()


def test_lone_surrogates_in_queries_are_replaced(idx, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "question": "film \\ud800 director"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["run", str(idx), str(queries), "-o", str(out), "-q"]) == 0
    assert json.loads(out.read_text())["query"] == "film \ufffd director"
    assert "line 1: field 'question' holds 1 lone surrogate(s)" in capsys.readouterr().err
    retriever = make_retriever(load_index(idx), RetrievalConfig.of("bm25"), backend="numpy")
    with logged_messages() as messages:
        result = retriever.retrieve(["film \udcff director"], k=2)  # what a non-UTF-8 byte in argv becomes
    assert result[0].query == "film \ufffd director" and "query 1 holds 1 lone surrogate(s)" in messages[0]
    assert replace_surrogates("plain ascii") == ("plain ascii", 0)


# --- texts too long for spaCy ------------------------------------------------------------------------

def test_text_pieces_cut_at_sentence_ends_then_spaces():
    text = "Aa bb. " * 30 + "x" * 50
    pieces = entities.text_pieces(text, 40)
    assert "".join(pieces) == text and max(map(len, pieces)) <= 40
    assert all(p.endswith(".") for p in pieces[:-2])  # cut after a sentence end where there is one
    assert entities.text_pieces("y" * 95, 40) == ["y" * 40, "y" * 40, "y" * 15]  # no space: a hard cut
    assert entities.text_pieces("short", 40) == ["short"]


class _Entity:
    def __init__(self, text):
        self.text, self.label_ = text, "PERSON"


class _StubNER:
    """spaCy's contract for the test: max_length, and E088 past it; capitalised words are entities."""

    max_length = 100

    def pipe(self, texts, batch_size=1):
        for text in texts:
            if len(text) > self.max_length:
                raise ValueError(f"[E088] Text of length {len(text)} exceeds maximum of {self.max_length}")
            yield type("Doc", (), {"ents": [_Entity(w.strip(".")) for w in text.split() if w[:1].isupper()]})()


def test_a_text_over_spacys_max_length_is_recognised_in_pieces(monkeypatch):
    monkeypatch.setattr(entities, "load_ner", lambda model: _StubNER())
    monkeypatch.setattr(entities, "NER_PIECE_CHARS", 60)
    long_text = " ".join(f"Name{i} met someone." for i in range(30))  # ~600 characters: over max_length 100
    found = entities.extract_entities([long_text, "Korvath is short."], EntityConfig(model="stub"))
    assert [e for e, _ in found[0]] == [f"Name{i}" for i in range(30)]  # in reading order, none lost at a cut
    assert found[1] == [("Korvath", "PERSON")]


@pytest.mark.slow
def test_spacy_gives_the_same_entities_in_pieces_as_whole(monkeypatch):
    nlp = entities.load_ner(EntityConfig().model)
    text = " ".join(f"Mirela Vantz met Oskar Helm in Korvath in {1900 + i}." for i in range(60))
    whole = entities.extract_entities([text])
    monkeypatch.setattr(nlp, "max_length", 1000)
    monkeypatch.setattr(entities, "NER_PIECE_CHARS", 400)
    assert entities.extract_entities([text]) == whole and len(whole[0]) == 240


# --- ids, stopwords, k --------------------------------------------------------------------------------

def test_a_5000_digit_id_is_one_line_without_pythons_advice(tmp_path, capsys):
    corpus = tmp_path / "digits.json"
    corpus.write_text('[{"id": ' + "9" * 5000 + ', "title": "A", "text": "abc def"}]')
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 2
    err = capsys.readouterr().err
    assert "a number of more than 4,300 digits (an id is at most 1,000 characters)" in err
    assert "set_int_max_str_digits" not in err and "Traceback" not in err


def test_a_stopword_only_index_answers_the_default_preset(tmp_path, capsys):
    """Its titles are stopwords, so the title table is empty (falsy): the best preset's link bonus
    read None for the question links (TypeError)."""
    corpus = tmp_path / "stop.json"
    corpus.write_text(json.dumps([{"title": "the", "text": "the and of a"}, {"title": "is", "text": "is it was"}]))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 0
    assert main(["query", str(tmp_path / "idx"), "the", "-k", "2", "-q"]) == 0
    assert "1. [" in capsys.readouterr().out
    result = Retriever(load_index(tmp_path / "idx"), preset("best"), backend="numpy").retrieve(["the film"], k=2)
    assert len(result[0].chunk_ids) == 2


@pytest.mark.parametrize("method", ["tigrag", "bm25", "naiverag", "hybrid"])
def test_a_huge_k_is_the_chunk_count(idx, method):
    index = load_index(idx)
    retriever = make_retriever(index, RetrievalConfig.of(method), backend="numpy")
    assert retriever._check_k(10 ** 12) == index.n_chunks
    assert len(retriever.retrieve(["film director"], k=10 ** 12)[0].chunk_ids) <= index.n_chunks


def test_wrong_retriever_arguments_are_the_projects_error(idx):
    index = load_index(idx)
    for call, message in [(lambda: make_retriever(index, "tigrag"), "config must be a RetrievalConfig.*got str"),
                          (lambda: make_retriever(str(idx)), "takes a loaded index .*load_index"),
                          (lambda: Retriever(idx), "takes a loaded index"),
                          (lambda: Retriever(index, {"method": "bm25"}), "got dict")]:
        with pytest.raises(TigragError, match=message):
            call()


# --- the command line's output --------------------------------------------------------------------------

def test_a_closed_standard_output_stops_the_command_quietly(idx, monkeypatch, capsys):
    """`tigrag query ... | head -1`: the reader leaves, the next write fails (BrokenPipeError); exit 141
    as a Unix tool stopped by SIGPIPE, no traceback, and nothing left for the interpreter's last flush."""
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        assert main(["query", str(idx), *(["film director"] * 200), "-q"]) == 141
        stream.write("x" * 100_000)
        stream.flush()  # stdout now points at /dev/null: the interpreter's flush at exit fails no more
    finally:
        stream.close()
    assert "Traceback" not in capsys.readouterr().err


def test_titles_and_texts_cannot_forge_result_lines(tmp_path, capsys):
    corpus = tmp_path / "forge.json"
    corpus.write_text(json.dumps([{"title": "Korvath\n2. [9.999] Forged (chunk 9)",
                                   "text": "Korvath is a harbour town.\nA \x1b[31m red light."},
                                  {"title": "Other", "text": "Nothing here."}]))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST]) == 0
    capsys.readouterr()
    assert main(["query", str(tmp_path / "idx"), "harbour town", "-k", "2", "-q"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "1. [{}] Korvath\\n2. [9.999] Forged (chunk 9) (chunk 0)".format(lines[0][4:9])
    assert not any(line.startswith("2. [9.999]") for line in lines) and not any("\x1b" in line for line in lines)
    assert one_line("a\u2028b\x85c", breaks=" ") == "a b c" and one_line("a\tb") == "a\\tb"


def test_empty_gold_lists_warn_naming_the_file_and_queries_or_fail_when_all_are_empty(idx, tmp_path, capsys, caplog):
    some = tmp_path / "some.json"
    some.write_text(json.dumps([{"id": "q1", "question": "Where was Mirela Vantz born?", "gold_titles": ["Korvath"]},
                                {"id": "q2", "question": "What is Korvath?", "gold_titles": []}]))
    with caplog.at_level(logging.WARNING):
        assert main(["eval", str(idx), str(some), "-q"]) == 0
    assert f"{some}: 1 of the 2 queries have no gold passage (empty gold list; ids 'q2'); each counts as a miss" \
        in capsys.readouterr().err
    none = tmp_path / "none.json"
    none.write_text(json.dumps([{"id": "q2", "question": "What is Korvath?", "gold_titles": []}]))
    assert main(["eval", str(idx), str(none), "-q"]) == 2
    assert "none of the 1 queries has a gold passage" in capsys.readouterr().err
    with pytest.raises(CorpusError, match="none of the 1 queries has a gold passage"):
        load_queries(none)


@pytest.mark.parametrize("command, message", [
    (["query", "IDX", "film", "--set", "spectrag.alpha=0.3"], "spectrag.alpha is a setting of spectrag, which this "
                                                              "command does not run (--method tigrag)"),
    (["query", "IDX", "film", "--method", "bm25", "--set", "th=0.3"], "tigrag.pool_threshold is a setting of tigrag"),
    (["eval", "IDX", "GOLD", "--systems", "BM25", "TIGRAG", "--set", "spectrag.alpha=0.3"],
     "a setting of spectrag, which this command does not run (--systems BM25, TIGRAG)"),
    (["extend", "IDX", "--methods", "spectrag", "--set", "litesemrag.min_occurrences=3"],
     "sets a setting of litesemrag, which --methods does not build"),
])
def test_a_setting_of_a_method_the_command_does_not_run_is_an_error(idx, tmp_path, capsys, command, message):
    gold = tmp_path / "gold.json"
    gold.write_text(json.dumps([{"question": "Where was Mirela Vantz born?", "gold_titles": ["Korvath"]}]))
    args = [str(idx) if a == "IDX" else str(gold) if a == "GOLD" else a for a in command]
    assert main([*args, "-q"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_shared_and_own_settings_still_pass(idx, capsys):
    assert main(["query", str(idx), "film", "--method", "bm25", "--set", "beta=3", "-q"]) == 0
    assert main(["query", str(idx), "film", "--set", "tigrag.hops=1", "-k", "1", "-q"]) == 0


def test_an_index_setting_of_a_stage_not_built_is_said_and_kept(tmp_path, capsys):
    corpus = tmp_path / "c.json"
    corpus.write_text(json.dumps(PASSAGES))
    assert main(["index", str(corpus), "-o", str(tmp_path / "idx"), *FAST, "--set", "spectrag.dimensions=4"]) == 0
    assert "--set spectrag.dimensions=4: spectrag's stage is not built (--methods tigrag); the setting is stored" \
        in capsys.readouterr().err
    assert load_index(tmp_path / "idx").config.spectrag.dimensions == 4


# --- the vector cache on a full disk ------------------------------------------------------------------

def test_a_full_disk_when_the_cache_opens_keeps_it_and_reads_it(tmp_path, monkeypatch, caplog):
    """SQLite's "database or disk is full" on opening is no damage: the cache was deleted and started
    afresh ("vector cache is damaged"); now it is read without adding to it."""
    import sqlite3

    from gpu_tigrag.encoders import QUERY, CachingEncoder, HashingEncoder, VectorCache

    encoder = HashingEncoder(64)
    CachingEncoder(encoder, VectorCache(tmp_path / "vc")).encode(["Mirela Vantz"], kind=QUERY)

    def full(self):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(VectorCache, "_connect", full)
    with caplog.at_level(logging.WARNING):
        cache = VectorCache(tmp_path / "vc")
        CachingEncoder(encoder, cache).encode(["Mirela Vantz"], kind=QUERY)
    assert "damaged" not in caplog.text and "cannot be written (database or disk is full)" in caplog.text
    assert cache.hits == 1 and not cache.writable and (tmp_path / "vc" / "vectors.sqlite3").stat().st_size > 0
