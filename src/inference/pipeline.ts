/**
 * The per-image pipeline, from image bytes to {@link AnalysisResult}: decode (a large JPEG reduced,
 * with shrink-on-load), hand landmarks on a small copy, the canonical palm frame (upright, every
 * hand seen as a right palm), the line model in that frame, post-processing, masks mapped back
 * onto the photo at full size, encoding (the photo decoded at full size only for the overlay). It
 * runs inside a worker process of the analyzer's pool, and in-process for benchmarks of the floor.
 */
import { JPEG_SHRINKS, decodeImage, readImageHeader, type DecodedImage, type ImageHeader } from "../image/decode.js";
import { LINE_COLOURS, encodeMaskPng, encodeOverlayJpeg, type OverlayOptions } from "../image/encode.js";
import { emptyMask } from "../image/mask.js";
import { preprocessFrame, resizeToFit, type TensorSpec } from "../image/preprocess.js";
import type { Point } from "../landmarks/geometry.js";
import { createHandLandmarker, facing, type HandDetection } from "../landmarks/hand-landmarker.js";
import {
  INDEX_MCP,
  PINKY_MCP,
  type PalmFrame,
  closeupLandmarks,
  shareInside,
  frameToImage,
  imageToFrame,
  palmFrame,
  palmWidth,
} from "../landmarks/palm-frame.js";
import {
  ALL_IMAGES,
  LINE_NAMES,
  type AnalysisResult,
  type HandInfo,
  type HeadLifeStart,
  type ImageOutput,
  type LineName,
  type LineReason,
  type LineStats,
  type LineTraits,
  type NoLinesReason,
} from "./analyzer-types.js";
import { implausibleCourse } from "./anatomy.js";
import { handShape } from "./hand-shape.js";
import { type LineCourse, lineCourse, polylineLength, simplifyCourse, type ModelPoint } from "./line-geometry.js";
import { frameLuma, measureLines } from "./line-traits.js";
import type { ModelMetadata } from "./model-metadata.js";
import { createModelSession, type ModelSession, type ModelSessionOptions } from "./model-session.js";
import { growLine, palmDistanceMap, palmShare, renderFrameMask, ruleUnit, selectLine, type FullMask } from "./postprocess.js";

