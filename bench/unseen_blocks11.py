# Thirteenth batch of unseen CNN families (session 47; bench/export_arch.py exports them by name):
# NAFNet (a LayerNorm over the channels of NCHW written out as means, SimpleGate's chunk and
# product, simplified channel attention, learnable residual scales, a U-shape with PixelShuffle
# up), RCAN (residual groups of residual channel-attention blocks, a long skip, a PixelShuffle x2
# upsampler), UNet++ (nested dense skip pathways with bilinear 2x upsampling and deep
# supervision averaged), DeepLabV3+ (depthwise-separable atrous encoder to stride 16, ASPP with
# dilations 6 / 12 / 18 and image pooling, a stride-4 decoder), MobileViTv2's separable
# self-attention (a one-channel query softmaxed over the patches, a context vector, GroupNorm on
# unfolded patches) in MobileNetV2 stages, STDC modules (channels halving along a chain of 3x3s,
# an average-pooled first branch, all concatenated), a RIFE / IFNet-like frame interpolator
# (three scales, transposed-conv flow heads, grid_sample warps with border padding from a
# meshgrid, a sigmoid blend mask), SRCNN 9-5-5, PP-PicoDet (ESNet's split / SE / channel shuffle
# blocks, a GhostPAN-like neck of 5x5 depthwise convs) and RTMDet (CSPNeXt blocks with 5x5
# depthwise convs, Hardsigmoid channel attention, SPP, heads whose convs are shared across levels
# with a BatchNorm per level). Written from the papers, small, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from unseen_blocks7 import cbr
from unseen_blocks8 import shuffle
from unseen_blocks9 import stage_outputs


class LayerNorm2d(nn.Module):
    """NAFNet's LayerNorm2d: per pixel, the mean and variance over the channels of NCHW."""

    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(1.0 + 0.1 * torch.randn(c))
        self.bias = nn.Parameter(0.1 * torch.randn(c))

    def forward(self, x):
        d = x - x.mean(1, keepdim=True)
        y = d / torch.sqrt((d * d).mean(1, keepdim=True) + self.eps)
        return y * self.weight.reshape(1, -1, 1, 1) + self.bias.reshape(1, -1, 1, 1)


class NAFBlock(nn.Module):
    """NAFNet's block: LayerNorm, 1x1 to 2C, 3x3 depthwise, SimpleGate (halves multiplied),
    simplified channel attention (GAP, 1x1, multiply), 1x1, x + beta * y; then LayerNorm, 1x1 to
    2C, SimpleGate, 1x1, x + gamma * y."""

    def __init__(self, c):
        super().__init__()
        self.norm1, self.norm2 = LayerNorm2d(c), LayerNorm2d(c)
        self.conv1 = nn.Conv2d(c, 2 * c, 1)
        self.conv2 = nn.Conv2d(2 * c, 2 * c, 3, 1, 1, groups=2 * c)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1))
        self.conv3 = nn.Conv2d(c, c, 1)
        self.conv4 = nn.Conv2d(c, 2 * c, 1)
        self.conv5 = nn.Conv2d(c, c, 1)
        # zeros in the paper (each block starts as the identity); random here
        self.beta = nn.Parameter(0.5 * torch.randn(1, c, 1, 1))
        self.gamma = nn.Parameter(0.5 * torch.randn(1, c, 1, 1))

    def forward(self, x):
        a, b = self.conv2(self.conv1(self.norm1(x))).chunk(2, dim=1)
        y = a * b
        y = self.conv3(y * self.sca(y))
        x = x + y * self.beta
        a, b = self.conv4(self.norm2(x)).chunk(2, dim=1)
        return x + self.conv5(a * b) * self.gamma


