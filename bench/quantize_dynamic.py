#!/usr/bin/python3
"""Writes a model dynamically quantized the way ONNX Runtime's quantize_dynamic does (its Python
tool is not in Debian): per Conv (and Gemm with constant weights), the input goes through
DynamicQuantizeLinear (uint8, scale and zero point from each run's min / max), the weights are
int8 (symmetric, per tensor or with --per-channel per output channel), ConvInteger /
MatMulInteger sums the 8-bit products in int32, then Cast to float, a Mul by x_scale * w_scale
and an Add of the float bias. Both Kiln and ORT run the written file, so their outputs compare
directly (bench/accuracy.py --ort).

usage: bench/quantize_dynamic.py IN.onnx OUT.onnx [--per-channel]
"""
import argparse

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("src")
    ap.add_argument("dst")
    ap.add_argument("--per-channel", action="store_true")
    a = ap.parse_args()
    m = onnx.load(a.src)
    g = m.graph
    inits = {t.name: t for t in g.initializer}
    new_nodes, new_inits = [], []
    dql = {}  # float input -> (y, scale, zero point) of its DynamicQuantizeLinear

    def quantized_input(x):
        if x not in dql:
            outs = [x + "_dq_u8", x + "_dq_scale", x + "_dq_zp"]
            new_nodes.append(helper.make_node("DynamicQuantizeLinear", [x], outs,
                                              name=x + "_DynamicQuantizeLinear"))
            dql[x] = outs
        return dql[x]

    for n in g.node:
        conv = n.op_type == "Conv"
        gemm = (n.op_type == "Gemm" and n.input[1] in inits and
                all(at.name not in ("transA",) or at.i == 0 for at in n.attribute))
        if not (conv or gemm) or n.input[1] not in inits:
            new_nodes.append(n)
            continue
        attrs = {at.name: helper.get_attribute_value(at) for at in n.attribute}
        w = numpy_helper.to_array(inits[n.input[1]]).astype(np.float32)
        if gemm:
            if attrs.get("alpha", 1.0) != 1.0 or attrs.get("beta", 1.0) != 1.0:
                new_nodes.append(n)
                continue
            if attrs.get("transB", 0):
                w = w.T  # MatMulInteger's B is [K, N]
        per = a.per_channel
        axis = 0 if conv else 1  # output channels / columns
        red = tuple(i for i in range(w.ndim) if i != axis) if per else None
        amax = np.max(np.abs(w), axis=red, keepdims=per) if per else np.max(np.abs(w))
        ws = np.where(amax > 0, amax / 127.0, 1.0).astype(np.float32)
        wq = np.clip(np.rint(w / ws), -127, 127).astype(np.int8)
        base = n.name or n.output[0]
        wq_name, ws_name, wz_name = base + "_w_q", base + "_w_scale", base + "_w_zp"
        new_inits.append(numpy_helper.from_array(wq, wq_name))
        ws_flat = ws.reshape(-1) if per else np.array(ws, np.float32)
        new_inits.append(numpy_helper.from_array(ws_flat, ws_name))
        new_inits.append(numpy_helper.from_array(np.zeros(ws_flat.shape, np.int8), wz_name))
        xq, xs, xz = quantized_input(n.input[0])
        acc = base + "_int32"
        if conv:
            new_nodes.append(helper.make_node("ConvInteger", [xq, wq_name, xz, wz_name], [acc],
                                              name=base + "_ConvInteger", **attrs))
        else:
            new_nodes.append(helper.make_node("MatMulInteger", [xq, wq_name, xz, wz_name], [acc],
                                              name=base + "_MatMulInteger"))
        new_nodes.append(helper.make_node("Cast", [acc], [acc + "_f"], to=TensorProto.FLOAT,
                                          name=base + "_Cast"))
        scale = base + "_scale"
        new_nodes.append(helper.make_node("Mul", [xs, ws_name], [scale], name=base + "_scales"))
        if conv and per:  # [M] against [N, M, H, W]
            shape = base + "_scale_shape"
            new_inits.append(numpy_helper.from_array(np.array([1, -1, 1, 1], np.int64), shape))
            new_nodes.append(helper.make_node("Reshape", [scale, shape], [scale + "_4d"],
                                              name=base + "_scale_4d"))
            scale += "_4d"
        has_bias = len(n.input) > 2 and n.input[2]
        out = base + "_nobias" if has_bias else n.output[0]
        new_nodes.append(helper.make_node("Mul", [acc + "_f", scale], [out], name=base + "_rescale"))
        if has_bias and n.input[2] in inits:
            b = numpy_helper.to_array(inits[n.input[2]]).astype(np.float32)
            bname = base + "_bias_b"
            new_inits.append(numpy_helper.from_array(b.reshape(1, -1, 1, 1) if conv else b, bname))
        elif has_bias:  # a computed bias (a Constant node's): reshaped in the graph
            bname = base + "_bias_b"
            shape = base + "_bias_shape"
            new_inits.append(numpy_helper.from_array(np.array([1, -1, 1, 1], np.int64), shape))
            new_nodes.append(helper.make_node("Reshape", [n.input[2], shape], [bname],
                                              name=base + "_bias_4d"))
        if has_bias:
            new_nodes.append(helper.make_node("Add", [out, bname], [n.output[0]],
                                              name=base + "_bias"))
    del g.node[:]
    g.node.extend(new_nodes)
    g.initializer.extend(new_inits)
    used = {i for nd in g.node for i in nd.input}
    keep = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(keep)
    onnx.checker.check_model(m)
    onnx.save(m, a.dst)
    print(f"{a.dst}: {len(dql)} DynamicQuantizeLinear, "
          f"{sum(nd.op_type == 'ConvInteger' for nd in g.node)} ConvInteger, "
          f"{sum(nd.op_type == 'MatMulInteger' for nd in g.node)} MatMulInteger")


if __name__ == "__main__":
    main()
