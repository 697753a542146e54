/**
 * Hand geometry: MediaPipe's SSD anchors and palm-detection decoding, weighted non-maximum
 * suppression, rotated hand rectangles (from a palm detection or from 21 landmarks, then
 * enlarged as MediaPipe's rect transformation does) and the affine warp of such a rectangle into
 * a model input tensor. Pure functions; all image coordinates are continuous pixel coordinates of
 * the RGB buffer (pixel (i, j) covers [i, i+1) x [j, j+1), as MediaPipe's normalised x * width).
 */

/** Point is [x, y]. */
export type Point = [number, number];

/** inPhoto says whether `p` lies inside a width x height photo, its edges included. */
export function inPhoto(p: Readonly<Point>, width: number, height: number): boolean {
  return p[0] >= 0 && p[1] >= 0 && p[0] <= width && p[1] <= height;
}

/** Anchor is an SSD anchor centre in normalised [0, 1] detector-input coordinates (fixed size 1 x 1). */
export interface Anchor {
  x: number;
  y: number;
}

/** AnchorOptions are the parts of MediaPipe's `SsdAnchorsCalculatorOptions` that the palm detector sets. */
export interface AnchorOptions {
  inputSize: number;
  numLayers: number;
  strides: readonly number[];
  /** Anchors per cell of a layer: aspect ratio 1 plus the interpolated scale, so 2. */
  anchorsPerLayer: number;
  offset: number;
}

/** PALM_ANCHORS are the anchor options of MediaPipe's full palm detector (192 x 192, 2016 anchors). */
export const PALM_ANCHORS: AnchorOptions = Object.freeze({
  inputSize: 192,
  numLayers: 4,
  strides: Object.freeze([8, 16, 16, 16]),
  anchorsPerLayer: 2,
  offset: 0.5,
});

/**
 * ssdAnchors generates anchors as MediaPipe's SsdAnchorsCalculator does with fixed_anchor_size:
 * consecutive layers of equal stride share one feature map, each cell contributing
 * `anchorsPerLayer` anchors per layer, cells in row-major order.
 */
export function ssdAnchors(o: AnchorOptions = PALM_ANCHORS): Anchor[] {
  const anchors: Anchor[] = [];
  let layer = 0;
  while (layer < o.numLayers) {
    let last = layer;
    while (last < o.numLayers && o.strides[last] === o.strides[layer]) last++;
    const perCell = (last - layer) * o.anchorsPerLayer;
    const fm = Math.ceil(o.inputSize / o.strides[layer]);
    for (let y = 0; y < fm; y++) {
      for (let x = 0; x < fm; x++) {
        for (let k = 0; k < perCell; k++) anchors.push({ x: (x + o.offset) / fm, y: (y + o.offset) / fm });
      }
    }
    layer = last;
  }
  return anchors;
}

/** PalmDetection is one decoded palm box in normalised detector-input coordinates. */
export interface PalmDetection {
  score: number;
  /** Box centre and size, normalised. */
  cx: number;
  cy: number;
  w: number;
  h: number;
  /** 7 keypoints, normalised: 0 wrist, 2 middle-finger MCP (the others: palm and finger bases). */
  keypoints: Point[];
}

function sigmoid(x: number): number {
  return 1 / (1 + Math.exp(-x));
}

/**
 * decodePalmDetections turns the detector's raw outputs into detections with score at least
 * `minScore`, as MediaPipe's TensorsToDetectionsCalculator does for the palm model: score =
 * sigmoid(clip(logit, -100, 100)); box (x, y, w, h) and 7 keypoints in input pixels relative to
 * the anchor centre (x_scale = input size, anchor size 1).
 */
export function decodePalmDetections(
  boxes: Float32Array,
  scores: Float32Array,
  anchors: readonly Anchor[],
  inputSize: number,
  minScore: number,
): PalmDetection[] {
  const out: PalmDetection[] = [];
  const stride = boxes.length / anchors.length;
  for (let i = 0; i < anchors.length; i++) {
    const score = sigmoid(Math.max(-100, Math.min(100, scores[i])));
    if (!(score >= minScore)) continue;
    const a = anchors[i];
    const b = i * stride;
    const keypoints: Point[] = [];
    for (let k = 0; k < 7; k++) {
      keypoints.push([boxes[b + 4 + 2 * k] / inputSize + a.x, boxes[b + 5 + 2 * k] / inputSize + a.y]);
    }
    out.push({
      score,
      cx: boxes[b] / inputSize + a.x,
      cy: boxes[b + 1] / inputSize + a.y,
      w: boxes[b + 2] / inputSize,
      h: boxes[b + 3] / inputSize,
      keypoints,
    });
  }
  return out;
}

