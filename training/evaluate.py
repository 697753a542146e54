"""Evaluate the palm-line model on held-out synthetic sets (seeds differ from training).

    /usr/bin/python3 -m training.evaluate --ckpt training/runs/main/final.pt \\
        --onnx models/palm-lines/palm-lines.onnx --out models/palm-lines/metrics.json
    # calibrate thresholds / detection rule on the validation sets first:
    /usr/bin/python3 -m training.evaluate --ckpt ... --tune --calib models/palm-lines/calibration.json

* Lines: on crop-style images (test_crop: exactly what the engine's second pass sees), per line,
  precision / recall / F1 of line pixels with a 3-pixel tolerance at 256x256, pooled over the set.
  Reported raw (thresholded probabilities) and after the engine's post-processing (selectLine:
  the component with the most probability mass near the palm plus pieces broken off it that
  continue it past one of its ends, kept when it passes the detection rule; none when fewer than
  `min_lines` lines pass), and the share of lines *localised* as ../shared/real-palms/README.md
  scores real photos (mask within 4% of the palm width of the true crease centre on average,
  covering at least 60% of it).
* Palm: IoU of the thresholded palm channel on whole letterboxed scenes (test_scene), mean over
  images and pooled; through both passes, as the engine localises the palm (the crop pass's palm
  on a crop re-rendered from the photo at the pass-1 box, palm outside the crop counted as
  missed); also on crops.
* Scenes through both passes: lines on the re-rendered crops (3-px F1 against the true lines in
  the crop) and the share of scenes answered with at least one line.
* Negatives (test_neg: backs of hands, forearms, objects, bare backgrounds): share of images with
  no line reported, single pass and with the two passes as the engine runs them (pass-1 palm of
  at least 0.4% of the input at `crop.proposal`, default thresholds.palm; the crop, re-rendered
  from the photo for whole-photo negatives; the crop pass's palm check `crop.min_palm`; lines on
  the crop with `detection.min_lines`).
Inference uses the torch checkpoint; with --onnx the exported file's metadata is used and the
file is checked to give the same outputs (onnxruntime-node) on a few test images.
"""
import argparse
import json
import os
import time

import cv2
import numpy as np
import onnx
import torch

from training import export as exp
from training import synth
from training.train import load_shards, to_tensors

LINES = ("heart", "head", "life")
TOL = 3


def predict(net, imgs, bs=16):
    out = []
    with torch.no_grad():
        for i in range(0, len(imgs), bs):
            x, _ = to_tensors(imgs[i:i + bs], np.zeros(imgs[i:i + bs].shape[:3], np.uint8))
            out.append(torch.sigmoid(net(x)).numpy().astype(np.float16))
    return np.concatenate(out)


def unpack(masks):
    return np.stack([(masks >> b) & 1 for b in range(4)], 1).astype(np.uint8)


