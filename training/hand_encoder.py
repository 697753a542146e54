"""The hand-landmark network's own convolutions as a torch module, read from the ONNX file that
`scripts/build-dist.mjs --hand-models` converts from the installed `@mediapipe/hands` package
(models/hands/hand_landmark_full.onnx; Apache-2.0). Issue 28, item 1 names its features as a way to
learn from real palms: it was trained on real hands in every light and skin tone. A pretrained part
from an installed package, not weights from git history (item 6).

The graph is a MobileNetV2-like stack of Conv (grouped for depthwise), Clip (ReLU6) and Add, then a
mean-pooled head (ReduceMean, Gemm, Sigmoid). `OnnxConvNet` runs those nodes in the file's order with
the file's weights as trainable parameters; `taps()` names the end of each resolution's last block,
the features a decoder can take.

    /usr/bin/python3 -m training.hand_encoder --check   # torch against onnxruntime on one input
"""
import argparse
import json
import os
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper, shape_inference

HAND_ONNX = os.path.join(os.path.dirname(__file__), "..", "models", "hands", "hand_landmark_full.onnx")


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


class OnnxConvNet(nn.Module):
    """The nodes of `path` up to (and including) those that make `outputs`, as torch operations.
    forward(x) returns the tensors named in `outputs`, in that order."""

    def __init__(self, path=HAND_ONNX, outputs=None):
        super().__init__()
        m = onnx.load(path)
        consts = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
        for n in m.graph.node:   # Constant nodes (a Clip's bounds in some exports) count as initialisers
            if n.op_type == "Constant":
                consts[n.output[0]] = numpy_helper.to_array(_attrs(n)["value"])
        self.input_name = m.graph.input[0].name
        self.outputs = list(outputs or [o.name for o in m.graph.output])
        needed, nodes = set(self.outputs), []
        for n in reversed(m.graph.node):   # only the nodes the outputs depend on
            if any(o in needed for o in n.output) and n.op_type != "Constant":
                nodes.append(n)
                needed.update(i for i in n.input if i and i not in consts)
        nodes.reverse()
        self.convs = nn.ModuleDict()
        self.gemms = nn.ModuleDict()
        self.ops = []
        for k, n in enumerate(nodes):
            a = _attrs(n)
            if n.op_type == "Conv":
                w = consts[n.input[1]]
                b = consts[n.input[2]] if len(n.input) > 2 and n.input[2] else None
                conv = nn.Conv2d(w.shape[1] * a.get("group", 1), w.shape[0], w.shape[2:], stride=a.get("strides", [1, 1]),
                                 dilation=a.get("dilations", [1, 1]), groups=a.get("group", 1), bias=b is not None)
                conv.weight.data = torch.from_numpy(w.copy())
                if b is not None:
                    conv.bias.data = torch.from_numpy(b.copy())
                self.convs[str(k)] = conv
                p = a.get("pads", [0, 0, 0, 0])   # ONNX: top, left, bottom, right; F.pad: left, right, top, bottom
                self.ops.append(("conv", str(k), (p[1], p[3], p[0], p[2]), n.input[0], n.output[0]))
            elif n.op_type == "Clip":
                lo = float(consts[n.input[1]]) if len(n.input) > 1 and n.input[1] else a.get("min", -np.inf)
                hi = float(consts[n.input[2]]) if len(n.input) > 2 and n.input[2] else a.get("max", np.inf)
                self.ops.append(("clip", (lo, hi), None, n.input[0], n.output[0]))
            elif n.op_type == "Add":
                self.ops.append(("add", None, None, tuple(n.input), n.output[0]))
            elif n.op_type == "ReduceMean":
                self.ops.append(("mean", tuple(a.get("axes", [2, 3])), a.get("keepdims", 1), n.input[0], n.output[0]))
            elif n.op_type == "Gemm":
                w = consts[n.input[1]]
                if not a.get("transB", 0):
                    w = w.T
                lin = nn.Linear(w.shape[1], w.shape[0], bias=len(n.input) > 2)
                lin.weight.data = torch.from_numpy(np.ascontiguousarray(w) * a.get("alpha", 1.0))
                if len(n.input) > 2:
                    lin.bias.data = torch.from_numpy(consts[n.input[2]].reshape(-1) * a.get("beta", 1.0))
                self.gemms[str(k)] = lin
                self.ops.append(("gemm", str(k), None, n.input[0], n.output[0]))
            elif n.op_type in ("Sigmoid", "Identity"):
                self.ops.append((n.op_type.lower(), None, None, n.input[0], n.output[0]))
            else:
                raise ValueError(f"hand_encoder: no torch form for {n.op_type} ({n.name})")

    def forward(self, x):
        t = {self.input_name: x}
        for op, key, extra, src, dst in self.ops:
            if op == "conv":
                y = t[src]
                if any(extra):
                    y = F.pad(y, extra)
                t[dst] = self.convs[key](y)
            elif op == "clip":
                t[dst] = torch.clamp(t[src], *key)
            elif op == "add":
                t[dst] = t[src[0]] + t[src[1]]
            elif op == "mean":
                t[dst] = t[src].mean(dim=key, keepdim=bool(extra))
            elif op == "gemm":
                t[dst] = self.gemms[key](t[src].flatten(1))
            elif op == "sigmoid":
                t[dst] = torch.sigmoid(t[src])
            else:
                t[dst] = t[src]
        return [t[o] for o in self.outputs]


