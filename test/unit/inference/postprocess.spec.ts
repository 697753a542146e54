import { describe, expect, it } from "vitest";
import { countMask, maskToBytes } from "../../../src/image/mask.js";
import { growLine, labelComponents, palmDistanceMap, renderFrameMask, ruleUnit, selectLine } from "../../../src/inference/postprocess.js";
import { FRAME_SIDE, imageToFrame, squareFrame, type PalmFrame } from "../../../src/landmarks/palm-frame.js";

const S = 64;

/** An S x S map with value `v` on the given rectangles [x0, y0, x1, y1). */
function map(rects: Array<[number, number, number, number, number?]>, size = S): Float32Array {
  const m = new Float32Array(size * size);
  for (const [x0, y0, x1, y1, v = 0.9] of rects) for (let y = y0; y < y1; y++) for (let x = x0; x < x1; x++) m[y * size + x] = v;
  return m;
}

describe("labelComponents()", () => {
  it("joins diagonal neighbours (8-connectivity) and counts sizes", () => {
    const m = map([
      [0, 0, 1, 1],
      [1, 1, 2, 2],
      [10, 10, 13, 12],
    ]);
    const c = labelComponents(m, S, S, 0.5);
    expect(c.count).toBe(2);
    expect(Array.from(c.sizes).slice(1).sort()).toEqual([2, 6]);
  });
});

describe("growLine()", () => {
  it("follows a line through its faint stretch, not into a separate faint crease or off the palm", () => {
    // A line at 0.9 (x 5..20), faint at 0.3 (x 20..45), then a separate faint crease (x 50..60).
    const prob = map([
      [5, 30, 20, 32, 0.9],
      [20, 30, 45, 32, 0.3],
      [50, 30, 60, 32, 0.3],
      [20, 10, 30, 12, 0.3],
    ]);
    const kept = new Uint8Array(S * S);
    for (let i = 0; i < kept.length; i++) kept[i] = prob[i] > 0.5 ? 1 : 0;
    const at = (m: Uint8Array, x: number, y: number) => m[y * S + x];
    const grown = growLine(prob, kept, S, 0.2, null);
    expect(at(grown, 44, 30)).toBe(1); // the faint stretch joins
    expect(at(grown, 55, 30)).toBe(0); // a gap stops it
    expect(at(grown, 25, 10)).toBe(0); // not connected
    expect(countMask({ width: S, height: S, x0: 0, y0: 0, x1: S, y1: S, data: grown })).toBe(2 * 40);
    // At the line's own threshold nothing is added.
    expect(growLine(prob, kept, S, 0.5, null)).toEqual(kept);
    // Off the palm (palm only left of x = 30): growth stops within 3% of S of it.
    const palm = map([[0, 0, 30, S]]);
    const near = growLine(prob, kept, S, 0.2, palmDistanceMap(palm, S, 0.5));
    expect(at(near, 30, 30)).toBe(1);
    expect(at(near, 40, 30)).toBe(0);
  });
});

