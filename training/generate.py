"""Pre-generate synthetic samples into .npz shards.

    /usr/bin/python3 -m training.generate --out training/data/train --n 8000 --seed 1
Each shard holds `images` (N,256,256,3 uint8 RGB), `masks` (N,256,256 uint8 bitfield: bit0 palm,
bit1 heart, bit2 head, bit3 life), `kinds` (N uint8: 0 scene, 1 crop, 2 negative) and `frame_side` (the palm frame's
side it was drawn at, synth.FRAME_SIDE; a shard without it was drawn at 1.7, before SYNTH_FRAME existed).
Sample i depends only on (seed, i), so output is identical for any --workers.
"""
import argparse
import os
import time
from multiprocessing import Pool

import numpy as np

from training import synth

SHARD = 500


def _make(args):
    seed, start, stop, kind, mix, fades = args
    imgs, masks, kinds = [], [], []
    for i in range(start, stop):
        im, m, k = synth.sample(seed, i, kind, mix, fades=fades)
        imgs.append(im); masks.append(m); kinds.append(k)
    return np.stack(imgs), np.stack(masks), np.array(kinds, np.uint8)


def generate(out, n, seed, workers=2, kind=None, shard=SHARD, mix=synth.DEFAULT_MIX, fades=False):
    os.makedirs(out, exist_ok=True)
    jobs = [(seed, s, min(s + shard, n), kind, tuple(mix), fades) for s in range(0, n, shard)]
    t0 = time.time()
    with Pool(workers) as pool:
        for j, (im, m, k) in enumerate(pool.imap(_make, jobs)):
            tmp = os.path.join(out, f"tmp_{j:04d}.npz")
            np.savez(tmp, images=im, masks=m, kinds=k, frame_side=synth.FRAME_SIDE)
            os.replace(tmp, os.path.join(out, f"shard_{j:04d}.npz"))   # readers never see partial shards
            print(f"shard {j+1}/{len(jobs)} ({jobs[j][2]} samples, {time.time()-t0:.0f}s)", flush=True)
    return time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--n", type=int, default=8000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--kind", type=int, default=None, help="force 0 scene, 1 crop, 2 negative, 3 canonical palm, 4 canonical back of hand")
    ap.add_argument("--shard", type=int, default=SHARD)
    ap.add_argument("--mix", default=",".join(str(v) for v in synth.DEFAULT_MIX),
                    help="shares of scenes,crops,negatives when --kind is not given (default %(default)s)")
    ap.add_argument("--fades", type=int, nargs="?", const=1, default=0, choices=(0, 1, 2, 3),
                    help="1 (or the bare flag): long faint stretches on the principal lines (training sets from 1.4.0 on); "
                         "2: those plus the hard extras of synth.hard_extras (palm-lines 2.1's training sets); "
                         "3: the same draws as 2 with only the head line's parallel crease kept")
    a = ap.parse_args()
    mix = tuple(float(v) for v in a.mix.split(","))
    if len(mix) != 3 or min(mix) < 0 or sum(mix) <= 0:
        ap.error("--mix takes three non-negative shares, e.g. 0.35,0.5,0.15")
    dt = generate(a.out, a.n, a.seed, a.workers, a.kind, a.shard, mix, a.fades)
    print(f"{a.n} samples in {dt:.0f}s -> {a.out}")


if __name__ == "__main__":
    main()
