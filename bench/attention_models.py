# Run: /usr/bin/python3 bench/attention_models.py --out DIR [NAME=G,M,K,N,D ...]
# Writes one-block attention models, y = Softmax(q x k^T * 0.17 + bias) x v with q [1, G, M, K],
# k^T [1, G, K, N], v [1, G, N, D] as inputs and a constant bias [G, M, N], to DIR/NAME.onnx:
# the shapes the fused attention kernel (jit/glue/attention.cpp) meets in real models, for timing
# it alone (`kiln bench DIR/NAME.onnx`, or bench/ab_builds.sh against a build that does not fuse).
# Without arguments: swin49 (Swin / MaxViT windows: 192 x 49 tokens, head 32), levit196, vit197
# (ViT-B/16's 12 heads of 64), botnet784. Needs Debian's python3-onnx and python3-numpy.
import argparse, os
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

SHAPES = {"swin49": (192, 49, 32, 49, 32), "levit196": (4, 196, 16, 196, 32),
          "vit197": (12, 197, 64, 197, 64), "botnet784": (4, 784, 32, 784, 32)}


def model(g, m, k, n, d):
    rng = np.random.default_rng(0)
    bias = numpy_helper.from_array(rng.standard_normal((g, m, n)).astype(np.float32), "bias")
    scale = numpy_helper.from_array(np.array(0.17, np.float32), "scale")
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Mul", ["s", "scale"], ["t"]),
             helper.make_node("Add", ["t", "bias"], ["tb"]),
             helper.make_node("Softmax", ["tb"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    f = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("q", f, [1, g, m, k]),
              helper.make_tensor_value_info("kt", f, [1, g, k, n]),
              helper.make_tensor_value_info("v", f, [1, g, n, d])]
    outputs = [helper.make_tensor_value_info("y", f, [1, g, m, d])]
    graph = helper.make_graph(nodes, "attention", inputs, outputs, [bias, scale])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("shapes", nargs="*", help="NAME=G,M,K,N,D")
    args = ap.parse_args()
    shapes = dict(SHAPES)
    if args.shapes:
        shapes = {}
        for s in args.shapes:
            name, dims = s.split("=")
            shapes[name] = tuple(int(x) for x in dims.split(","))
    os.makedirs(args.out, exist_ok=True)
    for name, dims in shapes.items():
        onnx.save(model(*dims), os.path.join(args.out, name + ".onnx"))
        print(name, dims)


if __name__ == "__main__":
    main()
