import { fileURLToPath } from "node:url";
import { join } from "node:path";
import sharp, { type Sharp } from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  createHandLandmarker,
  facing,
  palmChirality,
  type HandDetection,
  type HandLandmarker,
} from "../../../src/landmarks/hand-landmarker.js";
import { REAL_DIR, readRealAnnotations, trueHandedness } from "../../../scripts/real-palms.js";
import { BOX_DIR, type Box, partOf, readBoxes } from "../../../scripts/box-set.js";
import { degraded } from "../../../scripts/eval-boxes.js";
import { existsSync } from "node:fs";
import { readFile } from "node:fs/promises";

/** The shared real photos: read in place, never copied into the repository. */
const ANNOTATED = readRealAnnotations();
const HAVE_REAL = ANNOTATED.length > 0;
if (!HAVE_REAL) console.warn(`hand-landmarker.spec: ${REAL_DIR} is absent; the real-photo tests are skipped.`);

type Pt = [number, number];
interface Photo {
  file: string;
  rgb: Buffer;
  width: number;
  height: number;
  /** Annotation scale: photo pixels per annotated pixel. */
  polygon: Pt[];
  palmWidth: number;
  /** Truth: the hand as it really is. */
  truth: "left" | "right";
}

/** Variants of a photo: the pixels, and where a point (x, y) of the original lands in them. */
const VARIANTS: { name: string; op: (s: Sharp) => Sharp; map: (p: Pt, w: number, h: number) => Pt; mirrored: boolean }[] = [
  { name: "mirrored", op: (s) => s.flop(), map: ([x, y], w) => [w - x, y], mirrored: true },
  { name: "turned 90", op: (s) => s.rotate(90), map: ([x, y], _w, h) => [h - y, x], mirrored: false },
  { name: "turned 180", op: (s) => s.rotate(180), map: ([x, y], w, h) => [w - x, h - y], mirrored: false },
  { name: "turned 270", op: (s) => s.rotate(270), map: ([x, y], w) => [y, w - x], mirrored: false },
];

const MAX_SIDE = 640;
const KEY_POINTS = [0, 5, 9, 13, 17]; // wrist and the four finger MCPs

async function loadPhotos(): Promise<Photo[]> {
  const photos: Photo[] = [];
  for (const a of ANNOTATED) {
    // The truth is the annotated geometry's (as eval:real reads it); a photo without all three lines cannot say.
    const truth = trueHandedness(a.lines);
    if (!truth) continue;
    const { data, info } = await sharp(join(REAL_DIR, a.file))
      .rotate()
      .resize(MAX_SIDE, MAX_SIDE, { fit: "inside" })
      .removeAlpha()
      .raw()
      .toBuffer({ resolveWithObject: true });
    const s = info.width / a.width;
    photos.push({
      file: a.file,
      rgb: data,
      width: info.width,
      height: info.height,
      polygon: a.palm_polygon.map(([x, y]) => [x * s, y * s]),
      palmWidth: a.palm_width_px * s,
      truth,
    });
  }
  return photos;
}

async function variantOf(p: Photo, v: (typeof VARIANTS)[number]) {
  const { data, info } = await v
    .op(sharp(p.rgb, { raw: { width: p.width, height: p.height, channels: 3 } }))
    .raw()
    .toBuffer({ resolveWithObject: true });
  return { rgb: data, width: info.width, height: info.height };
}

function inside(poly: readonly Pt[], [x, y]: Pt): boolean {
  let odd = false;
  for (let i = 0, j = poly.length - 1; i < poly.length; j = i++) {
    const [xi, yi] = poly[i];
    const [xj, yj] = poly[j];
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) odd = !odd;
  }
  return odd;
}

