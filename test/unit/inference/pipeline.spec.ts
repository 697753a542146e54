import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { renderFrame } from "../../../src/image/preprocess.js";
import { LINE_NAMES, type LineName } from "../../../src/inference/analyzer-types.js";
import { parseModelMetadata } from "../../../src/inference/model-metadata.js";
import { analyzeImage, type HandDetector, type PipelineEngine, type PipelineModel } from "../../../src/inference/pipeline.js";
import type { Point } from "../../../src/landmarks/geometry.js";
import { closeupLandmarks, palmFrame } from "../../../src/landmarks/palm-frame.js";
import { decodeMask, fixtureImage, tolerantF1, trueMask } from "./fixtures.js";

/** The stats of a line not reported, with its reason. */
const noLine = (reason: string) => ({ pixels: 0, confidence: 0, coverage: 0, detected: false, polyline: [], length: 0, reason });
const RAW_META = {
  model_name: "oracle",
  model_version: "0.0.0",
  input_size: "256",
  output_names: "palm,heart,head,life",
  thresholds: '{"palm":0.5,"heart":0.5,"head":0.5,"life":0.5}',
  detection: '{"min_pixels":40,"min_confidence":0.6}',
  crop: '{"margin":0.15}',
};
const META = parseModelMetadata(RAW_META);
const S = META.inputSize;

/** A w x h x 3 image holding three 0/1 masks as 0/255 channels. */
function pack(a: Uint8Array, b: Uint8Array, c: Uint8Array, w: number, h: number) {
  const data = new Uint8Array(w * h * 3);
  for (let i = 0; i < w * h; i++) {
    data[i * 3] = a[i] * 255;
    data[i * 3 + 1] = b[i] * 255;
    data[i * 3 + 2] = c[i] * 255;
  }
  return { data, width: w, height: h, channels: 3 };
}

/** Pose places the canonical frame on the photo: its centre and side (pixels), a turn, a mirror. */
interface Pose {
  cx: number;
  cy: number;
  side: number;
  /** Degrees, clockwise on the screen. */
  turn?: number;
  mirrored?: boolean;
}

/**
 * landmarksFor returns 21 landmarks whose palm frame is exactly `pose` (palmFrame: centre halfway
 * between wrist and middle knuckle, side 1.7 x their distance, the knuckle span short enough
 * not to decide it), with one decimal so that the engine's rescaling gives them back exactly.
 */
function landmarksFor(pose: Pose): Point[] {
  const t = ((pose.turn ?? 0) * Math.PI) / 180;
  const ey: Point = [-Math.sin(t), Math.cos(t)];
  const ex: Point = [Math.cos(t), Math.sin(t)];
  const d = pose.side / 1.7;
  const at = (a: number, b: number): Point => [pose.cx + a * ex[0] + b * ey[0], pose.cy + a * ex[1] + b * ey[1]];
  const sx = pose.mirrored ? -1 : 1;
  const lm: Point[] = Array.from({ length: 21 }, () => at(0, 0));
  lm[0] = at(0, d / 2);
  lm[9] = at(0, -d / 2);
  // The knuckles a little toward the index, as on a hand: the fixtures' heart lines start near the middle of the view,
  // and the anatomy veto's midline (halfway between 5 and 17) must not split hairs there.
  lm[5] = at(sx * 0.35 * d, -d / 2);
  lm[17] = at(-sx * 0.25 * d, -d / 2);
  lm[13] = at(-sx * 0.1 * d, -d / 2);
  return lm;
}

/**
 * fakeHands "finds" the hand of `pose` in whatever copy it is given (its landmarks scaled to that
 * copy), as a palm (handedness agreeing with the knuckles' chirality) or as a back of hand.
 */
function fakeHands(pose: Pose | null, w: number, facing: "palm" | "back" = "palm"): HandDetector & { calls: number } {
  const hands = {
    calls: 0,
    async detect(_rgb: Uint8Array, width: number) {
      hands.calls++;
      if (!pose) return null;
      const k = width / w;
      const palmHand = pose.mirrored ? "left" : "right";
      const handedness = facing === "palm" ? palmHand : palmHand === "left" ? "right" : "left";
      return { landmarks: landmarksFor(pose).map(([x, y]): Point => [x * k, y * k]), handedness: handedness as "left" | "right" };
    },
  };
  return hands;
}

