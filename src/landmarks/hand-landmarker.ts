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
  handRectFromLandmarks,
  handRectFromPalm,
  PALM_ANCHORS,
  rectToImage,
  ssdAnchors,
  transformRect,
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
   * score is below 0.5 (0.2 for the last search, {@link WEAK_PRESENCE}). Pass a copy downscaled to
   * about 640 pixels on the longer side: the crops sample at most 2 x 2 points per model pixel, so
   * much larger images alias. A palm that `accept` refuses (the line model sees no palm there)
   * does not end the search: it goes on as past a back, for at most {@link MAX_REFUSED} refused
   * palms.
   */
  detect(rgb: Uint8Array, width: number, height: number, accept?: (palm: HandDetection) => Promise<boolean>): Promise<HandDetection | null>;
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

/** mirrorRgb is an RGB photo mirrored left to right. */
function mirrorRgb(rgb: Uint8Array, width: number, height: number): Uint8Array {
  const out = new Uint8Array(width * height * 3);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      const i = 3 * (y * width + x);
      const j = 3 * (y * width + width - 1 - x);
      out[j] = rgb[i];
      out[j + 1] = rgb[i + 1];
      out[j + 2] = rgb[i + 2];
    }
  }
  return out;
}

/**
 * unmirrored is a detection made on the photo mirrored left to right, in the photo's own pixels: x mirrored back
 * (pixel i spans [i, i + 1), so x becomes width - x) and the other hand, so that {@link facing} says the same.
 */
function unmirrored(d: HandDetection, width: number): HandDetection {
  return { ...d, landmarks: d.landmarks.map(([x, y]) => [width - x, y]), handedness: d.handedness === "left" ? "right" : "left" };
}

/** FILL_TURNS: the ways up the fingers may point in a {@link Filling} search. */
const FILL_TURNS = [0, 0.5 * Math.PI, Math.PI, 1.5 * Math.PI] as const;
/**
 * TIGHT_TURNS: how many ways up a later filling search tries, those where the first filling search
 * saw the highest presence: on the training part's tight close-ups the later searches' palms lie in
 * its first or second (docs/decisions/palm-searches.md), and a photo without a hand pays half.
 */
const TIGHT_TURNS = 2;

/**
 * Filling is a search for a palm that fills the photo, without the detector: the landmark model
 * sees the photo shrunk into its crop (the crop `scale` times the photo's longer side, its centre
 * `shift` of the crop's side from the photo's centre towards the fingers), black around it, once
 * for each of {@link FILL_TURNS} (or the `turns` likeliest of them, by the first filling search's
 * presence); the palm with the highest presence is kept. Chosen on the box set's training part
 * as close-ups (`eval:boxes --degrade closeup`; `tight` for the larger crops); pinned by
 * hand-landmarker.spec "finds the palm that fills a close-up" (closeup and tight).
 */
interface Filling {
  /** The crop's side over the photo's longer side. */
  scale: number;
  /** How far the crop's centre lies from the photo's towards the fingers, in crop sides. */
  shift: number;
  /** Only this many ways up, the likeliest by the first filling search; all four when absent. */
  turns?: number;
}

/**
 * SEARCHES are the tries, in order, until one finds a palm the landmark model accepts: the photo as
 * it is; zoomed out (the detector was trained on hands that fill part of the frame, so a close-up
 * whose palm fills it is shown smaller, on black); brightened (a dark photo, see {@link brighten});
 * both; then one more zoom-out, tried only where a search has shown the back of a hand and none a
 * palm (a cupped close-up can read as a back at one zoom and a palm at another; a photo without a
 * hand does not pay for it); last, where no search found a hand at all, the photo as if padded with
 * black: the landmark model too sees black beyond the frame, not the edge drawn out (a dark close-up
 * is a palm only so). It comes last because it moves the landmarks of close-ups found before, and
 * not after a back because it read a back as a palm. Where a dark photo still shows no palm, the
 * same three again on a copy lifted by a plain gain instead of the gamma curve: an underexposed
 * photo's noise, lifted by the curve's steep foot, hides the hand. Last of all, where no search has
 * shown a palm, the photo read as a palm that fills it ({@link Filling}): a close-up whose fingers
 * run past the frame, which the detector does not find; then twice more with the palm drawn
 * smaller, for a close-up cut at the palm's own edges, each only in the ways up that the first of
 * them found likeliest; and at the very end the likeliest palm those fillings saw, at a lower
 * presence ({@link WEAK_PRESENCE}), for the line model to confirm or refuse
 * (docs/decisions/palm-searches.md).
 */
