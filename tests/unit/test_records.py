"""One record parser: the same keys and the same precedence for ids, texts and titles in the corpus
loader, `tigrag run`'s query stream, eval query files and BEIR queries (gpu_tigrag/records.py)."""

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import SHARED_DATA, require_data
from gpu_tigrag.batch_run import stream_queries
from gpu_tigrag.corpus import Passage, load_corpus
from gpu_tigrag.errors import CorpusError
from gpu_tigrag.evaluate.datasets import load_beir
from gpu_tigrag.evaluate.queries import load_queries
from gpu_tigrag.records import (PASSAGE_ID_KEYS, PASSAGE_TEXT_KEYS, QUERY_ID_KEYS, QUERY_TEXT_KEYS, passage_fields,
                                query_id, query_text)

pytestmark = [pytest.mark.reliability]

BOTH = {"_id": "underscore", "id": "plain", "qid": "q", "question": "Who directed it?", "gold_titles": ["A"]}


def test_the_tables_share_one_id_precedence():
    assert PASSAGE_ID_KEYS[:2] == QUERY_ID_KEYS[:2] == ("_id", "id")
    assert PASSAGE_TEXT_KEYS[0] == "text" and QUERY_TEXT_KEYS[:2] == ("question", "text")


@pytest.mark.parametrize("record, expected", [
    ({"_id": "a", "id": "b", "qid": "c"}, "a"),
    ({"id": "b", "_id": "a"}, "a"),  # the table's order decides, not the record's
    ({"id": "b", "qid": "c"}, "b"),
    ({"qid": "c"}, "c"),
    ({"_id": 7}, "7"),
    ({}, "3"),
])
def test_query_id_precedence(record, expected):
    assert query_id(record, "q.jsonl: line 4", 3) == expected


def test_passage_fields_precedence():
    record = {"title": "T", "text": "plain", "contents": "other", "idx": 4, "id": "b", "_id": "a"}
    assert passage_fields(record, "c.json: record 0") == ("T", "plain", "a")
    assert passage_fields({"title": "T", "paragraph_text": "p", "idx": 4}, "w") == ("T", "p", "4")
    assert passage_fields({"title": "T", "text": ["One.", " Two."]}, "w") == ("T", "One. Two.", None)
    assert passage_fields({"_id": "d1", "text": "x"}, "w") == ("", "x", "d1")


def test_query_text_precedence():
    assert query_text({"text": "t", "question": "q", "query": "r"}, "w") == "q"
    assert query_text({"query": "r", "text": "t"}, "w") == "t"


def test_a_record_with_both_keys_has_the_same_id_in_every_reader(tmp_path):
    """`_id` wins over `id` for passages, eval queries, run queries (JSONL and Parquet) and BEIR."""
    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text(json.dumps({"_id": "d-underscore", "id": "d-plain", "title": "A", "text": "x y"}) + "\n")
    assert load_corpus(corpus) == [Passage("A", "x y", "d-underscore")]
    parquet_corpus = tmp_path / "corpus.parquet"
    pq.write_table(pa.table({"id": ["d-plain"], "_id": ["d-underscore"], "title": ["A"], "text": ["x y"]}),
                   parquet_corpus)
    assert load_corpus(parquet_corpus) == [Passage("A", "x y", "d-underscore")]

    queries = tmp_path / "queries.jsonl"
    queries.write_text(json.dumps(BOTH) + "\n")
    assert [q.qid for q in load_queries(queries)] == ["underscore"]
    assert [r.qid for r in stream_queries(queries)] == ["underscore"]
    parquet_queries = tmp_path / "queries.parquet"
    pq.write_table(pa.table({"id": ["plain"], "_id": ["underscore"], "question": ["Who?"]}), parquet_queries)
    assert [r.qid for r in stream_queries(parquet_queries)] == ["underscore"]

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x y z"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "id": "q2", "text": "which?"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    assert [q.qid for q in load_beir(beir).queries] == ["q1"]


