#!/usr/bin/python3
# One-op ONNX models for timing the glue ops of bench/NOTES.md ("glue ops") with
# `kiln bench M.onnx --layers` against `--reference`: x [1, 64, 56, 56] (0.8 MB) through Tanh,
# Erf, Sqrt, Pow 2.5 / 3, Tanh + Erf + Sum of three, Softmax over channels, Transpose to NHWC,
# a channel shuffle (Reshape + Transpose), constant Pad; Softmax over rows of [256, 1000].
# Usage: glue_ops_models.py OUTDIR
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

out = sys.argv[1] if len(sys.argv) > 1 else "/tmp/glue_ops"
os.makedirs(out, exist_ok=True)
S = (1, 64, 56, 56)


def save(name, nodes, inits, out_shape, in_shape=S):
    g = h.make_graph(nodes, name, [h.make_tensor_value_info("x", T.FLOAT, list(in_shape))],
                     [h.make_tensor_value_info("y", T.FLOAT, list(out_shape))], inits)
    onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 13)]), f"{out}/{name}.onnx")


def f32(name, v):
    return nh.from_array(np.array(v, dtype=np.float32), name)


def i64(name, v):
    return nh.from_array(np.array(v, dtype=np.int64), name)


save("tanh", [h.make_node("Tanh", ["x"], ["y"])], [], S)
save("erf", [h.make_node("Erf", ["x"], ["y"])], [], S)
save("sqrt", [h.make_node("Sqrt", ["x"], ["y"])], [], S)
save("pow25", [h.make_node("Pow", ["x", "e"], ["y"])], [f32("e", 2.5)], S)
save("pow3", [h.make_node("Pow", ["x", "e"], ["y"])], [f32("e", 3.0)], S)
save("sum3", [h.make_node("Tanh", ["x"], ["t"]), h.make_node("Erf", ["x"], ["e"]),
              h.make_node("Sum", ["x", "t", "e"], ["y"])], [], S)
save("softmax_c", [h.make_node("Softmax", ["x"], ["y"], axis=1)], [], S)
save("softmax_rows", [h.make_node("Softmax", ["x"], ["y"], axis=-1)], [], (256, 1000),
     in_shape=(256, 1000))
save("transpose_nhwc", [h.make_node("Transpose", ["x"], ["y"], perm=[0, 2, 3, 1])], [],
     (1, 56, 56, 64))
save("transpose_shuffle", [h.make_node("Reshape", ["x", "s"], ["r"]),
                           h.make_node("Transpose", ["r"], ["y"], perm=[0, 2, 1, 3, 4])],
     [i64("s", [1, 2, 32, 56, 56])], (1, 32, 2, 56, 56))
save("pad", [h.make_node("Pad", ["x", "p", "v"], ["y"])],
     [i64("p", [0, 0, 1, 1, 0, 0, 1, 1]), f32("v", 0.5)], (1, 64, 58, 58))
