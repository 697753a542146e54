import { describe, expect, it } from "vitest";
import type { Point } from "../../../src/landmarks/geometry.js";
import { closeupLandmarks, frameToImage, imageToFrame, palmFrame, shareInside } from "../../../src/landmarks/palm-frame.js";

/** 21 landmarks of an upright right palm (fingers up, index on the image's right), wrist at (500, 900). */
function uprightRightPalm(): Point[] {
  const lm: Point[] = Array.from({ length: 21 }, () => [500, 700] as Point);
  lm[0] = [500, 900];
  lm[5] = [590, 560];
  lm[9] = [520, 540];
  lm[13] = [450, 550];
  lm[17] = [390, 580];
  return lm;
}

const mirror = (lm: Point[], w: number): Point[] => lm.map(([x, y]) => [w - x, y]);
const turn90 = (lm: Point[], h: number): Point[] => lm.map(([x, y]) => [h - y, x]);

describe("palmFrame()", () => {
  it("sees an upright right palm unmirrored, wrist down, centred between wrist and middle knuckle", () => {
    const f = palmFrame(uprightRightPalm());
    expect(f.mirrored).toBe(false);
    expect(f.ey[1]).toBeGreaterThan(0.99); // +y toward the wrist
    expect(f.ex[0]).toBeGreaterThan(0.99); // +x toward the index
    expect(f.centre).toEqual([510, 720]);
  });

  it("shows a mirrored photo as the same right palm: every landmark lands on the same model pixel", () => {
    const lm = uprightRightPalm();
    const a = palmFrame(lm);
    const b = palmFrame(mirror(lm, 1000));
    expect(b.mirrored).toBe(true);
    for (const k of [0, 5, 9, 17]) {
      const pa = imageToFrame(a, 256, lm[k][0], lm[k][1]);
      const pb = imageToFrame(b, 256, 1000 - lm[k][0], lm[k][1]);
      expect(pb[0]).toBeCloseTo(pa[0], 6);
      expect(pb[1]).toBeCloseTo(pa[1], 6);
    }
  });

  it("shows a turned photo as the same upright palm", () => {
    const lm = uprightRightPalm();
    const a = palmFrame(lm);
    const b = palmFrame(turn90(lm, 1200));
    expect(b.mirrored).toBe(false);
    for (const k of [0, 5, 9, 17]) {
      const pa = imageToFrame(a, 256, lm[k][0], lm[k][1]);
      const [x, y] = turn90([lm[k]], 1200)[0];
      const pb = imageToFrame(b, 256, x, y);
      expect(pb[0]).toBeCloseTo(pa[0], 6);
      expect(pb[1]).toBeCloseTo(pa[1], 6);
    }
  });

  it("maps model pixels to the image and back", () => {
    const f = palmFrame(turn90(mirror(uprightRightPalm(), 1000), 1200));
    for (const [u, v] of [
      [0, 0],
      [255, 0],
      [17.5, 200.25],
    ] as Point[]) {
      const [x, y] = frameToImage(f, 256, u, v);
      const back = imageToFrame(f, 256, x, y);
      expect(back[0]).toBeCloseTo(u, 9);
      expect(back[1]).toBeCloseTo(v, 9);
    }
  });

  it("sizes the view by the longer of the palm's length and its knuckle span", () => {
    const lm = uprightRightPalm();
    const long = palmFrame(lm); // |9 - 0| = 360.6 > 1.3 x |5 - 17| = 262.4
    expect(long.side).toBeCloseTo(1.7 * Math.hypot(20, 360), 6);
    const short = lm.map((p) => [...p] as Point);
    short[0] = [500, 700]; // palm foreshortened along its length: the knuckle span decides
    expect(palmFrame(short).side).toBeCloseTo(1.7 * 1.3 * Math.hypot(200, 20), 6);
  });

  it("shows the palm larger in a tighter frame, about the same centre and axes", () => {
    const lm = uprightRightPalm();
    const wide = palmFrame(lm);
    const tight = palmFrame(lm, 1.3); // a line model trained with frame_side 1.3
    expect(tight.side).toBeCloseTo((wide.side * 1.3) / 1.7, 6);
    expect(tight.centre).toEqual(wide.centre);
    expect(tight.ex).toEqual(wide.ex);
    // The index knuckle lies 1.7 / 1.3 times as far from the view's centre, in model pixels.
    const [u1, v1] = imageToFrame(wide, 256, ...lm[5]);
    const [u2, v2] = imageToFrame(tight, 256, ...lm[5]);
    expect(u2 - 127.5).toBeCloseTo(((u1 - 127.5) * 1.7) / 1.3, 6);
    expect(v2 - 127.5).toBeCloseTo(((v1 - 127.5) * 1.7) / 1.3, 6);
  });
});

