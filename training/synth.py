"""Procedural synthetic palm generator with exact per-line masks.

Every sample is a 256x256 RGB image exactly as the engine feeds it to the model, plus a
4-channel mask (palm, heart, head, life), packed as bits of one uint8 plane.

Geometry is built in a canonical hand frame: palm width ~1, fingers toward -y, the finger base
line at y~0, the wrist crease at y~L, thumb (radial side) toward +x.  A hand is placed in a
virtual phone photo (rotation, scale, mirror = left/right hand, mild perspective), then the
photo is viewed the way the engine views it:

* ``scene``: the whole photo letterboxed into 256x256 (longer side 256, centred, black bands);
* ``crop``:  the engine's second pass: palm bounding box (jittered, as a pass-1 box is
  imperfect), expanded by a margin of 0.05-0.35 x box size on each side, made square, resized to
  256; area outside the photo is black;
* ``negative``: backs of hands, forearms, skin-coloured objects or bare backgrounds, empty masks.

Everything is drawn directly at output resolution (2x supersampled for the image), so a sample
costs a few tens of milliseconds.
"""
from __future__ import annotations

import math
from math import comb

import cv2
import numpy as np

import os

# Output side; only training/sample_photo.py sets SYNTH_OUT (to render the README's sample large).
OUT = int(os.environ.get("SYNTH_OUT", "256"))
SS = 2
R = OUT * SS
SHIFT = 4
FIX = float(1 << SHIFT)

KIND_SCENE, KIND_CROP, KIND_NEG = 0, 1, 2
# palm-lines 2.0: the palm in the canonical frame of the hand landmarks (canonical_view), a palm
# (KIND_CANON) or, as a negative, the back of a hand in the same frame (KIND_CANON_NEG).
KIND_CANON, KIND_CANON_NEG = 3, 4
CHANNELS = ("palm", "heart", "head", "life")

# palm-side skin tones (RGB, 0-1), light to dark; dorsal tones are derived by darkening
SKIN = np.array([
    [244, 214, 200], [236, 196, 176], [226, 182, 156], [212, 164, 136], [196, 146, 116],
    [178, 126, 98], [156, 106, 80], [140, 96, 74], [126, 86, 66], [110, 76, 60],
], np.float32) / 255.0


_YY, _XX = (np.mgrid[0:R, 0:R].astype(np.float32) / R)
_BANK = {}


def noise_tile(rng, sigma):
    """Unit-variance gaussian noise (R x R) blurred by sigma; drawn from a per-process bank and
    randomly rolled/flipped (deterministic given rng)."""
    key = round(float(sigma), 1)
    if key not in _BANK:
        g = np.random.default_rng(1000 + int(key * 10))
        tiles = []
        for _ in range(4):
            t = g.standard_normal((R, R)).astype(np.float32)
            if key > 0:
                t = cv2.GaussianBlur(t, (0, 0), key)
            tiles.append(t / (t.std() + 1e-6))
        _BANK[key] = tiles
    t = _BANK[key][int(rng.integers(len(_BANK[key])))]
    t = np.roll(t, (int(rng.integers(R)), int(rng.integers(R))), (0, 1))
    if rng.random() < 0.5:
        t = t.T
    return t


