# Shared by bench/export_seg.py and bench/export_video.py: BatchNorm calibration and writing an
# exported model with its input and PyTorch's output.
import numpy as np
import onnx
import torch


def calibrate_bn(net, batch_shape, seed, iters=2):
    """Re-estimates every BatchNorm's statistics on `iters` random N(0,1) batches of
    batch_shape in train mode (cumulative averages), as ../shared/peers/make_models.py does: in
    eval mode the fresh statistics are the identity and activations vanish or explode. Leaves
    the net in eval mode; returns how many BatchNorms it has."""
    bns = [m for m in net.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    g = torch.Generator().manual_seed(seed)
    for m in bns:
        m.reset_running_stats()
        m.momentum = None
    net.train()
    with torch.no_grad():
        for _ in range(iters):
            net(torch.randn(*batch_shape, generator=g))
    net.eval()
    return len(bns)


def export_case(model, x, base, opset, input_name, output_name):
    """model(x) (x a numpy array) exported to BASE.onnx (checked), with BASE.input.npy and
    PyTorch's output BASE.ref.npy; returns that output."""
    with torch.no_grad():
        ref = model(torch.from_numpy(x)).numpy()
    torch.onnx.export(model, torch.from_numpy(x), base + ".onnx", opset_version=opset,
                      input_names=[input_name], output_names=[output_name],
                      do_constant_folding=True)
    onnx.checker.check_model(onnx.load(base + ".onnx"))
    np.save(base + ".input.npy", x)
    np.save(base + ".ref.npy", ref)
    return ref
