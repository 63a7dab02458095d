#!/usr/bin/python3
"""Per-layer times of Kiln and ONNX Runtime on one model, side by side.

    bench/layer_compare.py MODEL.onnx [--input X.npy] [--kiln build/bench/kiln] [--threads 1,2]
        [--runs 200] [--ort-dir /root/kiln-peers] [--json out.json] [-- kiln bench args]

zoo_bench.py says how a whole model compares; this says which layers make the difference.
Kiln: `kiln bench --layers` (each plan step's median over --runs profiled runs). ONNX Runtime:
bench/ort_profile.js (its own profiler; the first fifth of the runs dropped, then each node's
median). Each Conv / Gemm / MatMul with a constant weight is matched across the two by (op,
weight shape, output height and width), in run order among equals (ORT renames the nodes it
fuses). ORT's elementwise nodes right after a matched op, on as many elements (swish,
sigmoid, clip, GELU: Kiln fuses those into the conv's store; reshapes between them pass),
count with that op. The rest of each side (Kiln's glue steps and layout conversions, ORT's
reorders, pools, adds ...) is summed as "unmatched". Prints, per thread count, every matched
layer (Kiln kernel and ms, ORT ms, Kiln / ORT), the totals per Kiln kernel family, and the
unmatched rest. Caveats: ORT's profiler adds ~5 us inside each node's time (more between
nodes), so small layers flatter Kiln a little, and whole-model ratios belong to zoo_bench.py;
where Kiln runs branches concurrently (the flow graph, e.g. GoogLeNet at 2 threads) its step
times overlap and do not add up. The input defaults to MODEL.input.npy (make_models.py
writes it).
"""
import argparse
import collections
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

import onnx

HERE = os.path.dirname(os.path.abspath(__file__))
ELTWISE = {"Relu", "Clip", "Sigmoid", "HardSigmoid", "HardSwish", "QuickGelu", "Mul", "Add", "Sum",
           "LeakyRelu", "Tanh", "Gelu", "FastGelu", "BiasGelu"}
VIEWS = {"Reshape", "Squeeze", "Unsqueeze", "Flatten"}  # (ORT reshapes around a MatMul's Gemm)
OPS = {"Conv": "Conv", "FusedConv": "Conv", "NhwcFusedConv": "Conv", "Gemm": "Gemm",
       "FusedGemm": "Gemm", "MatMul": "Gemm", "FusedMatMul": "Gemm",  # (ORT: MatMul+Add -> Gemm)
       "ConvTranspose": "ConvTranspose"}


def dims(shape):
    """The dims of one ORT profile shape entry ({"float": [dims]}); None if absent."""
    return next(iter(shape.values()), None) if shape else None


def numel(shape):
    d = dims(shape)
    return None if d is None else math.prod(d)


