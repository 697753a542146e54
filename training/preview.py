"""Preview predictions on held-out synthetic samples: image | GT overlay | prediction overlay.
    /usr/bin/python3 -m training.preview --ckpt training/runs/main/last.pt --data training/data/test_crop --out /tmp/pred.png
"""
import argparse

import cv2
import numpy as np
import torch

from training import export as exp
from training.contact import overlay
from training.train import load_shards, to_tensors


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--data", default="training/data/test_crop")
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--thr", type=float, default=0.5)
    ap.add_argument("--out", default="/tmp/pred.png")
    a = ap.parse_args()
    torch.set_num_threads(2)
    net = exp.load_net(a.ckpt)
    ims, ms, _ = load_shards(a.data, a.n)
    x, _ = to_tensors(ims, ms)
    with torch.no_grad():
        p = torch.sigmoid(net(x)).numpy()
    rows = []
    for i in range(len(ims)):
        pm = sum(((p[i, c] > a.thr).astype(np.uint8) << c) for c in range(4)).astype(np.uint8)
        heat = (np.clip(p[i, 1:4].transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8)
        rows.append(np.hstack([ims[i], overlay(ims[i], ms[i]), overlay(ims[i], pm), heat]))
    cv2.imwrite(a.out, cv2.cvtColor(np.vstack(rows), cv2.COLOR_RGB2BGR))
    print(a.out)


if __name__ == "__main__":
    main()
