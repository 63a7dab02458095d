# Small classifiers of CNN families' blocks that are neither torchvision models nor in any target
# list (bench/export_arch.py exports them by name): each a 3x3 stride-2 stem, one block per width
# (stride 2 after the first), GAP and FC (unseen_net), written from the papers, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class GhostBlock(nn.Module):
    """GhostNet: half the channels from a 1x1 conv, half from a cheap 3x3 depthwise of those,
    concatenated; an SE in the middle; a stride-2 depthwise when downsampling."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        h = cout // 2
        self.primary = nn.Sequential(nn.Conv2d(cin, h, 1, bias=False), nn.BatchNorm2d(h), nn.ReLU())
        self.cheap = nn.Sequential(nn.Conv2d(h, h, 3, 1, 1, groups=h, bias=False),
                                   nn.BatchNorm2d(h), nn.ReLU())
        self.down = (nn.Sequential(nn.Conv2d(cout, cout, 3, stride, 1, groups=cout, bias=False),
                                   nn.BatchNorm2d(cout)) if stride > 1 else nn.Identity())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(cout, cout // 4, 1), nn.ReLU(),
                                nn.Conv2d(cout // 4, cout, 1), nn.Hardsigmoid())
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        p = self.primary(x)
        y = self.down(torch.cat([p, self.cheap(p)], 1))
        return y * self.se(y) + self.short(x)


class Res2Block(nn.Module):
    """Res2Net: the 1x1's output split in 4; each part after the first gets a 3x3 conv of itself
    plus the previous part's output; concatenated, a 1x1, the residual."""

    def __init__(self, cin, cout, stride, scale=4):
        super().__init__()
        w = cout // scale
        self.scale, self.stride = scale, stride
        self.reduce = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout), nn.ReLU())
        self.convs = nn.ModuleList(nn.Sequential(nn.Conv2d(w, w, 3, stride, 1, bias=False),
                                                 nn.BatchNorm2d(w), nn.ReLU())
                                   for _ in range(scale - 1))
        self.pool = nn.AvgPool2d(3, stride, 1)
        self.expand = nn.Sequential(nn.Conv2d(cout, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        parts = torch.split(self.reduce(x), self.reduce[0].out_channels // self.scale, 1)
        outs, prev = [], None
        for i, conv in enumerate(self.convs):
            prev = conv(parts[i] if prev is None or self.stride > 1 else parts[i] + prev)
            outs.append(prev)
        outs.append(self.pool(parts[-1]) if self.stride > 1 else parts[-1])
        return F.relu(self.expand(torch.cat(outs, 1)) + self.short(x))


class SKBlock(nn.Module):
    """SKNet's selective kernel: a 3x3 and a dilated 3x3 grouped branch, their sum squeezed to
    attention weights softmaxed over the two branches, the weighted sum."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.b = nn.ModuleList(nn.Sequential(nn.Conv2d(cin, cout, 3, stride, d, dilation=d, groups=8,
                                                       bias=False), nn.BatchNorm2d(cout), nn.ReLU())
                               for d in (1, 2))
        self.fc = nn.Sequential(nn.Linear(cout, cout // 4), nn.ReLU(), nn.Linear(cout // 4, 2 * cout))

    def forward(self, x):
        u = [b(x) for b in self.b]
        a = self.fc((u[0] + u[1]).mean((2, 3))).reshape(x.shape[0], 2, -1).softmax(1)
        return u[0] * a[:, 0, :, None, None] + u[1] * a[:, 1, :, None, None]


class MobileViTBlock(nn.Module):
    """MobileViT: local 3x3 + 1x1, the map unfolded into 2x2 patches (reshape / permute), a
    transformer layer over patches, folded back, fused with the input by a 3x3."""

    def __init__(self, cin, cout, stride, d=64):
        super().__init__()
        self.down = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                                  nn.SiLU())
        self.local = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout),
                                   nn.SiLU(), nn.Conv2d(cout, d, 1, bias=False))
        self.tf = nn.TransformerEncoderLayer(d, 4, 2 * d, 0.0, batch_first=True,
                                             activation="gelu", norm_first=True)
        self.proj = nn.Conv2d(d, cout, 1, bias=False)
        self.fuse = nn.Conv2d(2 * cout, cout, 3, 1, 1)

    def forward(self, x):
        x = self.down(x)
        y = self.local(x)
        n, d, h, w = y.shape
        p = y.reshape(n, d, h // 2, 2, w // 2, 2).permute(0, 3, 5, 2, 4, 1).reshape(n * 4, -1, d)
        p = self.tf(p).reshape(n, 2, 2, h // 2, w // 2, d).permute(0, 5, 3, 1, 4, 2)
        return self.fuse(torch.cat([x, self.proj(p.reshape(n, d, h, w))], 1))


class ConvNeXtV2Block(nn.Module):
    """ConvNeXt V2: 7x7 depthwise, channels-last LayerNorm, Linear, GELU, global response
    normalisation (per-channel L2 over the map, divided by its channel mean), Linear."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2 if stride > 1 else 1, stride)
        self.dw = nn.Conv2d(cout, cout, 7, 1, 3, groups=cout)
        self.norm = nn.LayerNorm(cout, eps=1e-6)
        self.fc1, self.fc2 = nn.Linear(cout, 4 * cout), nn.Linear(4 * cout, cout)
        self.gamma = nn.Parameter(torch.randn(4 * cout) * 0.1)
        self.beta = nn.Parameter(torch.randn(4 * cout) * 0.1)

    def forward(self, x):
        x = self.down(x)
        y = F.gelu(self.fc1(self.norm(self.dw(x).permute(0, 2, 3, 1))))
        gx = torch.norm(y, p=2, dim=(1, 2), keepdim=True)
        y = self.gamma * (y * (gx / (gx.mean(dim=-1, keepdim=True) + 1e-6))) + self.beta + y
        return x + self.fc2(y).permute(0, 3, 1, 2)


class PoolFormerBlock(nn.Module):
    """PoolFormer: x + (AvgPool3x3(GN(x)) - GN(x)), then x + MLP(GN(x)) of 1x1 convs with GELU."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 3, stride, 1)
        self.n1, self.n2 = nn.GroupNorm(1, cout), nn.GroupNorm(1, cout)
        self.pool = nn.AvgPool2d(3, 1, 1, count_include_pad=False)
        self.mlp = nn.Sequential(nn.Conv2d(cout, 4 * cout, 1), nn.GELU(), nn.Conv2d(4 * cout, cout, 1))

    def forward(self, x):
        x = self.down(x)
        y = self.n1(x)
        x = x + self.pool(y) - y
        return x + self.mlp(self.n2(x))


class HRFuse(nn.Module):
    """HRNet-style exchange: a full- and a half-resolution branch of basic blocks, each fused
    with the other (the low one upsampled 2x nearest after a 1x1, the high one by a strided 3x3)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.enter = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout),
                                   nn.ReLU())
        self.low_in = nn.Conv2d(cout, 2 * cout, 3, 2, 1)
        self.hi = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1), nn.ReLU())
        self.lo = nn.Sequential(nn.Conv2d(2 * cout, 2 * cout, 3, 1, 1), nn.ReLU())
        self.lo2hi = nn.Conv2d(2 * cout, cout, 1)
        self.hi2lo = nn.Conv2d(cout, 2 * cout, 3, 2, 1)

    def forward(self, x):
        x = self.enter(x)
        h, l = self.hi(x), self.lo(self.low_in(x))
        h2 = F.relu(h + F.interpolate(self.lo2hi(l), scale_factor=2, mode="nearest"))
        l2 = F.relu(l + self.hi2lo(h))
        return h2 + F.interpolate(self.lo2hi(l2), scale_factor=2, mode="nearest")


