#!/usr/bin/env python3
"""Rewrites a QDQ model (`kiln quantize`'s, or a PyTorch quantized export) into ONNX's operator
form, as the ONNX model zoo's int8 models and ONNX Runtime's QOperator quantization write them:
DQ -> Conv [-> Relu] -> Q becomes QLinearConv, DQ -> Add [-> Relu] -> Q com.microsoft.QLinearAdd,
DQ -> GlobalAveragePool -> Q QLinearGlobalAveragePool, DQs -> Concat -> Q QLinearConcat, and
DQ -> MaxPool / Flatten -> Q on one grid the op itself on the 8-bit tensor. A Relu is folded
only where it is exact (the output's zero point is the bottom of its range). Everything else
(a Gemm, say) stays in the QDQ form. For tests and benchmarks of Kiln's operator-form import.

    /usr/bin/python3 bench/qoperator.py IN.onnx OUT.onnx
"""
import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper


def to_qoperator(model):
    g = model.graph
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant" and n.attribute and n.attribute[0].name == "value":
            consts[n.output[0]] = numpy_helper.to_array(n.attribute[0].t)
    # Casts of an 8-bit tensor to its own type (PyTorch's exports): readers take the input.
    producer = {o: n for n in g.node for o in n.output}
    alias = {}
    for n in g.node:
        p = producer.get(n.input[0]) if n.input else None
        if n.op_type == "Cast" and p is not None and p.op_type == "QuantizeLinear":
            alias[n.output[0]] = n.input[0]
    for n in g.node:
        for i, x in enumerate(n.input):
            if x in alias:
                n.input[i] = alias[x]
    producer = {o: n for n in g.node for o in n.output}
    readers = {}
    for n in g.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    outputs = {o.name for o in g.output}

    def only_reader(v):
        r = readers.get(v, [])
        return r[0] if len(r) == 1 and v not in outputs else None

    def dq_of(v):  # (x, scale, zero point) of the DequantizeLinear producing v
        p = producer.get(v)
        if p is None or p.op_type != "DequantizeLinear" or len(p.input) < 3:
            return None
        return list(p.input[:3])

    def exact_relu(q):  # a Relu before q is exact: zero point at the bottom of its range
        z = consts.get(q.input[2])
        return z is not None and z.dtype == np.uint8 and int(z.ravel()[0]) == 0

    def tail(node):  # the QuantizeLinear after node (through an exact Relu): (q, nodes)
        r = only_reader(node.output[0])
        if r is not None and r.op_type == "Relu":
            q = only_reader(r.output[0])
            if q is not None and q.op_type == "QuantizeLinear" and exact_relu(q):
                return q, [r, q]
            return None, None
        if r is not None and r.op_type == "QuantizeLinear" and len(r.input) == 3:
            return r, [r]
        return None, None

    new_nodes, drop = {}, set()
    for n in g.node:
        q, gone = tail(n) if n.output else (None, None)
        ins = [dq_of(x) for x in n.input]
        if q is None or any(i is None for i in ins[:1]):
            continue
        y = q.output[0]
        if n.op_type == "Conv" and all(i is not None for i in ins):
            x, w = ins[0], ins[1]
            qin = x + w + list(q.input[1:3])
            if len(ins) > 2:  # the int32 bias, zero point 0 on x_scale * w_scale
                b = ins[2]
                if np.any(consts.get(b[2], np.zeros(1)) != 0):
                    continue
                qin.append(b[0])
            m = helper.make_node("QLinearConv", qin, [y], name=n.name + "_qlinear")
            m.attribute.extend(n.attribute)
        elif n.op_type == "Add" and all(i is not None for i in ins):
            m = helper.make_node("QLinearAdd", ins[0] + ins[1] + list(q.input[1:3]), [y],
                                 name=n.name + "_qlinear", domain="com.microsoft")
        elif n.op_type == "GlobalAveragePool" and len(gone) == 1:
            m = helper.make_node("QLinearGlobalAveragePool", ins[0] + list(q.input[1:3]), [y],
                                 name=n.name + "_qlinear", domain="com.microsoft",
                                 channels_last=0)
        elif n.op_type == "Concat" and all(i is not None for i in ins) and len(gone) == 1:
            qin = list(q.input[1:3]) + [v for i in ins for v in i]
            m = helper.make_node("QLinearConcat", qin, [y], name=n.name + "_qlinear",
                                 domain="com.microsoft")
            m.attribute.extend(n.attribute)
        elif n.op_type in ("MaxPool", "Flatten") and len(gone) == 1 and len(n.output) == 1:
            same = all(np.array_equal(consts.get(a), consts.get(b))
                       for a, b in zip(ins[0][1:], q.input[1:3]))
            if not same:
                continue
            m = helper.make_node(n.op_type, [ins[0][0]], [y], name=n.name + "_8bit")
            m.attribute.extend(n.attribute)
        else:
            continue
        new_nodes[id(n)] = m
        drop.update(id(x) for x in gone)
    nodes = []
    for n in g.node:
        if id(n) in new_nodes:
            nodes.append(new_nodes[id(n)])
        elif id(n) not in drop:
            nodes.append(n)
    # Dead nodes (the DequantizeLinears the new ops replaced): drop, to a fixpoint.
    while True:
        used = {x for n in nodes for x in n.input} | outputs
        live = [n for n in nodes if any(o in used for o in n.output)]
        if len(live) == len(nodes):
            break
        nodes = live
    del g.node[:]
    g.node.extend(nodes)
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    m = to_qoperator(onnx.load(sys.argv[1]))
    onnx.save(m, sys.argv[2])
    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(sys.argv[2], dict(sorted(ops.items())))


if __name__ == "__main__":
    main()
