"""The batch-independent dense product (kernels/dense_dot.py, ops/dense_dot.py): a query's cosines are the same
bits alone or in any batch, on any slice of the chunk rows, on the CPU twin and the CUDA kernel (simulator)."""

import os
import subprocess
import sys
import textwrap

import numpy as np

from gpu_tigrag.backend import get_backend
from gpu_tigrag.ops.dense_dot import RowTiles, query_dot


def test_a_query_gets_the_same_bits_in_any_batch_and_on_any_row_slice():
    be = get_backend("numpy")
    rng = np.random.default_rng(0)
    rows = rng.standard_normal((1001, 96)).astype(np.float32)
    vectors = rng.standard_normal((37, 96)).astype(np.float32)
    full = query_dot(be, rows, vectors)
    assert full.dtype == np.float32 and full.shape == (1001, 37)
    np.testing.assert_allclose(full, rows.astype(np.float64) @ vectors.T.astype(np.float64), rtol=0, atol=1e-4)
    for start, size in ((0, 1), (5, 1), (3, 7), (9, 28), (36, 1)):
        np.testing.assert_array_equal(query_dot(be, rows, vectors[start:start + size]), full[:, start:start + size])
    for lo, hi in ((0, 1), (1, 2), (3, 1000), (999, 1001), (500, 777)):
        np.testing.assert_array_equal(query_dot(be, rows[lo:hi], vectors), full[lo:hi])
    for lo, hi, width in ((3, 1000, 2), (999, 1001, 1), (0, 1001, 8), (2, 5, 3)):  # either side of NARROW_WIDTH
        np.testing.assert_array_equal(query_dot(be, rows[lo:hi], vectors[:width]), full[lo:hi, :width])
    np.testing.assert_array_equal(query_dot(be, rows.astype(np.float64), vectors), full)  # taken as float32
    assert query_dot(be, rows[:0], vectors).shape == (0, 37) and query_dot(be, rows, vectors[:0]).shape == (1001, 0)


def _k_order_dot(rows, vectors_t, out):
    """The product as a plain loop: each sum from 0, product by product in k order (numba's IEEE semantics)."""
    for i in range(rows.shape[0]):
        for b in range(vectors_t.shape[1]):
            total = np.float32(0.0)
            for k in range(rows.shape[1]):
                total += rows[i, k] * vectors_t[k, b]
            out[i, b] = total


def test_the_wide_products_register_tiles_are_the_plain_loops_bits():
    """`wide_dot_cpu` keeps 8 rows × 32 queries of sums in vector registers: row counts and widths either side of
    the tile's edges give the plain k-order loop's bits, and nothing past `out`'s rows is written."""
    from numba import njit

    from gpu_tigrag.kernels.dense_dot import wide_dot_cpu

    reference = njit(_k_order_dot)
    rng = np.random.default_rng(5)
    for n, width, dim in ((1, 8, 3), (7, 31, 16), (8, 32, 96), (9, 33, 96), (17, 64, 5), (30, 70, 384), (11, 530, 7)):
        rows = rng.standard_normal((n, dim)).astype(np.float32)
        vectors_t = np.ascontiguousarray(rng.standard_normal((width, dim)).astype(np.float32).T)
        want, got = np.empty((n, width), np.float32), np.full((n + 1, width), 7.0, np.float32)
        reference(rows, vectors_t, want)
        wide_dot_cpu(rows, vectors_t, got[:n])  # a guard row after the product's rows
        assert np.array_equal(got[:n].view(np.int32), want.view(np.int32)), (n, width, dim)
        assert (got[n] == 7.0).all()