function iou(a: PalmDetection, b: PalmDetection): number {
  const ix = Math.min(a.cx + a.w / 2, b.cx + b.w / 2) - Math.max(a.cx - a.w / 2, b.cx - b.w / 2);
  const iy = Math.min(a.cy + a.h / 2, b.cy + b.h / 2) - Math.max(a.cy - a.h / 2, b.cy - b.h / 2);
  if (ix <= 0 || iy <= 0) return 0;
  const inter = ix * iy;
  return inter / (a.w * a.h + b.w * b.h - inter);
}

/**
 * weightedNms is MediaPipe's weighted non-maximum suppression: the best remaining detection and
 * all others overlapping it by IoU above `threshold` merge into one whose box and keypoints are
 * their score-weighted mean and whose score is the best one's. Returns merged detections, best first.
 */
export function weightedNms(detections: readonly PalmDetection[], threshold = 0.3): PalmDetection[] {
  let rest = [...detections].sort((a, b) => b.score - a.score);
  const out: PalmDetection[] = [];
  while (rest.length > 0) {
    const best = rest[0];
    const group = rest.filter((d, i) => i === 0 || iou(best, d) > threshold);
    rest = rest.filter((d) => !group.includes(d));
    let total = 0;
    let x0 = 0,
      y0 = 0,
      x1 = 0,
      y1 = 0;
    const kps: Point[] = best.keypoints.map(() => [0, 0]);
    for (const d of group) {
      total += d.score;
      x0 += (d.cx - d.w / 2) * d.score;
      y0 += (d.cy - d.h / 2) * d.score;
      x1 += (d.cx + d.w / 2) * d.score;
      y1 += (d.cy + d.h / 2) * d.score;
      d.keypoints.forEach((p, k) => {
        kps[k][0] += p[0] * d.score;
        kps[k][1] += p[1] * d.score;
      });
    }
    x0 /= total;
    y0 /= total;
    x1 /= total;
    y1 /= total;
    out.push({
      score: best.score,
      cx: (x0 + x1) / 2,
      cy: (y0 + y1) / 2,
      w: x1 - x0,
      h: y1 - y0,
      keypoints: kps.map(([x, y]) => [x / total, y / total] as Point),
    });
  }
  return out;
}

/**
 * RotatedRect is a rectangle in image pixels: centre, size and rotation (radians, clockwise on
 * screen, i.e. in y-down coordinates). Its local point (a, b), a along its width and b along its
 * height from the centre, is the image point centre + R(rotation) (a, b).
 */
export interface RotatedRect {
  cx: number;
  cy: number;
  width: number;
  height: number;
  rotation: number;
}

/** normalizeRadians maps an angle to [-pi, pi). */
export function normalizeRadians(a: number): number {
  return a - 2 * Math.PI * Math.floor((a + Math.PI) / (2 * Math.PI));
}

/**
 * uprightRotation is the rect rotation that turns the vector from `from` to `to` (image pixels)
 * to point up in the rotated rect, as MediaPipe's rotation with a 90-degree target angle.
 */
export function uprightRotation(from: Point, to: Point): number {
  return normalizeRadians(Math.PI / 2 - Math.atan2(-(to[1] - from[1]), to[0] - from[0]));
}

/**
 * transformRect is MediaPipe's RectTransformationCalculator in pixels: shift the centre by
 * (shiftX * width, shiftY * height) in the rect's own rotated frame, make it square on its longer
 * side (square_long), then scale.
 */
export function transformRect(r: RotatedRect, scale: number, shiftX: number, shiftY: number): RotatedRect {
  const c = Math.cos(r.rotation);
  const s = Math.sin(r.rotation);
  const dx = r.width * shiftX;
  const dy = r.height * shiftY;
  const side = Math.max(r.width, r.height) * scale;
  return { cx: r.cx + c * dx - s * dy, cy: r.cy + s * dx + c * dy, width: side, height: side, rotation: r.rotation };
}

/** rectToImage maps a point of the rect's [0,1]^2 unit square (u right, v down in the rect) to image pixels. */
export function rectToImage(r: RotatedRect, u: number, v: number): Point {
  const a = (u - 0.5) * r.width;
  const b = (v - 0.5) * r.height;
  const c = Math.cos(r.rotation);
  const s = Math.sin(r.rotation);
  return [r.cx + c * a - s * b, r.cy + s * a + c * b];
}

/**
 * rectFromPoints is the rect of rotation `rotation` that bounds `points` tightly (in its own
 * rotated frame), as MediaPipe's HandLandmarksToRectCalculator computes it.
 */