def unseen_net(block, widths=(32, 64, 128, 256)):
    """A classifier made of `block`: a 3x3 stride-2 stem, one block per width (stride 2 after the
    first), GAP, FC."""

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, widths[0], 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(widths[0]), nn.ReLU())
            cin, blocks = widths[0], []
            for i, w in enumerate(widths):
                blocks.append(block(cin, w, 1 if i == 0 else 2))
                cin = w
            self.blocks = nn.Sequential(*blocks)
            self.fc = nn.Linear(cin, 1000)

        def forward(self, x):
            return self.fc(self.blocks(self.stem(x)).mean((2, 3)))

    return Net


# Second batch (session 38): attention / context modules, large and band kernels, activations,
# weight standardisation, re-parameterisable branches, anti-aliasing, shifts.


def conv_bn(cin, cout, k=3, s=1, groups=1, act=True):
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)]
    return nn.Sequential(*layers, nn.ReLU()) if act else nn.Sequential(*layers)


class BasicAttnBlock(nn.Module):
    """A ResNet basic block whose second conv's output passes through `attend` (a module or None)
    before the residual."""

    def __init__(self, cin, cout, stride, attend=None):
        super().__init__()
        self.body = nn.Sequential(conv_bn(cin, cout, 3, stride), conv_bn(cout, cout, 3, 1, act=False))
        self.attend = attend if attend is not None else nn.Identity()
        self.short = conv_bn(cin, cout, 1, stride, act=False)

    def forward(self, x):
        return F.relu(self.attend(self.body(x)) + self.short(x))


