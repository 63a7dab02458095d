"""Loading, metadata, runs by name and by position, caller-provided outputs, options, close."""
import os
import re

import numpy as np
import pytest

import kiln
from helpers import SQUEEZENET, fixture_arrays, fixture_model, rel_error

TWO = "two_in_out_op17"  # inputs a, b; outputs u, v


def test_version_is_the_projects():
    assert kiln.__version__ == os.environ.get("KILN_VERSION", kiln.__version__)
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", kiln.__version__)


def test_metadata_matches_the_fixture_arrays():
    ins, outs = fixture_arrays(TWO, "input"), fixture_arrays(TWO, "output")
    with kiln.Session(fixture_model(TWO)) as s:
        assert [t.name for t in s.inputs] == ["a", "b"]
        assert [t.name for t in s.outputs] == ["u", "v"]
        for info, arr in zip(s.inputs + s.outputs, ins + outs):
            assert isinstance(info, kiln.TensorInfo)
            assert info.shape == arr.shape and isinstance(info.shape, tuple)
            assert info.dtype == arr.dtype and isinstance(info.dtype, np.dtype)
    with kiln.Session(fixture_model("shape_op13")) as s:  # float32 in, int64 out
        assert s.inputs[0].dtype == np.float32 and s.outputs[0].dtype == np.int64
        assert s.isa in ("avx512", "avx2", "scalar")
        assert "kiln.Session" in repr(s)


@pytest.mark.parametrize("name", [TWO, "int64_arith_op13", "tiny_resnet_op13", "split_equal_op13"])
def test_run_by_name_and_by_position_matches_the_reference(name):
    ins, refs = fixture_arrays(name, "input"), fixture_arrays(name, "output")
    with kiln.Session(fixture_model(name)) as s:
        by_pos = s.run(ins)
        by_name = s.run({t.name: x for t, x in zip(s.inputs, ins)})
        by_tuple = s.run(tuple(ins))
        assert list(by_pos) == [t.name for t in s.outputs]  # model order
        for t, ref in zip(s.outputs, refs):
            y = by_pos[t.name]
            assert y.dtype == ref.dtype and y.shape == ref.shape
            if ref.dtype == np.int64:
                np.testing.assert_array_equal(y, ref)
            else:
                assert rel_error(y, ref) <= 1e-4
            np.testing.assert_array_equal(by_name[t.name], y)
            np.testing.assert_array_equal(by_tuple[t.name], y)


def test_out_buffers_are_written_in_place_and_returned():
    ins, refs = fixture_arrays(TWO, "input"), fixture_arrays(TWO, "output")
    with kiln.Session(fixture_model(TWO)) as s:
        u = np.full(s.outputs[0].shape, np.nan, np.float32)
        v = np.full(s.outputs[1].shape, np.nan, np.float32)
        y = s.run(ins, out={"u": u, "v": v})
        assert y["u"] is u and y["v"] is v
        assert rel_error(u, refs[0]) <= 1e-4 and rel_error(v, refs[1]) <= 1e-4
        # By position, and only some outputs by name (the others are allocated).
        u[:] = np.nan
        y = s.run(ins, out=[u, v])
        assert y["u"] is u and y["v"] is v and rel_error(u, refs[0]) <= 1e-4
        u[:] = np.nan
        y = s.run(ins, out={"u": u})
        assert y["u"] is u and rel_error(u, refs[0]) <= 1e-4
        assert rel_error(y["v"], refs[1]) <= 1e-4
        # A view into a bigger buffer is written in place too (C-contiguous slice of rows).
        big = np.zeros((2,) + s.outputs[0].shape, np.float32)
        y = s.run(ins, out={"u": big[1]})
        assert np.shares_memory(y["u"], big) and rel_error(big[1], refs[0]) <= 1e-4
        assert not big[0].any()


def test_from_bytes_runs_like_from_file():
    ins = fixture_arrays(TWO, "input")
    with open(fixture_model(TWO), "rb") as f:
        data = f.read()
    with kiln.Session(fixture_model(TWO)) as s:
        want = s.run(ins)
    for buf in (data, bytearray(data), memoryview(data)):
        with kiln.Session.from_bytes(buf, threads=1) as s:
            got = s.run(ins)
            for k in want:
                np.testing.assert_array_equal(got[k], want[k])


def test_options_by_name(tmp_path):
    path = fixture_model("dynamic_batch_op13")
    with kiln.Session(path, batch=3, threads=1, tune="none", strategy="heuristic",
                      accuracy="strict", log_level="error", profile_budget_ms=500.0) as s:
        assert s.inputs[0].shape[0] == 3 and s.outputs[0].shape[0] == 3
        x = np.random.default_rng(0).standard_normal(s.inputs[0].shape, dtype=np.float32)
        want = s.run([x])[s.outputs[0].name]
    with kiln.Session(path, batch=3, cache_dir=tmp_path):
        assert os.listdir(tmp_path), "cache_dir (a PathLike) was not used"
    for strategy in ("global", "local", "fixed"):
        for tune in ("fast", "full"):
            with kiln.Session(path, batch=3, strategy=strategy, tune=tune, accuracy="fast",
                              disable_cache=True) as s:
                assert rel_error(s.run([x])[s.outputs[0].name], want) <= 1e-4
    with kiln.Session(path, max_isa="avx2") as s:
        assert s.isa in ("avx2", "scalar")  # scalar on a CPU without AVX2
    with kiln.Session(path, max_isa="scalar") as s:
        assert s.isa == "scalar"
        assert s.run([x[:1]])[s.outputs[0].name].shape == (1, 10)


def test_bundled_squeezenet_matches_pytorch():
    x = np.load(SQUEEZENET.replace(".onnx", ".input.npy"))
    ref = np.load(SQUEEZENET.replace(".onnx", ".ref.npy"))
    with kiln.Session(SQUEEZENET, threads=1) as s:
        assert rel_error(s.run([x])["output"], ref) <= 1e-4


def test_closed_session_raises_a_kiln_error():
    ins = fixture_arrays(TWO, "input")
    s = kiln.Session(fixture_model(TWO))
    s.run(ins)
    assert not s.closed
    s.close()
    s.close()  # twice is fine
    assert s.closed and "closed" in repr(s)
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        s.run(ins)
    with pytest.raises(kiln.InvalidArgument, match="closed"):
        s.run([])  # said before any check of the arrays
    with pytest.raises(kiln.Error, match="closed"):
        s.isa
    with kiln.Session(fixture_model(TWO)) as s2:
        pass
    assert s2.closed
    with pytest.raises(kiln.Error):
        s2.run(ins)
