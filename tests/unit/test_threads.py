"""The thread policy (gpu_tigrag.threads): the counts it chooses, its settings' checks, that it is
applied once per process, and that the CLI, API retrievers and Dask workers get it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_tigrag import threads
from gpu_tigrag.errors import TigragError

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_policy(monkeypatch):
    """No policy applied yet, no user variable set; the pools' setters recorded, not called (this
    test process's real pools keep their sizes)."""
    for name in (threads.THREADS_ENV, "NUMBA_NUM_THREADS", *threads.BLAS_VARIABLES):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(threads, "_APPLIED", None)
    calls: list[threads.ThreadPolicy] = []
    monkeypatch.setattr(threads, "_apply", calls.append)
    return calls


def test_defaults_follow_the_cores():
    policy = threads.decide(cores=8, physical=4, environ={})
    assert (policy.threads, policy.numba, policy.blas, policy.encoder) == (8, 8, threads.BLAS_THREADS, 4)
    assert policy.source == "cores"
    single = threads.decide(cores=1, physical=1, environ={})
    assert (single.threads, single.numba, single.blas, single.encoder) == (1, 1, 1, 1)


def test_the_option_wins_over_the_variable_and_is_capped_by_the_cores(caplog):
    assert threads.decide(3, cores=8, physical=8, environ={threads.THREADS_ENV: "5"}).threads == 3
    from_env = threads.decide(cores=8, physical=8, environ={threads.THREADS_ENV: "5"})
    assert (from_env.threads, from_env.source) == (5, threads.THREADS_ENV)
    assert threads.decide(cores=8, physical=8, environ={threads.THREADS_ENV: "auto"}).threads == 8
    with caplog.at_level("WARNING", logger="gpu_tigrag.threads"):
        capped = threads.decide(16, cores=2, physical=2, environ={})
    assert capped.threads == 2 and "more than the 2 core(s)" in caplog.text


def test_workers_share_the_cores():
    assert threads.decide(workers=2, cores=8, physical=8, environ={}).threads == 4
    assert threads.decide(workers=3, cores=2, physical=2, environ={}).threads == 1  # never 0
    shared = threads.decide(6, workers=2, cores=8, physical=8, environ={})
    assert (shared.threads, shared.numba, shared.encoder) == (3, 3, 3)
    assert shared.source == "--threads/2 workers"


def test_the_policy_variables_are_not_mistaken_for_the_user_s(fresh_policy, monkeypatch):
    monkeypatch.setattr(threads, "_OURS", {"OPENBLAS_NUM_THREADS": "1"})
    assert threads.decide(cores=4, physical=4, environ={"OPENBLAS_NUM_THREADS": "1"}).blas == 1
    assert threads.decide(cores=4, physical=4, environ={"OPENBLAS_NUM_THREADS": "3"}).blas is None