describe("selectLine()", () => {
  const opts = { threshold: 0.5, minPixels: 20, minConfidence: 0.6 };

  it("keeps the strongest component inside the palm and drops one far outside it", () => {
    const palm = map([[8, 8, 56, 56]]);
    const prob = map([
      [10, 30, 50, 32], // inside the palm: 80 px
      [0, 0, 60, 3], // bigger, but far outside the palm
    ]);
    const sel = selectLine(prob, S, { ...opts, palmDistance: palmDistanceMap(palm, S, 0.5) });
    expect(sel.detected).toBe(true);
    expect(sel.pixels).toBe(80);
    expect(sel.kept[31 * S + 20]).toBe(1);
    expect(sel.kept[1 * S + 20]).toBe(0);
  });

  it("drops a crease lying mostly off the palm (a finger or wrist crease), even the strongest", () => {
    const palm = map([[8, 8, 56, 40]]); // palm rows 8..39
    const prob = map([
      [10, 30, 40, 32], // on the palm: 60 px
      [10, 36, 50, 50, 0.95], // starts on the palm, mostly below it (the wrist): 560 px
    ]);
    const sel = selectLine(prob, S, { ...opts, palmDistance: palmDistanceMap(palm, S, 0.5) });
    expect(sel.pixels).toBe(60);
    expect(sel.kept[45 * S + 20]).toBe(0);
  });

  it("keeps a sizeable piece broken off the same crease, drops a speck", () => {
    const prob = map([
      [5, 30, 30, 32], // 50 px
      [32, 30, 50, 32], // 36 px, 2 px gap (the gap allowed is 6% of S)
      [20, 50, 22, 51], // speck
    ]);
    const sel = selectLine(prob, S, opts);
    expect(sel.pixels).toBe(86);
    expect(sel.kept[50 * S + 20]).toBe(0);
  });

  it("keeps a piece that continues the line past its end, drops a crease running alongside it (hand1's head line)", () => {
    const prob = map([
      [5, 30, 40, 32], // the line: 70 px
      [30, 34, 55, 36], // overlaps its end, reaches 15 px past it (3% of S is 2 px): a broken line's next piece
      [10, 26, 38, 28], // 2 px above it, within its length: a parallel crease
    ]);
    const sel = selectLine(prob, S, opts);
    expect(sel.kept[35 * S + 50]).toBe(1);
    expect(sel.kept[27 * S + 20]).toBe(0);
    expect(sel.pixels).toBe(70 + 50);
  });

  it("detects nothing below min_pixels or min_confidence", () => {
    expect(selectLine(map([[10, 10, 15, 13]]), S, opts).detected).toBe(false); // 15 px < 20
    const faint = selectLine(map([[10, 10, 40, 12, 0.55]]), S, opts); // mean 0.55 < 0.6
    expect(faint.detected).toBe(false);
    expect(faint.pixels).toBe(0);
    expect(faint.kept.every((v) => v === 0)).toBe(true);
  });
});

describe("ruleUnit()", () => {
  it("leaves a model framed at FRAME_SIDE exactly as before and scales the rules for a tighter frame", () => {
    // Exact, not close: the released model's lines must not move by a pixel from rounding.
    for (const S of [128, 256, 384, 512]) expect(ruleUnit(S, FRAME_SIDE)).toBe(S);
    expect(ruleUnit(256, 1.3)).toBeCloseTo((256 * 1.7) / 1.3, 9);
  });
});