def largest_cc(binary):
    n, lab, stats, _ = cv2.connectedComponentsWithStats(binary.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros_like(binary, dtype=np.uint8)
    k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return (lab == k).astype(np.uint8)


def select_line(prob, thr, det, palm_dist=None):
    """The engine's selectLine (src/inference/postprocess.ts): components above the threshold,
    specks (under min_pixels / 4) dropped; a component must have at least half its probability
    mass within 3% of S of the palm (when a palm distance map is given); the one with the most
    such mass is kept with sizeable pieces broken off it (mass >= 25% of it, within 6% of S,
    reaching 3% of S past one of its ends: continues_line).
    Distances are Euclidean here (the engine's are chamfer 3-4, within a few %).
    Returns (kept mask, detected)."""
    S = prob.shape[0]
    n, lab, stats, _ = cv2.connectedComponentsWithStats((prob > thr).astype(np.uint8), connectivity=8)
    none = np.zeros(prob.shape, np.uint8)
    if n <= 1:
        return none, False
    flat = lab.ravel()
    mass = np.bincount(flat, weights=prob.ravel(), minlength=n)
    if palm_dist is None:
        plaus = mass.copy()
    else:
        plaus = np.bincount(flat, weights=(prob * (palm_dist <= 0.03 * S)).ravel(), minlength=n)
    sizes = stats[:, cv2.CC_STAT_AREA]
    speck = max(2, det["min_pixels"] / 4)
    ok = (sizes >= speck) & (plaus > 0) & (plaus >= 0.5 * mass)
    ok[0] = False
    if not ok.any():
        return none, False
    best = int(np.argmax(np.where(ok, plaus, -1.0)))
    keep = np.zeros(n, bool)
    keep[best] = True
    if n > 2:
        dist = cv2.distanceTransform((lab != best).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
        near = np.zeros(n, bool)
        near[np.unique(lab[(dist <= 0.06 * S) & (lab > 0)])] = True
        extra = near & (sizes >= speck) & (plaus >= 0.25 * plaus[best])
        extra[0] = False
        if ALONGSIDE_RULE and extra.any():
            tips = line_tips(lab == best)
            for k in np.nonzero(extra)[0]:
                extra[k] = continues_line(lab == k, tips, 0.03 * S)
        keep |= extra
    kept = (keep[lab] & (lab > 0)).astype(np.uint8)
    pixels = int(kept.sum())
    detected = pixels >= det["min_pixels"] and float(prob[kept > 0].mean()) >= det["min_confidence"]
    return (kept if detected else none), detected


# A piece broken off the best component is kept only where it continues the line past one of its
# ends, not where it runs alongside it within its extent (a parallel crease): the engine's
# continuesLine. False gives the rule of 2.0.0's release, to measure what the rule changes.
ALONGSIDE_RULE = True


def geodesic(comp, start):
    """8-connected step counts from pixel `start` (a flat index) inside `comp`, -1 outside."""
    H, W = comp.shape
    flat = comp.ravel()
    dist = np.full(flat.shape, -1, np.int64)
    dist[start] = 0
    queue = [start]
    for i in queue:
        y, x = divmod(i, W)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                yy, xx = y + dy, x + dx
                if 0 <= yy < H and 0 <= xx < W:
                    j = yy * W + xx
                    if flat[j] and dist[j] < 0:
                        dist[j] = dist[i] + 1
                        queue.append(j)
    return dist


def line_tips(comp):
    """The two ends of a component's longest course, each with its outward direction: the pixel
    farthest (in 8-connected steps inside the component) from its first pixel in raster order,
    then the one farthest from that (ties to the first in raster order); the direction from the
    mean of the pixels min(10, length / 2) steps inside to the end (the engine's lineTips)."""
    W = comp.shape[1]
    a = int(np.argmax(geodesic(comp, int(np.argmax(comp.ravel())))))
    da = geodesic(comp, a)
    b = int(np.argmax(da))
    db = geodesic(comp, b)
    inside = min(10, int(da[b]) // 2)
    tips = []
    for e, de in ((a, da), (b, db)):
        pe = np.array(divmod(e, W), np.float64)
        c = np.argwhere((de == inside).reshape(comp.shape)).mean(0)
        t = pe - c
        n = float(np.hypot(*t))
        tips.append((pe, t / n if n > 0 else t))
    return tips


def continues_line(piece, tips, reach):
    """Whether `piece` reaches at least `reach` pixels past one of the tips along its direction."""
    pp = np.argwhere(piece).astype(np.float64)
    return any(float(((pp - pe) @ t).max()) >= reach for pe, t in tips)


def grow_line(prob, kept, low, palm_dist=None):
    """The engine's growLine: pixels above `low`, 8-connected to the kept line through such
    pixels and within 3% of S of the palm, join it (hysteresis)."""
    S = prob.shape[0]
    cond = prob > low
    if palm_dist is not None:
        cond &= palm_dist <= 0.03 * S
    n, lab = cv2.connectedComponents((cond | (kept > 0)).astype(np.uint8), connectivity=8)
    hit = np.unique(lab[kept > 0])
    return np.isin(lab, hit[hit > 0]).astype(np.uint8)


def palm_distance(palm_prob, thr):
    """Distance in pixels to the palm mask (palm_prob > thr), None without a palm pixel."""
    palm = palm_prob > thr
    if not palm.any():
        return None
    return cv2.distanceTransform((~palm).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)


def tol_counts(pred, gt):
    """(pred pixels near gt, pred pixels, gt pixels near pred, gt pixels)"""
    npred, ngt = int(pred.sum()), int(gt.sum())
    if npred == 0 or ngt == 0:
        return 0, npred, 0, ngt
    dgt = cv2.distanceTransform((gt == 0).astype(np.uint8), cv2.DIST_L2, 5)
    dpr = cv2.distanceTransform((pred == 0).astype(np.uint8), cv2.DIST_L2, 5)
    return int((dgt[pred > 0] <= TOL).sum()), npred, int((dpr[gt > 0] <= TOL).sum()), ngt


# ../shared/real-palms/README.md: a line is *localised* when it is detected, its mask pixels lie
# on average within 4% of the palm width of the annotated crease centre, and at least 60% of
# that centre has a mask pixel within that distance. The same measure on synthetic crops, with
# the true line's centre (its mask thinned) for the annotation and sqrt(true palm area) for the
# palm width, is what the thresholds are chosen for (tune) and what metrics.json reports.
LOC_DIST = 0.04
LOC_COVERAGE = 0.6


def line_centre(gt_line):
    """The true line's centre, its mask thinned to one pixel, and the distance of every pixel to
    it: computed once per true line, however many candidate masks are scored against it."""
    centre = cv2.ximgproc.thinning(gt_line.astype(np.uint8) * 255) > 0
    return centre, cv2.distanceTransform((~centre).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)


def localised(kept, detected, target, palm_px):
    """(mean distance / palm width, coverage, localised) of one kept line mask against the true
    line's centre; target is line_centre()'s (centre, distance to it), palm_px the true palm's
    area in pixels."""
    centre, dc = target
    if not detected or not kept.any() or not centre.any():
        return float("inf"), 0.0, False
    width = float(np.sqrt(max(palm_px, 1)))
    r = LOC_DIST * width
    mean = float(dc[kept > 0].mean()) / width
    dk = cv2.distanceTransform((kept == 0).astype(np.uint8), cv2.DIST_L2, cv2.DIST_MASK_PRECISE)
    cov = float((dk[centre] <= r).mean())
    return mean, cov, mean <= LOC_DIST and cov >= LOC_COVERAGE


def prf(c):
    p = c[0] / c[1] if c[1] else 0.0
    r = c[2] / c[3] if c[3] else 0.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def line_metrics(probs, gts, thr, det):
    raw = {n: np.zeros(4) for n in LINES}
    post = {n: np.zeros(4) for n in LINES}
    detected = {n: 0 for n in LINES}
    loc = {n: 0 for n in LINES}
    for i in range(len(probs)):
        kept = detected_lines(probs[i], thr, det)
        for ci, name in enumerate(LINES, start=1):
            pr = probs[i, ci].astype(np.float32)
            gt = gts[i, ci]
            raw[name] += tol_counts(pr > thr[name], gt)
            post[name] += tol_counts(kept[name][0], gt)
            detected[name] += kept[name][1] and gt.sum() > 0
            if gt.sum() > 0:
                loc[name] += localised(kept[name][0], kept[name][1], line_centre(gt), gts[i, 0].sum())[2]
    res = {}
    for ci, name in enumerate(LINES, start=1):
        npos = int(sum(gts[i, ci].sum() > 0 for i in range(len(gts))))
        p, r, f = prf(raw[name])
        pp, rp, fp = prf(post[name])
        res[name] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4),
                     "post_precision": round(pp, 4), "post_recall": round(rp, 4), "post_f1": round(fp, 4),
                     "detected_share": round(detected[name] / max(npos, 1), 4),
                     "localised_share": round(loc[name] / max(npos, 1), 4), "images_with_line": npos}
    return res


def palm_iou(probs, gts, thr):
    ious, inter, union = [], 0, 0
    for i in range(len(probs)):
        pr = largest_cc(probs[i, 0].astype(np.float32) > thr)
        gt = gts[i, 0] > 0
        it, un = int((pr & gt).sum()), int((pr | gt).sum())
        inter += it; union += un
        if gt.sum() > 0:
            ious.append(it / un if un else 1.0)
    return {"mean_iou": round(float(np.mean(ious)), 4), "pooled_iou": round(inter / max(union, 1), 4), "images": len(ious)}


MIN_PALM_FRACTION = 0.004   # the engine's src/inference/postprocess.ts: smaller pass-1 palms are none

# Seeds and kinds of the held-out whole-photo sets (training/run.sh). The two-pass metrics
# re-render each such sample's crop from its seed at the box pass 1 found, the way the engine
# cuts the crop from the full-size photo (not from the 256 letterboxed image).
SET_SOURCES = {"val_scene": (8, 0), "test_scene": (4, 0), "val_neg": (6, 2), "test_neg": (5, 2)}


def palm_box(palm_prob, thr):
    """The engine's findPalm at model resolution: (x0, y0, x1, y1) of the largest palm component,
    None when it is under MIN_PALM_FRACTION of the map."""
    cc = largest_cc(palm_prob > thr)
    if cc.sum() < max(1, round(MIN_PALM_FRACTION * cc.size)):
        return None
    ys, xs = np.nonzero(cc)
    return int(xs.min()), int(ys.min()), int(xs.max()) + 1, int(ys.max()) + 1


def crop_affine(box, margin):
    """The engine's palmCropBox on a 256 image: the box expanded by margin x its size on each
    side, made square, resized to 256; returned as the 2x3 affine from image to crop pixels."""
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    x0 -= margin * w; x1 += margin * w; y0 -= margin * h; y1 += margin * h
    side = max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    s = 256 / side
    return np.float32([[s, 0, -(cx - side / 2) * s], [0, s, -(cy - side / 2) * s]])


def palm_share(palm_prob, thr):
    """Share of the map covered by the largest palm component (the engine's palmShare)."""
    cc = largest_cc(palm_prob > thr)
    return float(cc.sum()) / cc.size


def check_source(imgs, source):
    """The set on disk must be the one its seed draws (the re-rendered crops come from the seed)."""
    seed, kind = source
    if not np.array_equal(synth.sample(seed, 0, kind)[0], imgs[0]):
        raise SystemExit(f"this set is not seed {seed} kind {kind}: regenerate it with training/run.sh data")


def second_pass(net, imgs, probs, proposal, margin, source):
    """The engine's crop pass on every image whose pass-1 palm (at `proposal`) is found.
    A whole-photo sample of `source` (seed, kind) is re-rendered at that crop from the photo
    (synth.generate recrop); a sample drawn as a crop (a negative given to the engine as a small
    photo) is cut from its 256 image, which is then the photo itself. Returns a dict: idx (the
    images), mats (image-to-crop affines), probs (crop-pass probabilities), masks (the crop's
    ground truth bitfield, None where cut), areas (palm area inside the photo in crop pixels)."""
    check_source(imgs, source)
    out = {"idx": [], "mats": [], "masks": [], "areas": []}
    crops = []
    for i in range(len(imgs)):
        box = palm_box(probs[i, 0].astype(np.float32), proposal)
        if box is None:
            continue
        M = crop_affine(box, margin)
        info = {}
        img, mask, _ = synth.sample(source[0], i, source[1], recrop=(box, margin), info=info)
        if not info["recropped"]:
            img = cv2.warpAffine(imgs[i], M, (256, 256), flags=cv2.INTER_LINEAR, borderValue=0)
            mask = None
        crops.append(img)
        for k, v in (("idx", i), ("mats", M), ("masks", mask), ("areas", info["palm_area"])):
            out[k].append(v)
    out["probs"] = predict(net, np.stack(crops)) if crops else None
    return out


def detected_lines(p2, thr, det, palm_ok=True):
    """The engine's lines on one crop-pass output (4 channels): per line, the selectLine mask
    (restricted to near the palm) and whether it counts as detected; none when the crop pass did
    not confirm the palm (`palm_ok`), or when fewer lines than `min_lines` are detected."""
    p2 = p2.astype(np.float32)
    pd = palm_distance(p2[0], thr["palm"])
    kept = {n: select_line(p2[ci], thr[n], det, pd) for ci, n in enumerate(LINES, 1)}
    grow = det.get("grow")
    if grow:
        kept = {n: ((grow_line(p2[ci], cc, grow[n], pd) if ok else cc), ok) for ci, (n, (cc, ok)) in enumerate(kept.items(), 1)}
    count = sum(ok for _, ok in kept.values()) if palm_ok else 0
    if count < det.get("min_lines", 1):
        kept = {n: (np.zeros_like(cc), False) for n, (cc, _) in kept.items()}
    return kept


def line_count(p2, thr, det):
    """Lines the engine detects on one crop-pass output, before the min_lines rule."""
    return sum(ok for _, ok in detected_lines(p2, thr, {**det, "min_lines": 1}).values())


def two_pass(passes, n, thr, det):
    """Per image of the n that `passes` (a second_pass result) ran on, as the engine runs them:
    (pass-1 palm found; pass-2 palm share; number of lines detected on the crop, before the
    `min_lines` rule). Images without a pass-1 palm get share 0 and no line."""
    found = np.zeros(n, bool)
    share = np.zeros(n)
    nlines = np.zeros(n, int)
    for j, i in enumerate(passes["idx"]):
        p2 = passes["probs"][j]
        found[i] = True
        share[i] = palm_share(p2[0].astype(np.float32), thr["palm"])
        nlines[i] = line_count(p2, thr, det)
    return found, share, nlines


def reported(found, share, nlines, min_palm, min_lines):
    """Images the engine answers with at least one line."""
    return found & (share >= min_palm) & (nlines >= max(1, min_lines))


def negative_metrics(ni, npb, passes, thr, det, min_palm):
    single = sum(line_count(npb[i], thr, det) < max(1, det.get("min_lines", 1)) for i in range(len(npb)))
    n = len(npb)
    found, share, nlines = two_pass(passes, n, thr, det)
    ml = det.get("min_lines", 1)
    return {"no_detection_single_pass": round(single / n, 4),
            "no_detection_two_pass": round(float(np.mean(~reported(found, share, nlines, min_palm, ml))), 4),
            "no_detection_two_pass_without_crop_check": round(float(np.mean(~reported(found, share, nlines, 0, ml))), 4),
            "no_detection_two_pass_without_min_lines": round(float(np.mean(~reported(found, share, nlines, min_palm, 1))), 4),
            "palm_found_pass1": round(float(found.mean()), 4),
            "palm_confirmed_pass2": round(float(np.mean(found & (share >= min_palm))), 4), "images": n,
            "recropped_from_photo": int(sum(m is not None for m in passes["masks"]))}


def palm_iou_two_pass(passes, gts, thr):
    """Palm IoU on scenes as the engine localises the palm: the crop pass's palm (thresholded,
    largest component) against the true palm, counting true palm outside the crop as missed;
    an image whose palm pass 1 misses counts with an empty prediction. Pooled in the scene's
    256 letterbox units (crop pixels scaled by the crop's zoom)."""
    ious, inter, union = [], 0.0, 0.0
    done = set()
    for j, i in enumerate(passes["idx"]):
        pred = largest_cc(passes["probs"][j, 0].astype(np.float32) > thr) > 0
        gt = (passes["masks"][j] & 1) > 0
        area = max(passes["areas"][j], float(gt.sum()))
        it = float((pred & gt).sum())
        un = float(pred.sum()) + area - it
        k2 = 1.0 / float(passes["mats"][j][0, 0]) ** 2
        inter += it * k2; union += un * k2
        ious.append(it / un if un else 1.0)
        done.add(i)
    for i in range(len(gts)):
        if i not in done and gts[i, 0].sum() > 0:
            union += float(gts[i, 0].sum())
            ious.append(0.0)
    return {"mean_iou": round(float(np.mean(ious)), 4), "pooled_iou": round(inter / max(union, 1), 4), "images": len(ious)}


def scene_lines_two_pass(passes, per_image, thr, det, min_palm):
    """Lines through both passes on scenes: per line, 3-px P/R/F1 of the reported lines on the
    re-rendered crops against the true lines in the crop (pooled over the scenes whose palm pass 1
    found; true line outside the crop is not counted), and the share of all scenes answered with
    at least one line. `per_image` is two_pass() of the same passes."""
    found, share, nlines = per_image
    counts = {name: np.zeros(4) for name in LINES}
    for j, i in enumerate(passes["idx"]):
        kept = detected_lines(passes["probs"][j], thr, det, palm_ok=share[i] >= min_palm)
        g = unpack(passes["masks"][j][None])[0]
        for ci, name in enumerate(LINES, 1):
            counts[name] += tol_counts(kept[name][0], g[ci])
    res = {}
    for name in LINES:
        p, r, f = prf(counts[name])
        res[name] = {"precision": round(p, 4), "recall": round(r, 4), "f1": round(f, 4)}
    res["scenes_with_lines"] = round(float(np.mean(reported(found, share, nlines, min_palm, det.get("min_lines", 1)))), 4)
    res["scenes_with_lines_without_min_lines"] = round(float(np.mean(reported(found, share, nlines, min_palm, 1))), 4)
    res["scenes_with_lines_without_crop_check"] = round(float(np.mean(reported(found, share, nlines, 0, det.get("min_lines", 1)))), 4)
    return res


def scene_confirmation(per_image, min_palm):
    """On scenes with a palm (per_image: two_pass() of their passes): share where both passes
    find it (lines are then looked for)."""
    found, share, _ = per_image
    return {"palm_found_pass1": round(float(found.mean()), 4),
            "palm_confirmed_pass2": round(float(np.mean(found & (share >= min_palm))), 4), "images": len(found)}


def tune(net, data_root, calib_path):
    vi, vm, _ = load_shards(os.path.join(data_root, "val_crop"))
    ni, _, _ = load_shards(os.path.join(data_root, "val_neg"))
    vp, vg = predict(net, vi), unpack(vm)
    np_ = predict(net, ni)
    calib = exp.load_calib(None)
    thr = line_thresholds(vp, vg, calib)
    # detection rule: pick the loosest rule that keeps >= 97% of negatives clean
    comps_pos, comps_neg = [], []
    for probs, store in ((vp, comps_pos), (np_, comps_neg)):
        for i in range(len(probs)):
            row = []
            for ci, name in enumerate(LINES, 1):
                pr = probs[i, ci].astype(np.float32)
                cc = largest_cc(pr > thr[name])
                n = int(cc.sum())
                row.append((n, float(pr[cc > 0].mean()) if n else 0.0, int(vg[i, ci].sum() > 0) if store is comps_pos else 0))
            store.append(row)
    best = None
    for mp in (10, 15, 20, 30, 40, 60, 80, 100, 130):
        for mc in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
            neg_clean = np.mean([not any(n >= mp and c >= mc for n, c, _ in row) for row in comps_neg])
            pos = [(n >= mp and c >= mc) for row in comps_pos for n, c, has in row if has]
            rate = float(np.mean(pos))
            key = (neg_clean >= 0.97, rate if neg_clean >= 0.97 else neg_clean, -mp, -mc)
            if best is None or key > best[0]:
                best = (key, mp, mc, neg_clean, rate)
    _, mp, mc, nc, rate = best
    print(f"detection: min_pixels {mp}, min_confidence {mc} (val negatives clean {nc:.3f}, val line detection {rate:.3f})")
    det = {"min_pixels": mp, "min_confidence": mc}
    # The two passes as the engine runs them, decided together to maximise the balanced
    # image-level accuracy on val: val scenes answered with at least one line (their palm found
    # by pass 1, confirmed by the crop pass, lines detected on a crop re-rendered from the
    # photo) against val negatives answered with none. Chosen: the pass-1 threshold that
    # proposes a palm box (`crop.proposal`, may be looser than thresholds.palm to find small
    # palms), the share of the crop the crop pass must see as palm (`crop.min_palm`), and the
    # fewest lines an image must show for any to be reported (`detection.min_lines`: a lone
    # crease is what a back of hand or a forearm most often shows).
    si, _, _ = load_shards(os.path.join(data_root, "val_scene"))
    margin = calib["crop"]["margin"]
    sp_ = predict(net, si)
    best = None
    for proposal in (0.5, 0.4, 0.3, 0.2):
        s_found, s_share, s_lines = two_pass(second_pass(net, si, sp_, proposal, margin, SET_SOURCES["val_scene"]),
                                             len(si), thr, det)
        n_found, n_share, n_lines = two_pass(second_pass(net, ni, np_, proposal, margin, SET_SOURCES["val_neg"]),
                                             len(ni), thr, det)
        for mpalm in (0.0, 0.02, 0.04, 0.06, 0.08, 0.1, 0.12, 0.15, 0.2, 0.25, 0.3):
            for ml in (1, 2, 3):
                scenes = float(np.mean(reported(s_found, s_share, s_lines, mpalm, ml)))
                clean = float(np.mean(~reported(n_found, n_share, n_lines, mpalm, ml)))
                key = (round((scenes + clean) / 2, 4), proposal, -mpalm, -ml)
                if best is None or key > best[0]:
                    best = (key, proposal, mpalm, ml, scenes, clean)
    _, proposal, min_palm, min_lines, scenes, clean = best
    print(f"crop proposal {proposal}, min_palm {min_palm}, min_lines {min_lines}: val scenes answered with lines "
          f"{scenes:.3f}, val negatives answered without {clean:.3f}")
    det["min_lines"] = min_lines
    calib["crop"] = {**calib["crop"], "min_palm": min_palm, "proposal": proposal}
    calib.update({"thresholds": thr, "detection": det})
    os.makedirs(os.path.dirname(os.path.abspath(calib_path)), exist_ok=True)
    with open(calib_path, "w") as f:
        json.dump(calib, f, indent=1)
    print("wrote", calib_path)
    return calib


def line_thresholds(vp, vg, calib):
    """Per line, the threshold under which the most validation images have the line *localised*
    as the real photos are scored (LOC_DIST, LOC_COVERAGE) after the engine's selectLine (near
    the predicted palm; detection gate off: it is chosen next); ties go to the higher 3-px F1."""
    thr = {"palm": 0.5}
    sel = {"min_pixels": calib["detection"]["min_pixels"], "min_confidence": 0.0}
    pdist = [palm_distance(vp[i, 0].astype(np.float32), thr["palm"]) for i in range(len(vp))]
    centres = {ci: [line_centre(vg[i, ci]) if vg[i, ci].any() else None for i in range(len(vg))] for ci in (1, 2, 3)}
    for ci, name in enumerate(LINES, 1):
        best = None
        for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.55, 0.6, 0.65, 0.7):
            c = np.zeros(4)
            hits, npos = 0, 0
            for i in range(len(vp)):
                pr = vp[i, ci].astype(np.float32)
                c += tol_counts(pr > t, vg[i, ci])
                if centres[ci][i] is not None:
                    kept, ok = select_line(pr, t, sel, pdist[i])
                    hits += localised(kept, ok, centres[ci][i], vg[i, 0].sum())[2]
                    npos += 1
            key = (hits / max(npos, 1), prf(c)[2], t)
            print(f"  {name} {t:.2f}: localised {key[0]:.3f}, F1 {key[1]:.3f}")
            best = max(best or key, key)
        thr[name] = best[2]
        print(f"threshold {name}: {best[2]} (val localised {best[0]:.3f}, F1 {best[1]:.3f})")
    return thr


