import sharp from "sharp";
import { describe, expect, it } from "vitest";
import { cropResize, type SquareBox } from "../../../src/image/preprocess.js";
import { LINE_NAMES, type LineName } from "../../../src/inference/analyzer-types.js";
import { parseModelMetadata } from "../../../src/inference/model-metadata.js";
import { analyzeImage, type PipelineModel } from "../../../src/inference/pipeline.js";
import { findPalm, palmCropBox } from "../../../src/inference/postprocess.js";
import { decodeMask, fixtureImage, tolerantF1, trueMask } from "./fixtures.js";

const META = parseModelMetadata({
  model_name: "oracle",
  model_version: "0.0.0",
  input_size: "256",
  output_names: "palm,heart,head,life",
  thresholds: '{"palm":0.5,"heart":0.5,"head":0.5,"life":0.5}',
  detection: '{"min_pixels":40,"min_confidence":0.6}',
  crop: '{"margin":0.15}',
});
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

/**
 * oracle is a stand-in model that "predicts" the true masks of an image: it renders them
 * through the same geometry the engine uses (letterbox on the first call, the palm crop box
 * on the second), so any misalignment in the engine's crop / upsampling shows up as lost
 * overlap, whatever the real model's quality.
 */
function oracle(
  truth: { palm: Uint8Array; heart: Uint8Array; head: Uint8Array; life: Uint8Array },
  w: number,
  h: number,
  options: { metadata?: typeof META; palmOnCrop?: boolean; wholePalmScale?: number; linesOnCrop?: readonly LineName[] } = {},
): PipelineModel {
  const metadata = options.metadata ?? META;
  const palmOnCrop = options.palmOnCrop ?? true;
  const lines = pack(truth.heart, truth.head, truth.life, w, h);
  const palm = pack(truth.palm, truth.palm, truth.palm, w, h);
  let call = 0;
  const render = async (box: SquareBox): Promise<Float32Array> => {
    const p = await cropResize(palm, box, S, 0);
    const l = await cropResize(lines, box, S, 0);
    const out = new Float32Array(4 * S * S);
    for (let i = 0; i < S * S; i++) {
      out[i] = p[i * 3] / 255;
      out[S * S + i] = l[i * 3] / 255;
      out[2 * S * S + i] = l[i * 3 + 1] / 255;
      out[3 * S * S + i] = l[i * 3 + 2] / 255;
    }
    return out;
  };
  let whole: Float32Array | undefined;
  return {
    metadata,
    async run() {
      call++;
      const side = Math.max(w, h);
      const letterbox = { x: Math.floor((w - side) / 2), y: Math.floor((h - side) / 2), side };
      if (call === 1) {
        whole = await render(letterbox);
        const scale = options.wholePalmScale ?? 1;
        for (let i = 0; i < S * S; i++) whole[i] *= scale;
        return whole;
      }
      const found = findPalm(whole!.subarray(0, S * S), S, metadata.palmProposal, letterbox, { width: w, height: h });
      const crop = await render(palmCropBox(found!, META.cropMargin));
      if (!palmOnCrop) crop.fill(0, 0, S * S);
      LINE_NAMES.forEach((line, i) => {
        if (options.linesOnCrop && !options.linesOnCrop.includes(line)) crop.fill(0, (i + 1) * S * S, (i + 2) * S * S);
      });
      return crop;
    },
  };
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
    for (let y = 0; y < h; y++) for (let x = 0; x < w; x++) up[y * w + x] = m.data[Math.floor(y / factor) * m.width + Math.floor(x / factor)];
    t[c] = up;
  }
  return { truth: t, w, h };
}

