"""The engine's BM25 baselines against bm25s, in one run, scored by one scorer (issue 32).

    python bench/bm25_parity.py [--datasets beir_scifact 2wikimultihopqa musique_train100]
    python bench/bm25_parity.py --smoke     # the bundled example, writes nothing

Rows: `BM25` (the paper's: graph tokens of chunks, the arrays TIGRAG's eq. 3.6 uses), `BM25 passages`
(whole passages, word tokens, Lucene's stop words: methods/baselines/passage_bm25.py) without and with
the Snowball stemmer, and bm25s 0.3 (`BM25()`, `tokenize(stopwords="en")`, without and with PyStemmer's
English stemmer) over each passage's title and text. Every run is a passage ranking scored by
ir_measures against the dataset's qrels (title gold named by passage id, `gold_as_passage_ids`), so the
rows differ only by their BM25. Each index is built once (cached under .cache/bench/) with the stand-ins
`encoder.model=hashing:64` and `entities.model=capitalized`: no BM25 reads vectors or entities.
Writes bench/results/bm25_parity.json and .md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not __package__:  # run as `python bench/X.py`: import the `bench` package from the repository root
    sys.path[0] = str(Path(__file__).resolve().parents[1])

from bench.common import CACHE, DATA, ROOT, code_version, write_results  # noqa: E402

STANDINS = ["--set", "encoder.model=hashing:64", "--set", "entities.model=capitalized"]
CORPORA = {"beir_scifact": "beir_scifact/corpus.jsonl",
           "2wikimultihopqa": "2wikimultihopqa/2wikimultihopqa_corpus.json",
           "musique_train100": "musique_train100/musique_train_corpus.json"}
MEASURES = ("nDCG@10", "R@5", "R@100")
ENGINE_ROWS = {"BM25 (paper: graph tokens, chunks)": ("BM25", {}),
               "BM25 passages": ("BM25 passages", {}),
               "BM25 passages, stemmed": ("BM25 passages", {"bm25passages.stemmer": "english"})}
DEPTH = 100


def build(corpus: Path, out: Path) -> None:
    if (out / "manifest.json").is_file():
        return
    done = subprocess.run([sys.executable, "-m", "gpu_tigrag.cli", "index", str(corpus), "-o", str(out), *STANDINS,
                           "-q"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"building the index of {corpus} failed:\n{done.stderr[-2000:]}")


def passage_texts(corpus: Path) -> tuple[list[str], list[str]]:
    """(passage ids, "title text") of a corpus file, read as the engine reads it (the same ids)."""
    from gpu_tigrag.corpus import load_corpus

    passages = load_corpus([corpus])
    return [p.doc_id for p in passages], [f"{p.title} {p.text}".strip() for p in passages]


def bm25s_run(ids: list[str], texts: list[str], queries, stem: bool) -> tuple[dict, float]:
    import bm25s

    stemmer = None
    if stem:
        import Stemmer

        stemmer = Stemmer.Stemmer("english")
    start = time.perf_counter()
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    found, scores = retriever.retrieve(bm25s.tokenize([q.text for q in queries], stopwords="en", stemmer=stemmer,
                                                      show_progress=False),
                                       k=min(DEPTH, len(ids)), show_progress=False)
    seconds = time.perf_counter() - start
    runs = {}
    for q, row, vals in zip(queries, found, scores):
        ranking: dict[str, float] = {}
        for d, s in zip(row, vals):  # best first: a passage id shared by several passages (MuSiQue's titles) keeps
            ranking.setdefault(ids[int(d)], float(s))  # its best score, as the engine's passage ranking does
        runs[q.qid] = ranking
    return runs, seconds


def engine_runs(index, dataset) -> dict[str, tuple[dict, float]]:
    from gpu_tigrag.config import replace_path
    from gpu_tigrag.evaluate.experiment import Experiment, passage_rankings, system_config
    from gpu_tigrag.methods.registry import systems

    experiment = Experiment(index, dataset, backend="numpy")
    experiment.depth = DEPTH
    out = {}
    for label, (system, settings) in ENGINE_ROWS.items():
        config = system_config(systems()[system], experiment.base)
        for path, value in settings.items():
            config = replace_path(config, path, value)
        run = experiment.run_config(label, config)
        rankings = passage_rankings(index, run)
        out[label] = ({q.qid: dict(r) for q, r in zip(dataset.queries, rankings)}, run.seconds)
    return out


def score(run: dict, qrels: dict) -> dict[str, float]:
    import ir_measures

    measures = [ir_measures.parse_measure(m) for m in MEASURES]
    aggregate = ir_measures.calc_aggregate(measures, qrels, run)
    return {str(m): float(aggregate[m]) for m in measures}


def dataset_rows(name: str, corpus: Path, queries_path: Path, folder: Path) -> dict:
    from gpu_tigrag.evaluate.datasets import load_dataset
    from gpu_tigrag.evaluate.experiment import gold_as_passage_ids
    from gpu_tigrag.index.store import load_index

    build(corpus, folder)
    index = load_index(folder)
    dataset = load_dataset(queries_path)
    qrels = {q.qid: q.grades() for q in gold_as_passage_ids(index, dataset)}
    rows = {label: {**score(run, qrels), "seconds": seconds} for label, (run, seconds) in
            engine_runs(index, dataset).items()}
    ids, texts = passage_texts(corpus)
    for stem in (False, True):
        run, seconds = bm25s_run(ids, texts, dataset.queries, stem)
        rows["bm25s" + (", stemmed" if stem else "")] = {**score(run, qrels), "seconds": seconds}
    from gpu_tigrag.methods.baselines.passage_bm25 import passage_texts as joined_chunks

    joined = joined_chunks(index.chunk_texts, index.chunk_passage, len(index.passage_titles))
    run, seconds = bm25s_run(list(index.passage_ids), joined, dataset.queries, False)
    rows["bm25s over the engine's passage texts"] = {**score(run, qrels), "seconds": seconds}
    print(f"[{name}] " + "; ".join(f"{k} {v['nDCG@10']:.4f}" for k, v in rows.items()), file=sys.stderr)
    return {"queries": len(dataset.queries), "passages": len(index.passage_titles), "chunks": index.n_chunks,
            "rows": rows}


def markdown(payload: dict) -> str:
    lines = ["# BM25 at parity: the engine's BM25 baselines against bm25s", "",
             f"Command: `{payload['command']}` (code {payload['code']}). One scorer for every row: ir_measures on "
             "passage runs of depth 100 against the dataset's qrels (title gold named by passage id). bm25s "
             f"{payload['bm25s']}: `BM25()` (k1 1.5, b 0.75), `tokenize(stopwords=\"en\")` over each passage's "
             "title and text; stemmed: PyStemmer's English Snowball stemmer in both.", ""]
    for name, data in payload["datasets"].items():
        lines += [f"## {name} ({data['queries']} queries, {data['passages']:,} passages, {data['chunks']:,} chunks)", "",
                  "| run | " + " | ".join(MEASURES) + " | against bm25s (nDCG@10, points) | seconds |",
                  "|---|" + "---|" * (len(MEASURES) + 2)]
        rows = data["rows"]
        for label, row in rows.items():
            twin = rows["bm25s, stemmed" if "stemmed" in label else "bm25s"]["nDCG@10"]
            lines.append(f"| {label} | " + " | ".join(f"{100 * row[m]:.2f}" for m in MEASURES)
                         + f" | {100 * (row['nDCG@10'] - twin):+.2f} | {row['seconds']:.2f} |")
        lines.append("")
    lines += ["`BM25` is the paper's BM25 (graph tokens: φ keeps tokens of three or more characters and numbers of "
              "three or more digits, NLTK's 179 stop words; one score per chunk): TIGRAG's eq. 3.6 multiplies these "
              "arrays, and its row is the lexical baseline of the paper's tables. `BM25 passages` is the baseline a "
              "reviewer compares with bm25s and Pyserini: whole passages (their chunks joined), word tokens "
              "(`\\w\\w+`), Lucene's 33 English stop words, Lucene's idf; its `against bm25s` column compares it "
              "with bm25s under the same stemming. The last row gives bm25s the engine's passage texts (each "
              "passage's chunks joined: every chunk begins with the passage's title, and sentences shared by "
              "overlapping chunks count twice): what is left between it and `BM25 passages` is the scoring, the rest "
              "is the texts. Seconds: the engine's retrieval call after a warm-up; bm25s's "
              "index and retrieve together."]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--datasets", nargs="+", default=list(CORPORA), choices=list(CORPORA))
    parser.add_argument("--smoke", action="store_true", help="the bundled example (15 queries); writes nothing")
    args = parser.parse_args()
    import bm25s

    payload = {"command": " ".join(["python bench/bm25_parity.py", *sys.argv[1:]]), "code": code_version(),
               "bm25s": bm25s.__version__, "datasets": {}}
    if args.smoke:
        with tempfile.TemporaryDirectory(prefix="bm25_parity_") as scratch:
            examples = ROOT / "examples"
            payload["datasets"]["example"] = dataset_rows("example", examples / "corpus.json",
                                                          examples / "questions.json", Path(scratch) / "index")
        print(markdown(payload))
        return
    for name in args.datasets:
        payload["datasets"][name] = dataset_rows(name, DATA / CORPORA[name], DATA / name, CACHE / f"bm25_{name}")
    write_results("bm25_parity", payload, markdown(payload))
    print(markdown(payload))


if __name__ == "__main__":
    main()