def conv_key(op, wdims, out_dims):
    """A conv's match key: its weight shape and output height and width (a 1x1 of stride 1 and
    one of stride 2 share weights). ORT's NCHWc convs report weights with their channel counts
    padded to the block (24 -> 32), so both sides round the two channel dims above 4 up to 16."""
    pad = [(d + 15) // 16 * 16 if i < 2 and d > 4 else d for i, d in enumerate(wdims)]
    return (op, tuple(pad), tuple(out_dims[-2:]) if out_dims else None)


def weight_keys(model_path):
    """ONNX node name -> match key for the ops OPS matches, with a constant weight: convs by
    their weight shape, Gemm / MatMul by their output width (ORT's profile omits a prepacked
    weight's shape)."""
    m = onnx.load(model_path, load_external_data=False)
    dims = {t.name: tuple(t.dims) for t in m.graph.initializer}
    shapes = {}
    for vi in onnx.shape_inference.infer_shapes(m).graph.value_info:
        shapes[vi.name] = [d.dim_value for d in vi.type.tensor_type.shape.dim]
    keys = {}
    for n in m.graph.node:
        if n.op_type not in OPS or len(n.input) < 2 or n.input[1] not in dims:
            continue
        w, op = dims[n.input[1]], OPS[n.op_type]
        if op == "Gemm":
            trans_b = any(a.name == "transB" and a.i for a in n.attribute)
            keys[n.name] = (op, "n", w[0] if trans_b else w[-1])
        else:
            keys[n.name] = conv_key(op, w, shapes.get(n.output[0]))
    return keys


def kiln_layers(args, threads, tmp):
    out = os.path.join(tmp, f"kiln_{threads}.json")
    cmd = [args.kiln, "bench", args.model, "--threads", str(threads), "--runs", str(args.runs),
           "--layers", "--json", out] + args.kiln_args
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(out) as f:
        return json.load(f)


def ort_nodes(args, threads, tmp):
    env = dict(os.environ)
    env.setdefault("ORT_NODE_DIR", os.path.join(args.ort_dir, "node_modules", "onnxruntime-node"))
    runs = args.runs + args.runs // 4
    res = subprocess.run(["node", os.path.join(HERE, "ort_profile.js"), args.model, args.input,
                          str(threads), str(runs), os.path.join(tmp, f"ort_{threads}")],
                         check=True, env=env, capture_output=True, text=True)
    with open(res.stdout.strip().splitlines()[-1]) as f:
        events = json.load(f)
    per = collections.OrderedDict()
    e_out = {}  # node -> its first output's {"type": dims}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        name = e["name"][: -len("_kernel_time")]
        per.setdefault(name, {"op": e["args"].get("op_name", "?"),
                              "inputs": e["args"].get("input_type_shape", []), "us": []})
        per[name]["us"].append(e["dur"])
        if e["args"].get("output_type_shape"):
            e_out[name] = e["args"]["output_type_shape"][0]
    nodes = []
    for name, v in per.items():
        us = v["us"][len(v["us"]) // 5:] or v["us"]
        key, out = None, dims(e_out.get(name))
        if OPS.get(v["op"]) == "Gemm":
            key = (OPS[v["op"]], "n", out[-1]) if out else None
        elif v["op"] in OPS and len(v["inputs"]) > 1:
            key = conv_key(OPS[v["op"]], tuple(dims(v["inputs"][1])), out)
        nodes.append({"node": name, "op": v["op"], "key": key, "ms": statistics.median(us) / 1e3,
                      "out": e_out.get(name)})
    # Elementwise nodes right after a matched op on a tensor of its output's shape (ORT runs
    # swish, sigmoid, clip ... as their own nodes where Kiln fuses them into the conv's store):
    # their time is counted with that op ("post").
    for i, o in enumerate(nodes):
        o["post_ms"] = 0.0
        if not o["key"]:
            continue
        for n in nodes[i + 1:]:
            if n["op"] not in ELTWISE | VIEWS or numel(n["out"]) != numel(o["out"]):
                break
            o["post_ms"] += n["ms"]
            n["folded"] = True
    runs_us = [e["dur"] for e in events if e.get("cat") == "Session" and e["name"] == "model_run"]
    return nodes, statistics.median(runs_us[len(runs_us) // 5:]) / 1e3 if runs_us else None


def family(kernel):
    m = re.match(r"(.*?)_(f32|bf16|int8|u8|nchw|nhwc|nChw)", kernel)
    return m.group(1) if m else kernel


def compare(args, threads, keys, tmp):
    k = kiln_layers(args, threads, tmp)
    ort, ort_run = ort_nodes(args, threads, tmp)
    queues = collections.defaultdict(collections.deque)
    for o in ort:
        if o["key"]:
            queues[o["key"]].append(o)
    rows, used = [], set()
    for layer in k["layers"]:
        key = keys.get(layer.get("node"))
        o = queues[key].popleft() if key and queues.get(key) else None
        if o:
            used.add(id(o))
        rows.append({"node": layer.get("node"), "kernel": layer["kernel"], "kiln_ms": layer["ms"],
                     "ort_node": o["node"] if o else None,
                     "ort_ms": o["ms"] + o["post_ms"] if o else None,
                     "ort_post_ms": o["post_ms"] if o else None})
    # (an unmatched op carries its folded followers into "other")
    ort_other = sum(o["ms"] + o["post_ms"] for o in ort if id(o) not in used and not o.get("folded"))
    return {"threads": threads, "kiln_p50_ms": k["latency_ms"]["p50"], "ort_run_ms": ort_run,
            "rows": rows, "ort_other_ms": ort_other}


def report(r):
    print(f"\n== {r['threads']} thread(s): Kiln p50 {r['kiln_p50_ms']:.3f} ms; ORT run median "
          f"{r['ort_run_ms']:.3f} ms (profiled)")
    print(f"{'node':44s} {'kiln kernel':58s} {'kiln':>8s} {'ort':>8s} {'k/o':>5s}")
    fam = collections.defaultdict(lambda: [0, 0.0, 0.0])
    other = 0.0
    for x in r["rows"]:
        if x["ort_ms"] is None:
            other += x["kiln_ms"]
            continue
        f = fam[family(x["kernel"])]
        f[0] += 1
        f[1] += x["kiln_ms"]
        f[2] += x["ort_ms"]
        print(f"{(x['node'] or '')[-44:]:44s} {x['kernel'][:58]:58s} {x['kiln_ms']:8.4f} "
              f"{x['ort_ms']:8.4f} {x['kiln_ms'] / x['ort_ms']:5.2f}")
    print(f"\n{'matched layers by Kiln family':40s} {'n':>4s} {'kiln ms':>9s} {'ort ms':>9s} {'k/o':>5s}")
    tk = to = 0.0
    for name, (n, a, b) in sorted(fam.items(), key=lambda kv: -kv[1][1]):
        tk += a
        to += b
        print(f"{name:40s} {n:4d} {a:9.3f} {b:9.3f} {a / b:5.2f}")
    print(f"{'all matched':40s} {'':4s} {tk:9.3f} {to:9.3f} {tk / to if to else 0:5.2f}")
    print(f"{'unmatched (glue, conversions / other ops)':40s} {'':4s} {other:9.3f} "
          f"{r['ort_other_ms']:9.3f}")


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model")
    ap.add_argument("--input", help="input .npy (default MODEL.input.npy)")
    ap.add_argument("--kiln", default=os.path.join(HERE, "..", "build", "bench", "kiln"))
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--ort-dir", default="/root/kiln-peers")
    ap.add_argument("--json", help="write the rows as JSON")
    args = ap.parse_args(argv)
    args.kiln_args = extra
    args.input = args.input or re.sub(r"\.onnx$", ".input.npy", args.model)
    keys = weight_keys(args.model)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for t in [int(x) for x in args.threads.split(",")]:
            results.append(compare(args, t, keys, tmp))
            report(results[-1])
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"model": args.model, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
