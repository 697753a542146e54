"""Compact U-Net with four independent sigmoid outputs: palm, heart, head, life."""
import sys
import torch
import torch.nn as nn
import torch.nn.functional as F


def cbr(cin, cout, dilation=1):
    return [nn.Conv2d(cin, cout, 3, padding=dilation, dilation=dilation, bias=False),
            nn.BatchNorm2d(cout), nn.ReLU(inplace=True)]


# The released network's channels; arch_at scales them for a narrower one (train.py --width).
BASE_ARCH = dict(enc=(16, 32, 64, 128), bottleneck=192, dec=(96, 64, 24, 16))


def arch_at(width):
    """PalmUNet's arguments with every layer's channels times `width` (at least 4); 1 is BASE_ARCH."""
    scale = lambda c: max(4, int(round(c * width)))  # noqa: E731
    return dict(enc=tuple(map(scale, BASE_ARCH["enc"])), bottleneck=scale(BASE_ARCH["bottleneck"]),
                dec=tuple(map(scale, BASE_ARCH["dec"])))


def net_of(ckpt):
    """A network shaped as the checkpoint dict's `arch` (the released one where it has none), its weights not loaded."""
    arch = dict(ckpt.get("arch", {}))
    return HandUNet(**arch) if arch.pop("kind", None) == "hand" else PalmUNet(**arch)


# HandUNet's pretrained encoder learns at this share of the schedule's rate: its features are what it brings.
TRUNK_LR_SCALE = 0.1


def param_groups(net, lr):
    """The optimiser's groups: every parameter at `lr`, but a HandUNet's pretrained encoder at TRUNK_LR_SCALE of
    it. A group's `scale` is what train.py and train_real.py multiply their schedule's rate by."""
    trunk = list(net.trunk.parameters()) if isinstance(net, HandUNet) else []
    ids = {id(p) for p in trunk}
    rest = [p for p in net.parameters() if id(p) not in ids]
    groups = [{"params": rest, "lr": lr, "scale": 1.0}]
    if trunk:
        groups.append({"params": trunk, "lr": lr * TRUNK_LR_SCALE, "scale": TRUNK_LR_SCALE})
    return groups


class PalmUNet(nn.Module):
    """Encoder 16-32-64-128, bottleneck 192 (one dilated conv for context) at 1/16 resolution,
    light decoder (one conv per level, two at full resolution) to keep CPU cost low."""

    def __init__(self, enc=(16, 32, 64, 128), bottleneck=192, dec=(96, 64, 24, 16), out_ch=4):
        super().__init__()
        c0, c1, c2, c3 = enc
        d3, d2, d1, d0 = dec
        self.arch = dict(enc=tuple(enc), bottleneck=bottleneck, dec=tuple(dec), out_ch=out_ch)
        self.e0 = nn.Sequential(*cbr(3, c0))
        self.e1 = nn.Sequential(*cbr(c0, c1), *cbr(c1, c1))
        self.e2 = nn.Sequential(*cbr(c1, c2), *cbr(c2, c2))
        self.e3 = nn.Sequential(*cbr(c2, c3), *cbr(c3, c3))
        self.b = nn.Sequential(*cbr(c3, bottleneck), *cbr(bottleneck, bottleneck, 2))
        self.d3 = nn.Sequential(*cbr(bottleneck + c3, d3))
        self.d2 = nn.Sequential(*cbr(d3 + c2, d2))
        self.d1 = nn.Sequential(*cbr(d2 + c1, d1))
        self.d0 = nn.Sequential(*cbr(d1 + c0, d0), *cbr(d0, d0))
        self.head = nn.Conv2d(d0, out_ch, 1)

    @staticmethod
    def up(x, ref):
        return F.interpolate(x, size=ref.shape[-2:], mode="bilinear", align_corners=False)

    def forward(self, x):
        x0 = self.e0(x)
        x1 = self.e1(F.max_pool2d(x0, 2))
        x2 = self.e2(F.max_pool2d(x1, 2))
        x3 = self.e3(F.max_pool2d(x2, 2))
        b = self.b(F.max_pool2d(x3, 2))
        y = self.d3(torch.cat([self.up(b, x3), x3], 1))
        y = self.d2(torch.cat([self.up(y, x2), x2], 1))
        y = self.d1(torch.cat([self.up(y, x1), x1], 1))
        y = self.d0(torch.cat([self.up(y, x0), x0], 1))
        return self.head(y)          # logits