export function rectFromPoints(points: readonly Point[], rotation: number): RotatedRect {
  const c = Math.cos(rotation);
  const s = Math.sin(rotation);
  let minA = Infinity,
    maxA = -Infinity,
    minB = Infinity,
    maxB = -Infinity;
  for (const [x, y] of points) {
    // Inverse rotation: image offset -> rect-local (a, b).
    const a = c * x + s * y;
    const b = -s * x + c * y;
    minA = Math.min(minA, a);
    maxA = Math.max(maxA, a);
    minB = Math.min(minB, b);
    maxB = Math.max(maxB, b);
  }
  const ma = (minA + maxA) / 2;
  const mb = (minB + maxB) / 2;
  return { cx: c * ma - s * mb, cy: s * ma + c * mb, width: maxA - minA, height: maxB - minB, rotation };
}

/** Landmark indices MediaPipe uses to re-crop a hand from its landmarks: wrist, thumb base, finger MCPs and PIPs. */
const RECROP_LANDMARKS = [0, 1, 2, 3, 5, 6, 9, 10, 13, 14, 17, 18];

/**
 * handRectFromLandmarks is MediaPipe's tracking re-crop: rotation from the wrist to the middle of
 * the middle-finger MCP and the mean of the index and ring MCPs, the rect bounding the palm
 * landmarks in that frame, then scaled 2.0 and shifted by -0.1 of its height towards the fingers.
 */
export function handRectFromLandmarks(landmarks: readonly Point[]): RotatedRect {
  const [x0, y0] = landmarks[0];
  const x1 = ((landmarks[5][0] + landmarks[13][0]) / 2 + landmarks[9][0]) / 2;
  const y1 = ((landmarks[5][1] + landmarks[13][1]) / 2 + landmarks[9][1]) / 2;
  const rotation = uprightRotation([x0, y0], [x1, y1]);
  const rect = rectFromPoints(
    RECROP_LANDMARKS.map((i) => landmarks[i]),
    rotation,
  );
  return transformRect(rect, 2.0, 0, -0.1);
}

/**
 * handRectFromPalm is MediaPipe's palm-detection crop: the detection box (pixels), rotated so
 * that wrist (keypoint 0) -> middle-finger MCP (keypoint 2) points up, shifted half its height
 * towards the fingers, squared on its longer side and scaled 2.6.
 */
export function handRectFromPalm(box: { cx: number; cy: number; w: number; h: number }, keypoints: readonly Point[]): RotatedRect {
  const rotation = uprightRotation(keypoints[0], keypoints[2]);
  return transformRect({ cx: box.cx, cy: box.cy, width: box.w, height: box.h, rotation }, 2.6, 0, -0.5);
}

/**
 * outside tells whether the image points of output coordinates [ua, ub] x [va, vb] (an affine map,
 * so its extremes lie at the corners) all lie more than a pixel beyond the image, where bilinear
 * sampling reads no pixel; the margin keeps rounding from deciding.
 */
function outside(
  x0: number,
  y0: number,
  dxu: number,
  dyu: number,
  dxv: number,
  dyv: number,
  ua: number,
  ub: number,
  va: number,
  vb: number,
  width: number,
  height: number,
): boolean {
  const xa = x0 + ua * dxu + va * dxv;
  const xb = x0 + ub * dxu + va * dxv;
  const xc = x0 + ua * dxu + vb * dxv;
  const xd = x0 + ub * dxu + vb * dxv;
  const eps = 1e-6;
  if (Math.max(xa, xb, xc, xd) < -1 - eps || Math.min(xa, xb, xc, xd) >= width + eps) return true;
  const ya = y0 + ua * dyu + va * dyv;
  const yb = y0 + ub * dyu + va * dyv;
  const yc = y0 + ua * dyu + vb * dyv;
  const yd = y0 + ub * dyu + vb * dyv;
  return Math.max(ya, yb, yc, yd) < -1 - eps || Math.min(ya, yb, yc, yd) >= height + eps;
}

/** WarpOptions describe the model input a warp produces. */
export interface WarpOptions {
  /** Output side S (square). */
  size: number;
  /** Value range: pixel p (0..255) becomes lo + p / 255 * (hi - lo). */
  range: [number, number];
  /** Outside the image: "zero" pads with black, "replicate" repeats the edge pixel. */
  border: "zero" | "replicate";
  /** Most sub-samples per axis and output pixel when down-scaling (default 2). */
  maxSamples?: number;
}

