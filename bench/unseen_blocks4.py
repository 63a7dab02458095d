# Sixth batch of unseen CNN families (session 41; bench/export_arch.py exports them by name):
# networks built on factorised (1 x k / k x 1) and 1-D convolutions, the shapes the winograd1d
# conv family takes: ERFNet's non-bottleneck-1D blocks, Inception-v4's 1x7 / 7x1 and 1x3 / 3x1
# branches, a dilated TCN and a Wav2Letter-style 1-D speech net. Written from the papers, random
# weights.
import torch
import torch.nn as nn
import torch.nn.functional as F


class NonBottleneck1d(nn.Module):
    """ERFNet's block: 3x1, ReLU, 1x3, BN, ReLU, 3x1 dilated, ReLU, 1x3 dilated, BN, + input."""

    def __init__(self, c, d):
        super().__init__()
        self.a = nn.Conv2d(c, c, (3, 1), padding=(1, 0))
        self.b = nn.Conv2d(c, c, (1, 3), padding=(0, 1))
        self.bn1 = nn.BatchNorm2d(c)
        self.c = nn.Conv2d(c, c, (3, 1), padding=(d, 0), dilation=(d, 1))
        self.d = nn.Conv2d(c, c, (1, 3), padding=(0, d), dilation=(1, d))
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        y = F.relu(self.bn1(self.b(F.relu(self.a(x)))))
        y = self.bn2(self.d(F.relu(self.c(y))))
        return F.relu(y + x)


class Downsampler(nn.Module):
    """ERFNet's: a 3x3 stride-2 conv and a max pool, concatenated."""

    def __init__(self, cin, cout):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout - cin, 3, 2, 1)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return F.relu(self.bn(torch.cat([self.conv(x), F.max_pool2d(x, 2)], 1)))


class ErfNet(nn.Module):
    """ERFNet (Romera et al. 2017) encoder-decoder for segmentation, 20 classes."""

    def __init__(self, classes=20):
        super().__init__()
        layers = [Downsampler(3, 16), Downsampler(16, 64)]
        layers += [NonBottleneck1d(64, 1) for _ in range(5)]
        layers += [Downsampler(64, 128)]
        layers += [NonBottleneck1d(128, d) for d in (2, 4, 8, 16, 2, 4, 8, 16)]
        layers += [nn.ConvTranspose2d(128, 64, 3, 2, 1, output_padding=1), nn.BatchNorm2d(64),
                   nn.ReLU(), NonBottleneck1d(64, 1), NonBottleneck1d(64, 1),
                   nn.ConvTranspose2d(64, 16, 3, 2, 1, output_padding=1), nn.BatchNorm2d(16),
                   nn.ReLU(), NonBottleneck1d(16, 1), NonBottleneck1d(16, 1),
                   nn.ConvTranspose2d(16, classes, 2, 2)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


def cbr(cin, cout, k, p=0, s=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, p, bias=False), nn.BatchNorm2d(cout),
                         nn.ReLU())


class InceptionB4(nn.Module):
    """Inception-v4's Inception-B block (17x17): 1x1; 1x1 -> 1x7 -> 7x1; 1x1 -> 7x1 -> 1x7 ->
    7x1 -> 1x7; avg pool -> 1x1."""

    def __init__(self, c):
        super().__init__()
        self.b0 = cbr(c, 384, 1)
        self.b1 = nn.Sequential(cbr(c, 192, 1), cbr(192, 224, (1, 7), (0, 3)),
                                cbr(224, 256, (7, 1), (3, 0)))
        self.b2 = nn.Sequential(cbr(c, 192, 1), cbr(192, 192, (7, 1), (3, 0)),
                                cbr(192, 224, (1, 7), (0, 3)), cbr(224, 224, (7, 1), (3, 0)),
                                cbr(224, 256, (1, 7), (0, 3)))
        self.b3 = nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False), cbr(c, 128, 1))

    def forward(self, x):
        return torch.cat([self.b0(x), self.b1(x), self.b2(x), self.b3(x)], 1)


