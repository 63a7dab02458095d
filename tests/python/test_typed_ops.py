"""Comparisons, And/Or/Xor/Not, Where, IsNaN/IsInf, Sign, Cast (the typed elementwise kernel)
and ArgMax/ArgMin/Hardmax (the arg-reduce kernel) on computed tensors: against numpy, exact,
over broadcasts, ranks 1-5, tile and strip boundaries, NaN / Inf / -0, on every JIT ISA the
machine has (no reference kernel in the plan) and on the reference kernels."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import kiln

ONNX_TYPE = {np.float32: TensorProto.FLOAT, np.int64: TensorProto.INT64, np.bool_: TensorProto.BOOL}


def model(op, ins, out_dtype, out_shape, opset=13, **attrs):
    """One `op` node reading graph inputs x0, x1, ... (ins: list of (dtype, shape))."""
    names = [f"x{k}" for k in range(len(ins))]
    g = helper.make_graph(
        [helper.make_node(op, names, ["y"], **attrs)], "typed",
        [helper.make_tensor_value_info(n, ONNX_TYPE[t], list(s)) for n, (t, s) in zip(names, ins)],
        [helper.make_tensor_value_info("y", ONNX_TYPE[out_dtype], list(out_shape))])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


def data(dtype, shape, rng, special=True):
    if dtype == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if dtype == np.int64:
        return np.asarray(rng.integers(-3, 4, size=shape), dtype=np.int64)  # small range: ties
    x = np.asarray(rng.integers(-3, 4, size=shape) * 0.5, dtype=np.float32)  # ties
    if special and x.size >= 8:
        flat = x.reshape(-1)
        flat[rng.integers(0, x.size, 4)] = [np.nan, np.inf, -np.inf, -0.0]
    return x


def jit_isa_or_skip(isa):
    """Loud skip where the CPU lacks `isa`."""
    data_ = model("Not", [(np.bool_, (4,))], np.bool_, (4,))
    with kiln.Session.from_bytes(data_, max_isa=isa, tune="none", disable_cache=True) as s:
        if s.isa != isa:
            pytest.skip(f"this CPU has no {isa}: its kernels are not tested here")


def check(data_, feeds, want, isa):
    for max_isa in (isa, "scalar"):
        with kiln.Session.from_bytes(data_, threads=2, tune="none", max_isa=max_isa,
                                     disable_cache=True) as s:
            got = s.run(feeds)["y"]
            if max_isa != "scalar":
                kernels = [st["kernel"] for st in s.plan()["steps"]]
                assert not [k for k in kernels if k.startswith("ref_")], kernels
        assert got.shape == want.shape, (max_isa, got.shape, want.shape)
        assert got.dtype == want.dtype, (max_isa, got.dtype, want.dtype)
        np.testing.assert_array_equal(got, want, err_msg=f"max_isa={max_isa}")


ISAS = ["avx2", "avx512"]
# Broadcast pairs: same shape, trailing vector, middle broadcast both ways, scalar, rank 5
# (collapses to 4), a long row over several 16K-element tiles.
PAIRS = [((2, 3, 4, 5), (2, 3, 4, 5)), ((2, 3, 4, 5), (5,)), ((3, 1, 5), (1, 4, 1)),
         ((), (7,)), ((2, 2, 3, 4, 5), (2, 1, 3, 1, 5)), ((3, 20000), (3, 1)), ((1, 40001), ())]

COMPARE = {"Equal": np.equal, "Less": np.less, "Greater": np.greater,
           "LessOrEqual": np.less_equal, "GreaterOrEqual": np.greater_equal}


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("op", list(COMPARE))
@pytest.mark.parametrize("dtype", [np.float32, np.int64])
def test_compare(isa, op, dtype):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(1)
    for a_shape, b_shape in PAIRS:
        a, b = data(dtype, a_shape, rng), data(dtype, b_shape, rng)
        want = COMPARE[op](a, b)
        check(model(op, [(dtype, a_shape), (dtype, b_shape)], np.bool_, want.shape),
              {"x0": a, "x1": b}, want, isa)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("op", ["And", "Or", "Xor", "Not", "Equal"])
def test_logic(isa, op):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(2)
    fn = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor, "Equal": np.equal}
    for a_shape, b_shape in PAIRS:
        a, b = data(np.bool_, a_shape, rng), data(np.bool_, b_shape, rng)
        if op == "Not":
            check(model(op, [(np.bool_, a_shape)], np.bool_, a_shape), {"x0": a},
                  np.logical_not(a), isa)
            continue
        want = fn[op](a, b)
        check(model(op, [(np.bool_, a_shape), (np.bool_, b_shape)], np.bool_, want.shape),
              {"x0": a, "x1": b}, want, isa)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_where(isa, dtype):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(3)
    triples = [((2, 3, 4, 5),) * 3, ((1, 4, 1), (3, 1, 5), (5,)), ((), (6, 7), ()),
               ((2, 1, 3, 1, 5), (2, 2, 3, 4, 5), (1,)), ((4, 1), (4, 30000), (30000,))]
    for c_shape, a_shape, b_shape in triples:
        c = data(np.bool_, c_shape, rng)
        a, b = data(dtype, a_shape, rng), data(dtype, b_shape, rng)
        want = np.where(c, a, b)
        check(model("Where", [(np.bool_, c_shape), (dtype, a_shape), (dtype, b_shape)], dtype,
                    want.shape), {"x0": c, "x1": a, "x2": b}, want, isa)


@pytest.mark.parametrize("isa", ISAS)
def test_float_classes_and_sign(isa):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(4)
    for shape in [(3, 4, 5), (50000,), (1,)]:
        x = data(np.float32, shape, rng)
        check(model("IsNaN", [(np.float32, shape)], np.bool_, shape), {"x0": x}, np.isnan(x), isa)
        for pos, neg in [(1, 1), (1, 0), (0, 1)]:
            want = (np.isposinf(x) & bool(pos)) | (np.isneginf(x) & bool(neg))
            check(model("IsInf", [(np.float32, shape)], np.bool_, shape, opset=13,
                        detect_positive=pos, detect_negative=neg), {"x0": x}, want, isa)
        # np.sign keeps NaN; ONNX Sign of -0 is -0 (the reference kernel's v), np.sign gives 0
        # (equal under assert_array_equal either way).
        check(model("Sign", [(np.float32, shape)], np.float32, shape), {"x0": x}, np.sign(x), isa)
        i = data(np.int64, shape, rng)
        check(model("Sign", [(np.int64, shape)], np.int64, shape), {"x0": i}, np.sign(i), isa)


def float_to_int(x, bits):
    """x86's cvtt: truncation, INT_MIN for NaN or out of range (numpy warns and differs)."""
    lim = float(2 ** (bits - 1))
    ok = (x > -lim) & (x < lim)
    out = np.full(x.shape, -(2 ** (bits - 1)), dtype=np.int64)
    out[ok] = np.trunc(x[ok]).astype(np.int64)
    return out


