import { existsSync } from "node:fs";
import { join } from "node:path";
import sharp from "sharp";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { ImageError, OverloadedError } from "../../../src/engine-errors.js";
import { LINE_NAMES, type AnalysisResult } from "../../../src/inference/analyzer-types.js";
import { createAnalyzer, type EngineAnalyzer } from "../../../src/inference/analyzer.js";
import { analyzeImage, createPipelineEngine } from "../../../src/inference/pipeline.js";
import { decodeMask, fixtureImage, fixtures, tolerantF1, trueMask } from "./fixtures.js";
import { makeHandPhoto } from "../../helpers/images.js";
import { NON_PALM, NON_PALM_DIR } from "../../../scripts/eval-real.js";
import { isAlive } from "../../helpers/proc.js";

/**
 * OVERLAP_BOUND: the tolerant F1 (3 px per 256 px of image height, training's own evaluation
 * measure at 256 x 256) a line must reach to count as found on a synthetic whole-hand fixture.
 * Far above what a missing or misplaced line scores (near 0).
 *
 * LINES_FOUND_PER_FIXTURE and MEAN_F1_BOUND: every line of every hand the landmarks find must be
 * found, and the mean over all of them must reach issue 2's bar (F1 0.85). HANDS_FOUND: the hand
 * landmark model is Google's, trained on real hands; it finds 2 of the 3 synthetic hand fixtures
 * (hand-2, on a busy background, not). A broken pipeline (misaligned frame, wrong channel order,
 * empty output) or a model that swaps lines fails these.
 */
const OVERLAP_BOUND = 0.6;
const LINES_FOUND_PER_FIXTURE = 3;
const MEAN_F1_BOUND = 0.85;
const HANDS_FOUND = 2;
const TOLERANCE_PX = 3;

let analyzer: EngineAnalyzer;
const results = new Map<string, AnalysisResult>();

async function analyze(name: string): Promise<AnalysisResult> {
  let r = results.get(name);
  if (!r) {
    r = await analyzer.analyze(fixtureImage(name));
    results.set(name, r);
  }
  return r;
}

/** lineScores is the tolerant F1 of each line of fixture `name` against its true mask. */
async function lineScores(name: string): Promise<Record<string, number>> {
  const r = await analyze(name);
  const scores: Record<string, number> = {};
  for (const line of LINE_NAMES) {
    const truth = await trueMask(name, line);
    const pred = await decodeMask(r.masks[line]);
    const tol = Math.round((TOLERANCE_PX * truth.height) / 256);
    scores[line] = tolerantF1(pred.data, truth.data, truth.width, truth.height, tol).f1;
  }
  return scores;
}

beforeAll(async () => {
  analyzer = await createAnalyzer({ workers: 1, maxQueue: 8 });
});
afterAll(async () => {
  await analyzer?.close();
});

describe("createAnalyzer()", () => {
  it("reports the model version from the model file's metadata", () => {
    expect(analyzer.model).toMatch(/^palm-lines-\d+\.\d+\.\d+/);
  });

  it("fails with a clear message when the model file is missing", async () => {
    await expect(createAnalyzer({ modelPath: "/nonexistent/palm-lines.onnx", workers: 1 })).rejects.toThrow(
      /Cannot read the model file \/nonexistent\/palm-lines\.onnx/,
    );
  });
});

