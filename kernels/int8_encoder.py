"""A BERT encoder's forward pass over ragged texts, int8 products and fused float passes (backend
`numba-int8`, gpu_tigrag/encoders/numba_int8.py).

The texts of a call are concatenated rows (one per token, no padding): text t is rows
starts[t] .. starts[t] + lengths[t]. A text's rows depend on no other text's, so consecutive texts are cut
into bundles of about `BUNDLE_ROWS` rows, and each thread takes the next bundle and runs it through every
layer: one parallel region per call, no barrier between layers. Per layer, a bundle's

1. attention, per (text, head): scores q·k/√d over the text's own rows, softmax, the sum of v, in
   float32 vector tiles (`attention_tiles`);
2. the rest, per block of `BLOCK_ROWS` rows: the output projection, residual and layer norm, the
   feed-forward (GELU) and its layer norm, then the next layer's Q/K/V projection. Every intermediate
   of a block stays in the thread's scratch (cache-resident), so there is no memory pass per operation.

Every product is int8: activations quantised per row (symmetric, scale max|x|/127, stored as uint8 around
128), weights per output column (`int8_gemm`), integer sums exact, dequantised by row scale × column
scale. Every float step reads one row (or one text), in the same code whatever the row's neighbours,
so a text's vector is the same in any batch, with any batch-mates and any thread count.
GELU uses erf by Abramowitz & Stegun 7.1.28 (|error| ≤ 3e-7) and softmax a polynomial exp (relative error
below 1e-5, about 1e-7 near a row's maximum, where the weight is): plain arithmetic that vectorises, where
libm calls would not. Compiled with error_model="numpy" (a division's zero check would stop vectorisation)
and fastmath, so no step may produce an infinity (GELU's argument is bounded).
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

from .attention_tiles import attend, scratch_floats
from .float_bits import bits_of, float_of
from .int8_gemm import rows_times

#: rows per block of the row pass (a multiple of int8_gemm.TILE_ROWS)
BLOCK_ROWS = 32
#: rows of a bundle of consecutive texts, one thread's unit of work through every layer (a longer text alone)
BUNDLE_ROWS = 128
#: activations are int8 in [-127, 127], stored as uint8 around this zero point
ZERO_POINT = 128
MIN_SCALE = 1e-12
#: Abramowitz & Stegun 7.1.28
_A1, _A2, _A3 = np.float32(0.0705230784), np.float32(0.0422820123), np.float32(0.0092705272)
_A4, _A5, _A6 = np.float32(0.0001520143), np.float32(0.0002765672), np.float32(0.0000430638)
_INV_SQRT2 = np.float32(0.7071067811865476)


@intrinsic
def _take(typingctx, counters, slot):
    """counters[slot] += 1, atomically; returns the value before (threads take the bundles from one counter)."""
    if not (isinstance(counters, types.Array) and counters.dtype == types.int64 and counters.ndim == 1):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        where = builder.gep(array.data, [args[1]])
        return builder.atomic_rmw("add", where, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(counters, types.intp), codegen


@njit(cache=True, error_model="numpy", fastmath=True, inline="always")
def _gelu(x):
    z = min(abs(x) * _INV_SQRT2, np.float32(4.0))  # erf(4) rounds to 1 in float32; bounded, p¹⁶ stays finite
    p = np.float32(1.0) + z * (_A1 + z * (_A2 + z * (_A3 + z * (_A4 + z * (_A5 + z * _A6)))))
    p2 = p * p
    p4 = p2 * p2
    p8 = p4 * p4
    erf = np.float32(1.0) - np.float32(1.0) / (p8 * p8)
    erf = erf if x >= 0 else -erf
    return np.float32(0.5) * x * (np.float32(1.0) + erf)


@njit(cache=True, error_model="numpy", fastmath=True)
def _quantize(x, row, rows, width, q, scales):
    """q[r, :width] = x[r, :width] as uint8 around ZERO_POINT (rounded half up), scales[r] its scale, for the
    block's rows. The row's peak |x| is found on the float bits (a non-negative float orders as its bits), an
    integer maximum that vectorises where a float one does not."""
    for r in range(row, row + rows):
        top = np.int32(0)
        for j in range(width):
            top = max(top, bits_of(x[r, j]) & np.int32(0x7FFFFFFF))
        scale = max(float_of(np.int32(top)) / np.float32(127.0), np.float32(MIN_SCALE))
        inverse = np.float32(1.0) / scale
        for j in range(width):
            q[r, j] = np.uint8(np.int32(x[r, j] * inverse + np.float32(ZERO_POINT + 0.5)))
        scales[r] = scale


@njit(cache=True, error_model="numpy", fastmath=True)
def _gelu_rows(x, rows, width):
    """x[:rows, :width] = GELU(x), in place."""
    for r in range(rows):
        for j in range(width):
            x[r, j] = _gelu(x[r, j])


@njit(cache=True, error_model="numpy", fastmath=True)
def _dequantize(c, row, rows, width, column_sums, column_scales, bias, scales, out):
    """out[r, :width] = the block's exact sums back in float: (c − 128·Σw) · row scale · column scale + bias."""
    for r in range(row, row + rows):
        scale = scales[r]
        for j in range(width):
            out[r, j] = np.float32(c[r, j] - ZERO_POINT * column_sums[j]) * (column_scales[j] * scale) + bias[j]