def blur(x, sigma):
    """Gaussian blur; large sigmas are done at reduced resolution."""
    if sigma <= 3:
        return cv2.GaussianBlur(x, (0, 0), sigma)
    f = int(min(8, sigma // 2))
    h, w = x.shape[:2]
    small = cv2.resize(x, (w // f, h // f), interpolation=cv2.INTER_AREA)
    small = cv2.GaussianBlur(small, (0, 0), sigma / f)
    return cv2.resize(small, (w, h), interpolation=cv2.INTER_LINEAR)


# ----------------------------------------------------------------------------- geometry helpers

def bezier(ctrl, n=48):
    c = np.asarray(ctrl, np.float64)
    k = len(c) - 1
    t = np.linspace(0.0, 1.0, n)
    B = np.stack([comb(k, i) * t ** i * (1 - t) ** (k - i) for i in range(k + 1)], 1)
    return B @ c


def catmull_closed(P, n=10):
    P = np.asarray(P, np.float64)
    N = len(P)
    t = np.linspace(0, 1, n, endpoint=False)[:, None]
    out = []
    for i in range(N):
        p0, p1, p2, p3 = P[i - 1], P[i], P[(i + 1) % N], P[(i + 2) % N]
        out.append(0.5 * ((2 * p1) + (-p0 + p2) * t + (2 * p0 - 5 * p1 + 4 * p2 - p3) * t ** 2
                          + (-p0 + 3 * p1 - 3 * p2 + p3) * t ** 3))
    return np.concatenate(out)


def tp(H, pts):
    pts = np.asarray(pts, np.float64).reshape(-1, 2)
    p = np.c_[pts, np.ones(len(pts))] @ H.T
    return p[:, :2] / p[:, 2:3]


def T(tx, ty):
    return np.array([[1, 0, tx], [0, 1, ty], [0, 0, 1]], np.float64)


def S(sx, sy=None):
    sy = sx if sy is None else sy
    return np.array([[sx, 0, 0], [0, sy, 0], [0, 0, 1]], np.float64)


def Rot(a):
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], np.float64)


def fix(pts):
    return np.round(np.asarray(pts) * FIX).astype(np.int32)


def resample(pts, step):
    pts = np.asarray(pts, np.float64)
    d = np.r_[0, np.cumsum(np.linalg.norm(np.diff(pts, axis=0), axis=1))]
    if d[-1] < 1e-6:
        return pts[:1]
    n = max(2, int(d[-1] / step) + 1)
    s = np.linspace(0, d[-1], n)
    return np.c_[np.interp(s, d, pts[:, 0]), np.interp(s, d, pts[:, 1])]


def smooth_noise(rng, n, k=4, amp=1.0):
    """1-D smooth noise of length n in [-amp, amp]."""
    ctrl = rng.uniform(-1, 1, k + 2)
    x = np.linspace(0, k + 1, n)
    return amp * np.interp(x, np.arange(k + 2), ctrl)


def noise2d(rng, size, cells, channels=1):
    small = rng.standard_normal((cells, cells, channels)).astype(np.float32)
    big = cv2.resize(small, (size, size), interpolation=cv2.INTER_CUBIC)
    if channels == 1:
        big = big[..., None] if big.ndim == 2 else big
    return big.reshape(size, size, channels)


# ----------------------------------------------------------------------------- hand model

def capsule(base, ang, length, w0, w1, n=10):
    """Tapered finger polygon from base point along angle ang (0 = -y, + toward +x)."""
    d = np.array([math.sin(ang), -math.cos(ang)])
    nrm = np.array([math.cos(ang), math.sin(ang)])
    base = np.asarray(base, np.float64)
    s = np.linspace(0, max(length - w1 / 2, 0.01), n)[:, None]
    w = (w0 + (w1 - w0) * s / max(length, 1e-3)) / 2
    left = base + d * s - nrm * w
    right = base + d * s + nrm * w
    c = base + d * max(length - w1 / 2, 0.01)
    th = np.linspace(math.pi, 0, 9)[:, None]
    tip = c - nrm * (w1 / 2) * np.cos(th) + d * (w1 / 2) * np.sin(th)
    return np.concatenate([left, tip, right[::-1]]), d, nrm


def sample_hand(rng):
    h = {}
    L = rng.uniform(0.92, 1.15)
    tw = rng.uniform(-0.04, 0.06)
    web = rng.uniform(0.16, 0.3)
    J = lambda: rng.normal(0, 0.012)
    outline = [
        (0.46 + J(), 0.02 + J()), (0.53 + J(), web), (0.58 + tw + J(), 0.48 + J()),
        (0.55 + tw + J(), 0.76 + J()), (0.40 + J(), 0.96 * L), (0.0, L + 0.02 + J()),
        (-0.38 + J(), 0.97 * L), (-0.53 + J(), 0.74 + J()), (-0.56 + J(), 0.44 + J()),
        (-0.53 + J(), 0.16 + J()), (-0.46 + J(), 0.07 + J()), (-0.24, 0.025 + J()),
        (0.0, 0.0 + J()), (0.24, 0.005 + J()),
    ]
    h["L"] = L
    h["web"] = web
    h["palm"] = catmull_closed(outline, 8)
    # fingers: little, ring, middle, index
    spread = rng.uniform(0.0, 1.3)
    tilt = rng.normal(0, 6)
    flen = rng.uniform(0.78, 1.12)
    xs = np.array([-0.37, -0.125, 0.125, 0.37]) + rng.normal(0, 0.015, 4)
    ys = np.array([0.09, 0.025, 0.0, 0.02])
    ws = np.array([0.19, 0.225, 0.235, 0.225]) * rng.uniform(0.88, 1.12)
    lens = np.array([0.62, 0.84, 0.93, 0.82]) * flen * rng.uniform(0.92, 1.06, 4)
    curl = rng.random(4) < 0.15
    lens[curl] *= rng.uniform(0.45, 0.85, curl.sum())
    angs = np.radians((np.array([-18.0, -6.0, 2.0, 10.0]) * spread + tilt + rng.normal(0, 3, 4)))
    h["fingers"] = []
    for i in range(4):
        poly, d, nrm = capsule((xs[i], ys[i] + 0.07), angs[i], lens[i] + 0.07, ws[i], ws[i] * 0.82)
        h["fingers"].append(dict(poly=poly, base=np.array([xs[i], ys[i] + 0.07]), d=d, n=nrm,
                                 len=lens[i] + 0.07, w=ws[i]))
    # thumb
    tang = math.radians(rng.uniform(25, 65))
    tlen = rng.uniform(0.85, 1.05) * (rng.uniform(0.6, 0.9) if rng.random() < 0.15 else 1.0)
    tbase = np.array([0.42 + rng.normal(0, 0.02), 0.52 + rng.normal(0, 0.03)])
    poly, d, nrm = capsule(tbase, tang, tlen, rng.uniform(0.3, 0.34), rng.uniform(0.22, 0.25))
    h["thumb"] = dict(poly=poly, base=tbase, d=d, n=nrm, len=tlen, w=0.3)
    # forearm
    fw0 = 0.78 + rng.normal(0, 0.03)
    h["arm"] = np.array([(-fw0 / 2, L - 0.08), (fw0 / 2, L - 0.08), (fw0 / 2 + 0.12, L + 2.6),
                         (-fw0 / 2 - 0.12, L + 2.6)])
    h["has_arm"] = rng.random() < 0.93
    return h


def principal_lines(rng, h):
    L, web = h["L"], h["web"]
    U = rng.uniform
    # heart: from the ulnar (little-finger) edge toward the index/middle fingers
    S0 = np.array([-0.6, U(0.16, 0.33)])
    E = np.array([U(-0.08, 0.3), U(0.03, 0.15)])
    heart = bezier([S0, S0 + [U(0.22, 0.4), U(-0.03, 0.07)],
                    E + [-U(0.12, 0.3), U(0.03, 0.15)], E])
    # head: from the radial edge between thumb and index, across the palm
    O = np.array([U(0.52, 0.6), web + U(0.03, 0.11)])
    Eh = np.array([U(-0.52, -0.05), U(0.4, 0.72)])
    head = bezier([O, O + [-U(0.15, 0.28), U(0.0, 0.09)], Eh + [U(0.08, 0.25), U(-0.12, 0.02)], Eh])
    # life: same start (often joined) and arcs round the thenar toward the wrist
    if rng.random() < 0.72:
        O2 = O + [U(-0.01, 0.01), U(0.0, 0.02)]
    else:
        O2 = O + [U(-0.04, 0.0), U(0.03, 0.08)]
    El = np.array([U(0.02, 0.35), L * U(0.8, 1.02)])
    life = bezier([O2, O2 + [-U(0.16, 0.3), U(0.06, 0.16)],
                   El + [-U(0.12, 0.28), -U(0.22, 0.42)], El])
    return {"heart": heart, "head": head, "life": life}


# ----------------------------------------------------------------------------- crease drawing

class CreaseCanvas:
    def __init__(self):
        self.D = np.zeros((R, R), np.uint8)     # groove darkness
        self.H = np.zeros((R, R), np.uint8)     # light edge

    def quick(self, pts, width, depth, light, hl=0.35):
        """Constant-intensity crease in one call (minor wrinkles)."""
        v = int(255 * min(depth * min(width, 1.0), 1.0))
        if v <= 2:
            return
        t = max(1, int(round(width)))
        cv2.polylines(self.D, [fix(pts)], False, v, t, cv2.LINE_AA, SHIFT)
        if hl > 0:
            off = np.asarray(light) * max(width, 1.0) * 0.9
            cv2.polylines(self.H, [fix(pts + off)], False, int(v * hl), t, cv2.LINE_AA, SHIFT)

    def draw(self, rng, pts, width, depth, light, hl=0.35, breaks=0.0, taper=0.12, fade=None):
        """pts already in supersampled pixel coordinates; width in pixels. `fade` (see
        line_styles) dims a long stretch of the crease; its mask is drawn in full all the same."""
        pts = resample(pts, 4.0)
        n = len(pts)
        if n < 2:
            return
        m = 1.0 + smooth_noise(rng, n, k=rng.integers(3, 7), amp=0.35)
        u = np.linspace(0, 1, n)
        tap = np.clip(np.minimum(u, 1 - u) / max(taper, 1e-3), 0, 1) ** 0.6
        val = np.clip(depth * m * tap, 0, 1)
        if fade is not None:
            val = val * fade_profile(u, fade)
        if breaks > 0 and rng.random() < breaks:
            for _ in range(rng.integers(1, 3)):
                a = rng.uniform(0.1, 0.85)
                b = a + rng.uniform(0.03, 0.1)
                val[(u > a) & (u < b)] *= rng.uniform(0.0, 0.3)
        wv = np.maximum(width * (1 + smooth_noise(rng, n, 3, 0.3)), 0.6)
        thin = np.clip(wv, 0.3, 1.0)        # sub-pixel lines: lower intensity instead
        P = fix(pts)
        off = np.asarray(light) * np.maximum(wv, 1.0)[:, None] * 0.9
        Q = fix(pts + off)
        for i in range(n - 1):
            t = max(1, int(round(wv[i])))
            v = int(255 * val[i] * thin[i])
            if v <= 2:
                continue
            cv2.line(self.D, tuple(P[i]), tuple(P[i + 1]), v, t, cv2.LINE_AA, SHIFT)
            if hl > 0:
                cv2.line(self.H, tuple(Q[i]), tuple(Q[i + 1]), int(v * hl), t, cv2.LINE_AA, SHIFT)


# ----------------------------------------------------------------------------- backgrounds

def rand_color(rng, lo=0.0, hi=1.0):
    return rng.uniform(lo, hi, 3).astype(np.float32)


def background(rng, size=R):
    kind = rng.choice(["plain", "plain", "texture", "stucco", "clutter", "stripes"])
    yy, xx = _YY, _XX
    c = rand_color(rng, 0.05, 0.95)
    if rng.random() < 0.4:                    # greyish walls are common
        c = np.full(3, rng.uniform(0.1, 0.9), np.float32) + rng.normal(0, 0.03, 3).astype(np.float32)
    img = np.empty((size, size, 3), np.float32)
    img[:] = c
    a = rng.uniform(0, 2 * math.pi)
    g = (xx * math.cos(a) + yy * math.sin(a))
    img *= (1 + rng.uniform(-0.35, 0.35) * (g - g.mean()))[..., None]
    if kind == "texture":
        n = noise2d(rng, size, int(rng.integers(4, 40)), 3)
        img *= 1 + rng.uniform(0.05, 0.3) * n
    elif kind == "stucco":
        bump = np.zeros((size, size), np.float32)
        for _ in range(int(rng.integers(150, 600))):
            cx, cy = rng.uniform(0, size, 2)
            r = rng.uniform(1, 8)
            cv2.ellipse(bump, (int(cx), int(cy)), (int(r + 1), int(r * rng.uniform(0.4, 1) + 1)),
                        rng.uniform(0, 180), 0, 360, float(rng.uniform(0.5, 1)), -1)
        bump = cv2.GaussianBlur(bump, (0, 0), 1.5)
        sh = np.roll(bump, 2, axis=0) - bump
        img *= (1 + rng.uniform(0.3, 1.2) * sh)[..., None]
    elif kind == "clutter":
        for _ in range(int(rng.integers(3, 18))):
            col = tuple(float(v) for v in rand_color(rng))
            t = rng.integers(0, 4)
            p = rng.uniform(-0.2, 1.2, 4) * size
            if t == 0:
                cv2.rectangle(img, (int(p[0]), int(p[1])), (int(p[2]), int(p[3])), col, -1)
            elif t == 1:
                cv2.ellipse(img, (int(p[0]), int(p[1])), (int(abs(p[2] - p[0]) / 3 + 3), int(abs(p[3] - p[1]) / 3 + 3)),
                            rng.uniform(0, 180), 0, 360, col, -1, cv2.LINE_AA)
            elif t == 2:
                cv2.line(img, (int(p[0]), int(p[1])), (int(p[2]), int(p[3])), col, int(rng.integers(1, 12)), cv2.LINE_AA)
            else:
                pts = rng.uniform(0, size, (int(rng.integers(3, 7)), 2)).astype(np.int32)
                cv2.fillPoly(img, [pts], col, cv2.LINE_AA)
        if rng.random() < 0.5:
            img = cv2.GaussianBlur(img, (0, 0), rng.uniform(0.5, 4))
    elif kind == "stripes":
        f = rng.uniform(10, 80)
        a = rng.uniform(0, math.pi)
        s = np.sin((xx * math.cos(a) + yy * math.sin(a)) * f + rng.uniform(0, 6))
        img *= (1 + rng.uniform(0.03, 0.2) * s)[..., None]
        img *= 1 + 0.05 * noise2d(rng, size, 30, 3)
    img += 0.01 * noise_tile(rng, 0.0)[..., None]
    return np.clip(img, 0, 1)


# ----------------------------------------------------------------------------- skin rendering

def skin_tone(rng, dorsal=False):
    t = rng.uniform(0, len(SKIN) - 1)
    i = int(t)
    f = t - i
    c = SKIN[i] * (1 - f) + SKIN[min(i + 1, len(SKIN) - 1)] * f
    c = c * rng.uniform(0.92, 1.06) + rng.normal(0, 0.02, 3).astype(np.float32)
    c[0] += rng.uniform(-0.02, 0.05)       # redness
    if dorsal:
        c = c * rng.uniform(0.72, 0.95) - np.array([0, 0.02, 0.03], np.float32) * (t / len(SKIN))
    return np.clip(c, 0.05, 1.0).astype(np.float32)


def render_hand(rng, A_ss, bg, h, dorsal=False, lines=None, line_style=None, arm_only=False):
    """Render the hand into bg (R x R x 3 float), A_ss maps canonical -> supersampled pixels.
    Returns the composited image and the hand coverage alpha."""
    ppu = np.linalg.norm(tp(A_ss, [(0.5, 0.5)]) - tp(A_ss, [(-0.5, 0.5)]))   # px per palm width
    mask = np.zeros((R, R), np.uint8)
    parts = []
    if h["has_arm"] or arm_only:
        parts.append(h["arm"])
    if not arm_only:
        parts.append(h["palm"])
        parts += [f["poly"] for f in h["fingers"]]
        parts.append(h["thumb"]["poly"])
    for poly in parts:
        cv2.fillPoly(mask, [fix(tp(A_ss, poly))], 255, cv2.LINE_AA, SHIFT)
    if mask.max() == 0:
        return bg, mask
    a = mask.astype(np.float32) / 255.0
    # cast shadow on the background
    if rng.random() < 0.6:
        off = rng.normal(0, 0.06, 2) * ppu
        M = np.float32([[1, 0, off[0]], [0, 1, off[1]]])
        sh = cv2.warpAffine(a, M, (R, R))
        sh = blur(sh, max(1.0, rng.uniform(0.02, 0.1) * ppu))
        bg = bg * (1 - rng.uniform(0.1, 0.45) * sh)[..., None]

    base = skin_tone(rng, dorsal)
    skin = np.empty((R, R, 3), np.float32)
    skin[:] = base
    # low-frequency blotches / redness
    n = noise2d(rng, R // 4, int(rng.integers(4, 12)), 3)
    n = cv2.resize(n, (R, R), interpolation=cv2.INTER_LINEAR)
    lum = n.mean(2, keepdims=True)
    skin *= 1 + rng.uniform(0.02, 0.07) * lum + 0.012 * (n - lum)
    red = cv2.resize(noise2d(rng, R // 4, int(rng.integers(3, 8)), 1)[..., 0], (R, R))
    skin[..., 1:] *= (1 - rng.uniform(0.0, 0.06) * np.clip(red, 0, None))[..., None]
    # rounded-volume shading: darker toward silhouette edges
    dist = cv2.distanceTransform((mask > 127).astype(np.uint8), cv2.DIST_L2, 3)
    rim = np.exp(-dist / max(1.0, rng.uniform(0.03, 0.08) * ppu))
    skin *= (1 - rng.uniform(0.12, 0.4) * rim)[..., None]
    if not arm_only and not dorsal:
        # mounds (thenar, hypothenar) slightly lighter/pinker, hollow slightly darker
        mound = np.zeros((R, R), np.float32)
        for c, ax in (((0.33, 0.68), (0.22, 0.28)), ((-0.35, 0.62), (0.16, 0.3)), ((0.0, 0.12), (0.45, 0.1))):
            poly = tp(A_ss, cv2.ellipse2Poly((int(c[0] * 1000), int(c[1] * 1000)), (int(ax[0] * 1000), int(ax[1] * 1000)), 0, 0, 360, 20) / 1000.0)
            cv2.fillPoly(mound, [fix(poly)], 1.0, cv2.LINE_AA, SHIFT)
        mound = blur(mound, max(1.0, 0.08 * ppu))
        skin *= (1 + rng.uniform(0.0, 0.04) * mound)[..., None]
        skin[..., 0] *= 1 + rng.uniform(0.0, 0.04) * mound
    # finger outlines / separation shadows
    edges = np.zeros((R, R), np.uint8)
    if not arm_only:
        for f in h["fingers"] + [h["thumb"]]:
            cv2.polylines(edges, [fix(tp(A_ss, f["poly"]))], True, 255, max(1, int(0.012 * ppu)), cv2.LINE_AA, SHIFT)
        inner = np.zeros((R, R), np.uint8)
        cv2.fillPoly(inner, [fix(tp(A_ss, h["palm"]))], 255, cv2.LINE_AA, SHIFT)
        inner = cv2.erode(inner, np.ones((3, 3), np.uint8), iterations=max(1, int(0.01 * ppu)))
        edges = cv2.subtract(edges, inner)
        edges = cv2.GaussianBlur(edges, (0, 0), max(0.7, 0.01 * ppu))
        skin *= (1 - rng.uniform(0.1, 0.35) * edges.astype(np.float32) / 255.0)[..., None]

    # creases
    cc = CreaseCanvas()
    la = rng.uniform(0, 2 * math.pi)
    light = (math.cos(la), math.sin(la))
    strength = rng.uniform(0.35, 1.0)      # how marked this person's creases are
    hl = rng.uniform(0.0, 0.6)
    cw = lambda lo, hi: rng.uniform(lo, hi) * ppu
    if not arm_only:
        if not dorsal:
            # principal lines
            for name, pts in lines.items():
                st = line_style[name]
                drawn = pts
                if "chain" in st:
                    # the lower part as short pieces, each offset across the line and overlapping the next
                    start, pieces = st["chain"]
                    k = max(2, int(start * len(pts)))
                    drawn = pts[:k + 1]
                    rest = resample(pts[k:], 0.01)
                    bounds = np.linspace(0, len(rest) - 1, pieces + 1).astype(int)
                    for a0, a1 in zip(bounds[:-1], bounds[1:]):
                        ext = int(rng.integers(0, 4))
                        seg = rest[max(0, a0 - ext):min(len(rest), a1 + ext + 1)]
                        if len(seg) < 2:
                            continue
                        d = seg[-1] - seg[0]
                        nrm = np.array([-d[1], d[0]]) / max(np.linalg.norm(d), 1e-6)
                        seg = seg + nrm * rng.normal(0, 0.008)
                        cc.draw(rng, tp(A_ss, seg), st["width"] * ppu * rng.uniform(0.6, 1.0),
                                st["depth"] * strength * rng.uniform(0.35, 0.9), light, hl, taper=0.3)
                cc.draw(rng, tp(A_ss, drawn), st["width"] * ppu, st["depth"] * strength, light, hl,
                        breaks=st["breaks"], taper=st["taper"], fade=st.get("fade"))
                if "parallel" in st:
                    # a crease alongside this line that does not start where it starts
                    off, u0, u1, depth = st["parallel"]
                    P = resample(pts, 0.01)
                    seg = P[int(u0 * (len(P) - 1)):int(u1 * (len(P) - 1)) + 1]
                    if len(seg) >= 2:
                        tang = np.gradient(seg, axis=0)
                        nrm = np.stack([-tang[:, 1], tang[:, 0]], 1) / np.maximum(np.linalg.norm(tang, axis=1, keepdims=True), 1e-6)
                        cc.draw(rng, tp(A_ss, seg + off * nrm), st["width"] * ppu * rng.uniform(0.7, 1.2),
                                st["depth"] * strength * depth, light, hl, breaks=0.3)
                for _ in range(st["branches"]):
                    i = rng.integers(3, len(pts) - 3)
                    p0 = pts[i]
                    ang = rng.uniform(0, 2 * math.pi)
                    ln = rng.uniform(0.04, 0.15)
                    q = p0 + ln * np.array([math.cos(ang), math.sin(ang)])
                    br = bezier([p0, (p0 + q) / 2 + rng.normal(0, 0.02, 2), q], 12)
                    cc.draw(rng, tp(A_ss, br), st["width"] * ppu * 0.7, st["depth"] * strength * rng.uniform(0.3, 0.8), light, hl)
            L = h["L"]
            U = rng.uniform
            # folds across the base of the palm, through where the life line ends (fades=2)
            for _ in range(line_style.get("wrist_folds", 0)):
                y = L * U(0.8, 0.98)
                fold = bezier([(U(-0.5, -0.2), y + U(-0.04, 0.04)), (U(0.0, 0.2), y + U(-0.02, 0.06)),
                               (U(0.4, 0.55), y + U(-0.08, 0.02))], 24)
                cc.draw(rng, tp(A_ss, fold), cw(0.005, 0.016), strength * U(0.15, 0.6), light, hl, breaks=0.4)
            # fate / sun lines, thumb web creases, thenar hatching: strong distractors
            if rng.random() < 0.55:
                p0 = np.array([U(-0.12, 0.12), L * U(0.85, 1.0)])
                p1 = np.array([U(-0.12, 0.15), U(0.12, 0.55)])
                cc.draw(rng, tp(A_ss, bezier([p0, (p0 + p1) / 2 + rng.normal(0, 0.04, 2), p1], 30)),
                        cw(0.006, 0.016), strength * U(0.1, 0.45), light, hl, breaks=0.5)
            if rng.random() < 0.3:
                p0 = np.array([U(-0.35, -0.15), U(0.35, 0.8)])
                p1 = p0 + [U(-0.05, 0.05), -U(0.15, 0.4)]
                cc.draw(rng, tp(A_ss, bezier([p0, p1], 20)), cw(0.005, 0.012), strength * U(0.1, 0.35), light, hl)
            for _ in range(int(rng.integers(0, 6))):
                c0 = np.array([U(0.35, 0.62), h["web"] + U(0.0, 0.35)])
                ang = U(-1.2, 0.6)
                ln = U(0.06, 0.2)
                p1 = c0 + ln * np.array([math.cos(ang), math.sin(ang)])
                cc.draw(rng, tp(A_ss, bezier([c0, (c0 + p1) / 2 + rng.normal(0, 0.015, 2), p1], 12)),
                        cw(0.004, 0.012), strength * U(0.1, 0.5), light, hl)
            # many minor wrinkles anywhere on the palm
            for _ in range(int(rng.integers(30, 160))):
                c0 = np.array([U(-0.55, 0.6), U(0.0, L)])
                ang = U(0, 2 * math.pi)
                ln = U(0.02, 0.16)
                p1 = c0 + ln * np.array([math.cos(ang), math.sin(ang)])
                cc.quick(tp(A_ss, bezier([c0, (c0 + p1) / 2 + rng.normal(0, 0.01, 2), p1], 6)),
                         cw(0.002, 0.008), strength * U(0.04, 0.3), light, hl * 0.5)
            # finger joint creases (palmar)
            for f in h["fingers"] + [h["thumb"]]:
                for pos in ((0.1, 0.45, 0.72) if f is not h["thumb"] else (0.62, 0.8)):
                    s = f["len"] * (pos + rng.normal(0, 0.03))
                    for k in range(int(rng.integers(1, 3))):
                        c0 = f["base"] + f["d"] * (s + k * 0.025)
                        w = f["w"] * 0.42
                        br = bezier([c0 - f["n"] * w, c0 + f["d"] * rng.normal(0, 0.02), c0 + f["n"] * w], 10)
                        cc.quick(tp(A_ss, br), cw(0.004, 0.01), strength * U(0.2, 0.7), light, hl)
        else:
            # back of the hand: knuckle wrinkles, nails, tendons
            nails = np.zeros((R, R), np.float32)
            for f in h["fingers"] + [h["thumb"]]:
                for pos in (0.4, 0.7):
                    s = f["len"] * (pos + rng.normal(0, 0.03))
                    for k in range(int(rng.integers(2, 6))):
                        c0 = f["base"] + f["d"] * (s + (k - 2) * 0.02)
                        w = f["w"] * rng.uniform(0.2, 0.4)
                        br = bezier([c0 - f["n"] * w, c0 + f["d"] * rng.normal(0, 0.02), c0 + f["n"] * w], 8)
                        cc.quick(tp(A_ss, br), cw(0.003, 0.008), strength * rng.uniform(0.1, 0.4), light, hl)
                tipc = f["base"] + f["d"] * (f["len"] - f["w"] * 0.55)
                ell = tipc + np.array([[math.cos(t), math.sin(t)] for t in np.linspace(0, 2 * math.pi, 16)]) @ np.stack([f["n"] * f["w"] * 0.32, f["d"] * f["w"] * 0.42])
                cv2.fillPoly(nails, [fix(tp(A_ss, ell))], 1.0, cv2.LINE_AA, SHIFT)
            nails = cv2.GaussianBlur(nails, (0, 0), 1.0)[..., None]
            skin = skin * (1 - 0.5 * nails) + 0.5 * nails * np.array([0.95, 0.8, 0.8], np.float32)
            for xk in (-0.3, -0.1, 0.1, 0.3):
                p0 = np.array([xk, 0.1]); p1 = np.array([xk * 0.4, h["L"] * 0.9])
                cc.draw(rng, tp(A_ss, bezier([p0, p1], 12)), cw(0.02, 0.04), rng.uniform(0.0, 0.12), light, 0.5, taper=0.4)
            for _ in range(int(rng.integers(10, 60))):
                c0 = np.array([rng.uniform(-0.5, 0.55), rng.uniform(0, h["L"])])
                ang = rng.uniform(0, 2 * math.pi)
                p1 = c0 + rng.uniform(0.02, 0.12) * np.array([math.cos(ang), math.sin(ang)])
                cc.quick(tp(A_ss, bezier([c0, p1], 4)), cw(0.002, 0.006), strength * rng.uniform(0.05, 0.25), light, 0)
    # wrist bracelet lines / forearm creases
    if h["has_arm"] or arm_only:
        L = h["L"]
        for k in range(int(rng.integers(0, 4))):
            y = L + 0.02 + k * rng.uniform(0.03, 0.08)
            br = bezier([(-0.38, y), (0.0, y + rng.normal(0.02, 0.02)), (0.38, y)], 20)
            cc.draw(rng, tp(A_ss, br), cw(0.005, 0.014), strength * rng.uniform(0.2, 0.7), light, hl, breaks=0.4)
        if arm_only:
            for _ in range(int(rng.integers(0, 5))):
                y = L + rng.uniform(0.2, 2.0)
                br = bezier([(-0.35, y), (0.0, y + rng.normal(0.0, 0.04)), (0.35, y)], 12)
                cc.draw(rng, tp(A_ss, br), cw(0.005, 0.014), strength * rng.uniform(0.1, 0.5), light, hl, breaks=0.4)

    D = cc.D.astype(np.float32) / 255.0
    Hh = cc.H.astype(np.float32) / 255.0
    # groove softness: crisp to soft and wide (phone photos of shallow creases look like the latter)
    bs = max(0.5, 0.006 * ppu * (rng.uniform(0.5, 1.5) if rng.random() < 0.6 else rng.uniform(1.5, 3.0)))
    D = cv2.GaussianBlur(D, (0, 0), bs)
    Hh = cv2.GaussianBlur(Hh, (0, 0), bs * 1.3)
    tint = np.array([0.78, 1.0, 1.08], np.float32) * rng.uniform(0.85, 1.15)
    skin = skin * (1 - np.clip(D[..., None] * tint, 0, 0.95)) + Hh[..., None] * 0.35
    # pores / fine texture
    tex = noise_tile(rng, rng.choice([0.6, 1.0, 1.5]))
    skin *= (1 + rng.uniform(0.01, 0.06) * tex)[..., None]
    # specular highlights
    if rng.random() < 0.3:
        spec = np.zeros((R, R), np.float32)
        for _ in range(int(rng.integers(1, 4))):
            c0 = tp(A_ss, [(rng.uniform(-0.4, 0.5), rng.uniform(0.1, 1.0))])[0]
            ax = (int(rng.uniform(0.05, 0.25) * ppu) + 1, int(rng.uniform(0.05, 0.2) * ppu) + 1)
            cv2.ellipse(spec, (int(c0[0]), int(c0[1])), ax, rng.uniform(0, 180), 0, 360, 1.0, -1)
        spec = blur(spec, max(1.0, 0.07 * ppu))
        skin += rng.uniform(0.04, 0.2) * spec[..., None] * (1 - 0.5 * D[..., None])
    img = bg * (1 - a[..., None]) + skin * a[..., None]
    return img, mask


# ----------------------------------------------------------------------------- sample assembly

ASPECTS = [(4, 3), (3, 4), (16, 9), (9, 16), (1, 1), (3, 2), (2, 3), (4, 3), (3, 4)]


def fade_profile(u, fade):
    """Intensity factor along a crease (u in 0..1) for a fade (where, start, length, floor):
    the crease dims to `floor` x its depth over a long stretch, with smooth shoulders: from
    `start` to the end ("end"), from the beginning to `start` ("start"), or over
    [start, start + length] ("mid")."""
    where, start, length, floor = fade
    ramp = 0.08
    if where == "end":
        k = np.clip((u - start) / ramp, 0, 1)
    elif where == "start":
        k = np.clip((start - u) / ramp, 0, 1)
    else:
        k = np.clip(np.minimum(u - start, start + length - u) / ramp, 0, 1)
    k = k * k * (3 - 2 * k)
    return 1.0 - (1.0 - floor) * k


def line_styles(rng, fades=False):
    """Per principal line: width, depth, breaks, taper, branches; with `fades` (a generator
    option, off for the evaluation sets so that their seeds draw the same samples as before),
    also, for 60% of the lines, a long stretch (20-65% of the crease) dimmed to 15-50% of its
    depth: real creases often run on faint for a third or half of their length.
    `fades=2` (palm-lines 2.1's training sets) adds what hides a line's course on real palms:
    the life line's lower part very faint (4-25% of its depth) or broken into a chain of short
    offset pieces, folds across the base of the palm where the life line ends, and creases
    parallel to the head line that do not start where it starts (see hard_extras). `fades=3`
    keeps only the parallel creases (the same draws: a `fades=3` set is its `fades=2` twin
    without the lower-life extras and the folds)."""
    st = {}
    for name in ("heart", "head", "life"):
        st[name] = dict(width=rng.uniform(0.007, 0.026), depth=rng.uniform(0.15, 0.6),
                        breaks=0.35, taper=rng.uniform(0.05, 0.25),
                        branches=int(rng.integers(0, 3)))
    # occasionally one line is very faint
    if rng.random() < 0.2:
        st[rng.choice(["heart", "head", "life"])]["depth"] *= rng.uniform(0.35, 0.7)
    if fades:
        for name in ("heart", "head", "life"):
            if rng.random() < 0.6:
                where = ("start", "end", "mid")[rng.integers(3)]
                length = rng.uniform(0.2, 0.45)
                start = {"start": rng.uniform(0.2, 0.5), "end": rng.uniform(0.35, 0.8),
                         "mid": rng.uniform(0.15, 0.85 - length)}[where]
                st[name]["fade"] = (where, start, length, rng.uniform(0.15, 0.5))
    if fades in (2, 3):
        hard_extras(rng, st, parallel_only=fades == 3)
    return st


def hard_extras(rng, st, parallel_only=False):
    """The extras of `fades=2` (line_styles), drawn by render_hand; masks stay the true lines.
    `parallel_only` (fades=3) makes the same draws and keeps only the head line's parallel crease."""
    U = rng.uniform
    life = {}
    if rng.random() < 0.4:
        life["fade"] = ("end", U(0.4, 0.7), 0.0, U(0.04, 0.25))
    if rng.random() < 0.35:
        life["chain"] = (U(0.45, 0.7), int(rng.integers(2, 5)))
    if rng.random() < 0.35:
        side = 1.0 if rng.random() < 0.5 else -1.0
        st["head"]["parallel"] = (side * U(0.035, 0.09), U(0.1, 0.35), U(0.7, 1.0), U(0.6, 1.1))
    folds = int(rng.integers(1, 4)) if rng.random() < 0.5 else 0
    if not parallel_only:
        st["life"].update(life)
        st["wrist_folds"] = folds


def hand_pose(rng, photo_w, photo_h, h, scene):
    """canonical -> photo pixel transform."""
    short = min(photo_w, photo_h)
    u = math.exp(rng.uniform(math.log(0.12), math.log(0.62)))
    scale = u * short
    if rng.random() < 0.7:
        rot = math.radians(float(np.clip(rng.normal(0, 22), -50, 50)))
    else:
        rot = rng.uniform(-math.pi, math.pi)
    mirror = S(-1, 1) if rng.random() < 0.5 else np.eye(3)
    # mild perspective around the palm centre + foreshortening
    P = np.eye(3)
    P[2, 0], P[2, 1] = rng.uniform(-0.25, 0.25), rng.uniform(-0.25, 0.25)
    fs = S(rng.uniform(0.8, 1.08), rng.uniform(0.85, 1.1))
    pc = (0.0, h["L"] / 2)
    if rng.random() < 0.85:
        cx, cy = rng.uniform(0.2, 0.8) * photo_w, rng.uniform(0.25, 0.8) * photo_h
    else:
        cx, cy = rng.uniform(0.0, 1.0) * photo_w, rng.uniform(0.0, 1.0) * photo_h
    return T(cx, cy) @ Rot(rot) @ S(scale) @ fs @ mirror @ P @ T(-pc[0], -pc[1])


def letterbox_view(pw, ph):
    s = OUT / max(pw, ph)
    return T((OUT - pw * s) / 2, (OUT - ph * s) / 2) @ S(s)


def crop_view(rng, box, jitter=True, margin=None):
    x0, y0, x1, y1 = box
    w, hgt = x1 - x0, y1 - y0
    if jitter:
        sz = max(w, hgt)
        x0 += rng.normal(0, 0.05) * sz; x1 += rng.normal(0, 0.05) * sz
        y0 += rng.normal(0, 0.05) * sz; y1 += rng.normal(0, 0.05) * sz
        w, hgt = max(x1 - x0, 1e-3), max(y1 - y0, 1e-3)
    m = rng.uniform(0.05, 0.35) if margin is None else margin
    x0 -= m * w; x1 += m * w; y0 -= m * hgt; y1 += m * hgt
    side = max(x1 - x0, y1 - y0)
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    s = OUT / side
    return S(s) @ T(-(cx - side / 2), -(cy - side / 2))


# Canonical palm frame, the engine's src/landmarks/palm-frame.ts (keep the two in step):
# from MediaPipe landmarks w = 0 (wrist), m = 9 (middle MCP), i = 5 (index MCP), p = 17 (little
# MCP): +y runs from m toward w, +x across it, mirrored where needed so the index is on +x (every
# hand seen as a right palm); centre (w + m) / 2; side FRAME_SIDE x max(|m - w|, FRAME_WIDTH x |i - p|).
# The side is the engine's FRAME_SIDE (1.7) unless SYNTH_FRAME sets another (training/run.sh FRAME; issue 28, item 2):
# a smaller side shows the palm larger in the same view, and the exported file says so (frame_side).
DEFAULT_FRAME_SIDE = 1.7
FRAME_SIDE = float(os.environ.get("SYNTH_FRAME", DEFAULT_FRAME_SIDE))
FRAME_WIDTH = 1.3


def palm_px(side):
    """Pixels of a view `side` px across at FRAME_SIDE per pixel of the 256 px view at 1.7: what a length on the
    palm given in the latter's pixels (the training's pixel constants) is in the former's."""
    return side / 256 * DEFAULT_FRAME_SIDE / FRAME_SIDE


def check_frame(frame, what):
    """Data or weights made at another frame side than this run's cannot go into it: `what` ("X was rendered") names them."""
    if frame != FRAME_SIDE:
        raise SystemExit(f"{what} at frame side {frame}, this run's is {FRAME_SIDE} (SYNTH_FRAME)")
# Where MediaPipe's landmarks sit on the generator's hand (canonical units, palm width ~1):
# the wrist at the middle of the wrist crease, each MCP joint MCP_DROP below its finger's base.
MCP_DROP = 0.10


def pseudo_landmarks(h):
    """The landmarks the frame uses, on the generator's canonical hand: {index: (x, y)}."""
    f = h["fingers"]                       # little, ring, middle, index
    mcp = lambda k: f[k]["base"] + np.array([0.0, MCP_DROP])
    return {0: np.array([0.0, h["L"] - 0.02]), 5: mcp(3), 9: mcp(2), 13: mcp(1), 17: mcp(0)}


def palm_frame(lm):
    """(centre, ex, ey, side) of the canonical frame from landmarks {0, 5, 9, 17} in pixels."""
    w, m, i, p = (np.asarray(lm[k], np.float64) for k in (0, 9, 5, 17))
    up = m - w
    d = max(float(np.linalg.norm(up)), 1e-6)
    ey = -up / d
    ex = np.array([ey[1], -ey[0]])
    if float(np.dot(i - p, ex)) < 0:
        ex = -ex
    side = FRAME_SIDE * max(d, FRAME_WIDTH * float(np.linalg.norm(i - p)))
    return (w + m) / 2, ex, ey, side


def frame_view(centre, ex, ey, side):
    """photo pixels -> output pixels of the canonical frame (output pixel u has its centre at u + 0.5)."""
    k = OUT / side
    return np.array([[ex[0] * k, ex[1] * k, OUT / 2 - k * float(np.dot(centre, ex))],
                     [ey[0] * k, ey[1] * k, OUT / 2 - k * float(np.dot(centre, ey))],
                     [0.0, 0.0, 1.0]])


def canonical_view(rng, P, h):
    """The engine's canonical view of the hand placed by P, from landmarks with the error of a
    landmark model: each landmark moved by ~3% of the palm width, then the frame itself turned
    (sd 5 deg), scaled (sd 8%) and shifted (sd 4% of its side)."""
    lm = {k: tp(P, [v + rng.normal(0, 0.03, 2)])[0] for k, v in pseudo_landmarks(h).items()}
    c, ex, ey, side = palm_frame(lm)
    a = math.radians(rng.normal(0, 5))
    ca, sa = math.cos(a), math.sin(a)
    ex, ey = ca * ex + sa * ey, -sa * ex + ca * ey
    side *= math.exp(rng.normal(0, 0.08))
    c = c + rng.normal(0, 0.04, 2) * side
    return frame_view(c, ex, ey, side)


def camera_effects(rng, img, upscale):
    """img: OUT x OUT x 3 float 0-1."""
    if upscale > 1.15:                             # low-resolution source stretched up
        k = min(upscale, 4.0)
        small = cv2.resize(img, (max(8, int(OUT / k)), max(8, int(OUT / k))), interpolation=cv2.INTER_AREA)
        img = cv2.resize(small, (OUT, OUT), interpolation=cv2.INTER_LINEAR)
    if rng.random() < 0.35:
        img = cv2.GaussianBlur(img, (0, 0), rng.uniform(0.3, 1.1))
    if rng.random() < 0.08:
        k = int(rng.integers(3, 7))
        ker = np.zeros((k, k), np.float32)
        ker[k // 2, :] = 1.0 / k
        M = cv2.getRotationMatrix2D((k / 2 - 0.5, k / 2 - 0.5), rng.uniform(0, 180), 1.0)
        ker = cv2.warpAffine(ker, M, (k, k))
        ker /= max(ker.sum(), 1e-6)
        img = cv2.filter2D(img, -1, ker)
    # exposure, gamma, white balance / colour cast
    img = img * rng.uniform(0.8, 1.2)
    img = np.clip(img, 0, 1) ** rng.uniform(0.75, 1.3)
    img = img * (1 + rng.normal(0, 0.06, 3)).astype(np.float32)
    if rng.random() < 0.5:
        gray = img.mean(2, keepdims=True)
        img = gray + (img - gray) * rng.uniform(0.6, 1.3)
    sig = rng.uniform(0.0, 0.035)
    img = img + rng.normal(0, sig, img.shape).astype(np.float32) + \
        rng.normal(0, sig * 0.5, (OUT, OUT, 1)).astype(np.float32)
    img = np.clip(img * 255 + 0.5, 0, 255).astype(np.uint8)
    if rng.random() < 0.75:
        ok, buf = cv2.imencode(".jpg", img, [cv2.IMWRITE_JPEG_QUALITY, int(rng.integers(30, 96))])
        img = cv2.imdecode(buf, cv2.IMREAD_UNCHANGED)
    return img


def lighting(rng, img, A_ss):
    yy, xx = _YY, _XX
    a = rng.uniform(0, 2 * math.pi)
    g = xx * math.cos(a) + yy * math.sin(a)
    img = img * (1 + rng.uniform(0, 0.5) * (g - 0.5))[..., None]
    if rng.random() < 0.3:                      # soft cast shadow across the frame
        sh = np.zeros((R, R), np.float32)
        pts = rng.uniform(-0.2, 1.2, (int(rng.integers(3, 6)), 2)) * R
        cv2.fillPoly(sh, [pts.astype(np.int32)], 1.0)
        sh = blur(sh, rng.uniform(3, 30))
        img = img * (1 - rng.uniform(0.15, 0.5) * sh)[..., None]
    return img


DEFAULT_MIX = (0.35, 0.50, 0.15)   # shares of scenes, crops, negatives


def clipped_area(poly, rect):
    """Area of polygon `poly` (Nx2) inside the convex polygon `rect` (4x2, either orientation):
    Sutherland-Hodgman clipping (exact for any subject polygon against a convex clip), then the
    shoelace formula."""
    rect = np.asarray(rect, float)
    orient = np.sign(np.cross(rect[1] - rect[0], rect[2] - rect[1]))
    out = [tuple(p) for p in np.asarray(poly, float)]
    for k in range(len(rect)):
        a, b = rect[k], rect[(k + 1) % len(rect)]
        side = lambda p: orient * ((b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0]))
        src, out = out, []
        for j in range(len(src)):
            p, q = np.array(src[j - 1]), np.array(src[j])
            sp, sq = side(p), side(q)
            if sq >= 0:
                if sp < 0:
                    out.append(tuple(p + (q - p) * sp / (sp - sq)))
                out.append(tuple(q))
            elif sp >= 0:
                out.append(tuple(p + (q - p) * sp / (sp - sq)))
        if not out:
            return 0.0
    x, y = np.array(out).T
    return float(abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def generate(rng, kind=None, neg_kind=None, mix=DEFAULT_MIX, recrop=None, info=None, fades=False, pose=None,
             aspects=None):
    """Returns (image uint8 HxWx3 RGB, mask uint8 HxW bitfield, kind).

    recrop=(box, margin) re-renders a whole-photo sample (a scene, or a negative drawn as a
    whole photo) the way the engine's second pass sees it: `box` (x0, y0, x1, y1) is the palm
    box the first pass found on this sample's 256 letterboxed image; the photo region it covers,
    expanded by `margin` x its size on each side and made square, is drawn at 256x256 from the
    photo's full resolution (not upsampled from the 256 image). The hand, pose and photo are the
    sample's own (same rng draws); background texture, lighting and noise are drawn anew at
    that view. Samples drawn as crops ignore `recrop`. `info` (a dict), when given, receives
    `recropped` (bool) and `palm_area`: the area of the palm inside the photo, in output pixels
    of the returned view (the ground truth of a palm IoU that counts palm outside the view).
    `fades` turns on the long faint stretches of line_styles (training sets from 1.4.0 on).
    `pose` and `aspects` replace hand_pose and ASPECTS (hand_photo's upright view)."""
    if kind is None:
        r = rng.random() * sum(mix)
        kind = KIND_SCENE if r < mix[0] else (KIND_CROP if r < mix[0] + mix[1] else KIND_NEG)
    aspects = aspects or ASPECTS
    aw, ah = aspects[rng.integers(len(aspects))]
    long_px = rng.uniform(640, 4032)
    pw, ph = (long_px, long_px * ah / aw) if aw >= ah else (long_px * aw / ah, long_px)
    h = sample_hand(rng)
    P = (pose or hand_pose)(rng, pw, ph, h, kind == KIND_SCENE)
    photo_rect = np.array([(0, 0), (pw, 0), (pw, ph), (0, ph)])

    canon = kind in (KIND_CANON, KIND_CANON_NEG)
    negative = kind in (KIND_NEG, KIND_CANON_NEG)
    if kind == KIND_CANON_NEG:
        neg_kind = "dorsal"
    elif kind == KIND_NEG:
        neg_kind = neg_kind or rng.choice(["dorsal", "dorsal", "background", "arm"])
    crop_mode = not canon and pose is None and (kind == KIND_CROP or (kind == KIND_NEG and rng.random() < 0.6))

    palm_photo = tp(P, h["palm"])
    if canon:
        V = canonical_view(rng, P, h)
    elif crop_mode:
        if kind == KIND_NEG and neg_kind == "background":
            side = rng.uniform(0.2, 1.0) * min(pw, ph)
            x0, y0 = rng.uniform(0, pw - side), rng.uniform(0, ph - side)
            box = (x0, y0, x0 + side, y0 + side)
        else:
            src = palm_photo if neg_kind != "arm" else tp(P, h["arm"])
            x0, y0 = np.clip(src.min(0), 0, [pw, ph])
            x1, y1 = np.clip(src.max(0), 0, [pw, ph])
            if x1 - x0 < 4 or y1 - y0 < 4:
                x0, y0, x1, y1 = src.min(0)[0], src.min(0)[1], src.max(0)[0], src.max(0)[1]
            box = (x0, y0, x1, y1)
        V = crop_view(rng, box)
    elif recrop is not None:
        (bx0, by0, bx1, by1), margin = recrop
        Li = np.linalg.inv(letterbox_view(pw, ph))
        (x0, y0), (x1, y1) = tp(Li, [(bx0, by0), (bx1, by1)])
        V = crop_view(None, (x0, y0, x1, y1), jitter=False, margin=margin)
    else:
        V = letterbox_view(pw, ph)
    if info is not None:
        info["recropped"] = recrop is not None and not crop_mode
        info["palm_area"] = clipped_area(tp(V @ P, h["palm"]), tp(V, photo_rect)) if not negative else 0.0
    A = V @ P                     # canonical -> output pixels
    A_ss = S(SS) @ A
    ppu = float(np.linalg.norm(tp(A, [(0.5, 0.5)]) - tp(A, [(-0.5, 0.5)])))
    photo_ppu = float(np.linalg.norm(tp(P, [(0.5, 0.5)]) - tp(P, [(-0.5, 0.5)])))
    upscale = ppu / max(photo_ppu, 1e-3)

    bg = background(rng)
    lines = principal_lines(rng, h) if not negative else None
    if kind == KIND_NEG and neg_kind == "background":
        img = bg
        if rng.random() < 0.5:   # skin-coloured blobs / objects
            for _ in range(int(rng.integers(1, 4))):
                c0 = rng.uniform(0, R, 2)
                ax = rng.uniform(10, R / 3, 2)
                col = tuple(float(v) for v in skin_tone(rng))
                cv2.ellipse(img, (int(c0[0]), int(c0[1])), (int(ax[0]), int(ax[1])), rng.uniform(0, 180), 0, 360, col, -1, cv2.LINE_AA)
                if rng.random() < 0.5:
                    for _ in range(int(rng.integers(1, 5))):
                        p = rng.uniform(0, R, 4)
                        cv2.line(img, (int(p[0]), int(p[1])), (int(p[2]), int(p[3])), (0.4, 0.3, 0.25), 1, cv2.LINE_AA)
    else:
        img, _ = render_hand(rng, A_ss, bg, h, dorsal=(neg_kind == "dorsal"), lines=lines,
                             line_style=line_styles(rng, fades), arm_only=(neg_kind == "arm"))
    img = lighting(rng, img, A_ss)
    img = cv2.resize(np.clip(img, 0, 1).astype(np.float32), (OUT, OUT), interpolation=cv2.INTER_AREA)
    img = camera_effects(rng, img, upscale)
    # black outside the photo (letterbox bands / crop overhang), exactly 0 like the engine pads
    content = np.zeros((OUT, OUT), np.uint8)
    cv2.fillPoly(content, [fix(tp(V, photo_rect))], 1, cv2.LINE_8, SHIFT)
    img = img * content[..., None]

    mask = np.zeros((OUT, OUT), np.uint8)
    if not negative:
        palm = np.zeros((OUT, OUT), np.uint8)
        cv2.fillPoly(palm, [fix(tp(A, h["palm"]))], 1, cv2.LINE_8, SHIFT)
        palm &= content
        mask |= palm
        thick = int(np.clip(round(0.0175 * ppu), 1, 5))
        palm_d = cv2.dilate(palm, np.ones((3, 3), np.uint8))
        for bit, name in ((1, "heart"), (2, "head"), (3, "life")):
            m = np.zeros((OUT, OUT), np.uint8)
            cv2.polylines(m, [fix(tp(A, lines[name]))], False, 1, thick, cv2.LINE_8, SHIFT)
            mask |= (m & palm_d) << bit
    return img, mask, kind


def upright_pose(rng, pw, ph, h, scene):
    """A hand held up to the camera: upright within 15 degrees, left or right, whole in a portrait photo."""
    rot = math.radians(rng.uniform(-15, 15))
    mirror = S(-1, 1) if rng.random() < 0.5 else np.eye(3)
    return T(pw / 2, ph * 0.6) @ Rot(rot) @ S(0.42 * min(pw, ph)) @ mirror @ T(0.0, -h["L"] / 2)


def hand_photo(rng, fades=True, dorsal=False):
    """A 3:4 portrait photo of one whole, upright hand (the README's sample and the engine's
    whole-hand test fixtures), its palm or (`dorsal`) its back: (image, mask) at OUT pixels high,
    without the letterbox bands."""
    kind, neg = (KIND_NEG, "dorsal") if dorsal else (KIND_SCENE, None)
    img, mask, _ = generate(rng, kind, neg, fades=fades, pose=upright_pose, aspects=[(3, 4)])
    cols = np.where(img.max(axis=(0, 2)) > 0)[0]
    return img[:, cols.min():cols.max() + 1], mask[:, cols.min():cols.max() + 1]


def sample(seed, index, kind=None, mix=DEFAULT_MIX, recrop=None, info=None, fades=False):
    rng = np.random.default_rng([int(seed), int(index)])
    return generate(rng, kind, mix=mix, recrop=recrop, info=info, fades=fades)


def unpack(mask):
    """bitfield HxW -> 4xHxW uint8 {0,1}"""
    return np.stack([(mask >> b) & 1 for b in range(4)])
