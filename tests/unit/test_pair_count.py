"""Hash-table pair counting (kernels/pair_count.py): twin, CUDA kernel under the simulator, PTX, graph."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpu_tigrag.kernels.pair_count import EMPTY, count_keys, count_keys_cpu, table_capacity

RNG = np.random.default_rng(7)
CASES = {
    "heavy-duplicates": RNG.integers(0, 20, size=5_000),
    "wide-range": RNG.integers(0, 2**40, size=3_000),
    "zipf": RNG.zipf(1.3, size=4_000) % 100_003,
    "single": np.array([123456789]),
    "empty": np.array([], dtype=np.int64),
}


@pytest.mark.parametrize("name", list(CASES))
def test_count_keys_equals_unique(backend, name):
    """The twin (numpy) or the real kernel (cupy) returns exactly xp.unique's arrays and dtypes."""
    keys = CASES[name].astype(np.int64)
    unique, counts = count_keys(backend, backend.asarray(keys))
    expected_unique, expected_counts = np.unique(keys, return_counts=True)
    assert unique.dtype == np.int64 and counts.dtype == np.int64
    np.testing.assert_array_equal(backend.to_host(unique), expected_unique)
    np.testing.assert_array_equal(backend.to_host(counts), expected_counts)


def test_twin_table_holds_each_key_once_with_its_count():
    keys = CASES["heavy-duplicates"].astype(np.int64)
    capacity = table_capacity(keys.size)
    assert capacity >= 2 * keys.size and capacity & (capacity - 1) == 0
    table, counts = np.full(capacity, EMPTY, dtype=np.int64), np.zeros(capacity, dtype=np.int64)
    count_keys_cpu(keys, table, counts)
    occupied = table != EMPTY
    assert np.all(counts[~occupied] == 0)
    assert sorted(table[occupied].tolist()) == sorted(set(keys.tolist()))
    assert counts.sum() == keys.size


def test_table_capacity_is_next_power_of_two_of_twice_the_keys():
    assert [table_capacity(n) for n in (1, 2, 3, 4, 5, 1000)] == [2, 4, 8, 8, 16, 2048]


SIM_SCRIPT = textwrap.dedent("""
    import warnings
    import numpy as np
    from numba import cuda
    from gpu_tigrag.kernels.pair_count import EMPTY, count_keys_cpu, count_keys_cuda, table_capacity
    warnings.simplefilter("ignore", RuntimeWarning)  # the simulator's uint64 hash wraps on purpose
    rng = np.random.default_rng(3)
    for keys in (rng.integers(0, 9, size=60), np.array([5]), rng.integers(0, 2**40, size=40)):
        keys = keys.astype(np.int64)
        capacity = table_capacity(keys.size)
        table_cpu, counts_cpu = np.full(capacity, EMPTY, np.int64), np.zeros(capacity, np.int64)
        count_keys_cpu(keys, table_cpu, counts_cpu)
        table, counts = cuda.to_device(np.full(capacity, EMPTY, np.int64)), cuda.to_device(np.zeros(capacity, np.int64))
        count_keys_cuda(cuda.to_device(keys), table, counts, threads=8)
        table_gpu, counts_gpu = table.copy_to_host(), counts.copy_to_host()
        cpu, gpu = np.argsort(table_cpu), np.argsort(table_gpu)  # same contents, slot order may differ
        assert np.array_equal(table_cpu[cpu], table_gpu[gpu]), (table_cpu, table_gpu)
        assert np.array_equal(counts_cpu[cpu], counts_gpu[gpu]), (counts_cpu, counts_gpu)
    print("SIM-OK")
""")


def test_cuda_kernel_matches_njit_twin_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]


# PTX compilation of this module's kernel: tests/unit/test_kernels.py (KERNEL_MODULES)
