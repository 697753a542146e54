"""Rebuild a training checkpoint from a released ONNX file (to fine-tune a released model when its
training checkpoint is gone: checkpoints are not committed, the ONNX is).

    /usr/bin/python3 -m training.from_onnx --onnx models/palm-lines/palm-lines.onnx \\
        --data training/data/train --out training/runs/main/from_onnx.pt

The export folds each BatchNorm into its convolution. The conv weights and biases are read back
in graph order; each BatchNorm is then set, from the statistics of one batch of training data,
so that in training mode it reproduces the folded layer exactly on that batch
(gamma = batch std, beta = batch mean + folded bias) and in eval mode too (running stats = the
same batch stats). The rebuilt net is checked against the ONNX outputs through torch.
"""
import argparse

import numpy as np
import onnx
import torch
from onnx import numpy_helper

from training.export import frame_side_of, input_size_of
from training.model import PalmUNet
from training.train import load_shards, to_tensors


def folded_convs(path):
    m = onnx.load(path)
    init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    convs = []
    for n in m.graph.node:
        if n.op_type == "Conv":
            w = init[n.input[1]]
            b = init[n.input[2]] if len(n.input) > 2 else np.zeros(w.shape[0], np.float32)
            convs.append((w, b))
    return convs


def rebuild(path, x):
    net = PalmUNet()
    convs = [m for m in net.modules() if isinstance(m, torch.nn.Conv2d)]
    bns = [m for m in net.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    folded = folded_convs(path)
    assert len(folded) == len(convs), (len(folded), len(convs))
    biases = []
    for conv, (w, b) in zip(convs, folded):
        assert tuple(conv.weight.shape) == w.shape, (conv, w.shape)
        conv.weight.data = torch.from_numpy(w.copy())
        if conv.bias is not None:
            conv.bias.data = torch.from_numpy(b.copy())
        else:
            biases.append(torch.from_numpy(b.copy()))
    assert len(biases) == len(bns)

    def hook_for(bn, fb):
        def pre(mod, inp):
            z = inp[0]
            mean = z.mean((0, 2, 3))
            std = (z.var((0, 2, 3), unbiased=False) + mod.eps).sqrt()
            mod.weight.data = std.clone()
            mod.bias.data = mean + fb
            mod.running_mean.data = mean.clone()
            mod.running_var.data = std ** 2 - mod.eps
        return bn.register_forward_pre_hook(pre)

    hooks = [hook_for(bn, fb) for bn, fb in zip(bns, biases)]
    net.eval()
    with torch.no_grad():
        net(x)
    for h in hooks:
        h.remove()
    return net


def reference(path, net, x):
    """The folded net (BN as identity + bias), i.e. what the ONNX computes."""
    folded = PalmUNet()
    convs = [m for m in folded.modules() if isinstance(m, torch.nn.Conv2d)]
    bns = [m for m in folded.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    fc = folded_convs(path)
    it = iter(bn for bn in bns)
    for conv, (w, b) in zip(convs, fc):
        conv.weight.data = torch.from_numpy(w.copy())
        if conv.bias is not None:
            conv.bias.data = torch.from_numpy(b.copy())
        else:
            bn = next(it)
            bn.weight.data.fill_(1.0); bn.bias.data = torch.from_numpy(b.copy())
            bn.running_mean.zero_(); bn.running_var.fill_(1.0 - bn.eps)
    folded.eval()
    with torch.no_grad():
        return torch.sigmoid(folded(x)), torch.sigmoid(net.eval()(x))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", default="models/palm-lines/palm-lines.onnx")
    ap.add_argument("--data", default="training/data/train")
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=32)
    a = ap.parse_args()
    torch.set_num_threads(2)
    ims, ms, _ = load_shards(a.data, a.n)
    x, _ = to_tensors(ims, ms)
    net = rebuild(a.onnx, x)
    ref, got = reference(a.onnx, net, x)
    diff = float((ref - got).abs().max())
    print(f"rebuilt from {a.onnx}: max |p_onnx - p_rebuilt| = {diff:.2e} on {len(x)} training samples")
    assert diff < 1e-3
    m = onnx.load(a.onnx)
    torch.save({"model": net.state_dict(), "arch": net.arch, "step": 0, "size": input_size_of(m), "frame": frame_side_of(m),
                "from_onnx": a.onnx}, a.out)
    print("->", a.out)


if __name__ == "__main__":
    main()
