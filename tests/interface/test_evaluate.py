"""Evaluation suite: dataset formats, a full run with ablations, sweeps and QA, reports."""

import json
import threading

import pytest

from helpers import EXAMPLES
from gpu_tigrag.cli import main
from gpu_tigrag.errors import CorpusError
from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import ALL_SYSTEMS, parse_sweeps, run_experiment
from gpu_tigrag.evaluate.qa import QAConfig
from gpu_tigrag.evaluate.report import compare, write_run
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.build import add_method

@pytest.fixture(scope="module")
def all_methods(example_index):
    """The shared example index with SpectRAG's and LiteSemRAG's stages added (in memory; the shared one is unchanged)."""
    return add_method(add_method(example_index.index, "spectrag"), "litesemrag")


def test_hipporag_and_beir_layouts(tmp_path):
    hip = tmp_path / "toy"
    hip.mkdir()
    (hip / "toy_corpus.json").write_text(json.dumps([{"title": "A", "text": "a"}]))
    (hip / "toy.json").write_text(json.dumps([
        {"id": "1", "question": "q?", "answer": "x", "paragraphs": [
            {"title": "A", "paragraph_text": "a", "is_supporting": True},
            {"title": "B", "paragraph_text": "b", "is_supporting": False}]},
        {"_id": "2", "question": "r?", "type": "comparison", "supporting_facts": [["A", 0], ["C", 2]]}]))
    ds = load_dataset(hip)
    assert ds.match == "title" and [q.gold for q in ds.queries] == [("A",), ("A", "C")]
    assert ds.queries[1].qtype == "comparison" and set(ds.checksums) == {"toy_corpus.json", "toy.json"}

    beir = tmp_path / "beir"
    (beir / "qrels").mkdir(parents=True)
    (beir / "corpus.jsonl").write_text('{"_id": "d1", "title": "T", "text": "x"}\n')
    (beir / "queries.jsonl").write_text('{"_id": "q1", "text": "what?"}\n{"_id": "q2", "text": "unjudged"}\n')
    (beir / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\nq1\td9\t0\n")
    ds = load_dataset(beir)
    assert ds.match == "doc_id" and len(ds.queries) == 1
    assert ds.queries[0].grades() == {"d1": 2}
    with pytest.raises(CorpusError, match="no qrels for split 'dev'"):
        load_dataset(beir, split="dev")
    with pytest.raises(CorpusError, match="expected one \\*_corpus.json"):
        load_dataset(tmp_path)


def test_sweep_flags_are_validated():
    assert parse_sweeps(["th=0.1,0.5", "gamma=20"]) == {"th": ["0.1", "0.5"], "gamma": ["20"]}
    with pytest.raises(TigragError, match="expected NAME=V1"):
        parse_sweeps(["theta=1"])


def test_full_run_writes_tables_plots_and_compares(all_methods, tmp_path):
    from helpers import ChatHandler

    import http.server

    ChatHandler.calls, ChatHandler.fail_first = 0, 0
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), ChatHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    index = all_methods
    dataset = load_dataset(EXAMPLES / "questions.json")
    qa = QAConfig(endpoint=f"http://127.0.0.1:{httpd.server_address[1]}/v1", model="toy", cache_dir=tmp_path / "qa")
    try:
        results = run_experiment(index, dataset, ALL_SYSTEMS, {"th": ["0.5", "0.8"]}, backend="numpy", qa=qa)
    finally:
        httpd.shutdown()
    systems = results["systems"]
    assert set(systems) == set(ALL_SYSTEMS)
    full, one_hop = systems["TIGRAG"]["metrics"], systems["TIGRAG 1-hop"]["metrics"]
    assert full["recall@5"] >= one_hop["recall@5"] and results["hop_gains"]["mean_gold_added_top5"] >= 0
    # degree expansion ignores the query: its graph stage ranks every query's pool the same way
    assert systems["TIGRAG degree centrality"]["metrics"]["recall@5"] < full["recall@5"]
    assert [row["value"] for row in results["sweeps"]["th"]] == ["0.5", "0.8"]
    assert results["sweeps"]["th"][1]["recall@5"] == pytest.approx(full["recall@5"])  # th=0.8 is the default
    spectrag = systems["SpectRAG"]["metrics"]
    assert 1 <= spectrag["context_chunks"] <= index.n_chunks and 0 <= spectrag["context_recall"] <= 1
    assert systems["NaiveRAG"]["metrics"]["context_chunks"] == 5  # fixed-k systems: the top β
    assert systems["SpectRAG"]["queries_per_second_without_encoder"] > 0
    assert 0 < systems["LiteSemRAG"]["metrics"]["recall@10"] <= 1 and systems["LiteSemRAG"]["config"]["method"] == "litesemrag"
    assert set(results["qa"]["systems"]) == {"NoRAG", "NaiveRAG", "TIGRAG"}
    assert all(0 <= s["f1"] <= 1 for s in results["qa"]["systems"].values())
    payload = {"run": {"dataset": "example", "queries": 15, "chunks": index.n_chunks, "code_version": "test",
                       "encoder": index.encoder_name, "backend": "numpy", "started": "now", "command": "test"},
               "results": results}
    folder = write_run(tmp_path / "run", payload)
    report = (folder / "report.md").read_text()
    for heading in ("Retrieval (Table 2 layout)", "Question answering (Table 3 layout", "Ablations of TIGRAG (Table 10 layout)",
                    "Table 9 (th_ρ)", "The paper's claims on this run", "SpectRAG's context recall above Hybrid's R@10",
                    "LiteSemRAG's MRR@10 the best of the systems"):
        assert heading in report
    assert {p.name for p in folder.glob("*.png")} == {"recall_at_k.png", "sweep_th.png", "latency.png"}
    assert json.loads((folder / "results.json").read_text())["results"]["systems"]["TIGRAG"]["metrics"]
    table = compare([folder, folder])
    assert table.count("| TIGRAG |") == 1 and "R@2 / R@5 / nDCG@10" in table


