"""Exact integer products of uint8 activation rows with packed int8 weights, the core of the numba-int8
encoder (kernels/int8_encoder.py).

A weight matrix K × N (K a multiple of 4, N of `PANEL`) is packed once into panels of `PANEL` columns:
`packed[p, k // 4, l, k % 4] = w[k, p·PANEL + l]`. One tile multiplies up to `TILE_ROWS` rows of `a`
(uint8, row-major, any row stride) with one panel and stores the exact int32 sums.

Three twins give the same integers (integer sums are exact in any order):
* `tile_vnni`: AVX-512 VNNI. Each step broadcasts four bytes of a row and multiplies them with a
  64-byte slice of the panel in one `vpdpbusd` (u8 × s8 → 4 products summed into each int32 lane),
  `TILE_ROWS` × 2 accumulators in registers. It is emitted as LLVM IR (numba has no vector types);
  compiled only on a CPU that has the instruction.
* `rows_amx`: AMX (Intel Sapphire Rapids and later). A panel's layout is already the B operand AMX wants
  (K/4 rows of four bytes per column), so one `tdpbusd` multiplies 16 rows × 64 bytes of `a` with 64 of K ×
  16 columns of a panel: up to 32 rows (two A tiles) × one panel (two B tiles) per step, four int32 C tiles.
  Linux hands the tile registers to a process that asks (`amx_ready`, arch_prctl ARCH_REQ_XCOMP_PERM); the
  encoder passes `amx` to `rows_times` only then, and only for K a multiple of `AMX_K`.
* `tile_portable`: plain loops, for every other CPU.
`tile` is the VNNI or portable one this CPU runs; `HAS_VNNI` and `HAS_AMX` say which. No CUDA twin: on a GPU
the encoder is torch.
"""

from __future__ import annotations

import functools
import platform

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
#: whether this CPU (and the kernel's XSAVE set, which LLVM's feature list reflects) has AMX int8 tiles
HAS_AMX = bool(_FEATURES.get("amx-int8") and _FEATURES.get("amx-tile"))
#: rows of `a` one AMX call multiplies (two 16-row A tiles); K of one tile step (an A tile row is 64 bytes)
AMX_ROWS = 32
AMX_K = 64
_ARCH_PRCTL = 158  # x86-64 syscall number
_ARCH_REQ_XCOMP_PERM = 0x1023
_XFEATURE_XTILEDATA = 18


@functools.lru_cache(maxsize=1)
def amx_ready() -> bool:
    """Whether this process may run the AMX products: the CPU has AMX and Linux granted the tile state (a
    process must ask once; without the grant the first tile instruction kills it with SIGILL)."""
    if not HAS_AMX or platform.system() != "Linux" or platform.machine() not in ("x86_64", "AMD64"):
        return False
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True).syscall(_ARCH_PRCTL, _ARCH_REQ_XCOMP_PERM, _XFEATURE_XTILEDATA) == 0
    except (OSError, AttributeError):
        return False


def _arrays(context, builder, signature, args, positions: tuple[int, ...]) -> list:
    """The array structures (data pointer, shape, strides) of an intrinsic's arguments at `positions`."""
    return [context.make_array(signature.args[i])(context, builder, args[i]) for i in positions]


@intrinsic
def _vnni_tile(typingctx, a, a_row, a_rows, packed, panel, c, c_col, k4):
    """c[a_row + r, c_col + l] = Σ_k a[a_row + r, k] · w[k, panel·PANEL + l] for r < a_rows ≤ TILE_ROWS, l < PANEL."""
    sig = types.void(a, a_row, a_rows, packed, panel, c, c_col, k4)

    def codegen(context, builder, signature, args):
        _, a_row, a_rows, _, panel, _, c_col, k4 = args
        a_arr, w_arr, c_arr = _arrays(context, builder, signature, args, (0, 3, 5))
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


def _amx_functions(builder):
    """The AMX intrinsics LLVM knows (the forms with tile numbers as immediates)."""
    i8, i64 = ir.IntType(8), ir.IntType(64)
    void, pointer = ir.VoidType(), ir.IntType(8).as_pointer()

    def function(name: str, arguments: list) -> ir.Function:
        return cgutils.get_or_insert_function(builder.module, ir.FunctionType(void, arguments), name)

    return {"configure": function("llvm.x86.ldtilecfg", [pointer]), "release": function("llvm.x86.tilerelease", []),
            "zero": function("llvm.x86.tilezero", [i8]), "load": function("llvm.x86.tileloadd64", [i8, pointer, i64]),
            "store": function("llvm.x86.tilestored64", [i8, pointer, i64]),
            "dot": function("llvm.x86.tdpbusd", [i8, i8, i8])}


