"""Models quantized in PyTorch (eager mode: fused modules, observers, convert) and exported by
torch.onnx: QDQ with PyTorch's own forms (each QuantizeLinear output Cast to its own type,
int32 bias zero points built as Cast(ConstantOfShape)). They load, their convs run on the int8
kernels where the CPU has AVX512-VNNI, and every ISA path matches the reference path; rewritten
in ONNX's operator form (QLinearConv, ...: bench/qoperator.py) they compute the same."""
import io

import numpy as np
import onnx
from onnx import numpy_helper
import pytest

from helpers import has_vnni, rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch to quantize and export")
tq = torch.ao.quantization


class Net(torch.nn.Module):
    """conv+relu, max pool, conv+relu, a quantized add+relu (the residual), 1x1 conv, global
    average pool, linear: the ops torchvision's quantizable ResNets / MobileNets are made of."""

    def __init__(self):
        super().__init__()
        self.quant, self.dequant = tq.QuantStub(), tq.DeQuantStub()
        self.c1, self.r1 = torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU()
        self.pool = torch.nn.MaxPool2d(2)
        self.c2, self.r2 = torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU()
        self.add = torch.nn.quantized.FloatFunctional()
        self.c3 = torch.nn.Conv2d(16, 32, 1)
        self.gap = torch.nn.AdaptiveAvgPool2d(1)
        self.fc = torch.nn.Linear(32, 10)

    def forward(self, x):
        a = self.pool(self.r1(self.c1(self.quant(x))))
        y = self.c3(self.add.add_relu(a, self.r2(self.c2(a))))
        return self.dequant(self.fc(torch.flatten(self.gap(y), 1)))


def quantized_export(engine):
    """Net quantized for `engine` (qnnpack: per-tensor weights, onednn: per-channel), calibrated
    on seeded random batches; returns (ONNX bytes, input, PyTorch's quantized output)."""
    if engine not in torch.backends.quantized.supported_engines:
        pytest.skip(f"this PyTorch build has no {engine} quantized engine")
    torch.backends.quantized.engine = engine
    torch.manual_seed(7)
    net = Net().eval()
    tq.fuse_modules(net, [["c1", "r1"], ["c2", "r2"]], inplace=True)
    net.qconfig = tq.get_default_qconfig(engine)
    tq.prepare(net, inplace=True)
    g = torch.Generator().manual_seed(8)
    with torch.no_grad():
        for _ in range(4):
            net(torch.randn(2, 3, 20, 24, generator=g))
    tq.convert(net, inplace=True)
    x = torch.randn(2, 3, 20, 24, generator=g)
    with torch.no_grad():
        ref = net(x).numpy()
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=13, input_names=["x"], output_names=["y"])
    return buf.getvalue(), x.numpy(), ref


def output_step(m):
    """The grid step of output y: its DequantizeLinear's scale (a Constant in these exports)."""
    last_dq = [n for n in m.graph.node if "y" in n.output][0]
    assert last_dq.op_type == "DequantizeLinear"
    for n in m.graph.node:
        if n.op_type == "Constant" and n.output[0] == last_dq.input[1]:
            return float(numpy_helper.to_array(n.attribute[0].t))
    raise AssertionError("the output's scale is not a Constant")


@pytest.mark.parametrize("engine", ["qnnpack", "onednn"])
def test_pytorch_quantized_export_runs_in_int8(engine, tmp_path):
    data, x, ref = quantized_export(engine)
    # The forms this test is about are in the file (a newer exporter may drop them).
    m = onnx.load_from_string(data)
    producer = {o: n for n in m.graph.node for o in n.output}
    casts = [n for n in m.graph.node if n.op_type == "Cast" and n.input[0] in producer
             and producer[n.input[0]].op_type == "QuantizeLinear"]
    assert casts, "no Cast of a QuantizeLinear output in this export"
    step = output_step(m)

    runs = run_on_each_isa(data, {"x": x}, tmp_path)
    want = dict((isa, out) for isa, out, _ in runs)["scalar"]["y"]
    # PyTorch's kernels round their requantizations their own way: a grid step may flip, and
    # flips propagate; the output stays close to PyTorch's all the same.
    assert rel_error(want, ref) < 0.05, rel_error(want, ref)
    for max_isa, out, plan in runs:
        if max_isa == "scalar":
            continue
        # f32 sums in another order than the reference's doubles may flip an intermediate
        # grid step, which moves outputs by a step or two; on average far less than one.
        diff = np.abs(out["y"] - want) / step
        print(f"{engine} {max_isa}: output steps off max {diff.max():.2f} mean {diff.mean():.3f}")
        assert diff.max() <= 3.01 and diff.mean() < 0.5, (max_isa, diff.max(), diff.mean())
        kernels = [s["kernel"] for s in plan["steps"]]
        assert not [k for k in kernels if k.startswith("ref_")], (max_isa, kernels)
    # Which kernels the measured plan takes depends on the timings; the cost model's plan
    # (tune="none") is deterministic: every conv and the Linear in int8 where VNNI is.
    if not has_vnni():
        print("NOTE: no AVX512-VNNI here: the int8 kernels are not checked")
        return
    import kiln
    with kiln.Session.from_bytes(data, threads=1, tune="none", disable_cache=True) as s:
        kernels = [st["kernel"] for st in s.plan()["steps"]]
    assert len([k for k in kernels if k.startswith("conv") and "int8" in k]) == 3, kernels
    assert len([k for k in kernels if k.startswith("fc") and "int8" in k]) == 1, kernels


def test_operator_form_runs_as_its_qdq_form(tmp_path):
    """The same export rewritten in ONNX's operator form (bench/qoperator.py: QLinearConv,
    com.microsoft QLinearAdd / QLinearGlobalAveragePool, MaxPool on the uint8 tensor) computes
    what the QDQ file computes, on the int8 kernels."""
    import os
    import sys
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
    from qoperator import to_qoperator
    data, x, _ = quantized_export("qnnpack")
    m = to_qoperator(onnx.load_from_string(data))
    ops = {n.op_type: n.domain for n in m.graph.node}
    for op, domain in [("QLinearConv", ""), ("QLinearAdd", "com.microsoft"),
                       ("QLinearGlobalAveragePool", "com.microsoft"), ("MaxPool", "")]:
        assert ops.get(op) == domain, (op, ops)
    op_data = m.SerializeToString()
    want = {isa: out["y"] for isa, out, _ in run_on_each_isa(data, {"x": x}, tmp_path / "qdq")}
    step = output_step(m)
    for max_isa, out, plan in run_on_each_isa(op_data, {"x": x}, tmp_path / "qop"):
        if max_isa == "scalar":  # the reference path: the same graph, the same values
            np.testing.assert_array_equal(out["y"], want["scalar"])
            continue
        assert np.abs(out["y"] - want["scalar"]).max() <= 3.01 * step, max_isa
        assert not [s["kernel"] for s in plan["steps"] if s["kernel"].startswith("ref_")]
    if has_vnni():
        import kiln
        with kiln.Session.from_bytes(op_data, threads=1, tune="none", disable_cache=True) as s:
            kernels = [st["kernel"] for st in s.plan()["steps"]]
        assert len([k for k in kernels if k.startswith("conv") and "int8" in k]) == 3, kernels