const SEARCHES: readonly Search[] = [
  { zoomOut: 1, brighten: false },
  { zoomOut: 1.8, brighten: false },
  { zoomOut: 1, brighten: "gamma" },
  { zoomOut: 1.8, brighten: "gamma" },
  { zoomOut: 1.4, brighten: false, afterBack: true },
  { zoomOut: 2.2, brighten: false, padded: true, noneSeen: true },
  { zoomOut: 1, brighten: "gain" },
  { zoomOut: 1.8, brighten: "gain" },
  { zoomOut: 2.2, brighten: "gain", padded: true },
  { zoomOut: 1, brighten: false, filling: { scale: 2.6, shift: 0.1 } },
  { zoomOut: 1, brighten: false, filling: { scale: 3.0, shift: 0, turns: TIGHT_TURNS } },
  { zoomOut: 1, brighten: false, filling: { scale: 3.4, shift: 0, turns: TIGHT_TURNS } },
  { zoomOut: 1, brighten: false, weak: true },
];

/**
 * MIRRORED_SEARCHES run on the photo mirrored left to right, after every search of SEARCHES has shown no palm: the
 * filling searches and the weak one. The landmark model is not symmetric: on the box set's training part, 13 of the
 * 33 tight close-ups no search found are palms mirrored, with 34 lines agreeing with their boxes and 2 drawn wrong;
 * mirroring every search found the same 13 (docs/decisions/palm-searches.md, "The photo mirrored, last"). Pinned by
 * hand-landmarker.spec "finds the palm of a tight close-up in the photo mirrored".
 */
const MIRRORED_SEARCHES: readonly Search[] = SEARCHES.filter((search) => search.filling || search.weak);

/**
 * WEAK_PRESENCE: the presence down to which the last search takes the filling searches' likeliest
 * palm (MediaPipe's bar, {@link HandLandmarkerOptions.minPresence}, is 0.5), so that the line model
 * may confirm it. On the training part's tight close-ups 0.2 found 17 palms more, with 45 agreeing
 * lines and 2 drawn wrong; down to 0.05 the lines it added were one in eight wrong
 * (docs/decisions/palm-searches.md; hand-landmarker.spec "finds the palm that fills a close-up").
 */
const WEAK_PRESENCE = 0.2;

interface Search {
  /** The detector sees the photo this many times smaller, centred on black. */
  zoomOut: number;
  /** On a copy brightened by this curve ({@link brighten}); skipped where the photo is not dark. */
  brighten: false | Lift;
  /** Only where an earlier search has shown the back of a hand. */
  afterBack?: boolean;
  /** The landmark model sees black beyond the photo's edge (as if padded), not the edge replicated. */
  padded?: boolean;
  /** Only where no earlier search has found a hand, palm or back. */
  noneSeen?: boolean;
  /** No detector: the photo read as a palm that fills it ({@link Filling}). */
  filling?: Filling;
  /** The filling searches' likeliest palm again, with the presence bar lowered to {@link WEAK_PRESENCE}. */
  weak?: boolean;
}

/**
 * MAX_REFUSED: after this many palms refused by `detect`'s `accept`, the search ends; each refusal
 * costs the caller a line-model run.
 */
const MAX_REFUSED = 3;

/** A photo whose mean luminance is under DARK (of 255) is brightened for the fallback search. */
const DARK = 90;

