/**
 * The per-image pipeline, from image bytes to {@link AnalysisResult}: decode, whole-image pass
 * (palm), palm crop pass (lines), post-processing, mask and overlay encoding. It runs inside a
 * worker process of the analyzer's pool, and in-process for benchmarks of the floor.
 */
import { decodeImage } from "../image/decode.js";
import { LINE_COLOURS, encodeMaskPng, encodeOverlayJpeg, type OverlayOptions } from "../image/encode.js";
import { emptyMask } from "../image/mask.js";
import { preprocessCrop, preprocessLetterbox, type TensorSpec } from "../image/preprocess.js";
import { LINE_NAMES, type AnalysisResult, type LineName, type LineStats } from "./analyzer-types.js";
import type { ModelMetadata } from "./model-metadata.js";
import {
  findPalm,
  palmCropBox,
  palmDistanceMap,
  palmShare,
  renderFullMask,
  selectLine,
  type FullMask,
} from "./postprocess.js";

/** StageTimings are milliseconds spent per pipeline stage for one image. */
export interface StageTimings {
  decode: number;
  preprocess: number;
  inference: number;
  postprocess: number;
  maskEncode: number;
  overlayEncode: number;
  total: number;
}

/** PipelineModel is what the pipeline needs of a model session. */
export interface PipelineModel {
  readonly metadata: ModelMetadata;
  run(input: Float32Array): Promise<Float32Array>;
}

/** PipelineOptions tune {@link analyzeImage}. */
export interface PipelineOptions {
  overlay?: OverlayOptions;
  /** zlib level of the mask PNGs. Default 6. */
  maskPngLevel?: number;
}

/** tensorSpec derives the preprocessing parameters from the model metadata. */
export function tensorSpec(metadata: ModelMetadata): TensorSpec {
  return {
    inputSize: metadata.inputSize,
    channelOrder: metadata.channelOrder,
    normalization: metadata.normalization,
    padValue: metadata.letterboxPad,
  };
}

function channel(probs: Float32Array, index: number, size: number): Float32Array {
  const n = size * size;
  return probs.subarray(index * n, (index + 1) * n);
}

function round(value: number, decimals: number): number {
  const f = 10 ** decimals;
  return Math.round(value * f) / f;
}

/**
 * lineStats computes SPEC.md `stats.<line>` from a full-size mask: pixels = set pixels,
 * confidence = mean probability over them (0 when none, 4 decimals), coverage = percentage of
 * the image (2 decimals), detected = the model-resolution decision and a non-empty mask.
 */
export function lineStats(mask: FullMask, detected: boolean): LineStats {
  const pixels = detected ? mask.pixels : 0;
  const confidence = pixels > 0 ? Math.min(1, Math.max(0, round(mask.probSum / pixels, 4))) : 0;
  const coverage = round((100 * pixels) / (mask.width * mask.height), 2);
  return { pixels, confidence, coverage, detected: detected && pixels > 0 };
}

/**
 * analyzeImage runs the whole pipeline on one JPEG/PNG file. Throws ImageError for bad input;
 * anything else is a fault. Returns the result and the time spent per stage.
 */
export async function analyzeImage(
  bytes: Uint8Array,
  model: PipelineModel,
  options: PipelineOptions = {},
): Promise<{ result: AnalysisResult; timings: StageTimings }> {
  const meta = model.metadata;
  const S = meta.inputSize;
  const spec = tensorSpec(meta);
  const t: StageTimings = { decode: 0, preprocess: 0, inference: 0, postprocess: 0, maskEncode: 0, overlayEncode: 0, total: 0 };
  const start = performance.now();
  let mark = start;
  const lap = (stage: Exclude<keyof StageTimings, "total">) => {
    const now = performance.now();
    t[stage] += now - mark;
    mark = now;
  };

  const image = await decodeImage(bytes);
  const { width, height } = image;
  lap("decode");

  const whole = await preprocessLetterbox(image, spec);
  lap("preprocess");
  const probs1 = await model.run(whole.tensor);
  lap("inference");
  const palm = findPalm(channel(probs1, meta.channels.palm, S), S, meta.palmProposal, whole.box, image);
  lap("postprocess");

  const masks = {} as Record<LineName, FullMask>;
  const detected = {} as Record<LineName, boolean>;
  const clearLines = () => {
    for (const line of LINE_NAMES) {
      masks[line] = { ...emptyMask(width, height), pixels: 0, probSum: 0 };
      detected[line] = false;
    }
  };
  clearLines();
  if (palm) {
    const box = palmCropBox(palm, meta.cropMargin);
    const crop = await preprocessCrop(image, box, spec);
    lap("preprocess");
    const probs2 = await model.run(crop.tensor);
    lap("inference");
    const palm2 = channel(probs2, meta.channels.palm, S);
    // The crop pass sees the palm at full model resolution: when it finds too little palm there,
    // the whole-image pass mistook something else (a back of hand, a forearm) for one.
    const confirmed = meta.cropMinPalm <= 0 || palmShare(palm2, S, meta.thresholds.palm) >= meta.cropMinPalm;
    const palmDistance = confirmed ? palmDistanceMap(palm2, S, meta.thresholds.palm) : null;
    const selected: { line: LineName; prob: Float32Array; kept: Uint8Array }[] = [];
    for (const line of confirmed ? LINE_NAMES : []) {
      const prob = channel(probs2, meta.channels[line], S);
      const sel = selectLine(prob, S, {
        threshold: meta.thresholds[line],
        minPixels: meta.detection.minPixels,
        minConfidence: meta.detection.minConfidence,
        palmDistance,
      });
      if (sel.detected) selected.push({ line, prob, kept: sel.kept });
    }
    // Fewer lines than the model's `detection.min_lines` on a palm: none is reported, so none is
    // rendered at full size (checked again after rendering: a line can render to no pixel).
    if (selected.length >= meta.detection.minLines) {
      for (const { line, prob, kept } of selected) {
        masks[line] = renderFullMask(prob, kept, S, meta.thresholds[line], box, width, height);
        detected[line] = masks[line].pixels > 0;
      }
      if (LINE_NAMES.filter((line) => detected[line]).length < meta.detection.minLines) clearLines();
    }
    lap("postprocess");
  }

  const stats = {} as Record<LineName, LineStats>;
  const pngs = {} as Record<LineName, Uint8Array>;
  for (const line of LINE_NAMES) {
    stats[line] = lineStats(masks[line], detected[line]);
    pngs[line] = encodeMaskPng(masks[line], { level: options.maskPngLevel });
  }
  lap("maskEncode");
  const overlay = await encodeOverlayJpeg(
    image,
    LINE_NAMES.map((line) => ({ mask: masks[line], colour: LINE_COLOURS[line] })),
    options.overlay,
  );
  lap("overlayEncode");
  t.total = performance.now() - start;
  return { result: { model: meta.model, width, height, overlay, masks: pngs, stats }, timings: t };
}
