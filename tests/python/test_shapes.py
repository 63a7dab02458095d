"""Shapes decided by the caller: Session(shapes=...) at load, run() with another batch."""
import re
import threading

import numpy as np
import pytest

import kiln
from helpers import fixture_model, rel_error

NET = "tiny_resnet_op13"  # input [1,3,32,32] -> output [1,10]; fully convolutional + GAP
OPTS = dict(tune="none", threads=2, disable_cache=True)


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape, dtype=np.float32)


def test_shapes_sets_height_and_width_against_the_scalar_path():
    with kiln.Session(fixture_model(NET), shapes={"input": (2, 3, 40, 24)}, **OPTS) as s, \
            kiln.Session(fixture_model(NET), shapes={"input": [2, 3, 40, 24]}, max_isa="scalar",
                         **OPTS) as ref:
        assert s.inputs[0].shape == (2, 3, 40, 24)
        assert s.outputs[0].shape == (2, 10)
        x = _x(2, 3, 40, 24)
        assert rel_error(s.run([x])["output"], ref.run([x])["output"]) <= 1e-4


@pytest.mark.parametrize("shapes, error, part", [
    ({"nope": (1, 3, 32, 32)}, kiln.InvalidArgument, "'nope', which is not an input"),
    ({"input": (1, 3, 32)}, kiln.ShapeMismatch, "has 4 dims"),
    ({"input": (1, 3, 0, 32)}, kiln.InvalidArgument, "dim 0, expected 1.."),
    ({"input": (1, 3, -5, 32)}, kiln.InvalidArgument, "'-5' that is not a positive integer"),
    ({"input": (1, 5, 32, 32)}, kiln.ShapeMismatch, "'input' dim 1 = 5 (the model declares 3)"),
])
def test_shapes_errors_name_what_is_wrong(shapes, error, part):
    with pytest.raises(error, match=re.escape(part)):
        kiln.Session(fixture_model(NET), shapes=shapes, **OPTS)


def test_run_at_another_batch_matches_a_session_loaded_at_it():
    with kiln.Session(fixture_model(NET), **OPTS) as s:
        x1 = _x(1, 3, 32, 32, seed=1)
        y1 = s.run([x1])["output"]
        for batch in (3, 2):
            x = _x(batch, 3, 32, 32, seed=batch)
            with kiln.Session(fixture_model(NET), batch=batch, **OPTS) as loaded:
                want = loaded.run([x])["output"]
            y = s.run({"input": x})["output"]
            assert y.shape == (batch, 10)
            np.testing.assert_array_equal(y, want)
            out = np.empty((batch, 10), np.float32)
            assert s.run([x], out=[out])["output"] is out
            np.testing.assert_array_equal(out, want)
        np.testing.assert_array_equal(s.run([x1])["output"], y1)  # the loaded shape still runs
        with pytest.raises(kiln.ShapeMismatch, match=r"dim 0, the batch, may differ"):
            s.run([_x(2, 3, 32, 31)])
        with pytest.raises(kiln.ShapeMismatch, match=r"shape is \(1, 10\), expected \(2, 10\)"):
            s.run([_x(2, 3, 32, 32)], out=[np.empty((1, 10), np.float32)])


def test_batches_from_several_threads():
    with kiln.Session(fixture_model(NET), **OPTS) as s:
        xs = {b: _x(b, 3, 32, 32, seed=10 + b) for b in (1, 2, 3)}
        want = {}
        for b, x in xs.items():
            with kiln.Session(fixture_model(NET), batch=b, **OPTS) as loaded:
                want[b] = loaded.run([x])["output"]
        bad = []

        def work(t):
            for r in range(6):
                b = 1 + (r + t) % 3
                if not np.array_equal(s.run([xs[b]])["output"], want[b]):
                    bad.append((t, b))

        threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        assert bad == []


def test_inputs_of_different_leading_dims_run_at_their_loaded_shapes():
    # A broadcast operand's dim 0 is not a batch: x [3, 4, 5] + y [5] (ONNX's test_add_bcast
    # shape) runs as loaded instead of being refused as two different batches.
    import onnx
    from onnx import helper, TensorProto
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["z"])], "bcast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4, 5]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [5])],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, [3, 4, 5])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    with kiln.Session.from_bytes(m.SerializeToString(), **OPTS) as s:
        x, y = _x(3, 4, 5), _x(5, seed=1)
        np.testing.assert_array_equal(s.run([x, y])["z"], x + y)
