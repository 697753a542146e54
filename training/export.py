"""Export a checkpoint to ONNX with the metadata contract, check it and verify it numerically
against torch through onnxruntime-node.

    /usr/bin/python3 -m training.export --ckpt training/runs/main/last.pt \\
        --out models/palm-lines/palm-lines.onnx [--calib models/palm-lines/calibration.json]
"""
import argparse
import json
import os
import subprocess
import tempfile

import numpy as np
import onnx
import torch

from training.model import WithSigmoid, net_of
from training import synth
from training.synth import DEFAULT_FRAME_SIDE

MODEL_NAME = "palm-lines"
MODEL_VERSION = "2.0.0"
DEFAULT_CALIB = {
    "thresholds": {"palm": 0.5, "heart": 0.5, "head": 0.5, "life": 0.5},
    "detection": {"min_pixels": 40, "min_confidence": 0.6},
    "crop": {"margin": 0.15},
}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def load_calib(path):
    c = json.loads(json.dumps(DEFAULT_CALIB))
    if path and os.path.exists(path):
        with open(path) as f:
            c.update(json.load(f))
    return c


def metadata(calib, size=256, frame=DEFAULT_FRAME_SIDE):
    return {
        "model_name": MODEL_NAME,
        "model_version": MODEL_VERSION,
        "input_size": str(size),
        "channel_order": "RGB",
        "normalization": json.dumps({"scale": 255, "mean": [0, 0, 0], "std": [1, 1, 1]}),
        "letterbox": "center,pad=0",
        "output_names": "palm,heart,head,life",
        "thresholds": json.dumps(calib["thresholds"]),
        "detection": json.dumps(calib["detection"]),
        "crop": json.dumps(calib["crop"]),
        **({"grow": json.dumps(calib["grow"])} if "grow" in calib else {}),
        # Named only where it is not the engine's default, so that a 1.7 file's metadata is as before.
        **({"frame_side": str(frame)} if frame != DEFAULT_FRAME_SIDE else {}),
    }


def load_net(ckpt):
    sd = torch.load(ckpt, map_location="cpu")
    net = net_of(sd)
    net.load_state_dict(sd["model"])
    net.view_size = sd.get("size", 256)
    net.frame_side = frame_of(sd)
    return net.eval()


def frame_of(sd):
    """The frame side a checkpoint was trained at (its "frame"; 1.7 before SYNTH_FRAME existed)."""
    return sd.get("frame", DEFAULT_FRAME_SIDE)


def check_frame(sd, what):
    """A checkpoint trained at another frame side than this run's (SYNTH_FRAME) cannot go on in it."""
    synth.check_frame(frame_of(sd), f"{what} was trained")


def view_size(net):
    """The side of the views `net` learned from (train.py and train_real.py set it; 256 before them):
    the exported file's input_size, which the engine renders its palm view at."""
    return getattr(net, "view_size", 256)


def export_onnx(net, out, calib=None, opset=13):
    calib = calib or load_calib(None)
    net = net.eval()
    wrapper = WithSigmoid(net).eval()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    tmp = out + ".tmp"
    with torch.no_grad():
        # The example input on the net's own device: a net training on a GPU exports from there.
        side = view_size(net)
        example = torch.zeros(1, 3, side, side, device=next(net.parameters()).device)
        torch.onnx.export(wrapper, example, tmp, input_names=["image"],
                          output_names=["probs"], dynamic_axes={"image": {0: "N"}, "probs": {0: "N"}},
                          opset_version=opset, do_constant_folding=True)
    m = onnx.load(tmp)
    m.producer_name = "palm-lines-training"
    return save_with_metadata(m, out, calib, side, getattr(net, "frame_side", DEFAULT_FRAME_SIDE))


def save_with_metadata(m, out, calib, size=256, frame=DEFAULT_FRAME_SIDE):
    """Replace the model's metadata_props with the contract's (metadata(calib, size, frame)), check the model
    and write it to `out` atomically: readers never see a half-written model."""
    del m.metadata_props[:]
    for k, v in metadata(calib, size, frame).items():
        e = m.metadata_props.add()
        e.key, e.value = k, v
    onnx.checker.check_model(m)
    tmp = out + ".tmp"
    onnx.save(m, tmp)
    os.replace(tmp, out)
    return out


def restamp(src, out, calib):
    """A released file with new calibration metadata (and MODEL_VERSION): the graph and weights
    are copied unchanged, only metadata_props are replaced."""
    m = onnx.load(src)
    return save_with_metadata(m, out, calib, input_size_of(m), frame_side_of(m))


def input_size_of(m):
    """The view side a loaded ONNX model's metadata names (256 where it names none)."""
    return int({p.key: p.value for p in m.metadata_props}.get("input_size", "256"))


def frame_side_of(m):
    """The frame side a loaded ONNX model's metadata names (1.7 where it names none)."""
    return float({p.key: p.value for p in m.metadata_props}.get("frame_side", DEFAULT_FRAME_SIDE))


def verify(net, path, n=2, seed=0):
    """Compare torch and onnxruntime-node outputs on random + structured inputs."""
    g = torch.Generator().manual_seed(seed)
    side = view_size(net)
    x = torch.rand(n, 3, side, side, generator=g)
    x[:, :, :40] = 0           # letterbox band
    with torch.no_grad():
        ref = torch.sigmoid(net.eval()(x)).numpy()
    with tempfile.TemporaryDirectory() as d:
        xi, yo = os.path.join(d, "x.bin"), os.path.join(d, "y.bin")
        x.numpy().astype(np.float32).tofile(xi)
        r = subprocess.run(["node", os.path.join(REPO, "training", "verify_onnx.mjs"), os.path.abspath(path), xi, str(n), yo],
                           cwd=REPO, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError("onnxruntime-node check failed: " + r.stderr[-2000:])
        info = json.loads(r.stdout.strip().splitlines()[-1])
        y = np.fromfile(yo, np.float32).reshape(ref.shape)
    diff = float(np.abs(y - ref).max())
    info["max_abs_diff"] = diff
    if diff > 1e-3:
        raise RuntimeError(f"onnx/torch mismatch {diff}")
    return info


def main():
    global MODEL_VERSION
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", default=None)
    ap.add_argument("--out", default="models/palm-lines/palm-lines.onnx")
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    ap.add_argument("--restamp", default=None, metavar="ONNX",
                    help="instead of exporting --ckpt, copy this ONNX file with the --calib metadata (weights unchanged)")
    ap.add_argument("--no-verify", action="store_true")
    ap.add_argument("--version", default=MODEL_VERSION, help="model_version in the metadata (default %(default)s)")
    a = ap.parse_args()
    MODEL_VERSION = a.version
    if a.restamp:
        restamp(a.restamp, a.out, load_calib(a.calib))
        print({p.key: p.value for p in onnx.load(a.out).metadata_props})
        return
    if not a.ckpt:
        ap.error("--ckpt is required unless --restamp is given")
    torch.set_num_threads(2)
    net = load_net(a.ckpt)
    export_onnx(net, a.out, load_calib(a.calib))
    m = onnx.load(a.out)
    print({p.key: p.value for p in m.metadata_props})
    print(f"opset {m.opset_import[0].version}, {os.path.getsize(a.out)/1e6:.2f} MB")
    if not a.no_verify:
        print("onnxruntime-node:", verify(net, a.out))


if __name__ == "__main__":
    main()
