"""Evaluation that cannot mislead (issue 32, "wrong without a word"): `--set` reaches every system of `tigrag
eval` (a row pinned to a preset runs that preset with the user's settings on top, a row whose definition fixes a
key keeps its own value and says so, report.md lists each row's settings); the throughput line says what it
counts, end to end first, and no system's q/s leans on vectors a warm-up or an earlier system encoded; the
README's sample prints what the code prints."""

from __future__ import annotations

import json
import re

from helpers import EXAMPLES

from gpu_tigrag.cli import main
from gpu_tigrag.evaluate.datasets import load_dataset
from gpu_tigrag.evaluate.experiment import fixed_settings, non_default_settings, run_experiment, system_config
from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.methods.registry import systems
from gpu_tigrag.presets import preset


def test_set_applies_on_top_of_every_preset_row(example_index, tmp_path):
    out = tmp_path / "report"
    code = main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--out", str(out),
                 "--systems", "TIGRAG paper", "TIGRAG", "TIGRAG 1-hop", "best without title links",
                 "--set", "tigrag.blocks=sparse", "--set", "tigrag.hops=3"])
    assert code == 0
    rows = json.loads((out / "results.json").read_text())["results"]["systems"]
    for name in rows:  # every row, preset-pinned or not, runs the sparse blocks
        assert rows[name]["config"]["tigrag"]["blocks"] == "sparse", name
        assert rows[name]["settings"]["tigrag.blocks"] == "sparse", name
    assert rows["TIGRAG paper"]["config"]["tigrag"]["hops"] == 3
    assert rows["best without title links"]["config"]["tigrag"]["fusion"]["first_hop"] == "hybrid"  # still best
    assert rows["best without title links"]["config"]["tigrag"]["fusion"]["title_links"] is False
    # the 1-hop row's definition fixes hops: it stays one hop and says that the user's value did not apply
    assert rows["TIGRAG 1-hop"]["config"]["tigrag"]["hops"] == 1
    assert rows["TIGRAG 1-hop"]["fixed_settings"] == {"tigrag.hops": 1}
    assert all(not rows[n]["fixed_settings"] for n in rows if n != "TIGRAG 1-hop")
    report = (out / "report.md").read_text()
    assert "## Settings of each row" in report and "`tigrag.hops` (stays 1)" in report
    assert report.index("## Settings of each row") < report.index("## Appendix: the full retrieval configuration")


def test_system_config_keeps_the_preset_and_the_system_on_top():
    table = systems()
    settings = {"th": "0.5", "tigrag.fusion.title_links": "true"}
    paper = system_config(table["TIGRAG paper"], RetrievalConfig(), settings)
    assert paper.tigrag.pool_threshold == 0.5 and paper.tigrag.fusion.title_links is True
    without = system_config(table["best without title links"], RetrievalConfig(), settings)
    assert without.tigrag.fusion.title_links is False and without.tigrag.pool_threshold == 0.5
    assert fixed_settings(table["best without title links"], settings) == {"tigrag.fusion.title_links": False}
    assert fixed_settings(table["TIGRAG paper"], settings) == {}


def test_non_default_settings_name_what_differs_from_the_paper():
    assert non_default_settings(preset("paper")) == {}
    best = non_default_settings(preset("best"))
    assert best["tigrag.fusion.first_hop"] == "hybrid" and best["tigrag.fusion.bridge_entities"] == 8
    assert all(key.startswith("tigrag.") for key in best)  # no other method's section leaks in


def test_api_settings_reach_preset_rows(example_index):
    dataset = load_dataset(EXAMPLES / "questions.json")
    results = run_experiment(example_index.index, dataset, ["TIGRAG paper", "TIGRAG best"], backend="numpy",
                             settings={"tigrag.ppr.algorithm": "push"})
    for row in results["systems"].values():
        assert row["config"]["tigrag"]["ppr"]["algorithm"] == "push"


def _masked(line: str) -> str:
    return re.sub(r"\d+(\.\d+)?", "N", line)


def test_throughput_lines_say_what_they_count_and_match_the_readme(example_index, capsys):
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json")]) == 0
    printed = capsys.readouterr().out.strip().splitlines()[-2:]
    assert "end to end" in printed[0] and "query encoding" in printed[0] and "loading not counted" in printed[0]
    assert "with the question vectors given" in printed[1] and "without the encoder" in printed[1]
    readme = (EXAMPLES.parent / "README.md").read_text()
    block = readme.split("$ tigrag eval my-index examples/questions.json\n", 1)[1].split("```", 1)[0]
    sample = block.strip().splitlines()[-2:]
    assert [_masked(line) for line in sample] == [_masked(line) for line in printed], (
        "README's eval sample no longer matches what `tigrag eval` prints: run it on the example and paste the lines")


