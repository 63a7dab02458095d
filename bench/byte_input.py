#!/usr/bin/python3
"""A QDQ model taking its image as bytes: drops the QuantizeLinear that reads the float input and
makes its output the (uint8 / int8) graph input; SRC's .input.npy is quantized the same way
into DST's. Kiln and ORT then run DST on the bytes (bench/ort_outputs.js reads '|u1' inputs).

usage: bench/byte_input.py SRC.onnx DST.onnx
"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper


def main():
    src, dst = sys.argv[1], sys.argv[2]
    m = onnx.load(src)
    g = m.graph
    inp = g.input[0].name
    q = next(n for n in g.node if n.op_type == "QuantizeLinear" and n.input[0] == inp)
    init = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    s, z = float(init[q.input[1]]), init[q.input[2]]
    g.node.remove(q)
    g.input[0].name = q.output[0]
    g.input[0].type.tensor_type.elem_type = (TensorProto.UINT8 if z.dtype == np.uint8
                                             else TensorProto.INT8)
    onnx.save(m, dst)
    x = np.load(src.replace(".onnx", ".input.npy"))
    info = np.iinfo(z.dtype)
    xq = np.clip(np.rint(x / np.float32(s)) + int(z), info.min, info.max).astype(z.dtype)
    np.save(dst.replace(".onnx", ".input.npy"), xq)
    print(f"{dst}: input {q.output[0]} {xq.dtype}{list(xq.shape)}, scale {s}, zero point {int(z)}")


if __name__ == "__main__":
    main()