describe("closeupLandmarks()", () => {
  // uprightRightPalm's knuckles lie 540-580 px down, 340 px from the wrist: a 1000 x 1000 photo has room for the fingers.
  it("keeps a whole hand's landmarks: the frame is the landmarks' own", () => {
    const lm = uprightRightPalm();
    expect(closeupLandmarks(lm, 1000, 1000)).toBe(lm);
  });

  it("moves a close-up's wrist out along the palm's axis, and no other landmark", () => {
    // The same hand in a photo cut 60 px above the middle knuckle: the fingers are out of it.
    const lm = uprightRightPalm().map(([x, y]): Point => [x, y - 480]);
    const out = closeupLandmarks(lm, 1000, 1000);
    expect(out).not.toBe(lm);
    for (let k = 1; k < 21; k++) expect(out[k]).toEqual(lm[k]);
    const before = Math.hypot(lm[0][0] - lm[9][0], lm[0][1] - lm[9][1]);
    const after = Math.hypot(out[0][0] - lm[9][0], out[0][1] - lm[9][1]);
    expect(after / before).toBeGreaterThan(1.02);
    expect(after / before).toBeLessThanOrEqual(1.3);
    // Along the axis: the moved wrist, the old one and the middle knuckle are on one line.
    const cross = (lm[0][0] - lm[9][0]) * (out[0][1] - lm[9][1]) - (lm[0][1] - lm[9][1]) * (out[0][0] - lm[9][0]);
    expect(Math.abs(cross) / (before * after)).toBeLessThan(1e-9);
    // A larger frame: the palm is shown smaller than the close-up's own landmarks would.
    expect(palmFrame(out).side).toBeGreaterThan(palmFrame(lm).side);
  });

  it("moves the wrist the same on a mirrored or turned close-up", () => {
    const lm = uprightRightPalm().map(([x, y]): Point => [x, y - 480]);
    const moved = closeupLandmarks(lm, 1000, 1000)[0];
    const m = closeupLandmarks(mirror(lm, 1000), 1000, 1000)[0];
    expect(m[0]).toBeCloseTo(1000 - moved[0], 6);
    expect(m[1]).toBeCloseTo(moved[1], 6);
    const t = closeupLandmarks(turn90(lm, 1000), 1000, 1000)[0];
    const [x, y] = turn90([moved], 1000)[0];
    expect(t[0]).toBeCloseTo(x, 6);
    expect(t[1]).toBeCloseTo(y, 6);
  });
});

describe("shareInside()", () => {
  it("is 1 for a view inside the photo, and the part inside for one that runs past its edge", () => {
    expect(shareInside({ centre: [500, 500], ex: [1, 0], ey: [0, 1], side: 400, mirrored: false }, 1000, 1000)).toBe(1);
    // Centred on the left edge: the right half is inside.
    expect(shareInside({ centre: [0, 500], ex: [1, 0], ey: [0, 1], side: 400, mirrored: false }, 1000, 1000)).toBe(0.5);
    // Centred on a corner: a quarter.
    expect(shareInside({ centre: [1000, 1000], ex: [0, 1], ey: [-1, 0], side: 400, mirrored: false }, 1000, 1000)).toBe(0.25);
  });
});