/**
 * oracle is a stand-in line model that "predicts" the true masks of an image: it renders them
 * through the palm frame of the engine's landmarks, as the engine renders the photo, so any
 * misalignment in the frame's warp or in mapping masks back shows up as lost overlap, whatever
 * the real model's quality.
 */
function oracle(
  truth: { palm: Uint8Array; heart: Uint8Array; head: Uint8Array; life: Uint8Array },
  w: number,
  h: number,
  pose: Pose,
  options: { metadata?: typeof META; palm?: boolean; lines?: readonly LineName[] } = {},
): PipelineModel & { calls: number } {
  const metadata = options.metadata ?? META;
  const S = metadata.inputSize; // the view the engine renders for this model
  const lines = pack(truth.heart, truth.head, truth.life, w, h);
  const palm = pack(truth.palm, truth.palm, truth.palm, w, h);
  // The frame the engine renders: a close-up's (these fixtures fill the photo) with its wrist moved out.
  const frame = palmFrame(closeupLandmarks(landmarksFor(pose), w, h), metadata.frameSide);
  const model = {
    metadata,
    calls: 0,
    async run() {
      model.calls++;
      const p = await renderFrame(palm, frame, S, 0);
      const l = await renderFrame(lines, frame, S, 0);
      const out = new Float32Array(4 * S * S);
      for (let i = 0; i < S * S; i++) {
        out[i] = options.palm === false ? 0 : p[i * 3] / 255;
        out[S * S + i] = l[i * 3] / 255;
        out[2 * S * S + i] = l[i * 3 + 1] / 255;
        out[3 * S * S + i] = l[i * 3 + 2] / 255;
      }
      LINE_NAMES.forEach((line, i) => {
        if (options.lines && !options.lines.includes(line)) out.fill(0, (i + 1) * S * S, (i + 2) * S * S);
      });
      return out;
    },
  };
  return model;
}

/**
 * offering is a hand detector that offers `palms` (found on a w-wide photo) in turn until `accept` takes one,
 * recording each answer in `offered`; none taken, it finds no hand.
 */
function offering(palms: Found[], w: number, offered: boolean[]): HandDetector {
  return {
    async detect(_rgb, width, _height, accept) {
      const k = width / w;
      for (const d of palms) {
        const scaled = { ...d, landmarks: d.landmarks.map(([x, y]): Point => [x * k, y * k]) };
        const ok = accept ? await accept(scaled) : true;
        offered.push(ok);
        if (ok) return scaled;
      }
      return null;
    },
  };
}

/** Found is what a hand detector finds. */
type Found = NonNullable<Awaited<ReturnType<HandDetector["detect"]>>>;

function engine(lines: PipelineModel, hands: HandDetector): PipelineEngine {
  return { lines, hands };
}

async function upscaledTruth(name: string, factor: number) {
  const t = {} as Record<"palm" | "heart" | "head" | "life", Uint8Array>;
  let w = 0;
  let h = 0;
  for (const c of ["palm", ...LINE_NAMES] as const) {
    const m = await trueMask(name, c);
    w = m.width * factor;
    h = m.height * factor;
    const up = new Uint8Array(w * h);
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) up[y * w + x] = m.data[Math.floor(y / factor) * m.width + Math.floor(x / factor)];
    t[c] = up;
  }
  return { truth: t, w, h };
}

/** The pose of a frame over the whole of a w x h fixture. */
const whole = (w: number, h: number, extra: Partial<Pose> = {}): Pose => ({ cx: w / 2, cy: h / 2, side: Math.max(w, h) * 1.05, ...extra });

/**
 * Which hand each fixture shows: crop-0 a left palm (its thumb on the image's left), scene-0 a
 * right one. Landmarks must agree with it, or the engine's anatomy veto (anatomy.ts) rightly
 * refuses a life line on the little-finger half.
 */
const FIXTURE_HAND: Record<string, "left" | "right"> = { "crop-0": "left", "scene-0": "right" };
const LEFT: Partial<Pose> = { mirrored: true };

/**
 * handTruth is a fixture's truth as the hand of `pose` shows it: mirrored when the pose's hand is
 * the other one, then turned by the pose's turn about its centre (nearest pixel), so that the
 * landmarks of `pose` lie on it as on a real hand.
 */