describe("renderFrameMask()", () => {
  it("upsamples the kept line into the crop's footprint in the image, thresholded", () => {
    // Crop box at (1000, 500), 128 px square, rendered at 64: 2 image px per model px.
    const prob = map([[10, 20, 40, 23]]); // model rows 20..22, cols 10..39
    const kept = new Uint8Array(S * S);
    for (let i = 0; i < kept.length; i++) kept[i] = prob[i] > 0.5 ? 1 : 0;
    const m = renderFrameMask(prob, kept, S, 0.5, squareFrame({ x: 1000, y: 500, side: 128 }), 2000, 1500);
    const rows = new Set<number>();
    const cols = new Set<number>();
    const bytes = maskToBytes(m, 1);
    for (let y = 0; y < 1500; y++) for (let x = 0; x < 2000; x++) if (bytes[y * 2000 + x]) rows.add(y), cols.add(x);
    expect(Math.min(...rows)).toBeGreaterThanOrEqual(500 + 2 * 20 - 1);
    expect(Math.max(...rows)).toBeLessThanOrEqual(500 + 2 * 23);
    expect(Math.min(...cols)).toBeGreaterThanOrEqual(1000 + 2 * 10 - 1);
    expect(Math.max(...cols)).toBeLessThanOrEqual(1000 + 2 * 40);
    expect(m.pixels).toBe(countMask(m));
    expect(m.pixels).toBeGreaterThan(0.7 * 30 * 3 * 4);
    expect(m.probSum / m.pixels).toBeGreaterThan(0.5);
    expect(m.probSum / m.pixels).toBeLessThanOrEqual(0.9);
  });

  it.each([
    ["an axis-aligned crop", squareFrame({ x: -37, y: 20, side: 333 })],
    [
      "a turned, mirrored palm frame",
      {
        centre: [150, 140],
        ex: [-Math.cos(0.6), -Math.sin(0.6)],
        ey: [-Math.sin(0.6), Math.cos(0.6)],
        side: 280,
        mirrored: true,
      } as PalmFrame,
    ],
  ])("equals a naive bilinear upsampling of the kept line through %s, pixel for pixel", (_, frame) => {
    // A smooth diagonal ridge plus a separate blob that is not kept.
    const prob = new Float32Array(S * S);
    for (let v = 0; v < S; v++) for (let u = 0; u < S; u++) prob[v * S + u] = Math.max(0, 0.95 - 0.15 * Math.abs(v - 0.6 * u - 10));
    for (let v = 50; v < 56; v++) for (let u = 5; u < 11; u++) prob[v * S + u] = 0.9;
    const kept = new Uint8Array(S * S);
    // Keep the ridge (a whole component, as selectLine keeps), not the blob.
    for (let v = 0; v < S; v++)
      for (let u = 0; u < S; u++) if (prob[v * S + u] > 0.5 && !(v >= 50 && v < 56 && u >= 5 && u < 11)) kept[v * S + u] = 1;
    const W = 300;
    const H = 260;
    const m = renderFrameMask(prob, kept, S, 0.5, frame, W, H);
    // Naive reference: restricted map (kept and its 1-px rim), bilinear, zero outside.
    const p = new Float32Array(S * S);
    for (let v = 0; v < S; v++)
      for (let u = 0; u < S; u++)
        if (kept[v * S + u])
          for (let dv = -1; dv <= 1; dv++)
            for (let du = -1; du <= 1; du++) {
              const vv = v + dv;
              const uu = u + du;
              if (vv >= 0 && vv < S && uu >= 0 && uu < S) p[vv * S + uu] = prob[vv * S + uu];
            }
    const at = (u: number, v: number) => (u < 0 || v < 0 || u >= S || v >= S ? 0 : p[v * S + u]);
    const want = new Uint8Array(W * H);
    let n = 0;
    for (let y = 0; y < H; y++)
      for (let x = 0; x < W; x++) {
        const [u, v] = imageToFrame(frame, S, x + 0.5, y + 0.5);
        const iu = Math.floor(u);
        const iv = Math.floor(v);
        const a = u - iu;
        const b = v - iv;
        const val = (at(iu, iv) * (1 - a) + at(iu + 1, iv) * a) * (1 - b) + (at(iu, iv + 1) * (1 - a) + at(iu + 1, iv + 1) * a) * b;
        if (val > 0.5) (want[y * W + x] = 1), n++;
      }
    const got = maskToBytes(m, 1);
    let differ = 0;
    for (let i = 0; i < want.length; i++) if (got[i] !== want[i]) differ++;
    expect(n).toBeGreaterThan(1000);
    expect(differ).toBeLessThanOrEqual(2); // float rounding at the threshold only
    expect(m.pixels).toBe(countMask(m));
  });

  it("clips a crop that extends beyond the image", () => {
    const prob = map([[0, 0, 64, 64]]);
    const kept = new Uint8Array(S * S).fill(1);
    const m = renderFrameMask(prob, kept, S, 0.5, squareFrame({ x: -64, y: -64, side: 256 }), 100, 80);
    expect([m.width, m.height]).toEqual([100, 80]);
    expect(m.x0).toBeGreaterThanOrEqual(0);
    expect(m.y0).toBeGreaterThanOrEqual(0);
    expect(m.x1).toBeLessThanOrEqual(100);
    expect(m.y1).toBeLessThanOrEqual(80);
    expect(m.pixels).toBe(countMask(m));
    expect(m.pixels).toBe(100 * 80);
  });

  it("returns an empty mask when nothing is kept", () => {
    const m = renderFrameMask(map([[0, 0, 10, 10]]), new Uint8Array(S * S), S, 0.5, squareFrame({ x: 0, y: 0, side: 64 }), 64, 64);
    expect(m.pixels).toBe(0);
    expect(m.data.length).toBe(0);
  });
});