/** Lift: how {@link brighten} lifts a dark photo. */
type Lift = "gamma" | "gain";

/** meanLuminance is a photo's mean luminance, 0-1, from at most about 65,536 of its pixels. */
function meanLuminance(rgb: Uint8Array, n: number): number {
  const step = Math.max(1, Math.floor(n / 65536));
  let sum = 0;
  let count = 0;
  for (let i = 0; i < n; i += step) {
    sum += 0.299 * rgb[3 * i] + 0.587 * rgb[3 * i + 1] + 0.114 * rgb[3 * i + 2];
    count++;
  }
  return sum / count / 255;
}

/**
 * brighten returns a copy of a dark photo of `n` pixels (mean luminance `mean`) lifted to a mean
 * of about 45%, or undefined when it is not dark: by a gamma curve (creases keep their contrast: a
 * monotone curve) or by a plain gain (highlights clip; the shadows' noise is lifted no more than
 * the rest).
 */
function brighten(rgb: Uint8Array, n: number, mean: number, lift: Lift): Uint8Array | undefined {
  if (mean * 255 >= DARK || mean <= 0) return undefined;
  const gamma = Math.log(0.45) / Math.log(mean);
  const lut = new Uint8Array(256);
  for (let v = 0; v < 256; v++)
    lut[v] = lift === "gain" ? Math.min(255, Math.round((v * 0.45) / mean)) : Math.round(255 * (v / 255) ** gamma);
  const out = new Uint8Array(n * 3);
  for (let i = 0; i < n * 3; i++) out[i] = lut[rgb[i]];
  return out;
}

/**
 * searchHand tries `searches` (SEARCHES unless given) in order (`tryOnce`: one detector and landmark run on
 * the photo or its brightened copy) until one gives a palm facing the camera whose landmarks the
 * landmark model accepts (and `accept`, where given): a close-up can be detected as it is and yet
 * need the zoom-out for its landmarks, and an answer that shows the back, or a palm `accept`
 * refuses, does not end the search; only when no search shows an accepted palm is the first back
 * answered. Pinned by hand-landmarker.spec "finds a hand on every photo"
 * (box-492, a close-up, needs the zoom-out), "finds the palm on close-ups whose fingers are out of
 * the frame", "goes on past an answer that shows the back" and "finds the palm on a dark close-up
 * by padding it". `budget.refused` counts the palms `accept` refused, across the passes of one
 * detect, up to MAX_REFUSED.
 */
async function searchHand(
  rgb: Uint8Array,
  width: number,
  height: number,
  tryOnce: (image: Uint8Array, search: Search) => Promise<HandDetection | null>,
  accept?: (palm: HandDetection) => Promise<boolean>,
  searches: readonly Search[] = SEARCHES,
  budget = { refused: 0 },
): Promise<HandDetection | null> {
  // The mean luminance, read once a search needs it; by lift, the brightened copy, or null where
  // the photo is not dark (no copy).
  let mean: number | undefined;
  const brightened = new Map<Lift, Uint8Array | null>();
  let back: HandDetection | null = null;
  if (budget.refused >= MAX_REFUSED) return null;
  for (const search of searches) {
    if ((search.afterBack && !back) || (search.noneSeen && back)) continue;
    let image = rgb;
    if (search.brighten) {
      mean ??= meanLuminance(rgb, width * height);
      if (!brightened.has(search.brighten)) brightened.set(search.brighten, brighten(rgb, width * height, mean, search.brighten) ?? null);
      const copy = brightened.get(search.brighten);
      if (!copy) continue;
      image = copy;
    }
    const found = await tryOnce(image, search);
    if (!found) continue;
    if (facing(found) === "back") {
      back ??= found;
      continue;
    }
    if (!accept || (await accept(found))) return found;
    if (++budget.refused >= MAX_REFUSED) break;
  }
  return back;
}

