"""`tigrag bench INDEX QUERIES` (gpu_tigrag.benchmark): every chosen system timed at every batch size in its
own process, the stages broken out, and clear errors for a user's mistakes."""

import json

import pytest

from helpers import EXAMPLES
from gpu_tigrag.cli import main

QUESTIONS = str(EXAMPLES / "questions.json")


def test_bench_times_each_system_and_batch_size_in_its_own_process(example_index, capsys, tmp_path):
    out = tmp_path / "bench.json"
    code = main(["-q", "bench", str(example_index.path), QUESTIONS, "--systems", "NaiveRAG", "TIGRAG paper", "BM25",
                 "--batch-sizes", "1", "4", "--limit", "6", "--thread-counts", "1", "--json", "--out", str(out)])
    assert code == 0
    rows = json.loads(capsys.readouterr().out)
    assert [row["system"] for row in rows] == ["NaiveRAG", "TIGRAG paper", "BM25"]
    for row in rows:
        assert row["threads"] == 1 and row["queries"] == 6
        assert row["startup_s"] > 0 and row["index_load_s"] > 0 and row["peak_rss_mib"] > 50
        assert [b["batch"] for b in row["batches"]] == [1, 4]
        for b in row["batches"]:
            assert b["queries_per_second"] > 0 and b["seconds"] >= b["encode_s"] >= 0
            assert b["queries_per_second_without_encoder"] >= b["queries_per_second"]
            assert b["p50_ms"] <= b["p95_ms"] <= b["p99_ms"]
    naive, tigrag, bm25 = rows
    assert naive["batches"][0]["encoded_texts_per_query"] == 1.0  # the question, once
    assert tigrag["batches"][0]["encoded_texts_per_query"] > 1.0  # and the expanded texts of hop 2
    assert bm25["encoder_load_s"] == 0.0 and bm25["batches"][0]["encode_s"] == 0.0  # no encoder at all
    saved = json.loads(out.read_text())
    assert saved["count"] == 6 and [r["system"] for r in saved["results"]] == ["NaiveRAG", "TIGRAG paper", "BM25"]


def test_bench_prints_a_table_for_the_default_system(example_index, capsys):
    assert main(["-q", "bench", str(example_index.path), QUESTIONS, "--batch-sizes", "2", "--limit", "4"]) == 0
    printed = capsys.readouterr().out
    assert "tigrag best" in printed and "q/s w/o enc" in printed and "peak RSS MiB" in printed


@pytest.mark.parametrize("argv, message", [
    (["--batch-sizes", "0"], "--batch-sizes 0: each must be >= 1"),
    (["--systems", "NoSuchSystem"], "unknown system 'NoSuchSystem'"),
    (["--system", "mine=rrf(TIGRAG,NaiveRAG)"], "a fusion of runs (rrf) has no retrieval"),
])
def test_bench_refuses_bad_options_in_one_line(example_index, capsys, argv, message):
    assert main(["bench", str(example_index.path), QUESTIONS, *argv]) != 0
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_bench_refuses_a_folder_that_is_no_index_and_a_foreign_out_file(example_index, tmp_path, capsys):
    assert main(["bench", str(tmp_path), QUESTIONS]) != 0
    assert "Traceback" not in capsys.readouterr().err
    foreign = tmp_path / "mine.json"
    foreign.write_text("my notes")
    assert main(["bench", str(example_index.path), QUESTIONS, "--out", str(foreign), "--limit", "2"]) != 0
    assert "refusing to overwrite" in capsys.readouterr().err and foreign.read_text() == "my notes"
