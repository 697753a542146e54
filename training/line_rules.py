"""The engine's line rules (src/inference/postprocess.ts: selectLine, growLine, palmShare,
palmDistanceMap) for the training evaluation, with the constants of the one table both read:
src/inference/line-rules.json. Distances are chamfer 3-4, as the engine's, so that the two
agree pixel for pixel: test/unit/inference/line-rules-parity.spec.ts runs both on the same
fixtures through this module's command line:

    /usr/bin/python3 -m training.line_rules FIXTURES.bin SPEC.json   # prints the results as JSON

Only numpy and OpenCV: no torch, no model. Lengths in the table are shares of rule_unit: the view's side
for a model framed at 1.7 palm sizes (where the rules were chosen), more for one framed tighter (the
engine's ruleUnit); the frame is this run's (SYNTH_FRAME, as training.synth reads it) unless given.
"""
import json
import os
import sys
from typing import NamedTuple

import cv2
import numpy as np

from training.synth import DEFAULT_FRAME_SIDE, FRAME_SIDE

with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src", "inference", "line-rules.json")) as _f:
    RULES = json.load(_f)


def rule_unit(size, frame_side=None):
    """The pixels the table's lengths are shares of in a view `size` px across framed at `frame_side` palm sizes
    (this run's frame unless given): the engine's ruleUnit."""
    return size * (DEFAULT_FRAME_SIDE / (FRAME_SIDE if frame_side is None else frame_side))


def tip_steps(unit, size):
    """tip_steps (pixels of a view framed at 1.7) in a view whose rule_unit is `unit` (the engine's tipSteps)."""
    return int(np.floor(RULES["tip_steps"] * unit / size + 0.5))


def largest_cc(binary):
    """The largest 8-connected component of a binary map (the first of equals), as 0/1."""
    n, lab, stats, _ = cv2.connectedComponentsWithStats(binary.astype(np.uint8), connectivity=8)
    if n <= 1:
        return np.zeros_like(binary, dtype=np.uint8)
    k = 1 + int(np.argmax(stats[1:, cv2.CC_STAT_AREA]))
    return (lab == k).astype(np.uint8)


def chamfer_distance(seed, limit):
    """Chamfer 3-4 distance in pixels to the set pixels of `seed` (the engine's distanceTo), exact
    up to `limit` pixels; farther pixels get some value above `limit`. A path of k steps costs at
    least k pixels, so k = ceil(limit) + 1 rounds of relaxation reach every pixel within it."""
    big = np.float32(1e9)
    d = np.where(seed > 0, np.float32(0), big).astype(np.float32)
    H, W = d.shape
    for _ in range(int(np.ceil(limit)) + 1):
        p = np.pad(d, 1, constant_values=big)
        nd = d.copy()
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                if dy or dx:
                    nd = np.minimum(nd, p[1 + dy:1 + dy + H, 1 + dx:1 + dx + W] + (4 if dy and dx else 3))
        if np.array_equal(nd, d):
            break
        d = nd
    return d / 3


def palm_distance(palm_prob, thr, unit=None):
    """Distance in pixels to the palm mask (palm_prob > thr), exact up to the near-palm rule;
    None without a palm pixel (the engine's palmDistanceMap)."""
    palm = palm_prob > thr
    if not palm.any():
        return None
    return chamfer_distance(palm, RULES["near_palm"] * (rule_unit(palm.shape[0]) if unit is None else unit))


def palm_share(palm_prob, thr):
    """Share of the map covered by the largest palm component (the engine's palmShare)."""
    cc = largest_cc(palm_prob > thr)
    return float(cc.sum()) / cc.size


class Selection(NamedTuple):
    """select_line's answer: the kept mask (all zero when not detected), whether the line is
    detected, and why not ("not_visible", "implausible", "low_confidence"; "" when detected)."""
    kept: np.ndarray
    detected: bool
    why: str


