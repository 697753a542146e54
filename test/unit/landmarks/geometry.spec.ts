import { describe, expect, it } from "vitest";
import {
  decodePalmDetections,
  handRectFromLandmarks,
  handRectFromPalm,
  normalizeRadians,
  rectFromPoints,
  rectToImage,
  ssdAnchors,
  transformRect,
  uprightRotation,
  warpToTensor,
  weightedNms,
  type PalmDetection,
  type Point,
} from "../../../src/landmarks/geometry.js";

const deg = (d: number) => (d * Math.PI) / 180;

describe("ssdAnchors()", () => {
  it("gives MediaPipe's 2016 palm anchors: 24x24 cells x 2, then 12x12 cells x 6, row-major", () => {
    const a = ssdAnchors();
    expect(a).toHaveLength(24 * 24 * 2 + 12 * 12 * 6);
    expect(a[0]).toEqual({ x: 0.5 / 24, y: 0.5 / 24 });
    expect(a[1]).toEqual(a[0]);
    expect(a[2]).toEqual({ x: 1.5 / 24, y: 0.5 / 24 });
    expect(a[24 * 2]).toEqual({ x: 0.5 / 24, y: 1.5 / 24 });
    expect(a[1152]).toEqual({ x: 0.5 / 12, y: 0.5 / 12 });
    expect(a[1152 + 5]).toEqual(a[1152]);
    expect(a[1152 + 6]).toEqual({ x: 1.5 / 12, y: 0.5 / 12 });
    expect(a[2015]).toEqual({ x: 11.5 / 12, y: 11.5 / 12 });
  });
});

describe("decodePalmDetections()", () => {
  it("decodes boxes and keypoints relative to the anchor in input pixels, sigmoid scores, threshold", () => {
    const anchors = [
      { x: 0.25, y: 0.5 },
      { x: 0.75, y: 0.5 },
    ];
    const boxes = new Float32Array(36);
    boxes.set([19.2, -9.6, 48, 96, 0, 19.2], 0);
    const scores = Float32Array.of(2, -2);
    const d = decodePalmDetections(boxes, scores, anchors, 192, 0.5);
    expect(d).toHaveLength(1);
    expect(d[0].score).toBeCloseTo(1 / (1 + Math.exp(-2)), 6);
    expect(d[0].cx).toBeCloseTo(0.35, 6);
    expect(d[0].cy).toBeCloseTo(0.45, 6);
    expect(d[0].w).toBeCloseTo(0.25, 6);
    expect(d[0].h).toBeCloseTo(0.5, 6);
    expect(d[0].keypoints).toHaveLength(7);
    expect(d[0].keypoints[0][0]).toBeCloseTo(0.25, 6);
    expect(d[0].keypoints[0][1]).toBeCloseTo(0.6, 6);
  });
});

describe("weightedNms()", () => {
  const det = (score: number, cx: number, kx: number): PalmDetection => ({ score, cx, cy: 0.5, w: 0.2, h: 0.2, keypoints: [[kx, 0.5]] });
  it("merges overlapping boxes into their score-weighted mean, keeps the best score, leaves far ones apart", () => {
    const out = weightedNms([det(0.6, 0.52, 0.4), det(0.9, 0.5, 0.1), det(0.8, 0.1, 0.9)], 0.3);
    expect(out).toHaveLength(2);
    expect(out[0].score).toBe(0.9);
    expect(out[0].cx).toBeCloseTo((0.9 * 0.5 + 0.6 * 0.52) / 1.5, 6);
    expect(out[0].keypoints[0][0]).toBeCloseTo((0.9 * 0.1 + 0.6 * 0.4) / 1.5, 6);
    expect(out[1].cx).toBeCloseTo(0.1, 6);
  });
  it("terminates on degenerate boxes", () => {
    expect(weightedNms([{ ...det(0.9, 0.5, 0.5), w: 0, h: 0 }])).toHaveLength(1);
  });
});

