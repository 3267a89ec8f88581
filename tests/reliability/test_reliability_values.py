"""No silent degenerate results (issue 11, part 2): every bad value is one clear line and exit code 2,
checked before any output is opened; suspicious data is a warning with its count."""

import errno
import json
import logging

import pytest

from gpu_tigrag.cli import main
from gpu_tigrag.config import (
    BM25Config, EncoderConfig, EntityConfig, IndexConfig, PPRConfig, RetrievalConfig, TokenConfig,
)
from gpu_tigrag.corpus import Passage, drop_duplicate_passages, duplicate_passages, load_corpus
from gpu_tigrag.errors import CorpusError, TigragError
from gpu_tigrag.evaluate.datasets import check_gold, load_beir
from gpu_tigrag.evaluate.queries import Query
from gpu_tigrag.index.build import build_index
from gpu_tigrag.index.store import read_manifest

pytestmark = [pytest.mark.reliability]

PASSAGES = [
    {"title": "Glass Orchard", "text": "The Glass Orchard is a drama film directed by Mirela Vantz."},
    {"title": "Mirela Vantz", "text": "Mirela Vantz is a film director born in the harbour town Korvath."},
    {"title": "Korvath", "text": "Korvath is a harbour town with a lighthouse and a fishing fleet."},
]
FAST = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized", "-q"]
FAST_CONFIG = IndexConfig(encoder=EncoderConfig(model="hashing:64"), entities=EntityConfig(model="capitalized"))
GOLD = [{"question": "Where was the director of Glass Orchard born?", "gold_titles": ["Glass Orchard", "Mirela Vantz"]},
        {"question": "What is in Korvath?", "gold_titles": ["Korvath"]}]


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("values")
    (folder / "corpus.json").write_text(json.dumps(PASSAGES))
    (folder / "gold.json").write_text(json.dumps(GOLD))
    assert main(["index", str(folder / "corpus.json"), "-o", str(folder / "idx"), *FAST]) == 0
    return folder


def one_line_error(capsys) -> str:
    err = [line for line in capsys.readouterr().err.strip().splitlines() if not line.startswith("loaded ")]
    assert len(err) == 1 and err[0].startswith("tigrag: error: "), err
    return err[0]


# --- ranges of the configuration ---------------------------------------------------------------

@pytest.mark.parametrize("make, message", [
    (lambda: BM25Config(k1=-1), "bm25.k1 must be in \\[0, 1000\\], got -1"),
    (lambda: BM25Config(k1=float("nan")), "bm25.k1 must be in \\[0, 1000\\], got nan"),
    (lambda: BM25Config(b=1.5), "bm25.b must be in \\[0, 1\\]"),
    (lambda: BM25Config(b=-0.1), "bm25.b must be in \\[0, 1\\]"),
    (lambda: PPRConfig(max_iter=0), "tigrag.ppr.max_iter must be in \\[1, 100000\\], got 0"),
    (lambda: PPRConfig(tol=0.0), "tigrag.ppr.tol must be in \\(0, 1\\], got 0.0"),
    (lambda: PPRConfig(damping=1.0), "damping must be in \\(0, 1\\)"),
    (lambda: TokenConfig(min_length=0), "tokens.min_length must be in \\[1, 20\\]"),
    (lambda: TokenConfig(min_length=100), "tokens.min_length must be in \\[1, 20\\]"),
    (lambda: TokenConfig(min_number_digits=0), "tokens.min_number_digits must be in \\[1, 1000\\]"),
    (lambda: EncoderConfig(batch_size=0), "encoder.batch_size must be in \\[1, 1048576\\]"),
    (lambda: EntityConfig(batch_size=0), "entities.batch_size must be in \\[1, 1048576\\]"),
    (lambda: RetrievalConfig(batch_size=0), "batch_size must be in \\[1, 1048576\\]"),
    (lambda: RetrievalConfig.of("tigrag", hops=0), "tigrag.hops must be in \\[1, 100\\]"),
    (lambda: RetrievalConfig(memory_budget_mb=-1), "memory_budget_mb must be in \\[0, 1073741824\\]"),
])
def test_out_of_range_settings_are_rejected(make, message):
    with pytest.raises(TigragError, match=message):
        make()


def test_bounds_themselves_are_accepted():
    assert BM25Config(k1=0.0, b=0.0) and BM25Config(b=1.0) and TokenConfig(min_length=20)
    assert PPRConfig(max_iter=1) and RetrievalConfig(memory_budget_mb=0)