def select_line(prob, thr, det, palm_dist=None, unit=None):
    """The engine's selectLine: components above the threshold, specks dropped; a component must
    have at least `plausible_share` of its probability mass within `near_palm` of S of the palm
    (when a palm distance map is given); the one with the most such mass is kept with sizeable,
    plausible pieces broken off it that continue it past one of its ends (the table's piece_* rules)."""
    S = prob.shape[0]
    unit = rule_unit(S) if unit is None else unit
    n, lab, stats, _ = cv2.connectedComponentsWithStats((prob > thr).astype(np.uint8), connectivity=8)
    none = np.zeros(prob.shape, np.uint8)
    if n <= 1:
        return Selection(none, False, "not_visible")
    flat = lab.ravel()
    mass = np.bincount(flat, weights=prob.ravel(), minlength=n)
    if palm_dist is None:
        plaus = mass.copy()
    else:
        plaus = np.bincount(flat, weights=(prob * (palm_dist <= RULES["near_palm"] * unit)).ravel(), minlength=n)
    sizes = stats[:, cv2.CC_STAT_AREA]
    speck = max(RULES["speck_min_pixels"], det["min_pixels"] * RULES["speck_share"])
    sizeable = sizes >= speck
    sizeable[0] = False
    ok = sizeable & (plaus > 0) & (plaus >= RULES["plausible_share"] * mass)
    if not ok.any():
        return Selection(none, False, "implausible" if sizeable.any() else "not_visible")
    best = int(np.argmax(np.where(ok, plaus, -1.0)))
    keep = np.zeros(n, bool)
    keep[best] = True
    if n > 2:
        gap = RULES["piece_gap"] * unit
        dist = chamfer_distance(lab == best, gap)
        near = np.zeros(n, bool)
        near[np.unique(lab[(dist <= gap) & (lab > 0)])] = True
        extra = near & ok & (plaus >= RULES["piece_mass"] * plaus[best])  # a piece is plausible itself
        extra[best] = False
        if extra.any():
            tips = line_tips(lab == best, tip_steps(unit, S))
            for k in np.nonzero(extra)[0]:
                extra[k] = continues_line(lab == k, tips, RULES["piece_reach"] * unit)
        keep |= extra
    kept = (keep[lab] & (lab > 0)).astype(np.uint8)
    pixels = int(kept.sum())
    mean = float(prob[kept > 0].astype(np.float64).mean())
    if pixels >= det["min_pixels"] and mean >= det["min_confidence"]:
        return Selection(kept, True, "")
    return Selection(none, False, "low_confidence")


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


def line_tips(comp, steps=None):
    """The two ends of a component's longest course, each with its outward direction: the pixel
    farthest (in 8-connected steps inside the component) from its first pixel in raster order,
    then the one farthest from that (ties to the first in raster order); the direction from the
    mean of the pixels min(steps, length / 2) steps inside to the end (the engine's lineTips; steps: the table's
    tip_steps unless given)."""
    W = comp.shape[1]
    a = int(np.argmax(geodesic(comp, int(np.argmax(comp.ravel())))))
    da = geodesic(comp, a)
    b = int(np.argmax(da))
    db = geodesic(comp, b)
    inside = min(RULES["tip_steps"] if steps is None else steps, int(da[b]) // 2)
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


def grow_line(prob, kept, low, palm_dist=None, unit=None):
    """The engine's growLine: pixels above `low`, 8-connected to the kept line through such
    pixels and within `near_palm` of rule_unit of the palm, join it (hysteresis)."""
    unit = rule_unit(prob.shape[0]) if unit is None else unit
    cond = prob > low
    if palm_dist is not None:
        cond &= palm_dist <= RULES["near_palm"] * unit
    n, lab = cv2.connectedComponents((cond | (kept > 0)).astype(np.uint8), connectivity=8)
    hit = np.unique(lab[kept > 0])
    return np.isin(lab, hit[hit > 0]).astype(np.uint8)


def run_fixtures(maps, spec):
    """Per fixture (4 x S x S: palm, heart, head, life) the palm share and, per line, the
    selection and the grown mask as the spec's settings give them: what the parity test compares."""
    thr, det, grow = spec["thresholds"], spec["detection"], spec["grow"]
    unit = rule_unit(spec["size"], spec.get("frame_side", DEFAULT_FRAME_SIDE))
    out = []
    for m in maps:
        pd = palm_distance(m[0], thr["palm"], unit)
        row = {"palm_share": palm_share(m[0], thr["palm"]), "lines": {}}
        for ci, name in enumerate(("heart", "head", "life"), 1):
            sel = select_line(m[ci], thr[name], det, pd, unit)
            grown = grow_line(m[ci], sel.kept, grow[name], pd, unit) if sel.detected else sel.kept
            row["lines"][name] = {"detected": sel.detected, "why": sel.why,
                                  "kept": np.flatnonzero(sel.kept).tolist(), "grown": np.flatnonzero(grown).tolist()}
        out.append(row)
    return out


def main(argv):
    with open(argv[1]) as f:
        spec = json.load(f)
    S = spec["size"]
    maps = np.fromfile(argv[0], dtype="<f4").reshape(-1, 4, S, S)
    json.dump(run_fixtures(maps, spec), sys.stdout)


if __name__ == "__main__":
    main(sys.argv[1:])
