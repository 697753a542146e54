/**
 * The whole engine on real phone photos of palms (../shared/real-palms, read there, never copied
 * into the repository; skipped where the folder is absent): the answer an app receives names the
 * hand right, mirrored or not, puts its landmarks on the palm, and reports lines with their course.
 * How well the lines are localised is eval:real's measure, not asserted here.
 */
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LINE_NAMES } from "../../../src/inference/analyzer-types.js";
import { createAnalyzer, type EngineAnalyzer } from "../../../src/inference/analyzer.js";

const REAL_DIR = resolve(import.meta.dirname, "../../../../shared/real-palms");
const HAVE_REAL = existsSync(join(REAL_DIR, "annotations.json"));
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

describe.skipIf(!HAVE_REAL)("Analyzer.analyze() on real palm photos", () => {
  let analyzer: EngineAnalyzer;
  const ann = HAVE_REAL
    ? (JSON.parse(readFileSync(join(REAL_DIR, "annotations.json"), "utf8")).images as {
        file: string;
        width: number;
        palm_polygon: Point[];
      }[])
    : [];
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
});