@pytest.mark.parametrize("setting, message", [("bm25.k1=-1", "bm25.k1 must be in [0, 1000], got -1.0"),
                                              ("tokens.min_length=100", "tokens.min_length must be in [1, 20]"),
                                              ("encoder.batch_size=0", "encoder.batch_size must be in [1, 1048576], got 0")])
def test_cli_index_rejects_out_of_range_settings(files, tmp_path, capsys, setting, message):
    assert main(["index", str(files / "corpus.json"), "-o", str(tmp_path / "i"), "--set", setting]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "i").exists()


def test_cli_query_rejects_out_of_range_settings(files, capsys):
    assert main(["query", str(files / "idx"), "film", "--set", "ppr.max_iter=0"]) == 2
    assert "tigrag.ppr.max_iter must be in [1, 100000], got 0" in one_line_error(capsys)


# --- command-line values ---------------------------------------------------------------------

@pytest.mark.parametrize("k", ["0", "-1"])
def test_run_k_below_one_is_an_error_and_creates_no_output(files, tmp_path, capsys, k):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"question": "film"}\n')
    out = tmp_path / "out.jsonl"
    assert main(["run", str(files / "idx"), str(queries), "-o", str(out), "-k", k]) == 2
    assert f"-k must be >= 1, got {k}" in one_line_error(capsys)
    assert not out.exists()


def test_query_k_below_one_is_an_error(files, capsys):
    assert main(["query", str(files / "idx"), "film", "-k", "0"]) == 2
    assert "-k must be >= 1, got 0" in one_line_error(capsys)


def test_negative_limit_is_an_error(files, capsys):
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--limit", "-3"]) == 2
    assert "--limit must be >= 0, got -3" in one_line_error(capsys)


def test_limit_limits(files, capsys):
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--limit", "1", "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 1


# --- empty queries: errors naming the record -----------------------------------------------------

def test_empty_query_in_run_is_an_error_before_any_output(files, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"id": "a", "question": "film"}\n{"id": "b", "question": "   "}\n')
    out = tmp_path / "out.jsonl"
    assert main(["run", str(files / "idx"), str(queries), "-o", str(out)]) == 2
    assert "the query at index 1 (id 'b') is empty" in one_line_error(capsys)
    assert not out.exists()


def test_empty_question_in_query_is_an_error(files, capsys):
    assert main(["query", str(files / "idx"), "film", " "]) == 2
    assert "question 2 is empty" in one_line_error(capsys)


def test_empty_query_in_eval_files_is_an_error(files, tmp_path, capsys):
    queries = tmp_path / "q.json"
    queries.write_text(json.dumps([GOLD[0], {"question": "", "gold_titles": ["Korvath"]}]))
    assert main(["eval", str(files / "idx"), str(queries)]) == 2
    assert "record 1: missing field 'question' (a non-empty string)" in one_line_error(capsys)


def test_empty_beir_query_is_an_error(tmp_path):
    (tmp_path / "qrels").mkdir()
    (tmp_path / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x y z"}\n')
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "fine"}\n{"_id": "q2", "text": " "}\n')
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t1\nq2\td1\t1\n")
    with pytest.raises(CorpusError, match="queries.jsonl: line 2: query 'q2' is empty"):
        load_beir(tmp_path)


# --- query files that cannot be read --------------------------------------------------------

@pytest.mark.parametrize("name, content, message", [
    ("q.parquet", b"this is not parquet\n", "not a readable query file (ArrowInvalid"),
    ("q.txt", b"film\n", "q.txt: line 1: malformed JSON"),  # any other name is read as JSONL (or a JSON list)
    ("q.json", b'{"question": "film"}', "expected a JSON list of queries"),
    ("q.jsonl", b"\xff\xfe\n", "line 1: not UTF-8"),
])
def test_unreadable_query_file_for_run_is_one_line(files, tmp_path, capsys, name, content, message):
    queries = tmp_path / name
    queries.write_bytes(content)
    out = tmp_path / "out.jsonl"
    assert main(["run", str(files / "idx"), str(queries), "-o", str(out)]) == 2
    assert message in one_line_error(capsys)
    assert not out.exists()


# --- gold that the index does not hold ---------------------------------------------------------

