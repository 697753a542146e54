/**
 * The canonical palm frame: the square, upright view of the palm in which the line model works.
 * Derived from the hand landmarks so that a photo mirrored or turned gives the same view, and
 * mirrored where needed so that every hand is seen as a right palm (index on the right). The
 * synthetic generator renders its training views with the same rule (`palm_frame` in
 * training/synth.py): change both together.
 */
import { type Point, inPhoto } from "./geometry.js";

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
export const RING_MCP = 13;
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

/**
 * Below this room beyond the knuckles (knuckleRoom) a photo is a close-up: on 348 of the box set's training photos,
 * 4 of 346 whole photos fell under it and 8 of 670 close-ups over it (docs/decisions/closeup-frames.md).
 */
export const CLOSEUP_MARGIN = 0.45;
/** The wrist's move on a close-up: exp(a + b ln(|9 - 0| / |5 - 17|)), within [1, CLOSEUP_MAX_MOVE]. */
const CLOSEUP_A = 0.191;
const CLOSEUP_B = -0.263;
const CLOSEUP_MAX_MOVE = 1.3;

/** margin is how far `p` lies from the edge of a width x height photo along the unit vector `u`; 0 outside it. */
function margin(p: Point, u: Point, width: number, height: number): number {
  if (!inPhoto(p, width, height)) return 0;
  let t = Infinity;
  for (const [k, lim] of [
    [0, width],
    [1, height],
  ] as const) {
    if (Math.abs(u[k]) < 1e-9) continue;
    t = Math.min(t, ((u[k] > 0 ? lim : 0) - p[k]) / u[k]);
  }
  return t;
}

/**
 * knuckleRoom is the room a width x height photo leaves beyond the four knuckles, toward the fingers, in lengths
 * of wrist to middle knuckle (0 where a knuckle lies outside the photo).
 */
export function knuckleRoom(landmarks: readonly Point[], width: number, height: number): number {
  const up = sub(landmarks[MIDDLE_MCP], landmarks[WRIST]);
  const d = Math.hypot(up[0], up[1]);
  if (d < 1e-6) return 0;
  const toFingers: Point = [up[0] / d, up[1] / d];
  return Math.min(...[INDEX_MCP, MIDDLE_MCP, RING_MCP, PINKY_MCP].map((i) => margin(landmarks[i], toFingers, width, height))) / d;
}

/**
 * closeupLandmarks are the landmarks a frame is derived from on a width x height photo: the model's own, except
 * where the photo ends within CLOSEUP_MARGIN beyond the knuckles (the fingers out of it). There the landmark model
 * puts the wrist too close to the knuckles, so the frame comes out too small and the lines wrong; the wrist is
 * moved out along the palm's axis, the more the shorter the palm is against its knuckle span. Fitted on the box
 * set's training part (docs/decisions/closeup-frames.md); whole photos keep their landmarks, the same array.
 * Pinned by test/unit/landmarks/palm-frame.spec.ts ("closeupLandmarks()"). Only the frame uses them: answers and
 * traits keep the model's own. Engine only: training views are cut from whole hands, so synth.py has no counterpart.
 */
export function closeupLandmarks(landmarks: readonly Point[], width: number, height: number): readonly Point[] {
  const w = landmarks[WRIST];
  const m = landmarks[MIDDLE_MCP];
  const up = sub(m, w);
  const d = Math.hypot(up[0], up[1]);
  const span = palmWidth(landmarks);
  if (d < 1e-6 || span < 1e-6 || knuckleRoom(landmarks, width, height) >= CLOSEUP_MARGIN) return landmarks;
  const move = Math.min(Math.max(Math.exp(CLOSEUP_A + CLOSEUP_B * Math.log(d / span)), 1), CLOSEUP_MAX_MOVE);
  const out = landmarks.slice();
  out[WRIST] = [m[0] - up[0] * move, m[1] - up[1] * move];
  return out;
}

/** shareInside is the share of `frame`'s square that lies inside a width x height photo (16 x 16 samples). */
export function shareInside(frame: PalmFrame, width: number, height: number): number {
  let n = 0;
  for (let i = 0; i < 16; i++) {
    for (let j = 0; j < 16; j++) {
      if (inPhoto(frameToImage(frame, 16, i, j), width, height)) n++;
    }
  }
  return n / 256;
}
