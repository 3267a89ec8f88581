"""One attention head of one text, in float32 vector tiles: the attention of the numba-int8 encoder
(kernels/int8_encoder.py).

For a text's rows start .. start + length of the packed Q/K/V rows (`qkv`, rows × 3H) and head h:
out[rows, h's columns] = softmax(q·kᵀ/√size) · v, computed `TILE_ROWS` query rows at a time:

1. the head's keys are copied once, transposed and zero-padded to a multiple of 32 columns (`kt`);
2. `_score_tile`: TILE_ROWS rows × 32 key columns of q·kᵀ/√size, 2·TILE_ROWS vector accumulators (enough
   FMAs in flight to cover their latency), one key load per step for TILE_ROWS broadcast query values;
3. `_softmax_tile`: each row's exp(score − max) over the text's own keys, and 1/Σ, the tile's rows side by
   side so that their max and Σ chains overlap;
4. `_mix_tile`: TILE_ROWS rows × 32 value columns of Σ_j p_j·v_j, times 1/Σ, one value load per key for
   TILE_ROWS broadcast weights, written to `out`.

The tiles are LLVM IR on 16-lane float vectors (numba has no vector types) with `llvm.fmuladd`, which LLVM
lowers to the widest vector FMA the CPU has (or to a multiply and an add). A text's short loops are where
a BLAS call costs most: each sgemm call at 23 tokens × 32 dimensions is mostly overhead, and a compiler's
vectorised loop (16 lanes × 4 interleaved) never enters its vector body at that trip count. The sums run
in one order fixed by the text's length and the head size, so a text's output is the same in any batch.
A head size that is not a multiple of 32 takes plain loops with the same steps (`_score_loops`, `_softmax_row`,
`_mix_loops`).
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .float_bits import bits_of, float_of, ordered
from .vector_ir import F32, I32, I64, LANES, const, fmuladd, load, splat, store

#: query rows of a tile (2 × TILE_ROWS accumulators: enough FMAs in flight to cover their latency)
TILE_ROWS = 8
#: columns of a tile: two 16-lane float vectors (keys for the scores, head dimensions for the mix)
TILE_COLUMNS = 32
_LOG2E = np.float32(1.4426950408889634)
_LN2_HI = np.float32(0.693145751953125)
_LN2_LO = np.float32(1.428606765330187e-06)

def _row_addresses(builder: ir.IRBuilder, base: ir.Value, first: ir.Value, rows: ir.Value, stride: ir.Value) -> list:
    """Byte addresses of a tile's rows; rows past `rows` repeat the last one (computed, never stored)."""
    last = builder.sub(rows, const(1))
    out = []
    for r in range(TILE_ROWS):
        row = builder.select(builder.icmp_signed("<", const(r), rows), const(r), last)
        out.append(builder.add(base, builder.mul(builder.add(first, row), stride)))
    return out


def _broadcast_sums(builder: ir.IRBuilder, steps: ir.Value, vectors: ir.Value, stride: ir.Value, rows: list) -> list:
    """The tiles' inner loop: for each tile row r, Σ_{s < steps} rows[r][s] · (the 32 floats at vectors + s·stride),
    `rows[r]` the byte address of a float32 row; 2·TILE_ROWS accumulators (allocas the optimiser keeps in
    registers). Returns them, [row][half]."""
    fma = fmuladd(builder)
    zero = ir.Constant(LANES, None)
    sums = [[cgutils.alloca_once_value(builder, zero) for _ in range(2)] for _ in range(TILE_ROWS)]
    with cgutils.for_range(builder, steps) as loop:
        at = builder.add(vectors, builder.mul(loop.index, stride))
        halves = [load(builder, builder.add(at, const(64 * g)), LANES) for g in range(2)]
        for r in range(TILE_ROWS):
            value = splat(builder, load(builder, builder.add(rows[r], builder.mul(loop.index, const(4))), F32))
            for g in range(2):
                builder.store(builder.call(fma, [value, halves[g], builder.load(sums[r][g])]), sums[r][g])
    return sums


