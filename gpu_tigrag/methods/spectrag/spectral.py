"""Spectral coordinates of SpectRAG's chunk graph: the lowest eigenvectors of the normalised Laplacian.

L = I − D^-1/2 W D^-1/2, with an isolated node's row and column zero (eigenvalue 0), as SciPy's
`laplacian(normed=True)` (a self loop on the diagonal of W is ignored, as there). The d + 1
smallest eigenpairs are computed; the lowest vector is dropped, leaving coordinates n × d.

A graph of c > 1 components has a null space of dimension c, known exactly: the vector D^1/2 1_C
of each component C (e_i for an isolated node). The public code asks ARPACK for the d + 1 smallest
eigenpairs of the whole L and drops the lowest; on such a spectrum ARPACK returns whatever basis of
the null space its rounding errors lead to (measured: another one on each run of the same code,
its shift-invert mode failing on some runs), so its coordinates are an arbitrary subspace of the
null space, in which the rows of one component are parallel (cosine 1) and no row is zero. How
the engine chooses the null-space coordinates (`null_space=`):
- "random" (default, the public code's behaviour made reproducible): a seeded random subspace of
  the null space of the same dimension (d when c >= d + 1, c − 1 otherwise);
- "largest": the null vectors of the largest components first (ties by lowest node), the first
  one dropped: rows of the chunks outside the d + 1 largest components are zero, so their spectral
  proximity is 0 (the engine's rule before it was compared with the public code).
The remaining d + 1 − c coordinates (c <= d) are the smallest eigenpairs of L on the complement
of the null space. Krylov solvers from one start vector cannot be trusted there: in exact
arithmetic they see one vector per eigenspace (ARPACK from v0 = 1/√n was measured to return 7 of
15 zero eigenvalues of a 15-component graph), so that part runs LOBPCG against the known null
space. The number of components and of zero eigenvalues is reported.

Solvers (`solver=`):
- "host" (default, parity with the public code): on a connected graph SciPy ARPACK `eigsh` in
  shift-invert mode (σ = −1e-3, which='LM', v0 = 1/√n), falling back to which='SM', then LOBPCG;
  LOBPCG (seed 42) first above 50,000 nodes. On the complement of a multi-component graph's null
  space, LOBPCG (seed 42) preconditioned by the factorised L − σI (a block method: repeated
  eigenvalues of isomorphic components are found); a dense `numpy.linalg.eigh` of L + 3·QQᵀ
  instead where the complement is too small for LOBPCG's block (n − c < 5 × its size, where SciPy's
  LOBPCG refuses constraints) or LOBPCG breaks down on a graph of at most 4,096 nodes. A dense
  `numpy.linalg.eigh` when n <= d + 1 (coordinates padded with zero columns, eigenvalues with NaN:
  the shapes stay n × d and d + 1).
- "device": Lanczos `eigsh(N, which='LA')` of N = D^-1/2 W D^-1/2 (1 on the diagonal of isolated
  nodes; minus 2·QQᵀ for the known null space Q of a multi-component graph), eigenvalues of
  L = 1 − those of N, on the backend (CuPy's eigsh has no shift-invert). On NumPy it runs
  SciPy's eigsh, which checks the formulation without a GPU.
Vectors of the same eigenspace may differ between solvers: compare them by `principal_angles`.
Every vector's sign is fixed (its largest-magnitude entry positive) so a rebuild is reproducible.
"""

from __future__ import annotations

import importlib
import logging
import warnings
from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.linalg
import scipy.sparse
from scipy.sparse.csgraph import connected_components, laplacian

from ...backend import Backend, get_backend
from ...errors import TigragError

log = logging.getLogger(__name__)

