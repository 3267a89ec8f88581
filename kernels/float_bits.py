"""Float32 bits as integers and back, as register moves, for the kernels' vectorised float tricks (a peak
|x| as an integer maximum, 2ⁿ built from its exponent bits): numba has no bitcast of scalars, and an array
view through memory is something the optimiser may reorder."""

from __future__ import annotations

from .. import numba_cache  # noqa: F401  (a writable numba cache before a kernel compiles)

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic


@intrinsic
def bits_of(typingctx, value):
    """The int32 bits of a float32 (a register move: no memory, so nothing for the optimiser to reorder)."""
    if value != types.float32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(32))

    return types.int32(types.float32), codegen


@intrinsic
def float_of(typingctx, bits):
    """The float32 whose bits are the low 32 bits of the integer `bits`."""
    if not isinstance(bits, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        value = args[0]
        if bits.bitwidth > 32:
            value = builder.trunc(value, ir.IntType(32))
        return builder.bitcast(value, ir.FloatType())

    return types.float32(bits), codegen


@njit(cache=True, error_model="numpy", fastmath=True, inline="always")
def ordered(bits):
    """An int32 that orders as the float32 whose bits are `bits` (an involution: it also maps back)."""
    return bits ^ ((bits >> np.int32(31)) & np.int32(0x7FFFFFFF))
