"""Exact integer products of uint8 activation rows with packed int8 weights, the core of the numba-int8
encoder (kernels/int8_encoder.py).

A weight matrix K × N (K a multiple of 4, N of `PANEL`) is packed once into panels of `PANEL` columns:
`packed[p, k // 4, l, k % 4] = w[k, p·PANEL + l]`. One tile multiplies up to `TILE_ROWS` rows of `a`
(uint8, row-major, any row stride) with one panel and stores the exact int32 sums.

Two twins give the same integers (integer sums are exact in any order):
* `tile_vnni`: AVX-512 VNNI. Each step broadcasts four bytes of a row and multiplies them with a
  64-byte slice of the panel in one `vpdpbusd` (u8 × s8 → 4 products summed into each int32 lane),
  `TILE_ROWS` × 2 accumulators in registers. It is emitted as LLVM IR (numba has no vector types);
  compiled only on a CPU that has the instruction.
* `tile_portable`: plain loops, for every other CPU.
`tile` is the one this CPU runs; `HAS_VNNI` says which. No CUDA twin: on a GPU the encoder is torch.
"""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

#: rows of one tile (accumulators: TILE_ROWS × 2 zmm registers of the 32 available)
TILE_ROWS = 8
#: columns of a panel: two 16-lane int32 vectors
PANEL = 32


def _host_features() -> dict:
    try:
        from llvmlite import binding

        return dict(binding.get_host_cpu_features())
    except Exception:  # noqa: BLE001 - no feature list: the portable twin is always right
        return {}


_FEATURES = _host_features()
#: whether this CPU runs the VNNI tile (AVX-512 VNNI)
HAS_VNNI = bool(_FEATURES.get("avx512vnni") and _FEATURES.get("avx512bw") and _FEATURES.get("avx512f"))
#: whether this CPU has AMX int8 tiles (which these kernels do not use; ONNX Runtime's do)
HAS_AMX = bool(_FEATURES.get("amx-int8"))