def test_cli_eval_run_and_report(example_index, tmp_path, capsys):
    path = example_index.path
    out = tmp_path / "run"
    assert main(["eval", str(path), str(EXAMPLES / "questions.json"), "--systems", "NaiveRAG", "TIGRAG",
                 "--out", str(out), "-q"]) == 0
    assert (out / "report.md").is_file() and (out / "recall_at_k.png").is_file()
    assert main(["report", str(out)]) == 0
    assert "| NaiveRAG |" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "missing")]) == 2


def test_quick_eval_is_the_full_runs_tigrag_row(example_index, tmp_path, capsys):
    """One evaluation path: `tigrag eval` alone reports the metrics of the full run's TIGRAG row
    (same k list, same depth), and both carry the throughput report."""
    path = example_index.path
    questions = str(EXAMPLES / "questions.json")
    assert main(["eval", str(path), questions, "--json", "-q", "--preset", "paper"]) == 0
    quick = json.loads(capsys.readouterr().out)
    assert main(["eval", str(path), questions, "--json", "-q", "--preset", "paper", "--systems", "TIGRAG", "NaiveRAG",
                 "--out", str(tmp_path / "run")]) == 0
    full = json.loads(capsys.readouterr().out)["results"]["systems"]
    assert quick["metrics"] == full["TIGRAG"]["metrics"]
    assert {"recall@10", "recall_dedup@10", "mrr@10", "ndcg@10"} <= set(quick["metrics"])
    throughput = {"queries_per_second_without_encoder", "step_seconds", "encoder_texts_per_query",
                  "mean_pool_size_hop1", "mean_hops", "dense_fallbacks"}
    assert throughput <= set(quick) and throughput <= set(full["TIGRAG"])
    assert throughput <= set(full["NaiveRAG"])  # every method's retriever reports its throughput
    assert full["NaiveRAG"]["mean_hops"] is None and full["NaiveRAG"]["encoder_texts_per_query"] == 1
    assert quick["queries"] == 15 and quick["encoder_texts_per_query"] >= 1 and quick["mean_hops"] >= 1
    report = (tmp_path / "run" / "report.md").read_text()
    assert "queries/s without encoder" in report and "| NaiveRAG |" in report
    assert not list((tmp_path / "run").glob(".*.tmp-*"))  # atomic writes leave no temporaries


def test_throughput_is_measured_on_equal_terms_and_says_what_it_includes(example_index, monkeypatch):
    """Each system is timed after an untimed warm-up call; the queries are encoded once before any
    system is timed (not by whichever runs first), and the report adds that time back to every
    system that uses the encoder; each figure says what it includes."""
    from gpu_tigrag.evaluate import experiment as module

    dataset = load_dataset(EXAMPLES / "questions.json")
    calls = []
    real = module.run_retriever

    def spy(name, retriever, texts, *args, **kwargs):
        original = retriever.retrieve
        retriever.retrieve = lambda queries, **kw: calls.append((name, len(queries))) or original(queries, **kw)
        return real(name, retriever, texts, *args, **kwargs)

    monkeypatch.setattr(module, "run_retriever", spy)
    results = run_experiment(example_index.index, dataset, ["BM25", "NaiveRAG", "TIGRAG"], backend="numpy")
    n = len(dataset.queries)
    assert calls == [(s, k) for s in ("BM25", "NaiveRAG", "TIGRAG") for k in (min(n, module.WARMUP_QUERIES), n)]
    assert results["query_encode_seconds"] is not None and results["query_encode_seconds"] > 0
    systems = results["systems"]
    assert not systems["BM25"]["uses_query_encoder"]
    assert systems["BM25"]["queries_per_second_with_query_encoding"] == systems["BM25"]["queries_per_second"]
    for name in ("NaiveRAG", "TIGRAG"):
        s = systems[name]
        assert s["uses_query_encoder"] and s["queries_per_second_with_query_encoding"] < s["queries_per_second"]
        assert set(s["throughput_includes"]) == {"queries_per_second", "queries_per_second_with_query_encoding",
                                                 "queries_per_second_without_encoder"}
