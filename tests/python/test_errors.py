"""Every kiln.Error class with its code and message; arrays and names checked before the C call."""
import os
import subprocess
import sys

import numpy as np
import pytest

import kiln
from helpers import FIXTURES, fixture_arrays, fixture_model

TWO = "two_in_out_op17"  # inputs a, b; outputs u, v


@pytest.fixture(scope="module")
def two():
    with kiln.Session(fixture_model(TWO)) as s:
        yield s, fixture_arrays(TWO, "input")


def test_classes_codes_and_bases():
    # kiln_code values are part of the C ABI (kiln.h).
    want = {kiln.InvalidArgument: 1, kiln.InvalidModel: 2, kiln.Unsupported: 3,
            kiln.ShapeMismatch: 4, kiln.IoError: 5, kiln.OutOfMemory: 6, kiln.Internal: 7}
    for cls, code in want.items():
        assert issubclass(cls, kiln.Error) and cls.code == code
    assert issubclass(kiln.IoError, OSError) and issubclass(kiln.OutOfMemory, MemoryError)
    assert issubclass(kiln.InvalidArgument, ValueError)
    assert issubclass(kiln.ShapeMismatch, ValueError)


def test_missing_file_is_an_io_error():
    path = os.path.join(FIXTURES, "no_such_model.onnx")
    with pytest.raises(kiln.IoError) as e:
        kiln.Session(path)
    assert e.value.code == 5 and path in str(e.value) and e.value.message == str(e.value)
    assert isinstance(e.value, OSError)


def test_garbage_bytes_are_an_invalid_model():
    with pytest.raises(kiln.InvalidModel) as e:
        kiln.Session.from_bytes(b"this is not an ONNX model")
    assert e.value.code == 2 and "ONNX" in str(e.value)
    with pytest.raises(kiln.InvalidModel):
        kiln.Session(os.path.join(FIXTURES, "bad", "truncated.onnx"))
    with pytest.raises(TypeError):
        kiln.Session.from_bytes("a str is not bytes")


def test_unknown_op_is_unsupported():
    with pytest.raises(kiln.Unsupported, match="FooBar") as e:
        kiln.Session(os.path.join(FIXTURES, "bad", "unknown_op.onnx"))
    assert e.value.code == 3


def test_out_of_memory_is_a_memory_error():
    # A process with its address space capped a little above what it uses: loading a model whose
    # arena (batch 4096: ~80 MiB) does not fit fails with KILN_OUT_OF_MEMORY, not a crash.
    code = f"""
import re, resource, kiln
vm = int(re.search(r"VmSize:\\s+(\\d+)", open("/proc/self/status").read()).group(1)) * 1024
resource.setrlimit(resource.RLIMIT_AS, (vm + (16 << 20), resource.RLIM_INFINITY))
try:
    kiln.Session({fixture_model("dynamic_batch_op13")!r}, batch=4096, tune="none", threads=1)
except MemoryError as e:
    print(type(e).__name__, e.code, e)
"""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("OutOfMemory 6 "), r.stdout + r.stderr


@pytest.mark.parametrize("option, value, allowed", [
    ("strategy", "best", "'global', 'local', 'fixed', 'heuristic'"),
    ("tune", "slow", "'none', 'fast', 'full'"),
    ("accuracy", "exact", "'default', 'strict', 'fast'"),
    ("precision", "fp16", "'f32', 'bf16'"),
    ("max_isa", "sse2", "None or one of 'scalar', 'avx2', 'avx512'"),
    ("log_level", "loud", "None or one of 'trace', 'debug', 'info', 'warn', 'error', 'critical'"),
])
def test_bad_option_values_name_the_allowed_ones(option, value, allowed):
    with pytest.raises(ValueError, match=option) as e:
        kiln.Session(fixture_model(TWO), **{option: value})
    assert isinstance(e.value, kiln.InvalidArgument)
    assert allowed in str(e.value) and repr(value) in str(e.value)


@pytest.mark.parametrize("option, value", [
    ("threads", -1), ("batch", -2), ("profile_budget_ms", -1.0)])
def test_out_of_range_numbers_are_invalid_arguments(option, value):
    with pytest.raises(kiln.InvalidArgument, match=option.split("_")[0]):
        kiln.Session(fixture_model(TWO), **{option: value})


def test_unknown_option_is_a_type_error():
    with pytest.raises(TypeError, match="thread"):
        kiln.Session(fixture_model(TWO), thread=2)
    with pytest.raises(TypeError):
        kiln.Session.from_bytes(b"", thread=2)