def test_every_system_encodes_its_own_expanded_queries(example_index):
    """Two identical systems in one run pay the same encoder texts: the second does not get the first's
    expanded-query vectors for free (nor the timed call the warm-up's)."""
    from gpu_tigrag.encoders import CachingEncoder, load_encoder
    from gpu_tigrag.evaluate.experiment import Experiment

    dataset = load_dataset(EXAMPLES / "questions.json")
    encoder = CachingEncoder(load_encoder(example_index.index.config.encoder))
    experiment = Experiment(example_index.index, dataset, backend="numpy", encoder=encoder)
    encoded = []
    for name in ("TIGRAG best", "TIGRAG best"):
        before = encoder.encoded
        run = experiment.run_system(name)
        encoded.append(encoder.encoded - before)
        assert run.throughput["step_seconds"]["encode"] > 0
    from gpu_tigrag.methods.tigrag.expansion import names_entity, repeats_question
    from gpu_tigrag.text.tokens import valid_tokens

    vocab = example_index.index.vocab

    def own_pass(question: str, entity: str) -> bool:
        """Whether best embeds "question entity": not named by the question, not made of its tokens (repeats)."""
        tokens = (vocab.encode(valid_tokens(entity)), vocab.encode(valid_tokens(question)))
        return not names_entity(question, entity) and not repeats_question(*tokens)

    # best's expanded queries that the question names or repeats take its own vector (named_expansions=repeats), and
    # a question embeds at most `expansion_passes` of the others
    from gpu_tigrag.presets import preset

    passes = preset("best").tigrag.fusion.expansion_passes
    expanded = sum(min(passes, sum(own_pass(q.text, e) for h in r.hops[:-1] for e in h.new_entities))
                   for q, r in zip(dataset.queries, run.results))
    # the first run encodes the questions once, then its expanded queries in the warm-up (the first 32 queries:
    # all 15) and again in the timed call; the second finds them cached for its warm-up, not for its timed call
    assert expanded > 0 and encoded == [len(dataset.queries) + 2 * expanded, expanded]


def test_systems_of_the_users_choosing_run_beside_the_named_ones(example_index, tmp_path, capsys):
    """`--system NAME=BASE,KEY=VALUE`: a variant of any system, compared with significance like the others; a
    later spec builds on an earlier one; a setting of another method, an unknown base or a built-in name is a
    one-line error before any work."""
    out = tmp_path / "run"
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--out", str(out),
                 "--systems", "TIGRAG best", "--system", "best-th0.5=TIGRAG best,th=0.5",
                 "--system", "labels=best-th0.5,tigrag.entity_labels=PERSON,ORG", "--baseline", "TIGRAG best"]) == 0
    results = json.loads((out / "results.json").read_text())["results"]
    rows = results["systems"]
    assert list(rows) == ["TIGRAG best", "best-th0.5", "labels"]
    assert rows["best-th0.5"]["config"]["tigrag"]["pool_threshold"] == 0.5
    assert rows["best-th0.5"]["config"]["tigrag"]["fusion"]["first_hop"] == "hybrid"  # still best
    assert rows["labels"]["config"]["tigrag"]["pool_threshold"] == 0.5
    assert rows["labels"]["config"]["tigrag"]["entity_labels"] == ["PERSON", "ORG"]
    assert set(results["significance"]["systems"]) == {"best-th0.5", "labels"}
    capsys.readouterr()
    for spec, message in (("x=TIGRAG best,bm25passages.k1=0.9", "is a setting of bm25passages"),
                          ("x=no such system", "unknown system"), ("TIGRAG=BM25", "built-in system"),
                          ("x=TIGRAG,bm25.k1=3", "--system 'x=TIGRAG,bm25.k1=3': unknown setting"),
                          ("x=TIGRAG,th=7", "--system 'x=TIGRAG,th=7'")):
        assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--system", spec]) == 2
        assert message in capsys.readouterr().err, spec