def test_check_gold_counts_missing_and_refuses_when_none_is_there(caplog):
    queries = [Query("1", "a", ("A", "B")), Query("2", "b", ("C",))]
    with caplog.at_level(logging.WARNING):
        assert check_gold(["A", "C", "Z"], queries) == 1
    assert "1 of 3 gold passages (of 1 of the 2 queries) are not in the index" in caplog.text
    with pytest.raises(CorpusError, match="none of the 3 gold passages of the queries is in the index"):
        check_gold(["Z"], queries)
    assert check_gold(["Z"], [Query("1", "a", ())]) == 0  # no gold at all: nothing to check


@pytest.mark.parametrize("full_run", [False, True])
def test_eval_warns_on_missing_gold_and_fails_on_foreign_gold(files, tmp_path, capsys, caplog, full_run):
    extra = ["--systems", "TIGRAG"] if full_run else []
    partly = tmp_path / "partly.json"
    partly.write_text(json.dumps([{"question": "Korvath lighthouse", "gold_titles": ["Korvath", "Atlantis"]}]))
    with caplog.at_level(logging.WARNING):
        assert main(["eval", str(files / "idx"), str(partly), "-q", *extra]) == 0
    assert "1 of 2 gold passages (of 1 of the 1 queries) are not in the index" in caplog.text
    foreign = tmp_path / "foreign.json"
    foreign.write_text(json.dumps([{"question": "Korvath lighthouse", "gold_titles": ["Atlantis"]}]))
    capsys.readouterr()
    assert main(["eval", str(files / "idx"), str(foreign), "-q", *extra]) == 2
    assert "none of the 1 gold passages of the queries is in the index" in one_line_error(capsys)


# --- duplicate passages and null titles ----------------------------------------------------------

def test_duplicates_are_counted_and_can_be_dropped(caplog):
    passages = [Passage("A", "x y", "A"), Passage("B", "x y", "B"), Passage("A", "x y", "A"), Passage("A", "x y", "A")]
    assert duplicate_passages(passages) == 2
    assert drop_duplicate_passages(passages) == passages[:2]
    with caplog.at_level(logging.WARNING):
        build_index([Passage(p["title"], p["text"], p["title"]) for p in PASSAGES * 2], FAST_CONFIG)
    assert "3 of 6 passages repeat an earlier passage's title and text" in caplog.text


def test_cli_index_warns_on_duplicates_or_drops_them(files, tmp_path, capsys, caplog):
    twice = [str(files / "corpus.json")] * 2
    with caplog.at_level(logging.WARNING):
        assert main(["index", *twice, "-o", str(tmp_path / "a"), *FAST]) == 0
    assert "3 of 6 passages repeat" in caplog.text
    assert main(["index", *twice, "-o", str(tmp_path / "b"), "--drop-duplicates", *FAST]) == 0
    assert "dropped 3 duplicate passage(s)" in capsys.readouterr().err
    chunks = [read_manifest(tmp_path / n)["counts"]["chunks"] for n in "ab"]
    assert chunks == [6, 3]
    with caplog.at_level(logging.INFO):
        assert main(["index", *twice, "-o", str(tmp_path / "c"), "--stream", "--workers", "1", *FAST]) == 0
        assert main(["index", *twice, "-o", str(tmp_path / "d"), "--stream", "--workers", "1", "--drop-duplicates",
                     *FAST]) == 0
    assert "3 of 6 passages repeat" in caplog.text and "dropped 3 duplicate passage(s)" in caplog.text
    chunks = [read_manifest(tmp_path / n)["counts"]["chunks"] for n in "cd"]
    assert chunks == [6, 3]


