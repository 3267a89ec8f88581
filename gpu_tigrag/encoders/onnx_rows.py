"""Per-row activation scales for a dynamically quantised ONNX model: a text's vector then depends
neither on the other texts of its batch nor on how much the batch pads it.

ONNX Runtime's dynamic quantisation (`quantize_dynamic`) quantises each MatMul input with one scale
and zero point computed at run time over the *whole tensor*: every token of every text in the batch,
padding included. A query's vector then depends on its batch-mates (cosine 0.996-0.9999 between
batchings), and its ranking can change with the batch size or the entry point.

This rewrite quantises each such input per row instead (per token of each text), symmetrically:
scale = max|x| / 127 over the row, zero point 128, `uint8 = clip(round(x / scale) + 128, 0, 255)`.
Each `DynamicQuantizeLinear` → `MatMulInteger` → `Cast` → `Mul(scale × weight scale)` chain becomes

    QuantizeLinear(x as rows, per-row scale, axis 0) → MatMulIntegerToFloat(weight scales) → Mul(row scale)

Integer products are exact, so a token's quantised products depend on its own row alone; the float
parts of the model (attention, layer norm) see padding only through masked keys whose weight is
exactly zero. `MatMulIntegerToFloat` is ONNX Runtime's contrib op (domain com.microsoft) that its own
graph optimiser fuses the chain into; written here explicitly because the optimiser's fusion
(`MatMulIntegerToFloatFusion`) assumes one activation scale per tensor and must stay disabled for
this model (`DISABLED_OPTIMIZERS`).
"""

from __future__ import annotations

from typing import Any

#: activations are symmetric int8 values in [-127, 127], stored as uint8 around this zero point
ZERO_POINT = 128
#: the smallest scale (an all-zero row quantises to zeros)
MIN_SCALE = 1e-12
#: ONNX Runtime graph optimisations that would read a per-row scale as a per-tensor one
DISABLED_OPTIMIZERS = ("MatMulIntegerToFloatFusion",)
MS_DOMAIN = "com.microsoft"


class RewriteError(ValueError):
    """The quantised model does not have the node pattern this rewrite expects."""


def per_row_activation_scales(model: Any) -> int:
    """Rewrite `model` (an onnx.ModelProto from `quantize_dynamic`) in place so that every dynamically
    quantised MatMul input is quantised per row. Returns how many inputs were rewritten."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    consumers: dict[str, list[Any]] = {}
    producers: dict[str, Any] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
        for name in node.output:
            producers[name] = node

    def only_consumer(name: str, op_type: str) -> Any:
        found = consumers.get(name, [])
        if len(found) != 1 or found[0].op_type != op_type:
            raise RewriteError(f"{name}: expected one {op_type} consumer, found {[n.op_type for n in found]}")
        return found[0]

    def constant(name: str, value: Any, dtype: Any) -> str:
        graph.initializer.append(numpy_helper.from_array(np.array(value, dtype=dtype), name))
        return name

    one = constant("per_row/one", 1.0, np.float32)
    inv127 = constant("per_row/inv127", 1.0 / 127.0, np.float32)
    min_scale = constant("per_row/min_scale", MIN_SCALE, np.float32)
    offset = constant("per_row/offset", float(ZERO_POINT), np.float32)
    zero = constant("per_row/zero", 0.0, np.float32)
    zero_point = constant("per_row/zero_point", ZERO_POINT, np.uint8)
    flat = constant("per_row/flat", [-1], np.int64)

    replaced: dict[int, list[Any]] = {}  # id(node) -> nodes in its place (empty: removed)
    rewritten = 0
    for node in list(graph.node):
        if node.op_type != "DynamicQuantizeLinear":
            continue
        (x,), (quantized, scale, point) = node.input, node.output
        b = f"per_row/{rewritten}"
        matmuls = consumers.get(quantized, [])
        if not matmuls or any(m.op_type != "MatMulInteger" or m.input[2] != point for m in matmuls):
            raise RewriteError(f"{quantized}: expected MatMulInteger consumers using its zero point")
        new = [
            helper.make_node("ReduceMax", [x], [f"{b}/max"], name=f"{b}/ReduceMax", axes=[-1], keepdims=1),
            helper.make_node("ReduceMin", [x], [f"{b}/min"], name=f"{b}/ReduceMin", axes=[-1], keepdims=1),
            helper.make_node("Neg", [f"{b}/min"], [f"{b}/neg_min"], name=f"{b}/Neg"),
            helper.make_node("Max", [f"{b}/max", f"{b}/neg_min"], [f"{b}/absmax"], name=f"{b}/AbsMax"),
            helper.make_node("Mul", [f"{b}/absmax", inv127], [f"{b}/raw_scale"], name=f"{b}/Scale"),
            helper.make_node("Max", [f"{b}/raw_scale", min_scale], [f"{b}/scale"], name=f"{b}/MinScale"),
            helper.make_node("Reshape", [f"{b}/scale", flat], [f"{b}/row_scale"], name=f"{b}/RowScale"),
            helper.make_node("Mul", [f"{b}/row_scale", zero], [f"{b}/row_zero"], name=f"{b}/RowZero"),
            helper.make_node("Add", [f"{b}/row_zero", offset], [f"{b}/row_offset"], name=f"{b}/RowOffset"),
            helper.make_node("Cast", [f"{b}/row_offset"], [f"{b}/row_point"], name=f"{b}/RowPoint",
                             to=TensorProto.UINT8),
            helper.make_node("Flatten", [x], [f"{b}/rows"], name=f"{b}/Flatten", axis=-1),
            helper.make_node("QuantizeLinear", [f"{b}/rows", f"{b}/row_scale", f"{b}/row_point"], [f"{b}/q_rows"],
                             name=f"{b}/QuantizeLinear", axis=0),
            helper.make_node("Shape", [x], [f"{b}/shape"], name=f"{b}/Shape"),
            helper.make_node("Reshape", [f"{b}/q_rows", f"{b}/shape"], [quantized], name=f"{b}/Unflatten"),
        ]
        replaced[id(node)] = new
        for m, matmul in enumerate(matmuls):
            cast = only_consumer(matmul.output[0], "Cast")
            scaled = only_consumer(cast.output[0], "Mul")
            scales = next(producers[name] for name in scaled.input
                          if name in producers and producers[name].op_type == "Mul" and scale in producers[name].input)
            weight_scale = next(name for name in scales.input if name != scale)
            fused = f"{b}/{m}/fused"
            replaced[id(matmul)] = [
                helper.make_node("MatMulIntegerToFloat", [quantized, matmul.input[1], one, weight_scale, zero_point,
                                                          matmul.input[3]], [fused], name=f"{b}/{m}/MatMulIntegerToFloat",
                                 domain=MS_DOMAIN),
                helper.make_node("Mul", [fused, f"{b}/scale"], [scaled.output[0]], name=f"{b}/{m}/RowScaleMul"),
            ]
            for gone in (cast, scaled, scales):
                replaced[id(gone)] = []
        rewritten += 1
    if rewritten:
        nodes = [n for node in graph.node for n in replaced.get(id(node), [node])]
        del graph.node[:]
        graph.node.extend(nodes)
        if not any(op.domain == MS_DOMAIN for op in model.opset_import):
            model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return rewritten

