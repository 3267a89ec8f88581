import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from helpers import SHARED_DATA, require_data
from gpu_tigrag.corpus import load_corpus
from gpu_tigrag.errors import CorpusError


def write(tmp_path, name, content, mode="w"):
    path = tmp_path / name
    if mode == "wb":
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def test_json_list_dict_jsonl_and_parquet(tmp_path):
    lst = write(tmp_path, "a.json", json.dumps([{"title": "A", "text": "Alpha text."}, {"title": "A", "text": "Other A."}]))
    dct = write(tmp_path, "b.json", json.dumps({"B": [" First sentence.", " Second one."]}))
    jsl = write(tmp_path, "c.jsonl", '{"_id": "7", "title": "C", "text": "Gamma."}\n\n{"title": "D", "text": "Delta."}\n')
    pq.write_table(pa.table({"title": ["E"], "text": ["Epsilon."]}), tmp_path / "e.parquet")
    passages = load_corpus([lst, dct, jsl, tmp_path / "e.parquet"])
    assert [p.title for p in passages] == ["A", "A", "B", "C", "D", "E"]  # duplicate titles kept distinct
    assert passages[2].text == "First sentence. Second one."
    assert passages[3].doc_id == "7" and passages[4].doc_id == "D"


def test_empty_passages_skipped_with_warning(tmp_path, caplog):
    path = write(tmp_path, "a.json", json.dumps([{"title": "A", "text": "x y z"}, {"title": "B", "text": "  "}]))
    with caplog.at_level("WARNING"):
        passages = load_corpus(path)
    assert len(passages) == 1
    assert "skipped 1 empty passage" in caplog.text


@pytest.mark.parametrize("name,content,expected", [
    ("bad.json", '[{"title": "A", "text": "x"},', "malformed JSON at line 1"),
    ("missing.json", '[{"title": "A", "text": "x"}, {"title": "B"}]', "record 1: missing field 'text'"),
    ("type.json", '[{"title": "A", "text": 5}]', "record 0: field 'text' must be a string"),
    ("notobj.json", '["just a string"]', "record 0: expected an object"),
    ("bad.jsonl", '{"title": "A", "text": "x"}\n{oops}\n', "line 2: malformed JSON"),
    ("corpus.csv", "title,text\n", "unknown corpus format"),
])
def test_bad_input_names_file_and_record(tmp_path, name, content, expected):
    path = write(tmp_path, name, content)
    with pytest.raises(CorpusError) as err:
        load_corpus(path)
    assert str(path) in str(err.value) and expected in str(err.value)


def test_non_utf8_and_missing_file(tmp_path):
    path = write(tmp_path, "latin.json", '[{"title": "Caf\xe9", "text": "x"}]'.encode("latin-1"), mode="wb")
    with pytest.raises(CorpusError, match="not UTF-8"):
        load_corpus(path)
    with pytest.raises(CorpusError, match="no such file"):
        load_corpus(tmp_path / "nope.json")


@pytest.mark.parametrize("relative,count", [
    ("2wikimultihopqa/2wikimultihopqa_corpus.json", 6119),
    ("musique_train100/musique_train_corpus.json", 1890),
    ("hotpotqa_train_sample/hotpotqa_train_corpus.json", 994),
    ("beir_scifact", 5183),
])
@pytest.mark.data
def test_every_shared_format_loads(relative, count):
    path = require_data(SHARED_DATA / relative)
    passages = load_corpus(path)
    assert len(passages) <= count and len(passages) >= count - 5  # a few empty abstracts may be skipped


def test_globs_expand_and_jsonl_errors_name_the_line(tmp_path):
    for i in range(3):
        write(tmp_path, f"part{i}.jsonl", json.dumps({"title": f"T{i}", "text": f"text {i}"}) + "\n")
    assert [p.title for p in load_corpus([str(tmp_path / "part*.jsonl")])] == ["T0", "T1", "T2"]
    with pytest.raises(CorpusError, match="matches no file"):
        load_corpus([str(tmp_path / "none*.jsonl")])
    bad = write(tmp_path, "bad.jsonl", b'{"title": "A", "text": "ok"}\n{"title": "B", "text": "caf\xe9"}\n', mode="wb")
    with pytest.raises(CorpusError, match="line 2: not UTF-8"):
        load_corpus(bad)