class InceptionC4(nn.Module):
    """Inception-v4's Inception-C block (8x8): 1x3 / 3x1 pairs split from shared 1x1s."""

    def __init__(self, c):
        super().__init__()
        self.b0 = cbr(c, 256, 1)
        self.b1 = cbr(c, 384, 1)
        self.b1a, self.b1b = cbr(384, 256, (1, 3), (0, 1)), cbr(384, 256, (3, 1), (1, 0))
        self.b2 = nn.Sequential(cbr(c, 384, 1), cbr(384, 448, (3, 1), (1, 0)),
                                cbr(448, 512, (1, 3), (0, 1)))
        self.b2a, self.b2b = cbr(512, 256, (1, 3), (0, 1)), cbr(512, 256, (3, 1), (1, 0))
        self.b3 = nn.Sequential(nn.AvgPool2d(3, 1, 1, count_include_pad=False), cbr(c, 256, 1))

    def forward(self, x):
        y1, y2 = self.b1(x), self.b2(x)
        return torch.cat([self.b0(x), self.b1a(y1), self.b1b(y1), self.b2a(y2), self.b2b(y2),
                          self.b3(x)], 1)


class InceptionV4(nn.Module):
    """An Inception-v4-like classifier: a strided stem to 17x17 (input 299), two B blocks, a
    reduction (3x3 stride 2 and a max pool), two C blocks, pool, classifier."""

    def __init__(self, classes=1000):
        super().__init__()
        self.stem = nn.Sequential(cbr(3, 32, 3, 0, 2), cbr(32, 64, 3, 1), nn.MaxPool2d(3, 2),
                                  cbr(64, 192, 3, 0, 2), nn.MaxPool2d(3, 2), cbr(192, 1024, 1))
        self.b = nn.Sequential(InceptionB4(1024), InceptionB4(1024))
        self.red = cbr(1024, 1536, 3, 0, 2)
        self.c = nn.Sequential(InceptionC4(1536), InceptionC4(1536))
        self.fc = nn.Linear(1536, classes)

    def forward(self, x):
        x = self.red(self.b(self.stem(x)))
        return self.fc(self.c(x).mean((2, 3)))


class Tcn(nn.Module):
    """A temporal convolutional network (Bai et al. 2018): residual blocks of two dilated
    causal Conv1d (kernel 3, left padding by Pad, dilations 1 .. 128) with ReLU, 1x1 skip
    where the width changes, a classifier on the last step."""

    def __init__(self, cin=16, width=128, levels=8, classes=10):
        super().__init__()
        self.convs = nn.ModuleList()
        self.skips = nn.ModuleList()
        c = cin
        for i in range(levels):
            self.convs.append(nn.ModuleList([nn.Conv1d(c, width, 3, dilation=2 ** i),
                                             nn.Conv1d(width, width, 3, dilation=2 ** i)]))
            self.skips.append(nn.Conv1d(c, width, 1) if c != width else nn.Identity())
            c = width
        self.fc = nn.Linear(width, classes)

    def forward(self, x):
        for i, (convs, skip) in enumerate(zip(self.convs, self.skips)):
            y = x
            for conv in convs:
                y = F.relu(conv(F.pad(y, (2 * 2 ** i, 0))))
            x = F.relu(y + skip(x))
        return self.fc(x[:, :, -1])


class Wav2Letter(nn.Module):
    """Wav2Letter-style acoustic model on 40 MFCC channels: a strided kernel-11 conv, seven
    kernel-7 convs of 250 channels, a kernel-31 and two 1x1 convs to 29 characters."""

    def __init__(self, cin=40, classes=29):
        super().__init__()
        layers = [nn.Conv1d(cin, 250, 11, 2, 5), nn.ReLU()]
        for _ in range(7):
            layers += [nn.Conv1d(250, 250, 7, padding=3), nn.ReLU()]
        layers += [nn.Conv1d(250, 2000, 31, padding=15), nn.ReLU(), nn.Conv1d(2000, 2000, 1),
                   nn.ReLU(), nn.Conv1d(2000, classes, 1)]
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


# name: (class, default size (HxW / L), input channels, lowest opset)
UNSEEN4 = {"erfnet_like": (ErfNet, "256x512", 3, 11),
           "inceptionv4_like": (InceptionV4, "299x299", 3, 11),
           "tcn_like": (Tcn, "2048", 16, 11),
           "wav2letter_like": (Wav2Letter, "800", 40, 11)}