def canonical_reported(probs, thr, det, min_palm):
    """Per image, whether the engine reports lines on this canonical-frame output: the palm
    confirmed (largest palm component >= min_palm of the view) and at least min_lines lines."""
    out = []
    for p in probs:
        ok = palm_share(p[0].astype(np.float32), thr["palm"]) >= min_palm
        out.append(ok and any(k for _, k in detected_lines(p, thr, det, ok).values()))
    return np.array(out)


def tune_canonical(net, data_root, calib_path, one_se=False):
    """Calibration of a model for the canonical palm frame (2.0), on val_canon (palms),
    val_canon_fades (palms with long faint stretches) and val_canon_neg (backs of hands): line
    thresholds by the localised measure; the detection rule, `crop.min_palm` (the palm share the
    view must show) and `detection.min_lines` together for the best balanced accuracy (palms
    answered with lines against backs answered with none); then the `grow` thresholds."""
    vi, vm, _ = load_shards(os.path.join(data_root, "val_canon"))
    ni, _, _ = load_shards(os.path.join(data_root, "val_canon_neg"))
    vp, vg = predict(net, vi), unpack(vm)
    np_ = predict(net, ni)
    calib = exp.load_calib(None)
    thr = line_thresholds(vp, vg, calib)
    # Per min_pixels, each line's kept component once (its speck rule depends on min_pixels, not
    # on min_confidence); then every min_confidence on those components' sizes and means.
    pd_pos = [palm_distance(p[0].astype(np.float32), thr["palm"]) for p in vp]
    pd_neg = [palm_distance(p[0].astype(np.float32), thr["palm"]) for p in np_]

    def components(probs, pds, mp):
        out = []
        for p, pd in zip(probs, pds):
            row = []
            for ci, name in enumerate(LINES, 1):
                pr = p[ci].astype(np.float32)
                kept, ok = select_line(pr, thr[name], {"min_pixels": mp, "min_confidence": 0.0}, pd)
                row.append((ok, float(pr[kept > 0].mean()) if ok else 0.0))
            out.append(row)
        return out

    # The detection rule, the palm share and min_lines together, by balanced image-level accuracy
    # (palms answered with lines against backs answered without: in the canonical frame the palm
    # check and min_lines share the work of refusing a back); ties to the share of true lines
    # detected, then looser. With --one-se (candidates after 2.0.0): among the settings within one
    # standard error of the best balanced accuracy, the one that detects the most true lines, then
    # the looser, so one validation back cannot cost a whole step of min_confidence. Without it,
    # the rule 2.0.0 was calibrated with (`run.sh release` reproduces it).
    share_pos = np.array([palm_share(p[0].astype(np.float32), thr["palm"]) for p in vp])
    share_neg = np.array([palm_share(p[0].astype(np.float32), thr["palm"]) for p in np_])
    has = vg[:, 1:].reshape(len(vg), 3, -1).any(axis=2)
    rows = []
    for mp in (10, 15, 20, 30, 40, 60, 80, 100, 130):
        pos, neg = components(vp, pd_pos, mp), components(np_, pd_neg, mp)
        for mc in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8):
            npos = np.array([[ok and m >= mc for ok, m in row] for row in pos])
            nneg = np.array([[ok and m >= mc for ok, m in row] for row in neg])
            rate = float(npos[has].mean())
            for min_palm in (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3):
                for ml in (1, 2, 3):
                    palms = float(np.mean((share_pos >= min_palm) & (npos.sum(1) >= ml)))
                    clean = float(np.mean(~((share_neg >= min_palm) & (nneg.sum(1) >= ml))))
                    rows.append(((palms + clean) / 2, rate, mp, mc, min_palm, ml, palms, clean))
    top = max(rows, key=lambda r: (round(r[0], 4), round(r[1], 4), -r[2], -r[3], -r[4], -r[5]))
    se = 0.5 * np.sqrt(top[6] * (1 - top[6]) / len(vp) + top[7] * (1 - top[7]) / len(np_)) if one_se else 0.0
    near = [r for r in rows if r[0] >= top[0] - se - 1e-9] if one_se else [top]
    _, rate, mp, mc, min_palm, ml, palms, clean = max(near, key=lambda r: (round(r[1], 4), -r[2], -r[3], -r[4], -r[5]))
    print(f"detection: best balanced accuracy {top[0]:.4f} (standard error {se:.4f}), {len(near)} settings within it")
    print(f"detection: min_pixels {mp}, min_confidence {mc}, min_palm {min_palm}, min_lines {ml}: val palms answered "
          f"with lines {palms:.3f}, val backs without {clean:.3f}, val line detection {rate:.3f}")
    # Per line, the hysteresis threshold a detected line is followed along (`grow`): the one under
    # which the most validation palms, plain and with long faint stretches (val_canon_fades), have
    # the line localised; ties to the 3-px F1 after post-processing, then to the higher threshold.
    # 2.1 on: also val_canon_hard (the hard extras of synth.hard_extras), where it was generated.
    gp, gg = vp, vg
    for extra in ("val_canon_fades", "val_canon_hard"):
        if extra == "val_canon_hard" and not os.path.isdir(os.path.join(data_root, extra)):
            continue
        fi, fm, _ = load_shards(os.path.join(data_root, extra))
        gp, gg = np.concatenate([gp, predict(net, fi)]), np.concatenate([gg, unpack(fm)])
    det = {"min_pixels": mp, "min_confidence": mc}
    gpd = [palm_distance(p[0].astype(np.float32), thr["palm"]) for p in gp]
    grow = {}
    for ci, name in enumerate(LINES, 1):
        sel = [select_line(gp[i, ci].astype(np.float32), thr[name], det, gpd[i]) for i in range(len(gp))]
        centres = [line_centre(gg[i, ci]) if gg[i, ci].any() else None for i in range(len(gg))]
        best = None
        for f in (1.0, 0.8, 0.65, 0.5, 0.4, 0.3):
            low = round(thr[name] * f, 3)
            c, hits, npos = np.zeros(4), 0, 0
            for i, (cc, ok) in enumerate(sel):
                kept = grow_line(gp[i, ci].astype(np.float32), cc, low, gpd[i]) if ok else cc
                c += tol_counts(kept, gg[i, ci])
                if centres[i] is not None:
                    hits += localised(kept, ok, centres[i], gg[i, 0].sum())[2]
                    npos += 1
            key = (round(hits / max(npos, 1), 4), round(prf(c)[2], 4), low)
            print(f"  grow {name} {low:.3f}: localised {key[0]:.3f}, F1 post {key[1]:.3f}")
            best = max(best or key, key)
        grow[name] = best[2]
        print(f"grow {name}: {best[2]} (val localised {best[0]:.3f}, F1 post {best[1]:.3f})")
    calib["crop"] = {**calib["crop"], "min_palm": min_palm}
    calib.update({"thresholds": thr, "grow": grow, "detection": {"min_pixels": mp, "min_confidence": mc, "min_lines": ml}})
    os.makedirs(os.path.dirname(os.path.abspath(calib_path)), exist_ok=True)
    with open(calib_path, "w") as f:
        json.dump(calib, f, indent=1)
    print("wrote", calib_path)
    return calib