def taps(path=HAND_ONNX, max_stride=16, size=224):
    """[(name, channels, stride)]: for each resolution down to 1/max_stride, the last tensor made by an Add
    or by a 1x1 Conv whose output is not clipped (a block's projection): a block's end, not its expansion."""
    m = shape_inference.infer_shapes(onnx.load(path))
    shapes = {v.name: [d.dim_value for d in v.type.tensor_type.shape.dim] for v in m.graph.value_info}
    clipped = {n.input[0] for n in m.graph.node if n.op_type == "Clip"}
    init = {t.name: list(t.dims) for t in m.graph.initializer}
    last = {}
    for n in m.graph.node:
        o = n.output[0]
        if o not in shapes or len(shapes[o]) != 4:
            continue
        end = n.op_type == "Add" or (n.op_type == "Conv" and init[n.input[1]][2:] == [1, 1] and o not in clipped)
        stride = size // shapes[o][2]
        if end and stride <= max_stride:
            last[stride] = (o, shapes[o][1], stride)
    return [last[s] for s in sorted(last)]


def check(path=HAND_ONNX):
    """The torch form's outputs against onnxruntime's (through onnxruntime-node: no Python build here) on a
    random input; the largest difference per output."""
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (1, 3, 224, 224)).astype(np.float32)
    net = OnnxConvNet(path).eval()
    with torch.no_grad():
        ours = [o.numpy() for o in net(torch.from_numpy(x))]
    script = ("const ort=require('onnxruntime-node');const fs=require('fs');(async()=>{"
              "const s=await ort.InferenceSession.create(process.argv[1]);"
              "const x=new Float32Array(fs.readFileSync(process.argv[2]).buffer.slice(0));"
              "const r=await s.run({[s.inputNames[0]]:new ort.Tensor('float32',x,[1,3,224,224])});"
              "const o={};for(const k of s.outputNames)o[k]=Array.from(r[k].data);console.log(JSON.stringify(o));})();")
    tmp = "/tmp/hand_encoder_check.bin"
    x.tofile(tmp)
    out = subprocess.run(["node", "-e", script, os.path.abspath(path), tmp], capture_output=True, text=True, check=True,
                         cwd=os.path.join(os.path.dirname(__file__), ".."))
    ref = json.loads(out.stdout)
    worst = {}
    for name, mine in zip(net.outputs, ours):
        worst[name] = float(np.max(np.abs(mine.reshape(-1) - np.asarray(ref[name], np.float32))))
    return worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--onnx", default=HAND_ONNX)
    ap.add_argument("--check", action="store_true")
    a = ap.parse_args()
    for name, ch, stride in taps(a.onnx):
        print(f"tap {name}: {ch} channels at 1/{stride}")
    if a.check:
        worst = check(a.onnx)
        print(json.dumps(worst))
        sys.exit(0 if max(worst.values()) < 1e-3 else 1)


if __name__ == "__main__":
    main()
