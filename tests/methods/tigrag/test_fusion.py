"""Fusion stages of the `best` preset against plain implementations, on every backend."""

import numpy as np
import pytest

from helpers import EXAMPLES
from gpu_tigrag.methods.tigrag.fusion import link_mask
from gpu_tigrag.ops.fusion import bm25_scores, reciprocal_rank
from gpu_tigrag.methods.tigrag.bridging import Bridge, rank_bridges


def plain_rrf(scores: np.ndarray, depth: int, k: int) -> np.ndarray:
    out = np.zeros_like(scores, dtype=np.float32)
    for j in range(scores.shape[1]):
        order = sorted(range(scores.shape[0]), key=lambda i: (-scores[i, j], i))[:depth]
        for rank, i in enumerate(order, start=1):
            if np.isfinite(scores[i, j]):
                out[i, j] = 1.0 / (k + rank)
    return out


def test_reciprocal_rank_matches_plain_ranks_with_ties_and_masked_entries(backend):
    rng = np.random.default_rng(0)
    scores = rng.integers(0, 5, size=(40, 7)).astype(np.float32)  # many ties: lower id ranks first
    scores[rng.random(scores.shape) < 0.3] = -np.inf
    got = backend.to_host(reciprocal_rank(backend, backend.asarray(scores), depth=10, k=60))
    np.testing.assert_allclose(got, plain_rrf(scores, 10, 60), rtol=1e-6)
    assert (got[~np.isfinite(scores)] == 0).all()


def test_link_mask_marks_every_chunk_of_linked_passages(backend):
    indptr = np.array([0, 2, 3, 6])  # passage 0 -> chunks 0,1; 1 -> 2; 2 -> 3,4,5
    members = np.array([0, 1, 2, 3, 4, 5])
    mask = backend.to_host(link_mask(backend, (indptr, members), [[2], [], [0, 1]], 6))
    expected = np.zeros((6, 3), dtype=bool)
    expected[[3, 4, 5], 0] = True
    expected[[0, 1, 2], 2] = True
    np.testing.assert_array_equal(mask, expected)


def test_bm25_scores_count_query_tokens_with_multiplicity(backend):
    import scipy.sparse

    bm25 = scipy.sparse.csr_matrix(np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]], dtype=np.float32))
    got = backend.to_host(bm25_scores(backend, backend.csr(bm25), [np.array([0, 0, 2]), np.array([1])], 3))
    np.testing.assert_allclose(got, [[4.0, 0.0], [0.0, 3.0]])


def test_bridges_naming_a_passage_come_first_then_by_ppr_mass(backend):
    ppr = np.zeros((5, 2), dtype=np.float32)
    ppr[:, 0] = [0.5, 0.1, 0.3, 0.0, 0.05]
    ppr[:, 1] = [0.0, 0.0, 0.0, 0.9, 0.0]
    lists = [
        [Bridge("a", "A", np.array([1])), Bridge("b", "B", np.array([0])), Bridge("c", "C", np.array([4]), (7,)),
         Bridge("d", "D", np.array([2, 3]))],
        [Bridge("e", "E", np.array([], dtype=np.int64)), Bridge("f", "F", np.array([3]))],
    ]
    ranked = rank_bridges(backend, backend.asarray(ppr), [0, 1], lists, limit=3)
    assert [b.key for b in ranked[0]] == ["c", "b", "d"]  # c names a passage; then 0.5 > 0.15 > 0.1
    assert [b.key for b in ranked[1]] == ["f", "e"]


@pytest.mark.parametrize("depth", [1, 3])
def test_reciprocal_rank_depth_bounds_the_ranked_entries(backend, depth):
    scores = np.arange(20, dtype=np.float32).reshape(10, 2)
    got = backend.to_host(reciprocal_rank(backend, backend.asarray(scores), depth=depth, k=0))
    assert ((got > 0).sum(axis=0) == depth).all()
    assert got[9, 0] == pytest.approx(1.0)


@pytest.mark.parametrize("unit", ["cosine_std", "absolute"])
def test_link_bonus_counts_in_the_queries_cosine_spread_or_in_cosine(backend, unit):
    from types import SimpleNamespace

    from gpu_tigrag.config import RetrievalConfig
    from gpu_tigrag.methods.tigrag.config import FusionConfig
    from gpu_tigrag.methods.tigrag.full_blocks import FullBlocks

    rng = np.random.default_rng(3)
    dense = rng.normal(0.5, [0.1, 0.02], size=(30, 2)).astype(np.float32)  # two encoders' spreads
    final = np.full((30, 2), -np.inf, dtype=np.float32)
    final[:10] = dense[:10]  # pooled chunks keep their score; others fall back to their cosine
    question = np.zeros((30, 2), dtype=bool)
    question[[3, 20], :] = True
    bridged = np.zeros((30, 2), dtype=bool)
    bridged[[5, 20], :] = True
    config = RetrievalConfig.of("tigrag", fusion=FusionConfig(title_links=True, question_link_bonus=5.0, bridge_link_bonus=2.0,
                                                 link_bonus_unit=unit))
    stub = SimpleNamespace(be=backend, config=config, settings=config.tigrag)
    got = backend.to_host(FullBlocks.add_link_bonus(stub, *(backend.asarray(a) for a in (final, dense, question, bridged))))
    scale = dense.std(axis=0) if unit == "cosine_std" else np.ones(2)
    expected = final.copy()
    base = np.where(np.isfinite(final), final, dense)
    for row, bonus in ((3, 5.0), (5, 2.0), (20, 7.0)):
        expected[row] = base[row] + bonus * scale
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_the_cosine_spread_of_a_query_has_the_same_bits_in_any_batch():
    """The cosine_std link bonus's spread (full_blocks.column_std): a column alone and the same column in a
    block of 16 give the same float32 (numpy's std down axis 0 did not: pairwise for one column, row by row
    for several, 1e-6 apart)."""
    from gpu_tigrag.methods.tigrag.full_blocks import column_std

    block = np.random.default_rng(0).standard_normal((7870, 16)).astype(np.float32)
    together = column_std(np, block)
    alone = np.array([column_std(np, np.ascontiguousarray(block[:, i:i + 1]))[0] for i in range(16)])
    np.testing.assert_array_equal(together, alone)
    np.testing.assert_allclose(together, block.std(axis=0), rtol=1e-5)


def test_best_scores_have_the_same_bits_alone_and_in_a_batch(example_index):
    from gpu_tigrag.evaluate.queries import load_queries
    from gpu_tigrag.methods.tigrag.retriever import TigragRetriever
    from gpu_tigrag.presets import preset

    questions = [q.text for q in load_queries(EXAMPLES / "questions.json")]
    retriever = TigragRetriever(example_index.index, preset("best"), backend="numpy")
    together = retriever.retrieve(questions, k=10)
    for question, batched in zip(questions, together):
        alone = retriever.retrieve(question, k=10)[0]
        assert alone.chunk_ids == batched.chunk_ids and alone.scores == batched.scores
