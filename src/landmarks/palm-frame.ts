/**
 * The canonical palm frame: the square, upright view of the palm in which the line model works.
 * Derived from the hand landmarks so that a photo mirrored or turned gives the same view, and
 * mirrored where needed so that every hand is seen as a right palm (index on the right). The
 * synthetic generator renders its training views with the same rule (`palm_frame` in
 * training/synth.py): change both together.
 */
import type { Point } from "./geometry.js";

/**
 * FRAME_SIDE is the frame's side in units of the palm's size (see {@link palmFrame}): the default
 * of a line model whose file names no `frame_side` (every released one).
 */
export const FRAME_SIDE = 1.7;
/** FRAME_WIDTH converts the knuckle span (index to little MCP) into a palm size. */
export const FRAME_WIDTH = 1.3;

/** MediaPipe landmark indices the frame uses. */
export const WRIST = 0;
export const INDEX_MCP = 5;
export const MIDDLE_MCP = 9;
export const PINKY_MCP = 17;

/**
 * PalmFrame maps model pixels to image pixels: model pixel (u, v) of an S x S view has its centre
 * at image point `centre + ((u + 0.5) / S - 0.5) * side * ex + ((v + 0.5) / S - 0.5) * side * ey`.
 * `ex`, `ey` are unit vectors; `mirrored` is true when (ex, ey) is a reflection of the image axes.
 */
export interface PalmFrame {
  centre: Point;
  ex: Point;
  ey: Point;
  /** Side of the square view in image pixels. */
  side: number;
  mirrored: boolean;
}

function sub(a: Point, b: Point): Point {
  return [a[0] - b[0], a[1] - b[1]];
}

function dot(a: Point, b: Point): number {
  return a[0] * b[0] + a[1] * b[1];
}

/**
 * palmFrame derives the frame from 21 landmarks: +y runs from the middle-finger knuckle (9) toward
 * the wrist (0), +x across it, flipped so that the index knuckle (5) lies on +x of the little-finger
 * knuckle (17); centre halfway between wrist and middle knuckle; side `frameSide` (a line model's
 * `frame_side`, FRAME_SIDE unless it names one) x the palm size, max(|9 - 0|, FRAME_WIDTH x |5 - 17|)
 * (the second keeps a palm foreshortened along its length whole).
 * Pinned by test/unit/landmarks/palm-frame.spec.ts (mirror and rotation invariance).
 */
export function palmFrame(landmarks: readonly Point[], frameSide: number = FRAME_SIDE): PalmFrame {
  const w = landmarks[WRIST];
  const m = landmarks[MIDDLE_MCP];
  const up = sub(m, w);
  const d = Math.max(Math.hypot(up[0], up[1]), 1e-6);
  const ey: Point = [-up[0] / d, -up[1] / d];
  let ex: Point = [ey[1], -ey[0]];
  const across = sub(landmarks[INDEX_MCP], landmarks[PINKY_MCP]);
  const mirrored = dot(across, ex) < 0;
  if (mirrored) ex = [-ex[0], -ex[1]];
  const side = frameSide * Math.max(d, FRAME_WIDTH * Math.hypot(across[0], across[1]));
  return { centre: [(w[0] + m[0]) / 2, (w[1] + m[1]) / 2], ex, ey, side, mirrored };
}

/** frameToImage maps a model-pixel position (u, v) of an S x S view (pixel centres at u + 0.5) to the image. */
export function frameToImage(frame: PalmFrame, size: number, u: number, v: number): Point {
  const a = ((u + 0.5) / size - 0.5) * frame.side;
  const b = ((v + 0.5) / size - 0.5) * frame.side;
  return [frame.centre[0] + a * frame.ex[0] + b * frame.ey[0], frame.centre[1] + a * frame.ex[1] + b * frame.ey[1]];
}

/** imageToFrame is the inverse of {@link frameToImage}. */
export function imageToFrame(frame: PalmFrame, size: number, x: number, y: number): Point {
  const d: Point = [x - frame.centre[0], y - frame.centre[1]];
  return [(dot(d, frame.ex) / frame.side + 0.5) * size - 0.5, (dot(d, frame.ey) / frame.side + 0.5) * size - 0.5];
}

/** squareFrame is the axis-aligned frame of a square image region {x, y, side} (no rotation). */
export function squareFrame(box: { x: number; y: number; side: number }): PalmFrame {
  return { centre: [box.x + box.side / 2, box.y + box.side / 2], ex: [1, 0], ey: [0, 1], side: box.side, mirrored: false };
}

/** palmWidth is the knuckle span |5 - 17| in image pixels, the unit of line lengths. */
export function palmWidth(landmarks: readonly Point[]): number {
  const d = sub(landmarks[INDEX_MCP], landmarks[PINKY_MCP]);
  return Math.hypot(d[0], d[1]);
}
