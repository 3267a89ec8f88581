"""One fused Personalized PageRank sweep for B queries at once (section 3.4).

    out[i, b] = d · Σ_j P[i, j] · x[j, b] + v[i, b] · coef[b]    (x[i, b] where held[b])
    delta[b]  = Σ_i |out[i, b] − x[i, b]|

with coef[b] = d · (mass of column b on dangling nodes) + (1 − d); a held column (one that has
converged) keeps its iterate. Fusing the sparse product, the restart term, the convergence test
and the held columns reads x and writes out once per sweep (SciPy would need three passes and one
thread; a masked copy of the held columns after the sweep cost a pass of its own). P is CSR (row i lists the in-edges of i,
the matrix being symmetric in pattern); x, v, out are C-ordered vocab × B float32.

On the CPU a row's sums over its in-edges are `neighbour_sums`: up to 128 columns in eight 16-lane vector
registers for the whole loop over the edges, where a loop over the columns inside the loop over the edges
loads and stores each column's running sum at every edge. Each sum still runs in edge order with one fused
multiply-add per edge, so the scores are the same bits (1.2-1.3× faster on 2Wiki's 37k tokens ×
499 questions, bench/results/ppr_columns.md).
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.core import cgutils
from numba.extending import intrinsic

from .lazy_cuda import cuda
from .vector_ir import F32, I64, LANES, const, fmuladd, lane_mask, masked_load, masked_store, splat

ROW_BLOCKS = 256
#: 16-lane vectors of running sums a `neighbour_sums` call keeps in registers (its columns: 16 × this)
SUM_VECTORS = 8
SUM_COLUMNS = 16 * SUM_VECTORS


@intrinsic
def neighbour_sums(typingctx, indices, data, start, end, x, column, count, acc):
    """acc[column + c] = Σ_{start ≤ p < end} data[p] · x[indices[p], column + c] for c < count ≤ SUM_COLUMNS, the
    sums in p order with one `llvm.fmuladd` per edge (as numba's contracted `acc += w * x` runs), held in vector
    registers for the whole loop; columns past `count` are neither read nor written."""
    if not all(isinstance(a, types.Array) and a.ndim == n and a.layout == "C" for a, n in
               ((indices, 1), (data, 1), (x, 2), (acc, 1))):
        return None
    if not (isinstance(indices.dtype, types.Integer) and indices.dtype.bitwidth in (32, 64)
            and all(a.dtype == types.float32 for a in (data, x, acc))):
        return None
    index_type = ir.IntType(indices.dtype.bitwidth)  # SciPy's indices are int32, or int64 for large graphs
    sig = types.void(indices, data, start, end, x, column, count, acc)

    def codegen(context, builder, signature, args):
        widen = [builder.sext(a, I64) if a.type.width < 64 else a for a in (args[2], args[3], args[5], args[6])]
        start, end, column, count = widen
        arrays = [context.make_array(signature.args[i])(context, builder, args[i]) for i in (0, 1, 4, 7)]
        index_at, weight_at, x_at, acc_at = (builder.ptrtoint(a.data, I64) for a in arrays)
        x_at = builder.add(x_at, builder.mul(column, const(4)))
        acc_at = builder.add(acc_at, builder.mul(column, const(4)))
        row_bytes = builder.extract_value(arrays[2].strides, 0)
        fma = fmuladd(builder)
        masks = [lane_mask(builder, 16 * k, count) for k in range(SUM_VECTORS)]
        live = [builder.icmp_signed("<", const(16 * k), count) for k in range(SUM_VECTORS)]
        sums = [cgutils.alloca_once_value(builder, ir.Constant(LANES, None))
                for _ in range(SUM_VECTORS)]
        with cgutils.for_range(builder, builder.sub(end, start)) as loop:
            p = builder.add(start, loop.index)
            j = builder.load(builder.inttoptr(builder.add(index_at, builder.mul(p, const(index_type.width // 8))),
                                              index_type.as_pointer()))
            w = builder.load(builder.inttoptr(builder.add(weight_at, builder.mul(p, const(4))), F32.as_pointer()))
            weight = splat(builder, w)
            row = builder.add(x_at, builder.mul(builder.sext(j, I64) if index_type.width < 64 else j, row_bytes))
            for k in range(SUM_VECTORS):
                with builder.if_then(live[k], likely=True):
                    values = masked_load(builder, builder.add(row, const(64 * k)), masks[k])
                    builder.store(builder.call(fma, [weight, values, builder.load(sums[k])]), sums[k])
        for k in range(SUM_VECTORS):
            with builder.if_then(live[k]):
                masked_store(builder, builder.load(sums[k]), builder.add(acc_at, const(64 * k)), masks[k])
        return context.get_dummy_value()

    return sig, codegen


@njit(parallel=True, fastmath=True, cache=True)
def ppr_sweep_cpu(indptr, indices, data, x, v, coef, damping, held, out, delta):
    """CPU twin: rows split into blocks over threads; per-block partial deltas, then summed."""
    n, width = x.shape
    blocks = min(ROW_BLOCKS, max(n, 1))
    per_block = (n + blocks - 1) // blocks
    partial = np.zeros((blocks, width), dtype=np.float32)
    for blk in prange(blocks):
        acc = np.empty(width, dtype=np.float32)
        for i in range(blk * per_block, min(n, (blk + 1) * per_block)):
            for column in range(0, width, SUM_COLUMNS):
                neighbour_sums(indices, data, indptr[i], indptr[i + 1], x, column, min(SUM_COLUMNS, width - column), acc)
            for b in range(width):
                value = x[i, b] if held[b] else damping * acc[b] + v[i, b] * coef[b]
                partial[blk, b] += abs(value - x[i, b])
                out[i, b] = value
    for b in range(width):
        total = np.float32(0.0)
        for blk in range(blocks):
            total += partial[blk, b]
        delta[b] = total


#: threads per block (columns, rows) of the GPU sweep; the row count is fixed at compile time
#: because it sizes the block's shared-memory reduction
BLOCK_ROWS = 8
#: grid rows at most (CUDA caps the grid's y dimension at 65,535); threads stride over the rest
MAX_GRID_ROWS = 1024


@cuda.jit
def _ppr_sweep_kernel(indptr, indices, data, x, v, coef, damping, held, out, partial):
    """GPU kernel: thread (b, r) of a block handles query b for rows r, r + stride, ...;
    neighbouring threads read neighbouring columns. Each block writes its rows' L1 change per
    query into `partial` (a shared-memory reduction in a fixed order: no atomics, so the sweep
    count is the same on every run)."""
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    b = cuda.blockIdx.x * cuda.blockDim.x + tx
    n, width = x.shape
    change = cuda.shared.array((BLOCK_ROWS, 32), dtype=np.float32)
    local = np.float32(0.0)
    if b < width:
        stride = cuda.gridDim.y * BLOCK_ROWS
        for i in range(cuda.blockIdx.y * BLOCK_ROWS + ty, n, stride):
            acc = np.float32(0.0)
            for p in range(indptr[i], indptr[i + 1]):
                acc += data[p] * x[indices[p], b]
            value = x[i, b] if held[b] else damping * acc + v[i, b] * coef[b]
            out[i, b] = value
            local += abs(value - x[i, b])
    change[ty, tx] = local
    cuda.syncthreads()
    if ty == 0 and b < width:
        total = np.float32(0.0)
        for r in range(BLOCK_ROWS):
            total += change[r, tx]
        partial[cuda.blockIdx.y, b] = total


@cuda.jit
def _sum_rows_kernel(partial, delta):
    """delta[b] = Σ_r partial[r, b], one thread per column, rows in order (deterministic)."""
    b = cuda.grid(1)
    if b >= delta.shape[0]:
        return
    total = np.float32(0.0)
    for r in range(partial.shape[0]):
        total += partial[r, b]
    delta[b] = total


def _device_empty(like, shape: tuple[int, ...]):
    """An uninitialised float32 device array from the allocator `like` came from (CuPy's memory
    pool for CuPy arrays, numba's otherwise)."""
    if type(like).__module__.startswith("cupy"):
        import cupy

        return cupy.empty(shape, dtype=np.float32)
    return cuda.device_array(shape, dtype=np.float32)


def ptx_signatures():
    """(kernel, argument types) pairs compiled to PTX in CI to catch type errors the simulator allows."""
    from numba import types

    f32, i32 = types.float32, types.int32
    return [(_ppr_sweep_kernel, (i32[::1], i32[::1], f32[::1], f32[:, ::1], f32[:, ::1], f32[::1], f32,
                                 types.boolean[::1], f32[:, ::1], f32[:, ::1])),
            (_sum_rows_kernel, (f32[:, ::1], f32[::1]))]


def ppr_sweep_cuda(indptr, indices, data, x, v, coef, damping, held, out, delta, columns_per_block: int = 32,
                   max_grid_rows: int = MAX_GRID_ROWS) -> None:
    """Launch the GPU sweep; writes `out` and `delta` (same contract as `ppr_sweep_cpu`).

    Any vocabulary size works: the grid has at most `max_grid_rows` rows of blocks and the
    threads stride over the remaining rows.
    """
    n, width = x.shape
    if n == 0 or width == 0:
        return
    if not 1 <= columns_per_block <= 32:
        raise ValueError("columns_per_block must be in 1..32 (the shared reduction holds 32 columns)")
    grid_rows = min((n + BLOCK_ROWS - 1) // BLOCK_ROWS, max_grid_rows)
    grid = ((width + columns_per_block - 1) // columns_per_block, grid_rows)
    partial = _device_empty(x, (grid_rows, width))
    _ppr_sweep_kernel[grid, (columns_per_block, BLOCK_ROWS)](indptr, indices, data, x, v, coef, np.float32(damping),
                                                             held, out, partial)
    _sum_rows_kernel[(width + 127) // 128, 128](partial, delta)
