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


def unseen_net(block, widths=(32, 64, 128, 256), plan=None, stem_width=None, stem_act=nn.ReLU):
    """A classifier made of `block`: a 3x3 stride-2 stem (conv, BN, stem_act), one block per
    (channels, stride) of `plan` (default: one per width, stride 2 after the first; a block's
    output channels are its out_c where it has one), GAP, FC."""
    plan = plan or [(w, 1 if i == 0 else 2) for i, w in enumerate(widths)]
    stem_width = stem_width or widths[0]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, stem_width, 3, 2, 1, bias=False),
                                      nn.BatchNorm2d(stem_width), stem_act())
            cin, blocks = stem_width, []
            for w, stride in plan:
                blocks.append(block(cin, w, stride))
                cin = getattr(blocks[-1], "out_c", w)
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


# Third batch (session 38): token-mixing MLPs, attention with relative positions and spatial
# reduction, channel permutations, partial residuals, factorised reductions, dual paths, one-shot
# aggregation, mixed kernels, unfold.


def tokens(x):
    """[N, C, H, W] -> [N, HW, C]."""
    return x.flatten(2).transpose(1, 2)


def untokens(t, h, w):
    return t.transpose(1, 2).reshape(t.shape[0], -1, h, w)


class MixerBlock(nn.Module):
    """MLP-Mixer: a 2x2 stride-2 conv to enter, then token mixing (LayerNorm, transpose, an MLP
    over the positions, transpose back) and channel mixing (LayerNorm, MLP over channels). The
    token MLPs' widths are the position counts (at 224x224)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2, 2)
        hw = {32: 56, 64: 28, 128: 14, 256: 7}[cout] ** 2
        self.n1, self.n2 = nn.LayerNorm(cout), nn.LayerNorm(cout)
        self.tok = nn.Sequential(nn.Linear(hw, hw // 2), nn.GELU(), nn.Linear(hw // 2, hw))
        self.ch = nn.Sequential(nn.Linear(cout, 2 * cout), nn.GELU(), nn.Linear(2 * cout, cout))

    def forward(self, x):
        x = self.down(x)
        h, w = x.shape[2:]
        t = tokens(x)
        t = t + self.tok(self.n1(t).transpose(1, 2)).transpose(1, 2)
        return untokens(t + self.ch(self.n2(t)), h, w)


class ResMLPBlock(nn.Module):
    """ResMLP: Affine (per-channel scale and shift, no statistics) in place of LayerNorm, a
    Linear across positions, Affine, an MLP across channels, learnt per-channel residual
    scales."""

    class Affine(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a = nn.Parameter(1 + 0.1 * torch.randn(c))
            self.b = nn.Parameter(0.1 * torch.randn(c))

        def forward(self, t):
            return self.a * t + self.b

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2, 2)
        hw = {32: 56, 64: 28, 128: 14, 256: 7}[cout] ** 2
        self.a1, self.a2 = self.Affine(cout), self.Affine(cout)
        self.tok = nn.Linear(hw, hw)
        self.ch = nn.Sequential(nn.Linear(cout, 4 * cout), nn.GELU(), nn.Linear(4 * cout, cout))
        self.g1 = nn.Parameter(0.1 * torch.ones(cout))
        self.g2 = nn.Parameter(0.1 * torch.ones(cout))

    def forward(self, x):
        x = self.down(x)
        h, w = x.shape[2:]
        t = tokens(x)
        t = t + self.g1 * self.tok(self.a1(t).transpose(1, 2)).transpose(1, 2)
        return untokens(t + self.g2 * self.ch(self.a2(t)), h, w)


class GMLPBlock(nn.Module):
    """gMLP: LayerNorm, channel expansion + GELU, split in two halves; the gate half normalised
    and mixed across positions (a Linear over tokens), multiplied into the other; projection,
    residual."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = nn.Conv2d(cin, cout, 2, 2)
        hw = {32: 56, 64: 28, 128: 14, 256: 7}[cout] ** 2
        self.norm, self.gnorm = nn.LayerNorm(cout), nn.LayerNorm(cout)
        self.up, self.proj = nn.Linear(cout, 2 * cout), nn.Linear(cout, cout)
        self.spatial = nn.Linear(hw, hw)

    def forward(self, x):
        x = self.down(x)
        h, w = x.shape[2:]
        t = tokens(x)
        u, v = F.gelu(self.up(self.norm(t))).chunk(2, dim=-1)
        v = self.spatial(self.gnorm(v).transpose(1, 2)).transpose(1, 2)
        return untokens(t + self.proj(u * v), h, w)