def test_tiled_rows_give_the_same_bits_for_a_few_queries():
    """RowTiles (the transposed copy a device keeps for products of up to TILED_MAX_WIDTH queries) change
    the speed, never a bit: any row count against the tile size, every width either side of the limit."""
    from gpu_tigrag.kernels.dense_dot import TILE, TILED_MAX_WIDTH

    be = get_backend("numpy")
    rng = np.random.default_rng(3)
    for n in (1, TILE - 1, TILE, TILE + 1, 3 * TILE + 17):
        rows = rng.standard_normal((n, 48)).astype(np.float32)
        vectors = rng.standard_normal((TILED_MAX_WIDTH + 3, 48)).astype(np.float32)
        tiles = RowTiles(rows, min_rows=1)
        full = query_dot(be, rows, vectors)  # wide: no tiles at this width
        for width in (1, 2, 7, 8, 9, TILED_MAX_WIDTH, TILED_MAX_WIDTH + 1):
            np.testing.assert_array_equal(query_dot(be, rows, vectors[:width], tiles), full[:, :width])
            np.testing.assert_array_equal(query_dot(be, rows, vectors[:width]), full[:, :width])
        assert tiles._tiles is not None and tiles._tiles.shape == ((n + TILE - 1) // TILE, 48, TILE)
    other = rng.standard_normal((5, 48)).astype(np.float32)
    try:
        query_dot(be, other, vectors[:1], RowTiles(rows, min_rows=1))
    except ValueError as exc:
        assert "tiles of" in str(exc)
    else:
        raise AssertionError("tiles of other rows were accepted")


def test_flat_search_ranks_the_same_with_tiles():
    from gpu_tigrag.retrieve.first_stage import FlatSearch

    be = get_backend("numpy")
    rng = np.random.default_rng(4)
    rows = rng.standard_normal((700, 32)).astype(np.float32)
    rows[5] = rows[9]  # an exact tie: chunk-id order either way
    vectors = rng.standard_normal((12, 32)).astype(np.float32)
    vectors[0] = rows[5]
    plain, tiled = FlatSearch(be, rows), FlatSearch(be, rows, RowTiles(rows, min_rows=1))
    for width in (1, 3, 12):
        for a, b in zip(plain.search(vectors[:width], 10), tiled.search(vectors[:width], 10)):
            np.testing.assert_array_equal(a, b)
    ids, _ = tiled.search(vectors[:1], 3)
    assert ids[:2, 0].tolist() == [5, 9]
    assert tiled.tiles._tiles is not None
    untiled = RowTiles(rows)  # 700 rows: below TILED_MIN_ROWS, never copied
    query_dot(be, rows, vectors[:1], untiled)
    assert untiled._tiles is None


def test_blas_would_fail_this():
    """Why the kernel exists: sgemm's result for one column moves with the batch on this machine's BLAS (a
    machine whose BLAS happens to keep them equal passes trivially, hence no assertion on BLAS itself)."""
    rng = np.random.default_rng(1)
    rows = rng.standard_normal((5000, 384)).astype(np.float32)
    vectors = rng.standard_normal((64, 384)).astype(np.float32)
    blas_moves = not np.array_equal((rows @ vectors.T)[:, :1], rows @ vectors[:1].T)
    ours = query_dot(get_backend("numpy"), rows, vectors)[:, :1]
    np.testing.assert_array_equal(ours, query_dot(get_backend("numpy"), rows, vectors[:1]))
    print("BLAS column moves with the batch:", blas_moves)


SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    from gpu_tigrag.kernels.dense_dot import query_dot_cpu, query_dot_cuda
    rng = np.random.default_rng(2)
    rows = rng.standard_normal((13, 8)).astype(np.float32)
    vt = np.ascontiguousarray(rng.standard_normal((5, 8)).astype(np.float32).T)
    cpu = np.empty((13, 5), np.float32)
    query_dot_cpu(rows, vt, cpu)
    out = cuda.to_device(np.zeros((13, 5), np.float32))
    query_dot_cuda(cuda.to_device(rows), cuda.to_device(vt), out, threads=(4, 4))
    gpu = out.copy_to_host()
    assert np.allclose(gpu, cpu, atol=1e-6), (gpu, cpu)
    one = cuda.to_device(np.zeros((13, 1), np.float32))
    query_dot_cuda(cuda.to_device(rows), cuda.to_device(np.ascontiguousarray(vt[:, 2:3])), one, threads=(4, 4))
    assert np.array_equal(one.copy_to_host()[:, 0], gpu[:, 2])
    from gpu_tigrag.kernels.dense_dot import gather_max_dot_cpu, gather_max_dot_cuda
    vectors = np.ascontiguousarray(vt.T)
    chunks, first, counts = (np.array(x, dtype=np.int64) for x in ([0, 12, 5, 5], [0, 1, 3, 0], [2, 0, 1, 4]))
    want = np.empty(4, np.float32)
    gather_max_dot_cpu(rows, vectors, chunks, first, counts, want)
    got = cuda.to_device(np.zeros(4, np.float32))
    gather_max_dot_cuda(cuda.to_device(rows), cuda.to_device(vectors), cuda.to_device(chunks), cuda.to_device(first),
                        cuda.to_device(counts), got, threads=2)
    assert np.allclose(got.copy_to_host(), want, atol=1e-6) and want[1] == -np.inf, (got.copy_to_host(), want)
    assert want[0] == max(cpu[0, 0], cpu[0, 1]) and want[3] == cpu[5, :4].max()  # the dense product's bits
    from gpu_tigrag.kernels.dense_dot import best_dot_per_slot_cpu, best_dot_per_slot_cuda
    slot_rows, ptr, ids = (np.array(x, dtype=np.int64) for x in ([0, 4, 2, 1], [0, 3, 3, 5, 13], [4, 0, 9, 7, 7, *range(8)]))
    want = np.empty(4, np.int64)
    best_dot_per_slot_cpu(vectors, rows, slot_rows, ptr, ids, want)
    got = cuda.to_device(np.zeros(4, np.int64))
    best_dot_per_slot_cuda(cuda.to_device(vectors), cuda.to_device(rows), cuda.to_device(slot_rows), cuda.to_device(ptr),
                           cuda.to_device(ids), got, threads=2)
    assert np.array_equal(got.copy_to_host(), want) and want[1] == -1, (got.copy_to_host(), want)
    assert want[0] == (4, 0, 9)[int(np.argmax(cpu[[4, 0, 9], 0]))] and want[3] == int(np.argmax(cpu[:8, 1]))
    print("SIM-OK")
""")


def test_cuda_kernel_matches_the_cpu_twin_under_the_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]


def test_best_dot_per_slot_is_the_best_scored_pair_ties_to_the_lower_id_whatever_the_other_slots():
    from gpu_tigrag.ops.dense_dot import best_dot_per_slot

    be = get_backend("numpy")
    rng = np.random.default_rng(3)
    table = rng.standard_normal((50, 16)).astype(np.float32)
    table[31] = table[7]  # equal rows: equal dots, the lower id wins
    vectors = rng.standard_normal((6, 16)).astype(np.float32)
    vectors[2] = table[7] * 3  # row 2's best is rows 7 and 31, tied
    slots = [(0, [5, 1, 40]), (2, [31, 3, 7]), (2, []), (5, list(range(50))), (1, [12]), (2, [31, 49])]
    rows = np.array([r for r, _ in slots], dtype=np.int64)
    ptr = np.concatenate([[0], np.cumsum([len(c) for _, c in slots])]).astype(np.int64)
    ids = np.array([c for _, cs in slots for c in cs], dtype=np.int64)
    got = best_dot_per_slot(be, vectors, table, rows, ptr, ids)
    for s, (row, candidates) in enumerate(slots):
        if not candidates:
            assert got[s] == -1
            continue
        dots = np.array([sum(np.float32(vectors[row, k]) * np.float32(table[c, k]) for k in range(16)) for c in candidates])
        best = min(c for c, d in zip(candidates, dots) if d == dots.max())
        assert got[s] == best, (s, got[s], best)
    assert got[1] == 7 and got[5] == 31
    for s in range(len(slots)):  # a slot alone: the same answer (nothing depends on the other slots)
        alone = best_dot_per_slot(be, vectors, table, rows[s:s + 1], ptr[s:s + 2] - ptr[s], ids[ptr[s]:ptr[s + 1]])
        assert alone[0] == got[s]


def test_best_dot_per_list_is_the_per_slot_answer_for_shared_and_lone_lists():
    """Lists shared by many slots (scored once for the group, register tiles) and by few (the per-slot kernel) give
    the per-slot kernel's ids: every dot's bits kept, equal dots to the lower id, across chunk and tile edges."""
    from gpu_tigrag.kernels.dense_dot import GROUP_CHUNK, TILE_QUERIES
    from gpu_tigrag.ops.dense_dot import GROUP_MIN_SLOTS, best_dot_per_list, best_dot_per_slot

    be = get_backend("numpy")
    rng = np.random.default_rng(11)
    table = rng.standard_normal((3 * GROUP_CHUNK + 5, 24)).astype(np.float32)
    table[150] = table[20]  # equal rows: a tie the lower id wins
    vectors = rng.standard_normal((90, 24)).astype(np.float32)
    vectors[7] = table[20] * 2
    big = np.sort(rng.choice(table.shape[0], 2 * GROUP_CHUNK + 3, replace=False))
    big = np.union1d(big, [20, 150])
    lists = [big, np.array([150, 20, 3]), np.arange(table.shape[0]), np.array([], dtype=np.int64), np.array([9])]
    list_ptr = np.concatenate([[0], np.cumsum([len(x) for x in lists])]).astype(np.int64)
    ids = np.concatenate(lists).astype(np.int64)
    # list 0 shared by TILE_QUERIES + 3 slots (two column tiles), list 1 by GROUP_MIN_SLOTS, list 2 by one, ...
    slot_lists = [0] * (TILE_QUERIES + 3) + [1] * GROUP_MIN_SLOTS + [2, 3, -1, 4, 4]
    rows = rng.integers(0, vectors.shape[0], len(slot_lists))
    rows[0] = rows[TILE_QUERIES + 3] = 7  # the tied rows in a big group and in a small list
    got = best_dot_per_list(be, vectors, table, rows, np.array(slot_lists), list_ptr, ids)
    for s, l in enumerate(slot_lists):
        own = lists[l] if l >= 0 else np.zeros(0, dtype=np.int64)
        want = best_dot_per_slot(be, vectors, table, rows[s:s + 1], np.array([0, own.size]), own.astype(np.int64))
        assert got[s] == want[0], (s, got[s], want[0])
    assert got[0] == 20 and got[TILE_QUERIES + 3] == 20
    assert got[len(slot_lists) - 3] == -1 and got[len(slot_lists) - 4] == -1