def _tmm(number: int) -> ir.Constant:
    return ir.Constant(ir.IntType(8), number)


@intrinsic
def _amx_configure(typingctx, rows):
    """Configure this thread's tiles for products of `rows` ≤ AMX_ROWS rows: C tiles 0-1 (rows 0-15 × the panel's
    columns 0-15 / 16-31) and 2-3 (rows 16-31), A tiles 4 (rows 0-15) and 5 (rows 16-31), B tiles 6-7 (64 of K ×
    16 columns). Each tile has the call's own row count, so no row past `rows` is read or written."""
    sig = types.void(rows)

    def codegen(context, builder, signature, args):
        (rows,) = args
        i8, i16, i64 = ir.IntType(8), ir.IntType(16), ir.IntType(64)
        amx = _amx_functions(builder)
        # the 64-byte configuration: palette 1, bytes per row of tile k at 16 + 2k, its rows at 48 + k
        config = cgutils.alloca_once(builder, ir.ArrayType(i8, 64))
        builder.store(ir.Constant(ir.ArrayType(i8, 64), [0] * 64), config)
        config = builder.bitcast(config, i8.as_pointer())
        builder.store(_tmm(1), config)
        sixteen = ir.Constant(i64, 16)
        top = builder.select(builder.icmp_signed("<", rows, sixteen), rows, sixteen)
        bottom = builder.sub(rows, top)
        full = ir.Constant(i16, 64)
        bottom_bytes = builder.select(builder.icmp_signed(">", bottom, ir.Constant(i64, 0)), full, ir.Constant(i16, 0))
        top_rows, bottom_rows = builder.trunc(top, i8), builder.trunc(bottom, i8)
        for k, tile_rows, width in ((0, top_rows, full), (1, top_rows, full), (2, bottom_rows, bottom_bytes),
                                    (3, bottom_rows, bottom_bytes), (4, top_rows, full), (5, bottom_rows, bottom_bytes),
                                    (6, _tmm(16), full), (7, _tmm(16), full)):
            builder.store(width, builder.bitcast(builder.gep(config, [ir.Constant(i64, 16 + 2 * k)]), i16.as_pointer()))
            builder.store(tile_rows, builder.gep(config, [ir.Constant(i64, 48 + k)]))
        builder.call(amx["configure"], [config])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_release(typingctx):
    """Hand the tiles back (their state need not be saved at the next context switch)."""
    sig = types.void()

    def codegen(context, builder, signature, args):
        builder.call(_amx_functions(builder)["release"], [])
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def _amx_panel(typingctx, a, a_row, a_rows, packed, panel, c, c_row, c_col):
    """c[c_row + r, c_col : c_col + PANEL] = Σ_k a[a_row + r, k] · w[k, panel·PANEL + ...] for r < a_rows, on tiles
    configured by `_amx_configure(a_rows)`. K must be a multiple of AMX_K."""
    sig = types.void(a, a_row, a_rows, packed, panel, c, c_row, c_col)

    def codegen(context, builder, signature, args):
        _, a_row, a_rows, _, panel, _, c_row, c_col = args
        a_arr, w_arr, c_arr = _arrays(context, builder, signature, args, (0, 3, 5))
        i64 = ir.IntType(64)
        pointer = ir.IntType(8).as_pointer()
        amx = _amx_functions(builder)

        def const(value: int) -> ir.Constant:
            return ir.Constant(i64, value)

        def address(value) -> ir.Value:
            return builder.inttoptr(value, pointer)

        two_halves = builder.icmp_signed(">", a_rows, const(16))
        a_stride = builder.extract_value(a_arr.strides, 0)
        c_stride = builder.extract_value(c_arr.strides, 0)
        step_stride = builder.extract_value(w_arr.strides, 1)  # bytes of four K values × PANEL columns
        k_steps = builder.sdiv(builder.extract_value(w_arr.shape, 1), const(AMX_K // 4))
        a_top = builder.add(builder.ptrtoint(a_arr.data, i64), builder.mul(a_row, a_stride))
        a_bottom = builder.add(a_top, builder.mul(const(16), a_stride))
        c_top = builder.add(builder.add(builder.ptrtoint(c_arr.data, i64), builder.mul(c_row, c_stride)),
                            builder.mul(c_col, const(4)))
        c_bottom = builder.add(c_top, builder.mul(const(16), c_stride))
        w_panel = builder.add(builder.ptrtoint(w_arr.data, i64),
                              builder.mul(panel, builder.extract_value(w_arr.strides, 0)))
        builder.call(amx["zero"], [_tmm(0)])
        builder.call(amx["zero"], [_tmm(1)])
        with builder.if_then(two_halves):
            builder.call(amx["zero"], [_tmm(2)])
            builder.call(amx["zero"], [_tmm(3)])
        with cgutils.for_range(builder, k_steps) as step:
            a_offset = builder.mul(step.index, const(AMX_K))
            w_step = builder.add(w_panel, builder.mul(step.index, builder.mul(const(AMX_K // 4), step_stride)))
            builder.call(amx["load"], [_tmm(4), address(builder.add(a_top, a_offset)), a_stride])
            builder.call(amx["load"], [_tmm(6), address(w_step), step_stride])
            builder.call(amx["load"], [_tmm(7), address(builder.add(w_step, const(64))), step_stride])
            builder.call(amx["dot"], [_tmm(0), _tmm(4), _tmm(6)])
            builder.call(amx["dot"], [_tmm(1), _tmm(4), _tmm(7)])
            with builder.if_then(two_halves):
                builder.call(amx["load"], [_tmm(5), address(builder.add(a_bottom, a_offset)), a_stride])
                builder.call(amx["dot"], [_tmm(2), _tmm(5), _tmm(6)])
                builder.call(amx["dot"], [_tmm(3), _tmm(5), _tmm(7)])
        builder.call(amx["store"], [_tmm(0), address(c_top), c_stride])
        builder.call(amx["store"], [_tmm(1), address(builder.add(c_top, const(64))), c_stride])
        with builder.if_then(two_halves):
            builder.call(amx["store"], [_tmm(2), address(c_bottom), c_stride])
            builder.call(amx["store"], [_tmm(3), address(builder.add(c_bottom, const(64))), c_stride])
        return context.get_dummy_value()

    return sig, codegen


@njit(cache=True)
def _rows_amx(a, row, rows, packed, c):
    if packed.shape[1] % (AMX_K // 4) != 0:
        raise ValueError("the AMX products need K a multiple of AMX_K")
    for start in range(row, row + rows, AMX_ROWS):
        n = min(AMX_ROWS, row + rows - start)
        _amx_configure(np.int64(n))
        for panel in range(packed.shape[0]):
            _amx_panel(a, np.int64(start), np.int64(n), packed, np.int64(panel), c, np.int64(start),
                       np.int64(panel * PANEL))
        _amx_release()


@njit(cache=True)
def _no_amx(*args):
    raise RuntimeError("the AMX products were asked for on a CPU without AMX")


#: the tile this CPU runs. numba's cache is keyed by the CPU's name and features, so code compiled with one
#: choice is never loaded on a CPU that needs the other
tile = tile_vnni if HAS_VNNI else tile_portable
#: the AMX products, compiled only where the CPU has AMX (LLVM cannot emit them for another CPU). Call them
#: only where `amx_ready()`: the tile state is the operating system's to grant (asked for here, at import, so a
#: caller that checked nothing still runs in a process that holds the grant where one was given)
rows_amx = _rows_amx if HAS_AMX else _no_amx
amx_ready()


def pack(weights: np.ndarray) -> np.ndarray:
    """Panels of a K × N int8 matrix (module doc); K a multiple of 4 and N of PANEL."""
    k, n = weights.shape
    if k % 4 or n % PANEL:
        raise ValueError(f"a {k} × {n} weight matrix cannot be packed: K must be a multiple of 4 and N of {PANEL}")
    panels = weights.reshape(k // 4, 4, n // PANEL, PANEL).transpose(2, 0, 3, 1)
    return np.ascontiguousarray(panels, dtype=np.int8)


@njit(cache=True)
def rows_times(a, row, rows, packed, c, amx=False):
    """c[row : row + rows, :N] = a[row : row + rows, :K] @ w (exact int32), w's panels `packed` (P, K/4, PANEL, 4).
    `amx`: on the AMX tiles (only where `amx_ready()` and K is a multiple of AMX_K), else on `tile`."""
    if amx:
        rows_amx(a, row, rows, packed, c)
        return
    for panel in range(packed.shape[0]):
        for start in range(row, row + rows, TILE_ROWS):
            tile(a, start, min(TILE_ROWS, row + rows - start), packed, panel, c, panel * PANEL)
