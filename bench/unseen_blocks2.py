# Fourth batch of unseen CNN families (session 39; bench/export_arch.py exports them by name):
# restoration nets' normalisations and gates, transposed / cosine / linear / windowed attention,
# large-kernel attention, recursive gating, split attention, and whole models with other inputs
# and outputs than a classifier's (super-resolution, a text detector's head, a face embedder, a
# face proposal net, a GAN generator, attention U-Net gates, a denoiser on pixel-unshuffled input).
# Written from the papers, random weights.
import torch
import torch.nn as nn
import torch.nn.functional as F

from unseen_blocks import conv_bn, tokens, unseen_net, untokens


class LayerNorm2d(nn.Module):
    """NAFNet / ConvNeXt-style LayerNorm over the channels of an NCHW map, written out (mean,
    variance, rsqrt) as those repositories do."""

    def __init__(self, c, eps=1e-6):
        super().__init__()
        self.w, self.b, self.eps = nn.Parameter(torch.rand(c) + 0.5), nn.Parameter(torch.randn(c) * 0.1), eps

    def forward(self, x):
        mu = x.mean(1, keepdim=True)
        var = (x - mu).pow(2).mean(1, keepdim=True)
        y = (x - mu) / (var + self.eps).sqrt()
        return self.w.view(1, -1, 1, 1) * y + self.b.view(1, -1, 1, 1)