def evaluate_canonical(net, data_root, split, calib, limit=None):
    """Metrics in the canonical frame: lines on {split}_canon, palm IoU there, and the share of
    {split}_canon_neg (backs of hands) and of {split}_canon answered as the engine answers."""
    thr, det = calib["thresholds"], {**calib["detection"], **({"grow": calib["grow"]} if "grow" in calib else {})}
    min_palm = calib["crop"].get("min_palm", 0.0)
    ci_, cm, _ = load_shards(os.path.join(data_root, f"{split}_canon"), limit)
    cp, cg = predict(net, ci_), unpack(cm)
    ni, _, _ = load_shards(os.path.join(data_root, f"{split}_canon_neg"), limit)
    npb = predict(net, ni)
    res = {"lines": line_metrics(cp, cg, thr, det), "palm": palm_iou(cp, cg, thr["palm"]),
           "palms_answered_with_lines": round(float(np.mean(canonical_reported(cp, thr, det, min_palm))), 4),
           "backs_answered_without": round(float(np.mean(~canonical_reported(npb, thr, det, min_palm))), 4),
           "sizes": {"palms": len(ci_), "backs": len(ni)}}
    hard = os.path.join(data_root, f"{split}_canon_hard")
    if os.path.isdir(hard):
        # palms with the hard extras (synth.hard_extras): 2.1's target
        hi, hm, _ = load_shards(hard, limit)
        res["lines_hard"] = line_metrics(predict(net, hi), unpack(hm), thr, det)
        res["sizes"]["hard_palms"] = len(hi)
    return res


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--onnx", default=None, help="use this file's metadata and check it matches the checkpoint")
    ap.add_argument("--data", default="training/data")
    ap.add_argument("--calib", default="models/palm-lines/calibration.json")
    ap.add_argument("--tune", action="store_true", help="calibrate on val_crop/val_neg/val_scene and write --calib")
    ap.add_argument("--out", default=None,
                    help="metrics file (default models/palm-lines/metrics.json; with --split val, metrics_val.json beside --ckpt)")
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--split", choices=("test", "val"), default="test",
                    help="the sets the full evaluation reads: test_* (the held-out report) or val_* (to compare "
                         "candidates before any test set is looked at)")
    ap.add_argument("--canonical", action="store_true",
                    help="a model for the canonical palm frame (2.0): tune on val_canon/val_canon_neg, evaluate on "
                         "{split}_canon/{split}_canon_neg")
    ap.add_argument("--one-se", action="store_true",
                    help="with --canonical --tune: the one-standard-error rule for the detection rule (candidates after 2.0.0)")
    ap.add_argument("--lines-on", default=None, metavar="DIR",
                    help="print only the line metrics on this crop-style set (e.g. a validation set) and stop")
    a = ap.parse_args()
    if a.out is None:
        a.out = "models/palm-lines/metrics.json" if a.split == "test" else os.path.join(os.path.dirname(a.ckpt), "metrics_val.json")
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    net = exp.load_net(a.ckpt)
    if a.tune:
        if a.canonical:
            tune_canonical(net, a.data, a.calib, one_se=a.one_se)
        else:
            tune(net, a.data, a.calib)
        return
    if a.onnx:
        meta = {p.key: p.value for p in onnx.load(a.onnx).metadata_props}
        calib = {"thresholds": json.loads(meta["thresholds"]), "detection": json.loads(meta["detection"]),
                 "crop": json.loads(meta["crop"]), **({"grow": json.loads(meta["grow"])} if "grow" in meta else {})}
    else:
        calib = exp.load_calib(a.calib)
    thr, det, margin = calib["thresholds"], calib["detection"], calib["crop"]["margin"]
    if a.lines_on:
        li, lm, _ = load_shards(a.lines_on, a.limit)
        print(json.dumps({"set": a.lines_on, "calibration": calib, "lines": line_metrics(predict(net, li), unpack(lm), thr, det)}, indent=1))
        return
    t0 = time.time()
    res = {"model": f"{exp.MODEL_NAME}-{exp.MODEL_VERSION}", "calibration": calib, "tolerance_px": TOL}
    if a.canonical:
        res.update(split=a.split, canonical=evaluate_canonical(net, a.data, a.split, calib, a.limit))
        write_metrics(res, a, net, t0)
        print(json.dumps(res["canonical"], indent=1))
        return
    ci_, cm, _ = load_shards(os.path.join(a.data, f"{a.split}_crop"), a.limit)
    cp = predict(net, ci_)
    cg = unpack(cm)
    res["lines_on_crops"] = line_metrics(cp, cg, thr, det)
    res["palm_on_crops"] = palm_iou(cp, cg, thr["palm"])
    si, sm, _ = load_shards(os.path.join(a.data, f"{a.split}_scene"), a.limit)
    sp = predict(net, si)
    sg = unpack(sm)
    res["palm_on_scenes"] = palm_iou(sp, sg, thr["palm"])
    min_palm = calib["crop"].get("min_palm", 0.0)
    proposal = calib["crop"].get("proposal", thr["palm"])
    scene_passes = second_pass(net, si, sp, proposal, margin, SET_SOURCES[f"{a.split}_scene"])
    res["palm_on_scenes_two_pass"] = palm_iou_two_pass(scene_passes, sg, thr["palm"])
    scene_per_image = two_pass(scene_passes, len(si), thr, det)   # shared by the two scene metrics below
    res["lines_on_scenes_two_pass"] = scene_lines_two_pass(scene_passes, scene_per_image, thr, det, min_palm)
    res["lines_on_scenes_raw"] = {k: {kk: v[kk] for kk in ("precision", "recall", "f1")}
                                  for k, v in line_metrics(sp, sg, thr, det).items()}
    ni, _, _ = load_shards(os.path.join(a.data, f"{a.split}_neg"), a.limit)
    npb = predict(net, ni)
    res["scenes_two_pass"] = scene_confirmation(scene_per_image, min_palm)
    neg_passes = second_pass(net, ni, npb, proposal, margin, SET_SOURCES[f"{a.split}_neg"])
    res["negatives"] = negative_metrics(ni, npb, neg_passes, thr, det, min_palm)
    res["split"] = a.split
    res["sizes"] = {"test_crop": len(ci_), "test_scene": len(si), "test_neg": len(ni)}   # keys kept for readers of older files
    write_metrics(res, a, net, t0)
    print_table(res)


