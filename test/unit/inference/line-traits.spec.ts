/**
 * Line traits on synthetic lines whose geometry is known: strokes drawn in the canonical palm
 * frame (S = 256) of an upright right hand whose palm width is 160 image pixels, so that one palm
 * width is 160 x 256 / 408 = 100.4 model pixels. Each trait is checked within a stated tolerance.
 */
import { describe, expect, it } from "vitest";
import type { LineName } from "../../../src/inference/analyzer-types.js";
import {
  frameLuma,
  headLifeStart,
  measureLine,
  measureLines,
  placeOnPalm,
  type MeasureContext,
} from "../../../src/inference/line-traits.js";
import type { Point } from "../../../src/landmarks/geometry.js";
import { ruleUnit } from "../../../src/inference/postprocess.js";
import { FRAME_SIDE, frameToImage, palmFrame } from "../../../src/landmarks/palm-frame.js";
import { strokeMask } from "../../helpers/images.js";

const S = 256;

/** An upright right hand (index on the right): knuckles 17, 13, 9, 5 at y = 300, 160 px apart end to end; wrist 240 below. */
function landmarks(): Point[] {
  const lm: Point[] = Array.from({ length: 21 }, () => [500, 300] as Point);
  lm[17] = [420, 300];
  lm[13] = [473.3, 300];
  lm[9] = [526.7, 300];
  lm[5] = [580, 300];
  lm[0] = [526.7, 540];
  return lm;
}
const LM = landmarks();
const FRAME = palmFrame(LM);
const UNIT = (160 * S) / FRAME.side; // model pixels per palm width

/** Flat skin at brightness 180, with the given mask darkened by `contrast` (a crease of that depth). */
function luma(mask: Uint8Array | null = null, contrast = 0): Float32Array {
  const l = new Float32Array(S * S).fill(180);
  if (mask) for (let i = 0; i < l.length; i++) if (mask[i]) l[i] = 180 * (1 - contrast);
  return l;
}

/** Skin at brightness 180 with a soft crease along v = 110, darkest (by 0.3) on it and fading with SD `sigma` pixels. */
function softCrease(sigma: number): Float32Array {
  const l = new Float32Array(S * S).fill(180);
  for (let v = 0; v < S; v++) for (let u = 0; u < S; u++) l[v * S + u] = 180 * (1 - 0.3 * Math.exp(-((v - 110) ** 2) / (2 * sigma ** 2)));
  return l;
}

const ctx = (l: Float32Array = luma()): MeasureContext => ({ size: S, frame: FRAME, landmarks: LM, palmWidth: 160, luma: l });

/** A binary S x S mask: discs of radius r along the segments through `points` (model pixels). */
function stroke(points: [number, number][], r = 2, into: Uint8Array = new Uint8Array(S * S)): Uint8Array {
  return strokeMask(S, points, r, into);
}

/** Points of a circular arc: centre (cx, cy), radius, from angle a0 to a1 (degrees). */
function arc(cx: number, cy: number, radius: number, a0: number, a1: number): [number, number][] {
  const pts: [number, number][] = [];
  for (let k = 0; k <= 60; k++) {
    const a = ((a0 + ((a1 - a0) * k) / 60) * Math.PI) / 180;
    pts.push([cx + radius * Math.cos(a), cy + radius * Math.sin(a)]);
  }
  return pts;
}

const measure = (line: LineName, mask: Uint8Array, l?: Float32Array, length = 1) => measureLine(line, mask, length, ctx(l)).traits;