/** StageTimings are milliseconds spent per pipeline stage for one image. */
export interface StageTimings {
  /**
   * The reduced copy of the photo that the hand search and the palm frame are cut from
   * ({@link viewShrink}); 0 where the photo is decoded at full size only.
   */
  decode: number;
  /**
   * The photo at full size: for the overlay, for a palm too small for the reduced copy, or as the
   * only decode of a PNG or a smaller photo; 0 when nothing needed it (lean answers of a large
   * JPEG: pipeline.spec "decodes a 12 MP JPEG at full size only for the overlay").
   */
  fullDecode: number;
  /** Hand search: the small copy and the landmark models. */
  landmarks: number;
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

/**
 * HandDetector finds the most prominent hand in an interleaved RGB buffer (a HandLandmarker); a
 * palm that `accept` refuses does not end its search.
 */
export interface HandDetector {
  detect(
    rgb: Uint8Array,
    width: number,
    height: number,
    accept?: (palm: Pick<HandDetection, "landmarks" | "handedness">) => Promise<boolean>,
  ): Promise<Pick<HandDetection, "landmarks" | "handedness"> | null>;
}

/** PalmReading is a palm the line model confirmed: its hand in photo pixels, its frame, the view and the model's output. */
interface PalmReading {
  found: Pick<HandDetection, "landmarks" | "handedness">;
  hand: HandInfo;
  frame: PalmFrame;
  tensor: Float32Array;
  probs: Float32Array;
  palm: Float32Array;
  /** The lines selected on it, those against the palm's anatomy left out (selectLines, anatomy.ts). */
  selected: SelectedLine[];
  /** Per line why it is not among them. */
  why: Record<LineName, LineReason>;
}

/** PipelineEngine is the two models the pipeline runs: hand landmarks, then the line model. */
export interface PipelineEngine {
  readonly lines: PipelineModel;
  readonly hands: HandDetector;
}

/** HAND_SEARCH_SIDE: hands are searched on a copy whose longer side is at most this (pixels). */
export const HAND_SEARCH_SIDE = 640;

/**
 * VIEW_MIN_SCALE: the palm frame is cut from the reduced copy only where the copy has at least
 * this many pixels per model pixel across the frame (renderFrame shrinks them to 1.5: the view is
 * never upsampled from the copy); a smaller palm is cut from the photo at full size.
 */
export const VIEW_MIN_SCALE = 2;

/**
 * VIEW_MIN_SHORT_SIDE: a JPEG is decoded reduced where the copy's shorter side keeps at least this
 * many model input sides (896 px for 256), so that a palm frame of at least 4/7 of the photo's
 * shorter side (every photo of ../shared/real-palms: 0.57 to 1.07) has {@link VIEW_MIN_SCALE}
 * pixels per model pixel in it; a smaller one costs a second, full-size decode.
 */
export const VIEW_MIN_SHORT_SIDE = 3.5;

/**
 * viewShrink is the factor by which the photo is reduced for the hand search and the palm frame:
 * the largest of JPEG_SHRINKS (decoded with shrink-on-load) that keeps the copy's shorter side at
 * least VIEW_MIN_SHORT_SIDE x `inputSize`; 1 (full size) for a PNG or a smaller JPEG. A 12 MP
 * photo (3024 x 4032) is reduced by 3.
 */
export function viewShrink(header: ImageHeader, inputSize: number): number {
  if (header.format !== "jpeg") return 1;
  const short = Math.min(header.width, header.height);
  return JPEG_SHRINKS.find((f) => short / f >= VIEW_MIN_SHORT_SIDE * inputSize) ?? 1;
}

/** PipelineOptions tune {@link analyzeImage}. */
export interface PipelineOptions {
  overlay?: OverlayOptions;
  /** Which images to make (the rest is skipped, not computed). Default {@link ALL_IMAGES}. */
  images?: ImageOutput;
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
export function lineStats(
  mask: FullMask,
  detected: boolean,
  polyline: [number, number][] = [],
  length = 0,
  reason: LineReason = "not_visible",
): LineStats {
  const pixels = detected ? mask.pixels : 0;
  const confidence = pixels > 0 ? Math.min(1, Math.max(0, round(mask.probSum / pixels, 4))) : 0;
  const coverage = round((100 * pixels) / (mask.width * mask.height), 2);
  const found = detected && pixels > 0;
  return {
    pixels,
    confidence,
    coverage,
    detected: found,
    polyline: found ? polyline : [],
    length: found ? round(length, 3) : 0,
    reason: found ? "" : reason || "not_visible",
  };
}

/**
 * analyzeImage runs the whole pipeline on one JPEG/PNG file. Throws ImageError for bad input;
 * anything else is a fault. Returns the result and the time spent per stage.
 */
export async function analyzeImage(
  bytes: Uint8Array,
  engine: PipelineEngine,
  options: PipelineOptions = {},
): Promise<{ result: AnalysisResult; timings: StageTimings }> {
  const model = engine.lines;
  const meta = model.metadata;
  const S = meta.inputSize;
  const spec = tensorSpec(meta);
  const { lap, stop } = stageClock();

  // Every answer, lean or full, takes its numbers from the same copy (lean-answers.spec: equal
  // numbers); the photo is decoded at full size only where an image or a small palm needs it.
  const header = await readImageHeader(bytes);
  const { width, height } = header;
  const shrink = viewShrink(header, S);
  let photo: DecodedImage | undefined;
  const fullSize = async (): Promise<DecodedImage> => {
    if (!photo) {
      photo = await decodeImage(bytes, { header });
      lap("fullDecode");
    }
    return photo;
  };
  let view: DecodedImage;
  if (shrink > 1) {
    view = await decodeImage(bytes, { header, shrink });
    lap("decode");
  } else view = await fullSize();

  const masks = {} as Record<LineName, FullMask>;
  const detected = {} as Record<LineName, boolean>;
  const paths = {} as Record<LineName, [number, number][]>;
  // Per line why it is not reported; where the whole answer has no line, its reason wins (below).
  const why = {} as Record<LineName, LineReason>;
  const clearLines = () => {
    for (const line of LINE_NAMES) {
      masks[line] = { ...emptyMask(width, height), pixels: 0, probSum: 0 };
      detected[line] = false;
      paths[line] = [];
    }
  };
  clearLines();
  let reason: NoLinesReason = "no_hand";
  let hand: HandInfo | undefined;
  let traits: Partial<Record<LineName, LineTraits>> = {};
  let headLifeStart: HeadLifeStart | undefined;

  const small = await resizeToFit(view, HAND_SEARCH_SIDE);
  const sx = width / small.width;
  const sy = height / small.height;
  const toPhoto = (found: Pick<HandDetection, "landmarks" | "handedness">): HandInfo => {
    const landmarks = found.landmarks.map(([x, y]): Point => [round(x * sx, 1), round(y * sy, 1)]);
    return {
      handedness: found.handedness,
      landmarks,
      palmWidth: round(palmWidth(landmarks), 1),
      shape: handShape(landmarks, width, height),
    };
  };
  // The line model confirms a palm: where it sees too little, the landmarks were not on a palm, and
  // the search goes on past it (pipeline.spec "reads the palm a later search finds when the line
  // model refuses the first"). Where it sees the palm but draws fewer than `detection.min_lines`
  // lines, the search goes on too (another search's frame may show them: docs/decisions/palm-searches.md,
  // "Lines confirm the palm"), and that first such palm is the answer, `lines_unclear`, where no
  // search gives one with lines (pipeline.spec "goes on past a palm whose lines are unclear").
  let reading: PalmReading | undefined;
  let unclear: PalmReading | undefined;
  const confirm = async (found: Pick<HandDetection, "landmarks" | "handedness">): Promise<PalmReading | undefined> => {
    lap("landmarks");
    const palmHand = toPhoto(found);
    const frameMarks = closeupLandmarks(palmHand.landmarks, width, height);
    const frame = palmFrame(frameMarks, meta.frameSide);
    // A close-up's view runs past the photo's edge: its palm share is judged against the part inside it
    // (pipeline.spec "judges a close-up's palm over the part of its view inside the photo").
    const inside = frameMarks === palmHand.landmarks ? 1 : shareInside(frame, width, height);
    const fits = (frame.side * view.width) / width >= VIEW_MIN_SCALE * S;
    const tensor = await preprocessFrame(fits ? view : await fullSize(), frame, spec, header);
    lap("preprocess");
    const probs = await model.run(tensor);
    lap("inference");
    const palm = channel(probs, meta.channels.palm, S);
    const confirmed = meta.cropMinPalm <= 0 || palmShare(palm, S, meta.thresholds.palm) >= meta.cropMinPalm * inside;
    if (!confirmed) return undefined;
    // A line against the palm's anatomy is not reported (anatomy.ts), before the count below.
    const { landmarks } = palmHand;
    const midU = (imageToFrame(frame, S, ...landmarks[INDEX_MCP])[0] + imageToFrame(frame, S, ...landmarks[PINKY_MCP])[0]) / 2;
    const lineWhy = {} as Record<LineName, LineReason>;
    const selected = selectLines(probs, palm, meta, lineWhy).filter(({ line, course }) => {
      if (!implausibleCourse(line, course, midU)) return true;
      lineWhy[line] = "implausible";
      return false;
    });
    lap("postprocess");
    const read: PalmReading = { found, hand: palmHand, frame, tensor, probs, palm, selected, why: lineWhy };
    if (selected.length >= meta.detection.minLines) return read;
    unclear ??= read;
    return undefined;
  };
  const found = await engine.hands.detect(small.data, small.width, small.height, async (palm) => {
    reading = await confirm(palm);
    return reading !== undefined;
  });
  lap("landmarks");
  // A detector that does not ask (a stand-in in tests) leaves the confirmation to here.
  if (found && facing(found) === "palm" && reading?.found !== found) reading = await confirm(found);
  const read = reading ?? unclear;
  if (!read && found && facing(found) === "back") {
    hand = toPhoto(found);
    reason = "back_of_hand";
  } else if (read) {
    hand = read.hand;
    const { frame, tensor, selected } = read;
    const { landmarks } = hand;
    Object.assign(why, read.why);
    reason = "lines_unclear";
    // Fewer lines than the model's `detection.min_lines` on a palm: none is reported (checked
    // again after rendering: a line can render to no pixel).
    if (selected.length >= meta.detection.minLines) {
      for (const { line, prob, kept, course } of selected) {
        masks[line] = renderFrameMask(prob, kept, S, meta.grow[line], frame, width, height);
        detected[line] = masks[line].pixels > 0;
        paths[line] = course.map(([u, v]) => {
          const [x, y] = frameToImage(frame, S, u, v);
          return [round(x, 1), round(y, 1)];
        });
      }
      if (LINE_NAMES.filter((line) => detected[line]).length < meta.detection.minLines) clearLines();
      else {
        reason = "";
        // Traits only for the lines reported (line-traits.ts).
        const reported = selected.filter(({ line }) => detected[line]);
        const ctx = {
          size: S,
          frame,
          landmarks,
          palmWidth: hand.palmWidth,
          luma: frameLuma(tensor, spec),
          ruleUnit: ruleUnit(S, meta.frameSide),
        };
        ({ traits, headLifeStart } = measureLines(reported, paths, ctx));
      }
    }
    lap("postprocess");
  }

  const stats = {} as Record<LineName, LineStats>;
  for (const line of LINE_NAMES) {
    const unit = hand?.palmWidth ?? 0;
    const lineWhy: LineReason = reason !== "" ? reason : (why[line] ?? "not_visible");
    stats[line] = lineStats(masks[line], detected[line], paths[line], unit > 0 ? polylineLength(paths[line]) / unit : 0, lineWhy);
    if (stats[line].detected && traits[line]) stats[line].traits = traits[line];
  }
  const { pngs, overlay } = await encodeImages(fullSize, masks, options, lap);
  return { result: { model: meta.model, width, height, overlay, masks: pngs, stats, hand, reason, headLifeStart }, timings: stop() };
}

/** noStageTimings is a StageTimings of zeros. */
export function noStageTimings(): StageTimings {
  return { decode: 0, fullDecode: 0, landmarks: 0, preprocess: 0, inference: 0, postprocess: 0, maskEncode: 0, overlayEncode: 0, total: 0 };
}

/** stageClock times the stages: lap(stage) adds the time since the last lap to it; stop() sets the total. */
function stageClock(): { lap: (stage: Exclude<keyof StageTimings, "total">) => void; stop: () => StageTimings } {
  const t = noStageTimings();
  const start = performance.now();
  let mark = start;
  return {
    lap(stage) {
      const now = performance.now();
      t[stage] += now - mark;
      mark = now;
    },
    stop() {
      t.total = performance.now() - start;
      return t;
    },
  };
}

/** SelectedLine is a line detected on the model's map: its probabilities, kept pixels (S x S) and course. */
interface SelectedLine {
  line: LineName;
  prob: Float32Array;
  kept: Uint8Array;
  /** The kept pixels traced (line-geometry.ts lineCourse), traced once for the polyline and the traits. */
  traced: LineCourse;
  /** That course simplified (line-geometry.ts simplifyCourse): the polyline, in model pixels, in reading order. */
  course: ModelPoint[];
}

/**
 * selectLines picks each line's plausible part (selectLine, on the line's threshold) and follows
 * a detected one along weaker evidence (growLine, its `grow` threshold); `why` gets each line's
 * reason when it is not detected.
 */
function selectLines(probs: Float32Array, palm: Float32Array, meta: ModelMetadata, why: Record<LineName, LineReason>): SelectedLine[] {
  const S = meta.inputSize;
  const palmDistance = palmDistanceMap(palm, S, meta.thresholds.palm);
  // The rules' lengths follow the palm, not the view, in a model framed tighter than FRAME_SIDE.
  const unit = ruleUnit(S, meta.frameSide);
  const selected: SelectedLine[] = [];
  for (const line of LINE_NAMES) {
    const prob = channel(probs, meta.channels[line], S);
    const sel = selectLine(prob, S, {
      threshold: meta.thresholds[line],
      minPixels: meta.detection.minPixels,
      minConfidence: meta.detection.minConfidence,
      palmDistance,
      unit,
    });
    why[line] = sel.why;
    if (!sel.detected) continue;
    const kept = growLine(prob, sel.kept, S, meta.grow[line], palmDistance, unit);
    const traced = lineCourse(kept, S, line);
    selected.push({ line, prob, kept, traced, course: simplifyCourse(traced.path) });
  }
  return selected;
}

/**
 * encodeImages makes the mask PNGs and the overlay JPEG that `options.images` asks for; images
 * not asked for are not made (pipeline.spec.ts, "makes only the images asked for"). `photo` gives
 * the photo at full size, decoding it on the first call: only the overlay needs it.
 */
async function encodeImages(
  photo: () => Promise<DecodedImage>,
  masks: Record<LineName, FullMask>,
  options: PipelineOptions,
  lap: (stage: "maskEncode" | "overlayEncode") => void,
): Promise<{ pngs: Record<LineName, Uint8Array>; overlay: Uint8Array }> {
  const images = options.images ?? ALL_IMAGES;
  const pngs = {} as Record<LineName, Uint8Array>;
  for (const line of LINE_NAMES) {
    pngs[line] = images.masks ? encodeMaskPng(masks[line], { level: options.maskPngLevel }) : new Uint8Array(0);
  }
  lap("maskEncode");
  const overlay = images.overlay
    ? await encodeOverlayJpeg(
        await photo(),
        LINE_NAMES.map((line) => ({ mask: masks[line], colour: LINE_COLOURS[line] })),
        { ...options.overlay, maxSide: images.maxOverlaySide },
      )
    : new Uint8Array(0);
  lap("overlayEncode");
  return { pngs, overlay };
}

/** PipelineEngineHandle is a loaded {@link PipelineEngine} that owns its native sessions. */
export interface PipelineEngineHandle extends PipelineEngine {
  readonly lines: ModelSession;
  /** close frees both models' sessions. */
  close(): Promise<void>;
}

/** createPipelineEngine loads the line model and the hand landmarker (one intra-op thread each by default). */
export async function createPipelineEngine(options: ModelSessionOptions = {}): Promise<PipelineEngineHandle> {
  const [lines, hands] = await Promise.allSettled([
    createModelSession(options),
    createHandLandmarker({ intraOpNumThreads: options.intraOpNumThreads }),
  ]);
  if (lines.status === "rejected" || hands.status === "rejected") {
    if (lines.status === "fulfilled") await lines.value.release();
    if (hands.status === "fulfilled") await hands.value.close();
    throw lines.status === "rejected" ? lines.reason : (hands as PromiseRejectedResult).reason;
  }
  return {
    lines: lines.value,
    hands: hands.value,
    async close() {
      await Promise.all([lines.value.release(), hands.value.close()]);
    },
  };
}
