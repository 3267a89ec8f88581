"""LLVM IR on 16-lane float32 vectors for the kernels' intrinsics (numba has no vector types): the types,
splats, loads and stores at byte addresses, `llvm.fmuladd` (the widest vector FMA the CPU has, or a
multiply and an add, as numba's contracted `a += w * x` compiles), and masked loads and stores for a row's
last, partial vector. Used by the attention tiles of the int8 encoder and the PPR sweep."""

from __future__ import annotations

from llvmlite import ir
from numba.core import cgutils

I1, I64, I32, F32 = ir.IntType(1), ir.IntType(64), ir.IntType(32), ir.FloatType()
LANES = ir.VectorType(F32, 16)
SPLAT = ir.Constant(ir.VectorType(I32, 16), [0] * 16)
_MASK = ir.VectorType(I1, 16)
_WIDE = ir.VectorType(I64, 16)


def const(value: int) -> ir.Constant:
    return ir.Constant(I64, value)


def fmuladd(builder: ir.IRBuilder):
    return cgutils.get_or_insert_function(builder.module, ir.FunctionType(LANES, [LANES] * 3), "llvm.fmuladd.v16f32")


def splat(builder: ir.IRBuilder, value: ir.Value, lanes: ir.VectorType = LANES) -> ir.Value:
    """`value` in all 16 lanes of a vector of type `lanes` (float32 unless said)."""
    undef = ir.Constant(lanes, ir.Undefined)
    return builder.shuffle_vector(builder.insert_element(undef, value, ir.Constant(I32, 0)), undef, SPLAT)


def load(builder: ir.IRBuilder, address: ir.Value, kind: ir.Type) -> ir.Value:
    value = builder.load(builder.inttoptr(address, kind.as_pointer()))
    value.align = 4
    return value


def store(builder: ir.IRBuilder, value: ir.Value, address: ir.Value) -> None:
    builder.store(value, builder.inttoptr(address, LANES.as_pointer())).align = 4


def lane_mask(builder: ir.IRBuilder, first: int, count: ir.Value) -> ir.Value:
    """<16 x i1>: lane l is on where first + l < count (an i64): the live lanes of the vector at `first`."""
    lanes = ir.Constant(_WIDE, [first + lane for lane in range(16)])
    return builder.icmp_signed("<", lanes, splat(builder, count, _WIDE))


def masked_load(builder: ir.IRBuilder, address: ir.Value, mask: ir.Value) -> ir.Value:
    """The 16 floats at byte `address` where `mask` is on, 0 elsewhere; off lanes are not read."""
    pointer = LANES.as_pointer()
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(LANES, [pointer, I32, _MASK, LANES]), "llvm.masked.load.v16f32.p0")
    return builder.call(function, [builder.inttoptr(address, pointer), ir.Constant(I32, 4), mask,
                                   ir.Constant(LANES, None)])


def masked_store(builder: ir.IRBuilder, value: ir.Value, address: ir.Value, mask: ir.Value) -> None:
    """The lanes of `value` where `mask` is on, stored at byte `address`; memory under off lanes is untouched."""
    pointer = LANES.as_pointer()
    function = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(ir.VoidType(), [LANES, pointer, I32, _MASK]), "llvm.masked.store.v16f32.p0")
    builder.call(function, [value, builder.inttoptr(address, pointer), ir.Constant(I32, 4), mask])