def test_reciprocal_rank_fusion_of_any_systems(example_index, tmp_path):
    """`--system "NAME=rrf(A,B)"`: each passage scores the sum over the members of 1 / (60 + its rank in that
    member's passage ranking); an unknown member is a one-line error."""
    from gpu_tigrag.evaluate.fused import fuse

    assert fuse([[[3, 1, 2]], [[1, 3]]]) == [[(1, 1 / 62 + 1 / 61), (3, 1 / 61 + 1 / 62), (2, 1 / 63)]]  # tie: best rank
    out, runs = tmp_path / "run", tmp_path / "runs"
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--out", str(out),
                 "--systems", "BM25", "NaiveRAG", "--system", "fused=rrf(bm25, NaiveRAG)", "--save-runs", str(runs)]) == 0
    rows = json.loads((out / "results.json").read_text())["results"]["systems"]
    assert rows["fused"]["config"] == {"fusion": "rrf", "members": ["BM25", "NaiveRAG"], "k": 60}
    assert "reciprocal-rank fusion (k 60) of `BM25`, `NaiveRAG`" in (out / "report.md").read_text()

    def ranking(file):  # the passages of q1, best first, as the saved TREC run holds them
        lines = [line.split() for line in (runs / file).read_text().splitlines() if line.split()[0] == "q1"]
        return [fields[2] for fields in sorted(lines, key=lambda fields: int(fields[3]))]

    members = [ranking("BM25.trec"), ranking("NaiveRAG.trec")]
    ids = {doc: i for i, doc in enumerate(dict.fromkeys(members[0] + members[1]))}
    expected = fuse([[[ids[d] for d in member]] for member in members])[0]
    assert ranking("fused.trec")[:10] == [next(d for d, i in ids.items() if i == p) for p, _ in expected][:10]
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--systems", "BM25",
                 "--system", "fused=rrf(bm25, hybrid)"]) == 2