describe("Analyzer.analyze()", () => {
  const hands = fixtures().filter((f) => f.kind === "hand");
  const negatives = fixtures().filter((f) => f.kind === "negative" || f.kind === "hand-back");
  const found = async () => (await Promise.all(hands.map(async (f) => ((await analyze(f.name)).hand ? [f.name] : [])))).flat();

  it(`finds the hand on at least ${HANDS_FOUND} of the ${hands.length} synthetic whole-hand photos`, async () => {
    expect((await found()).length).toBeGreaterThanOrEqual(HANDS_FOUND);
  });

  it(`finds ${LINES_FOUND_PER_FIXTURE === 3 ? "all" : `at least ${LINES_FOUND_PER_FIXTURE} of the`} 3 lines with tolerant F1 >= ${OVERLAP_BOUND}, their course and length, on every synthetic hand found`, async () => {
    for (const name of await found()) {
      const scores = await lineScores(name);
      const lines = LINE_NAMES.filter((line) => scores[line] >= OVERLAP_BOUND);
      expect(lines.length, `${name} F1 per line: ${JSON.stringify(scores)}`).toBeGreaterThanOrEqual(LINES_FOUND_PER_FIXTURE);
      const r = await analyze(name);
      expect(r.reason).toBe("");
      for (const line of lines) {
        expect(r.stats[line].polyline.length).toBeGreaterThanOrEqual(2);
        // A principal line spans roughly half to one and a half knuckle spans.
        expect(r.stats[line].length, `${name} ${line}`).toBeGreaterThan(0.4);
        expect(r.stats[line].length, `${name} ${line}`).toBeLessThan(2);
      }
    }
  });

  it(`reaches a mean tolerant F1 >= ${MEAN_F1_BOUND} over every line of every synthetic hand found`, async () => {
    const all: number[] = [];
    for (const name of await found()) all.push(...Object.values(await lineScores(name)));
    const mean = all.reduce((a, b) => a + b, 0) / all.length;
    expect(mean, `F1 of ${all.length} line instances: ${all.map((v) => v.toFixed(2)).join(" ")}`).toBeGreaterThanOrEqual(MEAN_F1_BOUND);
  });

  it.each(negatives.map((f) => f.name))("detects no line on palm-free image %s, and says why", async (name) => {
    const r = await analyze(name);
    expect(r.reason, name).toMatch(/^(no_hand|back_of_hand)$/);
    for (const line of LINE_NAMES) {
      expect(r.stats[line]).toEqual({ pixels: 0, confidence: 0, coverage: 0, detected: false, polyline: [], length: 0, reason: r.reason });
      const mask = await decodeMask(r.masks[line]);
      expect(mask.data.every((v) => v === 0)).toBe(true);
    }
  });

  // The last palm searches read a close-up as a palm that fills it, down to a landmark presence of
  // 0.2 (docs/decisions/palm-searches.md): close-ups of real photos without a palm (a face, a cat,
  // coins, gravel, text) must still get no line. Debian's python3-skimage ships the photos.
  it.skipIf(!existsSync(join(NON_PALM_DIR, NON_PALM[0])))(
    "detects no line on close-ups of real photos without a palm",
    async () => {
      for (const file of NON_PALM) {
        const photo = sharp(join(NON_PALM_DIR, file));
        const { width = 0, height = 0 } = await photo.metadata();
        for (const k of [0.5, 0.33]) {
          const [w, h] = [Math.round(width * k), Math.round(height * k)];
          const crop = await photo
            .clone()
            .extract({ left: Math.round((width - w) / 2), top: Math.round((height - h) / 3), width: w, height: h })
            .resize(640, 640, { fit: "inside" })
            .jpeg()
            .toBuffer();
          const r = await analyzer.analyze(crop);
          expect(r.reason, `${file} x ${k}`).toMatch(/^(no_hand|back_of_hand)$/);
          expect(
            LINE_NAMES.filter((line) => r.stats[line].detected),
            `${file} x ${k}`,
          ).toEqual([]);
        }
      }
    },
    60_000,
  );

  it("returns 1-channel 0/255 mask PNGs and a JPEG overlay of the input's size, with stats that match the masks", async () => {
    for (const f of fixtures()) {
      const r = await analyze(f.name);
      const meta = await sharp(fixtureImage(f.name)).metadata();
      expect([r.width, r.height]).toEqual([meta.width, meta.height]);
      const overlay = await sharp(r.overlay).metadata();
      expect([overlay.format, overlay.width, overlay.height]).toEqual(["jpeg", r.width, r.height]);
      for (const line of LINE_NAMES) {
        const mask = await decodeMask(r.masks[line]);
        expect([mask.width, mask.height, mask.channels]).toEqual([r.width, r.height, 1]);
        let on = 0;
        let other = 0;
        for (const v of mask.data) {
          if (v === 255) on++;
          else if (v !== 0) other++;
        }
        expect(other).toBe(0);
        const s = r.stats[line];
        expect(s.pixels).toBe(on);
        expect(s.coverage).toBe(Math.round((10_000 * on) / (r.width * r.height)) / 100);
        expect(s.confidence).toBeGreaterThanOrEqual(0);
        expect(s.confidence).toBeLessThanOrEqual(1);
        expect(s.confidence === 0).toBe(on === 0);
        expect(s.detected).toBe(on > 0);
      }
    }
  });

  it("gives identical output for identical input", async () => {
    const first = await analyze("hand-0");
    const again = await analyzer.analyze(fixtureImage("hand-0"));
    expect(Buffer.from(again.overlay).equals(Buffer.from(first.overlay))).toBe(true);
    for (const line of LINE_NAMES) expect(Buffer.from(again.masks[line]).equals(Buffer.from(first.masks[line]))).toBe(true);
    expect(again.stats).toEqual(first.stats);
  });

  it("outputs an EXIF-rotated photo upright: the same size, overlay and masks as the upright photo", async () => {
    // A non-square upright photo: fixture hand-1 with 64 grey columns on the right.
    const uprightRaw = await sharp(fixtureImage("hand-1"))
      .extend({ right: 64, background: { r: 128, g: 128, b: 128 } })
      .raw()
      .toBuffer({ resolveWithObject: true });
    const { width: W, height: H } = uprightRaw.info;
    const raw = { raw: { width: W, height: H, channels: 3 as const } };
    const upright = await sharp(uprightRaw.data, raw).jpeg({ quality: 95 }).toBuffer();
    // Stored rotated 90 degrees anticlockwise, tagged orientation 6 (display: rotate clockwise).
    const stored = await sharp(uprightRaw.data, raw).rotate(-90).withMetadata({ orientation: 6 }).jpeg({ quality: 95 }).toBuffer();
    expect((await sharp(stored).metadata()).width).toBe(H);

    const a = await analyzer.analyze(upright);
    const b = await analyzer.analyze(stored);
    expect([b.width, b.height]).toEqual([W, H]);
    const pa = await sharp(a.overlay).raw().toBuffer();
    const pb = await sharp(b.overlay).raw().toBuffer();
    let diff = 0;
    for (let i = 0; i < pa.length; i++) diff += Math.abs(pa[i] - pb[i]);
    expect(diff / pa.length).toBeLessThan(6); // JPEG generations apart, same picture
    for (const line of LINE_NAMES) {
      const ma = await decodeMask(a.masks[line]);
      const mb = await decodeMask(b.masks[line]);
      expect([mb.width, mb.height]).toEqual([W, H]);
      expect(b.stats[line].detected).toBe(a.stats[line].detected);
      expect(a.stats[line].detected, line).toBe(true);
      expect(tolerantF1(mb.data, ma.data, W, H, 2).f1).toBeGreaterThan(0.8);
    }
  });

  it.each([
    [
      "a GIF",
      () =>
        sharp({ create: { width: 80, height: 80, channels: 3, background: "#888" } })
          .gif()
          .toBuffer(),
      "unsupported_image_format",
    ],
    ["a text file", async () => Buffer.from("hello"), "unsupported_image_format"],
    ["a truncated JPEG", async () => fixtureImage("crop-0").subarray(0, 5000), "invalid_image"],
    [
      "a 63 x 63 JPEG",
      () =>
        sharp({ create: { width: 63, height: 63, channels: 3, background: "#888" } })
          .jpeg()
          .toBuffer(),
      "image_dimensions_out_of_range",
    ],
    ["a file over 5 MiB", async () => Buffer.concat([fixtureImage("crop-0"), Buffer.alloc(5 * 1024 * 1024)]), "image_too_large"],
  ] as const)("rejects %s with its typed ImageError code", async (_, make, code) => {
    const err = await analyzer.analyze(await make()).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ImageError);
    expect((err as ImageError).code).toBe(code);
  });
});

