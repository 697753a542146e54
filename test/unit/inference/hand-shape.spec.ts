import { describe, expect, it } from "vitest";
import { handShape } from "../../../src/inference/hand-shape.js";
import type { Point } from "../../../src/landmarks/geometry.js";

/**
 * A synthetic upright right hand (fingers up, y down) with known proportions: the knuckles 5, 9,
 * 13, 17 spaced evenly over `width`, the wrist `palm` below the middle knuckle, each finger's three
 * segments straight up with the given total lengths (thumb: 2-3-4 out to the side).
 */
function hand(palm: number, width: number, fingers: Record<"thumb" | "index" | "middle" | "ring" | "little", number>): Point[] {
  const lm: Point[] = new Array(21);
  const x0 = 500;
  const y0 = 400;
  const knuckles = [
    [5, width, fingers.index],
    [9, (2 * width) / 3, fingers.middle],
    [13, width / 3, fingers.ring],
    [17, 0, fingers.little],
  ] as const;
  for (const [k, dx, len] of knuckles) {
    const x = x0 - width / 2 + dx;
    lm[k] = [x, y0];
    // segments of 45%, 30%, 25% of the finger
    lm[k + 1] = [x, y0 - 0.45 * len];
    lm[k + 2] = [x, y0 - 0.75 * len];
    lm[k + 3] = [x, y0 - len];
  }
  lm[1] = [x0 + width / 2 + 40, y0 + palm * 0.7];
  lm[2] = [x0 + width / 2 + 60, y0 + palm * 0.5];
  lm[3] = [x0 + width / 2 + 60 + 0.6 * fingers.thumb * 0.6, y0 + palm * 0.5 - 0.8 * fingers.thumb * 0.6];
  lm[4] = [x0 + width / 2 + 60 + 0.6 * fingers.thumb, y0 + palm * 0.5 - 0.8 * fingers.thumb];
  // The wrist sits under the middle knuckle.
  lm[0] = [lm[9][0], y0 + palm];
  return lm;
}

/** The same points turned by `deg` about (0, 0) and mirrored when asked: a photo turned or flipped. */
function turn(points: Point[], deg: number, mirror = false): Point[] {
  const r = (deg * Math.PI) / 180;
  return points.map(([x, y]) => {
    const mx = mirror ? -x : x;
    return [mx * Math.cos(r) - y * Math.sin(r), mx * Math.sin(r) + y * Math.cos(r)];
  });
}

/** The photo the synthetic hands lie in (width, height): wide enough for every unturned hand here. */
const PHOTO = [1000, 1000] as const;

describe("handShape()", () => {
  it("measures palm length, ratio and each finger within 0.5%, on a turned and mirrored photo alike", () => {
    const fingers = { thumb: 130, index: 190, middle: 210, ring: 200, little: 150 };
    const lm = hand(240, 160, fingers);
    for (const pts of [lm, turn(lm, 37), turn(lm, -120, true)]) {
      const s = handShape(pts, ...PHOTO);
      expect(s.palmLength).toBeCloseTo(240, 0);
      expect(s.palmRatio).toBeCloseTo(1.5, 2);
      expect(s.fingers.index).toBeCloseTo(190 / 240, 2);
      expect(s.fingers.middle).toBeCloseTo(210 / 240, 2);
      expect(s.fingers.ring).toBeCloseTo(200 / 240, 2);
      expect(s.fingers.little).toBeCloseTo(150 / 240, 2);
      expect(s.fingers.thumb).toBeCloseTo(130 / 240, 2);
      expect(s.indexRingRatio).toBeCloseTo(0.95, 2);
    }
  });

  it.each([
    { palm: 200, width: 160, middle: 160, type: "earth", shape: "square", fingers: "short" },
    { palm: 200, width: 160, middle: 230, type: "air", shape: "square", fingers: "long" },
    { palm: 260, width: 160, middle: 200, type: "fire", shape: "long", fingers: "short" },
    { palm: 260, width: 160, middle: 280, type: "water", shape: "long", fingers: "long" },
  ])(
    "calls a palm $palm long and $width wide with a middle finger of $middle a $type hand",
    ({ palm, width, middle, type, shape, fingers }) => {
      const s = handShape(
        hand(palm, width, { thumb: 120, index: middle * 0.9, middle, ring: middle * 0.93, little: middle * 0.75 }),
        ...PHOTO,
      );
      expect(s.palm).toBe(shape);
      expect(s.fingerLength).toBe(fingers);
      expect(s.handType).toBe(type);
    },
  );

  it("puts the palm and finger boundaries where docs/api.md says: ratio 1.5, middle finger 1.0 palm", () => {
    const f = (middle: number) => ({ thumb: 100, index: 150, middle, ring: 150, little: 120 });
    expect(handShape(hand(1.49 * 160, 160, f(100)), ...PHOTO).palm).toBe("square");
    expect(handShape(hand(1.51 * 160, 160, f(100)), ...PHOTO).palm).toBe("long");
    expect(handShape(hand(200, 160, f(199)), ...PHOTO).fingerLength).toBe("short");
    expect(handShape(hand(200, 160, f(201)), ...PHOTO).fingerLength).toBe("long");
  });

  it("says whether every fingertip lies in the photo: a close-up's fingers are estimates", () => {
    const lm = hand(240, 160, { thumb: 130, index: 190, middle: 210, ring: 200, little: 150 });
    expect(handShape(lm, ...PHOTO).fingersInPhoto).toBe(true);
    // The photo cut 250 px below its top: the middle fingertip (y 190) is above it.
    const cut = lm.map(([x, y]): Point => [x, y - 250]);
    expect(handShape(cut, 1000, 750).fingersInPhoto).toBe(false);
    // Only the thumb's tip (x 718; the other tips at most 580) past the right edge of a photo 700 wide.
    expect(handShape(lm, 700, 1000).fingersInPhoto).toBe(false);
  });
});
