/**
 * The whole engine on real phone photos of palms (../shared/real-palms, read there, never copied
 * into the repository; skipped where the folder is absent): the answer an app receives names the
 * hand right, mirrored or not, puts its landmarks on the palm, and reports lines with their course.
 * How well the lines are localised is eval:real's measure, not asserted here.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LINE_NAMES } from "../../../src/inference/analyzer-types.js";
import { createAnalyzer, type EngineAnalyzer } from "../../../src/inference/analyzer.js";
import { polylineDistance, REAL_DIR, readRealAnnotations } from "../../../scripts/real-palms.js";
import { TURN_BOUNDS } from "../../../scripts/trait-stability.js";

const ANNOTATED = readRealAnnotations();
const HAVE_REAL = ANNOTATED.length > 0;
if (!HAVE_REAL) console.warn(`real-photos.spec: ${REAL_DIR} is absent; the real-photo tests are skipped.`);

/** The two low-resolution photos: hand1.jpg (a left hand, thumb on the left) and IMG_0385.jpg (a right hand). */
const PHOTOS = [
  { file: "hand1.jpg", hand: "left" },
  { file: "IMG_0385.jpg", hand: "right" },
] as const;

type Point = [number, number];

function inside(p: Point, poly: Point[]): boolean {
  let c = false;
  for (let i = 0, j = poly.length - 1; i < poly.length; j = i++) {
    const [xi, yi] = poly[i];
    const [xj, yj] = poly[j];
    if (yi > p[1] !== yj > p[1] && p[0] < ((xj - xi) * (p[1] - yi)) / (yj - yi) + xi) c = !c;
  }
  return c;
}

/** onCourse: the polyline's points lie on average within 4% of the palm width of the annotated course. */
function onCourse(polyline: [number, number][], annotated: [number, number][], palmWidth: number): boolean {
  if (polyline.length === 0) return false;
  const sum = polyline.reduce((acc, [x, y]) => acc + polylineDistance(x, y, annotated), 0);
  return sum / polyline.length <= 0.04 * palmWidth;
}

