"""Kernels: each CUDA version under the numba simulator against its njit twin (tiny inputs)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from gpu_tigrag.kernels.cooccurrence import emit_pairs_cpu, slots_per_window, window_bounds

SIM_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba import cuda
    from gpu_tigrag.kernels.cooccurrence import emit_pairs_cpu, emit_pairs_cuda, slots_per_window, window_bounds
    rng = np.random.default_rng(1)
    lengths = rng.integers(0, 9, size=12)
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    ids = rng.integers(0, 6, size=int(indptr[-1])).astype(np.int32)
    for window in (2, 3, 4):
        starts, ends = window_bounds(indptr, window)
        cpu = np.full(starts.size * slots_per_window(window), -1, dtype=np.int64)
        emit_pairs_cpu(ids, starts, ends, 6, window, cpu)
        out = cuda.to_device(np.full_like(cpu, -1))
        emit_pairs_cuda(cuda.to_device(ids), cuda.to_device(starts), cuda.to_device(ends), 6, window, out, threads=8)
        gpu = out.copy_to_host()
        assert np.array_equal(np.sort(cpu), np.sort(gpu)), (window, cpu, gpu)
        assert np.array_equal(cpu.reshape(-1, slots_per_window(window)), gpu.reshape(-1, slots_per_window(window)))

    import scipy.sparse
    from gpu_tigrag.kernels.ppr import ppr_sweep_cpu, ppr_sweep_cuda
    w = scipy.sparse.random(9, 9, density=0.4, random_state=2, dtype=np.float32, format="csr")
    p = (w + w.T).tocsr()
    x = rng.random((9, 3)).astype(np.float32)
    v = rng.random((9, 3)).astype(np.float32)
    coef = np.array([0.5, 0.7, 0.9], dtype=np.float32)
    out_cpu, delta_cpu = np.empty_like(x), np.zeros(3, np.float32)
    held = np.array([False, True, False])  # column 1 has converged: it keeps its iterate
    ppr_sweep_cpu(p.indptr, p.indices, p.data, x, v, coef, np.float32(0.6), held, out_cpu, delta_cpu)
    expected = 0.6 * (p @ x) + v * coef
    expected[:, 1] = x[:, 1]
    assert np.allclose(out_cpu, expected, atol=1e-6) and np.array_equal(out_cpu[:, 1], x[:, 1])
    assert np.allclose(delta_cpu, np.abs(expected - x).sum(axis=0), atol=1e-5) and delta_cpu[1] == 0
    for grid_rows in (1, 1024):  # 1: the threads stride over rows 8.. (the large-vocabulary path)
        out_gpu, delta_gpu = cuda.to_device(np.empty_like(x)), cuda.to_device(np.full(3, 9.0, np.float32))
        ppr_sweep_cuda(cuda.to_device(p.indptr), cuda.to_device(p.indices), cuda.to_device(p.data), cuda.to_device(x),
                       cuda.to_device(v), cuda.to_device(coef), 0.6, cuda.to_device(held), out_gpu, delta_gpu,
                       columns_per_block=2,
                       max_grid_rows=grid_rows)
        assert np.allclose(out_gpu.copy_to_host(), out_cpu, atol=1e-6)
        assert np.allclose(delta_gpu.copy_to_host(), delta_cpu, atol=1e-5)
    print("SIM-OK")
""")


def test_cuda_kernel_matches_njit_twin_under_simulator():
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]


PUSH_SIM_SCRIPT = textwrap.dedent("""
    import warnings
    import numpy as np
    import scipy.sparse
    from numba import cuda
    from gpu_tigrag.kernels.push_ppr import N_STATS, push_ppr_cpu, push_ppr_cuda
    warnings.simplefilter("ignore", RuntimeWarning)  # the hash mixing overflows uint64 on purpose
    rng = np.random.default_rng(3)
    n = 30
    w = rng.random((n, n)) * (rng.random((n, n)) < 0.2)
    w = np.triu(w, 1)
    w = w + w.T
    w[4, :] = w[:, 4] = 0  # a dangling node, seeded below
    w = scipy.sparse.csr_matrix(w.astype(np.float32))
    prob = (w.data / np.repeat(np.asarray(w.sum(axis=1)).ravel(), np.diff(w.indptr))).astype(np.float32)
    indptr, indices = w.indptr.astype(np.int64), w.indices.astype(np.int32)
    seed_ptr = np.array([0, 2, 3, 3, 5, 6], dtype=np.int64)
    seed_ids = np.array([0, 9, 4, 1, 4, 17], dtype=np.int32)
    for by_edges in (False, True):
        args = (np.int64(2 ** 48 // 10000), by_edges, np.float64(0.5), np.int64(50))
        ids, units, stats = np.empty((5, 8), np.int32), np.empty((5, 8), np.int64), np.zeros((5, N_STATS), np.int64)
        push_ppr_cpu(seed_ptr, seed_ids, indptr, indices, prob, *args, ids, units, stats)
        assert stats[:, 0].tolist()[1:3] == [1, 0] and stats[0, 0] > 10 and (stats[:, 3] == 0).all()
        for capacity in (4, 1024):  # 4: every query but the one-seed ones overflows and runs again, larger
            out = [cuda.to_device(a) for a in (np.empty_like(ids), np.empty_like(units), np.full_like(stats, 7))]
            push_ppr_cuda(*(cuda.to_device(a) for a in (seed_ptr, seed_ids, indptr, indices, prob)), *args, *out,
                          capacity=capacity, threads=2)
            for got, want in zip(out, (ids, units, stats)):
                assert np.array_equal(got.copy_to_host(), want), (by_edges, capacity, got.copy_to_host(), want)
    print("SIM-OK")
""")