def test_the_user_pool_variables_are_respected():
    policy = threads.decide(cores=8, physical=8, environ={"NUMBA_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "4"})
    assert policy.numba == 2 and policy.blas is None  # BLAS left to the user's variable
    assert threads.decide(cores=8, physical=8, environ={"MKL_NUM_THREADS": "3"}).blas is None


@pytest.mark.parametrize("value", ["0", "-1", "two", "1.5", True, 0, 2.5])
def test_bad_settings_are_clear_errors(value):
    with pytest.raises(TigragError, match="integer >= 1 or 'auto'"):
        threads.parse_threads(value)
    with pytest.raises(TigragError, match=threads.THREADS_ENV):
        threads.decide(cores=2, physical=2, environ={threads.THREADS_ENV: str(value)})


@pytest.mark.parametrize("value, expected", [("3", 3), (3, 3), (3.0, 3), ("auto", None), ("", None), (None, None)])
def test_good_settings(value, expected):
    assert threads.parse_threads(value) == expected


def test_bad_workers_are_errors():
    with pytest.raises(TigragError, match="workers"):
        threads.decide(workers=0, cores=2, physical=2, environ={})


def test_applied_once(fresh_policy, monkeypatch):
    from gpu_tigrag.backend import get_backend

    first = threads.apply_thread_policy()
    get_backend("numpy")
    get_backend("numpy")
    assert threads.current_policy() is first
    assert fresh_policy == [first]  # the API's later calls found it applied
    threads.apply_thread_policy(1)  # an explicit other setting applies again
    assert len(fresh_policy) == 2 and fresh_policy[-1].threads == 1
    threads.apply_thread_policy(1)  # the same one does not
    assert len(fresh_policy) == 2


def test_a_retriever_applies_the_policy(fresh_policy, example_index):
    from gpu_tigrag.methods.baselines.retriever import Bm25Retriever

    Bm25Retriever(example_index.index, backend="numpy")
    Bm25Retriever(example_index.index, backend="numpy")
    assert len(fresh_policy) == 1


def test_the_cli_option_applies_before_the_command(fresh_policy, tmp_path, capsys):
    from gpu_tigrag.cli import main

    assert main(["--threads", "1", "methods"]) == 0
    assert fresh_policy[-1].threads == 1 and fresh_policy[-1].source == "--threads"
    assert main(["methods", "--threads", "auto"]) == 0


def test_the_cli_rejects_a_bad_thread_count(capsys):
    from gpu_tigrag.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(["methods", "--threads", "0"])
    assert exit_.value.code == 2
    assert "--threads" in capsys.readouterr().err


def test_dask_hosts_are_counted():
    from gpu_tigrag.dask_run import _host

    assert _host("tcp://10.0.0.5:40123") == "10.0.0.5"
    assert _host("tcp://[::1]:8786") == "[::1]"


_PROBE = r"""
import json, os, sys
import numpy
from threadpoolctl import threadpool_info
from gpu_tigrag.threads import apply_thread_policy
policy = apply_thread_policy()
import numba
import scipy.linalg  # SciPy's own OpenBLAS, loaded after the policy
from gpu_tigrag.kernels.ppr import ppr_sweep_cpu
blas = [p["num_threads"] for p in threadpool_info() if p["user_api"] == "blas"]
print(json.dumps({"numba": numba.get_num_threads(), "numba_pool": numba.config.NUMBA_NUM_THREADS, "blas": blas,
                  "wait": os.environ.get("OMP_WAIT_POLICY"), "policy": policy.threads}))
"""


def test_a_fresh_process_gets_the_policy():
    """In a process that has not imported numba yet: numba's pool is sized by the variable, BLAS by
    threadpoolctl (numpy's) and by the variable (a BLAS loaded later), and OpenMP threads wait passively."""
    env = {k: v for k, v in os.environ.items()
           if k not in (threads.THREADS_ENV, "NUMBA_NUM_THREADS", "OMP_WAIT_POLICY", *threads.BLAS_VARIABLES)}
    env["TIGRAG_THREADS"] = "1"
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["policy"] == 1 and got["numba"] == 1 and got["numba_pool"] == 1
    assert len(got["blas"]) >= 1 and all(n == 1 for n in got["blas"]), got["blas"]
    assert got["wait"] == "PASSIVE"


def test_a_child_process_does_not_take_its_parent_s_policy_for_the_user_s(monkeypatch):
    """A process the engine starts inherits the pool variables its parent's policy set; listed in
    TIGRAG_POLICY_VARIABLES, they are the engine's, so the child's BLAS pool stays the policy's (and widens for
    the dense search) instead of being left to a 'user' setting. A value the user changed is the user's again."""
    monkeypatch.setattr(threads, "_OURS", {})  # a fresh child: nothing set by itself yet
    parent = {"OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "4",
              threads.POLICY_VARIABLES_ENV: "MKL_NUM_THREADS=1;NUMBA_NUM_THREADS=4;OPENBLAS_NUM_THREADS=1"}
    child = threads.decide(cores=8, physical=8, environ=parent)
    assert child.blas == threads.BLAS_THREADS and child.numba == 8
    assert threads.decide(cores=8, physical=8, environ={**parent, "OPENBLAS_NUM_THREADS": "3"}).blas is None
    unlisted = {k: v for k, v in parent.items() if k != threads.POLICY_VARIABLES_ENV}
    assert threads.decide(cores=8, physical=8, environ=unlisted).blas is None


def test_a_bench_child_widens_its_blas_pool(tmp_path):
    """End to end: three generations of engine processes, each applying the policy (a script that applied it, the
    `tigrag bench` it starts, the child that process starts per system): the last gets the policy's BLAS pool and
    widens it inside `wide_blas`."""
    script = tmp_path / "generation.py"
    script.write_text(
        "import json, subprocess, sys\n"
        "from gpu_tigrag import threads\n"
        "policy = threads.apply_thread_policy(2 if sys.argv[1] == '1' else None, force=True)\n"
        "if sys.argv[1] != '3':\n"
        "    done = subprocess.run([sys.executable, __file__, str(int(sys.argv[1]) + 1)], capture_output=True, text=True)\n"
        "    print(done.stdout + done.stderr, end='')\n"
        "else:\n"
        "    from threadpoolctl import threadpool_info\n"
        "    import numpy  # noqa: F401\n"
        "    with threads.wide_blas():\n"
        "        inside = [i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas']\n"
        "    print(json.dumps({'blas': policy.blas, 'numba': policy.numba, 'inside': inside}))\n")
    env = {k: v for k, v in os.environ.items()
           if k not in (threads.THREADS_ENV, "NUMBA_NUM_THREADS", threads.POLICY_VARIABLES_ENV, *threads.BLAS_VARIABLES)}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, str(script), "1"], cwd=ROOT, env=env, capture_output=True, text=True,
                         check=True)
    got = json.loads(out.stdout.strip().splitlines()[-1])
    assert got["blas"] == threads.BLAS_THREADS
    if got["numba"] > 1:
        assert all(n == got["numba"] for n in got["inside"]), got


def test_openblas_threads_sleep_after_a_product_unless_the_user_says_otherwise():
    """`import gpu_tigrag` sets OPENBLAS_THREAD_TIMEOUT before NumPy (and its OpenBLAS) loads, so the BLAS threads
    the dense search wakes do not spin beside the numba kernels after it; a user's value is kept."""
    probe = "import os, sys, gpu_tigrag; print(os.environ.get('OPENBLAS_THREAD_TIMEOUT'), 'numpy' in sys.modules)"
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_THREAD_TIMEOUT"}
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["4", "False"]
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, env={**env, "OPENBLAS_THREAD_TIMEOUT": "12"},
                         capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["12", "False"]
