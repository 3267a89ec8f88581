"""The title-link lift of a ranked block (ops/title_lift.py) against a per-query reference written with dicts."""

import numpy as np
import pytest
import scipy.sparse

from gpu_tigrag.ops.title_lift import lift_named


def reference(ids, scores, links, count, lift, k):
    out = []
    for row_ids, row_scores in zip(ids, scores):
        ranked = [(int(c), float(s)) for c, s in zip(row_ids, row_scores) if c >= 0]
        top = ranked[0][1] if ranked else 0.0
        head = [c for c, _ in ranked[:count]]
        lifted = set(head) | {int(c) for h in head for c in links[h].indices}
        entries = [(c, s + (lift * top if c in lifted else 0.0), i, c in lifted) for i, (c, s) in enumerate(ranked)]
        new = sorted(lifted - {c for c, _ in ranked})
        entries += [(c, lift * top, len(row_ids) + j, True) for j, c in enumerate(new)]
        entries.sort(key=lambda e: (-e[1], e[2]))
        out.append([(c, s, up) for c, s, _, up in entries[:k]])
    return out


@pytest.mark.parametrize("count, lift, k", [(1, 0.5, 6), (2, 1.0, 4), (3, 0.1, 10), (1, 0.0, 6)])
def test_lift_named_matches_the_reference(count, lift, k):
    rng = np.random.default_rng(count * 10 + k)
    n, width, depth = 30, 5, 8
    links = scipy.sparse.random(n, n, density=0.08, random_state=3, format="csr", dtype=np.float32)
    links.data[:] = 1
    ids = np.full((width, depth), -1, dtype=np.int64)
    scores = np.zeros((width, depth))
    for q in range(width):
        m = [8, 5, 0, 3, 8][q]
        ids[q, :m] = rng.choice(n, m, replace=False)
        scores[q, :m] = np.sort(rng.random(m))[::-1]
    got_ids, got_scores, got_lifted = lift_named(ids, scores, links, count, lift, k)
    for q, want in enumerate(reference(ids, scores, links, count, lift, k)):
        row = [(int(c), float(s), bool(u)) for c, s, u in zip(got_ids[q], got_scores[q], got_lifted[q]) if c >= 0]
        assert [c for c, _, _ in row] == [c for c, _, _ in want]
        np.testing.assert_allclose([s for _, s, _ in row], [s for _, s, _ in want])
        assert [u for _, _, u in row] == [u for _, _, u in want]
        assert np.all(got_ids[q, len(row):] == -1)
    assert (got_ids[2] == -1).all()  # a query with no ranking gets nothing


def test_a_named_chunk_outranks_what_it_should():
    """One query: chunk 4 names chunk 9, which the ranking lacks; lifted by 0.5 × the top score it enters under 7
    (0.8), by 1.0 above it."""
    links = scipy.sparse.csr_matrix(([1.0], ([4], [9])), shape=(10, 10))
    ids, scores, lifted = lift_named(np.array([[4, 7, 2]]), np.array([[1.0, 0.8, 0.3]]), links, 1, 0.5, 3)
    assert ids.tolist() == [[4, 7, 9]]  # 0.8 > 0.5: the named chunk, lifted to 0.5 from nothing, stays under 7
    assert scores.tolist() == [[1.5, 0.8, 0.5]] and lifted.tolist() == [[True, False, True]]
    ids, _, lifted = lift_named(np.array([[4, 7, 2]]), np.array([[1.0, 0.8, 0.3]]), links, 1, 1.0, 3)
    assert ids.tolist() == [[4, 9, 7]] and lifted.tolist() == [[True, True, False]]