SOLVERS = ("host", "device")
#: how the null-space coordinates of a graph of several components are chosen (module doc)
NULL_SPACES = ("random", "largest")
#: seed of the random null-space subspace ("random")
NULL_SPACE_SEED = 42
#: above this many nodes the host path starts with LOBPCG, as the public code
LARGE_GRAPH = 50_000
#: shift-invert centre just below the spectrum: L − σI is positive definite, so it factorises
SHIFT = -1e-3
#: eigenvalues below this count as zero (one per connected component)
ZERO_EIGENVALUE = 1e-6
LOBPCG_SEED, LOBPCG_MAXITER, LOBPCG_TOL = 42, 300, 1e-4
#: SciPy's LOBPCG switches to a dense solve (which refuses constraints) below this × the block size
#: of free dimensions; the engine solves those graphs densely itself
LOBPCG_BLOCK_FACTOR = 5
#: the largest graph solved densely when LOBPCG breaks down (n² float64: 128 MiB)
DENSE_FALLBACK = 4096
#: where the dense complement solve moves the known null vectors: above the normalised Laplacian's spectrum
NULL_LIFT = 3.0


@dataclass(frozen=True)
class Spectrum:
    """The coordinates and what produced them."""

    coords: np.ndarray  # n × d float32, eigenvectors 2 .. d + 1
    eigenvalues: np.ndarray  # (d + 1,) float64 ascending; NaN where the graph has fewer nodes
    solver: str  # the method that succeeded: dense, arpack-shift-invert, arpack-sm, lobpcg, lanczos-la
    zero_eigenvalues: int  # eigenvalues < ZERO_EIGENVALUE among the d + 1
    components: int  # connected components of the chunk graph (isolated nodes included)
    max_residual: float  # max over vectors of ||L v − λ v||


def normalized_laplacian(weights: scipy.sparse.spmatrix) -> scipy.sparse.csr_matrix:
    """L = I − D^-1/2 W D^-1/2 in float64, isolated nodes' rows zero (SciPy's normed Laplacian)."""
    return scipy.sparse.csr_matrix(laplacian(scipy.sparse.csr_matrix(weights, dtype=np.float64), normed=True))


def normalized_adjacency(weights: scipy.sparse.spmatrix) -> scipy.sparse.csr_matrix:
    """N = D^-1/2 W D^-1/2 with 1 on the diagonal of isolated nodes, so that I − N is the normed L."""
    w = scipy.sparse.coo_matrix(weights, dtype=np.float64)
    degree = np.asarray(scipy.sparse.csr_matrix(w).sum(axis=1)).ravel()
    scale = np.zeros_like(degree)
    np.divide(1.0, np.sqrt(degree), out=scale, where=degree > 0)
    isolated = np.flatnonzero(degree == 0)
    n = w.shape[0]
    rows, cols = np.concatenate([w.row, isolated]), np.concatenate([w.col, isolated])
    data = np.concatenate([w.data * scale[w.row] * scale[w.col], np.ones(isolated.size)])
    return scipy.sparse.coo_matrix((data, (rows, cols)), shape=(n, n)).tocsr()


def count_zero_eigenvalues(eigenvalues: np.ndarray, tol: float = ZERO_EIGENVALUE) -> int:
    """How many eigenvalues are (near) zero; NaN padding does not count."""
    values = np.asarray(eigenvalues, dtype=np.float64)
    return int(np.count_nonzero(np.abs(values[np.isfinite(values)]) < tol))