def test_datasets_by_name(example_index, tmp_path, capsys):
    """A registry name that is not local says how to fetch it; with --data-dir the fetched folder is found."""
    import shutil

    assert main(["eval", str(example_index.path), "scifact", "-q"]) == 2
    assert "tigrag datasets fetch scifact --to DIR" in capsys.readouterr().err
    folder = tmp_path / "data" / "example"
    folder.mkdir(parents=True)
    shutil.copy(EXAMPLES / "corpus.json", folder / "example_corpus.json")
    shutil.copy(EXAMPLES / "questions.json", folder / "questions.json")
    assert main(["eval", str(example_index.path), "example", "--data-dir", str(tmp_path / "data"), "--json", "-q"]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 15


def test_tables_as_csv_and_latex_and_report_with_a_metric_choice(example_index, tmp_path, capsys):
    import csv

    out = tmp_path / "run"
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "-q", "--out", str(out),
                 "--systems", "BM25", "TIGRAG best", "--metrics", "AP"]) == 0
    results = json.loads((out / "results.json").read_text())["results"]
    rows = list(csv.DictReader((out / "tables.csv").open()))
    assert [r["system"] for r in rows] == ["BM25", "TIGRAG best"]
    assert float(rows[1]["AP"]) == results["systems"]["TIGRAG best"]["metrics"]["AP"]
    tex = (out / "tables.tex").read_text()
    assert "\\begin{tabular}{l" in tex and "TIGRAG best &" in tex and "\\bottomrule" in tex
    capsys.readouterr()
    assert main(["report", str(out), "--metrics", "AP ndcg@10", "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "system,run:AP,run:ndcg@10"
    assert main(["report", str(out), "--metrics", "nosuch"]) == 2
    assert "is in none of the runs" in capsys.readouterr().err


def test_ir_datasets_ids_name_local_beir_sets(example_index, tmp_path, capsys):
    """`beir/NAME/SPLIT` (ir_datasets' id) reads the BEIR set NAME that `datasets fetch` left in --data-dir, with
    that split's qrels; a split that contradicts --split is an error; without the data, how to fetch it."""
    from gpu_tigrag.evaluate.datasets import dataset_id

    assert dataset_id("beir/scifact/test") == ("scifact", "test") and dataset_id("beir/nfcorpus") == ("nfcorpus", None)
    assert dataset_id("my/questions.json") == ("my/questions.json", None)
    _example_as_beir(tmp_path / "data" / "scifact")
    data = ["--data-dir", str(tmp_path / "data"), "--json", "-q"]
    assert main(["eval", str(example_index.path), "beir/scifact/dev", *data]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 2
    assert main(["eval", str(example_index.path), "beir/scifact", *data]) == 0
    assert json.loads(capsys.readouterr().out)["queries"] == 4
    assert main(["eval", str(example_index.path), "beir/scifact/dev", "--split", "train", *data]) == 2
    assert "names the dev split, --split says train" in capsys.readouterr().err
    assert main(["eval", str(example_index.path), "beir/scifact/test", "-q"]) == 2
    assert "tigrag datasets fetch scifact --to DIR" in capsys.readouterr().err


def _example_as_beir(folder) -> list[dict]:
    """The example corpus and questions as a BEIR folder: the first 4 questions judged in test, the next 2 in
    dev, the other 9 in neither; returns the questions."""
    (folder / "qrels").mkdir(parents=True)
    passages = json.loads((EXAMPLES / "corpus.json").read_text())
    (folder / "corpus.jsonl").write_text("".join(json.dumps({"_id": p["title"], "title": p["title"], "text": p["text"]})
                                                 + "\n" for p in passages))
    questions = json.loads((EXAMPLES / "questions.json").read_text())
    (folder / "queries.jsonl").write_text("".join(json.dumps({"_id": q["id"], "text": q["question"]}) + "\n"
                                                  for q in questions))
    for split, chosen in (("test", questions[:4]), ("dev", questions[4:6])):
        (folder / "qrels" / f"{split}.tsv").write_text("query-id\tcorpus-id\tscore\n" + "".join(
            f"{q['id']}\t{title}\t1\n" for q in chosen for title in q["gold_titles"]))
    return questions


def test_run_and_bench_take_dataset_names_and_splits(example_index, tmp_path, capsys):
    """`tigrag run` reads the queries `eval` answers: a registry name found in --data-dir is its folder (every
    query), an ir_datasets id or --split only the queries that split's qrels judge, numbered from 0; the run's
    description records the split and its qrels; --split of a file that is not a BEIR folder, or one that
    contradicts the id, is an error; `bench` reads the same."""
    questions = _example_as_beir(tmp_path / "data" / "scifact")
    data = ["--data-dir", str(tmp_path / "data"), "-q"]

    def answered(name: str) -> list[dict]:
        return [json.loads(line) for line in (tmp_path / name).read_text().splitlines()]

    assert main(["run", str(example_index.path), "scifact", "-o", str(tmp_path / "all.jsonl"), *data]) == 0
    assert [r["id"] for r in answered("all.jsonl")] == [q["id"] for q in questions]
    assert main(["run", str(example_index.path), "beir/scifact/dev", "-o", str(tmp_path / "dev.jsonl"), *data]) == 0
    rows = answered("dev.jsonl")
    assert [(r["index"], r["id"]) for r in rows] == [(0, questions[4]["id"]), (1, questions[5]["id"])]
    meta = json.loads((tmp_path / "dev.jsonl.meta.json").read_text())
    assert meta["split"] == "dev" and meta["queries"] == 2 and len(meta["qrels_sha256"]) == 64
    assert main(["run", str(example_index.path), str(tmp_path / "data" / "scifact"), "--split", "test", "-o",
                 str(tmp_path / "test.trec"), "-q"]) == 0
    run_ids = {line.split()[0] for line in (tmp_path / "test.trec").read_text().splitlines()}
    assert run_ids == {q["id"] for q in questions[:4]}
    assert main(["run", str(example_index.path), "beir/scifact/dev", "--resume", "-o", str(tmp_path / "dev.jsonl"),
                 *data]) == 0
    assert answered("dev.jsonl") == rows
    capsys.readouterr()
    assert main(["run", str(example_index.path), str(EXAMPLES / "questions.json"), "--split", "test", "-o",
                 str(tmp_path / "x.jsonl"), "-q"]) == 2
    assert "not a BEIR folder" in capsys.readouterr().err
    assert main(["run", str(example_index.path), "beir/scifact/dev", "--split", "test", "-o", str(tmp_path / "y.jsonl"),
                 *data]) == 2
    assert "names the dev split, --split says test" in capsys.readouterr().err
    assert main(["run", str(example_index.path), "scifact", "--split", "train", "-o", str(tmp_path / "z.jsonl"),
                 *data]) == 2
    assert "no qrels for split 'train'" in capsys.readouterr().err
    assert not any((tmp_path / name).exists() for name in ("x.jsonl", "y.jsonl", "z.jsonl"))
    assert main(["bench", str(example_index.path), "beir/scifact/test", "--batch-sizes", "4", "--json", *data]) == 0
    assert [row["queries"] for row in json.loads(capsys.readouterr().out)] == [4]