def test_cli_add_warns_when_passages_are_already_in_the_index(files, tmp_path, capsys, caplog):
    import shutil

    shutil.copytree(files / "idx", tmp_path / "idx")
    with caplog.at_level(logging.WARNING):
        assert main(["add", str(tmp_path / "idx"), str(files / "corpus.json"), "-q"]) == 0
    assert "3 of 3 added passages have the title and id of a passage already in the index" in caplog.text
    capsys.readouterr()
    assert main(["add", str(tmp_path / "idx"), str(files / "corpus.json"), "-q", "--drop-duplicates"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "dropped 3 duplicate passage(s)",
        f"tigrag: error: every passage of {files / 'corpus.json'} is already in {tmp_path / 'idx'}"]


@pytest.mark.parametrize("name, write", [
    ("c.json", lambda p: p.write_text(json.dumps([PASSAGES[0], {"title": None, "text": "abc def"}]))),
    ("c.jsonl", lambda p: p.write_text(json.dumps(PASSAGES[0]) + "\n" + '{"title": null, "text": "abc"}\n')),
])
def test_null_title_is_a_corpus_error_naming_file_and_record(tmp_path, capsys, name, write):
    path = tmp_path / name
    write(path)
    where = "record 1" if name.endswith(".json") else "line 2"
    with pytest.raises(CorpusError, match=f"{name}: {where}: field 'title' is null"):
        load_corpus(path)
    assert main(["index", str(path), "-o", str(tmp_path / "i")]) == 2
    assert f"{where}: field 'title' is null" in one_line_error(capsys)


def test_null_title_in_parquet_is_a_corpus_error(tmp_path):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    path = tmp_path / "c.parquet"
    pq.write_table(pa.table({"title": ["A", None], "text": ["x y", "z w"]}), path)
    with pytest.raises(CorpusError, match="c.parquet: row 1: field 'title' is null"):
        load_corpus(path)


def test_missing_title_field_with_an_id_still_loads(tmp_path):
    path = tmp_path / "c.jsonl"
    path.write_text('{"_id": "d1", "text": "abc def"}\n')
    assert load_corpus(path) == [Passage("", "abc def", "d1")]


# --- outputs that cannot be written ------------------------------------------------------------

def test_unwritable_eval_out_is_checked_before_the_run(files, tmp_path, capsys, monkeypatch):
    import gpu_tigrag.evaluate.experiment as experiment

    monkeypatch.setattr(experiment, "run_experiment", lambda *a, **k: pytest.fail("the run started"))
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--out", str(blocker / "run"), "-q"]) == 2
    assert f"--out {blocker / 'run'}: cannot write in {blocker / 'run'} (" in one_line_error(capsys)


def test_failed_eval_out_write_keeps_the_results(files, tmp_path, capsys, monkeypatch):
    import tempfile

    import gpu_tigrag.evaluate.report as report

    def full_disk(folder, payload, overwrite=False):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(report, "write_run", full_disk)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--systems", "TIGRAG",
                 "--out", str(tmp_path / "run"), "-q"]) == 2
    line = one_line_error(capsys)
    assert "cannot write the run (No space left on device); its results are saved in" in line
    saved = line.rsplit(" saved in ", 1)[1]
    assert json.loads(open(saved).read())["results"]["systems"]["TIGRAG"]["metrics"]["recall@2"] >= 0


def test_unwritable_index_output_fails_before_loading_the_corpus(tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["index", str(tmp_path / "missing.json"), "-o", str(blocker / "idx")]) == 2
    assert f"-o {blocker / 'idx'}: cannot write in {blocker} (" in one_line_error(capsys)


def test_unwritable_report_out_is_one_line(files, tmp_path, capsys):
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--systems", "TIGRAG",
                 "--out", str(tmp_path / "run"), "-q"]) == 0
    capsys.readouterr()
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "run" / "results.json" / "x.md")]) == 2
    assert "cannot write the table" in one_line_error(capsys)


def test_unwritable_run_output_fails_before_the_run(files, tmp_path, capsys):
    queries = tmp_path / "q.jsonl"
    queries.write_text('{"question": "film"}\n')
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    assert main(["run", str(files / "idx"), str(queries), "-o", str(blocker / "out.jsonl")]) == 2
    assert f"-o {blocker / 'out.jsonl'}: cannot write in {blocker} (" in one_line_error(capsys)


def test_eval_out_failing_inside_the_atomic_writer_still_keeps_the_results(files, tmp_path, capsys, monkeypatch):
    import tempfile

    import gpu_tigrag.atomic as atomic

    def full_disk(src, dst):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(atomic.os, "replace", full_disk)  # results.json cannot land
    assert main(["eval", str(files / "idx"), str(files / "gold.json"), "--systems", "TIGRAG",
                 "--out", str(tmp_path / "run"), "-q"]) == 2
    line = one_line_error(capsys)
    assert "no space left on device" in line and " saved in " in line
    saved = line.rsplit(" saved in ", 1)[1]
    assert json.loads(open(saved).read())["results"]["systems"]["TIGRAG"]["metrics"]["recall@2"] >= 0