class NAFBlock(nn.Module):
    """NAFNet: LayerNorm2d, 1x1 expand x2, depthwise 3x3, SimpleGate (halves multiplied),
    simplified channel attention (GAP -> 1x1 -> multiply), 1x1, a learned residual scale; then
    LayerNorm2d, 1x1 expand, SimpleGate, 1x1, scaled residual."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride)
        c = cout
        self.n1, self.n2 = LayerNorm2d(c), LayerNorm2d(c)
        self.c1, self.dw = nn.Conv2d(c, 2 * c, 1), nn.Conv2d(2 * c, 2 * c, 3, 1, 1, groups=2 * c)
        self.sca = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(c, c, 1))
        self.c3, self.c4, self.c5 = nn.Conv2d(c, c, 1), nn.Conv2d(c, 2 * c, 1), nn.Conv2d(c, c, 1)
        self.beta = nn.Parameter(torch.rand(1, c, 1, 1))
        self.gamma = nn.Parameter(torch.rand(1, c, 1, 1))

    def forward(self, x):
        x = self.down(x)
        a, b = self.dw(self.c1(self.n1(x))).chunk(2, 1)
        y = a * b
        y = self.c3(y * self.sca(y))
        x = x + y * self.beta
        a, b = self.c4(self.n2(x)).chunk(2, 1)
        return x + self.c5(a * b) * self.gamma


class RestormerBlock(nn.Module):
    """Restormer: multi-Dconv-head transposed attention (1x1 + depthwise 3x3 qkv, heads attend
    across channels: q, k L2-normalised over the positions, a learned temperature per head) and
    the gated-Dconv feed-forward (1x1, depthwise 3x3, GELU(x1) * x2, 1x1); LayerNorm over
    channels via [N, HW, C] tokens."""

    def __init__(self, cin, cout, stride, heads=4):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride)
        c, self.heads = cout, heads
        self.n1, self.n2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.qkv = nn.Conv2d(c, 3 * c, 1, bias=False)
        self.qkv_dw = nn.Conv2d(3 * c, 3 * c, 3, 1, 1, groups=3 * c, bias=False)
        self.temp = nn.Parameter(torch.rand(heads, 1, 1) + 0.5)
        self.proj = nn.Conv2d(c, c, 1, bias=False)
        h = int(c * 2.66)
        self.fin = nn.Conv2d(c, 2 * h, 1, bias=False)
        self.fdw = nn.Conv2d(2 * h, 2 * h, 3, 1, 1, groups=2 * h, bias=False)
        self.fout = nn.Conv2d(h, c, 1, bias=False)

    def norm(self, n, x):
        return untokens(n(tokens(x)), x.shape[2], x.shape[3])

    def forward(self, x):
        x = self.down(x)
        b, c, h, w = x.shape
        q, k, v = self.qkv_dw(self.qkv(self.norm(self.n1, x))).chunk(3, 1)
        q, k, v = (t.reshape(b, self.heads, c // self.heads, h * w) for t in (q, k, v))
        q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
        a = (q @ k.transpose(-2, -1) * self.temp).softmax(-1)
        x = x + self.proj((a @ v).reshape(b, c, h, w))
        g1, g2 = self.fdw(self.fin(self.norm(self.n2, x))).chunk(2, 1)
        return x + self.fout(F.gelu(g1) * g2)


class MaxViTBlock(nn.Module):
    """MaxViT: an MBConv (1x1, depthwise 3x3, SE, 1x1), then block attention (non-overlapping
    7x7 windows) and grid attention (a 7x7 grid dilated over the map), both through 6-D
    reshapes / permutes, each a pre-norm multi-head attention plus an MLP."""

    def __init__(self, cin, cout, stride, p=7, heads=2):
        super().__init__()
        self.mb = nn.Sequential(conv_bn(cin, 2 * cout, 1), conv_bn(2 * cout, 2 * cout, 3, stride, groups=2 * cout))
        self.se = nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Conv2d(2 * cout, cout // 4, 1), nn.SiLU(),
                                nn.Conv2d(cout // 4, 2 * cout, 1), nn.Sigmoid())
        self.mb_out = conv_bn(2 * cout, cout, 1, act=False)
        self.short = conv_bn(cin, cout, 1, stride, act=False)
        self.p, self.heads = p, heads
        self.attn = nn.ModuleList(nn.MultiheadAttention(cout, heads, batch_first=True) for _ in range(2))
        self.na = nn.ModuleList(nn.LayerNorm(cout) for _ in range(2))
        self.nm = nn.ModuleList(nn.LayerNorm(cout) for _ in range(2))
        self.mlp = nn.ModuleList(nn.Sequential(nn.Linear(cout, 2 * cout), nn.GELU(), nn.Linear(2 * cout, cout))
                                 for _ in range(2))

    def partition(self, x, grid):
        b, c, h, w = x.shape
        p = self.p
        if grid:  # [b, c, p, h/p, p, w/p]: the p x p grid's points are h/p apart
            t = x.reshape(b, c, p, h // p, p, w // p).permute(0, 3, 5, 2, 4, 1)
        else:
            t = x.reshape(b, c, h // p, p, w // p, p).permute(0, 2, 4, 3, 5, 1)
        return t.reshape(-1, p * p, c)

    def unpartition(self, t, x, grid):
        b, c, h, w = x.shape
        p = self.p
        if grid:
            return t.reshape(b, h // p, w // p, p, p, c).permute(0, 5, 3, 1, 4, 2).reshape(b, c, h, w)
        return t.reshape(b, h // p, w // p, p, p, c).permute(0, 5, 1, 3, 2, 4).reshape(b, c, h, w)

    def forward(self, x):
        y = self.mb(x)
        x = self.mb_out(y * self.se(y)) + self.short(x)
        for i, grid in enumerate((False, True)):
            t = self.partition(x, grid)
            n = self.na[i](t)
            t = t + self.attn[i](n, n, n, need_weights=False)[0]
            t = t + self.mlp[i](self.nm[i](t))
            x = self.unpartition(t, x, grid)
        return x


class SwinV2Block(nn.Module):
    """Swin V2: 7x7 window attention (shifted by torch.roll in alternate blocks) with scaled cosine
    attention (q, k L2-normalised, a clamped, exponentiated learned logit scale per head), a
    continuous relative position bias from a small MLP over log-spaced offsets (16 * sigmoid),
    res-post-norm (LayerNorm after attention and after the MLP)."""

    def __init__(self, cin, cout, stride, p=7, heads=4):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride)
        self.p, self.heads, self.shift = p, heads, p // 2 if cout in (64, 256) else 0
        self.qkv, self.proj = nn.Linear(cout, 3 * cout), nn.Linear(cout, cout)
        self.logit_scale = nn.Parameter(torch.log(10 * torch.ones(heads, 1, 1)))
        self.cpb = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, heads, bias=False))
        r = torch.arange(-(p - 1), p, dtype=torch.float32)
        table = torch.stack(torch.meshgrid(r, r, indexing="ij"), -1) / (p - 1) * 8
        self.register_buffer("table", torch.sign(table) * torch.log2(table.abs() + 1) / 3)
        ij = torch.stack(torch.meshgrid(torch.arange(p), torch.arange(p), indexing="ij")).flatten(1)
        rel = (ij[:, :, None] - ij[:, None, :]).permute(1, 2, 0) + p - 1
        self.register_buffer("index", rel[..., 0] * (2 * p - 1) + rel[..., 1])
        self.n1, self.n2 = nn.LayerNorm(cout), nn.LayerNorm(cout)
        self.mlp = nn.Sequential(nn.Linear(cout, 2 * cout), nn.GELU(), nn.Linear(2 * cout, cout))

    def forward(self, x):
        x = self.down(x)
        b, c, h, w = x.shape
        p, nh = self.p, self.heads
        t = x.permute(0, 2, 3, 1)
        if self.shift:
            t = torch.roll(t, (-self.shift, -self.shift), (1, 2))
        t = t.reshape(b, h // p, p, w // p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(-1, p * p, c)
        q, k, v = self.qkv(t).reshape(t.shape[0], p * p, 3, nh, c // nh).permute(2, 0, 3, 1, 4)
        a = F.normalize(q, dim=-1) @ F.normalize(k, dim=-1).transpose(-2, -1)
        a = a * torch.clamp(self.logit_scale, max=4.6052).exp()
        bias = self.cpb(self.table).view(-1, nh)[self.index.view(-1)].view(p * p, p * p, nh)
        a = (a + 16 * torch.sigmoid(bias.permute(2, 0, 1))).softmax(-1)
        o = self.proj((a @ v).transpose(1, 2).reshape(t.shape[0], p * p, c))
        o = o.reshape(b, h // p, w // p, p, p, c).permute(0, 1, 3, 2, 4, 5).reshape(b, h, w, c)
        if self.shift:
            o = torch.roll(o, (self.shift, self.shift), (1, 2))
        t = x.permute(0, 2, 3, 1) + self.n1(o)
        t = t + self.n2(self.mlp(t))
        return t.permute(0, 3, 1, 2)


class LeViTBlock(nn.Module):
    """LeViT: tokens through Linear + BatchNorm1d (the BN over the flattened [N * HW, C]),
    attention with a learned bias per head and relative offset (gathered by an index table),
    Hardswish before the projection, a Hardswish MLP; a subsampling attention (queries from a
    stride-2 subset of the tokens) to downsample."""

    def __init__(self, cin, cout, stride, side, heads=4, kd=16):
        super().__init__()
        self.stride, self.heads, self.kd = stride, heads, kd
        self.cin, self.cout = cin, cout
        self.k = self.lin_bn(cin, heads * kd)
        self.v = self.lin_bn(cin, heads * 2 * kd)
        self.q = self.lin_bn(cin, heads * kd)
        self.proj = nn.Sequential(nn.Hardswish(), self.lin_bn(heads * 2 * kd, cout))
        self.mlp = nn.Sequential(self.lin_bn(cout, 2 * cout), nn.Hardswish(), self.lin_bn(2 * cout, cout))
        qs = side // stride
        qi = torch.stack(torch.meshgrid(torch.arange(qs) * stride, torch.arange(qs) * stride,
                                        indexing="ij")).flatten(1)
        ki = torch.stack(torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")).flatten(1)
        off = (qi[:, :, None] - ki[:, None, :]).abs()
        self.register_buffer("idx", off[0] * side + off[1])
        self.bias = nn.Parameter(torch.randn(heads, side * side) * 0.1)

    @staticmethod
    def lin_bn(a, b):
        class LinBN(nn.Module):
            def __init__(self):
                super().__init__()
                self.l, self.bn = nn.Linear(a, b, bias=False), nn.BatchNorm1d(b)

            def forward(self, t):
                return self.bn(self.l(t).flatten(0, 1)).reshape(t.shape[0], t.shape[1], -1)
        return LinBN()

    def forward(self, x):
        b, c, h, w = x.shape
        t = tokens(x)
        s = self.stride
        tq = t if s == 1 else x[:, :, ::s, ::s].flatten(2).transpose(1, 2)
        nq, nk, nh, kd = tq.shape[1], t.shape[1], self.heads, self.kd
        q = self.q(tq).reshape(b, nq, nh, kd).transpose(1, 2)
        k = self.k(t).reshape(b, nk, nh, kd).transpose(1, 2)
        v = self.v(t).reshape(b, nk, nh, 2 * kd).transpose(1, 2)
        a = (q @ k.transpose(-2, -1) * kd ** -0.5 + self.bias[:, self.idx]).softmax(-1)
        o = self.proj((a @ v).transpose(1, 2).reshape(b, nq, -1))
        if s == 1 and self.cin == self.cout:
            o = o + t
        o = o + self.mlp(o)
        return untokens(o, h // s, w // s)


class LeViT(nn.Module):
    """LeViT-style classifier: four stride-2 3x3 conv + BN + Hardswish (224 -> 14), attention
    blocks at 14x14, a subsampling one to 7x7, one at 7x7; mean over tokens, FC."""

    def __init__(self, classes=1000):
        super().__init__()
        stem, cin = [], 3
        for c in (16, 32, 64, 128):
            stem += [nn.Conv2d(cin, c, 3, 2, 1, bias=False), nn.BatchNorm2d(c), nn.Hardswish()]
            cin = c
        self.stem = nn.Sequential(*stem)
        self.blocks = nn.Sequential(LeViTBlock(128, 128, 1, 14), LeViTBlock(128, 256, 2, 14),
                                    LeViTBlock(256, 256, 1, 7))
        self.fc = nn.Linear(256, classes)

    def forward(self, x):
        return self.fc(self.blocks(self.stem(x)).mean((2, 3)))


class GhostV2Block(nn.Module):
    """GhostNetV2: a Ghost module (1x1 + cheap depthwise, concatenated) scaled by DFC attention
    computed at half resolution (2x2 average pool, 1x1, depthwise 1x5 then 5x1, Sigmoid, nearest
    2x upsampling)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        h = cout // 2
        self.down = conv_bn(cin, cin, 3, stride, groups=cin, act=False) if stride > 1 else nn.Identity()
        self.primary = conv_bn(cin, h, 1)
        self.cheap = conv_bn(h, h, 3, groups=h)
        self.dfc = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout),
                                 nn.Conv2d(cout, cout, (1, 5), 1, (0, 2), groups=cout, bias=False),
                                 nn.BatchNorm2d(cout),
                                 nn.Conv2d(cout, cout, (5, 1), 1, (2, 0), groups=cout, bias=False),
                                 nn.BatchNorm2d(cout))

    def forward(self, x):
        x = self.down(x)
        p = self.primary(x)
        g = torch.cat([p, self.cheap(p)], 1)
        a = torch.sigmoid(self.dfc(F.avg_pool2d(x, 2, 2)))
        return g * F.interpolate(a, size=g.shape[-2:], mode="nearest")


