/**
 * Shared types between the analysis engine (src/image, src/inference) and the service
 * (src/service, src/auth, src/rest). The engine implements {@link Analyzer}; the service only
 * depends on this file and on the typed errors.
 */

/** LINE_NAMES lists the three principal lines in the order the model emits them after "palm". */
export const LINE_NAMES = ["heart", "head", "life"] as const;

/** LineName is one of the three principal lines. */
export type LineName = (typeof LINE_NAMES)[number];

/** LineStats is SPEC.md section 3 `stats.<line>`. */
export interface LineStats {
  /** Number of 255 pixels in the full-size mask. */
  pixels: number;
  /** Mean model probability over those pixels, in [0,1]; 0 when there are none. */
  confidence: number;
  /** Percentage of the image's pixels covered by the mask, in [0,100], rounded to two decimals. */
  coverage: number;
  /** Whether the line was found (enough pixels and confidence). */
  detected: boolean;
  /** The line's course in image pixels, in reading order (see line-geometry.ts); empty when not detected. */
  polyline: [number, number][];
  /** Length of the polyline as a fraction of {@link HandInfo.palmWidth}; 0 when not detected. */
  length: number;
  /** Why the line is not reported ({@link LineReason}); "" when detected. */
  reason: LineReason;
  /** The line's traits (line-traits.ts); absent when not detected. */
  traits?: LineTraits;
}

/** LineEnd places one end of a line relative to the landmarks (see line-traits.ts `placeOnPalm`). */
export interface LineEnd {
  /** Image pixels. */
  point: [number, number];
  /** Across the palm: 0 at the little-finger knuckle (17), 1 at the index knuckle (5). */
  across: number;
  /** Down the palm: 0 on the knuckle line 17-5, 1 at the wrist (0). */
  along: number;
  zone: "little" | "ring" | "middle" | "index" | "thumb_side" | "wrist";
}

/** LineTraits are a detected line's traits, numbers and the words of docs/api.md's scales. */
export interface LineTraits {
  length: "short" | "medium" | "long";
  /** Sagitta over chord: the course's largest distance from the line joining its ends, over that line's length. */
  curvature: number;
  curvatureLabel: "straight" | "curved" | "strongly_curved";
  /** 1 - crease brightness / skin brightness beside it, in [0,1]. */
  depth: number;
  depthLabel: "faint" | "medium" | "deep";
  /** Gaps along the course: where (fraction of the course from the start), how long (palm widths), the middle (image pixels). */
  breaks: { at: number; length: number; point: [number, number] }[];
  /** Branches near an end: which end, reach in palm widths, where they leave the course (image pixels). */
  forks: { near: "start" | "end"; length: number; point: [number, number] }[];
  start: LineEnd;
  end: LineEnd;
}

/** HeadLifeStart: whether the head and life lines start joined, and their closest gap there (palm widths). */
export interface HeadLifeStart {
  joined: boolean;
  gap: number;
}

/** HandShape is the hand's proportions from its landmarks (hand-shape.ts; docs/api.md "Hand shape"). */
export interface HandShape {
  /** Wrist (0) to middle knuckle (9), image pixels. */
  palmLength: number;
  /** palmLength / palm width. */
  palmRatio: number;
  palm: "square" | "long";
  /** Knuckle-to-tip length along the joints, per finger, over palmLength. */
  fingers: Record<"thumb" | "index" | "middle" | "ring" | "little", number>;
  fingerLength: "short" | "long";
  /** Index length / ring length. */
  indexRingRatio: number;
  handType: "earth" | "air" | "fire" | "water";
  /** Every fingertip (4, 8, 12, 16, 20) inside the photo; else the finger values are estimates beyond its edge. */
  fingersInPhoto: boolean;
}

/**
 * LineReason says why one line is not reported: the answer's own reason when no line is
 * (`no_hand`, `back_of_hand`, `lines_unclear`), else `not_visible` (no crease in the model's
 * evidence), `implausible` (evidence only off the palm), `low_confidence` (too weak or too
 * short); "" when the line is reported.
 */
export type LineReason = NoLinesReason | "not_visible" | "implausible" | "low_confidence";