class ECA(nn.Module):
    """ECA-Net: GAP, a 1-D conv of size 3 across channels, Sigmoid, the channel scale."""

    def __init__(self, c, k=3):
        super().__init__()
        self.conv = nn.Conv1d(1, 1, k, padding=k // 2, bias=False)

    def forward(self, y):
        a = y.mean((2, 3), keepdim=True).squeeze(-1).transpose(-1, -2)
        return y * self.conv(a).transpose(-1, -2).unsqueeze(-1).sigmoid()


class CBAM(nn.Module):
    """CBAM: channel attention from avg- and max-pooled maps through a shared MLP, then spatial
    attention from the channel mean and max through a 7x7 conv."""

    def __init__(self, c):
        super().__init__()
        self.mlp = nn.Sequential(nn.Conv2d(c, c // 8, 1, bias=False), nn.ReLU(),
                                 nn.Conv2d(c // 8, c, 1, bias=False))
        self.spatial = nn.Conv2d(2, 1, 7, padding=3, bias=False)

    def forward(self, y):
        y = y * torch.sigmoid(self.mlp(F.adaptive_avg_pool2d(y, 1)) + self.mlp(F.adaptive_max_pool2d(y, 1)))
        s = torch.cat([y.mean(1, keepdim=True), y.amax(1, keepdim=True)], 1)
        return y * torch.sigmoid(self.spatial(s))


class GlobalContext(nn.Module):
    """GCNet: a softmax over positions of a 1x1 conv weights the map into one context vector per
    image (a MatMul), transformed by 1x1 -> LayerNorm([C/4, 1, 1]) -> ReLU -> 1x1 and added."""

    def __init__(self, c):
        super().__init__()
        self.mask = nn.Conv2d(c, 1, 1)
        self.transform = nn.Sequential(nn.Conv2d(c, c // 4, 1), nn.LayerNorm([c // 4, 1, 1]), nn.ReLU(),
                                       nn.Conv2d(c // 4, c, 1))

    def forward(self, y):
        n, c, h, w = y.shape
        m = self.mask(y).reshape(n, 1, h * w).softmax(-1).unsqueeze(-1)
        ctx = torch.matmul(y.reshape(n, 1, c, h * w), m).reshape(n, c, 1, 1)
        return y + self.transform(ctx)


class NonLocal(nn.Module):
    """Non-local block (embedded Gaussian): theta / phi / g 1x1 convs, phi and g max-pooled 2x2,
    softmax(theta^T phi) g, a 1x1 + BN back, added. Only where the map is at most 56x56."""

    def __init__(self, c):
        super().__init__()
        self.theta, self.phi, self.g = (nn.Conv2d(c, c // 2, 1) for _ in range(3))
        self.out = nn.Sequential(nn.Conv2d(c // 2, c, 1, bias=False), nn.BatchNorm2d(c))

    def forward(self, y):
        n, c, h, w = y.shape
        if h * w > 56 * 56:
            return y
        t = self.theta(y).reshape(n, c // 2, h * w).transpose(1, 2)
        p = F.max_pool2d(self.phi(y), 2).reshape(n, c // 2, -1)
        g = F.max_pool2d(self.g(y), 2).reshape(n, c // 2, -1).transpose(1, 2)
        z = torch.matmul(torch.matmul(t, p).softmax(-1), g).transpose(1, 2).reshape(n, c // 2, h, w)
        return y + self.out(z)


def attn_block(attend):
    return lambda cin, cout, stride: BasicAttnBlock(cin, cout, stride, attend(cout))


class CoordAttBlock(nn.Module):
    """An inverted residual (1x1 expand, 3x3 depthwise, 1x1 project) with coordinate attention:
    the map averaged along W and along H, concatenated, a shared 1x1 + BN + HardSwish, split,
    one 1x1 + Sigmoid per direction, both scales applied."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        e = 4 * cin
        self.expand = conv_bn(cin, e, 1)
        self.dw = conv_bn(e, e, 3, stride, groups=e)
        m = max(8, e // 16)
        self.shared = nn.Sequential(nn.Conv2d(e, m, 1), nn.BatchNorm2d(m), nn.Hardswish())
        self.ah, self.aw = nn.Conv2d(m, e, 1), nn.Conv2d(m, e, 1)
        self.project = conv_bn(e, cout, 1, act=False)
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.dw(self.expand(x))
        n, c, h, w = y.shape
        t = self.shared(torch.cat([y.mean(3, keepdim=True), y.mean(2, keepdim=True).permute(0, 1, 3, 2)], 2))
        th, tw = torch.split(t, [h, w], 2)
        y = y * self.ah(th).sigmoid() * self.aw(tw.permute(0, 1, 3, 2)).sigmoid()
        y = self.project(y)
        return x + y if self.res else y


class RepLKBlock(nn.Module):
    """RepLKNet: a strided 3x3 to enter, then 1x1 -> a large depthwise kernel (31, 29, 27, 13 by
    stage) beside a 5x5 depthwise, summed -> ReLU -> 1x1, residual; a 1x1 GELU FFN, residual."""

    KERNEL = {32: 31, 64: 29, 128: 27, 256: 13}

    def __init__(self, cin, cout, stride):
        super().__init__()
        k = self.KERNEL.get(cout, 13)
        self.enter = conv_bn(cin, cout, 3, stride)
        self.pw1 = conv_bn(cout, cout, 1)
        self.large = conv_bn(cout, cout, k, 1, groups=cout, act=False)
        self.small = conv_bn(cout, cout, 5, 1, groups=cout, act=False)
        self.pw2 = conv_bn(cout, cout, 1, act=False)
        self.ffn = nn.Sequential(nn.BatchNorm2d(cout), nn.Conv2d(cout, 4 * cout, 1), nn.GELU(),
                                 nn.Conv2d(4 * cout, cout, 1))

    def forward(self, x):
        x = self.enter(x)
        y = self.pw1(x)
        x = x + self.pw2(F.relu(self.large(y) + self.small(y)))
        return x + self.ffn(x)


class ScaledStdConv2d(nn.Conv2d):
    """NFNet's weight-standardised conv as timm writes it: the weights normalised per output
    channel by a batch_norm over their own values, times a learnt gain, every forward."""

    def __init__(self, *args, gamma=1.0, eps=1e-6, **kw):
        super().__init__(*args, **kw)
        self.gain = nn.Parameter(torch.ones(self.out_channels, 1, 1, 1) + 0.1 * torch.randn(self.out_channels, 1, 1, 1))
        self.scale, self.eps = gamma * self.weight[0].numel() ** -0.5, eps

    def forward(self, x):
        w = F.batch_norm(self.weight.reshape(1, self.out_channels, -1), None, None,
                         weight=(self.gain * self.scale).view(-1), training=True, momentum=0.0,
                         eps=self.eps).reshape_as(self.weight)
        return F.conv2d(x, w, self.bias, self.stride, self.padding, self.dilation, self.groups)


class NFBlock(nn.Module):
    """NFNet's normaliser-free bottleneck: x * beta -> GELU -> ScaledStdConv 1x1 / 3x3 (grouped,
    stride) / 1x1 with GELUs, times alpha and a learnt skip gain, plus the (pooled, 1x1)
    shortcut. No BatchNorm anywhere."""

    def __init__(self, cin, cout, stride, beta=0.9, alpha=0.2):
        super().__init__()
        mid = cout // 2
        self.beta, self.alpha = beta, alpha
        self.c1 = ScaledStdConv2d(cin, mid, 1, gamma=1.7)
        self.c2 = ScaledStdConv2d(mid, mid, 3, stride, 1, groups=max(1, mid // 16), gamma=1.7)
        self.c3 = ScaledStdConv2d(mid, cout, 1, gamma=1.7)
        self.skip_gain = nn.Parameter(torch.tensor(0.5))
        self.short = nn.Sequential(nn.AvgPool2d(2, 2) if stride > 1 else nn.Identity(),
                                   ScaledStdConv2d(cin, cout, 1))

    def forward(self, x):
        a = F.gelu(x * self.beta)
        y = self.c3(F.gelu(self.c2(F.gelu(self.c1(a)))))
        return self.short(a) + y * self.alpha * self.skip_gain


class BlurPool(nn.Module):
    """Anti-aliased downsampling (Zhang 2019): reflection pad, a fixed binomial 3x3 per channel
    at stride 2."""

    def __init__(self, c):
        super().__init__()
        f = torch.tensor([1.0, 2.0, 1.0])
        self.register_buffer("filt", (f[:, None] * f[None, :] / 16).expand(c, 1, 3, 3).contiguous())

    def forward(self, x):
        return F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), self.filt, stride=2, groups=x.shape[1])


class BlurBlock(nn.Module):
    """A basic block whose stride is a ReLU'd stride-1 conv then BlurPool; the shortcut BlurPool
    then 1x1; anti-aliased max pooling (max 2x2 stride 1, then BlurPool) in front when
    downsampling."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        self.c1 = conv_bn(cin, cout, 3, 1)
        self.blur1, self.blur_s = BlurPool(cout), BlurPool(cin)
        self.c2 = conv_bn(cout, cout, 3, 1, act=False)
        self.short = conv_bn(cin, cout, 1, 1, act=False)

    def forward(self, x):
        y = self.c1(x)
        s = x
        if self.stride > 1:
            y = self.blur1(y)
            s = self.blur_s(F.max_pool2d(F.pad(x, (0, 1, 0, 1), mode="replicate"), 2, 1))
        return F.relu(self.c2(y) + self.short(s))


class BiFPNFuse(nn.Module):
    """EfficientDet's BiFPN node: a full- and a half-resolution (max-pooled) branch fused with
    fast normalised weights (ReLU'd learnt scalars over their sum), then a depthwise-separable
    conv + BN + SiLU. Downsampling by a 3x3 stride-2 max pool."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        self.inp = conv_bn(cin, cout, 1, act=False)
        self.lo = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, groups=cout), nn.Conv2d(cout, cout, 1),
                                nn.BatchNorm2d(cout), nn.SiLU())
        self.w = nn.Parameter(torch.rand(2) + 0.5)
        self.out = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, groups=cout), nn.Conv2d(cout, cout, 1),
                                 nn.BatchNorm2d(cout), nn.SiLU())

    def forward(self, x):
        if self.stride > 1:
            x = F.max_pool2d(x, 3, 2, 1)
        x = self.inp(x)
        lo = self.lo(F.max_pool2d(x, 2))
        w = F.relu(self.w)
        w = w / (w.sum() + 1e-4)
        return self.out(w[0] * x + w[1] * F.interpolate(lo, scale_factor=2, mode="nearest"))


class ActsBlock(nn.Module):
    """Convs each followed by another activation: Mish, ELU, SELU, CELU, Softplus, GELU (tanh),
    Hardtanh, ReLU6, LeakyReLU, PReLU (per channel), Softsign, SiLU."""

    ACTS = (lambda c: nn.Mish(), lambda c: nn.ELU(), lambda c: nn.SELU(), lambda c: nn.CELU(0.5),
            lambda c: nn.Softplus(), lambda c: nn.GELU(approximate="tanh"),
            lambda c: nn.Hardtanh(-2.0, 2.0), lambda c: nn.ReLU6(), lambda c: nn.LeakyReLU(0.1),
            lambda c: nn.PReLU(c), lambda c: nn.Softsign(), lambda c: nn.SiLU())

    def __init__(self, cin, cout, stride):
        super().__init__()
        i = {32: 0, 64: 1, 128: 2, 256: 3}[cout]  # the stage: each gets three others
        acts = [self.ACTS[(3 * i + j) % len(self.ACTS)](cout) for j in range(3)]
        self.c1 = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout), acts[0])
        self.c2 = nn.Sequential(nn.Conv2d(cout, cout, 3, 1, 1, groups=cout), acts[1])
        self.c3 = nn.Sequential(nn.Conv2d(cout, cout, 1), acts[2])

    def forward(self, x):
        y = self.c1(x)
        return y + self.c3(self.c2(y))


class InceptionNeXtBlock(nn.Module):
    """InceptionNeXt: channels split into identity, a 3x3, a 1x11 and an 11x1 depthwise branch,
    concatenated, BN, a 1x1 GELU MLP, residual; a 2x2 stride-2 conv to downsample."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2 if stride > 1 else 1, stride)
        g = cout // 8
        self.split = (cout - 3 * g, g, g, g)
        self.sq = nn.Conv2d(g, g, 3, 1, 1, groups=g)
        self.w = nn.Conv2d(g, g, (1, 11), 1, (0, 5), groups=g)
        self.h = nn.Conv2d(g, g, (11, 1), 1, (5, 0), groups=g)
        self.norm = nn.BatchNorm2d(cout)
        self.mlp = nn.Sequential(nn.Conv2d(cout, 4 * cout, 1), nn.GELU(), nn.Conv2d(4 * cout, cout, 1))

    def forward(self, x):
        x = self.down(x)
        i, s, w, h = torch.split(x, self.split, 1)
        return x + self.mlp(self.norm(torch.cat([i, self.sq(s), self.w(w), self.h(h)], 1)))


class RepVGGTrainBlock(nn.Module):
    """RepVGG in its training form, as often exported: 3x3 + BN, 1x1 + BN and (same shape) a BN
    identity branch, summed, ReLU; two per stage."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.units = nn.ModuleList([self.Unit(cin, cout, stride), self.Unit(cout, cout, 1)])

    class Unit(nn.Module):
        def __init__(self, cin, cout, stride):
            super().__init__()
            self.k3 = conv_bn(cin, cout, 3, stride, act=False)
            self.k1 = conv_bn(cin, cout, 1, stride, act=False)
            self.id = nn.BatchNorm2d(cout) if stride == 1 and cin == cout else None

        def forward(self, x):
            y = self.k3(x) + self.k1(x)
            return F.relu(y + self.id(x) if self.id is not None else y)

    def forward(self, x):
        for u in self.units:
            x = u(x)
        return x


class ShiftBlock(nn.Module):
    """ShiftNet-style zero-FLOP spatial shifts between 1x1 convs: channel groups moved one pixel
    up / down (zero fill: Pad + Slice) and left / right (circular: torch.roll), the rest kept."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.a = conv_bn(cin, cout, 1)
        self.b = conv_bn(cout, cout, 1, stride, act=False)
        self.short = conv_bn(cin, cout, 1, stride, act=False)

    def forward(self, x):
        y = self.a(x)
        g = y.shape[1] // 5
        up = F.pad(y[:, :g, 1:], (0, 0, 0, 1))
        down = F.pad(y[:, g:2 * g, :-1], (0, 0, 1, 0))
        left = torch.roll(y[:, 2 * g:3 * g], 1, 3)
        right = torch.roll(y[:, 3 * g:4 * g], -1, 3)
        y = torch.cat([up, down, left, right, y[:, 4 * g:]], 1)
        return F.relu(self.b(y) + self.short(x))


class ConvMixer(nn.Module):
    """ConvMixer-256/8: a 7x7 stride-7 patch embedding, then blocks of a residual 9x9 depthwise
    + GELU + BN and a 1x1 + GELU + BN; GAP, FC."""

    def __init__(self, dim=256, depth=8, k=9, patch=7):
        super().__init__()
        act_bn = lambda: (nn.GELU(), nn.BatchNorm2d(dim))
        self.embed = nn.Sequential(nn.Conv2d(3, dim, patch, patch), *act_bn())
        self.dw = nn.ModuleList(nn.Sequential(nn.Conv2d(dim, dim, k, groups=dim, padding=k // 2), *act_bn())
                                for _ in range(depth))
        self.pw = nn.ModuleList(nn.Sequential(nn.Conv2d(dim, dim, 1), *act_bn()) for _ in range(depth))
        self.fc = nn.Linear(dim, 1000)

    def forward(self, x):
        x = self.embed(x)
        for dw, pw in zip(self.dw, self.pw):
            x = pw(x + dw(x))
        return self.fc(x.mean((2, 3)))


UNSEEN = {"ghostnet_like": (unseen_net(GhostBlock), "224x224", 3, 7),
          "res2net_like": (unseen_net(Res2Block), "224x224", 3, 7),
          "sknet_like": (unseen_net(SKBlock), "224x224", 3, 7),
          "mobilevit_like": (unseen_net(MobileViTBlock), "256x256", 3, 14),
          "convnextv2_like": (unseen_net(ConvNeXtV2Block), "224x224", 3, 7),
          "poolformer_like": (unseen_net(PoolFormerBlock), "224x224", 3, 7),
          "hrnet_like": (unseen_net(HRFuse), "224x224", 3, 11),
          "eca_like": (unseen_net(attn_block(ECA)), "224x224", 3, 7),
          "cbam_like": (unseen_net(attn_block(CBAM)), "224x224", 3, 7),
          "gcnet_like": (unseen_net(attn_block(GlobalContext)), "224x224", 3, 7),
          "nonlocal_like": (unseen_net(attn_block(NonLocal)), "224x224", 3, 7),
          "coordatt_like": (unseen_net(CoordAttBlock), "224x224", 3, 7),
          "replknet_like": (unseen_net(RepLKBlock), "224x224", 3, 7),
          "nfnet_like": (unseen_net(NFBlock), "224x224", 3, 7),
          "blurpool_like": (unseen_net(BlurBlock), "224x224", 3, 7),
          "bifpn_like": (unseen_net(BiFPNFuse), "224x224", 3, 11),
          "acts_like": (unseen_net(ActsBlock), "224x224", 3, 7),
          "inceptionnext_like": (unseen_net(InceptionNeXtBlock), "224x224", 3, 7),
          "repvgg_train_like": (unseen_net(RepVGGTrainBlock), "224x224", 3, 7),
          "shift_like": (unseen_net(ShiftBlock), "224x224", 3, 7),
          "convmixer_like": (ConvMixer, "224x224", 3, 7)}