class NAFNet(nn.Module):
    """A small NAFNet: a 3x3 intro to 16 channels, three encoder levels (2x2 stride-2 convs
    doubling the channels), a 128-channel middle, decoders that go up by a 1x1 to 2C and
    PixelShuffle(2), add the skip and run NAF blocks; a 3x3 to 3 channels plus the input."""

    def __init__(self, width=16, enc=(1, 1, 2), mid=2, dec=(1, 1, 1)):
        super().__init__()
        self.intro = nn.Conv2d(3, width, 3, 1, 1)
        self.encoders, self.downs = nn.ModuleList(), nn.ModuleList()
        c = width
        for n in enc:
            self.encoders.append(nn.Sequential(*[NAFBlock(c) for _ in range(n)]))
            self.downs.append(nn.Conv2d(c, 2 * c, 2, 2))
            c *= 2
        self.middle = nn.Sequential(*[NAFBlock(c) for _ in range(mid)])
        self.ups, self.decoders = nn.ModuleList(), nn.ModuleList()
        for n in dec:
            self.ups.append(nn.Sequential(nn.Conv2d(c, 2 * c, 1, bias=False), nn.PixelShuffle(2)))
            c //= 2
            self.decoders.append(nn.Sequential(*[NAFBlock(c) for _ in range(n)]))
        self.ending = nn.Conv2d(width, 3, 3, 1, 1)

    def forward(self, inp):
        x = self.intro(inp)
        skips = []
        for e, d in zip(self.encoders, self.downs):
            x = e(x)
            skips.append(x)
            x = d(x)
        x = self.middle(x)
        for u, d, s in zip(self.ups, self.decoders, reversed(skips)):
            x = d(u(x) + s)
        return self.ending(x) + inp