/** distanceToPolygon is 0 inside, else the distance to the nearest edge. */
function distanceToPolygon(poly: readonly Pt[], p: Pt): number {
  if (inside(poly, p)) return 0;
  let best = Infinity;
  for (let i = 0, j = poly.length - 1; i < poly.length; j = i++) {
    const [ax, ay] = poly[j];
    const [bx, by] = poly[i];
    const dx = bx - ax;
    const dy = by - ay;
    const t = Math.max(0, Math.min(1, ((p[0] - ax) * dx + (p[1] - ay) * dy) / (dx * dx + dy * dy)));
    best = Math.min(best, Math.hypot(p[0] - ax - t * dx, p[1] - ay - t * dy));
  }
  return best;
}

describe("palmChirality() and facing()", () => {
  // A right palm, fingers up, seen from the palm side: thumb and index on the image's right.
  const rightPalm: Pt[] = Array.from({ length: 21 }, () => [0, 0] as Pt);
  rightPalm[0] = [100, 200];
  rightPalm[5] = [130, 100];
  rightPalm[9] = [100, 95];
  rightPalm[13] = [80, 100];
  rightPalm[17] = [60, 110];
  const turn = (pts: Pt[], deg: number): Pt[] => {
    const a = (deg * Math.PI) / 180;
    return pts.map(([x, y]) => [x * Math.cos(a) - y * Math.sin(a), x * Math.sin(a) + y * Math.cos(a)]);
  };
  const mirror = (pts: Pt[]): Pt[] => pts.map(([x, y]) => [-x, y]);

  it("is 'right' for a right palm at any in-plane rotation, 'left' once mirrored", () => {
    for (const deg of [0, 45, 90, 135, 180, 225, 270, 315]) {
      expect(palmChirality(turn(rightPalm, deg))).toBe("right");
      expect(palmChirality(mirror(turn(rightPalm, deg)))).toBe("left");
    }
  });

  it("facing() is 'palm' when the handedness agrees with the chirality, 'back' otherwise", () => {
    expect(facing({ landmarks: rightPalm, handedness: "right" })).toBe("palm");
    expect(facing({ landmarks: rightPalm, handedness: "left" })).toBe("back");
    expect(facing({ landmarks: mirror(rightPalm), handedness: "left" })).toBe("palm");
  });
});