/**
 * NoLinesReason says why no line is reported: no hand found, the back of a hand, or a palm whose
 * lines are unclear; "" when lines are reported.
 */
export type NoLinesReason = "" | "no_hand" | "back_of_hand" | "lines_unclear";

/** HandInfo is the hand the engine found. */
export interface HandInfo {
  /** Which hand it is (for a photo that is not mirrored). */
  handedness: "left" | "right";
  /** The 21 hand landmarks (MediaPipe order: 0 wrist, 4 thumb tip, 5/9/13/17 knuckles...), image pixels. */
  landmarks: [number, number][];
  /** Distance between the index and little-finger knuckles (landmarks 5 and 17), image pixels. */
  palmWidth: number;
  /** The hand's proportions. */
  shape: HandShape;
}

/** AnalysisResult is everything the engine produces for one image. */
export interface AnalysisResult {
  /** Model version from the ONNX metadata, e.g. "palm-lines-1.0.0". */
  model: string;
  /** Width and height of the EXIF-oriented input, in pixels. */
  width: number;
  height: number;
  /** JPEG overlay, width x height (or scaled down to `maxOverlaySide`); empty when not asked for. */
  overlay: Uint8Array;
  /** Single-channel PNG per line, width x height, 255 on the line and 0 elsewhere; empty when not asked for. */
  masks: Record<LineName, Uint8Array>;
  stats: Record<LineName, LineStats>;
  /** The hand found; absent when none was (or the line model saw no palm where it was). */
  hand?: HandInfo;
  /** Why no line is reported; "" when at least one is. */
  reason: NoLinesReason;
  /** Head and life start joined or apart; absent unless both were detected. */
  headLifeStart?: HeadLifeStart;
}

/**
 * ImageOutput says which images an analysis makes (lean answers, SPEC.md section 9): what is not
 * asked for is not computed, and its {@link AnalysisResult} field is empty (0 bytes).
 */
export interface ImageOutput {
  /** Make the overlay JPEG. */
  overlay: boolean;
  /** Make the three mask PNGs. */
  masks: boolean;
  /** Longest side of the overlay in pixels (scaled down, aspect ratio kept); 0: the photo's size. */
  maxOverlaySide: number;
}

/** ALL_IMAGES is the default {@link ImageOutput}: every image, at full size. */
export const ALL_IMAGES: ImageOutput = Object.freeze({ overlay: true, masks: true, maxOverlaySide: 0 });

/** AnalyzeOptions are per-call options of {@link Analyzer.analyze}. */
export interface AnalyzeOptions {
  /** Which images to make. Default {@link ALL_IMAGES}. */
  images?: ImageOutput;
  /** Aborts queued or running work (request deadline, client gone). */
  signal?: AbortSignal;
  /**
   * Called once admission control accepted the analysis (it holds a place, running or queued)
   * and before it starts; the analysis waits for it, and its rejection rejects the analysis with
   * the same error and frees the place. The service reserves the quota unit here, so that a
   * request refused as overloaded never holds one.
   */
  admitted?: () => Promise<void>;
  /**
   * Who asks: the admission queue serves waiting analyses client by client in turn, so that one
   * client's backlog never pushes another's work out (admission.ts). Default: one anonymous client.
   */
  clientId?: string;
  /**
   * When the answer is due (Unix ms). An analysis that cannot finish by then is refused before
   * it starts with `DeadlineTooShortError` (src/engine-errors.ts; nothing run, 504 `timeout`).
   */
  deadline?: number;
}

/** Analyzer turns image bytes into an {@link AnalysisResult}. */
export interface Analyzer {
  /** Model version, known once loaded: the `model` field of every result. */
  readonly model: string;
  /**
   * analyze runs the whole pipeline on one image file. Throws ImageError for bad input,
   * OverloadedError when the replica's bounded queue is full, and anything else for faults.
   */
  analyze(image: Uint8Array, options?: AnalyzeOptions): Promise<AnalysisResult>;
  /**
   * close refuses new work, rejects queued analyses, waits (bounded) for running ones to finish,
   * then stops the worker pool.
   */
  close(): Promise<void>;
}
