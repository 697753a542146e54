/**
 * Post-processing of the line model's probability maps in the palm frame: connected components,
 * the palm check, the plausible component per line, and the full-size masks (bilinear
 * upsampling of the probabilities through the frame, then the threshold).
 */
import type { BoxMask } from "../image/mask.js";
import type { Point } from "../landmarks/geometry.js";
import { FRAME_SIDE, frameToImage, imageToFrame, type PalmFrame } from "../landmarks/palm-frame.js";
import { walk } from "./line-geometry.js";
import LINE_RULES_TABLE from "./line-rules.json" with { type: "json" };

/**
 * LINE_RULES are the constants of {@link selectLine} and {@link growLine}, from the one table
 * training/line_rules.py reads too (./line-rules.json, where each is explained); lengths are
 * shares of {@link ruleUnit}. test/unit/inference/line-rules-parity.spec.ts holds the
 * two implementations together.
 */
export const LINE_RULES = Object.freeze({
  nearPalm: LINE_RULES_TABLE.near_palm,
  plausibleShare: LINE_RULES_TABLE.plausible_share,
  speckShare: LINE_RULES_TABLE.speck_share,
  speckMinPixels: LINE_RULES_TABLE.speck_min_pixels,
  pieceGap: LINE_RULES_TABLE.piece_gap,
  pieceMass: LINE_RULES_TABLE.piece_mass,
  pieceReach: LINE_RULES_TABLE.piece_reach,
  tipSteps: LINE_RULES_TABLE.tip_steps,
});

/**
 * ruleUnit is the length in view pixels that LINE_RULES' lengths are shares of: the side S of a
 * view framed at FRAME_SIDE palm sizes (where the rules were chosen), and S x FRAME_SIDE /
 * frameSide for a model framed tighter or wider, so that each rule spans the same share of the
 * palm in any frame (line-rules-parity.spec, "a model framed at 1.3").
 */
export function ruleUnit(size: number, frameSide: number): number {
  // FRAME_SIDE / frameSide is exactly 1 at FRAME_SIDE, so a 1.7-frame model's rules are unchanged bit for bit.
  return size * (FRAME_SIDE / frameSide);
}

/** Components is a labelling of a binary S x S map. */
export interface Components {
  /** Per pixel: 0 for background, else the component number 1..count. */
  labels: Int32Array;
  count: number;
  /** sizes[k] = pixels of component k (index 0 unused). */
  sizes: Int32Array;
}

/**
 * labelComponents finds the 8-connected components of the pixels where `prob > threshold`.
 */
export function labelComponents(prob: Float32Array, width: number, height: number, threshold: number): Components {
  const n = width * height;
  const labels = new Int32Array(n);
  const stack = new Int32Array(n);
  const sizes: number[] = [0];
  let count = 0;
  for (let i = 0; i < n; i++) {
    if (labels[i] !== 0 || !(prob[i] > threshold)) continue;
    count++;
    let size = 0;
    let sp = 0;
    stack[sp++] = i;
    labels[i] = count;
    while (sp > 0) {
      const p = stack[--sp];
      size++;
      const x = p % width;
      const y = (p - x) / width;
      for (let dy = -1; dy <= 1; dy++) {
        const yy = y + dy;
        if (yy < 0 || yy >= height) continue;
        for (let dx = -1; dx <= 1; dx++) {
          const xx = x + dx;
          if (xx < 0 || xx >= width) continue;
          const q = yy * width + xx;
          if (labels[q] === 0 && prob[q] > threshold) {
            labels[q] = count;
            stack[sp++] = q;
          }
        }
      }
    }
    sizes.push(size);
  }
  return { labels, count, sizes: Int32Array.from(sizes) };
}

/** largestComponent is the number of the largest component (the first of equals), 0 when none. */
function largestComponent(comps: Components): number {
  let best = 0;
  for (let k = 1; k <= comps.count; k++) if (best === 0 || comps.sizes[k] > comps.sizes[best]) best = k;
  return best;
}

/**
 * palmShare is the share of an S x S map (0..1) covered by the largest component of the palm
 * channel above `threshold`: how much palm the line model sees in the palm frame. The pipeline
 * compares it with the model's `crop.min_palm` to confirm the landmarker's palm.
 */
export function palmShare(palmProb: Float32Array, size: number, threshold: number): number {
  const comps = labelComponents(palmProb, size, size, threshold);
  return comps.sizes[largestComponent(comps)] / (size * size);
}

/** LineMissReason says why {@link selectLine} found no line (see LineStats.reason in the proto). */
export type LineMissReason = "" | "not_visible" | "implausible" | "low_confidence";

