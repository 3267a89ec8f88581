"""The `BM25 passages` baseline (issue 32: a BM25 at parity with bm25s): whole passages, word tokens, Lucene's
stop words, Lucene's idf; each passage once in a ranking; scores independent of the batch; settings checked."""

from __future__ import annotations

import math
import sys

import numpy as np
import pytest

from helpers import EXAMPLES, QUESTIONS

from gpu_tigrag.cli import main
from gpu_tigrag.config import RetrievalConfig, replace_path
from gpu_tigrag.errors import TigragError
from gpu_tigrag.methods.baselines.passage_bm25 import analyzer, build_passage_bm25, first_chunks, passage_texts
from gpu_tigrag.retrieve.factory import make_retriever


def test_scores_are_lucene_bm25_by_hand():
    texts = ["The cat sat on the mat with another cat", "A dog and a cat", "Dogs bark at night"]
    bm25 = build_passage_bm25(texts, k1=1.5, b=0.75, stopwords="lucene", stemmer="none")
    tokens = analyzer("lucene", "none")
    assert tokens(texts[0]) == ["cat", "sat", "mat", "another", "cat"]  # "the", "on", "with" are stop words
    lengths = [len(tokens(t)) for t in texts]
    average = sum(lengths) / 3
    idf = math.log(1 + (3 - 2 + 0.5) / (2 + 0.5))  # "cat" is in two passages of three
    expected = [idf * tf / (tf + 1.5 * (1 - 0.75 + 0.75 * length / average)) for tf, length in
                zip((2, 1, 0), lengths)]
    row = bm25.postings[bm25.terms["cat"]].toarray().ravel()
    assert row == pytest.approx(expected, rel=1e-6)
    assert bm25.query_terms(["cat cat unknownword"])[0].tolist() == [bm25.terms["cat"]] * 2  # repeats kept


def test_passage_texts_and_first_chunks():
    chunk_passage = np.array([0, 0, 1, 2, 2, 2])
    assert passage_texts(["a", "b", "c", "d", "e", "f"], chunk_passage, 3) == ["a b", "c", "d e f"]
    assert first_chunks(chunk_passage, 3).tolist() == [0, 2, 3]


def test_rankings_hold_each_passage_once_and_ignore_the_batch(example_index):
    retriever = make_retriever(example_index.index, RetrievalConfig(method="bm25passages"), backend="numpy")
    together = retriever.retrieve(QUESTIONS, k=10)
    for query, result in zip(QUESTIONS, together):
        assert len(set(result.passage_ids)) == len(result.passage_ids) == 10
        alone = retriever.retrieve([query], k=10)[0]
        assert alone.chunk_ids == result.chunk_ids and alone.scores == result.scores
    assert together[0].titles[0] == "The Glass Orchard"


def test_settings_are_checked_and_the_stemmer_is_optional(example_index, monkeypatch):
    with pytest.raises(TigragError, match="bm25passages.stopwords"):
        replace_path(RetrievalConfig(method="bm25passages"), "bm25passages.stopwords", "klingon")
    config = replace_path(RetrievalConfig(method="bm25passages"), "bm25passages.stemmer", "english")
    from gpu_tigrag.methods.baselines import passage_bm25

    passage_bm25._stemmer.cache_clear()
    monkeypatch.setitem(sys.modules, "Stemmer", None)  # PyStemmer not installed
    with pytest.raises(TigragError, match="PyStemmer"):
        make_retriever(example_index.index, config, backend="numpy")
    passage_bm25._stemmer.cache_clear()


def test_cli_query_and_eval_name_it(example_index, capsys):
    assert main(["query", str(example_index.path), QUESTIONS[0], "--method", "bm25passages", "-k", "3"]) == 0
    assert "The Glass Orchard" in capsys.readouterr().out
    assert main(["eval", str(example_index.path), str(EXAMPLES / "questions.json"), "--systems", "BM25",
                 "BM25 passages", "-q"]) == 0
    assert "BM25 passages" in capsys.readouterr().out
