"""ONNX Loop, unrolled (graph/inline_loop.cpp): a trip count and condition known at load make
planned nodes (no Loop left in the plan); a trip count or condition that follows the data runs
each run in the run-time tail (graph/dynamic.h). Loop-carried values, scan outputs, the body
reading the enclosing graph, an If inside the body, zero iterations, a while loop, a tensor grown
by concatenation (Mask R-CNN's mask pasting), and malformed or endless loops refused by name.
Expected outputs are computed here in numpy from the loop's definition."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import run_on_each_isa

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL


def const(name, a):
    return numpy_helper.from_array(np.asarray(a), name)


def model(nodes, inputs, outputs, inits=(), opset=13):
    g = helper.make_graph(nodes, "loop", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def vi(name, t=F, shape=None):
    return helper.make_tensor_value_info(name, t, shape)


def body_graph(nodes, extra_in, outs, inits=(), out_types=None):
    """A body taking (i, cond, *extra_in) and returning `outs` (the first is the condition)."""
    ins = [vi("i", I64, []), vi("cond_in", B, [])] + [vi(n, F) for n in extra_in]
    types = out_types or [(B, [])] + [(F, None)] * (len(outs) - 1)
    return helper.make_graph(nodes, "body", ins, [vi(o, t, s) for o, (t, s) in zip(outs, types)],
                             initializer=list(inits))


def affine_body():
    """y_out = relu(y_in) * 0.5 + x2 * i (x2: the enclosing graph's 2x, i as float);
    scan: the sum of y_out; cond_out = cond_in; and an If inside: on odd i also + 1."""
    odd_then = helper.make_graph([helper.make_node("Add", ["t", "one"], ["t_odd"])], "odd", [],
                                 [vi("t_odd")])
    odd_else = helper.make_graph([helper.make_node("Identity", ["t"], ["t_even"])], "even", [],
                                 [vi("t_even")])
    nodes = [helper.make_node("Relu", ["y_in"], ["r"]),
             helper.make_node("Mul", ["r", "half"], ["h"]),
             helper.make_node("Cast", ["i"], ["fi"], to=F),
             helper.make_node("Mul", ["x2", "fi"], ["xi"]),
             helper.make_node("Add", ["h", "xi"], ["t"]),
             helper.make_node("Mod", ["i", "two"], ["par"]),
             helper.make_node("Equal", ["par", "one_i"], ["odd"]),
             helper.make_node("If", ["odd"], ["y_out"], then_branch=odd_then,
                              else_branch=odd_else),
             helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
             helper.make_node("Identity", ["cond_in"], ["cond_out"])]
    inits = [const("half", np.float32(0.5)), const("two", np.int64(2)), const("one_i", np.int64(1))]
    return body_graph(nodes, ["y_in"], ["cond_out", "y_out", "s"], inits)


def affine_ref(x, trips):
    y, sums = x.copy(), []
    for i in range(trips):
        y = np.maximum(y, 0) * np.float32(0.5) + (2 * x) * np.float32(i) + (1 if i % 2 else 0)
        sums.append(y.sum(dtype=np.float64))
    return y, np.array(sums, np.float32).reshape(len(sums))


def test_fixed_trip_count_is_planned(tmp_path):
    nodes = [helper.make_node("Mul", ["x", "two_f"], ["x2"]),
             helper.make_node("Loop", ["trips", "", "x"], ["y", "sums"], name="steps",
                              body=affine_body())]
    inits = [const("trips", np.int64(4)), const("two_f", np.float32(2)),
             const("one", np.float32(1))]
    data = model(nodes, [vi("x", F, (1, 3, 4, 5))], [vi("y"), vi("sums")], inits)
    x = np.random.default_rng(2).standard_normal((1, 3, 4, 5)).astype(np.float32)
    want_y, want_s = affine_ref(x, 4)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_allclose(out["y"], want_y, rtol=1e-5, atol=1e-5, err_msg=max_isa)
        np.testing.assert_allclose(out["sums"], want_s, rtol=1e-5, atol=1e-4, err_msg=max_isa)
        ops = [st["op"] for st in plan["steps"]]
        assert "Loop" not in ops and "If" not in ops, ops
        assert not plan.get("tail"), plan.get("tail")


def counted_model():
    """The trip count is the number of positive elements of t (computed): the loop runs in the
    tail. y grows by one row [x * i] per iteration from an empty [0, 4] (Mask R-CNN's pasting);
    the scan output stacks i * 10 as float; the body also reads an outer computed value (x)."""
    nodes = [helper.make_node("Greater", ["t", "zero"], ["pos"]),
             helper.make_node("Cast", ["pos"], ["posi"], to=I64),
             helper.make_node("ReduceSum", ["posi", "ax0"], ["n"], keepdims=0),
             helper.make_node("Loop", ["n", "true", "empty"], ["rows", "tens"], name="paste",
                              body=body_graph([
                                  helper.make_node("Cast", ["i"], ["fi"], to=F),
                                  helper.make_node("Mul", ["x", "fi"], ["xi"]),
                                  helper.make_node("Unsqueeze", ["xi", "ax0"], ["row"]),
                                  helper.make_node("Concat", ["acc_in", "row"], ["acc_out"],
                                                   axis=0),
                                  helper.make_node("Mul", ["fi", "ten"], ["tens_i"]),
                                  helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                                  ["acc_in"], ["cond_out", "acc_out", "tens_i"],
                                  [const("ten", np.float32(10))],
                                  [(B, []), (F, None), (F, [])]))]
    inits = [const("zero", np.float32(0)), const("ax0", np.array([0], np.int64)),
             const("true", np.array(True)), const("empty", np.zeros((0, 4), np.float32))]
    return model(nodes, [vi("x", F, (4,)), vi("t", F, (6,))], [vi("rows"), vi("tens")], inits)


def test_trip_count_from_the_data_runs_per_run(tmp_path):
    data = counted_model()
    x = np.array([1.5, -2, 0.25, 3], np.float32)
    feeds = [{"x": x, "t": np.array(t, np.float32)} for t in
             ([1, -1, 2, 0, 5, 3], [-1] * 6, [1] * 6, [0, 0, 0, 2, 0, 0])]
    for max_isa, out, plan in run_on_each_isa(data, feeds[0], tmp_path):
        assert plan.get("tail"), max_isa
    with kiln.Session.from_bytes(data, threads=2) as s:
        for f in feeds:
            n = int((f["t"] > 0).sum())
            out = s.run(f)
            np.testing.assert_array_equal(out["rows"], x[None, :] * np.arange(n, dtype=np.float32)[:, None])
            assert out["rows"].shape == (n, 4)
            if n:  # no iteration: the body declares tens_i [] -> [0]
                np.testing.assert_array_equal(out["tens"], np.arange(n, dtype=np.float32) * 10)
            assert out["tens"].shape == (n,)


def test_while_loop_on_computed_values(tmp_path):
    """No trip count; the condition is computed from the carried value: y doubles while its sum
    stays below the limit. The number of iterations (a scan output: the sums) follows x."""
    body = body_graph([
        helper.make_node("Mul", ["y_in", "two"], ["y_out"]),
        helper.make_node("ReduceSum", ["y_out"], ["s"], keepdims=0),
        helper.make_node("Less", ["s", "limit"], ["cond_out"])],
        ["y_in"], ["cond_out", "y_out", "s"], [const("two", np.float32(2))])
    nodes = [helper.make_node("ReduceSum", ["x"], ["s0"], keepdims=0),
             helper.make_node("Less", ["s0", "limit"], ["go"]),
             helper.make_node("Loop", ["", "go", "x"], ["y", "sums"], name="grow", body=body)]
    data = model(nodes, [vi("x", F, (2, 3))], [vi("y"), vi("sums")],
                 [const("limit", np.float32(1000))])
    with kiln.Session.from_bytes(data, threads=2) as s:
        for scale in (1.0, 37.0, 0.01, 600.0):
            x = np.full((2, 3), scale, np.float32)
            y, sums = x.copy(), []
            go = y.sum() < 1000
            while go:
                y = y * 2
                sums.append(y.sum())
                go = sums[-1] < 1000
            out = s.run({"x": x})
            np.testing.assert_array_equal(out["y"], y)
            assert out["sums"].shape == (len(sums),)  # no iteration: [0] (s declares no dims)
            np.testing.assert_allclose(out["sums"], np.array(sums, np.float32).reshape(-1),
                                       rtol=1e-6)


def test_loop_with_no_iteration_at_load_keeps_the_initial_values(tmp_path):
    nodes = [helper.make_node("Loop", ["zero_trips", "", "x"], ["y"], name="none",
                              body=body_graph([helper.make_node("Neg", ["y_in"], ["y_out"]),
                                               helper.make_node("Identity", ["cond_in"],
                                                                ["cond_out"])],
                                              ["y_in"], ["cond_out", "y_out"])),
             helper.make_node("Relu", ["y"], ["z"])]
    data = model(nodes, [vi("x", F, (2, 3))], [vi("z")], [const("zero_trips", np.int64(0))])
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["z"], np.maximum(x, 0), err_msg=max_isa)


def endless(cond_node):
    body = body_graph([helper.make_node("Neg", ["y_in"], ["y_out"]), cond_node],
                      ["y_in"], ["cond_out", "y_out"])
    nodes = [helper.make_node("Loop", ["", "", "x"], ["y"], name="forever", body=body)]
    return model(nodes, [vi("x", F, (2,))], [vi("y")])


def test_an_endless_loop_is_refused_not_run_forever():
    data = endless(helper.make_node("Identity", ["cond_in"], ["cond_out"]))
    with pytest.raises(kiln.Error, match="'forever'.*without stopping"):
        kiln.Session.from_bytes(data)
    # Loops inside loops count together: 10^4 x 10^4 iterations of a small body.
    neg = body_graph([helper.make_node("Neg", ["y_in"], ["y_out"]),
                      helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                     ["y_in"], ["cond_out", "y_out"])
    outer = body_graph([helper.make_node("Loop", ["many", "", "y_in"], ["y_out"], name="inner",
                                         body=neg),
                        helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                       ["y_in"], ["cond_out", "y_out"])
    nodes = [helper.make_node("Loop", ["many", "", "x"], ["y"], name="outer", body=outer)]
    data = model(nodes, [vi("x", F, (2,))], [vi("y")], [const("many", np.int64(10000))])
    with pytest.raises(kiln.Error, match="'.*inner'.*without stopping"):
        kiln.Session.from_bytes(data)


def test_malformed_loops_are_refused_by_name():
    body = body_graph([helper.make_node("Identity", ["cond_in"], ["cond_out"])], [],
                      ["cond_out"])
    # Two loop-carried values given, the body takes none.
    nodes = [helper.make_node("Loop", ["", "", "x", "x"], ["a", "b"], name="wrong", body=body)]
    data = model(nodes, [vi("x", F, (2,))], [vi("a"), vi("b")])
    with pytest.raises(kiln.Error, match="'wrong'.*4 inputs"):
        kiln.Session.from_bytes(data)
    # A float trip count.
    nodes = [helper.make_node("Loop", ["ft", "", "x"], ["a"], name="float_trips",
                              body=body_graph([helper.make_node("Identity", ["cond_in"],
                                                                ["cond_out"]),
                                               helper.make_node("Identity", ["y_in"], ["y_out"])],
                                              ["y_in"], ["cond_out", "y_out"]))]
    data = model(nodes, [vi("x", F, (2,))], [vi("a")], [const("ft", np.float32(3))])
    with pytest.raises(kiln.Error, match="'float_trips'.*trip count.*float32, not int64"):
        kiln.Session.from_bytes(data)
    # No body.
    nodes = [helper.make_node("Loop", ["", "", "x"], ["a"], name="bodiless")]
    data = model(nodes, [vi("x", F, (2,))], [vi("a")])
    with pytest.raises(kiln.Error, match="'bodiless'.*'body'"):
        kiln.Session.from_bytes(data)


def test_a_growing_loop_holds_one_size_at_a_time():
    """300 iterations each concatenating a 40 KB row: holding every iteration's tensor would
    take 1.8 GB; the unrolled iterations release the values of the one before. Measured in a
    fresh process (the peak RSS of this one is whatever earlier tests reached)."""
    import subprocess
    import sys
    script = (
        "import resource, sys, numpy as np, kiln\n"
        "from test_loop import counted_model_rows\n"
        "n = 300\n"
        "with kiln.Session.from_bytes(counted_model_rows(n), threads=1) as s:\n"
        "    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "    out = s.run({'x': np.ones(10000, np.float32), 't': np.ones(n, np.float32)})\n"
        "assert out['rows'].shape == (n, 10000), out['rows'].shape\n"
        "assert (out['rows'][:, 0] == np.arange(n)).all()\n"
        "print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)\n")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    grown_mb = float(r.stdout.split()[-1])
    assert grown_mb < 400, grown_mb  # two sizes live, plus the kept buffers (graph/alloc.h)


def counted_model_rows(n):
    """counted_model with x of 10,000 elements and t of n."""
    m = counted_model()
    import onnx
    p = onnx.load_from_string(m)
    for v in p.graph.input:
        v.type.tensor_type.shape.dim[0].dim_value = 10000 if v.name == "x" else n
    p.graph.initializer[3].CopyFrom(const("empty", np.zeros((0, 10000), np.float32)))
    return p.SerializeToString()


@pytest.mark.parametrize("trips_from_data", [False, True])
def test_a_loop_inside_a_loop_reads_the_outer_body(trips_from_data, tmp_path):
    """The inner body reads a value the outer body computes (x_outer) and its own iteration
    number; the outer trip count is a constant (all planned) or the input's sum (the tail)."""
    inner = body_graph([helper.make_node("Cast", ["i"], ["fj"], to=F),
                        helper.make_node("Add", ["fj", "one"], ["fj1"]),
                        helper.make_node("Mul", ["x_outer", "fj1"], ["t"]),
                        helper.make_node("Add", ["y_in", "t"], ["y_out"]),
                        helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                       ["y_in"], ["cond_out", "y_out"])
    outer = body_graph([helper.make_node("Mul", ["y_in", "two"], ["x_outer"]),
                        helper.make_node("Loop", ["m_inner", "", "y_in"], ["y_out"], name="inner",
                                         body=inner),
                        helper.make_node("Identity", ["cond_in"], ["cond_out"])],
                       ["y_in"], ["cond_out", "y_out"])
    nodes, inits = [], [const("m_inner", np.int64(3)), const("two", np.float32(2)),
                        const("one", np.float32(1))]
    if trips_from_data:
        nodes += [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
                  helper.make_node("Cast", ["s"], ["m_outer"], to=I64)]
    else:
        inits.append(const("m_outer", np.int64(2)))
    nodes.append(helper.make_node("Loop", ["m_outer", "", "x"], ["y"], name="outer", body=outer))
    data = model(nodes, [vi("x", F, (3,))], [vi("y")], inits)
    x = np.array([0.5, 1.0, 0.5], np.float32)  # sum 2: two outer iterations either way
    want = x.copy()
    for _ in range(2):
        x_outer = want * 2
        for j in range(3):
            want = want + x_outer * (j + 1)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], want, err_msg=max_isa)
        assert bool(plan.get("tail")) == trips_from_data, max_isa