class RCAB(nn.Module):
    """RCAN's residual channel attention block: conv-ReLU-conv, then channel attention (GAP, 1x1
    down by 16, ReLU, 1x1 up, Sigmoid) scaling it, plus the input."""

    def __init__(self, c, r=16):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1))
        self.ca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // r, 1), nn.ReLU(),
                                nn.Conv2d(c // r, c, 1), nn.Sigmoid())

    def forward(self, x):
        y = self.body(x)
        return x + y * self.ca(y)


class RCAN(nn.Module):
    """RCAN x2: a head conv, residual groups (RCABs then a conv, plus the group's input), a conv,
    the long skip from the head, a 3x3 to 4C and PixelShuffle(2), a 3x3 to RGB."""

    def __init__(self, c=32, groups=3, blocks=4):
        super().__init__()
        self.head = nn.Conv2d(3, c, 3, 1, 1)
        self.groups = nn.ModuleList([
            nn.Sequential(*[RCAB(c) for _ in range(blocks)], nn.Conv2d(c, c, 3, 1, 1))
            for _ in range(groups)])
        self.body_end = nn.Conv2d(c, c, 3, 1, 1)
        self.up = nn.Sequential(nn.Conv2d(c, 4 * c, 3, 1, 1), nn.PixelShuffle(2),
                                nn.Conv2d(c, 3, 3, 1, 1))

    def forward(self, x):
        h = self.head(x)
        y = h
        for g in self.groups:
            y = y + g(y)
        return self.up(self.body_end(y) + h)


def vgg_block(cin, cout):
    return nn.Sequential(cbr(cin, cout, 3), cbr(cout, cout, 3))


class UNetPP(nn.Module):
    """UNet++ over four levels (16 / 32 / 64 / 128 channels): the backbone column X^{i,0} (max
    pool down), every nested node X^{i,j} a double conv on the concatenation of X^{i,0..j-1} and
    the bilinear 2x upsampling (align_corners) of X^{i+1,j-1}; deep supervision: the 1x1 heads of
    X^{0,1..3} averaged."""

    def __init__(self, classes=2, chs=(16, 32, 64, 128)):
        super().__init__()
        self.depth = len(chs)
        self.nodes = nn.ModuleDict()
        for i, c in enumerate(chs):
            self.nodes[f"{i}_0"] = vgg_block(3 if i == 0 else chs[i - 1], c)
        for j in range(1, self.depth):
            for i in range(self.depth - j):
                self.nodes[f"{i}_{j}"] = vgg_block(chs[i] * j + chs[i + 1], chs[i])
        self.heads = nn.ModuleList([nn.Conv2d(chs[0], classes, 1) for _ in range(self.depth - 1)])

    def forward(self, x):
        X = {}
        for i in range(self.depth):
            X[i, 0] = self.nodes[f"{i}_0"](x if i == 0 else F.max_pool2d(X[i - 1, 0], 2))
        for j in range(1, self.depth):
            for i in range(self.depth - j):
                up = F.interpolate(X[i + 1, j - 1], scale_factor=2.0, mode="bilinear",
                                   align_corners=True)
                X[i, j] = self.nodes[f"{i}_{j}"](torch.cat([X[i, k] for k in range(j)] + [up], 1))
        return sum(h(X[0, j + 1]) for j, h in enumerate(self.heads)) / len(self.heads)


def sep(cin, cout, s=1, d=1):
    """Depthwise-separable conv: 3x3 depthwise (strided / dilated) + BN + ReLU, 1x1 + BN + ReLU."""
    return nn.Sequential(cbr(cin, cin, 3, s, groups=cin, d=d), cbr(cin, cout, 1))


class DeepLabV3Plus(nn.Module):
    """DeepLabV3+: an encoder of separable convs to output stride 16 (the last ones atrous), ASPP
    (a 1x1, 3x3s of dilation 6 / 12 / 18, image pooling: GAP, 1x1, bilinear back to the map),
    concatenated, a 1x1; the decoder: ASPP's output upsampled x4 (bilinear), the stride-4
    features through a 1x1 to 48 channels, concatenated, two separable 3x3s, a classifier,
    upsampled x4. H and W multiples of 16."""

    def __init__(self, classes=21):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 24, 3, 2), sep(24, 32))               # /2
        self.low = nn.Sequential(sep(32, 64, 2), sep(64, 64))                  # /4
        self.high = nn.Sequential(sep(64, 96, 2), sep(96, 96), sep(96, 128, 2),
                                  sep(128, 128, d=2), sep(128, 128, d=2))      # /16
        self.aspp = nn.ModuleList([cbr(128, 64, 1)] + [cbr(128, 64, 3, d=r) for r in (6, 12, 18)])
        self.image_pool = nn.Sequential(nn.AdaptiveAvgPool2d(1), cbr(128, 64, 1))
        self.project = cbr(5 * 64, 64, 1)
        self.low_proj = cbr(64, 48, 1)
        self.decoder = nn.Sequential(sep(64 + 48, 64), sep(64, 64))
        self.cls = nn.Conv2d(64, classes, 1)

    def forward(self, x):
        low = self.low(self.stem(x))
        f = self.high(low)
        pooled = F.interpolate(self.image_pool(f), size=f.shape[2:], mode="bilinear",
                               align_corners=False)
        a = self.project(torch.cat([b(f) for b in self.aspp] + [pooled], 1))
        a = F.interpolate(a, scale_factor=4.0, mode="bilinear", align_corners=False)
        y = self.cls(self.decoder(torch.cat([a, self.low_proj(low)], 1)))
        return F.interpolate(y, scale_factor=4.0, mode="bilinear", align_corners=False)


class InvRes(nn.Module):
    """MobileNetV2's inverted residual (SiLU, as MobileViTv2 uses it)."""

    def __init__(self, cin, cout, s, e=4):
        super().__init__()
        mid = cin * e
        self.b = nn.Sequential(cbr(cin, mid, 1, act=nn.SiLU),
                               cbr(mid, mid, 3, s, groups=mid, act=nn.SiLU),
                               cbr(mid, cout, 1, act=None))
        self.res = s == 1 and cin == cout

    def forward(self, x):
        y = self.b(x)
        return x + y if self.res else y


class SeparableSelfAttention(nn.Module):
    """MobileViTv2's separable self-attention on [B, d, P, N] patches: a 1x1 to 1 + 2d channels
    (query, key, value), the query softmaxed over the N patches, the context vector = sum over
    the patches of key x scores, ReLU(value) x context (broadcast), a 1x1 out."""

    def __init__(self, d):
        super().__init__()
        self.d = d
        self.qkv = nn.Conv2d(d, 1 + 2 * d, 1)
        self.out = nn.Conv2d(d, d, 1)

    def forward(self, x):
        q, k, v = torch.split(self.qkv(x), [1, self.d, self.d], dim=1)
        scores = torch.softmax(q, dim=-1)
        context = (k * scores).sum(-1, keepdim=True)
        return self.out(torch.relu(v) * context)


