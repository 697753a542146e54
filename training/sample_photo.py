"""Render the README's sample photo: a synthetic palm from the generator (synth.hand_photo).

    SYNTH_OUT=1024 /usr/bin/python3 -m training.sample_photo --seed 7 --index 0 --out examples/sample-palm.jpg

The generator draws at SYNTH_OUT x SYNTH_OUT; the photo is a 3:4 portrait view of one whole hand,
upright within 15 degrees, cut from the letterboxed scene without its bands.
"""
import argparse

import cv2
import numpy as np

from training import synth


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--index", type=int, default=0)
    ap.add_argument("--out", required=True)
    ap.add_argument("--quality", type=int, default=90)
    a = ap.parse_args()
    img, _ = synth.hand_photo(np.random.default_rng([a.seed, a.index]))
    cv2.imwrite(a.out, cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, a.quality])
    print(f"{img.shape[1]}x{img.shape[0]} -> {a.out}")


if __name__ == "__main__":
    main()
