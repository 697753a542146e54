"""Contact sheet of synthetic samples with mask overlays: python -m training.contact --out /tmp/sheet.png"""
import argparse
import time

import cv2
import numpy as np

from training import synth


def overlay(img, mask):
    m = synth.unpack(mask)
    o = img.copy()
    edge = m[0] - cv2.erode(m[0], np.ones((3, 3), np.uint8))
    o[edge > 0] = (255, 255, 0)
    for ch, col in ((1, (255, 0, 0)), (2, (0, 0, 255)), (3, (0, 255, 0))):
        o[m[ch] > 0] = col
    return o


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/sheet.png")
    ap.add_argument("--seed", type=int, default=123)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--kind", type=int, default=None)
    ap.add_argument("--masks", action="store_true")
    a = ap.parse_args()
    t = time.time()
    tiles = []
    for i in range(a.n):
        img, mask, kind = synth.sample(a.seed, i, a.kind)
        tiles.append(np.hstack([img, overlay(img, mask)]) if a.masks else img)
    dt = (time.time() - t) / a.n
    cols = 4 if a.masks else 6
    while len(tiles) % cols:
        tiles.append(np.zeros_like(tiles[0]))
    rows = [np.hstack(tiles[i:i + cols]) for i in range(0, len(tiles), cols)]
    cv2.imwrite(a.out, cv2.cvtColor(np.vstack(rows), cv2.COLOR_RGB2BGR))
    print(f"{dt*1000:.1f} ms/sample -> {a.out}")


if __name__ == "__main__":
    main()