class MobileViTv2Block(nn.Module):
    """MobileViTv2's block: a 3x3 depthwise + BN + SiLU and a 1x1 to d (local), 2x2 patches
    unfolded to [B, d, 4, HW/4] by reshape / permute, attention and FFN (1x1 - SiLU - 1x1)
    layers with pre-norm GroupNorm(1) and residuals, a GroupNorm, folded back, a 1x1 + BN."""

    def __init__(self, c, d, n):
        super().__init__()
        self.local = nn.Sequential(cbr(c, c, 3, groups=c, act=nn.SiLU),
                                   nn.Conv2d(c, d, 1, bias=False))
        self.layers = nn.ModuleList([nn.ModuleList([
            nn.GroupNorm(1, d), SeparableSelfAttention(d), nn.GroupNorm(1, d),
            nn.Sequential(nn.Conv2d(d, 2 * d, 1), nn.SiLU(), nn.Conv2d(2 * d, d, 1))])
            for _ in range(n)])
        self.norm = nn.GroupNorm(1, d)
        self.proj = cbr(d, c, 1, act=None)

    def forward(self, x):
        b, _, h, w = x.shape
        y = self.local(x)
        d = y.shape[1]
        p = y.reshape(b, d, h // 2, 2, w // 2, 2).permute(0, 1, 3, 5, 2, 4).reshape(b, d, 4, -1)
        for n1, attn, n2, ffn in self.layers:
            p = p + attn(n1(p))
            p = p + ffn(n2(p))
        p = self.norm(p)
        y = p.reshape(b, d, 2, 2, h // 2, w // 2).permute(0, 1, 4, 2, 5, 3).reshape(b, d, h, w)
        return self.proj(y)


class MobileViTv2(nn.Module):
    """A small MobileViTv2 classifier: MobileNetV2 stages to stride 8 and 16, each followed by a
    MobileViTv2 block (1 and 2 attention layers), a stride-32 inverted residual, a 1x1, GAP, FC.
    H and W must be multiples of 32."""

    def __init__(self, classes=10):
        super().__init__()
        self.net = nn.Sequential(
            cbr(3, 16, 3, 2, act=nn.SiLU), InvRes(16, 16, 1, 2),
            InvRes(16, 24, 2), InvRes(24, 24, 1),
            InvRes(24, 48, 2), MobileViTv2Block(48, 64, 1),
            InvRes(48, 64, 2), MobileViTv2Block(64, 80, 2),
            InvRes(64, 96, 2), cbr(96, 128, 1, act=nn.SiLU), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
            nn.Linear(128, classes))

    def forward(self, x):
        return self.net(x)


class STDCModule(nn.Module):
    """STDC's short-term dense concatenate module: a 1x1 to C/2, then 3x3s to C/4, C/8, C/8, each
    on the previous; strided: a 3x3 stride-2 depthwise conv + BN before the second, the first
    branch average-pooled (3x3, stride 2); all four concatenated to C."""

    def __init__(self, cin, cout, s):
        super().__init__()
        self.b1 = cbr(cin, cout // 2, 1)
        self.avd = cbr(cout // 2, cout // 2, 3, 2, groups=cout // 2, act=None) if s == 2 else None
        self.skip = nn.AvgPool2d(3, 2, 1) if s == 2 else None
        self.b2 = cbr(cout // 2, cout // 4, 3)
        self.b3 = cbr(cout // 4, cout // 8, 3)
        self.b4 = cbr(cout // 8, cout // 8, 3)

    def forward(self, x):
        o1 = self.b1(x)
        o2 = self.b2(self.avd(o1) if self.avd is not None else o1)
        o3 = self.b3(o2)
        o4 = self.b4(o3)
        return torch.cat([self.skip(o1) if self.skip is not None else o1, o2, o3, o4], 1)


class STDCNet(nn.Module):
    """An STDC1-like classifier: two stride-2 3x3s, three stages of a strided and a plain STDC
    module (96, 128, 128 channels), a 1x1, GAP, FC - ReLU - FC."""

    def __init__(self, classes=10):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 2), cbr(32, 64, 3, 2))
        stages, cin = [], 64
        for c in (96, 128, 128):
            stages += [STDCModule(cin, c, 2), STDCModule(c, c, 1)]
            cin = c
        self.stages = nn.Sequential(*stages)
        self.head = nn.Sequential(cbr(128, 128, 1), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                                  nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, classes))

    def forward(self, x):
        return self.head(self.stages(self.stem(x)))


def cp(cin, cout, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, 3, s, 1), nn.PReLU(cout))


class IFBlock(nn.Module):
    """RIFE's IFBlock: the input (and the current flow, rescaled) resized by 1/scale, two
    stride-2 3x3s, 3x3s with a residual, a 4x4 stride-2 transposed conv to 4 flow + 1 mask
    channels, resized back by 2 x scale, the flow multiplied by 2 x scale."""

    def __init__(self, cin, c):
        super().__init__()
        self.conv0 = nn.Sequential(cp(cin, c // 2, 2), cp(c // 2, c, 2))
        self.convblock = nn.Sequential(*[cp(c, c) for _ in range(4)])
        self.lastconv = nn.ConvTranspose2d(c, 5, 4, 2, 1)

    def forward(self, x, flow, scale):
        if scale != 1:
            x = F.interpolate(x, scale_factor=1.0 / scale, mode="bilinear", align_corners=False)
        if flow is not None:
            flow = F.interpolate(flow, scale_factor=1.0 / scale, mode="bilinear",
                                 align_corners=False) * (1.0 / scale)
            x = torch.cat([x, flow], 1)
        x = self.conv0(x)
        x = self.convblock(x) + x
        tmp = F.interpolate(self.lastconv(x), scale_factor=scale * 2.0, mode="bilinear",
                            align_corners=False)
        return tmp[:, :4] * (scale * 2.0), tmp[:, 4:5]


def warp_border(img, flow):
    """Backward warp by grid_sample (bilinear, border padding, align_corners) on a base grid
    from linspace / meshgrid plus the flow normalised to [-1, 1]."""
    n, _, h, w = img.shape
    gy, gx = torch.meshgrid(torch.linspace(-1.0, 1.0, h), torch.linspace(-1.0, 1.0, w),
                            indexing="ij")
    base = torch.stack([gx, gy], 0).unsqueeze(0)
    flow = torch.cat([flow[:, 0:1] / ((w - 1.0) / 2.0), flow[:, 1:2] / ((h - 1.0) / 2.0)], 1)
    grid = (base + flow).permute(0, 2, 3, 1)
    return F.grid_sample(img, grid, mode="bilinear", padding_mode="border", align_corners=True)


class RIFE(nn.Module):
    """An IFNet-like interpolator on two frames stacked as 6 channels: IFBlocks at 1/4, 1/2 and
    1 (the later ones also read both warped frames, the mask and the flow), flows and masks
    summed, both frames warped each time, blended by sigmoid(mask). H, W multiples of 16."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([IFBlock(6, 64), IFBlock(6 + 6 + 1 + 4, 48),
                                     IFBlock(6 + 6 + 1 + 4, 32)])
        self.scales = (4, 2, 1)

    def forward(self, x):
        img0, img1 = x[:, :3], x[:, 3:6]
        flow = mask = w0 = w1 = None
        for block, scale in zip(self.blocks, self.scales):
            if flow is None:
                flow, mask = block(torch.cat([img0, img1], 1), None, scale)
            else:
                df, dm = block(torch.cat([img0, img1, w0, w1, mask], 1), flow, scale)
                flow, mask = flow + df, mask + dm
            w0, w1 = warp_border(img0, flow[:, :2]), warp_border(img1, flow[:, 2:4])
        m = torch.sigmoid(mask)
        return w0 * m + w1 * (1 - m)


class SRCNN(nn.Module):
    """SRCNN 9-5-5 on the luminance: 9x9 to 64, ReLU, 5x5 to 32, ReLU, 5x5 to 1 (padded)."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 64, 9, 1, 4), nn.ReLU(), nn.Conv2d(64, 32, 5, 1, 2),
                                 nn.ReLU(), nn.Conv2d(32, 1, 5, 1, 2))

    def forward(self, x):
        return self.net(x)


def chs(cin, cout, k=1, s=1, groups=1, act=nn.Hardswish):
    return cbr(cin, cout, k, s, groups, act)


class ESBlock(nn.Module):
    """ESNet's blocks. Stride 1: the channels split in two, one half through a 1x1 (Hardswish),
    a 3x3 depthwise, an SE (GAP, 1x1 to a quarter, ReLU, 1x1, Hardsigmoid) and a 1x1, concatenated
    with the other, channel shuffle. Stride 2: a 3x3 stride-2 depthwise + 1x1 branch and a
    1x1 / 3x3 stride-2 depthwise / SE / 1x1 branch, concatenated, a 3x3 depthwise and a 1x1."""

    def __init__(self, cin, cout, s):
        super().__init__()
        self.s = s
        half = cout // 2

        def se(c):
            return nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c // 4, 1), nn.ReLU(),
                                 nn.Conv2d(c // 4, c, 1), nn.Hardsigmoid())
        self.se = se(half)
        if s == 1:
            self.branch = nn.Sequential(chs(half, half), chs(half, half, 3, groups=half, act=None))
            self.out = chs(half, half)
        else:
            self.b1 = nn.Sequential(chs(cin, cin, 3, 2, cin, None), chs(cin, half))
            self.branch = nn.Sequential(chs(cin, half), chs(half, half, 3, 2, half, None))
            self.out = chs(half, half)
            self.fuse = nn.Sequential(chs(cout, cout, 3, groups=cout), chs(cout, cout))

    def forward(self, x):
        if self.s == 1:
            a, b = x.chunk(2, dim=1)
            y = self.branch(b)
            return shuffle(torch.cat([a, self.out(y * self.se(y))], 1))
        y = self.branch(x)
        return self.fuse(torch.cat([self.b1(x), self.out(y * self.se(y))], 1))


class GhostBlock(nn.Module):
    """A ghost module of GhostPAN: a 1x1 to half the channels, a 5x5 depthwise "cheap" conv on
    it, both concatenated."""

    def __init__(self, cin, cout):
        super().__init__()
        self.primary = chs(cin, cout // 2)
        self.cheap = chs(cout // 2, cout // 2, 5, groups=cout // 2)

    def forward(self, x):
        y = self.primary(x)
        return torch.cat([y, self.cheap(y)], 1)


class PicoDet(nn.Module):
    """A small PP-PicoDet: an ESNet backbone (a 3x3 stride-2 stem and a max pool, ES stages to
    strides 8 / 16 / 32), a GhostPAN-like neck (1x1s to 64, nearest 2x up and 5x5 depthwise
    stride-2 down, ghost blocks on the concatenations), per level two 5x5 depthwise + 1x1 units
    and a 1x1 to classes (sigmoid) + 4 x (reg_max + 1) distances; [N, 42, sum HW]."""

    def __init__(self, classes=10, reg_max=7):
        super().__init__()
        self.classes = classes
        self.stem = nn.Sequential(chs(3, 24, 3, 2), nn.MaxPool2d(3, 2, 1))
        self.stages = nn.ModuleList()
        cin = 24
        for c, n in ((48, 2), (96, 3), (128, 1)):
            self.stages.append(nn.Sequential(ESBlock(cin, c, 2), *[ESBlock(c, c, 1)
                                                                    for _ in range(n)]))
            cin = c
        self.reduce = nn.ModuleList([chs(c, 64) for c in (48, 96, 128)])
        self.td = nn.ModuleList([GhostBlock(128, 64) for _ in range(2)])
        self.down = nn.ModuleList([nn.Sequential(chs(64, 64, 5, 2, 64), chs(64, 64))
                                   for _ in range(2)])
        self.bu = nn.ModuleList([GhostBlock(128, 64) for _ in range(2)])
        self.heads = nn.ModuleList([nn.Sequential(
            chs(64, 64, 5, groups=64), chs(64, 64), chs(64, 64, 5, groups=64), chs(64, 64),
            nn.Conv2d(64, classes + 4 * (reg_max + 1), 1)) for _ in range(3)])

    def forward(self, x):
        feats = stage_outputs(self.stages, self.stem(x))
        c3, c4, c5 = [r(f) for r, f in zip(self.reduce, feats)]
        p4 = self.td[0](torch.cat([F.interpolate(c5, scale_factor=2.0, mode="nearest"), c4], 1))
        p3 = self.td[1](torch.cat([F.interpolate(p4, scale_factor=2.0, mode="nearest"), c3], 1))
        n4 = self.bu[0](torch.cat([self.down[0](p3), p4], 1))
        n5 = self.bu[1](torch.cat([self.down[1](n4), c5], 1))
        outs = []
        for h, f in zip(self.heads, (p3, n4, n5)):
            y = h(f)
            y = torch.cat([torch.sigmoid(y[:, :self.classes]), y[:, self.classes:]], 1)
            outs.append(y.flatten(2))
        return torch.cat(outs, 2)


def cbs(cin, cout, k=1, s=1, groups=1):
    return cbr(cin, cout, k, s, groups, nn.SiLU)


class CSPNeXtBlock(nn.Module):
    """RTMDet's CSPNeXt block: a 3x3 conv, then a 5x5 depthwise + 1x1 (BN, SiLU each), plus the
    input when add."""

    def __init__(self, c, add=True):
        super().__init__()
        self.add = add
        self.conv1 = cbs(c, c, 3)
        self.conv2 = nn.Sequential(cbs(c, c, 5, groups=c), cbs(c, c, 1))

    def forward(self, x):
        y = self.conv2(self.conv1(x))
        return x + y if self.add else y


class CSPLayer(nn.Module):
    """CSP: a main 1x1 to half through CSPNeXt blocks, a short 1x1 to half, concatenated, channel
    attention (GAP, 1x1 with bias, Hardsigmoid, multiply) in the backbone, a final 1x1."""

    def __init__(self, cin, cout, n=1, add=True, attn=True):
        super().__init__()
        h = cout // 2
        self.main, self.short = cbs(cin, h), cbs(cin, h)
        self.blocks = nn.Sequential(*[CSPNeXtBlock(h, add) for _ in range(n)])
        self.attn = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(2 * h, 2 * h, 1),
                                  nn.Hardsigmoid()) if attn else None
        self.final = cbs(2 * h, cout)

    def forward(self, x):
        y = torch.cat([self.blocks(self.main(x)), self.short(x)], 1)
        if self.attn is not None:
            y = y * self.attn(y)
        return self.final(y)


class SPPBottleneck(nn.Module):
    """RTMDet's SPP: a 1x1 to half, parallel 5 / 9 / 13 max pools (stride 1), concatenated, 1x1."""

    def __init__(self, c):
        super().__init__()
        self.cv1, self.cv2 = cbs(c, c // 2), cbs(2 * c, c)

    def forward(self, x):
        x = self.cv1(x)
        return self.cv2(torch.cat([x] + [F.max_pool2d(x, k, 1, k // 2) for k in (5, 9, 13)], 1))


class RTMDet(nn.Module):
    """A small RTMDet: CSPNeXt backbone (a three-conv stem, stages of a 3x3 stride-2 conv and a
    CSP layer, SPP before the last), a CSP-PAFPN neck (nearest up, 3x3 stride-2 down, CSP layers
    without attention), 3x3 out convs to 48, and the SepBN head: the cls and reg towers' two
    3x3 convs shared by the three levels, a BatchNorm per level; sigmoid classes and ReLU
    distances x stride; [N, classes + 4, sum HW]."""

    def __init__(self, classes=10, w=48):
        super().__init__()
        self.stem = nn.Sequential(cbs(3, 12, 3, 2), cbs(12, 12, 3), cbs(12, 24, 3))
        self.stages = nn.ModuleList()
        cin = 24
        for i, c in enumerate((32, 64, 96, 128)):
            last = i == 3
            self.stages.append(nn.Sequential(cbs(cin, c, 3, 2),
                                             *([SPPBottleneck(c)] if last else []),
                                             CSPLayer(c, c, 1, add=not last)))
            cin = c
        self.reduce5, self.td4 = cbs(128, 96), CSPLayer(192, 96, 1, False, False)
        self.reduce4, self.td3 = cbs(96, 64), CSPLayer(128, 64, 1, False, False)
        self.down3, self.bu4 = cbs(64, 64, 3, 2), CSPLayer(128, 96, 1, False, False)
        self.down4, self.bu5 = cbs(96, 96, 3, 2), CSPLayer(192, 128, 1, False, False)
        self.outs = nn.ModuleList([cbs(c, w, 3) for c in (64, 96, 128)])
        self.cls_convs = nn.ModuleList([nn.Conv2d(w, w, 3, 1, 1, bias=False) for _ in range(2)])
        self.reg_convs = nn.ModuleList([nn.Conv2d(w, w, 3, 1, 1, bias=False) for _ in range(2)])
        self.cls_bns = nn.ModuleList([nn.ModuleList([nn.BatchNorm2d(w) for _ in range(2)])
                                      for _ in range(3)])
        self.reg_bns = nn.ModuleList([nn.ModuleList([nn.BatchNorm2d(w) for _ in range(2)])
                                      for _ in range(3)])
        self.cls_out = nn.ModuleList([nn.Conv2d(w, classes, 1) for _ in range(3)])
        self.reg_out = nn.ModuleList([nn.Conv2d(w, 4, 1) for _ in range(3)])

    def forward(self, x):
        feats = stage_outputs(self.stages, self.stem(x))
        c3, c4, c5 = feats[1:]
        r5 = self.reduce5(c5)
        t4 = self.td4(torch.cat([F.interpolate(r5, scale_factor=2.0, mode="nearest"), c4], 1))
        r4 = self.reduce4(t4)
        p3 = self.td3(torch.cat([F.interpolate(r4, scale_factor=2.0, mode="nearest"), c3], 1))
        p4 = self.bu4(torch.cat([self.down3(p3), r4], 1))
        p5 = self.bu5(torch.cat([self.down4(p4), r5], 1))
        outs = []
        for i, (f, stride) in enumerate(zip((p3, p4, p5), (8.0, 16.0, 32.0))):
            f = self.outs[i](f)
            c, r = f, f
            for k in range(2):
                c = F.silu(self.cls_bns[i][k](self.cls_convs[k](c)))
                r = F.silu(self.reg_bns[i][k](self.reg_convs[k](r)))
            y = torch.cat([torch.sigmoid(self.cls_out[i](c)), F.relu(self.reg_out[i](r)) * stride],
                          1)
            outs.append(y.flatten(2))
        return torch.cat(outs, 2)


# name: (class, default HxW, input channels, lowest opset)
UNSEEN11 = {"nafnet_like": (NAFNet, "128x128", 3, 11),
            "rcan_like": (RCAN, "48x48", 3, 11),
            "unetpp_like": (UNetPP, "96x96", 3, 11),
            "deeplabv3plus_like": (DeepLabV3Plus, "256x256", 3, 11),
            "mobilevitv2_like": (MobileViTv2, "160x160", 3, 11),
            "stdc_like": (STDCNet, "224x224", 3, 11),
            "rife_like": (RIFE, "128x128", 6, 16),
            "srcnn_like": (SRCNN, "96x96", 1, 11),
            "picodet_like": (PicoDet, "320x320", 3, 11),
            "rtmdet_like": (RTMDet, "320x320", 3, 11)}
