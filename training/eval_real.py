"""Diagnostic: score the model on the real photos in ../shared/real-palms/ with a Python
emulation of the engine's two-pass pipeline (letterbox -> palm box -> margin crop from the
full-size image -> lines). The authoritative real-photo score is the TypeScript engine's
`npm run eval:real`; this is for checking the model itself. Evaluation only: nothing here is
used for training or tuning, and the photos are only read from their shared folder.

    /usr/bin/python3 -m training.eval_real --ckpt training/runs/main/final.pt --onnx models/palm-lines/palm-lines.onnx
"""
import argparse
import json
import os

import cv2
import numpy as np
import onnx
import torch

from training import export as exp
from training.evaluate import detected_lines, largest_cc

LINES = ("heart", "head", "life")


def run(net, img):
    x = torch.from_numpy(img).permute(2, 0, 1)[None].float() / 255.0
    with torch.no_grad():
        return torch.sigmoid(net(x))[0].numpy()


def densify(pts, step=2.0):
    pts = np.asarray(pts, np.float64)
    out = [pts[0]]
    for a, b in zip(pts[:-1], pts[1:]):
        n = max(1, int(np.linalg.norm(b - a) / step))
        out += [a + (b - a) * t for t in np.linspace(0, 1, n + 1)[1:]]
    return np.array(out)


def analyse(net, rgb, calib):
    thr, det, margin = calib["thresholds"], calib["detection"], calib["crop"]["margin"]
    H, W = rgb.shape[:2]
    s = 256 / max(W, H)
    nw, nh = round(W * s), round(H * s)
    ox, oy = (256 - nw) // 2, (256 - nh) // 2
    lb = np.zeros((256, 256, 3), np.uint8)
    lb[oy:oy + nh, ox:ox + nw] = cv2.resize(rgb, (nw, nh), interpolation=cv2.INTER_AREA)
    p1 = run(net, lb)
    palm = largest_cc(p1[0] > thr["palm"])
    if palm.sum() == 0:
        return None, {}
    ys, xs = np.nonzero(palm)
    x0, x1 = (xs.min() - ox) / s, (xs.max() + 1 - ox) / s
    y0, y1 = (ys.min() - oy) / s, (ys.max() + 1 - oy) / s
    w, h = x1 - x0, y1 - y0
    x0 -= margin * w; x1 += margin * w; y0 -= margin * h; y1 += margin * h
    side = max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    bx, by = cx - side / 2, cy - side / 2
    k = 256 / side
    # area-average downscale of the crop (like a resize of the cropped region)
    M = np.float32([[k, 0, -bx * k], [0, k, -by * k]])
    if k < 1:
        pre = cv2.resize(rgb, None, fx=k * 2, fy=k * 2, interpolation=cv2.INTER_AREA) if k < 0.5 else rgb
        f = pre.shape[1] / W
        M = np.float32([[k / f, 0, -bx * k], [0, k / f, -by * k]])
        crop = cv2.warpAffine(pre, M, (256, 256), flags=cv2.INTER_LINEAR, borderValue=0)
    else:
        crop = cv2.warpAffine(rgb, M, (256, 256), flags=cv2.INTER_LINEAR, borderValue=0)
    p2 = run(net, crop)
    out = {}
    kept = detected_lines(p2, thr, det)   # the engine's selectLine near the crop's palm, and min_lines
    for ci, name in enumerate(LINES, 1):
        mask, ok = kept[name]
        vs, us = np.nonzero(mask)
        pts = np.c_[bx + (us + 0.5) / k, by + (vs + 0.5) / k]
        conf = float(p2[ci][mask > 0].mean()) if mask.sum() else 0.0
        out[name] = dict(detected=bool(ok), pts=pts, pixels=int(mask.sum()), confidence=conf)
    return (crop, p2, (bx, by, side)), out