describe("measureLine()", () => {
  it.each([
    { angle: 0, words: "straight" },
    { angle: 60, words: "curved" },
    { angle: 100, words: "strongly_curved" },
    { angle: 150, words: "strongly_curved" },
  ])("measures an arc of $angle degrees as sagitta / chord = tan(angle / 4) / 2 within 0.02 ($words)", ({ angle, words }) => {
    // Arcs of the same 110-pixel chord; angle 0 is a straight stroke.
    const pts: [number, number][] =
      angle === 0
        ? [
            [70, 120],
            [180, 120],
          ]
        : (() => {
            const radius = 55 / Math.sin((angle * Math.PI) / 360);
            const cy = 120 - radius * Math.cos((angle * Math.PI) / 360);
            return arc(125, cy, radius, 90 + angle / 2, 90 - angle / 2);
          })();
    const t = measure("heart", stroke(pts));
    expect(Math.abs(t.curvature - Math.tan((angle * Math.PI) / 720) / 2)).toBeLessThanOrEqual(0.02);
    expect(t.curvatureLabel).toBe(words);
  });

  it("finds each gap along a line, where it is (within 0.03 of the course) and how long (within 0.02 palm widths)", () => {
    // A heart line along v = 100 from u = 40 to 200 with mask gaps [90, 102) and [150, 158).
    const m = stroke([
      [40, 100],
      [87, 100],
    ]);
    stroke(
      [
        [104, 100],
        [147, 100],
      ],
      2,
      m,
    );
    stroke(
      [
        [160, 100],
        [200, 100],
      ],
      2,
      m,
    );
    const t = measure("heart", m);
    expect(t.breaks).toHaveLength(2);
    const [first, second] = t.breaks;
    // Reading order: heart from the little-finger side (small u); the course spans u 40..200.
    expect(Math.abs(first.at - (90 - 40) / 160)).toBeLessThanOrEqual(0.03);
    expect(Math.abs(first.length - 12 / UNIT)).toBeLessThanOrEqual(0.02);
    expect(Math.abs(second.at - (150 - 40) / 160)).toBeLessThanOrEqual(0.03);
    expect(Math.abs(second.length - 8 / UNIT)).toBeLessThanOrEqual(0.02);
    // The gap's middle, in image pixels.
    const [x, y] = frameToImage(FRAME, S, 96, 100);
    expect(Math.hypot(first.point[0] - x, first.point[1] - y)).toBeLessThan(3 * (FRAME.side / S));
  });

  it("does not call a one-pixel nick in the mask a break, nor an unbroken line", () => {
    const whole = stroke([
      [40, 100],
      [200, 100],
    ]);
    expect(measure("heart", whole).breaks).toEqual([]);
    const nicked = Uint8Array.from(whole);
    for (let v = 0; v < S; v++) nicked[v * S + 120] = 0;
    expect(measure("heart", nicked).breaks).toEqual([]);
  });

  it("finds a fork at the end of a head line, its reach within 0.03 palm widths, and none on a plain or spurred line", () => {
    // Head reads from the thumb side (large u): 210 -> 50 along v = 110; at u = 80 a branch of 24
    // pixels leaves downward-left at 45 degrees.
    const main: [number, number][] = [
      [210, 110],
      [50, 110],
    ];
    const forked = stroke(main);
    stroke(
      [
        [80, 110],
        [80 - 24 / Math.SQRT2, 110 + 24 / Math.SQRT2],
      ],
      2,
      forked,
    );
    const t = measure("head", forked);
    expect(t.forks).toHaveLength(1);
    expect(t.forks[0].near).toBe("end");
    expect(Math.abs(t.forks[0].length - 24 / UNIT)).toBeLessThanOrEqual(0.03);
    const [x, y] = frameToImage(FRAME, S, 80, 110);
    expect(Math.hypot(t.forks[0].point[0] - x, t.forks[0].point[1] - y)).toBeLessThan(4 * (FRAME.side / S));
    expect(measure("head", stroke(main)).forks).toEqual([]);
    // A 3-pixel spur is a bump of the mask, not a fork.
    const spur = stroke(main);
    stroke(
      [
        [70, 110],
        [70, 115],
      ],
      2,
      spur,
    );
    expect(measure("head", spur).forks).toEqual([]);
    // A branch in the middle of the line is not a fork at an end.
    const middle = stroke(main);
    stroke(
      [
        [130, 110],
        [130, 135],
      ],
      2,
      middle,
    );
    expect(measure("head", middle).forks).toEqual([]);
  });

  it.each([
    { contrast: 0, words: "faint" },
    { contrast: 0.15, words: "faint" },
    { contrast: 0.27, words: "medium" },
    { contrast: 0.4, words: "deep" },
  ])("measures a crease darkened by $contrast as depth within 0.005 ($words), whatever the exposure", ({ contrast, words }) => {
    const m = stroke([
      [40, 100],
      [200, 120],
    ]);
    const t = measure("heart", m, luma(m, contrast));
    expect(Math.abs(t.depth - contrast)).toBeLessThanOrEqual(0.005);
    expect(t.depthLabel).toBe(words);
    // The same palm photographed darker (every pixel x 0.5): the same depth.
    const dark = luma(m, contrast).map((v) => v * 0.5);
    expect(Math.abs(measure("heart", m, dark).depth - t.depth)).toBeLessThanOrEqual(0.005);
  });

  it("reads a soft crease's depth whatever the mask's width", () => {
    // A crease darkest (by 0.3) on its course and fading over several pixels, as a photo's creases
    // do in the view; the model may draw its mask 1 or 3 pixels either side of the course.
    const l = softCrease(2.5);
    const course: [number, number][] = [
      [40, 110],
      [200, 110],
    ];
    const thin = measure("heart", stroke(course, 1), l);
    const wide = measure("heart", stroke(course, 3), l);
    expect(thin.depth).toBeGreaterThan(0.2);
    expect(Math.abs(wide.depth - thin.depth)).toBeLessThanOrEqual(0.01);
  });

  it("reads a crease in a tighter frame as in 3.3.0's", () => {
    // The same soft crease in a view framed at 1.3 palm sizes: the palm, the crease and its fade 1.7 / 1.3 times as
    // wide in pixels. Sampled across the same share of the palm (ruleUnit), it reads the depth of the 1.7 view.
    const course = stroke([
      [40, 110],
      [200, 110],
    ]);
    const k = FRAME_SIDE / 1.3;
    const at17 = measureLine("heart", course, 1, ctx(softCrease(2.5))).traits.depth;
    const at13 = measureLine("heart", course, 1, { ...ctx(softCrease(2.5 * k)), ruleUnit: ruleUnit(S, 1.3) }).traits.depth;
    const inViewPixels = measureLine("heart", course, 1, ctx(softCrease(2.5 * k))).traits.depth;
    expect(Math.abs(at13 - at17)).toBeLessThanOrEqual(0.005);
    expect(Math.abs(inViewPixels - at17)).toBeGreaterThan(0.02);
  });

  it("words the length on the line's own scale", () => {
    const m = stroke([
      [40, 100],
      [200, 100],
    ]);
    expect(measure("heart", m, undefined, 0.69).length).toBe("short");
    expect(measure("heart", m, undefined, 0.7).length).toBe("medium");
    expect(measure("heart", m, undefined, 1.0).length).toBe("long");
    expect(measure("life", m, undefined, 1.1).length).toBe("medium");
    expect(measure("life", m, undefined, 1.2).length).toBe("long");
  });

  it("places a heart line from the little-finger edge to under the index, and a life line down to the wrist", () => {
    // Frame: u grows from the little finger toward the index; the knuckles sit at v where the
    // image's y = 300. Heart from u = 40 (past the little knuckle) to the index's column.
    const toFrame = (x: number, y: number) => [
      ((x - FRAME.centre[0]) / FRAME.side + 0.5) * S - 0.5,
      ((y - FRAME.centre[1]) / FRAME.side + 0.5) * S - 0.5,
    ];
    const [u17] = toFrame(420, 330);
    const [u5, v330] = toFrame(575, 330);
    const heart = measure(
      "heart",
      stroke([
        [u17 - 8, v330],
        [u5, v330],
      ]),
    );
    expect(heart.start.zone).toBe("little");
    expect(heart.end.zone).toBe("index");
    expect(Math.abs(heart.end.across - (575 - 420) / 160)).toBeLessThanOrEqual(0.04);
    expect(Math.abs(heart.end.along - 30 / 240)).toBeLessThanOrEqual(0.04);
    const [uLifeTop, vLifeTop] = toFrame(590, 340);
    const [uLifeEnd, vLifeEnd] = toFrame(530, 530);
    const life = measure(
      "life",
      stroke([
        [uLifeTop, vLifeTop],
        [uLifeTop - 10, (vLifeTop + vLifeEnd) / 2],
        [uLifeEnd, vLifeEnd],
      ]),
    );
    expect(life.start.zone).toBe("index");
    expect(life.end.zone).toBe("wrist");
    expect(Math.abs(life.end.along - 230 / 240)).toBeLessThanOrEqual(0.04);
  });
});

