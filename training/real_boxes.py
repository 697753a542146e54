"""The box set's training part as weak labels in the canonical view (palm-lines 3).

`training/box_views.ts` renders each photo's canonical view and maps its per-line boxes into it as
quadrilaterals. Here each quad becomes three things the loss uses, per line:
  - `inside`: the quad itself (where the crease is);
  - `outside`: everything beyond the quad grown by BOX_GROW of its diagonal (where it is not);
  - `slices`: the quad cut into N_SLICES bands across its long axis (the line spans the box, so
    each band holds at least one line pixel).
A line without a box (not visible or not annotated) has no label: its channel is not trained.
"""
import json
import os

import numpy as np
import cv2

from training.synth import DEFAULT_FRAME_SIDE, check_frame

LINES = ("heart", "head", "life")
# eval:boxes' agreement rule (scripts/box-agreement.json, read by scripts/eval-boxes.ts too). The
# loss's tolerance is the check's growth of a box, so a line the loss allows is one the check accepts.
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "box-agreement.json")) as _f:
    AGREEMENT = json.load(_f)
BOX_GROW = AGREEMENT["grow"]
N_SLICES = 8
# The bands start and end this far inside the box's long ends: the boxes sometimes cut off an end,
# and sometimes run a little past it.
SLICE_MARGIN = 0.08


def load(folder):
    meta = json.load(open(os.path.join(folder, "meta.json")))
    s = meta["size"]
    check_frame(meta.get("frame_side", DEFAULT_FRAME_SIDE), f"{folder} was rendered")   # by box_views --frame-side
    raw = np.fromfile(os.path.join(folder, "images.bin"), np.uint8)
    images = raw.reshape(-1, s, s, 3)
    return images, meta["samples"]


def grow_quad(q, frac):
    q = np.asarray(q, np.float64)
    c = q.mean(0)
    diag = np.linalg.norm(q[0] - q[2])
    d = q - c
    n = np.linalg.norm(d, axis=1, keepdims=True) + 1e-9
    return c + d + d / n * frac * diag


def quad_mask(q, size):
    m = np.zeros((size, size), np.uint8)
    cv2.fillConvexPoly(m, np.round(np.asarray(q) * 16).astype(np.int32), 1, lineType=cv2.LINE_8, shift=4)
    return m


def slice_ids(q, size):
    """Per pixel inside quad q, the band index (0..N_SLICES-1) along its long axis, else -1."""
    q = np.asarray(q, np.float64)
    e1, e2 = q[1] - q[0], q[3] - q[0]
    if np.linalg.norm(e1) >= np.linalg.norm(e2):
        a, b = e1, e2
    else:
        a, b = e2, e1
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    rel = np.stack([xx - q[0][0], yy - q[0][1]], -1)
    m = np.array([a, b]).T
    coef = rel @ np.linalg.inv(m).T  # (s along long axis, t across), both in [0,1] inside
    s, t = coef[..., 0], coef[..., 1]
    inside = (s >= 0) & (s <= 1) & (t >= 0) & (t <= 1)
    band = np.floor((s - SLICE_MARGIN) / (1 - 2 * SLICE_MARGIN) * N_SLICES).astype(np.int64)
    ok = inside & (band >= 0) & (band < N_SLICES)
    return np.where(ok, band, -1).astype(np.int8)


def labels(sample, size):
    """(3, 3, S, S) int8: per line [inside, outside, band id + 1 (0 = no band)], or -1 if unlabelled."""
    out = np.full((3, 3, size, size), -1, np.int8)
    for i, line in enumerate(LINES):
        q = sample["boxes"].get(line)
        if q is None:
            continue
        out[i, 0] = quad_mask(q, size)
        out[i, 1] = 1 - quad_mask(grow_quad(q, BOX_GROW), size)
        out[i, 2] = slice_ids(q, size) + 1
    return out


def build(folder):
    images, samples = load(folder)
    size = images.shape[1]
    cache = os.path.join(folder, "labels.npy")
    if os.path.exists(cache):
        lab = np.load(cache)
    else:
        lab = np.stack([labels(s, size) for s in samples])
        np.save(cache, lab)
    return images, lab, samples


# eval:boxes' agreement: this share of the mask inside the grown box, and the bounding boxes of
# mask and box overlapping by this IoU.
AGREE_INSIDE, AGREE_IOU = AGREEMENT["min_inside"], AGREEMENT["min_iou"]


def agrees(mask, lab_line):
    """eval:boxes' rule in the view: a line mask (S,S bool) against one line's labels (labels()[i]:
    inside quad, outside of the grown quad)."""
    box = lab_line[0] > 0
    if mask.sum() == 0 or box.sum() == 0:
        return False
    inside = (mask & (lab_line[1] == 0)).sum() / mask.sum()
    ys, xs = np.nonzero(mask)
    by, bx = np.nonzero(box)
    ax0, ax1, ay0, ay1 = xs.min(), xs.max() + 1, ys.min(), ys.max() + 1
    bx0, bx1, by0, by1 = bx.min(), bx.max() + 1, by.min(), by.max() + 1
    iw = max(0, min(ax1, bx1) - max(ax0, bx0))
    ih = max(0, min(ay1, by1) - max(ay0, by0))
    inter = iw * ih
    iou = inter / ((ax1 - ax0) * (ay1 - ay0) + (bx1 - bx0) * (by1 - by0) - inter)
    return inside >= AGREE_INSIDE and iou >= AGREE_IOU