@njit(cache=True, error_model="numpy", fastmath=True)
def _norm_row(x, r, gamma, beta, eps, out):
    """out[r] = layer_norm(x[r]) (out may be x)."""
    width = gamma.shape[0]
    total = np.float32(0.0)
    for j in range(width):
        total += x[r, j]
    mean = total / np.float32(width)
    spread = np.float32(0.0)
    for j in range(width):
        d = x[r, j] - mean
        spread += d * d
    inverse = np.float32(1.0) / np.sqrt(spread / np.float32(width) + eps)
    for j in range(width):
        out[r, j] = (x[r, j] - mean) * inverse * gamma[j] + beta[j]


@njit(cache=True, error_model="numpy", fastmath=True)
def _add_norm_row(x, r, residual, gamma, beta, eps):
    """residual[r] = layer_norm(x[r] + residual[r]) (x[r] is overwritten with the sum)."""
    for j in range(gamma.shape[0]):
        x[r, j] += residual[r, j]
    _norm_row(x, r, gamma, beta, eps, residual)


@njit(cache=True, error_model="numpy", fastmath=True)
def _embed_rows(ids, row_of_text, word, position, token_type, gamma, beta, eps, h):
    """h = layer_norm(word + position + token type embedding) for a block's rows."""
    for r in range(h.shape[0]):
        for j in range(word.shape[1]):
            h[r, j] = word[ids[r], j] + position[row_of_text[r], j] + token_type[j]
        _norm_row(h, r, gamma, beta, eps, h)


@njit(cache=True)
def bundles(lengths, most):
    """Boundaries of the call's bundles: consecutive texts of at most `most` rows together (a longer text alone).
    Bundle b is texts bounds[b] .. bounds[b + 1]."""
    bounds = np.empty(lengths.shape[0] + 1, dtype=np.int64)
    count, rows = 0, 0
    bounds[0] = 0
    for t in range(lengths.shape[0]):
        if t > bounds[count] and rows + lengths[t] > most:
            count += 1
            bounds[count] = t
            rows = 0
        rows += lengths[t]
    count += 1
    bounds[count] = lengths.shape[0]
    return bounds[:count + 1]