describe("rotations and rects", () => {
  it("uprightRotation is 0 for a hand pointing up, +90 degrees pointing right, -90 pointing left, 180 pointing down", () => {
    expect(uprightRotation([0, 0], [0, -1])).toBeCloseTo(0, 9);
    expect(uprightRotation([0, 0], [1, 0])).toBeCloseTo(deg(90), 9);
    expect(uprightRotation([0, 0], [-1, 0])).toBeCloseTo(deg(-90), 9);
    expect(Math.abs(uprightRotation([0, 0], [0, 1]))).toBeCloseTo(Math.PI, 9);
    expect(normalizeRadians(deg(270))).toBeCloseTo(deg(-90), 9);
  });

  it("a rect's top edge centre lies along the rotated 'up': for rotation 90 degrees it is to the right of the centre", () => {
    const r = { cx: 100, cy: 100, width: 40, height: 40, rotation: deg(90) };
    const [x, y] = rectToImage(r, 0.5, 0);
    expect(x).toBeCloseTo(120, 9);
    expect(y).toBeCloseTo(100, 9);
  });

  it("transformRect shifts along the rect's own axes, squares on the long side and scales", () => {
    const up = transformRect({ cx: 100, cy: 100, width: 40, height: 20, rotation: 0 }, 2.6, 0, -0.5);
    expect(up).toMatchObject({ cx: 100, cy: 90, width: 104, height: 104 });
    const right = transformRect({ cx: 100, cy: 100, width: 20, height: 20, rotation: deg(90) }, 2, 0, -0.5);
    expect(right.cx).toBeCloseTo(110, 9);
    expect(right.cy).toBeCloseTo(100, 9);
    expect(right.width).toBe(40);
  });

  it("rectFromPoints bounds points in the rotated frame", () => {
    const pts: Point[] = [
      [0, 0],
      [10, 0],
      [10, 20],
      [0, 20],
    ].map(([x, y]) => [x * Math.cos(deg(30)) - y * Math.sin(deg(30)) + 50, x * Math.sin(deg(30)) + y * Math.cos(deg(30)) + 60]);
    const r = rectFromPoints(pts, deg(30));
    expect(r.width).toBeCloseTo(10, 9);
    expect(r.height).toBeCloseTo(20, 9);
    const c = rectToImage(r, 0.5, 0.5);
    expect(c[0]).toBeCloseTo((pts[0][0] + pts[2][0]) / 2, 9);
    expect(c[1]).toBeCloseTo((pts[0][1] + pts[2][1]) / 2, 9);
  });

  it("handRectFromPalm and handRectFromLandmarks turn with the hand", () => {
    const palm = handRectFromPalm({ cx: 100, cy: 100, w: 50, h: 50 }, [
      [100, 125],
      [0, 0],
      [100, 75],
    ]);
    expect(palm.rotation).toBeCloseTo(0, 9);
    expect(palm.cy).toBeCloseTo(75, 9);
    expect(palm.width).toBeCloseTo(130, 9);
    // The same hand pointing right (turned 90 degrees clockwise about (100, 100)).
    const right = handRectFromPalm({ cx: 100, cy: 100, w: 50, h: 50 }, [
      [75, 100],
      [0, 0],
      [125, 100],
    ]);
    expect(right.rotation).toBeCloseTo(deg(90), 9);
    expect(right.cx).toBeCloseTo(125, 9);
    expect(right.cy).toBeCloseTo(100, 9);
    const lms: Point[] = Array.from({ length: 21 }, (_, i) => [100 + (i % 5) * 5, 100 - Math.floor(i / 5) * 10]);
    const a = handRectFromLandmarks(lms);
    const b = handRectFromLandmarks(lms.map(([x, y]) => [200 - y, x] as Point)); // turned 90 degrees clockwise
    expect(normalizeRadians(b.rotation - a.rotation)).toBeCloseTo(deg(90), 6);
    expect(b.width).toBeCloseTo(a.width, 6);
    expect(b.cx).toBeCloseTo(200 - a.cy, 6);
    expect(b.cy).toBeCloseTo(a.cx, 6);
  });
});

describe("warpToTensor()", () => {
  const W = 8;
  const H = 6;
  const rgb = new Uint8Array(W * H * 3);
  for (let y = 0; y < H; y++) for (let x = 0; x < W; x++) rgb.set([x * 30, y * 40, 200], (y * W + x) * 3);

  it("copies pixels exactly for an axis-aligned rect of the output size, planar and normalised", () => {
    const t = warpToTensor(rgb, W, H, { cx: 4, cy: 3, width: 4, height: 4, rotation: 0 }, { size: 4, range: [0, 255], border: "zero" });
    // Output (u, v) = image pixel (2 + u, 1 + v).
    expect(t[0]).toBeCloseTo(60, 4);
    expect(t[16]).toBeCloseTo(40, 4);
    expect(t[32]).toBeCloseTo(200, 4);
    expect(t[3 * 4 + 3]).toBeCloseTo(150, 4);
  });

  it("turns with the rect: rotation 90 degrees reads the image's column downwards from the top-right", () => {
    const t = warpToTensor(rgb, W, H, { cx: 4, cy: 3, width: 4, height: 4, rotation: deg(90) }, { size: 4, range: [0, 1], border: "zero" });
    // Output row 0 (the rect's top) lies along image x = 5 (right of centre), running top to bottom.
    for (let u = 0; u < 4; u++) {
      expect(t[u] * 255).toBeCloseTo(5 * 30, 3);
      expect(t[16 + u] * 255).toBeCloseTo((1 + u) * 40, 3);
    }
  });

  it("pads with black (zero) or the edge pixel (replicate)", () => {
    const far = { cx: -50, cy: -50, width: 4, height: 4, rotation: 0 };
    const z = warpToTensor(rgb, W, H, far, { size: 4, range: [-1, 1], border: "zero" });
    expect(Array.from(new Set(z))).toEqual([-1]);
    const r = warpToTensor(rgb, W, H, far, { size: 4, range: [0, 255], border: "replicate" });
    expect(r[0]).toBeCloseTo(0, 4);
    expect(r[32]).toBeCloseTo(200, 4);
  });

  it.each([0, 0.3])("the zero border reads as the photo padded with black (a zoomed-out letterbox, rotation %s)", (rotation) => {
    // A photo shown 3x smaller on black, as the palm search's zoom-outs show it: most of the output
    // lies beyond the photo. Sampled again from the photo with 100 px of black drawn around it.
    const w = 40;
    const h = 30;
    const photo = new Uint8Array(w * h * 3);
    for (let i = 0; i < photo.length; i++) photo[i] = (i * 7919) % 251;
    const pad = 100;
    const padded = new Uint8Array((w + 2 * pad) * (h + 2 * pad) * 3);
    for (let y = 0; y < h; y++) padded.set(photo.subarray(y * w * 3, (y + 1) * w * 3), ((y + pad) * (w + 2 * pad) + pad) * 3);
    const rect = { cx: 20, cy: 15, width: 120, height: 120, rotation };
    const options = { size: 16, range: [0, 1] as [number, number], border: "zero" as const, maxSamples: 8 };
    const a = warpToTensor(photo, w, h, rect, options);
    const b = warpToTensor(padded, w + 2 * pad, h + 2 * pad, { ...rect, cx: rect.cx + pad, cy: rect.cy + pad }, options);
    expect(a.filter((x) => x > 0).length).toBeGreaterThan(16);
    for (let i = 0; i < a.length; i++) expect(a[i]).toBeCloseTo(b[i], 9);
  });
});