describe.skipIf(!HAVE_REAL)("Analyzer.analyze() on real palm photos", () => {
  let analyzer: EngineAnalyzer;
  const ann = ANNOTATED;
  beforeAll(async () => {
    analyzer = await createAnalyzer({ workers: 1 });
  });
  afterAll(async () => {
    await analyzer?.close();
  });

  it.each(PHOTOS)(
    "names $file a $hand hand, and the mirrored photo the other hand, with the palm's landmarks and lines",
    async ({ file, hand }) => {
      const a = ann.find((x) => x.file === file)!;
      const bytes = readFileSync(join(REAL_DIR, file));
      const mirrored = await sharp(bytes).rotate().flop().jpeg({ quality: 95 }).toBuffer();
      const [r, m] = [await analyzer.analyze(bytes), await analyzer.analyze(mirrored)];
      expect(r.hand?.handedness).toBe(hand);
      expect(m.hand?.handedness).toBe(hand === "left" ? "right" : "left");
      for (const [result, flip] of [
        [r, false],
        [m, true],
      ] as const) {
        expect(result.reason).toBe("");
        expect(result.hand!.landmarks).toHaveLength(21);
        // The wrist-side and knuckle landmarks the palm frame is built from lie on the annotated palm
        // (its outline widened by 15%: the wrist landmark sits on the palm's edge).
        const centre = a.palm_polygon.reduce((s, p) => [s[0] + p[0] / a.palm_polygon.length, s[1] + p[1] / a.palm_polygon.length], [0, 0]);
        const wide = a.palm_polygon.map(([x, y]): Point => [centre[0] + (x - centre[0]) * 1.15, centre[1] + (y - centre[1]) * 1.15]);
        for (const k of [0, 5, 9, 13, 17]) {
          const [x, y] = result.hand!.landmarks[k];
          expect(inside([flip ? a.width - x : x, y], wide), `${file}${flip ? " mirrored" : ""} landmark ${k}`).toBe(true);
        }
        const found = LINE_NAMES.filter((l) => result.stats[l].detected);
        expect(found.length).toBeGreaterThanOrEqual(2);
        for (const l of found) {
          expect(result.stats[l].polyline.length).toBeGreaterThanOrEqual(2);
          expect(result.stats[l].length).toBeGreaterThan(0.2);
        }
      }
    },
  );

  it("gives every photo with a hand a plausible hand shape, and every detected line plausible traits (and no other line any)", async () => {
    let withHand = 0;
    for (const a of ann) {
      const r = await analyzer.analyze(readFileSync(join(REAL_DIR, a.file)));
      if (!r.hand) {
        for (const l of LINE_NAMES) expect(r.stats[l].traits, `${a.file} ${l}`).toBeUndefined();
        continue;
      }
      withHand++;
      const shape = r.hand.shape;
      // Human proportions as MediaPipe's landmarks give them (fingers may be bent or cut off by the frame).
      expect(shape.palmRatio, a.file).toBeGreaterThan(1.1);
      expect(shape.palmRatio, a.file).toBeLessThan(2.1);
      expect(shape.fingers.middle, a.file).toBeGreaterThan(0.3);
      expect(shape.fingers.middle, a.file).toBeLessThan(1.4);
      expect(shape.indexRingRatio, a.file).toBeGreaterThan(0.75);
      expect(shape.indexRingRatio, a.file).toBeLessThan(1.3);
      expect(["earth", "air", "fire", "water"]).toContain(shape.handType);
      for (const l of LINE_NAMES) {
        const s = r.stats[l];
        if (!s.detected) {
          expect(s.traits, `${a.file} ${l}`).toBeUndefined();
          continue;
        }
        const t = s.traits!;
        expect(t, `${a.file} ${l}`).toBeDefined();
        expect(t.curvature, `${a.file} ${l}`).toBeGreaterThanOrEqual(0);
        expect(t.curvature, `${a.file} ${l}`).toBeLessThan(0.5);
        // A crease the model found is darker than the skin beside it.
        expect(t.depth, `${a.file} ${l}`).toBeGreaterThan(0);
        expect(t.depth, `${a.file} ${l}`).toBeLessThan(0.7);
        for (const b of t.breaks) expect(b.at > 0 && b.at < 1 && b.length > 0, `${a.file} ${l} break`).toBe(true);
        // Reading order on the palm: heart toward the index, head away from it, life down toward the wrist.
        if (l === "heart") expect(t.end.across, `${a.file} heart`).toBeGreaterThan(t.start.across);
        if (l === "head") expect(t.end.across, `${a.file} head`).toBeLessThan(t.start.across);
        if (l === "life") expect(t.end.along, `${a.file} life`).toBeGreaterThan(t.start.along);
      }
      const both = r.stats.head.detected && r.stats.life.detected;
      expect(r.headLifeStart !== undefined, a.file).toBe(both);
      // Where the annotation's head and life clearly share their start (first points within 2% of
      // the palm) the answer says joined; where they clearly start apart (10% or more), apart.
      const [head, life] = [a.lines.head?.points, a.lines.life?.points];
      // Checked only where the engine drew both lines on their annotated creases (eval:real's 4%
      // of the palm width): a line on a neighbouring crease starts elsewhere, which is the model's
      // miss (eval:real counts it), not the trait's.
      if (
        both &&
        head &&
        life &&
        onCourse(r.stats.head.polyline, head, a.palm_width_px) &&
        onCourse(r.stats.life.polyline, life, a.palm_width_px)
      ) {
        let gap = Infinity;
        for (const p of head.slice(0, 4)) for (const q of life.slice(0, 4)) gap = Math.min(gap, Math.hypot(p[0] - q[0], p[1] - q[1]));
        gap /= a.palm_width_px;
        if (gap <= 0.02) expect(r.headLifeStart!.joined, `${a.file} joined`).toBe(true);
        if (gap >= 0.1) expect(r.headLifeStart!.joined, `${a.file} apart`).toBe(false);
      }
    }
    expect(withHand).toBeGreaterThan(0);
  });

  it.each(PHOTOS)("measures the same hand shape and line traits on $file turned by 90 degrees", async ({ file }) => {
    const bytes = readFileSync(join(REAL_DIR, file));
    const turned = await sharp(bytes).rotate().rotate(90).jpeg({ quality: 95 }).toBuffer();
    const [r, t] = [await analyzer.analyze(bytes), await analyzer.analyze(turned)];
    expect(Math.abs(r.hand!.shape.palmRatio - t.hand!.shape.palmRatio)).toBeLessThanOrEqual(0.03);
    expect(t.hand!.shape.handType).toBe(r.hand!.shape.handType);
    expect(t.headLifeStart?.joined).toBe(r.headLifeStart?.joined);
    const both = LINE_NAMES.filter((l) => r.stats[l].detected && t.stats[l].detected);
    expect(both.length).toBeGreaterThanOrEqual(2);
    // Compared where the line lies on its annotated crease (eval:real's 4%): a line drawn on another
    // course may take another shape once turned (hand1's life line with palm-lines 3.0.0, curvature
    // 0.20 and 0.12), which is the model's miss, not the trait's.
    const ann = ANNOTATED.find((x) => x.file === file)!;
    const same = both.filter((l) => ann.lines[l] && onCourse(r.stats[l].polyline, ann.lines[l].points, ann.palm_width_px));
    expect(same.length).toBeGreaterThanOrEqual(2);
    for (const l of same) {
      const [a, b] = [r.stats[l].traits!, t.stats[l].traits!];
      // The engine measures in the palm's own upright view: a turned photo gives the same view.
      expect(Math.abs(a.curvature - b.curvature), `${file} ${l} curvature`).toBeLessThanOrEqual(TURN_BOUNDS.curvature);
      expect(Math.abs(a.depth - b.depth), `${file} ${l} depth`).toBeLessThanOrEqual(TURN_BOUNDS.depth);
      // Each end at the same place on the palm, across the knuckles and down toward the wrist. Not
      // the same zone word: an end near a zone's edge may cross it (hand1's heart line ends at
      // across 0.848 and 0.821 with palm-lines 3.2.0, either side of the index/middle split).
      for (const end of ["start", "end"] as const) {
        expect(Math.abs(a[end].across - b[end].across), `${file} ${l} ${end} across`).toBeLessThanOrEqual(TURN_BOUNDS.end);
        expect(Math.abs(a[end].along - b[end].along), `${file} ${l} ${end} along`).toBeLessThanOrEqual(TURN_BOUNDS.end);
      }
    }
  });
});