/** LineSelection is the outcome of {@link selectLine} at model resolution. */
export interface LineSelection {
  /** Enough pixels and confidence in the kept component(s). */
  detected: boolean;
  /** S x S, 1 on the kept pixels (all zero when not detected). */
  kept: Uint8Array;
  /** Kept pixels at model resolution. */
  pixels: number;
  /** Mean probability over the kept pixels, 0 when none. */
  meanProb: number;
  /** Why not detected: nothing above the threshold, nothing on the palm, or too weak; "" when detected. */
  why: LineMissReason;
}

/** SelectLineOptions are the model's settings for {@link selectLine}, in model-resolution pixels. */
export interface SelectLineOptions {
  /** Line decision threshold. */
  threshold: number;
  /** Detected when kept pixels >= minPixels ... */
  minPixels: number;
  /** ... and mean probability >= minConfidence. */
  minConfidence: number;
  /**
   * {@link palmDistanceMap} of the same pass's palm channel, for the "on the palm" test;
   * null or omitted skips the test.
   */
  palmDistance?: Float32Array | null;
  /** {@link ruleUnit} of the model's frame; S when omitted. */
  unit?: number;
}

/**
 * palmDistanceMap returns, per pixel, the approximate distance in pixels to the palm mask
 * (`palmProb > threshold`), or null when the map has no palm pixel.
 */
export function palmDistanceMap(palmProb: Float32Array, size: number, threshold: number): Float32Array | null {
  const n = size * size;
  const palm = new Uint8Array(n);
  let any = false;
  for (let i = 0; i < n; i++) {
    if (palmProb[i] > threshold) {
      palm[i] = 1;
      any = true;
    }
  }
  return any ? distanceTo(palm, size) : null;
}

/** Chamfer (3-4) distance to the set pixels of `seed`, in units of pixels (approximate). */
function distanceTo(seed: Uint8Array, size: number): Float32Array {
  const INF = 1e9;
  const d = new Float32Array(size * size);
  for (let i = 0; i < d.length; i++) d[i] = seed[i] ? 0 : INF;
  for (let y = 0; y < size; y++) {
    for (let x = 0; x < size; x++) {
      const i = y * size + x;
      let v = d[i];
      if (x > 0) v = Math.min(v, d[i - 1] + 3);
      if (y > 0) {
        v = Math.min(v, d[i - size] + 3);
        if (x > 0) v = Math.min(v, d[i - size - 1] + 4);
        if (x < size - 1) v = Math.min(v, d[i - size + 1] + 4);
      }
      d[i] = v;
    }
  }
  for (let y = size - 1; y >= 0; y--) {
    for (let x = size - 1; x >= 0; x--) {
      const i = y * size + x;
      let v = d[i];
      if (x < size - 1) v = Math.min(v, d[i + 1] + 3);
      if (y < size - 1) {
        v = Math.min(v, d[i + size] + 3);
        if (x < size - 1) v = Math.min(v, d[i + size + 1] + 4);
        if (x > 0) v = Math.min(v, d[i + size - 1] + 4);
      }
      d[i] = v;
    }
  }
  for (let i = 0; i < d.length; i++) d[i] /= 3;
  return d;
}

/**
 * selectLine keeps the anatomically plausible part of one line's probability map: components
 * above the threshold, specks (under a quarter of minPixels) dropped; each remaining component
 * must lie mostly (at least half its probability mass) on or next to the palm (within 3% of S
 * of the palm mask: the model's lines are trained inside the palm, so a crease on a finger or
 * the wrist is not one), and is scored by that mass;
 * the best one is kept together with sizeable pieces of the same crease broken off it (each
 * plausible itself, mass at least 20% of the best, within 9% of S, reaching at least 3% of S past
 * one of its ends: a crease running alongside it within its length is another crease, not a piece
 * of the line; docs/decisions/broken-line-pieces.md).
 * Detected = kept pixels >= minPixels and mean probability >= minConfidence. The shares are
 * {@link LINE_RULES}.
 */