def test_wrong_dtype_is_not_converted(two):
    s, (a, b) = two
    with pytest.raises(kiln.ShapeMismatch) as e:
        s.run([a.astype(np.float64), b])
    msg = str(e.value)
    assert "input 'a'" in msg and "float64" in msg and "expected float32" in msg
    with pytest.raises(kiln.ShapeMismatch, match="input 'b'.*>f4"):
        s.run([a, b.astype(">f4")])
    with kiln.Session(fixture_model("int64_arith_op13")) as si:
        with pytest.raises(kiln.ShapeMismatch, match="int32.*expected int64"):
            si.run([np.zeros(si.inputs[0].shape, np.int32)])


def test_wrong_shape_names_both_shapes(two):
    s, (a, b) = two
    with pytest.raises(kiln.ShapeMismatch) as e:
        s.run({"a": a, "b": b[:, :, :, :3].copy()})
    assert "input 'b'" in str(e.value)
    assert "(2, 5, 3, 3)" in str(e.value) and "expected (2, 5, 3, 4)" in str(e.value)
    with pytest.raises(kiln.ShapeMismatch, match="input 'a'"):
        s.run([a.reshape(-1), b])


def test_layout_and_alignment(two):
    s, (a, b) = two
    strided = np.zeros((2, 5, 3, 8), np.float32)[..., ::2]
    with pytest.raises(kiln.InvalidArgument, match="input 'a' is not C-contiguous"):
        s.run([strided, b])
    fortran = np.asfortranarray(a)
    with pytest.raises(kiln.InvalidArgument, match="not C-contiguous"):
        s.run([fortran, b])
    raw = np.zeros(a.nbytes + 4, np.uint8)
    misaligned = raw[1:1 + a.nbytes].view(np.float32).reshape(a.shape)
    misaligned[...] = a
    with pytest.raises(kiln.InvalidArgument, match="input 'a'.*not aligned"):
        s.run([misaligned, b])


def test_output_buffers_are_checked(two):
    s, (a, b) = two
    u = np.zeros(s.outputs[0].shape, np.float32)
    u.setflags(write=False)
    with pytest.raises(kiln.InvalidArgument, match="output 'u' is read-only"):
        s.run([a, b], out={"u": u})
    with pytest.raises(kiln.ShapeMismatch, match="output 'v'.*float64"):
        s.run([a, b], out={"v": np.zeros(s.outputs[1].shape)})
    with pytest.raises(kiln.InvalidArgument, match="output 'u'.*C-contiguous"):
        s.run([a, b], out={"u": np.zeros((2, 3, 4, 4), np.float32)[..., ::2]})
    # Outputs must not share memory with an input or each other (kiln_session_run's contract).
    with kiln.Session(fixture_model("split_equal_op13")) as sp:
        x = fixture_arrays("split_equal_op13", "input")[0]
        o = np.zeros(sp.outputs[0].shape, np.float32)
        with pytest.raises(kiln.InvalidArgument, match="share memory"):
            sp.run([x], out=[o, o])
    with kiln.Session(fixture_model("identity_op13")) as si:
        x = fixture_arrays("identity_op13", "input")[0]
        with pytest.raises(kiln.InvalidArgument, match="output .* shares memory with input 'x'"):
            si.run([x], out=[x, np.zeros_like(x)])


def test_names_and_counts(two):
    s, (a, b) = two
    with pytest.raises(kiln.InvalidArgument, match=r"unknown input name 'c'.*'a', 'b'"):
        s.run({"a": a, "b": b, "c": b})
    with pytest.raises(kiln.InvalidArgument, match="missing input 'b'"):
        s.run({"a": a})
    with pytest.raises(kiln.InvalidArgument, match="unknown output name 'w'.*'u', 'v'"):
        s.run([a, b], out={"w": np.zeros((1,), np.float32)})
    with pytest.raises(kiln.InvalidArgument, match="1 inputs given by position, the model has 2"):
        s.run([a])
    with pytest.raises(kiln.InvalidArgument, match="1 outputs given by position"):
        s.run([a, b], out=[np.zeros(s.outputs[0].shape, np.float32)])


def test_wrong_python_types_are_type_errors(two):
    s, (a, b) = two
    with pytest.raises(TypeError, match="input 'a': expected a numpy.ndarray, got list"):
        s.run([a.tolist(), b])
    with pytest.raises(TypeError, match="dict .* or a list/tuple"):
        s.run(a)
    with pytest.raises(TypeError, match="keyed by name"):
        s.run({0: a, 1: b})