function handTruth(name: string, t: Awaited<ReturnType<typeof upscaledTruth>>, pose: Pose) {
  const { w, h } = t;
  const flip = (pose.mirrored ? "left" : "right") !== FIXTURE_HAND[name];
  const a = ((pose.turn ?? 0) * Math.PI) / 180;
  const [c, s] = [Math.cos(a), Math.sin(a)];
  const out = {} as typeof t.truth;
  for (const k of Object.keys(t.truth) as (keyof typeof t.truth)[]) {
    const m = new Uint8Array(w * h);
    for (let y = 0; y < h; y++)
      for (let x = 0; x < w; x++) {
        // The source pixel of (x, y): turned back about the centre, then mirrored.
        const dx = x + 0.5 - pose.cx;
        const dy = y + 0.5 - pose.cy;
        let sx = pose.cx + c * dx + s * dy;
        const sy = pose.cy - s * dx + c * dy;
        if (flip) sx = w - sx;
        const [ix, iy] = [Math.floor(sx), Math.floor(sy)];
        if (ix >= 0 && iy >= 0 && ix < w && iy < h) m[y * w + x] = t.truth[k][iy * w + ix];
      }
    out[k] = m;
  }
  return out;
}

describe("analyzeImage()", () => {
  it.each([
    ["crop-0", 1, LEFT],
    ["scene-0", 1, {}],
    ["scene-0", 4, {}], // 1024 x 1024: the frame is shrunk to the model, masks are mapped 4x back
    ["crop-0", 1, { turn: 30, mirrored: true }],
    ["crop-0", 2, { turn: -120 }], // crop-0's lines mirrored into a right hand's, then turned
  ] as [string, number, Partial<Pose>][])(
    "maps the model's view of %s (x%i, %j) back onto the image: an oracle model's lines overlap the truth (F1 >= 0.9 within 1 px at 256)",
    async (name, factor, extra) => {
      const fixture = await upscaledTruth(name, factor);
      const { w, h } = fixture;
      const bytes =
        factor === 1 ? fixtureImage(name) : await sharp(fixtureImage(name)).resize(w, h, { kernel: "nearest" }).jpeg().toBuffer();
      const pose = whole(w, h, extra);
      const truth = handTruth(name, fixture, pose);
      const { result, timings } = await analyzeImage(bytes, engine(oracle(truth, w, h, pose), fakeHands(pose, w)));
      expect([result.width, result.height]).toEqual([w, h]);
      expect(result.model).toBe("oracle-0.0.0");
      expect(result.reason).toBe("");
      expect(result.hand?.handedness).toBe(extra.mirrored ? "left" : "right");
      expect(result.hand?.landmarks).toHaveLength(21);
      expect(timings.total).toBeGreaterThan(0);
      for (const line of LINE_NAMES) {
        const pred = await decodeMask(result.masks[line]);
        const f1 = tolerantF1(pred.data, truth[line], w, h, factor).f1;
        expect(f1, line).toBeGreaterThanOrEqual(0.9);
        // Stats of a detected line agree with its mask (SPEC.md section 3).
        const on = pred.data.reduce((n, v) => n + (v === 255 ? 1 : 0), 0);
        expect(result.stats[line]).toMatchObject({ pixels: on, coverage: Math.round((10_000 * on) / (w * h)) / 100, detected: true });
        expect(on).toBeGreaterThan(0);
        expect(result.stats[line].confidence).toBeGreaterThan(0.5); // every mask pixel is above the 0.5 threshold
        expect(result.stats[line].confidence).toBeLessThanOrEqual(1);
        // The polyline runs along the true line: every point within 3 px (at 256) of it, and its
        // length agrees with the points.
        const { polyline, length } = result.stats[line];
        expect(polyline.length, line).toBeGreaterThanOrEqual(2);
        for (const [x, y] of polyline) expect(nearest(truth[line], w, h, x, y), `${line} (${x}, ${y})`).toBeLessThanOrEqual(3 * factor);
        let sum = 0;
        for (let i = 1; i < polyline.length; i++)
          sum += Math.hypot(polyline[i][0] - polyline[i - 1][0], polyline[i][1] - polyline[i - 1][1]);
        expect(length).toBeCloseTo(sum / result.hand!.palmWidth, 2);
      }
    },
  );

  it("renders the view at the model's own input_size: a 384 px oracle's lines overlap the truth as a 256 px one's do", async () => {
    // A line model trained at a larger view (training/run.sh VIEW=384) says so in its metadata only.
    const meta384 = parseModelMetadata({ ...RAW_META, input_size: "384" });
    const fixture = await upscaledTruth("scene-0", 4);
    const { w, h } = fixture;
    const bytes = await sharp(fixtureImage("scene-0")).resize(w, h, { kernel: "nearest" }).jpeg().toBuffer();
    const pose = whole(w, h);
    const truth = handTruth("scene-0", fixture, pose);
    const inputs: number[] = [];
    const model = oracle(truth, w, h, pose, { metadata: meta384 });
    const run = model.run.bind(model);
    model.run = async (input: Float32Array) => {
      inputs.push(input.length);
      return run(input);
    };
    const { result } = await analyzeImage(bytes, engine(model, fakeHands(pose, w)));
    expect(inputs).toEqual([3 * 384 * 384]);
    expect(result.reason).toBe("");
    for (const line of LINE_NAMES) {
      const pred = await decodeMask(result.masks[line]);
      expect(tolerantF1(pred.data, truth[line], w, h, 4).f1, line).toBeGreaterThanOrEqual(0.9);
      expect(result.stats[line].detected).toBe(true);
    }
  });

  it("renders the view in the model's own palm frame: a frame_side 1.3 oracle's lines overlap the truth", async () => {
    // A line model trained with the palm larger in its view (training/run.sh FRAME=1.3) says so in its metadata only.
    const tight = parseModelMetadata({ ...RAW_META, frame_side: "1.3" });
    const fixture = await upscaledTruth("scene-0", 4);
    const { w, h } = fixture;
    const bytes = await sharp(fixtureImage("scene-0")).resize(w, h, { kernel: "nearest" }).jpeg().toBuffer();
    // Landmarks whose 1.3 frame, not their 1.7 one, covers the fixture: its lines lie inside the model's view.
    const pose = whole(w, h, { side: (Math.max(w, h) * 1.05 * 1.7) / 1.3 });
    const truth = handTruth("scene-0", fixture, pose);
    const { result } = await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { metadata: tight }), fakeHands(pose, w)));
    expect(result.reason).toBe("");
    for (const line of LINE_NAMES) {
      const pred = await decodeMask(result.masks[line]);
      expect(tolerantF1(pred.data, truth[line], w, h, 4).f1, line).toBeGreaterThanOrEqual(0.9);
    }
  });

  it("makes only the images asked for: the same stats, empty images where none was wanted, a scaled-down overlay", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 2);
    const bytes = await sharp(fixtureImage("crop-0")).resize(w, h, { kernel: "nearest" }).jpeg().toBuffer();
    const pose = whole(w, h, LEFT);
    const run = (images: { overlay: boolean; masks: boolean; maxOverlaySide: number }) =>
      analyzeImage(bytes, engine(oracle(truth, w, h, pose), fakeHands(pose, w)), { images });
    const full = await run({ overlay: true, masks: true, maxOverlaySide: 0 });
    const none = await run({ overlay: false, masks: false, maxOverlaySide: 0 });
    expect(none.result.stats).toEqual(full.result.stats);
    expect(none.result.hand).toEqual(full.result.hand);
    expect(none.result.overlay.byteLength).toBe(0);
    for (const line of LINE_NAMES) expect(none.result.masks[line].byteLength, line).toBe(0);

    const small = await run({ overlay: true, masks: false, maxOverlaySide: 128 });
    const meta = await sharp(small.result.overlay).metadata();
    expect([meta.format, meta.width, meta.height]).toEqual(["jpeg", 128, Math.round((128 * h) / w)]);
    expect(small.result.masks.heart.byteLength).toBe(0);
    const masksOnly = await run({ overlay: false, masks: true, maxOverlaySide: 0 });
    expect(masksOnly.result.masks).toEqual(full.result.masks);
    expect(masksOnly.result.overlay.byteLength).toBe(0);
  });

  it("says whether the fingertips lie in the photo: beyond its edge, the finger values are estimates", async () => {
    const { truth, w, h } = await upscaledTruth("scene-0", 1);
    const pose = whole(w, h);
    const model = oracle(truth, w, h, pose);
    const hands = fakeHands(pose, w);
    const inside = await analyzeImage(fixtureImage("scene-0"), engine(model, hands));
    expect(inside.result.hand?.shape.fingersInPhoto).toBe(true);
    // The same hand with its middle fingertip (12) placed above the photo, as on a close-up.
    const cut: HandDetector = {
      async detect(rgb, width, height) {
        const d = await hands.detect(rgb, width, height);
        return d && { ...d, landmarks: d.landmarks.map((p, i): Point => (i === 12 ? [p[0], -4] : p)) };
      },
    };
    const outside = await analyzeImage(fixtureImage("scene-0"), engine(model, cut));
    expect(outside.result.hand?.shape.fingersInPhoto).toBe(false);
    expect(outside.result.reason).toBe("");
  });

  it("reports no hand and runs no line model when no hand is found", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const model = oracle(truth, w, h, whole(w, h));
    const { result } = await analyzeImage(fixtureImage("crop-0"), engine(model, fakeHands(null, w)));
    expect(result.reason).toBe("no_hand");
    expect(result.hand).toBeUndefined();
    expect(model.calls).toBe(0);
    for (const line of LINE_NAMES) expect(result.stats[line]).toEqual(noLine("no_hand"));
  });

  it("refuses the back of a hand (handedness against the knuckles' chirality), mirrored or not", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    for (const mirrored of [false, true]) {
      const pose = whole(w, h, { mirrored });
      const model = oracle(truth, w, h, pose);
      const { result } = await analyzeImage(fixtureImage("crop-0"), engine(model, fakeHands(pose, w, "back")));
      expect(result.reason).toBe("back_of_hand");
      expect(result.hand?.handedness).toBe(mirrored ? "right" : "left");
      expect(model.calls).toBe(0);
      for (const line of LINE_NAMES) expect(result.stats[line].detected).toBe(false);
    }
  });

  it("reports no line when the line model does not confirm the palm (crop.min_palm), and lines when it does", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const pose = whole(w, h, LEFT);
    const strict = parseModelMetadata({ ...META.raw, crop: '{"margin":0.15,"min_palm":0.2}' });
    expect(strict.cropMinPalm).toBe(0.2);
    const unconfirmed = await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { metadata: strict, palm: false }), fakeHands(pose, w)));
    for (const line of LINE_NAMES) expect(unconfirmed.result.stats[line].detected, line).toBe(false);
    expect(unconfirmed.result.reason).toBe("no_hand");
    expect(unconfirmed.result.hand).toBeUndefined();
    // Without the check, the same lines come through: the check alone removed them.
    const unchecked = await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { palm: false }), fakeHands(pose, w)));
    for (const line of LINE_NAMES) expect(unchecked.result.stats[line].detected, line).toBe(true);
    const confirmed = await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { metadata: strict }), fakeHands(pose, w)));
    for (const line of LINE_NAMES) expect(confirmed.result.stats[line].detected, line).toBe(true);
  });

  it("judges a close-up's palm over the part of its view inside the photo", async () => {
    // An upright right palm whose knuckles lie 50 px below the photo's top: its fingers are out of
    // the photo, and the view (the wrist moved out, closeupLandmarks) runs past three edges.
    const hand = (dy: number): Point[] => {
      const lm: Point[] = Array.from({ length: 21 }, () => [200, 190 + dy] as Point);
      lm[0] = [200, 330 + dy];
      lm[5] = [270, 55 + dy];
      lm[9] = [200, 50 + dy];
      lm[13] = [145, 55 + dy];
      lm[17] = [100, 65 + dy];
      return lm;
    };
    const strict = parseModelMetadata({ ...META.raw, crop: '{"margin":0.15,"min_palm":0.5}' });
    // A line model that sees palm on the upper 40% of its view, whatever it is shown: under min_palm 0.5 of the view.
    const model: PipelineModel = {
      metadata: strict,
      async run() {
        const out = new Float32Array(4 * S * S);
        out.fill(1, 0, Math.round(0.4 * S) * S);
        return out;
      },
    };
    const read = async (height: number, landmarks: Point[]) => {
      const bytes = await sharp({ create: { width: 400, height, channels: 3, background: "#b08070" } })
        .jpeg()
        .toBuffer();
      const hands: HandDetector = {
        async detect(_rgb, width) {
          const k = width / 400;
          return { landmarks: landmarks.map(([x, y]): Point => [x * k, y * k]), handedness: "right" };
        },
      };
      return (await analyzeImage(bytes, engine(model, hands))).result;
    };
    // The close-up: about 70% of its view lies in the photo, so 40% of palm is over half of that.
    const closeup = await read(400, hand(0));
    expect(closeup.reason).not.toBe("no_hand");
    expect(closeup.hand?.landmarks[0]).toEqual([200, 330]); // the answer keeps the model's own landmarks
    // The same hand with room above its knuckles for the fingers is no close-up: its whole view is judged.
    const whole = await read(600, hand(200));
    expect(whole.reason).toBe("no_hand");
    expect(whole.hand).toBeUndefined();
  });

  it("reads the palm a later search finds when the line model refuses the first", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const pose = whole(w, h, LEFT);
    const strict = parseModelMetadata({ ...META.raw, crop: '{"margin":0.15,"min_palm":0.2}' });
    // The line model sees no palm where the first palm's landmarks put the frame, and the true palm
    // where the second's do; the detector offers the first, then (refused) the second.
    const seen = oracle(truth, w, h, pose, { metadata: strict });
    const blind = oracle(truth, w, h, pose, { metadata: strict, palm: false });
    let calls = 0;
    const model: PipelineModel = { metadata: strict, run: (t) => (++calls === 1 ? blind : seen).run(t) };
    const first = await fakeHands(whole(w, h, { ...LEFT, cx: w * 0.3 }), w).detect(new Uint8Array(0), w, h);
    const second = await fakeHands(pose, w).detect(new Uint8Array(0), w, h);
    const offered: boolean[] = [];
    const { result } = await analyzeImage(fixtureImage("crop-0"), engine(model, offering([first!, second!], w, offered)));
    expect(offered).toEqual([false, true]);
    expect(calls).toBe(2);
    expect(result.reason).toBe("");
    for (const line of LINE_NAMES) expect(result.stats[line].detected, line).toBe(true);
    expect(result.hand?.landmarks[0][0]).toBeCloseTo(second!.landmarks[0][0], 0);
  });

  it("goes on past a palm whose lines are unclear, and answers it where no later palm shows lines", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const pose = whole(w, h, LEFT);
    const two = parseModelMetadata({ ...META.raw, detection: '{"min_pixels":20,"min_confidence":0.5,"min_lines":2}' });
    // The line model sees the palm at both palms the detector offers, with one line at the first and all three at
    // the second: the first is refused (its frame may be the wrong one), the second answered.
    const lone = oracle(truth, w, h, pose, { metadata: two, lines: ["heart"] });
    const all = oracle(truth, w, h, pose, { metadata: two });
    const first = await fakeHands(whole(w, h, { ...LEFT, cx: w * 0.45 }), w).detect(new Uint8Array(0), w, h);
    const second = await fakeHands(pose, w).detect(new Uint8Array(0), w, h);
    let calls = 0;
    const later: PipelineModel = { metadata: two, run: (t) => (++calls === 1 ? lone : all).run(t) };
    const offered: boolean[] = [];
    const { result } = await analyzeImage(fixtureImage("crop-0"), engine(later, offering([first!, second!], w, offered)));
    expect(offered).toEqual([false, true]);
    expect(result.reason).toBe("");
    for (const line of LINE_NAMES) expect(result.stats[line].detected, line).toBe(true);
    expect(result.hand?.landmarks[0][0]).toBeCloseTo(second!.landmarks[0][0], 0);

    // One line at every palm offered: none is accepted, and the first is the answer, its lines unclear.
    const none: boolean[] = [];
    const unclear = (await analyzeImage(fixtureImage("crop-0"), engine(lone, offering([first!, second!], w, none)))).result;
    expect(none).toEqual([false, false]);
    expect(unclear.reason).toBe("lines_unclear");
    for (const line of LINE_NAMES) expect(unclear.stats[line].detected, line).toBe(false);
    expect(unclear.hand?.landmarks[0][0]).toBeCloseTo(first!.landmarks[0][0], 0);
  });

  it("reports no line, and says the lines are unclear, when fewer than detection.min_lines are found", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const pose = whole(w, h, LEFT);
    const two = parseModelMetadata({ ...META.raw, detection: '{"min_pixels":20,"min_confidence":0.5,"min_lines":2}' });
    expect(two.detection.minLines).toBe(2);
    const detectedOf = (r: Awaited<ReturnType<typeof analyzeImage>>) => LINE_NAMES.filter((l) => r.result.stats[l].detected);
    const lone = await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { metadata: two, lines: ["heart"] }), fakeHands(pose, w)));
    expect(detectedOf(lone)).toEqual([]);
    expect(lone.result.reason).toBe("lines_unclear");
    expect(lone.result.hand?.handedness).toBe("left");
    expect(lone.result.stats.heart).toEqual(noLine("lines_unclear"));
    expect((await decodeMask(lone.result.masks.heart)).data.every((v) => v === 0)).toBe(true);
    // The default (one line) reports the same lone line: the rule alone removed it.
    expect(detectedOf(await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { lines: ["heart"] }), fakeHands(pose, w))))).toEqual([
      "heart",
    ]);
    const pair = await analyzeImage(
      bytes,
      engine(oracle(truth, w, h, pose, { metadata: two, lines: ["heart", "life"] }), fakeHands(pose, w)),
    );
    expect(detectedOf(pair)).toEqual(["heart", "life"]);
    // The line the model did not see says so; the found ones have no reason.
    expect(pair.result.stats.head.reason).toBe("not_visible");
    expect([pair.result.stats.heart.reason, pair.result.stats.life.reason]).toEqual(["", ""]);
  });

  it("reports a line against the palm's anatomy as not detected, reason implausible, and the others as before", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const analyze = async (t: typeof truth, pose: Pose) =>
      (await analyzeImage(bytes, engine(oracle(t, w, h, pose), fakeHands(pose, w)))).result;
    const asTaken = await analyze(truth, whole(w, h, LEFT));
    for (const line of LINE_NAMES) expect(asTaken.stats[line].detected, line).toBe(true);
    // Landmarks of a right hand on this left palm: its life line starts on the little-finger half.
    const wrongHand = await analyze(truth, whole(w, h));
    expect(wrongHand.stats.life).toEqual(noLine("implausible"));
    expect((await decodeMask(wrongHand.masks.life)).data.every((v) => v === 0)).toBe(true);
    expect([wrongHand.stats.heart.detected, wrongHand.stats.head.detected]).toEqual([true, true]);
    expect(wrongHand.reason).toBe("");
    // The heart line moved 80 px toward the thumb: even its little-finger end is on the index half.
    const moved = new Uint8Array(w * h);
    for (let y = 0; y < h; y++) for (let x = 80; x < w; x++) moved[y * w + x - 80] = truth.heart[y * w + x];
    const heartMoved = await analyze({ ...truth, heart: moved }, whole(w, h, LEFT));
    expect(heartMoved.stats.heart).toEqual(noLine("implausible"));
    expect([heartMoved.stats.head.detected, heartMoved.stats.life.detected]).toEqual([true, true]);
  });

  it("gives traits to the lines it reports and to no other, and compares head and life only when both are", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const pose = whole(w, h, LEFT);
    const all = (await analyzeImage(bytes, engine(oracle(truth, w, h, pose), fakeHands(pose, w)))).result;
    for (const line of LINE_NAMES) {
      const t = all.stats[line].traits;
      expect(t, line).toBeDefined();
      expect(t!.curvature).toBeGreaterThanOrEqual(0);
      expect(t!.depth).toBeGreaterThanOrEqual(0);
      // The ends are the polyline's ends.
      const pl = all.stats[line].polyline;
      expect(Math.hypot(t!.start.point[0] - pl[0][0], t!.start.point[1] - pl[0][1])).toBeLessThan(2);
      expect(Math.hypot(t!.end.point[0] - pl[pl.length - 1][0], t!.end.point[1] - pl[pl.length - 1][1])).toBeLessThan(2);
    }
    expect(all.headLifeStart).toBeDefined();
    expect(all.hand?.shape.palmLength).toBeGreaterThan(0);
    const noHead = (await analyzeImage(bytes, engine(oracle(truth, w, h, pose, { lines: ["heart", "life"] }), fakeHands(pose, w)))).result;
    expect(noHead.stats.head.detected).toBe(false);
    expect("traits" in noHead.stats.head).toBe(false); // an undetected line has no traits at all
    expect(noHead.stats.heart.traits).toBeDefined();
    expect(noHead.stats.life.traits).toBeDefined();
    expect(noHead.headLifeStart).toBeUndefined();
  });

  it("takes a 12 MP JPEG's lines from a reduced copy, maps them onto the full-size photo, and decodes it at full size only for the overlay", async () => {
    // The photo shows the true lines as colours (heart red, head green, life blue), 12 x crop-0
    // (3072 x 3072); the stand-in model sees them in the view it is given, so the lines come
    // through the reduced decode, the frame and the mapping back.
    const F = 12;
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const colours = pack(truth.heart, truth.head, truth.life, w, h);
    const W = w * F;
    const H = h * F;
    const bytes = await sharp(colours.data, { raw: { width: w, height: h, channels: 3 } })
      .resize(W, H, { kernel: "nearest" })
      .jpeg({ quality: 95 })
      .toBuffer();
    const { scale, mean, std } = META.normalization;
    const seeing: PipelineModel = {
      metadata: META,
      async run(tensor) {
        const out = new Float32Array(4 * S * S).fill(1, 0, S * S); // the palm everywhere
        for (let c = 0; c < 3; c++)
          for (let i = 0; i < S * S; i++) out[(c + 1) * S * S + i] = ((tensor[c * S * S + i] * std[c] + mean[c]) * scale) / 255;
        return out;
      },
    };
    const run = (images: { overlay: boolean; masks: boolean }, pose = whole(w, h, LEFT)) =>
      analyzeImage(bytes, engine(seeing, fakeHands(pose, w)), { images: { ...images, maxOverlaySide: 0 } });
    const none = await run({ overlay: false, masks: false });
    const masks = await run({ overlay: false, masks: true });
    const full = await run({ overlay: true, masks: true });
    expect([none.result.width, none.result.height]).toEqual([W, H]);
    expect(none.timings.decode).toBeGreaterThan(0);
    expect(none.timings.fullDecode).toBe(0);
    expect(masks.timings.fullDecode).toBe(0);
    expect(full.timings.fullDecode).toBeGreaterThan(0);
    expect(none.result.stats).toEqual(full.result.stats);
    expect(masks.result.masks).toEqual(full.result.masks);
    expect((await sharp(full.result.overlay).metadata()).width).toBe(W);
    const big = await upscaledTruth("crop-0", F);
    for (const line of LINE_NAMES) {
      expect(full.result.stats[line].detected, line).toBe(true);
      const pred = await decodeMask(full.result.masks[line]);
      expect(tolerantF1(pred.data, big.truth[line], W, H, F).f1, line).toBeGreaterThanOrEqual(0.9);
    }
    // A palm too small for the reduced copy (a frame of 0.3 x the photo: under 2 copy pixels per
    // model pixel) is cut from the photo at full size, lean answer or not.
    const small = await run({ overlay: false, masks: false }, { cx: w / 2, cy: h / 2, side: 0.3 * w });
    expect(small.timings.fullDecode).toBeGreaterThan(0);
    // A PNG, and a JPEG too small to reduce, are decoded once, at full size.
    const png = await sharp(fixtureImage("crop-0")).png().toBuffer();
    for (const photo of [png, fixtureImage("crop-0")]) {
      const { timings } = await analyzeImage(photo, engine(seeing, fakeHands(whole(w, h), w)), {
        images: { overlay: true, masks: false, maxOverlaySide: 0 },
      });
      expect([timings.decode, timings.fullDecode > 0]).toEqual([0, true]);
    }
  });

  it("returns empty masks and the photo as overlay when the model finds nothing", async () => {
    const blank: PipelineModel = { metadata: META, run: async () => new Float32Array(4 * S * S) };
    const bytes = fixtureImage("crop-1");
    const { result } = await analyzeImage(bytes, engine(blank, fakeHands(whole(256, 256), 256)));
    for (const line of LINE_NAMES) expect(result.stats[line]).toEqual(noLine("lines_unclear"));
    expect(result.reason).toBe("lines_unclear");
    const a = await sharp(result.overlay).raw().toBuffer();
    const b = await sharp(bytes).raw().toBuffer();
    let diff = 0;
    for (let i = 0; i < a.length; i++) diff += Math.abs(a[i] - b[i]);
    expect(diff / a.length).toBeLessThan(3);
  });
});

/** Distance in pixels from (x, y) to the nearest set pixel of a w x h mask. */
function nearest(mask: Uint8Array, w: number, h: number, x: number, y: number): number {
  let best = Infinity;
  for (let j = 0; j < h; j++) for (let i = 0; i < w; i++) if (mask[j * w + i]) best = Math.min(best, Math.hypot(i + 0.5 - x, j + 0.5 - y));
  return best;
}
