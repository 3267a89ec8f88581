"""Results that leave the tool (issue 20, parts 2, 3 and 5): corpus ids in every result, TREC runs and
qrels that an external scorer (ir_measures, on trec_eval's code) scores exactly as the engine does,
per-query metrics at any cutoff, seeded significance tests, and one vocabulary on the command line
(case-insensitive system names, -q/-v anywhere, exit codes). All on the shared example index."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from helpers import EXAMPLES, EXAMPLE_ENCODER, string_entities
from gpu_tigrag.cli import main
from gpu_tigrag.evaluate.runfiles import passage_ranking, strictly_decreasing, trec_id, trec_lines
from gpu_tigrag.index.store import generation_folder

QUESTIONS = EXAMPLES / "questions.json"
#: engine metric -> ir_measures measure name: the engine's passage-level figures are the external ones
EXTERNAL = {"recall_dedup": "R", "mrr": "RR", "ndcg": "nDCG"}


def read_trec(path):
    """{qid: [(docid, rank, score, tag)]} of a TREC run file, checking its six columns."""
    runs: dict[str, list] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split()
        assert len(fields) == 6 and fields[1] == "Q0", line
        runs.setdefault(fields[0], []).append((fields[2], int(fields[3]), float(fields[4]), fields[5]))
    return runs


def external_scores(run_file, qrels_file, metrics):
    """ir_measures' per-query values {engine metric name: {qid: value}} of the engine metrics that
    have an external counterpart (recall_dedup@k, mrr@k, ndcg@k)."""
    ir_measures = pytest.importorskip("ir_measures")
    wanted = {}
    for name in metrics:
        kind, _, k = name.partition("@")
        if kind in EXTERNAL:
            wanted[name] = ir_measures.parse_measure(f"{EXTERNAL[kind]}@{k}")
    qrels = list(ir_measures.read_trec_qrels(str(qrels_file)))
    run = list(ir_measures.read_trec_run(str(run_file)))
    values = {name: {} for name in wanted}
    by_measure = {measure: name for name, measure in wanted.items()}
    for row in ir_measures.iter_calc(list(wanted.values()), qrels, run):
        values[by_measure[row.measure]][row.query_id] = row.value
    aggregate = ir_measures.calc_aggregate(list(wanted.values()), qrels, run)
    return values, {name: aggregate[measure] for name, measure in wanted.items()}


def assert_external_agreement(system, run_file, qrels_file):
    """ir_measures on the run file equals the engine's passage-level figures: every query's value to
    1e-12 and every mean to every printed digit (and to 1e-12)."""
    per_query = system["per_query"]
    values, means = external_scores(run_file, qrels_file, [m for m in per_query if m != "qid"])
    assert {m.partition("@")[0] for m in values} == set(EXTERNAL)
    for name, external in values.items():
        for qid, engine in zip(per_query["qid"], per_query[name]):
            assert external.get(trec_id(qid), 0.0) == pytest.approx(engine, abs=1e-12), (name, qid)
        engine_mean = system["metrics"][name]
        assert means[name] == pytest.approx(engine_mean, abs=1e-12), name
        assert f"{100 * means[name]:.2f}" == f"{100 * engine_mean:.2f}" and f"{means[name]:.4f}" == f"{engine_mean:.4f}"


# -- run files --------------------------------------------------------------------------------------------
def test_trec_fields_are_whitespace_free_and_reversible():
    from urllib.parse import unquote

    for value in ("The Glass Orchard", "a\tb", "100% pure", "line\nbreak", "Zoë Ölund", "7", "x\u00a0y"):
        encoded = trec_id(value)
        assert encoded.split() == [encoded] and unquote(encoded) == value
    assert trec_id("doc-12_a") == "doc-12_a" and trec_id("") == "%00"


def test_scores_keep_the_engines_order_in_float32():
    """Ties and rises are lowered to the next float32 below (trec_eval and pytrec_eval keep float32 scores
    and break ties by docid), never into subnormals; strictly decreasing values pass unchanged."""
    assert strictly_decreasing([3.5, 2.0, 1.0]) == [3.5, 2.0, 1.0]
    tied = strictly_decreasing([1.0, 1.0, 1.0 + 1e-12, 0.0, 0.0, 0.0])
    as32 = np.array(tied, dtype=np.float32)
    assert np.all(np.diff(as32) < 0) and np.array_equal(as32.astype(np.float64), np.array(tied))
    assert all(v == 0 or abs(v) >= np.finfo(np.float32).tiny for v in tied)
    assert passage_ranking(["A", "B", "A", "C"], [0.9, 0.8, 0.7, 0.6]) == [("A", 0.9), ("B", 0.8), ("C", 0.6)]
    lines = trec_lines("q 1", [("Doc A", 2.0), ("Doc B", 2.0)], "my run")
    assert lines[0] == "q%201 Q0 Doc%20A 1 2.0 my%20run" and lines[1].split()[3] == "2"
    assert float(lines[1].split()[4]) < 2.0


def test_eval_save_runs_scores_identically_in_ir_measures(example_index, tmp_path, capsys):
    """The must-show of part 2 on the example: every system's TREC run, scored by ir_measures against the
    exported qrels, gives the engine's recall_dedup@k (= R@k), mrr@k (= RR@k) and ndcg@k (= nDCG@k) at
    every cutoff, query by query; the chunk-level recall@k has no counterpart in a passage run."""
    runs = tmp_path / "runs"
    assert main(["eval", str(example_index.path), str(QUESTIONS), "--systems", "NaiveRAG", "BM25", "TIGRAG",
                 "TIGRAG paper", "--cutoffs", "1,2,5,10,20", "--save-runs", str(runs), "--json", "-q"]) == 0
    payload = json.loads(capsys.readouterr().out)
    files = payload["results"]["run_files"]
    assert files["key"] == "passage id" and files["runs"] == {"NaiveRAG": "NaiveRAG.trec", "BM25": "BM25.trec",
                                                         "TIGRAG": "TIGRAG.trec", "TIGRAG paper": "TIGRAG_paper.trec"}
    qrels = (runs / "qrels.tsv").read_text().splitlines()
    assert qrels[0] == "query-id\tcorpus-id\tscore" and qrels[1] == "q1\tThe%20Glass%20Orchard\t1"
    assert (runs / "qrels.trec").read_text().splitlines()[0] == "q1 0 The%20Glass%20Orchard 1"
    for name, file in files["runs"].items():
        run = read_trec(runs / file)
        assert list(run) == [f"q{i}" for i in range(1, 16)]
        for lines in run.values():
            assert [rank for _, rank, _, _ in lines] == list(range(1, len(lines) + 1))
            assert len({doc for doc, *_ in lines}) == len(lines) and {tag for *_, tag in lines} == {file[:-5]}
        system = payload["results"]["systems"][name]
        assert {"recall@20", "recall_dedup@1", "mrr@5", "ndcg@20", "ndcg@10"} <= set(system["metrics"])
        assert_external_agreement(system, runs / file, runs / "qrels.trec")


def test_a_beir_dataset_exports_passage_ids_and_grades(tmp_path):
    """BEIR: gold by passage id with graded relevance; ids with spaces survive the TREC encoding, and the
    graded nDCG agrees with ir_measures."""
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.experiment import run_experiment
    from gpu_tigrag.index.build import build_index

    passages = json.loads((EXAMPLES / "corpus.json").read_text())
    questions = json.loads(QUESTIONS.read_text())
    ids = {p["title"]: f"doc {i}" for i, p in enumerate(passages)}
    folder = tmp_path / "beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": ids[p["title"]], **p}) + "\n" for p in passages))
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q["id"], "text": q["question"]}) + "\n"
                                                  for q in questions))
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
        f"{q['id']}\t{ids[t]}\t{2 if i == 0 else 1}\n" for q in questions for i, t in enumerate(q["gold_titles"])))
    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    index = build_index(load_corpus([folder / "corpus.jsonl"]), config, encoder=load_encoder(config.encoder),
                        entity_extractor=string_entities)
    dataset = load_dataset(folder)
    results = run_experiment(index, dataset, ["BM25", "TIGRAG"], backend="numpy", save_runs=tmp_path / "runs")
    assert results["run_files"]["key"] == "passage id"
    assert "q1\t0\t" not in (tmp_path / "runs" / "qrels.tsv").read_text()
    assert "q1\tdoc%200\t2" in (tmp_path / "runs" / "qrels.tsv").read_text()
    for name, file in results["run_files"]["runs"].items():
        assert next(iter(read_trec(tmp_path / "runs" / file).values()))[0][0].startswith("doc%20")
        assert_external_agreement(results["systems"][name], tmp_path / "runs" / file, tmp_path / "runs" / "qrels.trec")


def test_save_qrels_alone_and_unique_query_ids(example_index, tmp_path, capsys):
    assert main(["eval", str(example_index.path), str(QUESTIONS), "--save-qrels", str(tmp_path / "gold.tsv"),
                 "--limit", "2", "-q"]) == 0
    assert (tmp_path / "gold.tsv").read_text().splitlines() == [
        "query-id\tcorpus-id\tscore", "q1\tThe%20Glass%20Orchard\t1", "q1\tMirela%20Vantz\t1",
        "q2\tWinter%20Tide\t1", "q2\tOskar%20Helm\t1"]
    twice = tmp_path / "twice.json"
    questions = json.loads(QUESTIONS.read_text())[:2]
    twice.write_text(json.dumps([questions[0], {**questions[1], "id": questions[0]["id"]}]))
    capsys.readouterr()
    assert main(["eval", str(example_index.path), str(twice), "--save-runs", str(tmp_path / "runs"), "-q"]) == 2
    assert "twice.json: record 1: query id 'q1' is also the id of" in capsys.readouterr().err  # at read, both named


# -- tigrag run: ids, formats, query files ------------------------------------------------------------------
def test_run_writes_corpus_ids_in_jsonl_trec_and_parquet_from_a_json_list(example_index, tmp_path):
    """`run` takes the JSON list `eval` takes; JSONL rows carry the corpus ids beside the chunk ids, the TREC
    run holds each passage once at its best chunk, Parquet holds the JSONL fields, and `tigrag trec`
    converts the JSONL into the same TREC run."""
    import pyarrow.parquet as pq

    index = example_index.index
    base = ["run", str(example_index.path), str(QUESTIONS), "-k", "8", "-q"]
    assert main(base + ["-o", str(tmp_path / "out.jsonl")]) == 0
    rows = [json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [f"q{i}" for i in range(1, 16)]
    for row in rows:
        assert row["doc_ids"] == [index.passage_ids[index.chunk_passage[c]] for c in row["chunk_ids"]]
    assert main(base + ["-o", str(tmp_path / "out.trec")]) == 0
    run = read_trec(tmp_path / "out.trec")
    for row in rows:
        expected = list(dict.fromkeys(row["doc_ids"]))
        lines = run[row["id"]]
        assert [doc for doc, *_ in lines] == [trec_id(d) for d in expected]
        assert [rank for _, rank, _, _ in lines] == list(range(1, len(expected) + 1))
        scores = [score for _, _, score, _ in lines]
        assert all(a > b for a, b in zip(scores, scores[1:])) and {t for *_, t in lines} == {"tigrag-best"}
        best = [row["scores"][row["doc_ids"].index(d)] for d in expected]
        assert scores == pytest.approx(best, rel=1e-6)
    assert main(["trec", str(tmp_path / "out.jsonl"), "-o", str(tmp_path / "converted.trec"), "--tag",
                 "tigrag-best", "-q"]) == 0
    assert (tmp_path / "converted.trec").read_text() == (tmp_path / "out.trec").read_text()
    assert main(base + ["-o", str(tmp_path / "parts"), "--format", "parquet"]) == 0
    table = pq.read_table(tmp_path / "parts" / "part-000000.parquet").to_pylist()
    assert [r["doc_ids"] for r in table] == [r["doc_ids"] for r in rows]


def test_run_formats_and_resume_rules(example_index, tmp_path, capsys):
    base = ["run", str(example_index.path), str(QUESTIONS), "-q"]
    capsys.readouterr()
    assert main(base + ["-o", str(tmp_path / "x.parquet"), "--format", "jsonl"]) == 2
    assert "the name says parquet but --format is jsonl" in capsys.readouterr().err
    assert main(base + ["-o", str(tmp_path / "x.trec"), "--resume"]) == 2
    assert "--resume works with --format jsonl or parquet, not trec" in capsys.readouterr().err
    assert not (tmp_path / "x.trec").exists()
    out = tmp_path / "out.jsonl"
    assert main(base + ["-o", str(out), "--tag", "ignored"]) == 0
    first = out.read_text()
    lines = first.splitlines(keepends=True)
    out.write_text("".join(lines[:6]) + lines[6][:20])  # an interrupted run: 6 rows and a torn line
    assert main(base + ["-o", str(out), "--resume"]) == 0
    assert out.read_text() == first


def test_run_reads_the_query_file_of_a_dataset_folder(example_index, tmp_path):
    folder = tmp_path / "example"
    folder.mkdir()
    (folder / "example_corpus.json").write_text((EXAMPLES / "corpus.json").read_text())
    (folder / "example.json").write_text(QUESTIONS.read_text())
    out = tmp_path / "out.trec"
    assert main(["run", str(example_index.path), str(folder), "-o", str(out), "-q", "--method", "bm25"]) == 0
    run = read_trec(out)
    assert len(run) == 15 and {t for lines in run.values() for *_, t in lines} == {"bm25"}


# -- eval: cutoffs, per-query tables, significance --------------------------------------------------------------
def test_eval_cutoffs_per_query_tables_and_significance_in_the_report(example_index, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["eval", str(example_index.path), str(QUESTIONS), "--systems", "naiverag", "tigrag", "BM25",
            "--baseline", "NAIVERAG", "--cutoffs", "1, 20", "--out", str(out), "--json", "-q"]
    assert main(argv) == 0
    payload = json.loads(capsys.readouterr().out)
    results = payload["results"]
    assert list(results["systems"]) == ["NaiveRAG", "TIGRAG", "BM25"]
    assert results["cutoffs"] == {"recall": [1, 2, 5, 10, 20], "rank": [1, 10, 20]} and results["depth"] == 80
    for system in results["systems"].values():
        table = system["per_query"]
        assert table["qid"] == [f"q{i}" for i in range(1, 16)]
        for name, values in table.items():
            if name != "qid":
                assert float(np.mean(values)) == system["metrics"][name]  # the figures are the tables' means
    significance = results["significance"]
    assert significance["baseline"] == "NaiveRAG" and set(significance["systems"]) == {"TIGRAG", "BM25"}
    row = significance["systems"]["TIGRAG"]["recall@2"]
    assert row["delta"] == pytest.approx(results["systems"]["TIGRAG"]["metrics"]["recall@2"]
                                         - results["systems"]["NaiveRAG"]["metrics"]["recall@2"])
    assert 0 <= row["p_randomization"] <= 1 and 0 <= row["p_t_test"] <= 1
    assert row["significant"] == (row["p_randomization"] < 0.05)
    report = (out / "report.md").read_text()
    assert "## Significance" in report and "## Every cutoff (1, 2, 5, 10, 20; 80 chunks" in report
    assert "against the baseline `NaiveRAG` in the paired randomisation test (10,000 random swaps, seed 42)" in report
    assert report.count("| q1 |") == 0 and "[per_query.tsv](per_query.tsv)" in report
    if any(r["significant"] for s in significance["systems"].values() for r in s.values()):
        assert "†" in report.split("## Retrieval")[1].split("## Significance")[0]
    tsv = (out / "per_query.tsv").read_text().splitlines()
    assert tsv[0].split("\t")[:3] == ["system", "query-id", "recall@1"] and len(tsv) == 1 + 3 * 15
    # the same run again: the same p-values (seeded), bit for bit
    assert main(argv[:-4] + ["--json", "-q"]) == 0
    again = json.loads(capsys.readouterr().out)["results"]["significance"]
    assert again == significance


def test_significance_tests_are_seeded_and_match_their_definitions():
    from scipy.stats import ttest_rel

    from gpu_tigrag.evaluate.significance import compare_systems, paired_t_test, randomization_test

    rng = np.random.default_rng(0)
    a, b = rng.random(12), rng.random(12) * 0.8
    assert paired_t_test(a, b) == pytest.approx(ttest_rel(a, b).pvalue, rel=1e-12)
    p = randomization_test(a, b)
    assert p == randomization_test(a, b) and p != randomization_test(a, b, seed=7)
    # the exact test over all 2^12 swaps: the sampled p-value (10,000 swaps) is within its sampling error
    diff = a - b
    signs = np.array([[1 - 2 * ((i >> j) & 1) for j in range(12)] for i in range(2 ** 12)])
    exact = float(np.mean(np.abs(signs @ diff) / 12 >= abs(diff.mean()) - 1e-12))
    assert abs(p - exact) < 4 * math.sqrt(exact * (1 - exact) / 10_000) + 1e-9
    assert randomization_test(a, a) == 1.0 and paired_t_test(a, a) == 1.0
    quarters = np.arange(12) / 4
    assert paired_t_test(quarters + 0.5, quarters) == 0.0  # a constant shift: certain
    table = {"base": {"m": list(b)}, "x": {"m": list(a)}, "same": {"m": list(b)}}
    result = compare_systems(table, "base", ["m"])
    assert result["systems"]["same"]["m"]["p_randomization"] == 1.0
    assert result["systems"]["x"]["m"]["p_randomization"] == p
    assert result == compare_systems(table, "base", ["m"])


def test_corrections_wilcoxon_and_intervals_match_their_definitions(example_index, tmp_path, capsys):
    from scipy.stats import t, wilcoxon

    from gpu_tigrag.evaluate.significance import adjust, compare_systems, confidence_interval, wilcoxon_test

    p = [0.01, 0.04, 0.03, 0.005]
    assert adjust(p, "holm") == pytest.approx([0.03, 0.06, 0.06, 0.02])  # Holm's step-down, by hand
    assert adjust(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02]) and adjust(p, "none") == p
    rng = np.random.default_rng(1)
    a, b = rng.random(20), rng.random(20) * 0.7
    assert wilcoxon_test(a, b) == pytest.approx(wilcoxon(a - b).pvalue, rel=1e-12) and wilcoxon_test(a, a) == 1.0
    low, high = confidence_interval(a, b)
    half = t.ppf(0.975, 19) * np.std(a - b, ddof=1) / math.sqrt(20)
    assert (low, high) == pytest.approx((np.mean(a - b) - half, np.mean(a - b) + half))
    table = {"base": {"m": list(b)}, "x": {"m": list(a)}, "y": {"m": list(b + 0.01 * rng.random(20))}}
    plain = compare_systems(table, "base", ["m"], test="t")
    holm = compare_systems(table, "base", ["m"], test="t", correction="holm")
    for name in ("x", "y"):
        raw = plain["systems"][name]["m"]["p_t_test"]
        assert plain["systems"][name]["m"]["p_marker"] == raw <= holm["systems"][name]["m"]["p_marker"]
    assert holm["correction"] == "holm" and holm["marker_test"] == "paired t-test"
    out = tmp_path / "run"
    assert main(["eval", str(example_index.path), str(QUESTIONS), "--systems", "BM25", "NaiveRAG", "TIGRAG",
                 "--test", "wilcoxon", "--correction", "holm", "--out", str(out), "-q"]) == 0
    assert "Wilcoxon signed-rank test, p-values corrected by Holm" in capsys.readouterr().out
    assert "corrected by Holm" in (out / "report.md").read_text()


def test_cutoffs_are_checked(example_index, capsys):
    from gpu_tigrag.evaluate.metrics import Cutoffs

    assert Cutoffs.parse(None) == Cutoffs() and Cutoffs.parse("100,1").recall == (1, 2, 5, 10, 100)
    for bad in ("0", "two", "5,-1"):
        assert main(["eval", str(example_index.path), str(QUESTIONS), "--cutoffs", bad, "-q"]) == 2
        assert "--cutoffs" in capsys.readouterr().err


# -- one vocabulary on the command line ------------------------------------------------------------------
def test_system_names_ignore_case_and_unknown_ones_list_the_valid_names(example_index, capsys):
    from gpu_tigrag.evaluate.experiment import all_systems

    path, questions = str(example_index.path), str(QUESTIONS)
    assert main(["eval", path, questions, "--systems", "bm25", "tigrag 1-HOP", "--limit", "2", "--json", "-q"]) == 0
    assert list(json.loads(capsys.readouterr().out)["results"]["systems"]) == ["BM25", "TIGRAG 1-hop"]
    assert main(["eval", path, questions, "--systems", "bm26", "-q"]) == 2
    err = capsys.readouterr().err
    assert "unknown system 'bm26'" in err and all(repr(name) in err for name in all_systems())
    assert main(["eval", path, questions, "--systems", "BM25", "NaiveRAG", "--baseline", "hybrid", "-q"]) == 2
    assert "'hybrid'" in capsys.readouterr().err


def test_quiet_and_verbose_work_before_or_after_the_command(example_index, capsys):
    from gpu_tigrag.cli.parser import build_parser

    parser = build_parser()
    for argv, quiet, verbose in ((["methods"], False, False), (["-q", "methods"], True, False),
                                 (["methods", "-q"], True, False), (["-v", "methods"], False, True),
                                 (["methods", "--verbose"], False, True), (["-q", "methods", "-v"], True, True)):
        args = parser.parse_args(argv)
        assert (args.quiet, args.verbose) == (quiet, verbose), argv
    command = ["eval", str(example_index.path), str(QUESTIONS), "--limit", "1"]
    for argv in (["-q", *command], [*command, "-q"]):
        assert main(argv) == 0
        assert capsys.readouterr().err == ""


def test_exit_codes(example_index, tmp_path, capsys, monkeypatch):
    """2 usage or input error, 3 damaged index, 4 out of resources, 1 a bug (with its traceback)."""
    import gpu_tigrag.cli.parser as parser_module
    from gpu_tigrag.errors import EXIT_CODES

    assert {0, 1, 2, 3, 4} <= set(EXIT_CODES)
    assert main(["query", str(tmp_path / "nowhere"), "hello", "-q"]) == 2
    damaged = example_index.copy_to(tmp_path / "damaged")
    target = next(p for p in sorted(generation_folder(damaged).glob("*.npy")))
    data = bytearray(target.read_bytes())
    data[-1] ^= 0xFF
    target.write_bytes(bytes(data))
    capsys.readouterr()
    assert main(["query", str(damaged), "hello", "-q"]) == 3
    assert "checksum mismatch" in capsys.readouterr().err

    def out_of_memory(args):
        raise MemoryError()

    def bug(args):
        raise KeyError("oops")

    monkeypatch.setattr(parser_module, "cmd_methods", out_of_memory)
    assert main(["methods"]) == 4 and "out of memory" in capsys.readouterr().err
    monkeypatch.setattr(parser_module, "cmd_methods", bug)
    assert main(["methods"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "this is a bug" in err
    with pytest.raises(SystemExit) as exc:
        main(["eval", "--no-such-flag"])
    assert exc.value.code == 2


def test_help_is_generated_from_the_code(capsys):
    from gpu_tigrag.backend import BACKEND_NAMES
    from gpu_tigrag.evaluate.experiment import all_systems

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert all(repr(name) in text for name in all_systems()) and f"the {len(all_systems())} systems" in text
    assert "R@2/5/10" in text and "--cutoffs" in text and "exit codes:" in text
    assert all(name in text for name in BACKEND_NAMES)
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "{jsonl,trec,parquet}" in text and "JSON list" in text


# -- one doc-id space (issue 32, "wrong without a word" item 1) ---------------------------------------------
@pytest.fixture(scope="module")
def id_corpus(tmp_path_factory):
    """The example corpus with ids of its own (`doc-0`, ...) beside title gold: the shape where `tigrag run`
    named passages by id and `eval --save-qrels` by title, so that every external score was 0."""
    from gpu_tigrag.config import EncoderConfig, IndexConfig
    from gpu_tigrag.corpus import load_corpus
    from gpu_tigrag.encoders import load_encoder
    from gpu_tigrag.index.build import build_index
    from gpu_tigrag.index.store import save_index

    folder = tmp_path_factory.mktemp("id_corpus")
    passages = json.loads((EXAMPLES / "corpus.json").read_text())
    ids = {p["title"]: f"doc-{i}" for i, p in enumerate(passages)}
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"id": ids[p["title"]], **p}) + "\n" for p in passages))
    config = IndexConfig(encoder=EncoderConfig(model=EXAMPLE_ENCODER))
    index = build_index(load_corpus([folder / "corpus.jsonl"]), config, encoder=load_encoder(config.encoder),
                        entity_extractor=string_entities)
    save_index(index, folder / "index")
    return folder / "index", ids


def test_run_and_save_qrels_name_passages_alike(id_corpus, tmp_path, capsys):
    """`tigrag run`'s TREC run scored by ir_measures against `eval --save-qrels` gives eval's figures (on the
    code before, 0.0000 on every measure: ids in the run, titles in the qrels)."""
    index, ids = id_corpus
    qrels = tmp_path / "gold.trec"
    assert main(["eval", str(index), str(QUESTIONS), "--save-qrels", str(qrels), "--json", "-q"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "q1 0 doc-" in qrels.read_text() and "Glass%20Orchard" not in qrels.read_text()
    assert json.loads(qrels.with_name("gold.trec.meta.json").read_text())["doc_ids"].startswith("passage id")
    run = tmp_path / "run.trec"
    assert main(["run", str(index), str(QUESTIONS), "-o", str(run), "-k", "40", "-q"]) == 0
    assert_external_agreement(report, run, qrels)
    assert report["metrics"]["recall_dedup@5"] > 0.5


def test_save_runs_name_passages_by_id_with_title_gold(id_corpus, tmp_path, capsys):
    index, ids = id_corpus
    runs = tmp_path / "runs"
    assert main(["eval", str(index), str(QUESTIONS), "--systems", "BM25", "TIGRAG", "--save-runs", str(runs),
                 "--json", "-q"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["results"]["run_files"]["key"] == "passage id"
    assert (runs / "qrels.trec").read_text().splitlines()[0] == f"q1 0 {ids['The Glass Orchard']} 1"
    for name, file in payload["results"]["run_files"]["runs"].items():
        assert all(doc.startswith("doc-") for lines in read_trec(runs / file).values() for doc, *_ in lines)
        assert_external_agreement(payload["results"]["systems"][name], runs / file, runs / "qrels.trec")


def test_a_question_file_may_give_gold_ids(id_corpus, tmp_path, capsys):
    """`gold_ids` name gold passages by the corpus's ids: the same figures as the titles give; a file mixing
    the two ways, or a record giving both, is a one-line error."""
    index, ids = id_corpus
    questions = json.loads(QUESTIONS.read_text())
    by_id = [{k: v for k, v in q.items() if k != "gold_titles"} | {"gold_ids": [ids[t] for t in q["gold_titles"]]}
             for q in questions]
    (tmp_path / "by_id.json").write_text(json.dumps(by_id))
    figures = []
    for file in (QUESTIONS, tmp_path / "by_id.json"):
        assert main(["eval", str(index), str(file), "--json", "-q"]) == 0
        figures.append(json.loads(capsys.readouterr().out)["metrics"])
    assert figures[0] == figures[1]
    (tmp_path / "mixed.json").write_text(json.dumps([by_id[0], questions[1]]))
    assert main(["eval", str(index), str(tmp_path / "mixed.json"), "-q"]) == 2
    assert "gold_ids" in capsys.readouterr().err
    (tmp_path / "both.json").write_text(json.dumps([by_id[0] | {"gold_titles": ["X"]}]))
    assert main(["eval", str(index), str(tmp_path / "both.json"), "-q"]) == 2
    assert "both 'gold_ids' and 'gold_titles'" in capsys.readouterr().err


def test_a_run_made_elsewhere_is_scored_as_a_system(id_corpus, tmp_path, capsys):
    """`eval --run NAME=FILE`: a TREC run (here `tigrag run`'s, as pyserini or bm25s would write one) is scored
    by the engine's functions and compared with significance; its figures equal the system that made it. A run
    sharing no doc id with the index (titles against corpus ids) is a one-line error, not a row of zeros."""
    index, ids = id_corpus
    run = tmp_path / "bm25.trec"
    assert main(["run", str(index), str(QUESTIONS), "-o", str(run), "--method", "bm25passages", "-k", "40", "-q"]) == 0
    out = tmp_path / "out"
    assert main(["eval", str(index), str(QUESTIONS), "-q", "--systems", "BM25 passages", "--run", f"theirs={run}",
                 "--baseline", "theirs", "--out", str(out)]) == 0
    results = json.loads((out / "results.json").read_text())["results"]
    ours, theirs = results["systems"]["BM25 passages"], results["systems"]["theirs"]
    for metric in ("recall_dedup@2", "recall_dedup@5", "mrr@10", "ndcg@10"):
        assert theirs["metrics"][metric] == pytest.approx(ours["metrics"][metric], abs=1e-12), metric
    assert results["significance"]["baseline"] == "theirs" and theirs["config"] == {"external_run": str(run)}
    assert "a run made elsewhere" in (out / "report.md").read_text()
    titles = tmp_path / "titles.trec"  # the same run naming passages by title: another doc-id space
    names = {v: k for k, v in ids.items()}
    titles.write_text("".join(" ".join([f[0], f[1], trec_id(names[f[2]]), *f[3:]]) + "\n"
                              for f in (line.split() for line in run.read_text().splitlines())))
    capsys.readouterr()
    assert main(["eval", str(index), str(QUESTIONS), "-q", "--run", f"titles={titles}"]) == 2
    assert "none of its" in capsys.readouterr().err


def test_metrics_of_the_users_choosing_are_ir_measures_on_the_saved_runs(id_corpus, tmp_path, capsys):
    """`eval --metrics`: every measure's per-query values are ir_measures' on the `--save-runs` files (the same
    passage runs and qrels), they join the significance tests and the report, and the runs reach their depth."""
    ir_measures = pytest.importorskip("ir_measures")
    index, _ = id_corpus
    out, runs = tmp_path / "out", tmp_path / "runs"
    assert main(["eval", str(index), str(QUESTIONS), "-q", "--systems", "BM25", "TIGRAG", "--metrics", "AP P@5,R@100",
                 "--save-runs", str(runs), "--out", str(out), "--json"]) == 0
    results = json.loads(capsys.readouterr().out)["results"]
    assert results["measures"] == ["AP", "P@5", "R@100"] and results["depth"] == 400
    qrels = list(ir_measures.read_trec_qrels(str(runs / "qrels.trec")))
    for name, file in results["run_files"]["runs"].items():
        system = results["systems"][name]
        expected = {(m.query_id, str(m.measure)): m.value for m in ir_measures.iter_calc(
            [ir_measures.AP, ir_measures.P @ 5, ir_measures.R @ 100], qrels,
            list(ir_measures.read_trec_run(str(runs / file))))}
        for measure in ("AP", "P@5", "R@100"):
            values = system["per_query"][measure]
            assert values == pytest.approx([expected.get((trec_id(q), measure), 0.0) for q in system["per_query"]["qid"]],
                                           abs=1e-12)
            assert system["metrics"][measure] == pytest.approx(float(np.mean(values)), abs=1e-15)
    assert "AP" in results["significance"]["systems"]["TIGRAG"]
    assert "## Measures of your choosing (ir_measures)" in (out / "report.md").read_text()
    assert main(["eval", str(index), str(QUESTIONS), "-q", "--metrics", "NoSuchMeasure"]) == 2
    assert "is not a measure ir_measures knows" in capsys.readouterr().err
