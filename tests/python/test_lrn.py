"""LRN (cross-channel local response normalization, as Caffe-era AlexNet / GoogLeNet models
have): a conv net with LRNs of several windows against PyTorch, and windows PyTorch does not
share with ONNX (even sizes) or ranks other than 4 against the ONNX formula in numpy; on every
JIT ISA and the reference path, with the LRNs on the JIT kernel (jit/glue/lrn.cpp)."""
import io

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers import rel_error, run_on_each_isa

torch = pytest.importorskip("torch", reason="needs Debian's python3-torch for the oracle")
F = torch.nn.functional


class _LrnFn(torch.autograd.Function):
    """PyTorch exports LocalResponseNorm as a decomposition with an If; this exports ONNX's LRN
    (for odd sizes PyTorch's window is ONNX's)."""

    @staticmethod
    def forward(ctx, x, size, alpha, beta, k):
        return F.local_response_norm(x, size, alpha, beta, k)

    @staticmethod
    def symbolic(g, x, size, alpha, beta, k):
        return g.op("LRN", x, size_i=size, alpha_f=alpha, beta_f=beta, bias_f=k)


class CaffeNet(torch.nn.Module):
    """LRN after a ReLU and after a pool; channel counts that are not whole vectors (24, 40,
    20); windows of 5, 3 and 7 channels, one wider than a group; several alpha / beta / bias."""

    def __init__(self):
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 24, 5, stride=2)
        self.c2 = torch.nn.Conv2d(24, 40, 3, padding=1, groups=2)
        self.c3 = torch.nn.Conv2d(40, 20, 1)

    def forward(self, x):
        x = _LrnFn.apply(torch.relu(self.c1(x)), 5, 1e-4, 0.75, 1.0)
        x = F.max_pool2d(x, 3, 2, ceil_mode=True)
        x = _LrnFn.apply(torch.relu(self.c2(x)), 3, 1e-2, 0.6, 2.0)
        return _LrnFn.apply(self.c3(x), 7, 0.5, 1.0, 1.0)


def export(net, x):
    buf = io.BytesIO()
    torch.onnx.export(net, x, buf, opset_version=13, input_names=["x"], output_names=["y"])
    return buf.getvalue()


def lrn_kernels(plan):
    return [st["kernel"] for st in plan["steps"] if st["op"] == "LRN"]


@pytest.mark.parametrize("shape", [(1, 3, 31, 29), (2, 3, 24, 40)])
def test_lrn_net_matches_pytorch(shape, tmp_path):
    torch.manual_seed(0)
    net = CaffeNet().eval()
    # Caffe's input range (mean-subtracted pixels): alpha / size * sum(x^2) then matters.
    x = torch.randn(*shape) * 20
    with torch.no_grad():
        want = net(x).numpy()
    for max_isa, out, plan in run_on_each_isa(export(net, x), {"x": x.numpy()}, tmp_path):
        assert rel_error(out["y"], want) < 1e-5, (max_isa, rel_error(out["y"], want))
        kernels = lrn_kernels(plan)
        assert len(kernels) == 3, kernels
        if max_isa != "scalar":
            assert all(k.startswith("lrn_f32_") for k in kernels), kernels
            assert not [st["kernel"] for st in plan["steps"] if st["kernel"].startswith("ref_")]


def lrn_reference(x, size, alpha, beta, bias):
    """ONNX's LRN: the window of channel c is [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    c_count = x.shape[1]
    lo = (size - 1) // 2
    sq = x.astype(np.float64) ** 2
    s = np.zeros_like(sq)
    for c in range(c_count):
        s[:, c] = sq[:, max(0, c - lo):min(c_count, c + size - lo)].sum(axis=1)
    return (x / (bias + alpha / size * s) ** beta).astype(np.float32)


@pytest.mark.parametrize("shape,size,alpha,beta,bias", [
    ((2, 21, 6, 5), 4, 1e-2, 0.75, 1.0),  # even: one more channel after c than before
    ((1, 18, 9, 9), 2, 0.3, 0.5, 0.7),
    ((2, 9, 11), 3, 1e-1, 0.75, 2.0),  # rank 3
    ((1, 6, 3, 4, 5), 5, 1e-1, 1.3, 1.0),  # rank 5
    ((1, 5, 4, 4), 40, 1e-1, 0.75, 1.0),  # wider than the channels
])
def test_lrn_op_matches_onnx_formula(shape, size, alpha, beta, bias, tmp_path):
    g = helper.make_graph(
        [helper.make_node("LRN", ["x"], ["y"], size=size, alpha=alpha, beta=beta, bias=bias)],
        "lrn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = (np.random.default_rng(size).standard_normal(shape) * 5).astype(np.float32)
    want = lrn_reference(x, size, alpha, beta, bias)
    for max_isa, out, plan in run_on_each_isa(data, {"x": x}, tmp_path):
        assert rel_error(out["y"], want) < 1e-5, (max_isa, rel_error(out["y"], want))
        if max_isa != "scalar":
            assert lrn_kernels(plan)[0].startswith("lrn_f32_"), plan["steps"]


def test_lrn_refusals_name_the_node():
    import kiln
    g = helper.make_graph(
        [helper.make_node("LRN", ["x"], ["y"], name="norm1")], "lrn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, (1, 4, 3, 3))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, (1, 4, 3, 3))])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(kiln.Error, match="norm1.*'size' is required"):
        kiln.Session.from_bytes(data)
    # Kiln's own window attribute (fuse_lrn sets it) is not ONNX's: a model may not set it.
    g.node[0].attribute.extend([helper.make_attribute("size", 3),
                                helper.make_attribute("window_lo", 0)])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    with pytest.raises(kiln.Error, match="norm1.*'window_lo'.*reserves"):
        kiln.Session.from_bytes(data)


def test_pytorch_export_of_local_response_norm(tmp_path):
    """PyTorch exports nn.LocalResponseNorm as x^2, a 3-D average pool over a padded channel
    axis and an If around the squeeze of a dim it cannot prove is 1: the If is inlined and the
    whole decomposition becomes one LRN (graph/rewrites.cpp, fuse_lrn); even sizes keep
    PyTorch's window (one more channel before c than after)."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(3, 24, 3), torch.nn.ReLU(),
                              torch.nn.LocalResponseNorm(5, 1e-2, 0.75, 1.0),
                              torch.nn.MaxPool2d(2), torch.nn.LocalResponseNorm(4, 1e-1, 0.6, 2.0))
    x = torch.randn(2, 3, 20, 22) * 10
    with torch.no_grad():
        want = net(x).numpy()
    for max_isa, out, plan in run_on_each_isa(export(net, x), {"x": x.numpy()}, tmp_path):
        assert rel_error(out["y"], want) < 1e-5, (max_isa, rel_error(out["y"], want))
        ops = [st["op"] for st in plan["steps"]]
        assert ops.count("LRN") == 2 and "AveragePool" not in ops and "Pow" not in ops, ops
        if max_isa != "scalar":
            assert all(k.startswith("lrn_f32_") for k in lrn_kernels(plan)), lrn_kernels(plan)
