"""The box set's training views (box_views.ts: images.bin + meta.json) as one file of JPEGs, for a
machine that has no ../shared and no Node.js (a lent GPU): about 21 MB at quality 98 instead of 153,
a mean difference of 0.7 of 255 per channel (models/palm-lines/FROM-NOTHING.md, "The third from-nothing run").
The file holds views of the photos, so it is written outside the repository's tracked files
(training/data/ or a git-ignored folder) and never committed.

    /usr/bin/python3 -m training.views_pack pack training/data/boxes_train OUT.npz
    python3 -m training.views_pack unpack OUT.npz training/data/boxes_train
"""
import argparse
import json
import os

import cv2
import numpy as np

QUALITY = 98


def pack(src, out):
    meta = json.load(open(os.path.join(src, "meta.json")))
    size = meta["size"]
    imgs = np.fromfile(os.path.join(src, "images.bin"), np.uint8).reshape(-1, size, size, 3)
    enc = [cv2.imencode(".jpg", cv2.cvtColor(im, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, QUALITY])[1].tobytes()
           for im in imgs]
    np.savez(out, lens=np.array([len(e) for e in enc], np.int64), data=np.frombuffer(b"".join(enc), np.uint8),
             meta=np.frombuffer(json.dumps(meta).encode(), np.uint8))
    print(f"views_pack: {len(enc)} views, {sum(len(e) for e in enc) / 1e6:.1f} MB -> {out}")


def unpack(src, out):
    z = np.load(src)
    meta = json.loads(z["meta"].tobytes())
    data, off, imgs = z["data"].tobytes(), 0, []
    for n in z["lens"]:
        jpg = np.frombuffer(data[off:off + n], np.uint8)
        imgs.append(cv2.cvtColor(cv2.imdecode(jpg, cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB))
        off += n
    if len(imgs) != len(meta["samples"]):
        raise SystemExit(f"views_pack: {len(imgs)} images for {len(meta['samples'])} samples in {src}")
    os.makedirs(out, exist_ok=True)
    np.stack(imgs).astype(np.uint8).tofile(os.path.join(out, "images.bin"))
    json.dump(meta, open(os.path.join(out, "meta.json"), "w"), separators=(",", ":"))
    print(f"views_pack: {len(imgs)} views -> {out}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("verb", choices=("pack", "unpack"))
    ap.add_argument("src")
    ap.add_argument("out")
    a = ap.parse_args()
    (pack if a.verb == "pack" else unpack)(a.src, a.out)