def test_push_cuda_kernel_equals_njit_twin_under_simulator():
    """The forward-push kernel (one thread per query, hashed tables, overflow retries) gives the CPU
    twin's bits: ids, fixed-point scores and per-query statistics."""
    env = dict(os.environ, NUMBA_ENABLE_CUDASIM="1")
    proc = subprocess.run([sys.executable, "-c", PUSH_SIM_SCRIPT], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "SIM-OK" in proc.stdout, proc.stderr[-3000:]


def test_njit_twin_emits_distinct_pairs_per_window():
    indptr = np.array([0, 4], dtype=np.int64)
    ids = np.array([3, 3, 1, 3], dtype=np.int32)  # one window of 4: pairs (1,3) only, once
    starts, ends = window_bounds(indptr, 4)
    out = np.full(slots_per_window(4), -1, dtype=np.int64)
    emit_pairs_cpu(ids, starts, ends, 5, 4, out)
    assert sorted(out[out >= 0].tolist()) == [1 * 5 + 3]


KERNEL_MODULES = ("gpu_tigrag.kernels.cooccurrence", "gpu_tigrag.kernels.ppr", "gpu_tigrag.kernels.pair_count",
                  "gpu_tigrag.kernels.subgraph_ppr", "gpu_tigrag.kernels.push_ppr", "gpu_tigrag.kernels.dense_dot",
                  "gpu_tigrag.kernels.bm25_pairs", "gpu_tigrag.kernels.owner_max")
PTX_SCRIPT = textwrap.dedent(f"""
    import importlib
    KERNEL_MODULES = {KERNEL_MODULES!r}
    from numba import cuda
    for name in KERNEL_MODULES:
        for kernel, signature in importlib.import_module(name).ptx_signatures():
            ptx, _ = cuda.compile_ptx(kernel.py_func, signature, cc=(9, 0))
            assert ".target sm_90" in ptx, name
            if name == "gpu_tigrag.kernels.pair_count":  # the simulator accepts any atomic dtype; the device needs these
                assert "atom.global.cas.b64" in ptx and "atom.global.add.u64" in ptx, "expected 64-bit CAS and add"
            print("PTX-OK", name, kernel.py_func.__name__)
""")


def test_cuda_kernels_compile_to_ptx_for_sm90():
    """Real compilation (no GPU needed) with numba-cuda[cu13]: catches what the simulator accepts."""
    try:
        import numba_cuda  # noqa: F401
    except ImportError:
        pytest.skip("numba-cuda[cu13] is not installed: PTX compilation not checked")
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    proc = subprocess.run([sys.executable, "-c", PTX_SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    import importlib

    expected = sum(len(importlib.import_module(name).ptx_signatures()) for name in KERNEL_MODULES)
    assert proc.stdout.count("PTX-OK") == expected


def _kernel_package(folder):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "one.py").write_text("X = 1\n")
    return folder


def test_numba_gets_a_private_cache_where_it_could_write_none(tmp_path, monkeypatch):
    """A read-only install and home would stop numba compiling the cached kernels: the package then
    points NUMBA_CACHE_DIR at a private folder of the temporary directory."""
    import os

    import numba.core.config

    from gpu_tigrag.numba_cache import CHOSEN_ENV, ensure_numba_cache, kernels_digest

    package = _kernel_package(tmp_path / "package")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv(CHOSEN_ENV, raising=False)
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr("tempfile.gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)
    folder = ensure_numba_cache(package)
    private = tmp_path / f"gpu_tigrag-numba-{os.getuid()}"
    assert folder == str(private / f"numba-{kernels_digest(package)}") and os.environ["NUMBA_CACHE_DIR"] == folder
    assert numba.core.config.CACHE_DIR == folder and (private / f"numba-{kernels_digest(package)}").is_dir()
    assert private.stat().st_mode & 0o777 == 0o700


def test_the_cache_folder_follows_every_kernel_source(tmp_path, monkeypatch):
    """A changed kernel source gives another folder (beside the kernels where writable); a NUMBA_CACHE_DIR the
    user set is used as it is, one chosen by a parent process of ours is chosen again."""
    import os

    import numba.core.config

    from gpu_tigrag.numba_cache import CHOSEN_ENV, ensure_numba_cache

    package = _kernel_package(tmp_path / "package")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv(CHOSEN_ENV, raising=False)
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)
    first = ensure_numba_cache(package)
    assert first.startswith(str(package / "__pycache__" / "numba-"))
    assert ensure_numba_cache(package) == first  # ours: chosen again, the same
    (package / "two.py").write_text("Y = 2\n")
    second = ensure_numba_cache(package)
    (package / "two.py").write_text("Y = 3\n")
    third = ensure_numba_cache(package)
    assert len({first, second, third}) == 3
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "mine"))
    assert ensure_numba_cache(package) is None and os.environ["NUMBA_CACHE_DIR"] == str(tmp_path / "mine")