class HandUNet(nn.Module):
    """PalmUNet's decoder over the hand-landmark network's own blocks (training/hand_encoder.py: MediaPipe's
    model from the installed package, trained on real hands) to 1/16 as its encoder, and one full-resolution
    layer of its own for the finest creases. The encoder's weights start as the package's; a checkpoint's
    replace them."""

    def __init__(self, stem=16, dec=(96, 64, 24, 16), out_ch=4):
        super().__init__()
        from training.hand_encoder import OnnxConvNet, taps
        t = taps()
        if [s for _, _, s in t] != [2, 4, 8, 16]:
            raise ValueError(f"HandUNet: the hand model's blocks end at strides {[s for _, _, s in t]}, not 2/4/8/16")
        c1, c2, c3, c4 = (c for _, c, _ in t)
        d3, d2, d1, d0 = dec
        self.arch = dict(kind="hand", stem=stem, dec=tuple(dec), out_ch=out_ch)
        self.trunk = OnnxConvNet(outputs=[n for n, _, _ in t])
        self.e0 = nn.Sequential(*cbr(3, stem))
        self.d3 = nn.Sequential(*cbr(c4 + c3, d3))
        self.d2 = nn.Sequential(*cbr(d3 + c2, d2))
        self.d1 = nn.Sequential(*cbr(d2 + c1, d1))
        self.d0 = nn.Sequential(*cbr(d1 + stem, d0), *cbr(d0, d0))
        self.head = nn.Conv2d(d0, out_ch, 1)

    def forward(self, x):
        f1, f2, f3, f4 = self.trunk(x)
        x0 = self.e0(x)
        y = self.d3(torch.cat([PalmUNet.up(f4, f3), f3], 1))
        y = self.d2(torch.cat([PalmUNet.up(y, f2), f2], 1))
        y = self.d1(torch.cat([PalmUNet.up(y, f1), f1], 1))
        y = self.d0(torch.cat([PalmUNet.up(y, x0), x0], 1))
        return self.head(y)          # logits


class WithSigmoid(nn.Module):
    def __init__(self, net):
        super().__init__()
        self.net = net

    def forward(self, image):
        return torch.sigmoid(self.net(image))


POS_WEIGHT = (1.0, 5.0, 5.0, 5.0)
DICE_WEIGHT = (0.5, 1.0, 1.0, 1.0)


def loss_fn(logits, target):
    """BCE (positive-weighted for thin lines) + soft Dice per channel over the batch."""
    pw = torch.tensor(POS_WEIGHT, device=logits.device).view(1, -1, 1, 1)
    bce = F.binary_cross_entropy_with_logits(logits, target, pos_weight=pw)
    p = torch.sigmoid(logits)
    inter = (p * target).sum((0, 2, 3))
    den = p.sum((0, 2, 3)) + target.sum((0, 2, 3))
    dice = 1 - (2 * inter + 1) / (den + 1)
    dw = torch.tensor(DICE_WEIGHT, device=logits.device)
    return bce + (dice * dw).sum() / dw.sum(), dice.detach()


def add_bf16_option(ap):
    """--bf16, as train.py and train_real.py take it."""
    ap.add_argument("--bf16", action="store_true",
                    help="the forward pass in bfloat16 (model.logits_of; weights, loss and optimiser float32): "
                         "a recipe step about 0.6-0.7x float32's on a CPU with AMX (docs/decisions/bf16-training.md)")


def native_bf16(cpuinfo="/proc/cpuinfo"):
    """Whether this CPU computes in bfloat16 itself (avx512_bf16 or amx_bf16): without either, oneDNN emulates
    it and a HandUNet step took 11x float32's (docs/decisions/bf16-training.md; test/unit/training/bf16-warning.spec.ts)."""
    try:
        with open(cpuinfo) as f:
            flags = f.read().split()
    except OSError:
        return True  # not Linux: nothing to read, nothing to warn about
    return "avx512_bf16" in flags or "amx_bf16" in flags


def bf16_layout(net, bf16, device="cpu", channels_last=False):
    """The network laid out for logits_of: channels-last with bf16 or channels_last (step_cost's float32 "cl"
    configuration; weights loaded later are copied into these strides), as it is otherwise. Warns when bf16 is
    asked of a CPU that would emulate it."""
    if bf16 and device == "cpu" and not native_bf16():
        print("--bf16: this CPU has no native bfloat16 (no avx512_bf16 or amx_bf16 in /proc/cpuinfo); a step may "
              "take many times a float32 step here (docs/decisions/bf16-training.md)", file=sys.stderr, flush=True)
    return net.to(memory_format=torch.channels_last) if bf16 or channels_last else net


def logits_of(net, x, bf16=False, channels_last=False):
    """The network's float32 logits for x; with bf16 (train.py/train_real.py --bf16) the forward pass runs in
    bfloat16 (autocast, channels-last tensors: oneDNN's fast path on this CPU) while the weights, the loss and
    the optimiser stay float32; with channels_last alone, float32 in channels-last tensors (training.step_cost
    only: not worth a training option, docs/decisions/bf16-training.md). Measured: the same file."""
    if bf16 or channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    if not bf16:
        return net(x)
    with torch.autocast(x.device.type, dtype=torch.bfloat16):
        return net(x).float()


def count_params(m):
    return sum(p.numel() for p in m.parameters())
