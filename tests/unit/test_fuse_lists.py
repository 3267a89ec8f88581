"""`ops.fusion.fuse_lists`: weighted reciprocal-rank fusion of ranked lists without a chunks × B block gives what
the blocks give (`reciprocal_rank` of each list times its weight, added in list order, `fused_then_cosine`, a ranked
top-k), id for id and score for score, with ties, lists of different lengths, and with or without the cosine tail."""

import numpy as np
import pytest

from gpu_tigrag.backend import get_backend
from gpu_tigrag.ops.fusion import fuse_lists, fused_then_cosine, reciprocal_rank
from gpu_tigrag.ops.topk import ranked_top_k


def _ranked(scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """B × depth ids (best first, ties by id; -1 past the finite entries) and counts of a chunks × B score block."""
    order = np.lexsort((np.arange(scores.shape[0])[:, None].repeat(scores.shape[1], 1).T, -scores.T))[:, :depth]
    finite = np.isfinite(np.take_along_axis(scores.T, order, axis=1))
    return np.where(finite, order, -1), finite.sum(axis=1)


@pytest.mark.parametrize("with_tail", [True, False])
def test_fuse_lists_gives_the_blocks_ids_and_scores(with_tail):
    be = get_backend("numpy")
    rng = np.random.default_rng(7)
    n, width, depth, k_rrf = 300, 9, 40, 60
    cosine = rng.integers(-50, 50, (n, width)).astype(np.float32) / 50  # many equal cosines
    own = np.where(rng.random((n, width)) < 0.15, rng.integers(1, 6, (n, width)).astype(np.float32), -np.inf)
    lexical = np.where(rng.random((n, width)) < 0.3, rng.integers(1, 9, (n, width)).astype(np.float32), -np.inf)
    own[:, 4] = -np.inf  # a query its own list does not reach
    weights = (1.0, 2.0, 4.0)
    for k in (1, 10, 75, n):
        fused = reciprocal_rank(be, own, depth, k_rrf)
        if with_tail:
            fused += np.float32(weights[1]) * reciprocal_rank(be, cosine, depth, k_rrf)
        fused += np.float32(weights[2]) * reciprocal_rank(be, lexical, depth, k_rrf)
        ids, vals = ranked_top_k(be, fused_then_cosine(be, fused, cosine if with_tail else None), k)
        own_ids, own_counts = _ranked(own, depth)
        lexical_ids, lexical_counts = _ranked(lexical, depth)
        dense_ids, _ = _ranked(cosine, min(n, k + depth))
        dense_vals = np.take_along_axis(cosine.T, dense_ids, axis=1)
        lists = [(own_ids, own_counts, weights[0])]
        if with_tail:
            lists.append((dense_ids, np.full(width, depth), weights[1]))
        lists.append((lexical_ids, lexical_counts, weights[2]))
        got_ids, got_vals, counts = fuse_lists(lists, k_rrf, k, (dense_ids, dense_vals) if with_tail else None)
        for q in range(width):
            keep = np.isfinite(vals[:, q])
            assert counts[q] == keep.sum(), (k, q)
            assert got_ids[q, :counts[q]].tolist() == ids[keep, q].tolist(), (k, q)
            assert np.array_equal(got_vals[q, :counts[q]], vals[keep, q].astype(np.float64)), (k, q)
            assert (got_ids[q, counts[q]:] == -1).all()


def test_fuse_lists_one_query_alone_is_the_same_as_in_its_batch():
    rng = np.random.default_rng(1)
    ids = np.array([rng.permutation(50)[:20] for _ in range(6)])
    counts = np.array([20, 3, 0, 20, 11, 7])
    other = np.array([rng.permutation(50)[:10] for _ in range(6)])
    batch = fuse_lists([(ids, counts, 1.0), (other, np.full(6, 10), 0.5)], 60, 15)
    for q in range(6):
        alone = fuse_lists([(ids[q:q + 1], counts[q:q + 1], 1.0), (other[q:q + 1], np.array([10]), 0.5)], 60, 15)
        c = batch[2][q]
        assert alone[2][0] == c
        assert alone[0][0, :c].tolist() == batch[0][q, :c].tolist()
        assert np.array_equal(alone[1][0, :c], batch[1][q, :c])