class VANBlock(nn.Module):
    """Visual Attention Network: large-kernel attention (depthwise 5x5, depthwise 7x7 with
    dilation 3, 1x1) multiplying its input; BN pre-norms, a 1x1 / depthwise 3x3 / GELU MLP,
    layer scales."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride, act=False)
        c = cout
        self.n1, self.n2 = nn.BatchNorm2d(c), nn.BatchNorm2d(c)
        self.p1, self.p2 = nn.Conv2d(c, c, 1), nn.Conv2d(c, c, 1)
        self.lka = nn.Sequential(nn.Conv2d(c, c, 5, 1, 2, groups=c),
                                 nn.Conv2d(c, c, 7, 1, 9, groups=c, dilation=3), nn.Conv2d(c, c, 1))
        self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.Conv2d(4 * c, 4 * c, 3, 1, 1, groups=4 * c),
                                 nn.GELU(), nn.Conv2d(4 * c, c, 1))
        self.ls1 = nn.Parameter(torch.rand(c, 1, 1))
        self.ls2 = nn.Parameter(torch.rand(c, 1, 1))

    def forward(self, x):
        x = self.down(x)
        u = F.gelu(self.p1(self.n1(x)))
        x = x + self.ls1 * self.p2(u * self.lka(u))
        return x + self.ls2 * self.mlp(self.n2(x))


class HorBlock(nn.Module):
    """HorNet's recursive gated convolution (order 3): a 1x1 to 2C, split into a gate of C/4 and
    the rest, a depthwise 7x7 of the rest split in three (C/4, C/2, C), then gate * part, a 1x1
    to the next width, * the next part, ...; a 1x1 out. LayerNorm2d pre-norms, an MLP."""

    def __init__(self, cin, cout, stride, order=3):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride, act=False)
        c = cout
        self.dims = [c // 2 ** i for i in range(order)][::-1]
        self.proj_in = nn.Conv2d(c, 2 * c, 1)
        self.dw = nn.Conv2d(sum(self.dims), sum(self.dims), 7, 1, 3, groups=sum(self.dims))
        self.pws = nn.ModuleList(nn.Conv2d(self.dims[i], self.dims[i + 1], 1) for i in range(order - 1))
        self.proj_out = nn.Conv2d(c, c, 1)
        self.n1, self.n2 = LayerNorm2d(c), LayerNorm2d(c)
        self.mlp = nn.Sequential(nn.Conv2d(c, 4 * c, 1), nn.GELU(), nn.Conv2d(4 * c, c, 1))

    def forward(self, x):
        x = self.down(x)
        pwa, abc = torch.split(self.proj_in(self.n1(x)), (self.dims[0], sum(self.dims)), 1)
        parts = torch.split(self.dw(abc) / 3.0, self.dims, 1)
        y = pwa * parts[0]
        for i, pw in enumerate(self.pws):
            y = pw(y) * parts[i + 1]
        x = x + self.proj_out(y)
        return x + self.mlp(self.n2(x))


class ResNeStBlock(nn.Module):
    """ResNeSt split attention (radix 2, cardinality 2): a grouped 3x3 to radix x C, the radix
    splits summed, GAP, a grouped FC pair, a softmax across the radix (reshape / transpose /
    softmax / reshape: rSoftMax), the attention-weighted sum; a bottleneck around it."""

    def __init__(self, cin, cout, stride, radix=2, card=2):
        super().__init__()
        self.radix, self.card = radix, card
        self.red = conv_bn(cin, cout, 1)
        self.conv = conv_bn(cout, cout * radix, 3, 1, groups=card * radix)
        inter = max(cout // 4, 32)
        self.fc1 = nn.Sequential(nn.Conv2d(cout, inter, 1, groups=card), nn.BatchNorm2d(inter), nn.ReLU())
        self.fc2 = nn.Conv2d(inter, cout * radix, 1, groups=card)
        self.pool = nn.AvgPool2d(3, stride, 1) if stride > 1 else nn.Identity()
        self.exp = conv_bn(cout, cout, 1, act=False)
        self.short = nn.Sequential(nn.AvgPool2d(stride, stride) if stride > 1 else nn.Identity(),
                                   conv_bn(cin, cout, 1, act=False))

    def forward(self, x):
        u = self.conv(self.red(x))
        b, rc = u.shape[:2]
        splits = torch.split(u, rc // self.radix, 1)
        g = self.fc2(self.fc1(sum(splits).mean((2, 3), keepdim=True)))
        a = g.view(b, self.card, self.radix, -1).transpose(1, 2).softmax(1).reshape(b, -1, 1, 1)
        att = torch.split(a, rc // self.radix, 1)
        y = sum(a_ * s for a_, s in zip(att, splits))
        return F.relu(self.exp(self.pool(y)) + self.short(x))


class EfficientViTBlock(nn.Module):
    """EfficientViT (MIT): ReLU linear attention over multi-scale tokens (1x1 qkv, plus a 5x5
    depthwise + grouped 1x1 aggregation of them), v padded with a row of ones (F.pad value 1)
    so one matmul gives numerator and normaliser, divided with an eps; an MBConv after."""

    def __init__(self, cin, cout, stride, dim=16):
        super().__init__()
        self.down = conv_bn(cin, cout, 3, stride)
        c, self.dim = cout, dim
        self.qkv = nn.Conv2d(c, 3 * c, 1, bias=False)
        self.agg = nn.Sequential(nn.Conv2d(3 * c, 3 * c, 5, 1, 2, groups=3 * c, bias=False),
                                 nn.Conv2d(3 * c, 3 * c, 1, groups=3 * c // dim, bias=False))
        self.proj = conv_bn(2 * c, c, 1, act=False)
        self.mb = nn.Sequential(conv_bn(c, 4 * c, 1), conv_bn(4 * c, 4 * c, 3, groups=4 * c),
                                conv_bn(4 * c, c, 1, act=False))

    def forward(self, x):
        x = self.down(x)
        b, c, h, w = x.shape
        qkv = self.qkv(x)
        ms = torch.cat([qkv, self.agg(qkv)], 1).reshape(b, -1, 3 * self.dim, h * w)
        q, k, v = ms[:, :, :self.dim], ms[:, :, self.dim:2 * self.dim], ms[:, :, 2 * self.dim:]
        q, k = F.relu(q), F.relu(k)
        v = F.pad(v, (0, 0, 0, 1), mode="constant", value=1.0)
        kv = v @ k.transpose(-1, -2)
        o = kv @ q
        o = o[:, :, :-1] / (o[:, :, -1:] + 1e-15)
        x = x + self.proj(o.reshape(b, -1, h, w))
        return x + self.mb(x)


class EDSR(nn.Module):
    """EDSR super-resolution (x2): a conv, residual blocks (conv, ReLU, conv, scaled by 0.1), a
    conv + global residual, a conv to 4C and PixelShuffle, a conv to RGB; mean shift in and out."""

    def __init__(self, c=64, blocks=8):
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.4488, 0.4371, 0.4040]).view(1, 3, 1, 1))
        self.head = nn.Conv2d(3, c, 3, 1, 1)
        self.body = nn.ModuleList(nn.Sequential(nn.Conv2d(c, c, 3, 1, 1), nn.ReLU(), nn.Conv2d(c, c, 3, 1, 1))
                                  for _ in range(blocks))
        self.tail_conv = nn.Conv2d(c, c, 3, 1, 1)
        self.up = nn.Sequential(nn.Conv2d(c, 4 * c, 3, 1, 1), nn.PixelShuffle(2), nn.Conv2d(c, 3, 3, 1, 1))

    def forward(self, x):
        x = self.head(x - self.mean)
        r = x
        for blk in self.body:
            r = r + blk(r) * 0.1
        return self.up(self.tail_conv(r) + x) + self.mean


class DBNet(nn.Module):
    """DBNet's text detector: a small ResNet-ish backbone, an FPN (1x1 laterals, nearest
    upsampling + add, 3x3 smoothing, upsampled and concatenated), probability and threshold heads
    (3x3, BN, ReLU, two 2x2 stride-2 ConvTransposes, Sigmoid), differentiable binarisation
    1 / (1 + exp(-50 (P - T))); output [P, T, B]."""

    def __init__(self):
        super().__init__()
        chans, self.stages, cin = (32, 64, 128, 256), nn.ModuleList(), 3
        for i, c in enumerate(chans):
            self.stages.append(nn.Sequential(conv_bn(cin, c, 3, 2 if i else 4), conv_bn(c, c, 3)))
            cin = c
        self.lat = nn.ModuleList(nn.Conv2d(c, 64, 1, bias=False) for c in chans)
        self.smooth = nn.ModuleList(nn.Conv2d(64, 16, 3, 1, 1, bias=False) for _ in chans)

        def head():
            return nn.Sequential(conv_bn(64, 16, 3), nn.ConvTranspose2d(16, 16, 2, 2),
                                 nn.BatchNorm2d(16), nn.ReLU(), nn.ConvTranspose2d(16, 1, 2, 2), nn.Sigmoid())
        self.prob, self.thresh = head(), head()

    def forward(self, x):
        feats = []
        for s in self.stages:
            x = s(x)
            feats.append(x)
        lat = [l(f) for l, f in zip(self.lat, feats)]
        for i in range(len(lat) - 2, -1, -1):
            lat[i] = lat[i] + F.interpolate(lat[i + 1], scale_factor=2, mode="nearest")
        size = lat[0].shape[-2:]
        fuse = torch.cat([F.interpolate(s(l), size=size, mode="nearest") for s, l in zip(self.smooth, lat)], 1)
        p, t = self.prob(fuse), self.thresh(fuse)
        return torch.cat([p, t, torch.reciprocal(1 + torch.exp(-50 * (p - t)))], 1)


class IResBlock(nn.Module):
    """ArcFace's IResNet block: BN, 3x3, BN, PReLU, 3x3 (stride), BN, plus a 1x1 + BN shortcut."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.body = nn.Sequential(nn.BatchNorm2d(cin), nn.Conv2d(cin, cout, 3, 1, 1, bias=False),
                                  nn.BatchNorm2d(cout), nn.PReLU(cout),
                                  nn.Conv2d(cout, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout))
        self.short = conv_bn(cin, cout, 1, stride, act=False)

    def forward(self, x):
        return self.body(x) + self.short(x)