/**
 * warpToTensor samples the rotated rect `r` of an interleaved RGB image into a planar [3, S, S]
 * float32 tensor by bilinear interpolation, averaging n x n sub-samples per output pixel where
 * the rect is more than 1.5x larger than S (2 x 2 then; MediaPipe samples once), so that strong
 * down-scaling aliases less.
 */
export function warpToTensor(rgb: Uint8Array, width: number, height: number, r: RotatedRect, o: WarpOptions): Float32Array {
  const S = o.size;
  const plane = S * S;
  const out = new Float32Array(3 * plane);
  const c = Math.cos(r.rotation);
  const s = Math.sin(r.rotation);
  const factor = Math.max(r.width, r.height) / S; // image pixels per output pixel
  const n = factor > 1.5 ? Math.max(2, Math.min(o.maxSamples ?? 2, Math.ceil(factor))) : 1;
  const [lo, hi] = o.range;
  const mul = (hi - lo) / 255 / (n * n);
  const replicate = o.border === "replicate";
  const rowStride = width * 3;
  // Image point of output sub-sample (u', v') (continuous output coordinates), minus 0.5 so that
  // pixel centres fall on integers: x = x0 + u' * dxu + v' * dxv, y likewise.
  const dxu = (c * r.width) / S;
  const dyu = (s * r.width) / S;
  const dxv = (-s * r.height) / S;
  const dyv = (c * r.height) / S;
  const x0 = r.cx - 0.5 - (c * r.width - s * r.height) / 2;
  const y0 = r.cy - 0.5 - (s * r.width + c * r.height) / 2;
  // With a zero border, an output pixel whose sub-samples all lie over a pixel beyond the image
  // reads only black: it is written at once (most of a zoomed-out letterbox; geometry.spec, "the
  // zero border").
  const zero = !replicate;
  const first = 0.5 / n;
  const last = (n - 0.5) / n;
  for (let v = 0; v < S; v++) {
    for (let u = 0; u < S; u++) {
      if (zero && outside(x0, y0, dxu, dyu, dxv, dyv, u + first, u + last, v + first, v + last, width, height)) {
        const k = v * S + u;
        out[k] = lo;
        out[plane + k] = lo;
        out[2 * plane + k] = lo;
        continue;
      }
      let accR = 0;
      let accG = 0;
      let accB = 0;
      for (let j = 0; j < n; j++) {
        const vv = v + (j + 0.5) / n;
        for (let i = 0; i < n; i++) {
          const uu = u + (i + 0.5) / n;
          let fx = x0 + uu * dxu + vv * dxv;
          let fy = y0 + uu * dyu + vv * dyv;
          if (replicate) {
            fx = fx < 0 ? 0 : Math.min(fx, width - 1);
            fy = fy < 0 ? 0 : Math.min(fy, height - 1);
          }
          const ix = Math.floor(fx);
          const iy = Math.floor(fy);
          const ax = fx - ix;
          const ay = fy - iy;
          if (ix >= 0 && iy >= 0 && ix < width - 1 && iy < height - 1) {
            const p = iy * rowStride + ix * 3;
            const q = p + rowStride;
            const w00 = (1 - ax) * (1 - ay);
            const w10 = ax * (1 - ay);
            const w01 = (1 - ax) * ay;
            const w11 = ax * ay;
            accR += w00 * rgb[p] + w10 * rgb[p + 3] + w01 * rgb[q] + w11 * rgb[q + 3];
            accG += w00 * rgb[p + 1] + w10 * rgb[p + 4] + w01 * rgb[q + 1] + w11 * rgb[q + 4];
            accB += w00 * rgb[p + 2] + w10 * rgb[p + 5] + w01 * rgb[q + 2] + w11 * rgb[q + 5];
            continue;
          }
          // At or beyond the edge: only the neighbours inside the image count (zero border: black).
          for (let dy = 0; dy < 2; dy++) {
            const yy = iy + dy;
            const wy = dy ? ay : 1 - ay;
            if (wy === 0 || yy < 0 || yy >= height) continue;
            for (let dx = 0; dx < 2; dx++) {
              const xx = ix + dx;
              const w = (dx ? ax : 1 - ax) * wy;
              if (w === 0 || xx < 0 || xx >= width) continue;
              const p = yy * rowStride + xx * 3;
              accR += w * rgb[p];
              accG += w * rgb[p + 1];
              accB += w * rgb[p + 2];
            }
          }
        }
      }
      const k = v * S + u;
      out[k] = lo + accR * mul;
      out[plane + k] = lo + accG * mul;
      out[2 * plane + k] = lo + accB * mul;
    }
  }
  return out;
}