@pytest.mark.parametrize("isa", ISAS)
def test_cast(isa):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(5)
    shape = (3, 7, 1000)
    x = (rng.standard_normal(shape) * 1e5).astype(np.float32)
    x.reshape(-1)[:8] = [np.nan, np.inf, -np.inf, -0.0, 3e9, -3e9, 1e19, 6e-8]
    i = rng.integers(-2 ** 40, 2 ** 40, size=shape).astype(np.int64)
    b = data(np.bool_, shape, rng)
    half = np.array([65504, 65519, 65520, 1e-7, 3e-5, -2.5e-8, 0.1, np.nan], np.float32)
    xh = np.concatenate([half, x.reshape(-1)[8:100] * 1e-9]).astype(np.float32)
    with np.errstate(over="ignore"):  # 65520 overflows to inf, as intended
        xh_want = xh.astype(np.float16).astype(np.float32)
    cases = [  # (input, to, output dtype, expected)
        (x, TensorProto.INT64, np.int64, float_to_int(x, 64)),
        (x, TensorProto.INT32, np.int64, float_to_int(x, 32)),
        (x, TensorProto.BOOL, np.bool_, x != 0),
        (i, TensorProto.FLOAT, np.float32, i.astype(np.float32)),
        (i, TensorProto.INT32, np.int64, i.astype(np.int32).astype(np.int64)),
        (i, TensorProto.BOOL, np.bool_, i != 0),
        (b, TensorProto.FLOAT, np.float32, b.astype(np.float32)),
        (b, TensorProto.INT64, np.int64, b.astype(np.int64)),
        (xh, TensorProto.FLOAT16, np.float32, xh_want),
    ]
    for v, to, out_dtype, want in cases:
        check(model("Cast", [(v.dtype.type, v.shape)], out_dtype, v.shape, to=to), {"x0": v},
              want.astype(out_dtype), isa)


def arg_ref(x, axis, is_max, last):
    """numpy's first (or last) extreme; a NaN counts as the extreme."""
    f = np.argmax if is_max else np.argmin
    if not last:
        return f(x, axis=axis)
    n = x.shape[axis]
    return n - 1 - f(np.flip(x, axis=axis), axis=axis)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
def test_arg_reduce(isa, op):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(6)
    # Reduced dim innermost (rows), in the middle (strips of 256, a partial strip), outermost;
    # NaNs in some cases; many rows per tile.
    for shape, axis in [((4, 37), 1), ((2, 5, 300), 1), ((3, 600), 0), ((21, 7, 3, 5), 2),
                        ((2000, 9), -1), ((1, 19, 64, 64), 1), ((6,), 0)]:
        for special in (False, True):
            x = data(np.float32, shape, rng, special)
            for keepdims in (0, 1):
                for last in (0, 1):
                    want = arg_ref(x, axis, op == "ArgMax", last)
                    if keepdims:
                        want = np.expand_dims(want, axis)
                    check(model(op, [(np.float32, shape)], np.int64, want.shape, axis=axis,
                                keepdims=keepdims, select_last_index=last),
                          {"x0": x}, want.astype(np.int64), isa)


@pytest.mark.parametrize("isa", ISAS)
def test_hardmax(isa):
    jit_isa_or_skip(isa)
    rng = np.random.default_rng(7)
    for shape, axis, opset in [((3, 4, 5), 1, 13), ((3, 4, 5), -1, 13), ((2, 300, 3), 1, 13),
                               ((1, 21, 40, 40), 1, 13), ((3, 4, 5), 1, 11)]:
        x = data(np.float32, shape, rng, special=False)
        # opset < 13 flattens [axis, rank) into one dim
        flat = x.reshape(int(np.prod(shape[:axis])), -1) if opset < 13 else x
        a = axis if opset >= 13 else 1
        idx = np.expand_dims(np.argmax(flat, axis=a), a)
        want = np.zeros_like(flat)
        np.put_along_axis(want, idx, 1.0, axis=a)
        check(model("Hardmax", [(np.float32, shape)], np.float32, shape, opset=opset, axis=axis),
              {"x0": x}, want.reshape(shape), isa)