/** LandmarkPass is one run of the landmark model: landmarks in image pixels, presence, P(MediaPipe's "Left"). */
interface LandmarkPass {
  landmarks: Point[];
  presence: number;
  handedness: number;
}

/** FillState is what one detect call's {@link Filling} searches leave for the searches after them. */
interface FillState {
  /** The ways up by presence in the first filling search, likeliest first: the later ones try the first few. */
  likeliest: number[];
  /** The palm-facing pass with the highest presence of any filling search, if at least {@link WEAK_PRESENCE}. */
  weak: LandmarkPass | null;
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
 * createHandLandmarker loads the converted palm-detector and hand-landmark models (building them
 * from the installed `@mediapipe/hands` package first when they are missing) and warms them up.
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

  async function landmarkPass(rgb: Uint8Array, width: number, height: number, rect: RotatedRect, padded = false): Promise<LandmarkPass> {
    const border = padded ? "zero" : "replicate";
    const input = warpToTensor(rgb, width, height, rect, { size: LANDMARK_SIZE, range: [0, 1], border });
    const r = await runLandmarks(input);
    const landmarks: Point[] = [];
    for (let k = 0; k < 21; k++) {
      landmarks.push(rectToImage(rect, r.landmarks[3 * k] / LANDMARK_SIZE, r.landmarks[3 * k + 1] / LANDMARK_SIZE));
    }
    return { landmarks, presence: r.presence, handedness: r.handedness };
  }

  async function detect(
    rgb: Uint8Array,
    width: number,
    height: number,
    accept?: (palm: HandDetection) => Promise<boolean>,
  ): Promise<HandDetection | null> {
    if (!(width > 0 && height > 0) || rgb.length < width * height * 3) {
      throw new RangeError(`detect: ${rgb.length} bytes is not a ${width}x${height} RGB image`);
    }
    const t0 = performance.now();
    const timings: HandTimings = { palm: 0, landmarks: [], total: 0 };
    lastTimings = timings;
    const fills: FillState = { likeliest: [], weak: null };
    // One refusal budget for both passes: each refusal costs the caller a line-model run.
    const budget = { refused: 0 };
    let result = await searchHand(
      rgb,
      width,
      height,
      (image, search) => searchOnce(image, width, height, search, timings, fills),
      accept,
      SEARCHES,
      budget,
    );
    if (!result || facing(result) === "back") {
      // The mirrored pass ({@link MIRRORED_SEARCHES}): only where no search has shown a palm, so every palm found
      // before is found as before; a back seen before stays the answer where it shows none either.
      // Each palm is mapped back once, as it is found: `accept` sees the very detection returned.
      const mirroredFills: FillState = { likeliest: [], weak: null };
      const found = await searchHand(
        mirrorRgb(rgb, width, height),
        width,
        height,
        async (image, search) => {
          const d = await searchOnce(image, width, height, search, timings, mirroredFills);
          return d && unmirrored(d, width);
        },
        accept,
        MIRRORED_SEARCHES,
        budget,
      );
      if (found && facing(found) === "palm") result = found;
      else result ??= found;
    }
    timings.total = performance.now() - t0;
    return result;
  }

