"""The screened dense search (ops/screen.py): a BLAS product screens, `query_dot`'s bits decide, and the top k
is the plain scan's, ids and cosines bit for bit, on near-ties, duplicates, any norms, any batch."""

import numpy as np
import pytest

from gpu_tigrag.backend import get_backend
from gpu_tigrag.ops import screen
from gpu_tigrag.ops.dense_dot import query_dot
from gpu_tigrag.ops.screen import dot_error_bound, screen_slack, screened_top_k
from gpu_tigrag.retrieve.first_stage import SCREEN_MIN_QUERIES, SCREEN_MIN_ROWS, SCREEN_ROWS_PER_K, FlatSearch


def near_ties(n: int = 3000, dim: int = 64, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Rows crowding the queries' cuts: a few directions, each repeated with perturbations of ~1e-6 (cosines
    that differ in their last bits), exact duplicates, rows of other norms, a zero row; queries along the
    directions, one of them zero."""
    rng = np.random.default_rng(seed)
    directions = rng.standard_normal((4, dim))
    rows = directions[rng.integers(0, 4, n)] + 1e-6 * rng.standard_normal((n, dim))
    rows[::7] = rows[3]  # exact duplicates: equal cosines, chunk-id order
    rows[::11] *= 3.0
    rows[5] = 0.0
    rows = (rows / np.linalg.norm(directions, axis=1).mean()).astype(np.float32)
    vectors = (directions[rng.integers(0, 4, 40)] + 0.3 * rng.standard_normal((40, dim))).astype(np.float32)
    vectors[7] = 0.0
    return rows, vectors


def blas(vectors, rows, out):
    """The screening product, as FlatSearch gives it: into the caller's buffer."""
    return np.matmul(vectors, rows.T, out=out)


def search_both(be, rows, vectors, k, block_rows=700):
    flat = FlatSearch(be, rows)
    screened = screened_top_k(be, rows, vectors, k, flat.max_row_norm(), block_rows, blas, flat.scan)
    return screened, flat.scan(vectors, k)


@pytest.mark.parametrize("k", [1, 10, 57, 3000])
def test_the_screened_top_k_is_the_scan_bit_for_bit(k):
    be = get_backend("numpy")
    rows, vectors = near_ties()
    for width in (1, 9, 40):
        (ids, vals), (scan_ids, scan_vals) = search_both(be, rows, vectors[:width], k)
        assert ids.shape == (k, width) and ids.dtype == np.int64 and vals.dtype == np.float32
        np.testing.assert_array_equal(ids, scan_ids)
        np.testing.assert_array_equal(vals, scan_vals)


def test_the_slack_is_what_makes_it_exact(monkeypatch):
    """With no slack the screen keeps only the BLAS's own top k, and where the BLAS's bits differ from the
    k-order sums at a cut (they do on these near-ties) the ranking differs from the scan."""
    be = get_backend("numpy")
    rows, vectors = near_ties(seed=1)
    blas = vectors @ rows.T
    if np.array_equal(blas, query_dot(be, rows, vectors).T):
        pytest.skip("this BLAS gives the k-order bits here: no cut to get wrong")
    monkeypatch.setattr(screen, "screen_slack", lambda v, norm: np.zeros(len(v)))
    differ = 0
    for k in (1, 3, 10, 25):
        (ids, vals), (scan_ids, scan_vals) = search_both(be, rows, vectors, k)
        differ += int((ids != scan_ids).any(axis=0).sum())
    assert differ > 0


def test_the_slack_bounds_the_difference_of_any_two_summation_orders():
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((500, 384)).astype(np.float32)
    vectors = rng.standard_normal((20, 384)).astype(np.float32)
    exact = vectors.astype(np.float64) @ rows.T.astype(np.float64)
    half = screen_slack(vectors, float(np.linalg.norm(rows, axis=1).max()))[:, None] / 4  # γ·‖q‖·max‖e‖
    for computed in (vectors @ rows.T, query_dot(get_backend("numpy"), rows, vectors).T,
                     np.cumsum(vectors[:, None, :] * rows[None, :, :], axis=2, dtype=np.float32)[..., -1]):
        assert (np.abs(computed - exact) <= half).all()
    assert dot_error_bound(384) == pytest.approx(384 * 2.0 ** -24, rel=1e-4)
    with pytest.raises(ValueError):
        dot_error_bound(1 << 23)