export function selectLine(prob: Float32Array, size: number, options: SelectLineOptions): LineSelection {
  const n = size * size;
  const kept = new Uint8Array(n);
  const none = (why: LineMissReason): LineSelection => ({ detected: false, kept, pixels: 0, meanProb: 0, why });
  const comps = labelComponents(prob, size, size, options.threshold);
  if (comps.count === 0) return none("not_visible");

  const nearPalm = options.palmDistance ?? null;
  const unit = options.unit ?? size;
  const nearLimit = LINE_RULES.nearPalm * unit;

  const mass = new Float64Array(comps.count + 1);
  const plausible = new Float64Array(comps.count + 1);
  for (let i = 0; i < n; i++) {
    const k = comps.labels[i];
    if (k === 0) continue;
    mass[k] += prob[i];
    if (!nearPalm || nearPalm[i] <= nearLimit) plausible[k] += prob[i];
  }
  const speck = Math.max(LINE_RULES.speckMinPixels, options.minPixels * LINE_RULES.speckShare);
  // ok: sizeable and plausible, what the best component and every piece of it must be (a wrist crease beside the
  // line is not one of its pieces: postprocess.spec "drops a crease lying mostly off the palm").
  const ok = new Uint8Array(comps.count + 1);
  let best = 0;
  let sizeable = false;
  for (let k = 1; k <= comps.count; k++) {
    if (comps.sizes[k] < speck) continue;
    sizeable = true;
    if (plausible[k] <= 0 || plausible[k] < LINE_RULES.plausibleShare * mass[k]) continue;
    ok[k] = 1;
    if (best === 0 || plausible[k] > plausible[best]) best = k;
  }
  if (best === 0) return none(sizeable ? "implausible" : "not_visible");

  const seed = new Uint8Array(n);
  for (let i = 0; i < n; i++) if (comps.labels[i] === best) seed[i] = 1;
  const keep = new Uint8Array(comps.count + 1);
  keep[best] = 1;
  if (comps.count > 1) {
    const dist = distanceTo(seed, size);
    const gap = LINE_RULES.pieceGap * unit;
    const near = new Uint8Array(comps.count + 1);
    for (let i = 0; i < n; i++) {
      const k = comps.labels[i];
      if (k !== 0 && dist[i] <= gap) near[k] = 1;
    }
    let tips: LineTip[] | undefined; // only when some piece is a candidate
    for (let k = 1; k <= comps.count; k++) {
      if (k === best || !near[k] || !ok[k] || plausible[k] < LINE_RULES.pieceMass * plausible[best]) continue;
      tips ??= lineTips(comps.labels, best, size, tipSteps(unit, size));
      if (continuesLine(comps.labels, k, size, tips, LINE_RULES.pieceReach * unit)) keep[k] = 1;
    }
  }
  let pixels = 0;
  let sum = 0;
  for (let i = 0; i < n; i++) {
    if (keep[comps.labels[i]] && comps.labels[i] !== 0) {
      kept[i] = 1;
      pixels++;
      sum += prob[i];
    }
  }
  const meanProb = pixels > 0 ? sum / pixels : 0;
  const detected = pixels >= options.minPixels && meanProb >= options.minConfidence;
  if (!detected) return { detected: false, kept: new Uint8Array(n), pixels: 0, meanProb: 0, why: "low_confidence" };
  return { detected, kept, pixels, meanProb, why: "" };
}

/** LineTip is one end of a component's longest course and its outward unit direction (u, v). */
interface LineTip {
  u: number;
  v: number;
  du: number;
  dv: number;
}

/** tipSteps is LINE_RULES.tipSteps (pixels of a view framed at FRAME_SIDE) in a view whose {@link ruleUnit} is `unit`. */
function tipSteps(unit: number, size: number): number {
  return Math.floor((LINE_RULES.tipSteps * unit) / size + 0.5);
}

/** farthest is the first pixel (raster order) at the largest distance. */
function farthest(dist: Int32Array): number {
  let best = 0;
  for (let i = 1; i < dist.length; i++) if (dist[i] > dist[best]) best = i;
  return best;
}

/**
 * lineTips: the two ends of component `k`'s longest course (the pixel farthest in 8-connected
 * steps from its first pixel in raster order, then the one farthest from that), each with its
 * outward direction, from the mean of the pixels min(`inward`, length / 2) steps inside to the
 * end. training/line_rules.py `line_tips` is the same rule.
 */
function lineTips(labels: Int32Array, k: number, size: number, inward: number): LineTip[] {
  const mask = new Uint8Array(labels.length);
  for (let i = 0; i < labels.length; i++) if (labels[i] === k) mask[i] = 1;
  const back = new Int32Array(labels.length);
  // Steps from `start` inside the component (-1 outside), by line-geometry's breadth-first walk.
  const steps = (start: number) => {
    const dist = new Int32Array(labels.length).fill(-1);
    walk(mask, size, start, dist, back);
    return dist;
  };
  const a = farthest(steps(labels.indexOf(k)));
  const fromA = steps(a);
  const b = farthest(fromA);
  const inside = Math.min(inward, Math.floor(fromA[b] / 2));
  const tip = (end: number, dist: Int32Array): LineTip => {
    let su = 0;
    let sv = 0;
    let n = 0;
    for (let i = 0; i < dist.length; i++) {
      if (dist[i] !== inside) continue;
      su += i % size;
      sv += Math.floor(i / size);
      n++;
    }
    const u = end % size;
    const v = Math.floor(end / size);
    const len = Math.hypot(u - su / n, v - sv / n);
    return { u, v, du: len > 0 ? (u - su / n) / len : 0, dv: len > 0 ? (v - sv / n) / len : 0 };
  };
  return [tip(a, fromA), tip(b, steps(b))];
}

