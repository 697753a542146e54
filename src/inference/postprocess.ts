/**
 * Post-processing of the model's probability maps: connected components, the palm box of the
 * whole-image pass, the plausible component per line on the crop pass, and the full-size
 * masks (bilinear upsampling of the probabilities, then the threshold).
 */
import type { BoxMask } from "../image/mask.js";
import type { SquareBox } from "../image/preprocess.js";
import { frameToImage, imageToFrame, type PalmFrame } from "../landmarks/palm-frame.js";

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

/** PalmBox is the palm's bounding box in image pixels, [x0, x1) x [y0, y1). */
export interface PalmBox {
  x0: number;
  y0: number;
  x1: number;
  y1: number;
  /** Palm component size at model resolution, pixels. */
  pixels: number;
}

/**
 * MIN_PALM_FRACTION: a palm component smaller than this share of the model input (0.4%, about
 * 260 pixels at 256x256, a 16x16 blob) is no palm: the photo is treated as palm-free.
 */
export const MIN_PALM_FRACTION = 0.004;

/**
 * findPalm takes the palm channel of the whole-image pass (rendered from `box`), keeps its
 * largest component and returns that component's bounding box in image pixels, or undefined
 * when there is none or it is smaller than `minPixels` (default {@link MIN_PALM_FRACTION} of S x S).
 */
export function findPalm(
  palmProb: Float32Array,
  size: number,
  threshold: number,
  box: SquareBox,
  image: { width: number; height: number },
  minPixels = Math.round(MIN_PALM_FRACTION * size * size),
): PalmBox | undefined {
  const comps = labelComponents(palmProb, size, size, threshold);
  const best = largestComponent(comps);
  if (best === 0 || comps.sizes[best] < Math.max(1, minPixels)) return undefined;
  let u0 = size, v0 = size, u1 = -1, v1 = -1;
  for (let v = 0; v < size; v++) {
    for (let u = 0; u < size; u++) {
      if (comps.labels[v * size + u] === best) {
        if (u < u0) u0 = u;
        if (u > u1) u1 = u;
        if (v < v0) v0 = v;
        if (v > v1) v1 = v;
      }
    }
  }
  const k = box.side / size;
  const clampX = (x: number) => Math.min(image.width, Math.max(0, x));
  const clampY = (y: number) => Math.min(image.height, Math.max(0, y));
  const x0 = clampX(Math.floor(box.x + u0 * k));
  const x1 = clampX(Math.ceil(box.x + (u1 + 1) * k));
  const y0 = clampY(Math.floor(box.y + v0 * k));
  const y1 = clampY(Math.ceil(box.y + (v1 + 1) * k));
  if (x1 <= x0 || y1 <= y0) return undefined;
  return { x0, y0, x1, y1, pixels: comps.sizes[best] };
}

/**
 * palmShare is the share of an S x S map (0..1) covered by the largest component of the palm
 * channel above `threshold`: how much palm the crop pass sees. The pipeline compares it with
 * the model's `crop.min_palm` to confirm the whole-image pass's palm.
 */
export function palmShare(palmProb: Float32Array, size: number, threshold: number): number {
  const comps = labelComponents(palmProb, size, size, threshold);
  return comps.sizes[largestComponent(comps)] / (size * size);
}

/**
 * palmCropBox expands the palm box by `margin` x its size on each side and makes it square
 * (side = the longer side, centred). The square may extend beyond the image.
 */
export function palmCropBox(palm: PalmBox, margin: number): SquareBox {
  const w = palm.x1 - palm.x0;
  const h = palm.y1 - palm.y0;
  const ew = w * (1 + 2 * margin);
  const eh = h * (1 + 2 * margin);
  const side = Math.max(8, Math.ceil(Math.max(ew, eh)));
  const cx = (palm.x0 + palm.x1) / 2;
  const cy = (palm.y0 + palm.y1) / 2;
  return { x: Math.round(cx - side / 2), y: Math.round(cy - side / 2), side };
}

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
}

/** SelectLineOptions tune {@link selectLine}; defaults are in model-resolution pixels at S = 256 and scale with S. */
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
 * the best one is kept together with sizeable pieces of the same crease broken off it (mass at
 * least 25% of the best, within 6% of S). Detected = kept pixels >= minPixels and mean
 * probability >= minConfidence.
 */