describe("createHandLandmarker()", () => {
  let landmarker: HandLandmarker;
  beforeAll(async () => {
    landmarker = await createHandLandmarker();
  });
  afterAll(async () => {
    await landmarker?.close();
  });

  it("returns null for images without a hand: a flat gradient and uniform noise", async () => {
    const w = 640;
    const h = 480;
    const gradient = new Uint8Array(w * h * 3);
    const noise = new Uint8Array(w * h * 3);
    let seed = 12345;
    for (let i = 0; i < w * h; i++) {
      const x = i % w;
      gradient.set([(x * 255) / w, 128, 255 - (x * 255) / w], i * 3);
      for (let c = 0; c < 3; c++) {
        seed = (seed * 1103515245 + 12345) >>> 0;
        noise[i * 3 + c] = seed >>> 24;
      }
    }
    expect(await landmarker.detect(gradient, w, h)).toBeNull();
    expect(await landmarker.detect(noise, w, h)).toBeNull();
  });

  it("goes on past a palm the caller refuses, for at most three, and answers the palm it accepts", async () => {
    const { data, info } = await sharp(fileURLToPath(new URL("../../../examples/sample-palm.jpg", import.meta.url)))
      .removeAlpha()
      .resize(640, 640, { fit: "inside" })
      .raw()
      .toBuffer({ resolveWithObject: true });
    const plain = await landmarker.detect(data, info.width, info.height);
    expect(plain && facing(plain)).toBe("palm");
    // Every palm refused: the search ends after the third, with no hand (the sample shows no back).
    let offered = 0;
    const refuseAll = await landmarker.detect(data, info.width, info.height, async () => {
      offered++;
      return false;
    });
    expect([refuseAll, offered]).toEqual([null, 3]);
    // The first refused, the second accepted: that one is the answer.
    const palms: HandDetection[] = [];
    const second = await landmarker.detect(data, info.width, info.height, async (palm) => palms.push(palm) > 1);
    expect(palms).toHaveLength(2);
    expect(second).toBe(palms[1]);
  });

  it("rejects a buffer too short for its size", async () => {
    await expect(landmarker.detect(new Uint8Array(10), 64, 64)).rejects.toThrow(RangeError);
  });

  // Close-ups of the box set's training part (never its evaluation quarter) with the fingers cut
  // off: 354 is detected as it is but its landmarks fail there, so the zoom-out must still be
  // tried; 17, dark and out of focus, is found only on the zoom-out's averaged (unaliased) input.
  const CLOSE_UPS = ["354_image_palm.jpg", "17_image_palm.jpg"];
  /** facingOn runs the landmarker on an image file: null without a hand, else which side it shows. */
  const facingOn = async (path: string) => {
    const { data, info } = await sharp(path).removeAlpha().raw().toBuffer({ resolveWithObject: true });
    const d = await landmarker.detect(data, info.width, info.height);
    return d && facing(d);
  };
  it.skipIf(!existsSync(join(BOX_DIR, "images", CLOSE_UPS[0])))(
    "finds the palm on close-ups whose fingers are out of the frame",
    async () => {
      for (const file of CLOSE_UPS) {
        expect(partOf(file)).not.toBe("eval");
        expect(await facingOn(join(BOX_DIR, "images", file)), file).toBe("palm");
      }
    },
  );

  // 556 of the training part, a cupped close-up, reads as the back of a hand as it is and zoomed
  // out 1.8x, and as a palm at 1.4x; the synthetic back of a hand stays a back.
  it.skipIf(!existsSync(join(BOX_DIR, "images", "556_image_palm.jpg")))("goes on past an answer that shows the back", async () => {
    expect(partOf("556_image_palm.jpg")).not.toBe("eval");
    expect(await facingOn(join(BOX_DIR, "images", "556_image_palm.jpg"))).toBe("palm");
    expect(await facingOn(fileURLToPath(new URL("../../fixtures/palms/hand-back-0.jpg", import.meta.url)))).toBe("back");
  });

  // 204 of the training part, a dark close-up filling the frame, is found by no search with the
  // photo's edge drawn out into the landmark crop: only by the last one, as if padded with black.
  it.skipIf(!existsSync(join(BOX_DIR, "images", "204_image_palm.jpg")))("finds the palm on a dark close-up by padding it", async () => {
    expect(partOf("204_image_palm.jpg")).not.toBe("eval");
    expect(await facingOn(join(BOX_DIR, "images", "204_image_palm.jpg"))).toBe("palm");
  });

  // 175 and 319 of the training part at a third of their light with sensor noise (`eval:boxes
  // --degrade dim`): the gamma curve lifts the noise in their shadows with them and no search found
  // a hand; the copy lifted by a plain gain shows the palm.
  const UNDEREXPOSED = ["175_image_palm.jpg", "319_image_palm.jpg"];
  it.skipIf(!existsSync(join(BOX_DIR, "images", UNDEREXPOSED[0])))("finds the palm on underexposed photos", async () => {
    for (const file of UNDEREXPOSED) {
      expect(partOf(file)).not.toBe("eval");
      const { bytes: dim } = await degraded(await readFile(join(BOX_DIR, "images", file)), "dim");
      const { data, info } = await sharp(dim).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      const d = await landmarker.detect(data, info.width, info.height);
      expect(d && facing(d), file).toBe("palm");
    }
  });

  // Close-ups of training photos (`eval:boxes --degrade closeup`: the palm fills the frame, the
  // fingers leave it; `tight`: the frame ends near the palm's own edges): the detector finds no palm,
  // so only the searches that read the photo as a palm filling it do; the knuckles and wrist must lie
  // where the uncropped photo's do. The tight ones need the searches that draw the palm smaller;
  // 226 and FIMG_0016, tight, get a presence under MediaPipe's 0.5 in every search and are found
  // only by the last, which takes the likeliest palm of the filling searches down to 0.2.
  const FILLING = [
    { kind: "closeup", files: ["15_image_palm.jpg", "FIMG_0213.jpg"] },
    { kind: "tight", files: ["IMG_0335.jpg", "401_image_palm.jpg"] },
    { kind: "tight", files: ["226_image_palm.jpg", "FIMG_0016.jpg"] },
  ] as const;
  // The close-up's palm, found, must face the camera as the uncropped photo's does, be the same hand, and put the
  // knuckles and wrist where the uncropped photo's lie.
  // With `accepted`, the palms offered to an `accept` that takes each are recorded, and the palm answered must be
  // the very one taken (the pipeline keeps the line model's reading of it by identity).
  const expectFoundAsWhole = async (kind: "closeup" | "tight", file: string, accepted?: HandDetection[]) => {
    const boxes = readBoxes();
    const rgbOf = async (bytes: Buffer) => {
      const { data, info } = await sharp(bytes).removeAlpha().raw().toBuffer({ resolveWithObject: true });
      return { data, width: info.width, height: info.height };
    };
    expect(partOf(file)).not.toBe("eval");
    const photo = await readFile(join(BOX_DIR, "images", file));
    const whole = await rgbOf(photo);
    const truth = await landmarker.detect(whole.data, whole.width, whole.height);
    expect(truth && facing(truth), file).toBe("palm");
    const lines = (["heart", "head", "life"] as const).map((line) => boxes.get(file)?.[line]).filter((b): b is Box => !!b);
    const close = await degraded(photo, kind, lines);
    const crop = await rgbOf(close.bytes);
    const take = accepted && (async (palm: HandDetection) => accepted.push(palm) > 0);
    const d = await landmarker.detect(crop.data, crop.width, crop.height, take);
    expect(d && facing(d), file).toBe("palm");
    if (accepted) expect(d, file).toBe(accepted.at(-1));
    expect(d!.handedness, file).toBe(truth!.handedness);
    // Where the uncropped photo's landmarks lie in the close-up, through the crop's own mapping.
    const [x0, y0, x1] = close.box([0, 0, 1, 1]);
    const k = x1 - x0;
    const at = ([x, y]: Pt): Pt => [x0 + x * k, y0 + y * k];
    const dist = (a: Pt, b: Pt) => Math.hypot(a[0] - b[0], a[1] - b[1]);
    const palmWidth = dist(at(truth!.landmarks[5]), at(truth!.landmarks[17]));
    for (const i of KEY_POINTS) {
      const off = dist(d!.landmarks[i], at(truth!.landmarks[i]));
      expect(off / palmWidth, `${file} landmark ${i}`).toBeLessThan(0.3);
    }
  };
  it.skipIf(!existsSync(join(BOX_DIR, "images", FILLING[0].files[0]))).each(FILLING)(
    "finds the palm that fills a $kind close-up",
    async ({ kind, files }) => {
      for (const file of files) await expectFoundAsWhole(kind, file);
    },
  );

  // Tight close-ups of training photos that no search finds as they are, and the searches on the photo mirrored
  // left to right do (hand-landmarker.ts MIRRORED_SEARCHES): the palm, the same hand, and its landmarks unmirrored
  // (IMG_0029 a right hand, IMG_0380 a left one).
  const MIRRORED = ["IMG_0029.jpg", "IMG_0380.jpg"];
  it.skipIf(!existsSync(join(BOX_DIR, "images", MIRRORED[0])))("finds the palm of a tight close-up in the photo mirrored", async () => {
    for (const file of MIRRORED) await expectFoundAsWhole("tight", file, []);
  });

  describe.skipIf(!HAVE_REAL)("on the shared real palm photos", () => {
    let photos: Photo[] = [];
    const found = new Map<string, HandDetection>();
    beforeAll(async () => {
      photos = await loadPhotos();
      for (const p of photos) {
        const d = await landmarker.detect(p.rgb, p.width, p.height);
        if (d) found.set(p.file, d);
      }
    });

    it("finds a hand on every photo, with confident scores", () => {
      expect(photos.length).toBe(ANNOTATED.filter((a) => trueHandedness(a.lines)).length);
      for (const p of photos) {
        const d = found.get(p.file);
        expect(d, p.file).toBeDefined();
        expect(d!.landmarks).toHaveLength(21);
        // The palm detector's own acceptance score; close-ups found on the zoomed-out search score lower (box-492: 0.86).
        expect(d!.detectionScore, p.file).toBeGreaterThan(0.8);
        expect(d!.presence, p.file).toBeGreaterThan(0.9);
      }
    });

    it("puts the wrist and the finger MCPs inside or near the annotated palm polygon", () => {
      for (const p of photos) {
        const d = found.get(p.file)!;
        for (const k of KEY_POINTS) {
          // The wrist landmark sits on the wrist crease, at the palm's edge, where the rough outlines
          // sometimes stop short of it (havetobe-hand0: 13%): it gets the 15% margin real-photos.spec gives it.
          const dist = distanceToPolygon(p.polygon, d.landmarks[k]) / p.palmWidth;
          expect(dist, `${p.file} landmark ${k}`).toBeLessThan(k === 0 ? 0.15 : 0.1);
        }
        // The palm centre (mean of wrist and MCPs) is well inside.
        const c: Pt = [0, 1].map((ax) => KEY_POINTS.reduce((s, k) => s + d.landmarks[k][ax], 0) / KEY_POINTS.length) as Pt;
        expect(inside(p.polygon, c), `${p.file} palm centre`).toBe(true);
      }
    });

    it("gets the handedness the annotated geometry says (left and right hands) and sees palms", () => {
      for (const p of photos) {
        const d = found.get(p.file)!;
        expect(d.handedness, p.file).toBe(p.truth);
        expect(d.handednessScore, p.file).toBeGreaterThan(0.5);
        expect(palmChirality(d.landmarks), p.file).toBe(p.truth);
        expect(facing(d), p.file).toBe("palm");
      }
    });

    for (const v of VARIANTS) {
      it(`holds when the photo is ${v.name}: landmarks move with it${v.mirrored ? ", handedness flips" : ""}`, async () => {
        for (const p of photos) {
          const base = found.get(p.file)!;
          const img = await variantOf(p, v);
          const d = await landmarker.detect(img.rgb, img.width, img.height);
          expect(d, `${p.file} ${v.name}`).not.toBeNull();
          const expected = v.mirrored ? (p.truth === "left" ? "right" : "left") : p.truth;
          expect(d!.handedness, `${p.file} ${v.name}`).toBe(expected);
          expect(facing(d!), `${p.file} ${v.name}`).toBe("palm");
          const shifts: number[] = [];
          let worst = 0;
          for (let k = 0; k < 21; k++) {
            const [ex, ey] = v.map(base.landmarks[k], p.width, p.height);
            const e = Math.hypot(d!.landmarks[k][0] - ex, d!.landmarks[k][1] - ey) / p.palmWidth;
            shifts.push(e);
            if (KEY_POINTS.includes(k)) worst = Math.max(worst, e);
          }
          // The median over the 21 within the wrist/MCP bound: on a close-up with the thumb held against
          // the index finger (box-186, 5.2% mirrored) the fingers move more than on the open hands of
          // the first seven photos (under 4%); the frame the engine uses is the wrist and MCPs (below).
          shifts.sort((x, y) => x - y);
          expect(shifts[10], `${p.file} ${v.name} median landmark shift`).toBeLessThan(0.07);
          // 7%: box-186, a close-up with the thumb against the index finger, moves its wrist 6.0% when
          // mirrored (the first seven photos stay under 6%).
          expect(worst, `${p.file} ${v.name} wrist/MCP shift`).toBeLessThan(0.07);
        }
      });
    }
  });
});
