"""If nodes whose condition is known at load (exporters emit them around shape checks): the
branch taken is inlined (graph/inline_if.cpp) — which branch depends on the input's shape, a
branch reads values of the enclosing graphs, has its own initializers and Constant nodes, and
holds an If itself; malformed Ifs are refused by name. A condition computed at run time makes
the If run per run (graph/dynamic.h; more in test_dynamic_tail.py).
Expected outputs are computed in numpy from the branch the shape selects."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import kiln

from helpers import run_on_each_isa


def shape_test(name, x, dim, equals):
    """Nodes computing `name` = (x.shape[dim] == equals) from Shape, as exporters do."""
    return [
        helper.make_node("Shape", [x], [name + "_shape"]),
        helper.make_node("Gather", [name + "_shape", name + "_dim"], [name + "_d"], axis=0),
        helper.make_node("Equal", [name + "_d", name + "_want"], [name]),
    ], [numpy_helper.from_array(np.array(dim, np.int64), name + "_dim"),
        numpy_helper.from_array(np.array(equals, np.int64), name + "_want")]


def branch(name, nodes, out, inits=()):
    return helper.make_graph(nodes, name, [], [helper.make_tensor_value_info(out, 1, None)],
                             initializer=list(inits))


def if_model(shape, then_g, else_g, extra_nodes=(), extra_inits=()):
    nodes, inits = shape_test("cond", "x", 1, 3)
    nodes += list(extra_nodes)
    nodes.append(helper.make_node("If", ["cond"], ["y"], name="pick", then_branch=then_g,
                                  else_branch=else_g))
    g = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("x", 1, shape)],
                          [helper.make_tensor_value_info("y", 1, None)],
                          initializer=inits + list(extra_inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()


def nested_model(shape):
    """then: Relu(x) + c (c a branch initializer) or, nested on x.shape[2] == 4, -x * 2 (a
    Constant node inside the inner branch); else: Sigmoid of an outer value."""
    inner_nodes, inner_inits = shape_test("inner", "x", 2, 4)
    inner_then = branch("inner_then", [
        helper.make_node("Constant", [], ["two"], value=numpy_helper.from_array(
            np.array(2.0, np.float32))),
        helper.make_node("Neg", ["x"], ["nx"]),
        helper.make_node("Mul", ["nx", "two"], ["t_inner"])], "t_inner")
    inner_else = branch("inner_else", [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("Add", ["r", "c"], ["e_inner"])], "e_inner",
        [numpy_helper.from_array(np.array([0.5], np.float32), "c")])
    then_g = branch("then", inner_nodes + [
        helper.make_node("If", ["inner"], ["t_out"], then_branch=inner_then,
                         else_branch=inner_else)], "t_out", inner_inits)
    else_g = branch("else", [helper.make_node("Sigmoid", ["xs"], ["e_out"])], "e_out")
    return if_model(shape, then_g, else_g, [helper.make_node("Mul", ["x", "x"], ["xs"])])


@pytest.mark.parametrize("shape", [(1, 3, 4, 5), (2, 3, 6, 5), (1, 5, 4, 4)])
def test_branch_taken_follows_the_shape(shape, tmp_path):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if shape[1] != 3:
        want = 1 / (1 + np.exp(-(x * x)))
    elif shape[2] == 4:
        want = -x * 2
    else:
        want = np.maximum(x, 0) + 0.5
    for max_isa, out, plan in run_on_each_isa(nested_model(shape), {"x": x}, tmp_path):
        np.testing.assert_allclose(out["y"], want, rtol=1e-6, atol=1e-6, err_msg=max_isa)
        ops = [st["op"] for st in plan["steps"]]
        assert "If" not in ops, ops


def test_condition_computed_at_run_time_picks_per_run(tmp_path):
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["a"])], "a")
    else_g = branch("else", [helper.make_node("Neg", ["x"], ["b"])], "b")
    nodes = [helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
             helper.make_node("Greater", ["s", "zero"], ["cond"]),
             helper.make_node("If", ["cond"], ["y"], name="pick", then_branch=then_g,
                              else_branch=else_g)]
    g = helper.make_graph(nodes, "if", [helper.make_tensor_value_info("x", 1, (1, 3, 2, 2))],
                          [helper.make_tensor_value_info("y", 1, None)],
                          initializer=[numpy_helper.from_array(np.array(0, np.float32), "zero")])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = np.arange(12, dtype=np.float32).reshape(1, 3, 2, 2) - 4  # sum 18 > 0: then (Relu)
    for max_isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path):
        np.testing.assert_array_equal(out["y"], np.maximum(x, 0), err_msg=max_isa)
    for max_isa, out, _ in run_on_each_isa(data, {"x": -x - 1}, tmp_path):  # else (Neg)
        np.testing.assert_array_equal(out["y"], x + 1, err_msg=max_isa)
    with kiln.Session.from_bytes(data) as s:  # y declares no shape: none is reported
        assert s.outputs[0].shape == ()


def test_malformed_ifs_are_refused_by_name():
    then_g = branch("then", [helper.make_node("Relu", ["x"], ["a"])], "a")
    nodes, inits = shape_test("cond", "x", 1, 3)
    no_else = nodes + [helper.make_node("If", ["cond"], ["y"], name="pick", then_branch=then_g)]
    g = helper.make_graph(no_else, "if", [helper.make_tensor_value_info("x", 1, (1, 3, 2, 2))],
                          [helper.make_tensor_value_info("y", 1, None)], initializer=inits)
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(kiln.Error, match="'pick'.*else_branch"):
        kiln.Session.from_bytes(data)
    # A branch reading a name nothing defines.
    bad = branch("else", [helper.make_node("Neg", ["nowhere"], ["b"])], "b")
    with pytest.raises(kiln.Error, match="'pick'.*'nowhere'"):
        kiln.Session.from_bytes(if_model((1, 3, 2, 2), then_g, bad))