@intrinsic
def _score_tile(typingctx, qkv, row0, rows, q0, kt, column, size, scores, scale):
    """scores[r, column : column + 32] = scale · Σ_d qkv[row0 + r, q0 + d] · kt[d, column : column + 32] for
    r < rows ≤ TILE_ROWS (float32, C-contiguous rows)."""
    sig = types.void(qkv, row0, rows, q0, kt, column, size, scores, scale)

    def codegen(context, builder, signature, args):
        qkv_v, row0, rows, q0, kt_v, column, size, scores_v, scale = args
        qkv_a = context.make_array(signature.args[0])(context, builder, qkv_v)
        kt_a = context.make_array(signature.args[4])(context, builder, kt_v)
        s_a = context.make_array(signature.args[7])(context, builder, scores_v)
        q_base = builder.add(builder.ptrtoint(qkv_a.data, I64), builder.mul(q0, const(4)))
        q_rows = _row_addresses(builder, q_base, row0, rows, builder.extract_value(qkv_a.strides, 0))
        kt_stride = builder.extract_value(kt_a.strides, 0)
        kt_base = builder.add(builder.ptrtoint(kt_a.data, I64), builder.mul(column, const(4)))
        sums = _broadcast_sums(builder, size, kt_base, kt_stride, q_rows)
        factor = splat(builder, scale)
        s_stride = builder.extract_value(s_a.strides, 0)
        s_base = builder.add(builder.ptrtoint(s_a.data, I64), builder.mul(column, const(4)))
        for r in range(TILE_ROWS):
            with builder.if_then(builder.icmp_signed("<", const(r), rows)):
                at = builder.add(s_base, builder.mul(const(r), s_stride))
                for g in range(2):
                    store(builder, builder.fmul(builder.load(sums[r][g]), factor), builder.add(at, const(64 * g)))
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _mix_tile(typingctx, weights, rows, length, qkv, start, v0, inverse, out, out_row, out_column):
    """out[out_row + r, out_column : out_column + 32] = inverse[r] · Σ_{j < length} weights[r, j] ·
    qkv[start + j, v0 : v0 + 32] for r < rows ≤ TILE_ROWS."""
    sig = types.void(weights, rows, length, qkv, start, v0, inverse, out, out_row, out_column)

    def codegen(context, builder, signature, args):
        w_v, rows, length, qkv_v, start, v0, inv_v, out_v, out_row, out_column = args
        w_a = context.make_array(signature.args[0])(context, builder, w_v)
        qkv_a = context.make_array(signature.args[3])(context, builder, qkv_v)
        inv_a = context.make_array(signature.args[6])(context, builder, inv_v)
        out_a = context.make_array(signature.args[7])(context, builder, out_v)
        w_rows = _row_addresses(builder, builder.ptrtoint(w_a.data, I64), const(0), rows,
                                builder.extract_value(w_a.strides, 0))
        v_stride = builder.extract_value(qkv_a.strides, 0)
        v_base = builder.add(builder.add(builder.ptrtoint(qkv_a.data, I64), builder.mul(v0, const(4))),
                             builder.mul(start, v_stride))
        sums = _broadcast_sums(builder, length, v_base, v_stride, w_rows)
        inv_base = builder.ptrtoint(inv_a.data, I64)
        o_stride = builder.extract_value(out_a.strides, 0)
        o_base = builder.add(builder.ptrtoint(out_a.data, I64), builder.mul(out_column, const(4)))
        for r in range(TILE_ROWS):
            with builder.if_then(builder.icmp_signed("<", const(r), rows)):
                factor = splat(builder, load(builder, builder.add(inv_base, const(4 * r)), F32))
                at = builder.add(o_base, builder.mul(builder.add(out_row, const(r)), o_stride))
                for g in range(2):
                    store(builder, builder.fmul(builder.load(sums[r][g]), factor), builder.add(at, const(64 * g)))
        return context.get_dummy_value()

    return sig, codegen


def _lanes_of(value: float) -> ir.Constant:
    return ir.Constant(LANES, [value] * 16)


def _tree(builder: ir.IRBuilder, vector: ir.Value, combine) -> ir.Value:
    """The 16 lanes combined pairwise in a fixed tree (the same order on every CPU)."""
    values = [builder.extract_element(vector, ir.Constant(I32, lane)) for lane in range(16)]
    while len(values) > 1:
        values = [combine(values[i], values[i + 1]) for i in range(0, len(values), 2)]
    return values[0]