def principal_angles(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Principal angles (radians, descending) between the column spaces of `a` and `b` (host arrays):
    0 everywhere when two solvers found the same eigenspace, whatever basis each returned."""
    return scipy.linalg.subspace_angles(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64))


def fix_signs(vectors: np.ndarray) -> np.ndarray:
    """Each column multiplied by ±1 so that its largest-magnitude entry (the first such) is positive."""
    if vectors.size == 0:
        return vectors
    peak = np.argmax(np.abs(vectors), axis=0)
    signs = np.where(vectors[peak, np.arange(vectors.shape[1])] < 0, -1.0, 1.0)
    return vectors * signs


def component_null_space(weights: scipy.sparse.csr_matrix, limit: int) -> tuple[int, np.ndarray]:
    """(c, Q): the number of connected components and the unit null vectors of L of the first
    min(c, `limit`) of them (n × that, dense), components by size (largest first), ties by lowest node."""
    n = weights.shape[0]
    count, labels = connected_components(weights, directed=False)
    sizes = np.bincount(labels, minlength=count)
    first = np.full(count, n, dtype=np.int64)
    np.minimum.at(first, labels, np.arange(n))
    rank = np.empty(count, dtype=np.int64)
    rank[np.lexsort((first, -sizes))] = np.arange(count)
    degree = np.asarray(weights.astype(np.float64).sum(axis=1)).ravel()
    entries = np.where(degree > 0, np.sqrt(degree), 1.0)
    width = min(count, limit)
    basis = np.zeros((n, width))
    kept = rank[labels] < width
    basis[np.flatnonzero(kept), rank[labels][kept]] = entries[kept]
    return int(count), basis / np.linalg.norm(basis, axis=0)


def component_vectors(weights: scipy.sparse.csr_matrix) -> tuple[int, np.ndarray, np.ndarray]:
    """(c, the component of each node, each node's entry in the unit null vector of its component):
    entry sqrt(degree) / ||D^1/2 1_C||, 1 for an isolated node. n memory, whatever c."""
    count, labels = connected_components(weights, directed=False)
    degree = np.asarray(weights.astype(np.float64).sum(axis=1)).ravel()
    entries = np.where(degree > 0, np.sqrt(np.maximum(degree, 0.0)), 1.0)
    norms = np.sqrt(np.bincount(labels, weights=entries ** 2, minlength=count))
    return int(count), labels.astype(np.int64), entries / norms[labels]


def random_null_coordinates(labels: np.ndarray, entries: np.ndarray, count: int, width: int,
                            seed: int = NULL_SPACE_SEED) -> np.ndarray:
    """n × `width` orthonormal columns spanning a seeded random `width`-dimensional subspace of the
    null space of a graph of `count` components (`component_vectors`): row i is entries[i] times a
    random unit-free row of its component, so the rows of one component are parallel."""
    rng = np.random.default_rng(seed)
    mixing, _ = np.linalg.qr(rng.standard_normal((count, width)))  # count × width, orthonormal columns
    return entries[:, None] * mixing[labels]


def _dense(lap: scipy.sparse.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    values, vectors = np.linalg.eigh(lap.toarray())
    return values[:k], vectors[:, :k]


def _start(n: int) -> np.ndarray:
    return np.full(n, 1.0 / np.sqrt(n))


def _shift_invert(lap: scipy.sparse.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.sparse.linalg import eigsh

    return eigsh(lap, k=k, sigma=SHIFT, which="LM", v0=_start(lap.shape[0]))


def _smallest(lap: scipy.sparse.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray]:
    from scipy.sparse.linalg import eigsh

    return eigsh(lap, k=k, which="SM", v0=_start(lap.shape[0]))


def _lobpcg(lap: scipy.sparse.csr_matrix, k: int, constraints: np.ndarray | None = None,
            preconditioned: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """LOBPCG from a seeded random block; with `constraints`, in their orthogonal complement; with
    `preconditioned`, the factorised L − σI as preconditioner (then it converges in a few steps,
    so it is asked for 1e-8; the public code's plain LOBPCG keeps its 1e-4)."""
    from scipy.sparse.linalg import LinearOperator, lobpcg, splu

    n = lap.shape[0]
    rng = np.random.default_rng(LOBPCG_SEED)
    start, _ = np.linalg.qr(rng.standard_normal((n, k)))
    precondition, tol = None, LOBPCG_TOL
    if preconditioned:
        factor = splu(scipy.sparse.csc_matrix(lap - SHIFT * scipy.sparse.eye(n)))
        precondition = LinearOperator((n, n), matvec=factor.solve, matmat=factor.solve, dtype=np.float64)
        tol = 1e-8
    with warnings.catch_warnings():  # a short of tolerance shows in the residual, which is checked and reported
        warnings.simplefilter("ignore", UserWarning)
        return lobpcg(lap, start, M=precondition, Y=constraints, largest=False, maxiter=LOBPCG_MAXITER, tol=tol)


Solve = Callable[[scipy.sparse.csr_matrix, int], tuple[np.ndarray, np.ndarray]]


def _host(lap: scipy.sparse.csr_matrix, k: int) -> tuple[np.ndarray, np.ndarray, str]:
    """The first host solver that succeeds, in the public code's order for the graph's size."""
    order: list[tuple[str, Solve]] = [("arpack-shift-invert", _shift_invert), ("arpack-sm", _smallest),
                                      ("lobpcg", _lobpcg)]
    if lap.shape[0] > LARGE_GRAPH:
        order = order[2:] + order[:2]
    failures = []
    for name, solve in order:
        try:
            values, vectors = solve(lap, k)
        except Exception as exc:  # ARPACK non-convergence, a singular factorisation, LOBPCG breakdown
            failures.append(f"{name}: {type(exc).__name__}: {exc}")
            log.warning("eigensolver %s failed (%s: %s); trying the next one", name, type(exc).__name__, exc)
            continue
        if values.shape == (k,) and np.all(np.isfinite(values)) and np.all(np.isfinite(vectors)):
            return values, vectors, name
        failures.append(f"{name}: non-finite or incomplete result")
    raise TigragError(f"spectral coordinates: every eigensolver failed ({'; '.join(failures)})")


def _device(weights: scipy.sparse.csr_matrix, k: int, backend: Backend,
            null: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Lanczos on N (largest algebraic) on the backend, with the known null space `null` of L (N's
    eigenvalue 1) moved to −1; L's eigenpairs back on the host."""
    linalg = importlib.import_module(backend.sparse.__name__ + ".linalg")  # scipy.sparse.linalg or cupyx's
    xp, n = backend.xp, weights.shape[0]
    matrix = backend.csr(normalized_adjacency(weights))
    if null is not None and null.shape[1]:
        basis = backend.asarray(null)
        deflated = lambda x: matrix @ x - 2.0 * (basis @ (basis.T @ x))  # noqa: E731
        operator = linalg.LinearOperator((n, n), matvec=deflated, matmat=deflated, dtype=xp.float64)
    else:
        operator = matrix
    values, vectors = linalg.eigsh(operator, k=k, which="LA", v0=backend.asarray(_start(n)))
    return 1.0 - backend.to_host(values).astype(np.float64), backend.to_host(vectors).astype(np.float64)


def _solve(weights: scipy.sparse.csr_matrix, lap: scipy.sparse.csr_matrix, k: int, solver: str,
           backend: Backend | None, null_space: str) -> tuple[np.ndarray, np.ndarray, str, int]:
    """(values, vectors, solver name, components) of the k smallest eigenpairs of `lap`, n > k; the
    null-space part chosen by `null_space` (module doc)."""
    if null_space == "random":
        components, labels, entries = component_vectors(weights)
        if components > 1:
            width = min(components, k)
            null = random_null_coordinates(labels, entries, components, width)
            rest = k - width
            if rest == 0:
                return np.zeros(k), null, "components-random", components
            full = component_null_space(weights, components)[1]  # n × c with c <= d: dense is small
            values, vectors, name = _complement(weights, lap, rest, solver, backend, full)
            return (np.concatenate([np.zeros(width), values]), np.hstack([null, vectors]), "components-random+" + name,
                    components)
    components, null = component_null_space(weights, k)
    rest = k - null.shape[1]
    if components == 1:
        if solver == "device":
            return (*_device(weights, k, backend or get_backend("numpy")), "lanczos-la", 1)
        return (*_host(lap, k), 1)
    if rest == 0:
        return np.zeros(k), null, "components", components
    values, vectors, name = _complement(weights, lap, rest, solver, backend, null)
    return (np.concatenate([np.zeros(null.shape[1]), values]), np.hstack([null, vectors]), "components+" + name,
            components)


def _complement(weights: scipy.sparse.csr_matrix, lap: scipy.sparse.csr_matrix, k: int, solver: str,
                backend: Backend | None, null: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """The k smallest eigenpairs of `lap` orthogonal to the known null space `null` (n × c)."""
    if solver == "device":
        values, vectors = _device(weights, k, backend or get_backend("numpy"), null)
        return values, vectors, "lanczos-la"
    if lap.shape[0] - null.shape[1] < LOBPCG_BLOCK_FACTOR * k:
        return (*_dense_complement(lap, k, null), "dense")
    try:
        values, vectors = _lobpcg(lap, k, constraints=null, preconditioned=True)
    except Exception as exc:  # a breakdown of the block method: a small graph still has the dense solve
        if lap.shape[0] > DENSE_FALLBACK:
            raise TigragError(f"spectral coordinates: LOBPCG failed on the chunk graph's {lap.shape[0]:,} nodes "
                              f"({type(exc).__name__}: {exc})") from None
        log.warning("eigensolver lobpcg failed (%s: %s); solving densely", type(exc).__name__, exc)
        return (*_dense_complement(lap, k, null), "dense")
    return values, vectors, "lobpcg"


def _dense_complement(lap: scipy.sparse.csr_matrix, k: int, null: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The k smallest eigenpairs of `lap` orthogonal to its null space `null` (n × c, all of it), by
    `numpy.linalg.eigh` of L + NULL_LIFT·QQᵀ: the null vectors move to NULL_LIFT, above L's spectrum
    (<= 2), and every other eigenpair stays."""
    values, vectors = np.linalg.eigh(lap.toarray() + NULL_LIFT * (null @ null.T))
    return values[:k], vectors[:, :k]


def spectral_coordinates(weights: scipy.sparse.spmatrix, dimensions: int, solver: str = "host",
                         backend: Backend | None = None, null_space: str = "random") -> Spectrum:
    """Coordinates n × `dimensions` of the nodes of the symmetric weight matrix `weights` (see the
    module doc for the solvers and `null_space`); `backend` serves the "device" solver. A diagonal
    (self loops) is ignored, as SciPy's normed Laplacian ignores it."""
    if solver not in SOLVERS:
        raise TigragError(f"eigensolver must be one of {', '.join(SOLVERS)}, got {solver!r}")
    if null_space not in NULL_SPACES:
        raise TigragError(f"null_space must be one of {', '.join(NULL_SPACES)}, got {null_space!r}")
    weights = scipy.sparse.csr_matrix(weights)
    if weights.diagonal().any():
        weights = scipy.sparse.csr_matrix(weights - scipy.sparse.diags(weights.diagonal()))
        weights.eliminate_zeros()
    n, k = weights.shape[0], dimensions + 1
    lap = normalized_laplacian(weights)
    if n <= k:
        values, vectors = _dense(lap, k)
        name, components = "dense", int(connected_components(weights, directed=False)[0]) if n else 0
    else:
        values, vectors, name, components = _solve(weights, lap, k, solver, backend, null_space)
    order = np.argsort(values, kind="stable")
    values, vectors = np.asarray(values, dtype=np.float64)[order], fix_signs(np.asarray(vectors)[:, order])
    residual = lap @ vectors - vectors * values
    max_residual = float(np.linalg.norm(residual, axis=0).max()) if values.size else 0.0
    zeros = count_zero_eigenvalues(values)
    if zeros != min(components, values.size):
        log.warning("the eigensolver %s found %d zero eigenvalue(s) where the graph has %d component(s)",
                    name, zeros, components)
    coords = np.zeros((n, dimensions), dtype=np.float32)
    coords[:, : max(vectors.shape[1] - 1, 0)] = vectors[:, 1:]
    padded = np.full(k, np.nan)
    padded[: values.size] = values
    return Spectrum(coords, padded, name, zeros, components, max_residual)