@njit(cache=True, parallel=True, error_model="numpy", fastmath=True)
def encode_rows(ids, starts, lengths, word, position, token_type, embed_gamma, embed_beta, eps, heads,
                qkv_w, qkv_sums, qkv_scales, qkv_bias, out_w, out_sums, out_scales, out_bias, gamma1, beta1,
                up_w, up_sums, up_scales, up_bias, down_w, down_sums, down_scales, down_bias, gamma2, beta2,
                hidden_states, threads, amx):
    """The last hidden state of every row (hidden_states, rows × H) of the texts (ids: rows; starts,
    lengths: per text, consecutive). Weights of layer l: `*_w[l]` packed int8 panels (int8_gemm.pack), `*_sums[l]`
    their column sums, `*_scales[l]` column scales, `*_bias[l]`; the layer norms' `gamma*`, `beta*`. `threads`:
    numba's thread count; `amx`: the int8 products on the AMX tiles (int8_gemm.rows_amx; the same integers).

    A text's rows depend on no other text's, so the texts are cut into bundles (`bundles`, BUNDLE_ROWS rows) and
    each thread takes the next bundle from a shared counter and runs it through every layer with its own scratch:
    one parallel region per call and no barrier between layers, so a thread slowed by another process (a build's
    NER thread) takes fewer bundles instead of holding every layer's end, and a bundle's activations stay in its
    thread's cache from layer to layer."""
    hidden = word.shape[1]
    inner = up_bias.shape[1]
    bounds = bundles(lengths, BUNDLE_ROWS)
    count = bounds.shape[0] - 1
    most, longest = 0, 0
    for b in range(count):
        first, last = bounds[b], bounds[b + 1] - 1
        most = max(most, starts[last] + lengths[last] - starts[first])
    for t in range(lengths.shape[0]):
        longest = max(longest, lengths[t])
    # each thread's scratch, reused by its bundles (allocating per bundle costs a page fault per page touched)
    qkv = np.empty((threads, most, 3 * hidden), dtype=np.float32)
    context = np.empty((threads, most, hidden), dtype=np.float32)
    positions = np.empty((threads, most), dtype=np.int64)
    q = np.empty((threads, BLOCK_ROWS, inner), dtype=np.uint8)
    sums = np.empty((threads, BLOCK_ROWS, inner), dtype=np.int32)
    work = np.empty((threads, BLOCK_ROWS, inner), dtype=np.float32)
    scales = np.empty((threads, BLOCK_ROWS), dtype=np.float32)
    attention_scratch = np.empty((threads, scratch_floats(longest, hidden // heads)), dtype=np.float32)
    taken = np.zeros(1, dtype=np.int64)
    for me in prange(threads):  # thread `me` takes the next bundle until none is left
        while True:
            b = _take(taken, 0)
            if b >= count:
                break
            _encode_bundle(ids, starts, lengths, bounds[b], bounds[b + 1], word, position, token_type, embed_gamma,
                           embed_beta, eps, heads, qkv_w, qkv_sums, qkv_scales, qkv_bias, out_w, out_sums, out_scales,
                           out_bias, gamma1, beta1, up_w, up_sums, up_scales, up_bias, down_w, down_sums, down_scales,
                           down_bias, gamma2, beta2, hidden_states, qkv[me], context[me], positions[me], q[me], sums[me],
                           work[me], scales[me], attention_scratch[me], amx)


@njit(cache=True, error_model="numpy", fastmath=True)
def _encode_bundle(ids, starts, lengths, first, end, word, position, token_type, embed_gamma, embed_beta, eps, heads,
                   qkv_w, qkv_sums, qkv_scales, qkv_bias, out_w, out_sums, out_scales, out_bias, gamma1, beta1,
                   up_w, up_sums, up_scales, up_bias, down_w, down_sums, down_scales, down_bias, gamma2, beta2,
                   hidden_states, qkv, context, positions, q, sums, work, scales, attention_scratch, amx):
    """Texts first .. end (one bundle) through every layer: h = their rows of hidden_states; qkv, context,
    positions: the bundle's scratch (its rows from 0); q, sums, work, scales: one block's."""
    row0 = starts[first]
    rows = starts[end - 1] + lengths[end - 1] - row0
    hidden = word.shape[1]
    size = hidden // heads
    h = hidden_states[row0:row0 + rows]
    for t in range(first, end):
        for i in range(lengths[t]):
            positions[starts[t] - row0 + i] = i
    for row in range(0, rows, BLOCK_ROWS):
        stop = min(row + BLOCK_ROWS, rows)
        n = stop - row
        _embed_rows(ids[row0 + row:row0 + stop], positions[row:stop], word, position, token_type, embed_gamma,
                    embed_beta, eps, h[row:stop])
        _project_qkv(h[row:stop], qkv_w[0], qkv_sums[0], qkv_scales[0], qkv_bias[0], qkv[row:stop], q[:n], sums[:n],
                     scales[:n], amx)
    for layer in range(qkv_w.shape[0]):
        for t in range(first, end):
            for head in range(heads):
                attend(qkv, starts[t] - row0, lengths[t], head, size, hidden, attention_scratch, context)
        for row in range(0, rows, BLOCK_ROWS):
            stop = min(row + BLOCK_ROWS, rows)
            n = stop - row
            _rows_after_attention(layer, context[row:stop], h[row:stop], qkv[row:stop], q[:n], sums[:n], work[:n],
                                  scales[:n], eps, out_w, out_sums, out_scales, out_bias, gamma1, beta1, up_w, up_sums,
                                  up_scales, up_bias, down_w, down_sums, down_scales, down_bias, gamma2, beta2, qkv_w,
                                  qkv_sums, qkv_scales, qkv_bias, amx)


@njit(cache=True, error_model="numpy", fastmath=True)
def _rows_after_attention(layer, context, h, qkv, q, sums, work, scales, eps, out_w, out_sums, out_scales, out_bias, gamma1, beta1, up_w, up_sums,
                          up_scales, up_bias, down_w, down_sums, down_scales, down_bias, gamma2, beta2, qkv_w, qkv_sums,
                          qkv_scales, qkv_bias, amx):
    """One block of rows (the arguments are its rows), from the attention's output to the next layer's Q/K/V; its
    intermediates live in the block's own scratch, which stays in cache."""
    n, hidden = h.shape
    inner = up_bias.shape[1]
    # attention output, residual, layer norm
    _quantize(context, 0, n, hidden, q, scales)
    rows_times(q, 0, n, out_w[layer], sums, amx)
    _dequantize(sums, 0, n, hidden, out_sums[layer], out_scales[layer], out_bias[layer], scales, work)
    for r in range(n):
        _add_norm_row(work, r, h, gamma1[layer], beta1[layer], eps)
    # feed-forward, residual, layer norm
    _quantize(h, 0, n, hidden, q, scales)
    rows_times(q, 0, n, up_w[layer], sums, amx)
    _dequantize(sums, 0, n, inner, up_sums[layer], up_scales[layer], up_bias[layer], scales, work)
    _gelu_rows(work, n, inner)
    _quantize(work, 0, n, inner, q, scales)
    rows_times(q, 0, n, down_w[layer], sums, amx)
    _dequantize(sums, 0, n, hidden, down_sums[layer], down_scales[layer], down_bias[layer], scales, work)
    for r in range(n):
        _add_norm_row(work, r, h, gamma2[layer], beta2[layer], eps)
    if layer + 1 < qkv_w.shape[0]:
        _project_qkv(h, qkv_w[layer + 1], qkv_sums[layer + 1], qkv_scales[layer + 1], qkv_bias[layer + 1], qkv, q, sums, scales, amx)


@njit(cache=True, error_model="numpy", fastmath=True)
def _project_qkv(h, w, column_sums, column_scales, bias, qkv, q, sums, scales, amx):
    """qkv[rows] = the block's rows of h times the Q/K/V weights (dequantised, biased); q, sums, scales: scratch."""
    n, hidden = h.shape
    _quantize(h, 0, n, hidden, q, scales)
    rows_times(q, 0, n, w, sums, amx)
    _dequantize(sums, 0, n, 3 * hidden, column_sums, column_scales, bias, scales, qkv)