def write_metrics(res, a, net, t0):
    """Adds the ONNX check (with --onnx) and the evaluation time to `res` and writes it to --out."""
    if a.onnx:
        res["onnx_check"] = exp.verify(net, a.onnx)
        res["onnx_bytes"] = os.path.getsize(a.onnx)
    res["eval_s"] = round(time.time() - t0)
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump(res, f, indent=1)
    print("wrote", a.out)


def print_table(res):
    print(f"\nLines on crop-style images ({res['sizes']['test_crop']} held-out synthetic, 3 px tolerance at 256x256)")
    print(f"{'line':6} {'P':>6} {'R':>6} {'F1':>6} | {'P post':>7} {'R post':>7} {'F1 post':>7} | detected | localised")
    for k, v in res["lines_on_crops"].items():
        print(f"{k:6} {v['precision']:6.3f} {v['recall']:6.3f} {v['f1']:6.3f} | {v['post_precision']:7.3f} "
              f"{v['post_recall']:7.3f} {v['post_f1']:7.3f} | {v['detected_share']:8.3f} | {v['localised_share']:.3f}")
    print(f"palm IoU on whole scenes ({res['sizes']['test_scene']}): mean {res['palm_on_scenes']['mean_iou']:.3f}, "
          f"pooled {res['palm_on_scenes']['pooled_iou']:.3f}; through both passes: mean "
          f"{res['palm_on_scenes_two_pass']['mean_iou']:.3f}, pooled {res['palm_on_scenes_two_pass']['pooled_iou']:.3f}; "
          f"on crops: mean {res['palm_on_crops']['mean_iou']:.3f}")
    sl = res["lines_on_scenes_two_pass"]
    print(f"lines through both passes on scenes (crops re-rendered from the photo): "
          + ", ".join(f"{k} F1 {sl[k]['f1']:.3f}" for k in LINES) + f"; scenes answered with lines {sl['scenes_with_lines']:.3f}")
    n = res["negatives"]
    print(f"negatives ({n['images']}): no line detected {n['no_detection_single_pass']:.3f} (single pass), "
          f"{n['no_detection_two_pass']:.3f} (two-pass as the engine runs it; "
          f"{n['no_detection_two_pass_without_crop_check']:.3f} without the crop-pass palm check, "
          f"{n['no_detection_two_pass_without_min_lines']:.3f} without min_lines)")
    sc = res["scenes_two_pass"]
    print(f"scenes ({sc['images']}): palm found by pass 1 {sc['palm_found_pass1']:.3f}, confirmed by pass 2 "
          f"{sc['palm_confirmed_pass2']:.3f}")


if __name__ == "__main__":
    main()
