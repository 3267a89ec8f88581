"""Fused self-attention for the int8 ONNX model: each layer's unfused attention block becomes one
`com.microsoft.MultiHeadAttention` node.

The exported transformer computes attention as separate passes over memory: Q, K and V reshaped and
transposed to (batch, heads, length, head size), the score product, its scale, the padding mask
added, a softmax, the product with V, a transpose and a reshape back. With int8 weight products on
AMX these passes are most of the encoder's time (bench/results/encoder_roofline.md). ONNX Runtime's
MultiHeadAttention takes Q, K and V as (batch, length, hidden) and does the rest in one kernel, with
the padding given as a key mask (`attention_mask` as int32).

Its CPU kernel uses the same MLAS products and softmax as the unfused graph, so a text's vector is
bit-identical to the unfused model's (a test holds this): the fusion changes speed, not the vectors,
and the encoder's fingerprint stays the unfused model's digest. A model whose attention does not have
this shape is left unfused (`AttentionPatternError`), which only costs speed.
"""

from __future__ import annotations

from typing import Any

MS_DOMAIN = "com.microsoft"
#: the graph input the fused nodes read the padding from
MASK_INPUT = "attention_mask"
KEY_MASK = "fused_attention/key_padding_mask"


class AttentionPatternError(ValueError):
    """The model's attention is not the unfused pattern this rewrite replaces."""


def fuse_attention(model: Any) -> int:
    """Rewrite `model` (an onnx.ModelProto) in place: every Softmax of a self-attention block and the
    nodes around it become one MultiHeadAttention. Returns how many blocks were fused; raises
    AttentionPatternError (leaving the model untouched) when any block does not match."""
    from onnx import TensorProto, helper, numpy_helper

    graph = model.graph
    if MASK_INPUT not in {i.name for i in graph.input}:
        raise AttentionPatternError(f"the model has no {MASK_INPUT!r} input")
    producers = {name: node for node in graph.node for name in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    initializers = {tensor.name: tensor for tensor in graph.initializer}

    def value(name: str) -> Any:
        if name in initializers:
            return numpy_helper.to_array(initializers[name])
        node = producers.get(name)
        if node is not None and node.op_type == "Constant" and node.attribute:
            return numpy_helper.to_array(node.attribute[0].t)
        return None

    def made_by(name: str, op_type: str) -> Any:
        node = producers.get(name)
        if node is None or node.op_type != op_type:
            raise AttentionPatternError(f"{name}: expected a {op_type} producer, found "
                                        f"{None if node is None else node.op_type}")
        return node

    def sole_consumer(name: str, op_type: str) -> Any:
        found = consumers.get(name, [])
        if len(found) != 1 or found[0].op_type != op_type:
            raise AttentionPatternError(f"{name}: expected one {op_type} consumer, found {[n.op_type for n in found]}")
        return found[0]

    def perm(node: Any) -> list[int]:
        return [list(a.ints) for a in node.attribute if a.name == "perm"][0]

    def heads_input(name: str, want: list[int]) -> tuple[str, list[Any], int]:
        """The (batch, length, hidden) tensor behind Transpose(Reshape(x, (B, L, heads, size)))."""
        transpose = made_by(name, "Transpose")
        if perm(transpose) != want:
            raise AttentionPatternError(f"{transpose.name}: transpose {perm(transpose)}, expected {want}")
        reshape = made_by(transpose.input[0], "Reshape")
        shape = made_by(reshape.input[1], "Concat")
        size = value(shape.input[-1])
        if size is None or size.size != 1:
            raise AttentionPatternError(f"{reshape.name}: the head size is not a constant")
        return reshape.input[0], [transpose, reshape], int(size.reshape(-1)[0])

    def hidden_of(name: str) -> int:
        """The width of a Q/K/V projection: its bias (an Add with a 1-D initializer)."""
        node = producers.get(name)
        widths = [initializers[x].dims[0] for x in (node.input if node is not None else [])
                  if x in initializers and len(initializers[x].dims) == 1]
        if node is None or node.op_type != "Add" or not widths:
            raise AttentionPatternError(f"{name}: expected a projection with a bias")
        return int(widths[0])

    fused, removed = [], set()
    for softmax in [n for n in graph.node if n.op_type == "Softmax"]:
        masked = made_by(softmax.input[0], "Add")
        scaled = producers.get(masked.input[0])
        if scaled is None or scaled.op_type not in ("Mul", "Div"):
            raise AttentionPatternError(f"{softmax.name}: the scores are not scaled by a constant")
        factor = value(scaled.input[1])
        if factor is None or factor.size != 1:
            raise AttentionPatternError(f"{scaled.name}: the score scale is not a constant")
        factor = float(factor.reshape(-1)[0])
        scale = factor if scaled.op_type == "Mul" else 1.0 / factor
        scores = made_by(scaled.input[0], "MatMul")
        query, q_nodes, size = heads_input(scores.input[0], [0, 2, 1, 3])
        key, k_nodes, _ = heads_input(scores.input[1], [0, 2, 3, 1])
        product = sole_consumer(softmax.output[0], "MatMul")
        value_in, v_nodes, _ = heads_input(product.input[1], [0, 2, 1, 3])
        back = sole_consumer(product.output[0], "Transpose")
        if perm(back) != [0, 2, 1, 3]:
            raise AttentionPatternError(f"{back.name}: transpose {perm(back)}, expected [0, 2, 1, 3]")
        merged = sole_consumer(back.output[0], "Reshape")
        hidden = hidden_of(query)
        if hidden % size:
            raise AttentionPatternError(f"{softmax.name}: width {hidden} is not a multiple of the head size {size}")
        node = helper.make_node("MultiHeadAttention", [query, key, value_in, "", KEY_MASK], [merged.output[0]],
                                name=f"fused_attention/{len(fused)}", domain=MS_DOMAIN, num_heads=hidden // size,
                                scale=scale)
        fused.append((merged, node))
        removed.update(id(n) for n in [masked, scaled, scores, softmax, product, back, merged,
                                       *q_nodes, *k_nodes, *v_nodes])
    if not fused:
        raise AttentionPatternError("the model has no attention softmax")
    in_place_of = {id(old): new for old, new in fused}
    nodes = [helper.make_node("Cast", [MASK_INPUT], [KEY_MASK], to=TensorProto.INT32, name="fused_attention/mask")]
    for node in graph.node:
        if id(node) in in_place_of:
            nodes.append(in_place_of[id(node)])
        elif id(node) not in removed:
            nodes.append(node)
    del graph.node[:]
    graph.node.extend(_live(nodes, {o.name for o in graph.output}))
    used = {name for node in graph.node for name in node.input}
    keep = [tensor for tensor in graph.initializer if tensor.name in used]
    del graph.initializer[:]
    graph.initializer.extend(keep)
    if not any(opset.domain == MS_DOMAIN for opset in model.opset_import):
        model.opset_import.append(helper.make_opsetid(MS_DOMAIN, 1))
    return len(fused)


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """`nodes` without those whose outputs nothing reads (the mask arithmetic the fused nodes replace)."""
    needed, live = set(outputs), []
    for node in reversed(nodes):
        if any(name in needed for name in node.output):
            live.append(node)
            needed.update(name for name in node.input if name)
    return live[::-1]