def test_a_file_in_the_way_of_the_cache_folder_is_left_alone(tmp_path, monkeypatch):
    """A file where the folder would go: the next place is used, and the file is untouched."""
    import numba.core.config

    from gpu_tigrag.numba_cache import CHOSEN_ENV, ensure_numba_cache, kernels_digest

    package = _kernel_package(tmp_path / "package")
    (package / "__pycache__").mkdir()
    blocker = package / "__pycache__" / f"numba-{kernels_digest(package)}"
    blocker.write_text("mine")
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv(CHOSEN_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)
    folder = ensure_numba_cache(package)
    assert folder == str(tmp_path / "home_cache" / "gpu_tigrag" / "numba" / blocker.name)
    assert blocker.read_text() == "mine"


def test_only_this_modules_stale_folders_are_removed(tmp_path, monkeypatch):
    import os

    import numba.core.config

    from gpu_tigrag.numba_cache import CHOSEN_ENV, STALE_SECONDS, ensure_numba_cache

    package = _kernel_package(tmp_path / "package")
    cache = package / "__pycache__"
    old, recent, foreign = cache / ("numba-" + "a" * 16), cache / ("numba-" + "b" * 16), cache / "numba-mine"
    for folder in (old, recent, foreign):
        (folder / "deep").mkdir(parents=True)
        (folder / "deep" / "f.nbi").write_text("x")
    (cache / "one.cpython-311.pyc").write_text("x")
    long_ago = os.path.getmtime(old) - 2 * STALE_SECONDS
    for path in (old, old / "deep", old / "deep" / "f.nbi", foreign, foreign / "deep", foreign / "deep" / "f.nbi"):
        os.utime(path, (long_ago, long_ago))
    for path in (recent, recent / "deep"):
        os.utime(path, (long_ago, long_ago))  # a folder's own time is old, a file inside it is recent
    monkeypatch.delenv("NUMBA_CACHE_DIR", raising=False)
    monkeypatch.delenv(CHOSEN_ENV, raising=False)
    monkeypatch.setattr(numba.core.config, "CACHE_DIR", numba.core.config.CACHE_DIR)
    ensure_numba_cache(package)
    assert not old.exists() and recent.exists() and foreign.exists() and (cache / "one.cpython-311.pyc").exists()


_CALLER = """
import sys
from pathlib import Path
from gpu_tigrag.numba_cache import ensure_numba_cache
ensure_numba_cache(Path(sys.argv[1]))
sys.path.insert(0, sys.argv[1])
import caller
print(caller.f())
"""


def test_a_cached_kernel_runs_the_current_code_of_the_kernels_it_calls(tmp_path):
    """numba keys a cached function by its own file only: `caller.f`, cached while `callee.g` returned 1, would
    still return 1 after callee.py changed. With the folder named by the sources' digest it returns 2."""
    import os
    import subprocess
    import sys

    package = tmp_path / "kernels"
    package.mkdir()
    (package / "caller.py").write_text("from numba import njit\nfrom callee import g\n\n\n"
                                       "@njit(cache=True)\ndef f():\n    return g() * 10\n")
    (package / "callee.py").write_text("from numba import njit\n\n\n@njit(cache=True)\ndef g():\n    return 1\n")
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "TIGRAG_NUMBA_CACHE_DIR")}

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", _CALLER, str(package)], capture_output=True, text=True, env=env)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.strip()

    assert run() == "10"
    assert run() == "10"  # from the cache
    (package / "callee.py").write_text("from numba import njit\n\n\n@njit(cache=True)\ndef g():\n    return 2\n")
    assert run() == "20"