class ArcFace(nn.Module):
    """An IResNet face embedder on 112x112 crops: stem conv + BN + PReLU, IResNet blocks down to
    7x7, BN2d, flatten, Linear to 512, BatchNorm1d, L2-normalised."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.PReLU(32))
        layers, cin = [], 32
        for c in (32, 64, 128, 256):
            layers.append(IResBlock(cin, c, 2))
            cin = c
        self.body = nn.Sequential(*layers)
        self.bn2 = nn.BatchNorm2d(cin)
        self.fc = nn.Linear(cin * 7 * 7, 512)
        self.features = nn.BatchNorm1d(512)

    def forward(self, x):
        x = self.bn2(self.body(self.stem(x)))
        return F.normalize(self.features(self.fc(torch.flatten(x, 1))))


class PNet(nn.Module):
    """MTCNN's proposal net, fully convolutional over a whole image: 3x3 convs with PReLU, a
    ceil-mode 2x2 max pool, a face / not-face softmax over the channels and a box regression;
    output the two concatenated along channels."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 10, 3), nn.PReLU(10), nn.MaxPool2d(2, 2, ceil_mode=True),
                                  nn.Conv2d(10, 16, 3), nn.PReLU(16), nn.Conv2d(16, 32, 3), nn.PReLU(32))
        self.cls, self.box = nn.Conv2d(32, 2, 1), nn.Conv2d(32, 4, 1)

    def forward(self, x):
        f = self.body(x)
        return torch.cat([F.softmax(self.cls(f), dim=1), self.box(f)], 1)