describe("analyzeImage()", () => {
  it.each([
    ["crop-0", 1],
    ["scene-0", 1],
    ["scene-0", 4], // 1024 x 1024: the palm crop is downsampled, masks are upsampled 4x back
  ])("maps the model's view of %s (x%i) back onto the image: an oracle model's lines overlap the truth (F1 >= 0.9 within 1 px at 256)", async (name, factor) => {
    const { truth, w, h } = await upscaledTruth(name, factor);
    const bytes = factor === 1 ? fixtureImage(name) : await sharp(fixtureImage(name)).resize(w, h, { kernel: "nearest" }).jpeg().toBuffer();
    const { result, timings } = await analyzeImage(bytes, oracle(truth, w, h));
    expect([result.width, result.height]).toEqual([w, h]);
    expect(result.model).toBe("oracle-0.0.0");
    expect(timings.total).toBeGreaterThan(0);
    for (const line of LINE_NAMES) {
      const pred = await decodeMask(result.masks[line]);
      const f1 = tolerantF1(pred.data, truth[line], w, h, factor).f1;
      expect(f1, line).toBeGreaterThanOrEqual(0.9);
      // Stats of a detected line agree with its mask (SPEC.md section 3).
      const on = pred.data.reduce((n, v) => n + (v === 255 ? 1 : 0), 0);
      expect(result.stats[line]).toEqual({
        pixels: on,
        confidence: expect.any(Number),
        coverage: Math.round((10_000 * on) / (w * h)) / 100,
        detected: true,
      });
      expect(on).toBeGreaterThan(0);
      expect(result.stats[line].confidence).toBeGreaterThan(0.5); // every mask pixel is above the 0.5 threshold
      expect(result.stats[line].confidence).toBeLessThanOrEqual(1);
    }
  });

  it("reports no line when the crop pass does not confirm the palm (crop.min_palm), and lines when it does", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const strict = parseModelMetadata({ ...META.raw, crop: '{"margin":0.15,"min_palm":0.2}' });
    expect(strict.cropMinPalm).toBe(0.2);
    const unconfirmed = await analyzeImage(bytes, oracle(truth, w, h, { metadata: strict, palmOnCrop: false }));
    for (const line of LINE_NAMES) expect(unconfirmed.result.stats[line].detected, line).toBe(false);
    // Without the check, the same lines come through: the check alone removed them.
    const unchecked = await analyzeImage(bytes, oracle(truth, w, h, { palmOnCrop: false }));
    for (const line of LINE_NAMES) expect(unchecked.result.stats[line].detected, line).toBe(true);
    const confirmed = await analyzeImage(bytes, oracle(truth, w, h, { metadata: strict }));
    for (const line of LINE_NAMES) expect(confirmed.result.stats[line].detected, line).toBe(true);
  });

  it("reports no line when fewer lines than detection.min_lines are found, and all found ones when enough are", async () => {
    const { truth, w, h } = await upscaledTruth("crop-0", 1);
    const bytes = fixtureImage("crop-0");
    const two = parseModelMetadata({ ...META.raw, detection: '{"min_pixels":20,"min_confidence":0.5,"min_lines":2}' });
    expect(two.detection.minLines).toBe(2);
    const detectedOf = (r: Awaited<ReturnType<typeof analyzeImage>>) => LINE_NAMES.filter((l) => r.result.stats[l].detected);
    const lone = await analyzeImage(bytes, oracle(truth, w, h, { metadata: two, linesOnCrop: ["heart"] }));
    expect(detectedOf(lone)).toEqual([]);
    expect(lone.result.stats.heart).toEqual({ pixels: 0, confidence: 0, coverage: 0, detected: false });
    expect((await decodeMask(lone.result.masks.heart)).data.every((v) => v === 0)).toBe(true);
    // The default (one line) reports the same lone line: the rule alone removed it.
    expect(detectedOf(await analyzeImage(bytes, oracle(truth, w, h, { linesOnCrop: ["heart"] })))).toEqual(["heart"]);
    const pair = await analyzeImage(bytes, oracle(truth, w, h, { metadata: two, linesOnCrop: ["heart", "life"] }));
    expect(detectedOf(pair)).toEqual(["heart", "life"]);
  });

  it("proposes the palm box at crop.proposal: a faint whole-image palm is still looked into", async () => {
    const { truth, w, h } = await upscaledTruth("scene-0", 1);
    const bytes = fixtureImage("scene-0");
    // The whole-image pass sees the palm at probability 0.4: under thresholds.palm (0.5).
    const strict = await analyzeImage(bytes, oracle(truth, w, h, { wholePalmScale: 0.4 }));
    for (const line of LINE_NAMES) expect(strict.result.stats[line].detected, line).toBe(false);
    const loose = parseModelMetadata({ ...META.raw, crop: '{"margin":0.15,"proposal":0.3}' });
    const proposed = await analyzeImage(bytes, oracle(truth, w, h, { metadata: loose, wholePalmScale: 0.4 }));
    for (const line of LINE_NAMES) expect(proposed.result.stats[line].detected, line).toBe(true);
  });

  it("returns empty masks and the photo as overlay when the model finds no palm", async () => {
    const blank: PipelineModel = { metadata: META, run: async () => new Float32Array(4 * S * S) };
    const bytes = fixtureImage("crop-1");
    const { result } = await analyzeImage(bytes, blank);
    for (const line of LINE_NAMES) expect(result.stats[line]).toEqual({ pixels: 0, confidence: 0, coverage: 0, detected: false });
    const a = await sharp(result.overlay).raw().toBuffer();
    const b = await sharp(bytes).raw().toBuffer();
    let diff = 0;
    for (let i = 0; i < a.length; i++) diff += Math.abs(a[i] - b[i]);
    expect(diff / a.length).toBeLessThan(3);
  });
});