describe("createAnalyzer() admission control", () => {
  // One worker, one queue place: the second analysis waits, the third is refused.
  let small: EngineAnalyzer;
  const img = () => fixtureImage("negative-background");
  beforeAll(async () => {
    small = await createAnalyzer({ workers: 1, maxQueue: 1 });
  });
  afterAll(async () => {
    await small?.close();
  });

  it("refuses work beyond running + queued with OverloadedError at once, and serves the admitted ones", async () => {
    const first = small.analyze(img());
    const second = small.analyze(img());
    let firstDone = false;
    void first.then(() => (firstDone = true));
    const third = await small.analyze(img()).catch((e: unknown) => e);
    // Refused at once: before the running analysis, let alone the queued one, is done.
    expect(firstDone).toBe(false);
    expect(third).toBeInstanceOf(OverloadedError);
    expect((third as OverloadedError).retryAfterSeconds).toBeGreaterThanOrEqual(1);
    await expect(first).resolves.toBeDefined();
    await expect(second).resolves.toBeDefined();
    expect(small.stats()).toMatchObject({ running: 0, queued: 0 });
  });

  it("rejects a queued analysis at once when its signal aborts, with the signal's reason, and frees its place", async () => {
    const running = small.analyze(img());
    const ctrl = new AbortController();
    const queued = small.analyze(img(), { signal: ctrl.signal });
    expect(small.stats().queued).toBe(1);
    const reason = new Error("client went away");
    ctrl.abort(reason);
    await expect(queued).rejects.toBe(reason);
    expect(small.stats().queued).toBe(0);
    // The freed place takes a new analysis instead of an OverloadedError.
    const next = small.analyze(img());
    await expect(running).resolves.toBeDefined();
    await expect(next).resolves.toBeDefined();
    // An already aborted signal rejects without queueing.
    await expect(small.analyze(img(), { signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
  });

  it("rejects a running analysis at once when its signal aborts; the worker then serves the next one", async () => {
    // The same analysis run to the end, for comparison: the rejection must not wait for it.
    let start = performance.now();
    await small.analyze(img());
    const whole = performance.now() - start;
    const ctrl = new AbortController();
    const running = small.analyze(img(), { signal: ctrl.signal });
    expect(small.stats().running).toBe(1);
    start = performance.now();
    ctrl.abort(new Error("deadline"));
    await expect(running).rejects.toThrow("deadline");
    expect(performance.now() - start).toBeLessThan(whole / 2);
    await expect(small.analyze(img())).resolves.toBeDefined();
  });

  it("stops the work of an aborted running analysis: its worker process is killed within 1 s and replaced", async () => {
    const big = await makeHandPhoto();
    const [before] = small.workerPids();
    const ctrl = new AbortController();
    const running = small.analyze(big, { signal: ctrl.signal });
    await expect.poll(() => small.stats().running, { interval: 1 }).toBe(1);
    ctrl.abort(new Error("deadline"));
    await expect(running).rejects.toThrow("deadline");
    // Left to finish, the 12 MP analysis kept its worker busy for its whole duration.
    await expect.poll(() => isAlive(before), { timeout: 1000, interval: 10 }).toBe(false);
    await expect.poll(() => small.workerPids().length, { timeout: 60_000, interval: 50 }).toBe(1);
    expect(small.workerPids()).not.toContain(before);
    await expect(small.analyze(img())).resolves.toBeDefined();
  });

  it("holds a place while the admitted hook runs, starts only after it, and rejects with its error", async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let hookCalled = false;
    const first = small.analyze(img(), {
      admitted: () => {
        hookCalled = true;
        return gate;
      },
    });
    expect(hookCalled).toBe(true);
    expect(small.stats()).toMatchObject({ running: 0, queued: 1 });
    const second = small.analyze(img(), { admitted: () => Promise.reject(new Error("quota spent")) });
    await expect(second).rejects.toThrow("quota spent");
    // Held + one queued place: a third is refused although nothing runs yet.
    const held = small.analyze(img(), { admitted: () => gate });
    await expect(small.analyze(img())).rejects.toBeInstanceOf(OverloadedError);
    expect(small.stats().running).toBe(0);
    release();
    await expect(first).resolves.toBeDefined();
    await expect(held).resolves.toBeDefined();
  });

  it("keeps the main thread responsive while analyses run: its worst event-loop stall is a fraction of running them in-process", async () => {
    // A 1500 x 2000 photo of a hand. In-process, each inference blocks the loop for its whole run; in the
    // worker the main thread only passes messages. Compared side by side (not against a fixed
    // time), so a slow or busy machine slows both.
    const big = await sharp(fixtureImage("hand-0")).resize(1500, 2000, { fit: "fill" }).jpeg().toBuffer(); // a hand: every stage runs
    const worstStall = async (work: () => Promise<unknown>) => {
      let last = performance.now();
      let worst = 0;
      const timer = setInterval(() => {
        const now = performance.now();
        worst = Math.max(worst, now - last);
        last = now;
      }, 5);
      try {
        await work();
      } finally {
        clearInterval(timer);
      }
      return worst;
    };
    const engine = await createPipelineEngine({ intraOpNumThreads: 1 });
    try {
      const inProcess = await worstStall(() => analyzeImage(big, engine).then(() => analyzeImage(big, engine)));
      const inWorkers = await worstStall(() => Promise.all([small.analyze(big), small.analyze(big)]));
      expect(inWorkers).toBeLessThan(inProcess / 2);
    } finally {
      await engine.close();
    }
  });
});