def test_run_and_eval_read_the_same_question_and_fallback_id(tmp_path):
    records = [{"question": "first?", "text": "not this", "gold_titles": ["A"]}, "bare string",
               {"qid": "z", "query": "third?", "gold_titles": ["A"]}]
    queries = tmp_path / "q.jsonl"
    queries.write_text("".join(json.dumps(r) + "\n" for r in records))
    run = [(r.position, r.qid, r.text) for r in stream_queries(queries)]
    assert run == [(0, "0", "first?"), (1, "1", "bare string"), (2, "z", "third?")]
    evaluated = tmp_path / "e.json"
    evaluated.write_text(json.dumps([records[0], records[2]]))
    assert [(q.qid, q.text) for q in load_queries(evaluated)] == [("0", "first?"), ("z", "third?")]


@pytest.mark.parametrize("name, content, expected", [
    ("c.json", [{"title": "A", "text": "x"}, {"_id": None, "title": "B", "text": "y"}],
     "c.json: record 1: field '_id' is null"),
    ("c.json", [{"title": "A", "id": ["x"], "text": "y"}], "c.json: record 0: field 'id' must be a string or a number"),
    ("c.json", [{"text": "y"}], "c.json: record 0: missing field 'title'"),
    ("c.json", [{}], "c.json: record 0: missing field 'text'"),
])
def test_bad_passage_records_name_file_record_and_expectation(tmp_path, name, content, expected):
    path = tmp_path / name
    path.write_text(json.dumps(content))
    with pytest.raises(CorpusError, match=expected):
        load_corpus(path)


@pytest.mark.parametrize("raw, expected", [
    ('[{"_id": 1e400, "title": "A", "text": "x"}]', "record 0: field '_id' is inf, not a finite number"),
    ('[{"_id": NaN, "title": "A", "text": "x"}]', "record 0: field '_id' is nan, not a finite number"),
    ('[{"_id": true, "title": "A", "text": "x"}]', "record 0: field '_id' must be a string or a number, got bool"),
    ('[{"_id": ' + "9" * 1200 + ', "title": "A", "text": "x"}]', "of more than 1000 digits"),
    ('[{"_id": ' + "9" * 5000 + ', "title": "A", "text": "x"}]', "unreadable JSON"),
    ('[{"_id": "' + "x" * 1001 + '", "title": "A", "text": "x"}]', "1,001 characters long"),
    ("[" * 100000 + "]" * 100000, "nested too deeply"),
])
def test_ids_that_cannot_be_told_apart_or_read_are_errors(tmp_path, raw, expected):
    """JSON's 1e400 and NaN read as inf and nan (two ids would become one string), booleans are
    not ids, and numbers too long to print or nesting too deep to read are clear errors."""
    path = tmp_path / "c.json"
    path.write_text(raw)
    with pytest.raises(CorpusError, match=expected):
        load_corpus(path)


@pytest.mark.parametrize("lines, expected", [
    (['{"question": "a?", "gold_titles": []}', '{"id": null, "question": "b?", "gold_titles": []}'],
     "q.jsonl: line 2: field 'id' is null"),
    (['{"question": 5, "text": "t"}'], "q.jsonl: line 1: field 'question' must be a string"),
    (['{"title": "no question"}'], "q.jsonl: line 1: missing field 'question'"),
    (['[1, 2]'], "q.jsonl: line 1: expected an object with 'question'"),
])
def test_bad_query_records_name_file_record_and_expectation(tmp_path, lines, expected):
    path = tmp_path / "q.jsonl"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(CorpusError, match=expected):
        list(stream_queries(path))
    with pytest.raises(CorpusError, match=expected):
        load_queries(path)


def test_a_beir_query_without_id_is_an_error(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x y z"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "fine"}\n{"text": "no id"}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\n")
    with pytest.raises(CorpusError, match="queries.jsonl: line 2: missing field '_id'"):
        load_beir(tmp_path)


@pytest.mark.parametrize("relative, first_id", [
    ("2wikimultihopqa/2wikimultihopqa_dev500.json", "_id"),
    ("musique_train100/musique_train.json", "id"),
    ("hotpotqa_train_sample/hotpotqa_train_sample10.json", "_id"),
])
@pytest.mark.data
def test_bundled_query_files_keep_their_ids(relative, first_id):
    """Each bundled file uses one id key per record, so the precedence does not change any id."""
    path = require_data(SHARED_DATA / relative)
    records = json.loads(path.read_text())
    assert not any("_id" in r and "id" in r for r in records)
    assert [q.qid for q in load_queries(path)] == [str(r[first_id]) for r in records]