class PVTBlock(nn.Module):
    """PVT: an overlapping patch embedding (strided conv + LayerNorm), then attention whose keys
    and values come from the map reduced by a strided conv (spatial reduction ratio 8 / 4 / 2 /
    1 by stage) and LayerNorm; an MLP."""

    def __init__(self, cin, cout, stride, heads=2):
        super().__init__()
        self.embed = nn.Conv2d(cin, cout, 3, 2, 1)
        self.sr_ratio = {32: 8, 64: 4, 128: 2, 256: 1}[cout]
        self.n0, self.n1, self.n2 = nn.LayerNorm(cout), nn.LayerNorm(cout), nn.LayerNorm(cout)
        self.q, self.kv = nn.Linear(cout, cout), nn.Linear(cout, 2 * cout)
        self.sr = nn.Conv2d(cout, cout, self.sr_ratio, self.sr_ratio) if self.sr_ratio > 1 else None
        self.nsr = nn.LayerNorm(cout)
        self.proj = nn.Linear(cout, cout)
        self.mlp = nn.Sequential(nn.Linear(cout, 2 * cout), nn.GELU(), nn.Linear(2 * cout, cout))
        self.heads = heads

    def forward(self, x):
        x = self.embed(x)
        n, c, h, w = x.shape
        t = self.n0(tokens(x))
        y = self.n1(t)
        q = self.q(y).reshape(n, -1, self.heads, c // self.heads).transpose(1, 2)
        r = self.nsr(tokens(self.sr(untokens(y, h, w)))) if self.sr is not None else y
        kv = self.kv(r).reshape(n, -1, 2, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        a = (q @ kv[0].transpose(-2, -1) * (c // self.heads) ** -0.5).softmax(-1)
        t = t + self.proj((a @ kv[1]).transpose(1, 2).reshape(n, -1, c))
        return untokens(t + self.mlp(self.n2(t)), h, w)


def rel_to_abs(x):
    """BoTNet's relative logits [B, H, W, 2W-1] -> absolute [B, H, W, W] by pad / reshape /
    slice (as timm writes it)."""
    b, h, w, _ = x.shape
    x = F.pad(x, (0, 1)).reshape(b, h, w * 2 * w)
    x = F.pad(x, (0, w - 1)).reshape(b, h, w + 1, 2 * w - 1)
    return x[:, :, :w, w - 1:]


class BoTBlock(nn.Module):
    """BoTNet: a bottleneck whose 3x3 is multi-head self-attention over the map with 2-D relative
    position logits (rel_to_abs along each axis); 3x3 convs where the map is over 28x28."""

    def __init__(self, cin, cout, stride, heads=4):
        super().__init__()
        self.enter = conv_bn(cin, cout, 3, stride)
        self.hw = {32: 112, 64: 56, 128: 28, 256: 14}[cout] // (1 if stride == 1 else 1)
        self.attn = self.hw <= 28
        d = cout // heads
        self.heads, self.d = heads, d
        if self.attn:
            self.qkv = nn.Conv2d(cout, 3 * cout, 1, bias=False)
            self.rel_h = nn.Parameter(torch.randn(2 * self.hw - 1, d) * d ** -0.5)
            self.rel_w = nn.Parameter(torch.randn(2 * self.hw - 1, d) * d ** -0.5)
        else:
            self.conv = conv_bn(cout, cout, 3)
        self.out = conv_bn(cout, cout, 1, act=False)

    def rel_logits(self, q, rel, h, w):
        # q [B*heads, h, w, d] against rel [2w-1, d]: logits along w, broadcast along h.
        x = rel_to_abs(torch.einsum("bhwd,md->bhwm", q, rel).reshape(-1, h, w, 2 * w - 1))
        return x.reshape(-1, h, 1, w, w).expand(-1, -1, h, -1, -1)

    def forward(self, x):
        x = self.enter(x)
        if not self.attn:
            return F.relu(self.out(self.conv(x)) + x)
        n, c, h, w = x.shape
        q, k, v = self.qkv(x).reshape(n * self.heads, 3 * self.d, h * w).chunk(3, dim=1)
        logits = (q.transpose(1, 2) @ k) * self.d ** -0.5  # [B*heads, hw, hw]
        qi = q.transpose(1, 2).reshape(-1, h, w, self.d) * self.d ** -0.5
        rw = self.rel_logits(qi, self.rel_w, h, w)  # [B, h, h, w, w]: (y, y', x, x')
        rh = self.rel_logits(qi.transpose(1, 2), self.rel_h, w, h).permute(0, 3, 1, 4, 2)
        logits = logits + (rw.permute(0, 1, 3, 2, 4) + rh.permute(0, 2, 1, 3, 4)).reshape(-1, h * w, h * w)
        y = (logits.softmax(-1) @ v.transpose(1, 2)).transpose(1, 2).reshape(n, c, h, w)
        return F.relu(self.out(y) + x)


class CondenseBlock(nn.Module):
    """CondenseNet: a grouped 1x1 whose output channels are permuted by a fixed index_select
    (its learnt group assignment), a grouped 3x3, the output concatenated with the input
    (dense connectivity); a transition conv + avg pool to downsample."""

    def __init__(self, cin, cout, stride, groups=4):
        super().__init__()
        self.stride = stride
        self.trans = conv_bn(cin, cout - cout // 2, 1)
        g = cout // 2
        self.c1 = nn.Sequential(nn.BatchNorm2d(cout - g), nn.ReLU(), nn.Conv2d(cout - g, 2 * g, 1, groups=groups, bias=False))
        self.register_buffer("perm", torch.randperm(2 * g, generator=torch.Generator().manual_seed(cout)))
        self.c2 = nn.Sequential(nn.BatchNorm2d(2 * g), nn.ReLU(), nn.Conv2d(2 * g, g, 3, 1, 1, groups=groups, bias=False))

    def forward(self, x):
        x = self.trans(F.avg_pool2d(x, 2) if self.stride > 1 else x)
        y = self.c1(x).index_select(1, self.perm)
        return torch.cat([x, self.c2(y)], 1)


class ReXBlock(nn.Module):
    """ReXNet: an inverted residual with channel counts that are no multiple of 8 (they grow by a
    few per block), SiLU after the expansion, ReLU6 after the depthwise, an SE; the shortcut
    added to the first input-channels of the output only (Slice + Add + Concat)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        e = 6 * cin
        self.body = nn.Sequential(nn.Conv2d(cin, e, 1, bias=False), nn.BatchNorm2d(e), nn.SiLU(),
                                  nn.Conv2d(e, e, 3, stride, 1, groups=e, bias=False), nn.BatchNorm2d(e), nn.ReLU6())
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(e, e // 12, 1), nn.ReLU(),
                                nn.Conv2d(e // 12, e, 1), nn.Sigmoid())
        self.proj = nn.Sequential(nn.Conv2d(e, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = stride == 1 and cout > cin
        self.cin = cin

    def forward(self, x):
        y = self.body(x)
        y = self.proj(y * self.se(y))
        if self.res:
            y = torch.cat([y[:, :self.cin] + x, y[:, self.cin:]], 1)
        return y


# ReXNet's channels, growing by a few per block (its stride-1 blocks add the shortcut to their
# first input-channels).
REXNET_PLAN = ((21, 1), (29, 1), (37, 2), (45, 1), (74, 2), (82, 1), (149, 2), (157, 1), (298, 2),
               (306, 1))


class NASReduce(nn.Module):
    """NASNet's factorised reduction: two paths of a stride-2 1x1 conv, the second on the input
    shifted by one pixel (pad right / bottom, drop the first row and column), concatenated; then
    a cell of separable convs (ReLU, depthwise, pointwise, BN twice), max / avg pools
    (count_include_pad=False) and adds, concatenated."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.stride = stride
        self.p1 = nn.Conv2d(cin, cout // 2, 1, bias=False)
        self.p2 = nn.Conv2d(cin, cout - cout // 2, 1, bias=False)
        self.bn = nn.BatchNorm2d(cout)

        def sep(k):
            return nn.Sequential(nn.ReLU(), nn.Conv2d(cout, cout, k, 1, k // 2, groups=cout, bias=False),
                                 nn.Conv2d(cout, cout // 2, 1, bias=False), nn.BatchNorm2d(cout // 2), nn.ReLU(),
                                 nn.Conv2d(cout // 2, cout // 2, k, 1, k // 2, groups=cout // 2, bias=False),
                                 nn.Conv2d(cout // 2, cout // 2, 1, bias=False), nn.BatchNorm2d(cout // 2))
        self.s5, self.s7, self.s3 = sep(5), sep(7), sep(3)
        self.halve = nn.Conv2d(cout, cout // 2, 1, bias=False)

    def forward(self, x):
        if self.stride > 1:
            a = self.p1(F.avg_pool2d(x, 1, 2))
            b = self.p2(F.avg_pool2d(F.pad(x, (0, 1, 0, 1))[:, :, 1:, 1:], 1, 2))
        else:
            a, b = self.p1(x), self.p2(x)
        x = self.bn(torch.cat([a, b], 1))
        h = self.halve(x)
        c0 = self.s5(x) + F.max_pool2d(h, 3, 1, 1)
        c1 = self.s7(x) + F.avg_pool2d(h, 3, 1, 1, count_include_pad=False)
        c2 = self.s3(x) + h
        return torch.cat([c0, c1, c2, h], 1)[:, :x.shape[1] * 2 - x.shape[1]]


class DPNBlock(nn.Module):
    """DPN: a grouped bottleneck whose output is split into a residual part (added to the
    input's residual part) and a dense part (concatenated to the input's dense part)."""

    def __init__(self, cin, cout, stride, inc=16):
        super().__init__()
        self.res_c = cout
        mid = cout // 2
        self.proj = conv_bn(cin, cout + 2 * inc, 1, stride, act=False)
        self.body = nn.Sequential(conv_bn(cin, mid, 1), conv_bn(mid, mid, 3, stride, groups=8),
                                  conv_bn(mid, cout + inc, 1, act=False))
        self.out_c = cout + 3 * inc

    def forward(self, x):
        s = self.proj(x)
        y = self.body(x)
        res = s[:, :self.res_c] + y[:, :self.res_c]
        return F.relu(torch.cat([res, s[:, self.res_c:], y[:, self.res_c:]], 1))


class OSABlock(nn.Module):
    """VoVNet's one-shot aggregation: five 3x3 convs in a chain, all their outputs and the input
    concatenated once, a 1x1, effective SE (GAP, 1x1, hard-sigmoid), residual; max pool
    (ceil mode) to downsample."""

    def __init__(self, cin, cout, stride, layers=5):
        super().__init__()
        self.stride = stride
        mid = max(16, cout // 2)
        self.convs = nn.ModuleList(conv_bn(cin if i == 0 else mid, mid, 3) for i in range(layers))
        self.concat = conv_bn(cin + layers * mid, cout, 1)
        self.ese = nn.Conv2d(cout, cout, 1)
        self.short = conv_bn(cin, cout, 1, act=False) if cin != cout else nn.Identity()

    def forward(self, x):
        if self.stride > 1:
            x = F.max_pool2d(x, 3, 2, ceil_mode=True)
        outs, y = [x], x
        for c in self.convs:
            y = c(y)
            outs.append(y)
        y = self.concat(torch.cat(outs, 1))
        y = y * F.hardsigmoid(self.ese(y.mean((2, 3), keepdim=True)))
        return y + self.short(x)


class MixConvBlock(nn.Module):
    """MixNet: an inverted residual whose depthwise conv splits the channels over 3x3, 5x5, 7x7
    and 9x9 kernels (MixConv), Swish, an SE."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        e = 3 * cin
        self.expand = nn.Sequential(nn.Conv2d(cin, e, 1, bias=False), nn.BatchNorm2d(e), nn.SiLU())
        self.split = [e - 3 * (e // 4)] + [e // 4] * 3
        self.dw = nn.ModuleList(nn.Conv2d(c, c, k, stride, k // 2, groups=c, bias=False)
                                for c, k in zip(self.split, (3, 5, 7, 9)))
        self.bn = nn.BatchNorm2d(e)
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(e, e // 8, 1), nn.SiLU(),
                                nn.Conv2d(e // 8, e, 1), nn.Sigmoid())
        self.proj = nn.Sequential(nn.Conv2d(e, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.res = stride == 1 and cin == cout

    def forward(self, x):
        y = self.expand(x)
        y = F.silu(self.bn(torch.cat([d(p) for d, p in zip(self.dw, torch.split(y, self.split, 1))], 1)))
        y = self.proj(y * self.se(y))
        return x + y if self.res else y


class InvolutionBlock(nn.Module):
    """Involution: a per-pixel 3x3 kernel (one per group of 16 channels) generated from the map by
    two 1x1 convs, applied to the map's unfolded neighbourhoods (nn.Unfold)."""

    def __init__(self, cin, cout, stride, k=3):
        super().__init__()
        self.enter = conv_bn(cin, cout, 3, stride)
        self.k, self.g = k, cout // 16
        self.reduce = conv_bn(cout, cout // 4, 1)
        self.span = nn.Conv2d(cout // 4, k * k * self.g, 1)
        self.unfold = nn.Unfold(k, 1, (k - 1) // 2, 1)
        self.out = conv_bn(cout, cout, 1, act=False)

    def forward(self, x):
        x = self.enter(x)
        n, c, h, w = x.shape
        wt = self.span(self.reduce(x)).reshape(n, self.g, self.k * self.k, h, w).unsqueeze(2)
        u = self.unfold(x).reshape(n, self.g, c // self.g, self.k * self.k, h, w)
        return F.relu(self.out((wt * u).sum(3).reshape(n, c, h, w)) + x)


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
          "convmixer_like": (ConvMixer, "224x224", 3, 7),
          "mixer_like": (unseen_net(MixerBlock), "224x224", 3, 7),
          "resmlp_like": (unseen_net(ResMLPBlock), "224x224", 3, 7),
          "gmlp_like": (unseen_net(GMLPBlock), "224x224", 3, 7),
          "pvt_like": (unseen_net(PVTBlock), "224x224", 3, 7),
          "botnet_like": (unseen_net(BoTBlock), "224x224", 3, 7),
          "condensenet_like": (unseen_net(CondenseBlock), "224x224", 3, 7),
          "rexnet_like": (unseen_net(ReXBlock, plan=REXNET_PLAN, stem_width=16, stem_act=nn.SiLU),
                          "224x224", 3, 7),
          "nasnet_like": (unseen_net(NASReduce), "224x224", 3, 7),
          "dpn_like": (unseen_net(DPNBlock), "224x224", 3, 7),
          "vovnet_like": (unseen_net(OSABlock), "224x224", 3, 7),
          "mixnet_like": (unseen_net(MixConvBlock), "224x224", 3, 7),
          "involution_like": (unseen_net(InvolutionBlock), "224x224", 3, 7)}