@intrinsic
def _vnni_tile(typingctx, a, a_row, a_rows, packed, panel, c, c_col, k4):
    """c[a_row + r, c_col + l] = Σ_k a[a_row + r, k] · w[k, panel·PANEL + l] for r < a_rows ≤ TILE_ROWS, l < PANEL."""
    sig = types.void(a, a_row, a_rows, packed, panel, c, c_col, k4)

    def codegen(context, builder, signature, args):
        a_type, _, _, w_type, _, c_type, _, _ = signature.args
        a_val, a_row, a_rows, w_val, panel, c_val, c_col, k4 = args
        a_arr = context.make_array(a_type)(context, builder, a_val)
        w_arr = context.make_array(w_type)(context, builder, w_val)
        c_arr = context.make_array(c_type)(context, builder, c_val)
        i64, i32 = ir.IntType(64), ir.IntType(32)
        lanes = ir.VectorType(i32, 16)
        dpbusd = cgutils.get_or_insert_function(builder.module, ir.FunctionType(lanes, [lanes, lanes, lanes]),
                                                "llvm.x86.avx512.vpdpbusd.512")

        def const(value: int) -> ir.Constant:
            return ir.Constant(i64, value)

        a_stride = builder.extract_value(a_arr.strides, 0)
        w_panel_stride = builder.extract_value(w_arr.strides, 0)
        w_step_stride = builder.extract_value(w_arr.strides, 1)
        c_stride = builder.extract_value(c_arr.strides, 0)
        a_base = builder.ptrtoint(a_arr.data, i64)
        w_base = builder.add(builder.ptrtoint(w_arr.data, i64), builder.mul(panel, w_panel_stride))
        c_base = builder.ptrtoint(c_arr.data, i64)
        zero = ir.Constant(lanes, None)
        accumulators = [[cgutils.alloca_once_value(builder, zero) for _ in range(2)] for _ in range(TILE_ROWS)]
        rows = []  # byte address of each row; rows past a_rows read the last one (their sums are not stored)
        last = builder.sub(a_rows, const(1))
        for r in range(TILE_ROWS):
            row = builder.select(builder.icmp_signed("<", const(r), a_rows), const(r), last)
            rows.append(builder.add(a_base, builder.mul(builder.add(a_row, row), a_stride)))
        with cgutils.for_range(builder, k4) as loop:
            step = loop.index
            w_step = builder.add(w_base, builder.mul(step, w_step_stride))
            halves = []
            for g in range(2):
                load = builder.load(builder.inttoptr(builder.add(w_step, const(64 * g)), lanes.as_pointer()))
                load.align = 1
                halves.append(load)
            for r in range(TILE_ROWS):
                four = builder.load(builder.inttoptr(builder.add(rows[r], builder.mul(step, const(4))), i32.as_pointer()))
                four.align = 1
                spread = builder.insert_element(ir.Constant(lanes, ir.Undefined), four, ir.Constant(i32, 0))
                spread = builder.shuffle_vector(spread, ir.Constant(lanes, ir.Undefined), ir.Constant(lanes, [0] * 16))
                for g in range(2):
                    total = builder.call(dpbusd, [builder.load(accumulators[r][g]), spread, halves[g]])
                    builder.store(total, accumulators[r][g])
        for r in range(TILE_ROWS):
            with builder.if_then(builder.icmp_signed("<", const(r), a_rows)):
                out = builder.add(c_base, builder.mul(builder.add(a_row, const(r)), c_stride))
                out = builder.add(out, builder.mul(c_col, const(4)))
                for g in range(2):
                    store = builder.store(builder.load(accumulators[r][g]),
                                          builder.inttoptr(builder.add(out, const(64 * g)), lanes.as_pointer()))
                    store.align = 1
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def tile_vnni(a, a_row, a_rows, packed, panel, c, c_col):
    """The VNNI tile: rows a_row .. a_row + a_rows of `a` times panel `panel` into c[rows, c_col : c_col + PANEL]."""
    _vnni_tile(a, np.int64(a_row), np.int64(a_rows), packed, np.int64(panel), c, np.int64(c_col),
               np.int64(packed.shape[1]))


@njit(cache=True)
def tile_portable(a, a_row, a_rows, packed, panel, c, c_col):
    """The portable twin of `tile_vnni`: the same integers."""
    steps = packed.shape[1]
    sums = np.zeros(PANEL, dtype=np.int32)
    for r in range(a_row, a_row + a_rows):
        sums[:] = 0
        for step in range(steps):
            for t in range(4):
                x = np.int32(a[r, 4 * step + t])
                for lane in range(PANEL):
                    sums[lane] += x * np.int32(packed[panel, step, lane, t])
        for lane in range(PANEL):
            c[r, c_col + lane] = sums[lane]


#: the tile this CPU runs. numba's cache is keyed by the CPU's name and features, so code compiled with one
#: choice is never loaded on a CPU that needs the other
tile = tile_vnni if HAS_VNNI else tile_portable


def pack(weights: np.ndarray) -> np.ndarray:
    """Panels of a K × N int8 matrix (module doc); K a multiple of 4 and N of PANEL."""
    k, n = weights.shape
    if k % 4 or n % PANEL:
        raise ValueError(f"a {k} × {n} weight matrix cannot be packed: K must be a multiple of 4 and N of {PANEL}")
    panels = weights.reshape(k // 4, 4, n // PANEL, PANEL).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(panels, dtype=np.int8)


@njit(cache=True)
def rows_times(a, row, rows, packed, c):
    """c[row : row + rows, :N] = a[row : row + rows, :K] @ w (exact int32), w's panels `packed` (P, K/4, PANEL, 4)."""
    for panel in range(packed.shape[0]):
        for start in range(row, row + rows, TILE_ROWS):
            tile(a, start, min(TILE_ROWS, row + rows - start), packed, panel, c, panel * PANEL)