@intrinsic
def _softmax_tile(typingctx, weights, rows, length, padded, inverse):
    """For r < rows ≤ TILE_ROWS: weights[r, :length] = exp(score − the row's max) (unnormalised), weights[r,
    length:padded] = 0, inverse[r] = 1 / Σ: `_softmax_row`'s steps on 16-lane vectors, with fused multiply-adds;
    padded: a multiple of 16."""
    sig = types.void(weights, rows, length, padded, inverse)

    def codegen(context, builder, signature, args):
        w_v, rows, length, padded, inv_v = args
        w_a = context.make_array(signature.args[0])(context, builder, w_v)
        inv_a = context.make_array(signature.args[4])(context, builder, inv_v)
        lanes_i32 = ir.VectorType(I32, 16)
        fma = fmuladd(builder)
        maxnum = cgutils.get_or_insert_function(builder.module, ir.FunctionType(LANES, [LANES, LANES]),
                                                "llvm.maxnum.v16f32")
        iota = ir.Constant(lanes_i32, list(range(16)))
        limit = splat(builder, builder.trunc(length, I32), lanes_i32)
        w_stride = builder.extract_value(w_a.strides, 0)
        w_base = builder.ptrtoint(w_a.data, I64)
        inv_base = builder.ptrtoint(inv_a.data, I64)
        blocks = builder.udiv(padded, const(16))
        lowest = _lanes_of(-3.0e38)

        def lane_mask(block):
            first = splat(builder, builder.trunc(builder.mul(block, const(16)), I32), lanes_i32)
            return builder.icmp_signed("<", builder.add(first, iota), limit)

        # the tile's rows side by side in each pass, so their dependency chains (max, Σ) overlap; a row past
        # `rows` repeats the last one and is never stored
        row_at = _row_addresses(builder, w_base, const(0), rows, w_stride)
        tops = [cgutils.alloca_once_value(builder, lowest) for _ in range(TILE_ROWS)]
        with cgutils.for_range(builder, blocks) as loop:
            mask, offset = lane_mask(loop.index), builder.mul(loop.index, const(64))
            for r in range(TILE_ROWS):
                value = builder.select(mask, load(builder, builder.add(row_at[r], offset), LANES), lowest)
                builder.store(builder.call(maxnum, [builder.load(tops[r]), value]), tops[r])
        peaks = [splat(builder, _tree(builder, builder.load(top),
                                       lambda a, b: builder.select(builder.fcmp_ordered(">", a, b), a, b)))
                 for top in tops]
        totals = [cgutils.alloca_once_value(builder, ir.Constant(LANES, None)) for _ in range(TILE_ROWS)]
        with cgutils.for_range(builder, blocks) as loop:
            mask, offset = lane_mask(loop.index), builder.mul(loop.index, const(64))
            for r in range(TILE_ROWS):
                at = builder.add(row_at[r], offset)
                x = builder.fsub(load(builder, at, LANES), peaks[r])
                x = builder.select(builder.fcmp_ordered(">", x, _lanes_of(-87.0)), x, _lanes_of(-87.0))
                n = builder.neg(builder.fptosi(builder.call(fma, [x, _lanes_of(-float(_LOG2E)), _lanes_of(0.5)]),
                                               lanes_i32))  # round(x·log2 e), x ≤ 0
                nf = builder.sitofp(n, LANES)
                red = builder.call(fma, [nf, _lanes_of(-float(_LN2_HI)), x])
                red = builder.call(fma, [nf, _lanes_of(-float(_LN2_LO)), red])
                poly = _lanes_of(float(np.float32(1.0 / 720)))
                for coefficient in (1.0 / 120, 1.0 / 24, 1.0 / 6, 0.5, 1.0, 1.0):
                    poly = builder.call(fma, [red, poly, _lanes_of(float(np.float32(coefficient)))])
                power = builder.bitcast(builder.shl(builder.add(n, ir.Constant(lanes_i32, [127] * 16)),
                                                    ir.Constant(lanes_i32, [23] * 16)), LANES)
                e = builder.select(mask, builder.fmul(poly, power), ir.Constant(LANES, None))
                with builder.if_then(builder.icmp_signed("<", const(r), rows)):
                    store(builder, e, at)
                builder.store(builder.fadd(builder.load(totals[r]), e), totals[r])
        for r in range(TILE_ROWS):
            with builder.if_then(builder.icmp_signed("<", const(r), rows)):
                whole = _tree(builder, builder.load(totals[r]), builder.fadd)
                ptr = builder.inttoptr(builder.add(inv_base, const(4 * r)), F32.as_pointer())
                builder.store(builder.fdiv(ir.Constant(F32, 1.0), whole), ptr).align = 4
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True, error_model="numpy", fastmath=True)
def _softmax_row(scores, i, length, inverse):
    """scores[i, :length] = exp(score − the row's max), unnormalised; inverse[i] = 1 / their sum.
    exp(x) = 2ⁿ·p(r) with x = n·ln2 + r, |r| ≤ ln2/2, p of degree 6 (relative error < 1e-5), 2ⁿ built as
    float bits; x below −87 is taken as −87 (exp ≈ 1.6e-38, nothing beside the row's 1). The row max is an
    integer maximum over order-preserving integers of the floats' bits. Both vectorise, where a float maximum
    and a libm call do not."""
    top = np.int32(-2147483647)
    for j in range(length):
        top = max(top, ordered(bits_of(scores[i, j])))
    peak = float_of(ordered(np.int32(top)))
    total = np.float32(0.0)
    for j in range(length):
        x = max(scores[i, j] - peak, np.float32(-87.0))
        n = -np.int32(np.float32(0.5) - x * _LOG2E)  # round(x·log2 e), x ≤ 0
        r = (x - np.float32(n) * _LN2_HI) - np.float32(n) * _LN2_LO
        p = np.float32(1.0) + r * (np.float32(1.0) + r * (np.float32(0.5) + r * (np.float32(1.0 / 6) + r * (
            np.float32(1.0 / 24) + r * (np.float32(1.0 / 120) + r * np.float32(1.0 / 720))))))
        e = p * float_of(np.int32((n + 127) << 23))
        scores[i, j] = e
        total += e
    inverse[i] = np.float32(1.0) / total


