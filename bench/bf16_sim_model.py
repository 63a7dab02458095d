#!/usr/bin/python3
"""Writes a copy of an ONNX model whose Conv / Gemm / MatMul read bf16-rounded operands.

    bench/bf16_sim_model.py IN.onnx OUT.onnx

Every non-constant first or second input of those ops goes through Cast(float -> bfloat16) ->
Cast(bfloat16 -> float), and their constant weights are rounded to bfloat16 (nearest even) in
place: what a bf16 run that rounds exactly the conv / fc operands and keeps f32 elsewhere
computes. Any f32 runtime (ONNX Runtime via ../shared/peers/ort_bench.js) then shows the error
bf16 itself costs on that model, to compare with Kiln's `--precision bf16` (bench/NOTES.md,
"bf16"). Needs NumPy and Debian's python3-onnx."""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def round_bf16(a):
    b = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    b = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32)
    return b.view(np.float32)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.split("\n\n")[1])
    m = onnx.load(sys.argv[1])
    g = m.graph
    inits = {i.name: i for i in g.initializer}
    nodes, casts = [], 0
    for n in g.node:
        if n.op_type in ("Conv", "Gemm", "MatMul"):
            for k, name in enumerate(list(n.input[:2])):
                if name in inits:
                    t = inits[name]
                    t.CopyFrom(numpy_helper.from_array(round_bf16(numpy_helper.to_array(t)), name))
                else:
                    half, back = f"{name}__bf16_{casts}", f"{name}__bf16_{casts}_f32"
                    nodes.append(helper.make_node("Cast", [name], [half], to=TensorProto.BFLOAT16))
                    nodes.append(helper.make_node("Cast", [half], [back], to=TensorProto.FLOAT))
                    n.input[k] = back
                    casts += 1
        nodes.append(n)
    del g.node[:]
    g.node.extend(nodes)
    onnx.save(m, sys.argv[2])
    print(f"{sys.argv[2]}: {casts} activations rounded to bf16, weights rounded in place")


if __name__ == "__main__":
    main()