  async function searchOnce(image: Uint8Array, width: number, height: number, search: Search, timings: HandTimings, fills: FillState) {
    if (search.weak) {
      if (!fills.weak) return null;
      // A back on this little evidence is not an answer: a palm or nothing.
      const found = await refined(image, width, height, fills.weak, true, 0, timings, WEAK_PRESENCE);
      return found && facing(found) === "palm" ? found : null;
    }
    if (search.filling) return searchFilling(image, width, height, search.filling, timings, fills);
    const { zoomOut, padded } = search;
    let t = performance.now();
    // Letterbox: the longer side (times the zoom-out) fills the detector input, centred, black padding.
    const side = Math.max(width, height) * zoomOut;
    const box: RotatedRect = { cx: width / 2, cy: height / 2, width: side, height: side, rotation: 0 };
    // A fallback's input is shrunk further: averaged over every image pixel, not 2 x 2 samples, so
    // that a close-up's creases and edges do not alias into noise (hand-landmarker.spec, close-up 17).
    const maxSamples = zoomOut > 1 ? 8 : 2;
    const input = warpToTensor(image, width, height, box, { size: PALM_SIZE, range: [0, 1], border: "zero", maxSamples });
    const raw = await runPalm(input);
    const found = weightedNms(decodePalmDetections(raw.boxes, raw.scores, anchors, PALM_SIZE, minScore), 0.3);
    timings.palm += performance.now() - t;
    if (found.length === 0) return null;
    const best = found[0];
    // Normalised letterbox coordinates -> image pixels.
    const toImage = ([x, y]: Point): Point => [box.cx + (x - 0.5) * side, box.cy + (y - 0.5) * side];
    const [cx, cy] = toImage([best.cx, best.cy]);
    const palmRect = handRectFromPalm({ cx, cy, w: best.w * side, h: best.h * side }, best.keypoints.map(toImage));
    t = performance.now();
    const pass = await landmarkPass(image, width, height, palmRect, padded);
    timings.landmarks.push(performance.now() - t);
    return refined(image, width, height, pass, padded ?? false, best.score, timings);
  }

  /**
   * searchFilling: the {@link Filling} crops, one per way up; the palm with the highest presence,
   * refined. The first one fills `fills.likeliest` with the ways up by presence (palm or back); each
   * keeps `fills.weak` the likeliest palm-facing pass down to {@link WEAK_PRESENCE}.
   */
  async function searchFilling(image: Uint8Array, width: number, height: number, filling: Filling, timings: HandTimings, fills: FillState) {
    const { likeliest } = fills;
    const side = Math.max(width, height);
    let best: LandmarkPass | null = null;
    const turns = filling.turns === undefined || likeliest.length === 0 ? FILL_TURNS : likeliest.slice(0, filling.turns);
    const presence: number[] = [];
    for (const rotation of turns) {
      const rect = transformRect(
        { cx: width / 2, cy: height / 2, width: side, height: side, rotation },
        filling.scale,
        0,
        -filling.shift * filling.scale,
      );
      const t = performance.now();
      const pass = await landmarkPass(image, width, height, rect, true);
      timings.landmarks.push(performance.now() - t);
      const palm = facing({ landmarks: pass.landmarks, ...handednessFromModel(pass.handedness) }) === "palm";
      if (palm && pass.presence >= minPresence && (!best || pass.presence > best.presence)) best = pass;
      if (palm && pass.presence >= WEAK_PRESENCE && (!fills.weak || pass.presence > fills.weak.presence)) fills.weak = pass;
      presence.push(pass.presence);
    }
    if (likeliest.length === 0)
      likeliest.push(
        ...turns
          .map((turn, i) => ({ turn, p: presence[i] }))
          .sort((a, b) => b.p - a.p)
          .map(({ turn }) => turn),
      );
    // No detector ran: its score is reported as 0.
    return best ? refined(image, width, height, best, true, 0, timings) : null;
  }

  /** refined runs the landmark model once more in the rect a first pass's landmarks give (MediaPipe's re-crop). */
  async function refined(
    image: Uint8Array,
    width: number,
    height: number,
    first: LandmarkPass,
    padded: boolean,
    detectionScore: number,
    timings: HandTimings,
    bar = minPresence,
  ): Promise<HandDetection | null> {
    let pass = first;
    if (refine && pass.presence >= bar) {
      const t = performance.now();
      const second = await landmarkPass(image, width, height, handRectFromLandmarks(pass.landmarks), padded);
      timings.landmarks.push(performance.now() - t);
      if (second.presence >= bar) pass = second;
    }
    if (!(pass.presence >= bar)) return null;
    return {
      landmarks: pass.landmarks,
      ...handednessFromModel(pass.handedness),
      presence: pass.presence,
      detectionScore,
    };
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
