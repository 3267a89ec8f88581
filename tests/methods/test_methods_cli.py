"""Choosing the retrieval method (`--method`, eval systems, `run` and Dask runs) on the example corpus."""

import json

import pytest

from helpers import EXAMPLES, logged_messages
from gpu_tigrag.cli import main
from gpu_tigrag.index.build import add_method
from gpu_tigrag.index.store import save_index

QUESTION = "Where was the director of the film The Glass Orchard born?"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, example_index):
    """The shared example index with SpectRAG's stage added (saved here), and the shared one itself (TIGRAG only)."""
    with_stage = tmp_path_factory.mktemp("methods") / "with"
    save_index(add_method(example_index.index, "spectrag"), with_stage)
    return with_stage, example_index.path


@pytest.fixture(scope="module")
def query_file(tmp_path_factory):
    """The example questions as JSONL, the streaming format of `tigrag run`."""
    questions = json.loads((EXAMPLES / "questions.json").read_text())
    path = tmp_path_factory.mktemp("queries") / "questions.jsonl"
    path.write_text("".join(json.dumps({"id": str(i), "question": q["question"]}) + "\n"
                            for i, q in enumerate(questions)))
    return path


def test_query_with_spectrag_returns_its_adaptive_context(indexes, capsys):
    with_stage, _ = indexes
    assert main(["query", str(with_stage), QUESTION, "--method", "spectrag", "-k", "40", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)[0]
    assert 1 <= result["context"] <= len(result["chunk_ids"])
    assert result["scores"][:result["context"]]  # the context leads the ranking
    assert main(["query", str(with_stage), QUESTION, "--method", "spectrag", "-k", "40"]) == 0
    out = capsys.readouterr().out
    assert f"the context ends here ({result['context']} chunks)" in out or result["context"] == len(result["chunk_ids"])


def test_quick_eval_runs_the_chosen_method(indexes, capsys):
    with_stage, _ = indexes
    assert main(["eval", str(with_stage), str(EXAMPLES / "questions.json"), "--method", "spectrag", "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["retrieval_config"]["method"] == "spectrag"
    assert 0 <= report["metrics"]["context_recall"] <= 1 and report["metrics"]["context_chunks"] >= 1


def test_spectrag_on_an_index_without_its_stage_is_a_one_line_error(indexes, query_file, capsys):
    _, without = indexes
    assert main(["query", str(without), QUESTION, "--method", "spectrag"]) == 2
    err = capsys.readouterr().err
    assert "no SpectRAG stage" in err and "tigrag extend" in err and "Traceback" not in err
    assert main(["eval", str(without), str(EXAMPLES / "questions.json"), "--systems", "SpectRAG", "-q"]) == 2
    assert "tigrag extend" in capsys.readouterr().err
    assert main(["run", str(without), str(query_file), "-o", str(query_file.parent / "o.jsonl"),
                 "--method", "spectrag", "--workers", "1", "-q"]) == 2
    assert "no spectrag stage" in capsys.readouterr().err


def test_eval_all_systems_skips_spectrag_with_a_warning_where_the_stage_is_missing(indexes, capsys):
    with_stage, without = indexes
    with logged_messages() as messages:
        assert main(["eval", str(without), str(EXAMPLES / "questions.json"), "--systems", "all", "--json", "-q"]) == 0
    systems = json.loads(capsys.readouterr().out)["results"]["systems"]
    assert "Hybrid" in systems and "SpectRAG" not in systems
    assert any("skipping SpectRAG" in m for m in messages)
    assert main(["eval", str(with_stage), str(EXAMPLES / "questions.json"), "--systems", "SpectRAG", "Hybrid",
                 "NaiveRAG", "--json", "-q"]) == 0
    systems = json.loads(capsys.readouterr().out)["results"]["systems"]
    assert set(systems) == {"SpectRAG", "Hybrid", "NaiveRAG"}
    assert systems["SpectRAG"]["config"]["method"] == "spectrag"
    assert main(["eval", str(with_stage), str(EXAMPLES / "questions.json"), "--systems", "Nope", "-q"]) == 2
    assert "unknown system" in capsys.readouterr().err


def test_run_writes_the_context_size_of_each_spectrag_row(indexes, query_file, tmp_path):
    with_stage, _ = indexes
    out = tmp_path / "rows.jsonl"
    assert main(["run", str(with_stage), str(query_file), "-o", str(out), "--method", "spectrag",
                 "-k", "10", "-q"]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 15 and all(1 <= row["context"] for row in rows)
    tigrag = tmp_path / "tigrag.jsonl"
    assert main(["run", str(with_stage), str(query_file), "-o", str(tigrag), "-q"]) == 0
    assert all("context" not in json.loads(line) for line in tigrag.read_text().splitlines())


def test_dask_workers_build_the_retriever_of_the_method(indexes):
    """What each Dask worker runs for a shard: the method's retriever, rows with the context size."""
    from gpu_tigrag.config import RetrievalConfig, config_to_dict
    from gpu_tigrag.dask_run import retrieve_shard

    with_stage, _ = indexes
    options = {"vector_cache": None, "vector_cache_mib": 1}
    rows = retrieve_shard(str(with_stage), config_to_dict(RetrievalConfig(method="spectrag")), "numpy", options,
                          [(0, "q1", QUESTION)], 10)
    assert rows[0]["context"] >= 1 and rows[0]["id"] == "q1"