/** continuesLine: some pixel of component `k` lies at least `reach` pixels past one of the tips, along its direction. */
function continuesLine(labels: Int32Array, k: number, size: number, tips: LineTip[], reach: number): boolean {
  for (let i = 0; i < labels.length; i++) {
    if (labels[i] !== k) continue;
    const u = i % size;
    const v = (i - u) / size;
    for (const t of tips) if ((u - t.u) * t.du + (v - t.v) * t.dv >= reach) return true;
  }
  return false;
}

/**
 * growLine follows a detected line along weaker evidence (hysteresis): pixels above `low`,
 * 8-connected to the kept line through such pixels and near the palm (within
 * `LINE_RULES.nearPalm` of `unit` ({@link ruleUnit}; S when omitted) of it, the rule of {@link selectLine}), join it. A faint stretch of a crease continues the line instead
 * of ending it. Returns a new mask; `kept` itself when `low` adds nothing.
 * Pinned by test/unit/inference/postprocess.spec.ts.
 */
export function growLine(
  prob: Float32Array,
  kept: Uint8Array,
  size: number,
  low: number,
  palmDistance: Float32Array | null,
  unit = size,
): Uint8Array {
  const out = Uint8Array.from(kept);
  const nearLimit = LINE_RULES.nearPalm * unit;
  const stack: number[] = [];
  for (let i = 0; i < out.length; i++) if (out[i]) stack.push(i);
  while (stack.length) {
    const i = stack.pop()!;
    const u = i % size;
    const v = (i - u) / size;
    for (let dv = -1; dv <= 1; dv++) {
      const vv = v + dv;
      if (vv < 0 || vv >= size) continue;
      for (let du = -1; du <= 1; du++) {
        const uu = u + du;
        if (uu < 0 || uu >= size) continue;
        const j = vv * size + uu;
        if (out[j] || prob[j] <= low || (palmDistance && palmDistance[j] > nearLimit)) continue;
        out[j] = 1;
        stack.push(j);
      }
    }
  }
  return out;
}

/** FullMask is a full-size line mask plus the probability sum over its pixels. */
export interface FullMask extends BoxMask {
  /** Set pixels. */
  pixels: number;
  /** Sum of the (interpolated) probabilities over the set pixels. */
  probSum: number;
}

/**
 * paddedLine is the kept line's probabilities with their 1-pixel rim on a zero-bordered map
 * (model pixel (u, v) at pad[(v + 1) * (size + 2) + u + 1]), and the kept pixels' bounds (u1 < 0
 * when none).
 */
function paddedLine(prob: Float32Array, kept: Uint8Array, size: number) {
  const P = size + 2;
  const pad = new Float32Array(P * P);
  let u0 = size,
    v0 = size,
    u1 = -1,
    v1 = -1;
  for (let v = 0; v < size; v++) {
    for (let u = 0; u < size; u++) {
      if (!kept[v * size + u]) continue;
      for (let dv = -1; dv <= 1; dv++) {
        const vv = v + dv;
        if (vv < 0 || vv >= size) continue;
        for (let du = -1; du <= 1; du++) {
          const uu = u + du;
          if (uu >= 0 && uu < size) pad[(vv + 1) * P + uu + 1] = prob[vv * size + uu];
        }
      }
      if (u < u0) u0 = u;
      if (u > u1) u1 = u;
      if (v < v0) v0 = v;
      if (v > v1) v1 = v;
    }
  }
  return { pad, u0, v0, u1, v1 };
}

/**
 * renderFrameMask maps a line back to the image through the palm frame (rotated, mirrored or an
 * axis-aligned square): the kept line's probabilities (with their 1-pixel rim, so that edges
 * interpolate against the real neighbours) are sampled bilinearly at the image pixels of the
 * line's footprint and thresholded. Smooth masks at any image size.
 */