export function selectLine(prob: Float32Array, size: number, options: SelectLineOptions): LineSelection {
  const n = size * size;
  const kept = new Uint8Array(n);
  const none: LineSelection = { detected: false, kept, pixels: 0, meanProb: 0 };
  const comps = labelComponents(prob, size, size, options.threshold);
  if (comps.count === 0) return none;

  const nearPalm = options.palmDistance ?? null;
  const nearLimit = 0.03 * size;

  const mass = new Float64Array(comps.count + 1);
  const plausible = new Float64Array(comps.count + 1);
  for (let i = 0; i < n; i++) {
    const k = comps.labels[i];
    if (k === 0) continue;
    mass[k] += prob[i];
    if (!nearPalm || nearPalm[i] <= nearLimit) plausible[k] += prob[i];
  }
  const speck = Math.max(2, options.minPixels / 4);
  let best = 0;
  for (let k = 1; k <= comps.count; k++) {
    if (comps.sizes[k] < speck || plausible[k] <= 0 || plausible[k] < 0.5 * mass[k]) continue;
    if (best === 0 || plausible[k] > plausible[best]) best = k;
  }
  if (best === 0) return none;

  const seed = new Uint8Array(n);
  for (let i = 0; i < n; i++) if (comps.labels[i] === best) seed[i] = 1;
  const keep = new Uint8Array(comps.count + 1);
  keep[best] = 1;
  if (comps.count > 1) {
    const dist = distanceTo(seed, size);
    const gap = 0.06 * size;
    const near = new Uint8Array(comps.count + 1);
    for (let i = 0; i < n; i++) {
      const k = comps.labels[i];
      if (k !== 0 && dist[i] <= gap) near[k] = 1;
    }
    for (let k = 1; k <= comps.count; k++) {
      if (k !== best && near[k] && comps.sizes[k] >= speck && plausible[k] >= 0.25 * plausible[best]) keep[k] = 1;
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
  if (!detected) return { detected: false, kept: new Uint8Array(n), pixels: 0, meanProb: 0 };
  return { detected, kept, pixels, meanProb };
}

/** FullMask is a full-size line mask plus the probability sum over its pixels. */
export interface FullMask extends BoxMask {
  /** Set pixels. */
  pixels: number;
  /** Sum of the (interpolated) probabilities over the set pixels. */
  probSum: number;
}

/**
 * renderFullMask maps a line back to the image: the crop's probability map, restricted to the
 * kept component (and its 1-pixel rim, so that edges interpolate against the real
 * neighbours), is upsampled bilinearly into the crop's footprint in the image and thresholded.
 * Smooth masks at any image size; cost proportional to the line's bounding box.
 */
export function renderFullMask(
  prob: Float32Array,
  kept: Uint8Array,
  size: number,
  threshold: number,
  box: SquareBox,
  width: number,
  height: number,
): FullMask {
  // Restricted probability map and its bounding box (kept dilated by 1).
  const p = new Float32Array(size * size);
  let u0 = size, v0 = size, u1 = -1, v1 = -1;
  for (let v = 0; v < size; v++) {
    for (let u = 0; u < size; u++) {
      if (!kept[v * size + u]) continue;
      for (let dv = -1; dv <= 1; dv++) {
        const vv = v + dv;
        if (vv < 0 || vv >= size) continue;
        for (let du = -1; du <= 1; du++) {
          const uu = u + du;
          if (uu < 0 || uu >= size) continue;
          p[vv * size + uu] = prob[vv * size + uu];
        }
      }
      if (u < u0) u0 = u;
      if (u > u1) u1 = u;
      if (v < v0) v0 = v;
      if (v > v1) v1 = v;
    }
  }
  const empty: FullMask = { width, height, x0: 0, y0: 0, x1: 0, y1: 0, data: new Uint8Array(0), pixels: 0, probSum: 0 };
  if (u1 < 0) return empty;
  const k = box.side / size; // image pixels per model pixel
  // Image pixels whose sample point falls within [u0 - 1, u1 + 1] (where p can be non-zero).
  const X0 = Math.max(0, Math.floor(box.x + (u0 - 1 + 0.5) * k - 0.5));
  const X1 = Math.min(width, Math.ceil(box.x + (u1 + 1 + 0.5) * k - 0.5) + 1);
  const Y0 = Math.max(0, Math.floor(box.y + (v0 - 1 + 0.5) * k - 0.5));
  const Y1 = Math.min(height, Math.ceil(box.y + (v1 + 1 + 0.5) * k - 0.5) + 1);
  if (X1 <= X0 || Y1 <= Y0) return empty;
  const bw = X1 - X0;
  const bh = Y1 - Y0;
  // Zero-bordered copy of p, so that samples at -1 and `size` need no bounds checks.
  const P = size + 2;
  const pad = new Float32Array(P * P);
  for (let v = Math.max(0, v0 - 1); v <= Math.min(size - 1, v1 + 1); v++) {
    pad.set(p.subarray(v * size + Math.max(0, u0 - 1), v * size + Math.min(size, u1 + 2)), (v + 1) * P + 1 + Math.max(0, u0 - 1));
  }
  // A cell (u, v)..(u+1, v+1) can only yield pixels above the threshold if one of its corners
  // is above it (bilinear interpolation never exceeds the largest corner): list the active
  // cells per cell row, so that only the few image pixels around the line are sampled.
  const activeCols: number[][] = [];
  for (let v = -1; v < size; v++) {
    const cols: number[] = [];
    if (v >= v0 - 2 && v <= v1 + 1) {
      const r0 = (v + 1) * P;
      const r1 = (v + 2) * P;
      for (let u = Math.max(-1, u0 - 2); u <= Math.min(size - 1, u1 + 1); u++) {
        const c = u + 1;
        if (pad[r0 + c] > threshold || pad[r0 + c + 1] > threshold || pad[r1 + c] > threshold || pad[r1 + c + 1] > threshold) cols.push(u);
      }
    }
    activeCols.push(cols);
  }
  // Image columns [colStart[u + 1], colStart[u + 2]) sample cell column u (relative to X0).
  const colStart = new Int32Array(size + 2);
  for (let u = -1; u <= size; u++) {
    // Smallest X with (X - box.x + 0.5) / k - 0.5 >= u.
    colStart[u + 1] = Math.min(bw, Math.max(0, Math.ceil(box.x + (u + 0.5) * k - 0.5) - X0));
  }
  const data = new Uint8Array(bw * bh);
  let pixels = 0;
  let probSum = 0;
  let mx0 = bw, my0 = bh, mx1 = -1, my1 = -1;
  for (let y = 0; y < bh; y++) {
    const v = (Y0 + y - box.y + 0.5) / k - 0.5;
    const iv = Math.floor(v);
    if (iv < -1 || iv >= size) continue;
    const cols = activeCols[iv + 1];
    if (cols.length === 0) continue;
    const fv = v - iv;
    const r0 = (iv + 1) * P + 1;
    const r1 = r0 + P;
    const row = y * bw;
    for (const u of cols) {
      const a00 = pad[r0 + u], a01 = pad[r0 + u + 1], a10 = pad[r1 + u], a11 = pad[r1 + u + 1];
      const left = a00 + (a10 - a00) * fv;
      const right = a01 + (a11 - a01) * fv;
      for (let x = colStart[u + 1], xe = colStart[u + 2]; x < xe; x++) {
        const uu = (X0 + x - box.x + 0.5) / k - 0.5;
        const val = left + (right - left) * (uu - u);
        if (val > threshold) {
          data[row + x] = 1;
          pixels++;
          probSum += val;
          if (x < mx0) mx0 = x;
          if (x > mx1) mx1 = x;
          if (y < my0) my0 = y;
          if (y > my1) my1 = y;
        }
      }
    }
  }
  if (pixels === 0) return empty;
  // Tighten to the set pixels.
  const tw = mx1 - mx0 + 1;
  const th = my1 - my0 + 1;
  const tight = new Uint8Array(tw * th);
  for (let y = 0; y < th; y++) tight.set(data.subarray((y + my0) * bw + mx0, (y + my0) * bw + mx0 + tw), y * tw);
  return { width, height, x0: X0 + mx0, y0: Y0 + my0, x1: X0 + mx1 + 1, y1: Y0 + my1 + 1, data: tight, pixels, probSum };
}

/**
 * renderFrameMask is {@link renderFullMask} for a rotated or mirrored palm frame: the kept line's
 * probabilities (with their 1-pixel rim) are sampled bilinearly at every image pixel whose centre
 * falls inside the line's footprint, and thresholded. Only cells with a corner above the
 * threshold are interpolated.
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
  // Zero-bordered restricted map: model pixel (u, v) at pad[(v + 1) * P + u + 1].
  const P = size + 2;
  const pad = new Float32Array(P * P);
  let u0 = size, v0 = size, u1 = -1, v1 = -1;
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
  if (u1 < 0) return empty;
  // Cell (u, v) spans model pixels u..u+1, v..v+1 (u, v from -1): active when a corner is above the threshold.
  const active = new Uint8Array(P * P);
  for (let v = -1; v < size; v++) {
    for (let u = -1; u < size; u++) {
      const i = (v + 1) * P + u + 1;
      if (pad[i] > threshold || pad[i + 1] > threshold || pad[i + P] > threshold || pad[i + P + 1] > threshold) active[i] = 1;
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
  // Model coordinates change by (du, dv) per image pixel to the right.
  const q = size / frame.side;
  const dux = frame.ex[0] * q;
  const dvx = frame.ey[0] * q;
  const data = new Uint8Array(bw * bh);
  let pixels = 0;
  let probSum = 0;
  let mx0 = bw, my0 = bh, mx1 = -1, my1 = -1;
  for (let y = 0; y < bh; y++) {
    let [u, v] = imageToFrame(frame, size, X0 + 0.5, Y0 + y + 0.5);
    const row = y * bw;
    for (let x = 0; x < bw; x++, u += dux, v += dvx) {
      const iu = Math.floor(u);
      const iv = Math.floor(v);
      if (iu < -1 || iv < -1 || iu >= size || iv >= size) continue;
      const i = (iv + 1) * P + iu + 1;
      if (!active[i]) continue;
      const fu = u - iu;
      const fv = v - iv;
      const top = pad[i] + (pad[i + 1] - pad[i]) * fu;
      const bottom = pad[i + P] + (pad[i + P + 1] - pad[i + P]) * fu;
      const val = top + (bottom - top) * fv;
      if (val > threshold) {
        data[row + x] = 1;
        pixels++;
        probSum += val;
        if (x < mx0) mx0 = x;
        if (x > mx1) mx1 = x;
        if (y < my0) my0 = y;
        if (y > my1) my1 = y;
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