def test_a_query_whose_candidates_overflow_is_answered_by_the_scan():
    """Thousands of copies of the best row: more candidates than the buffer holds (4k + 1024), so the query
    goes to the scan, and its answer is still the scan's."""
    be = get_backend("numpy")
    rng = np.random.default_rng(3)
    rows = rng.standard_normal((5000, 32)).astype(np.float32)
    rows[1000:3500] = rows[0]
    vectors = np.stack([rows[0], rng.standard_normal(32).astype(np.float32)])
    flat = FlatSearch(be, rows)
    asked = []

    def scan(v, k):
        asked.append(v.shape[0])
        return flat.scan(v, k)

    ids, vals = screened_top_k(be, rows, vectors, 5, flat.max_row_norm(), 1024, blas, scan)
    scan_ids, scan_vals = flat.scan(vectors, 5)
    assert asked == [1]
    np.testing.assert_array_equal(ids, scan_ids)
    np.testing.assert_array_equal(vals, scan_vals)
    assert ids[:, 0].tolist() == [0, 1000, 1001, 1002, 1003]


def test_the_device_steps_give_the_host_kernels_answer(monkeypatch):
    """The GPU's per-block steps (CuPy partitions and masks) run here on NumPy arrays: same top k."""
    be = get_backend("numpy")
    rows, vectors = near_ties(seed=4)
    host = [search_both(be, rows, vectors, k)[0] for k in (1, 10, 57)]
    monkeypatch.setattr(screen, "_HostScreen", screen._DeviceScreen)
    for k, (ids, vals) in zip((1, 10, 57), host):
        (dev_ids, dev_vals), _ = search_both(be, rows, vectors, k)
        np.testing.assert_array_equal(dev_ids, ids)
        np.testing.assert_array_equal(dev_vals, vals)


def test_flat_search_screens_large_batches_and_answers_as_the_scan(backend):
    rows, vectors = near_ties(n=max(SCREEN_MIN_ROWS, SCREEN_ROWS_PER_K * 10) + 500, seed=5)
    rows, vectors = backend.asarray(rows), backend.asarray(vectors)
    flat = FlatSearch(backend, rows)
    calls = []
    original = screen.screened_top_k

    def spy(*args, **kwargs):
        calls.append(args[2].shape[0])
        return original(*args, **kwargs)

    import gpu_tigrag.retrieve.first_stage as first_stage
    first_stage.screened_top_k, saved = spy, first_stage.screened_top_k
    try:
        for width in (1, SCREEN_MIN_QUERIES, 40):
            ids, vals = flat.search(vectors[:width], 10)
            scan_ids, scan_vals = flat.scan(vectors[:width], 10)
            np.testing.assert_array_equal(backend.to_host(ids), backend.to_host(scan_ids))
            np.testing.assert_array_equal(backend.to_host(vals), backend.to_host(scan_vals))
        deep = int(rows.shape[0]) // SCREEN_ROWS_PER_K + 1
        flat.search(vectors, deep)
        flat.search(vectors, deep - 1)
    finally:
        first_stage.screened_top_k = saved
    assert calls == [SCREEN_MIN_QUERIES, 40, 40]  # the last: a top k too deep for this many rows, the scan
    # a query's answer alone = in its batch
    alone = flat.search(vectors[3:4], 10)
    batch = flat.search(vectors, 10)
    np.testing.assert_array_equal(backend.to_host(alone[0])[:, 0], backend.to_host(batch[0])[:, 3])
    np.testing.assert_array_equal(backend.to_host(alone[1])[:, 0], backend.to_host(batch[1])[:, 3])