class DCGAN(nn.Module):
    """DCGAN's generator: a 100-d latent as [N, 100, 1, 1], 4x4 ConvTranspose to 4x4, then 4x4
    stride-2 ConvTransposes (BN, ReLU) to 64x64, Tanh."""

    def __init__(self, z=100, g=64):
        super().__init__()
        chans = [z, 8 * g, 4 * g, 2 * g, g]
        layers = [nn.ConvTranspose2d(z, 8 * g, 4, 1, 0, bias=False), nn.BatchNorm2d(8 * g), nn.ReLU()]
        for a, b in zip(chans[1:-1], chans[2:]):
            layers += [nn.ConvTranspose2d(a, b, 4, 2, 1, bias=False), nn.BatchNorm2d(b), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.ConvTranspose2d(g, 3, 4, 2, 1, bias=False), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class AttentionUNet(nn.Module):
    """Attention U-Net (two levels): encoder double convs and max pools, a decoder whose skip
    connections pass attention gates (1x1 of the skip and of the upsampled gating signal, added,
    ReLU, 1x1 to one channel, Sigmoid, multiplied into the skip) before the concat."""

    def __init__(self, c=(16, 32, 64)):
        super().__init__()

        def dconv(a, b):
            return nn.Sequential(conv_bn(a, b), conv_bn(b, b))
        self.enc = nn.ModuleList([dconv(3, c[0]), dconv(c[0], c[1]), dconv(c[1], c[2])])
        self.up = nn.ModuleList([nn.ConvTranspose2d(c[2], c[1], 2, 2), nn.ConvTranspose2d(c[1], c[0], 2, 2)])
        self.wx = nn.ModuleList([nn.Conv2d(c[1], c[1] // 2, 1), nn.Conv2d(c[0], c[0] // 2, 1)])
        self.wg = nn.ModuleList([nn.Conv2d(c[1], c[1] // 2, 1), nn.Conv2d(c[0], c[0] // 2, 1)])
        self.psi = nn.ModuleList([nn.Conv2d(c[1] // 2, 1, 1), nn.Conv2d(c[0] // 2, 1, 1)])
        self.dec = nn.ModuleList([dconv(2 * c[1], c[1]), dconv(2 * c[0], c[0])])
        self.out = nn.Conv2d(c[0], 2, 1)

    def forward(self, x):
        skips = []
        for i, e in enumerate(self.enc):
            x = e(x)
            if i < 2:
                skips.append(x)
                x = F.max_pool2d(x, 2)
        for i in range(2):
            g = self.up[i](x)
            s = skips[1 - i]
            a = torch.sigmoid(self.psi[i](F.relu(self.wx[i](s) + self.wg[i](g))))
            x = self.dec[i](torch.cat([s * a, g], 1))
        return self.out(x)


class FFDNet(nn.Module):
    """FFDNet's denoiser: the image pixel-unshuffled by 2, a constant noise-level map concatenated,
    a conv / BN / ReLU stack, a conv back to 4 x 3 channels, pixel-shuffled, subtracted."""

    def __init__(self, c=64, depth=8, sigma=25 / 255):
        super().__init__()
        self.sigma = sigma
        layers = [nn.Conv2d(13, c, 3, 1, 1), nn.ReLU()]
        for _ in range(depth - 2):
            layers += [nn.Conv2d(c, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.Conv2d(c, 12, 3, 1, 1))

    def forward(self, x):
        d = F.pixel_unshuffle(x, 2)
        noise = torch.full_like(d[:, :1], self.sigma)
        return x - F.pixel_shuffle(self.net(torch.cat([d, noise], 1)), 2)


class TResNetStem(nn.Module):
    """TResNet: a space-to-depth stem written as reshape / permute (4x4 blocks into 48 channels),
    then anti-aliased downsampling blocks (3x3 conv, reflect-padded fixed binomial blur stride 2)
    with LeakyReLU(0.01) as in its in-place ABN."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(48, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32), nn.LeakyReLU(0.01))
        blur = torch.tensor([1.0, 2.0, 1.0])
        blur = (blur[:, None] * blur[None, :] / 16).reshape(1, 1, 3, 3)
        layers, cin = [], 32
        for i, c in enumerate((64, 128, 256)):
            layers.append(nn.Sequential(nn.Conv2d(cin, c, 3, 1, 1, bias=False), nn.BatchNorm2d(c),
                                        nn.LeakyReLU(0.01)))
            self.register_buffer(f"blur{i}", blur.repeat(c, 1, 1, 1))
            cin = c
        self.layers = nn.ModuleList(layers)
        self.fc = nn.Linear(cin, classes)

    def forward(self, x):
        n, c, h, w = x.shape
        x = x.view(n, c, h // 4, 4, w // 4, 4).permute(0, 3, 5, 1, 2, 4).reshape(n, c * 16, h // 4, w // 4)
        x = self.stem(x)
        for i, l in enumerate(self.layers):
            x = l(x)
            k = getattr(self, f"blur{i}")
            x = F.conv2d(F.pad(x, (1, 1, 1, 1), mode="reflect"), k, stride=2, groups=k.shape[0])
        return self.fc(x.mean((2, 3)))


# name: (class, default HxW, input channels, lowest opset)
UNSEEN2 = {"nafnet_like": (unseen_net(NAFBlock), "224x224", 3, 7),
           "restormer_like": (unseen_net(RestormerBlock), "224x224", 3, 7),
           "maxvit_like": (unseen_net(MaxViTBlock, plan=[(32, 1), (64, 2), (128, 2)]), "224x224", 3, 14),
           "swinv2_like": (unseen_net(SwinV2Block, plan=[(32, 1), (64, 2), (128, 2), (256, 2)]),
                           "224x224", 3, 13),
           "levit_like": (LeViT, "224x224", 3, 11),
           "ghostnetv2_like": (unseen_net(GhostV2Block), "224x224", 3, 11),
           "van_like": (unseen_net(VANBlock), "224x224", 3, 7),
           "hornet_like": (unseen_net(HorBlock), "224x224", 3, 7),
           "resnest_like": (unseen_net(ResNeStBlock), "224x224", 3, 7),
           "efficientvit_like": (unseen_net(EfficientViTBlock), "224x224", 3, 11),
           "edsr_like": (EDSR, "96x96", 3, 11),
           "dbnet_like": (DBNet, "256x256", 3, 11),
           "arcface_like": (ArcFace, "112x112", 3, 9),
           "pnet_like": (PNet, "120x160", 3, 7),
           "dcgan_like": (DCGAN, "1x1", 100, 7),
           "attunet_like": (AttentionUNet, "128x128", 3, 7),
           "ffdnet_like": (FFDNet, "128x128", 3, 11),
           "tresnet_like": (TResNetStem, "224x224", 3, 11)}