def score(pred, ann, palm_w):
    tol = 0.04 * palm_w
    poly = densify(ann["points"])
    if not pred["detected"] or len(pred["pts"]) == 0:
        return dict(detected=False, mean_dist_px=None, mean_dist_rel=None, coverage=0.0, localised=False)
    P = pred["pts"]
    # distance from each mask pixel to the polyline (dense points)
    d = np.sqrt(((P[:, None, :] - poly[None, :, :]) ** 2).sum(-1)).min(1)
    c = np.sqrt(((poly[:, None, :] - P[None, :, :]) ** 2).sum(-1)).min(1)
    md = float(d.mean())
    cov = float((c <= tol).mean())
    return dict(detected=True, mean_dist_px=round(md, 1), mean_dist_rel=round(md / palm_w, 4),
                coverage=round(cov, 3), localised=bool(md <= tol and cov >= 0.6))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--onnx", default=None, help="take thresholds/detection/crop from this file's metadata")
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    ap.add_argument("--dir", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "real-palms"))
    ap.add_argument("--out", default=None)
    ap.add_argument("--viz", default=None, help="folder (outside the repo) for overlay images")
    a = ap.parse_args()
    torch.set_num_threads(2)
    ann_path = os.path.join(a.dir, "annotations.json")
    if not os.path.exists(ann_path):
        print("real-palms folder not found:", a.dir)
        return
    net = exp.load_net(a.ckpt)
    if a.onnx:
        meta = {p.key: p.value for p in onnx.load(a.onnx).metadata_props}
        calib = {k: json.loads(meta[k]) for k in ("thresholds", "detection", "crop")}
    else:
        calib = exp.load_calib(a.calib)
    anns = json.load(open(ann_path))
    rows, n_loc = [], 0
    for im in anns["images"]:
        bgr = cv2.imread(os.path.join(a.dir, im["file"]), cv2.IMREAD_COLOR)   # applies EXIF orientation
        rgb = cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB)
        assert rgb.shape[1] == im["width"] and rgb.shape[0] == im["height"], (im["file"], rgb.shape)
        dbg, pred = analyse(net, rgb, calib)
        for name in LINES:
            r = score(pred[name], im["lines"][name], im["palm_width_px"]) if pred else \
                dict(detected=False, mean_dist_px=None, mean_dist_rel=None, coverage=0.0, localised=False)
            n_loc += r["localised"]
            rows.append(dict(file=im["file"], line=name, **r))
        if a.viz and dbg:
            os.makedirs(a.viz, exist_ok=True)
            crop, p2, _ = dbg
            vis = crop.copy()
            for ci, col in ((1, (255, 0, 0)), (2, (0, 0, 255)), (3, (0, 255, 0))):
                m = p2[ci] > calib["thresholds"][LINES[ci - 1]]
                vis[m] = (0.5 * vis[m] + 0.5 * np.array(col)).astype(np.uint8)
            heat = (np.clip(p2[1:4].transpose(1, 2, 0), 0, 1) * 255).astype(np.uint8)
            pal = (np.clip(p2[0], 0, 1) * 255).astype(np.uint8)
            cv2.imwrite(os.path.join(a.viz, im["file"] + ".png"),
                        cv2.cvtColor(np.hstack([crop, vis, heat, np.dstack([pal] * 3)]), cv2.COLOR_RGB2BGR))
    print(f"{'file':14} {'line':6} {'det':>4} {'dist/pw':>8} {'cover':>6} {'localised':>9}")
    for r in rows:
        print(f"{r['file']:14} {r['line']:6} {str(r['detected']):>4} {str(r['mean_dist_rel']):>8} {r['coverage']:6.2f} {str(r['localised']):>9}")
    print(f"localised: {n_loc} / {len(rows)}")
    if a.out:
        with open(a.out, "w") as f:
            json.dump({"method": "python emulation of the two-pass engine", "rows": rows, "localised": n_loc,
                       "total": len(rows)}, f, indent=1)


if __name__ == "__main__":
    main()