@njit(cache=True)
def scratch_floats(longest: int, size: int) -> int:
    """float32s of one thread's scratch for texts of at most `longest` rows and heads of `size` dimensions."""
    padded = _padded(longest)
    return size * padded + TILE_ROWS * padded + TILE_ROWS


@njit(cache=True, inline="always")
def _padded(length):
    return (length + TILE_COLUMNS - 1) // TILE_COLUMNS * TILE_COLUMNS


@njit(cache=True, error_model="numpy", fastmath=True)
def attend(qkv, start, length, head, size, hidden, scratch, out):
    """out[start : start + length, head's columns] = the head's attention over the text's rows (module doc);
    `scratch`: the thread's own, at least `scratch_floats(length, size)` float32s."""
    padded = _padded(length)
    q0, k0, v0 = head * size, hidden + head * size, 2 * hidden + head * size
    kt = scratch[:size * padded].reshape((size, padded))
    weights = scratch[size * padded:(size + TILE_ROWS) * padded].reshape((TILE_ROWS, padded))
    inverse = scratch[(size + TILE_ROWS) * padded:(size + TILE_ROWS) * padded + TILE_ROWS]
    for d in range(size):
        for j in range(length):
            kt[d, j] = qkv[start + j, k0 + d]
        for j in range(length, padded):
            kt[d, j] = np.float32(0.0)
    scale = np.float32(1.0 / math.sqrt(size))
    tiled = size % TILE_COLUMNS == 0
    for i in range(0, length, TILE_ROWS):
        rows = min(TILE_ROWS, length - i)
        if tiled:
            for column in range(0, padded, TILE_COLUMNS):
                _score_tile(qkv, np.int64(start + i), np.int64(rows), np.int64(q0), kt, np.int64(column),
                            np.int64(size), weights, scale)
            _softmax_tile(weights, np.int64(rows), np.int64(length), np.int64(padded), inverse)
            for column in range(0, size, TILE_COLUMNS):
                _mix_tile(weights, np.int64(rows), np.int64(length), qkv, np.int64(start), np.int64(v0 + column),
                          inverse, out, np.int64(start + i), np.int64(q0 + column))
        else:
            _score_loops(qkv, start + i, rows, q0, kt, length, size, weights, scale)
            for r in range(rows):
                _softmax_row(weights, r, length, inverse)
            _mix_loops(weights, rows, length, qkv, start, v0, size, inverse, out, start + i, q0)


@njit(cache=True, error_model="numpy", fastmath=True)
def _score_loops(qkv, row0, rows, q0, kt, length, size, scores, scale):
    """`_score_tile`'s sums in plain loops, for any head size (the same order: d outer, one product per step)."""
    for r in range(rows):
        for j in range(length):
            scores[r, j] = np.float32(0.0)
        for d in range(size):
            query = qkv[row0 + r, q0 + d]
            for j in range(length):
                scores[r, j] += query * kt[d, j]
        for j in range(length):
            scores[r, j] *= scale


@njit(cache=True, error_model="numpy", fastmath=True)
def _mix_loops(weights, rows, length, qkv, start, v0, size, inverse, out, out_row, out_column):
    """`_mix_tile`'s sums in plain loops, for any head size."""
    for r in range(rows):
        for d in range(size):
            out[out_row + r, out_column + d] = np.float32(0.0)
        for j in range(length):
            weight = weights[r, j]
            for d in range(size):
                out[out_row + r, out_column + d] += weight * qkv[start + j, v0 + d]
        for d in range(size):
            out[out_row + r, out_column + d] *= inverse[r]