describe("placeOnPalm()", () => {
  it.each([
    { x: 400, y: 350, zone: "little" },
    { x: 460, y: 350, zone: "ring" },
    { x: 530, y: 350, zone: "middle" },
    { x: 585, y: 350, zone: "index" },
    { x: 620, y: 350, zone: "thumb_side" },
    { x: 530, y: 500, zone: "wrist" },
  ])("puts ($x, $y) in the $zone zone", ({ x, y, zone }) => {
    const p = placeOnPalm([x, y], LM);
    expect(p.zone).toBe(zone);
    expect(p.across).toBeCloseTo((x - 420) / 160, 3);
    expect(p.along).toBeCloseTo((y - 300) / 240, 3);
  });
});

describe("headLifeStart()", () => {
  it("says head and life start joined when they share their start, and apart with their gap within 0.015 palm widths", () => {
    const head: [number, number][] = [
      [200, 90],
      [60, 120],
    ];
    const lifeJoined: [number, number][] = [
      [200, 90],
      [190, 160],
      [150, 230],
    ];
    const lifeApart: [number, number][] = [
      [200, 105],
      [190, 170],
      [150, 235],
    ];
    const ctxLines = (life: [number, number][]) =>
      measureLines(
        [
          { line: "head", kept: stroke(head) },
          { line: "life", kept: stroke(life) },
        ],
        {},
        ctx(),
      );
    const joined = ctxLines(lifeJoined).headLifeStart!;
    expect(joined.joined).toBe(true);
    expect(joined.gap).toBeLessThanOrEqual(0.02);
    const apart = ctxLines(lifeApart).headLifeStart!;
    expect(apart.joined).toBe(false);
    // The closest approach of the two starts: life's first point 15 px below head's, head sloping down to it.
    let g = Infinity;
    for (let t = 0; t <= 1; t += 0.001) g = Math.min(g, Math.hypot(200 - 140 * t - 200, 90 + 30 * t - 105));
    expect(Math.abs(apart.gap - g / UNIT)).toBeLessThanOrEqual(0.015);
  });

  it("is absent unless both head and life are measured", () => {
    const one = measureLines(
      [
        {
          line: "head",
          kept: stroke([
            [200, 90],
            [60, 120],
          ]),
        },
      ],
      // The head's polyline in image pixels: 1.05 palm widths (160 px each) long.
      {
        head: [
          [0, 0],
          [100, 0],
          [100, 68],
        ],
      },
      ctx(),
    );
    expect(one.headLifeStart).toBeUndefined();
    expect(Object.keys(one.traits)).toEqual(["head"]);
    expect(one.traits.head!.length).toBe("long");
    expect(headLifeStart([[1, 1]], [[1, 1]], UNIT).joined).toBe(true);
  });
});

describe("frameLuma()", () => {
  it("recovers the brightness from a normalised BGR tensor", () => {
    const spec = {
      inputSize: 2,
      channelOrder: "BGR" as const,
      normalization: { scale: 255, mean: [0.4, 0.5, 0.6], std: [0.2, 0.25, 0.3] },
      padValue: 0,
    };
    // Pixel 0 is RGB (200, 100, 50): channels in BGR order, each (p / 255 - mean) / std.
    const [r, g, b] = [200, 100, 50];
    const t = new Float32Array(12);
    const planes = [b, g, r];
    planes.forEach((p, c) => {
      t[c * 4] = (p / 255 - spec.normalization.mean[c]) / spec.normalization.std[c];
    });
    expect(frameLuma(t, spec)[0]).toBeCloseTo(0.299 * r + 0.587 * g + 0.114 * b, 3);
  });
});
