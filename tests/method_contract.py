"""The contract every method's retriever keeps, as a test base (PyTerrier's TransformerTestCase is the model):
a method's tests get it by subclassing `MethodContract` in a class named `Test...` and setting `method`
(plus `config`, `index` or `options` where the method needs more than the example index and its
defaults). Ten lines give a new method:

* a query ranks alike alone, in any batch and at any batch size (chunk ids and score bits);
* the order of a batch changes nobody's ranking;
* k: at most k distinct chunks, at most the index's chunks, k < 1 is an error, None the method's own depth;
* an empty query is an error; a query asked twice gets the same answer twice;
* the index saved and loaded again (its stage included) answers alike;
* every backend answers as NumPy does (the CuPy case runs where a GPU is; `backend` fixture).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from gpu_tigrag.config import RetrievalConfig
from gpu_tigrag.errors import TigragError
from gpu_tigrag.index.store import load_index, save_index
from gpu_tigrag.retrieve.factory import make_retriever
from helpers import QUESTIONS

#: questions of the example with one that matches nothing and one asked in two spellings
CONTRACT_QUESTIONS = [*QUESTIONS[:6], "quantum chromodynamics of orchards", QUESTIONS[0].upper()]


def answers(results: list) -> list[tuple[list[int], list[float]]]:
    """Each result's chunk ids and scores, exactly."""
    return [(list(map(int, r.chunk_ids)), [float(s) for s in r.scores]) for r in results]


class MethodContract:
    """Subclass as `class TestXContract(MethodContract): method = "x"` (module doc)."""

    method: str = ""
    k: int = 5

    def config(self) -> RetrievalConfig:
        """The configuration under test (default: the method's defaults)."""
        return RetrievalConfig.of(self.method)

    def index(self, example_index: Any) -> Any:
        """The index the method answers from: the example's, with the method's stage where it has one."""
        return example_index.index

    def options(self) -> dict[str, Any]:
        """Constructor options of the retriever (an encoder, a spaCy pipeline, ...)."""
        return {}

    @pytest.fixture(scope="class")
    @classmethod
    def contract_index(cls, example_index):
        return cls().index(example_index)

    def retriever(self, index: Any, backend: Any = "numpy", config: RetrievalConfig | None = None) -> Any:
        return make_retriever(index, config or self.config(), backend=backend, **self.options())

    def test_a_query_ranks_alike_alone_and_in_any_batch(self, contract_index):
        together = answers(self.retriever(contract_index).retrieve(CONTRACT_QUESTIONS, k=self.k))
        alone = [answers(self.retriever(contract_index).retrieve([q], k=self.k))[0] for q in CONTRACT_QUESTIONS]
        assert alone == together
        pairs = self.retriever(contract_index, config=dataclasses.replace(self.config(), batch_size=2))
        assert answers(pairs.retrieve(CONTRACT_QUESTIONS, k=self.k)) == together

    def test_the_order_of_a_batch_changes_no_ranking(self, contract_index):
        retriever = self.retriever(contract_index)
        forward = answers(retriever.retrieve(CONTRACT_QUESTIONS, k=self.k))
        assert answers(retriever.retrieve(CONTRACT_QUESTIONS[::-1], k=self.k))[::-1] == forward

    def test_k_bounds(self, contract_index):
        retriever = self.retriever(contract_index)
        n = contract_index.n_chunks
        for k in (1, self.k, n, n + 7):
            for result in retriever.retrieve(CONTRACT_QUESTIONS[:3], k=k):
                assert len(result.chunk_ids) <= min(k, n) and len(set(result.chunk_ids)) == len(result.chunk_ids)
                assert len(result.scores) == len(result.chunk_ids) == len(result.titles)
        default = answers(retriever.retrieve(CONTRACT_QUESTIONS[:2], k=None))  # the method's own depth
        assert all(len(ids) <= n for ids, _ in default)
        if retriever.default_k() >= 1:  # (SpectRAG's 0: its adaptive context alone)
            assert default == answers(retriever.retrieve(CONTRACT_QUESTIONS[:2], k=retriever.default_k()))
        for bad in (0, -1):
            with pytest.raises(TigragError, match="k .results per query. must be an integer >= 1"):
                retriever.retrieve(CONTRACT_QUESTIONS[:1], k=bad)

    def test_empty_and_repeated_queries(self, contract_index):
        retriever = self.retriever(contract_index)
        with pytest.raises(TigragError, match="query 2 is empty"):
            retriever.retrieve([QUESTIONS[0], "  "], k=self.k)
        first, again = answers(retriever.retrieve([QUESTIONS[1], QUESTIONS[1]], k=self.k))
        assert first == again

    def test_the_saved_index_answers_alike(self, contract_index, tmp_path):
        before = answers(self.retriever(contract_index).retrieve(CONTRACT_QUESTIONS, k=self.k))
        save_index(contract_index, tmp_path / "index")
        assert answers(self.retriever(load_index(tmp_path / "index")).retrieve(CONTRACT_QUESTIONS, k=self.k)) == before

    def test_every_backend_answers_as_numpy(self, contract_index, backend):
        reference = self.retriever(contract_index).retrieve(CONTRACT_QUESTIONS, k=self.k)
        got = self.retriever(contract_index, backend=backend).retrieve(CONTRACT_QUESTIONS, k=self.k)
        assert [r.chunk_ids for r in got] == [r.chunk_ids for r in reference]
        for a, b in zip(got, reference):
            assert a.scores == pytest.approx(b.scores, rel=1e-4, abs=1e-5)
