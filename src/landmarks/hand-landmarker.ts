/**
 * Hand landmarker: MediaPipe's two-stage hand pipeline on onnxruntime-node, for one still image.
 * The palm detector finds the best palm (letterboxed 192 x 192 input in [0, 1] (checked: [-1, 1] gives garbage boxes), SSD anchors,
 * weighted NMS, minimum score 0.5); the rotated, enlarged hand rect it gives is warped to the
 * landmark model (224 x 224 in [0, 1]); the 21 landmarks then give a refined rect (as MediaPipe's
 * tracking does between video frames) and the landmark model runs once more. `run` blocks the
 * calling thread inside onnxruntime: call it from a worker process.
 */
import { existsSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import * as ort from "onnxruntime-node";
import {
  decodePalmDetections,
  type PalmDetection,
  handRectFromLandmarks,
  handRectFromPalm,
  PALM_ANCHORS,
  rectToImage,
  ssdAnchors,
  warpToTensor,
  weightedNms,
  type Point,
  type RotatedRect,
} from "./geometry.js";
import { DEFAULT_HAND_MODEL_DIR, HAND_MODEL_FILES, HandModelError } from "./hand-models.js";
import { palmFrame } from "./palm-frame.js";

/** HandDetection is the one hand found in an image. */
export interface HandDetection {
  /**
   * 21 MediaPipe landmarks (0 wrist, 1-4 thumb, 5-8 index, 9-12 middle, 13-16 ring, 17-20 pinky),
   * x/y in the pixels of the RGB buffer given (continuous coordinates: pixel (i, j) spans
   * [i, i+1) x [j, j+1)).
   */
  landmarks: [number, number][];
  /** The hand as it really is, for a normal (non-selfie, non-mirrored) photo. */
  handedness: "left" | "right";
  /** Probability of that handedness label, 0..1. */
  handednessScore: number;
  /** Hand-presence score of the landmark model, 0..1. */
  presence: number;
  /** Palm detector score, 0..1. */
  detectionScore: number;
}

/** HandTimings are the stage times of the last {@link HandLandmarker.detect} call, milliseconds. */
export interface HandTimings {
  /** Letterbox warp plus palm detector inference plus decoding. */
  palm: number;
  /** Each landmark pass: crop warp plus inference (one or two passes). */
  landmarks: number[];
  total: number;
}

/** HandLandmarker finds one hand and its 21 landmarks in an RGB image. */
export interface HandLandmarker {
  /**
   * detect finds the most confident hand in interleaved 8-bit RGB pixels (width x height), or
   * null when the palm detector finds none above its threshold or the landmark model's presence
   * score is below 0.5. Pass a copy downscaled to about 640 pixels on the longer side: the crops
   * sample at most 2 x 2 points per model pixel, so much larger images alias.
   */
  detect(rgb: Uint8Array, width: number, height: number): Promise<HandDetection | null>;
  /** Stage times of the last detect call (undefined before the first). */
  readonly lastTimings: HandTimings | undefined;
  /** close frees both native sessions. */
  close(): Promise<void>;
}

/** HandLandmarkerOptions configure {@link createHandLandmarker}. */
export interface HandLandmarkerOptions {
  /** Folder of the converted models. Default `models/hands/`; built there from `@mediapipe/hands` when missing. */
  modelDir?: string;
  /** onnxruntime intra-op threads per session. Default 1 (one landmarker per worker process). */
  intraOpNumThreads?: number;
  /** Minimum palm detector score. Default 0.5 (MediaPipe's). */
  minDetectionScore?: number;
  /** Minimum hand presence of the landmark model. Default 0.5 (MediaPipe's). */
  minPresence?: number;
  /** Run the landmark model a second time on the rect derived from the first landmarks. Default true. */
  refine?: boolean;
  /** Run both models once on a blank input after loading. Default true. */
  warmUp?: boolean;
}

const PALM_SIZE = PALM_ANCHORS.inputSize;
const LANDMARK_SIZE = 224;

/** handednessFromModel turns the model's output (P of MediaPipe's "Left", which assumes a mirrored selfie) into the real hand. */
function handednessFromModel(pMirroredLeft: number): { handedness: "left" | "right"; handednessScore: number } {
  // MediaPipe labels assume a horizontally flipped (selfie) image; in a plain photo its "Left" is a right hand.
  return pMirroredLeft >= 0.5
    ? { handedness: "right", handednessScore: pMirroredLeft }
    : { handedness: "left", handednessScore: 1 - pMirroredLeft };
}

/**
 * palmChirality tells which hand the landmarks would be IF the palm faces the camera: with the
 * wrist -> middle-finger MCP vector pointing up (image y grows down), a right palm seen from its
 * palm side has the index MCP (5) to the image's right of the pinky MCP (17); a left one, to the
 * left. Independent of in-plane rotation; mirroring the image flips it.
 */
export function palmChirality(landmarks: readonly (readonly [number, number])[]): "right" | "left" {
  // The canonical frame is mirrored exactly when the index knuckle lies left of the little one.
  return palmFrame(landmarks as readonly Point[]).mirrored ? "left" : "right";
}

/**
 * facing tells whether the detection shows the palm or the back of the hand: "palm" when the
 * model's handedness agrees with the landmarks' {@link palmChirality}, "back" otherwise.
 */
export function facing(detection: Pick<HandDetection, "landmarks" | "handedness">): "palm" | "back" {
  return palmChirality(detection.landmarks) === detection.handedness ? "palm" : "back";
}

/**
 * SEARCHES are the palm detector's tries, in order, until one finds a palm: the photo as it is;
 * zoomed out (the detector was trained on hands that fill part of the frame, so a close-up whose
 * palm fills it is shown smaller, on black); brightened (a dark photo, see {@link brighten}); both.
 */
const SEARCHES: readonly { zoomOut: number; brighten: boolean }[] = [
  { zoomOut: 1, brighten: false },
  { zoomOut: 1.8, brighten: false },
  { zoomOut: 1, brighten: true },
  { zoomOut: 1.8, brighten: true },
];

/** A photo whose mean luminance is under DARK (of 255) is brightened for the fallback search. */
const DARK = 90;

/**
 * brighten returns a copy of a dark photo with a gamma curve that lifts its mean luminance to
 * about 45% (creases keep their contrast: a monotone curve), or undefined when it is not dark.
 */
function brighten(rgb: Uint8Array, width: number, height: number): Uint8Array | undefined {
  const n = width * height;
  const step = Math.max(1, Math.floor(n / 65536));
  let sum = 0;
  let count = 0;
  for (let i = 0; i < n; i += step) {
    sum += 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
    count++;
  }
  const mean = sum / count / 255;
  if (mean * 255 >= DARK || mean <= 0) return undefined;
  const gamma = Math.log(0.45) / Math.log(mean);
  const lut = new Uint8Array(256);
  for (let v = 0; v < 256; v++) lut[v] = Math.round(255 * (v / 255) ** gamma);
  const out = new Uint8Array(n * 3);
  for (let i = 0; i < n * 3; i++) out[i] = lut[rgb[i]];
  return out;
}

async function openSession(path: string, threads: number): Promise<ort.InferenceSession> {
  return ort.InferenceSession.create(path, {
    intraOpNumThreads: threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
    graphOptimizationLevel: "all",
    extra: { session: { intra_op: { allow_spinning: "0" } } },
  });
}

/**
 * searchPalm runs the palm detector (`detectPalms`, on a letterboxed input) on the photo as it is,
 * then, only where it finds no palm, on the fallbacks of SEARCHES (a close-up's palm shown
 * smaller, a dark photo brightened). Returns the image and letterbox box of the search that found
 * palms (the last one tried when none did). Pinned by hand-landmarker.spec "finds a hand on every
 * photo" (box-492, a close-up, needs the zoom-out).
 */
async function searchPalm(
  rgb: Uint8Array,
  width: number,
  height: number,
  detectPalms: (input: Float32Array) => Promise<PalmDetection[]>,
): Promise<{ image: Uint8Array; found: PalmDetection[]; box: RotatedRect }> {
  let image = rgb;
  let brightened: Uint8Array | null | undefined; // null: not dark, no brightened copy
  let found: PalmDetection[] = [];
  let box: RotatedRect = { cx: width / 2, cy: height / 2, width: 0, height: 0, rotation: 0 };
  for (const search of SEARCHES) {
    if (search.brighten) {
      if (brightened === undefined) brightened = brighten(rgb, width, height) ?? null;
      if (!brightened) continue;
    }
    image = search.brighten ? brightened! : rgb;
    // Letterbox: the longer side (times the search's zoom-out) fills the detector input, centred, black padding.
    const side = Math.max(width, height) * search.zoomOut;
    box = { cx: width / 2, cy: height / 2, width: side, height: side, rotation: 0 };
    found = await detectPalms(warpToTensor(image, width, height, box, { size: PALM_SIZE, range: [0, 1], border: "zero" }));
    if (found.length > 0) break;
  }
  return { image, found, box };
}

/**
 * createHandLandmarker loads the converted palm-detector and hand-landmark models and warms them
 * up; it never converts them (missing models are a {@link HandModelError} naming the build command).
 */
export async function createHandLandmarker(options: HandLandmarkerOptions = {}): Promise<HandLandmarker> {
  const modelDir = options.modelDir ?? DEFAULT_HAND_MODEL_DIR;
  const palmPath = join(modelDir, HAND_MODEL_FILES.palm);
  const landmarkPath = join(modelDir, HAND_MODEL_FILES.landmark);
  if (!existsSync(palmPath) || !existsSync(landmarkPath)) {
    throw new HandModelError(`The hand models are missing from ${modelDir}: run npm run build:hand-models (npm install runs it).`);
  }
  const threads = options.intraOpNumThreads ?? 1;
  const minScore = options.minDetectionScore ?? 0.5;
  const minPresence = options.minPresence ?? 0.5;
  const refine = options.refine ?? true;
  const palmSession = await openSession(palmPath, threads);
  const landmarkSession = await openSession(landmarkPath, threads);
  const anchors = ssdAnchors(PALM_ANCHORS);
  let lastTimings: HandTimings | undefined;

  async function runPalm(input: Float32Array) {
    const out = await palmSession.run({ input: new ort.Tensor("float32", input, [1, 3, PALM_SIZE, PALM_SIZE]) });
    return { boxes: out.boxes.data as Float32Array, scores: out.scores.data as Float32Array };
  }

  async function runLandmarks(input: Float32Array) {
    const out = await landmarkSession.run({ input: new ort.Tensor("float32", input, [1, 3, LANDMARK_SIZE, LANDMARK_SIZE]) });
    return {
      landmarks: out.landmarks.data as Float32Array,
      presence: (out.presence.data as Float32Array)[0],
      handedness: (out.handedness.data as Float32Array)[0],
    };
  }

  async function landmarkPass(rgb: Uint8Array, width: number, height: number, rect: RotatedRect) {
    const input = warpToTensor(rgb, width, height, rect, { size: LANDMARK_SIZE, range: [0, 1], border: "replicate" });
    const r = await runLandmarks(input);
    const landmarks: Point[] = [];
    for (let k = 0; k < 21; k++) {
      landmarks.push(rectToImage(rect, r.landmarks[3 * k] / LANDMARK_SIZE, r.landmarks[3 * k + 1] / LANDMARK_SIZE));
    }
    return { landmarks, presence: r.presence, handedness: r.handedness };
  }

  async function detect(rgb: Uint8Array, width: number, height: number): Promise<HandDetection | null> {
    if (!(width > 0 && height > 0) || rgb.length < width * height * 3) {
      throw new RangeError(`detect: ${rgb.length} bytes is not a ${width}x${height} RGB image`);
    }
    const t0 = performance.now();
    const timings: HandTimings = { palm: 0, landmarks: [], total: 0 };
    lastTimings = timings;
    const finish = <T>(value: T): T => {
      timings.total = performance.now() - t0;
      return value;
    };
    const { image, found, box } = await searchPalm(rgb, width, height, (input) =>
      runPalm(input).then((raw) => weightedNms(decodePalmDetections(raw.boxes, raw.scores, anchors, PALM_SIZE, minScore), 0.3)),
    );
    timings.palm = performance.now() - t0;
    if (found.length === 0) return finish(null);
    const best = found[0];
    const side = box.width;
    // Normalised letterbox coordinates -> image pixels.
    const toImage = ([x, y]: Point): Point => [box.cx + (x - 0.5) * side, box.cy + (y - 0.5) * side];
    const [cx, cy] = toImage([best.cx, best.cy]);
    const palmRect = handRectFromPalm({ cx, cy, w: best.w * side, h: best.h * side }, best.keypoints.map(toImage));

    let t = performance.now();
    let pass = await landmarkPass(image, width, height, palmRect);
    timings.landmarks.push(performance.now() - t);
    if (refine && pass.presence >= minPresence) {
      t = performance.now();
      const second = await landmarkPass(image, width, height, handRectFromLandmarks(pass.landmarks));
      timings.landmarks.push(performance.now() - t);
      if (second.presence >= minPresence) pass = second;
    }
    if (!(pass.presence >= minPresence)) return finish(null);
    return finish({
      landmarks: pass.landmarks,
      ...handednessFromModel(pass.handedness),
      presence: pass.presence,
      detectionScore: best.score,
    });
  }

  if (options.warmUp ?? true) {
    await runPalm(new Float32Array(3 * PALM_SIZE * PALM_SIZE));
    await runLandmarks(new Float32Array(3 * LANDMARK_SIZE * LANDMARK_SIZE));
  }

  return {
    detect,
    get lastTimings() {
      return lastTimings;
    },
    async close() {
      await palmSession.release();
      await landmarkSession.release();
    },
  };
}