export function renderFrameMask(
  prob: Float32Array,
  kept: Uint8Array,
  size: number,
  threshold: number,
  frame: PalmFrame,
  width: number,
  height: number,
): FullMask {
  const empty: FullMask = { width, height, x0: 0, y0: 0, x1: 0, y1: 0, data: new Uint8Array(0), pixels: 0, probSum: 0 };
  const { pad, u0, v0, u1, v1 } = paddedLine(prob, kept, size);
  const P = size + 2;
  if (u1 < 0) return empty;
  // Cell (u, v) spans model coordinates [u, u + 1) x [v, v + 1) (u, v from -1); it can only give
  // pixels above the threshold when a corner is above it (bilinear never exceeds its largest
  // corner). Only the image pixels around such cells are sampled, each by the one cell its
  // centre falls in: cost proportional to the line, not to its bounding box.
  const cells: number[] = [];
  for (let v = -1; v < size; v++) {
    for (let u = -1; u < size; u++) {
      const i = (v + 1) * P + u + 1;
      if (pad[i] > threshold || pad[i + 1] > threshold || pad[i + P] > threshold || pad[i + P + 1] > threshold) cells.push(i);
    }
  }
  const corners = [
    frameToImage(frame, size, u0 - 1.5, v0 - 1.5),
    frameToImage(frame, size, u1 + 1.5, v0 - 1.5),
    frameToImage(frame, size, u0 - 1.5, v1 + 1.5),
    frameToImage(frame, size, u1 + 1.5, v1 + 1.5),
  ];
  const X0 = Math.max(0, Math.floor(Math.min(...corners.map((c) => c[0]))));
  const Y0 = Math.max(0, Math.floor(Math.min(...corners.map((c) => c[1]))));
  const X1 = Math.min(width, Math.ceil(Math.max(...corners.map((c) => c[0]))) + 1);
  const Y1 = Math.min(height, Math.ceil(Math.max(...corners.map((c) => c[1]))) + 1);
  if (X1 <= X0 || Y1 <= Y0) return empty;
  const bw = X1 - X0;
  const bh = Y1 - Y0;
  // Image extent of one cell: its four corners are the origin plus combinations of a and b.
  const k = frame.side / size;
  const a: Point = [frame.ex[0] * k, frame.ex[1] * k];
  const b: Point = [frame.ey[0] * k, frame.ey[1] * k];
  const spanX0 = Math.min(0, a[0], b[0], a[0] + b[0]);
  const spanX1 = Math.max(0, a[0], b[0], a[0] + b[0]);
  const spanY0 = Math.min(0, a[1], b[1], a[1] + b[1]);
  const spanY1 = Math.max(0, a[1], b[1], a[1] + b[1]);
  const data = new Uint8Array(bw * bh);
  let pixels = 0;
  let probSum = 0;
  let mx0 = bw,
    my0 = bh,
    mx1 = -1,
    my1 = -1;
  for (const i of cells) {
    const u = (i % P) - 1;
    const v = Math.floor(i / P) - 1;
    const [ox, oy] = frameToImage(frame, size, u, v);
    // Pixels whose centre (x + 0.5, y + 0.5) may fall in this cell.
    const xs = Math.max(X0, Math.ceil(ox + spanX0 - 0.5));
    const xe = Math.min(X1 - 1, Math.floor(ox + spanX1 - 0.5));
    const ys = Math.max(Y0, Math.ceil(oy + spanY0 - 0.5));
    const ye = Math.min(Y1 - 1, Math.floor(oy + spanY1 - 0.5));
    for (let y = ys; y <= ye; y++) {
      for (let x = xs; x <= xe; x++) {
        const [mu, mv] = imageToFrame(frame, size, x + 0.5, y + 0.5);
        if (Math.floor(mu) !== u || Math.floor(mv) !== v) continue;
        const fu = mu - u;
        const fv = mv - v;
        const top = pad[i] + (pad[i + 1] - pad[i]) * fu;
        const bottom = pad[i + P] + (pad[i + P + 1] - pad[i + P]) * fu;
        const val = top + (bottom - top) * fv;
        if (val > threshold) {
          const bx = x - X0;
          const by = y - Y0;
          data[by * bw + bx] = 1;
          pixels++;
          probSum += val;
          if (bx < mx0) mx0 = bx;
          if (bx > mx1) mx1 = bx;
          if (by < my0) my0 = by;
          if (by > my1) my1 = by;
        }
      }
    }
  }
  if (pixels === 0) return empty;
  const tw = mx1 - mx0 + 1;
  const th = my1 - my0 + 1;
  const tight = new Uint8Array(tw * th);
  for (let y = 0; y < th; y++) tight.set(data.subarray((y + my0) * bw + mx0, (y + my0) * bw + mx0 + tw), y * tw);
  return { width, height, x0: X0 + mx0, y0: Y0 + my0, x1: X0 + mx1 + 1, y1: Y0 + my1 + 1, data: tight, pixels, probSum };
}
