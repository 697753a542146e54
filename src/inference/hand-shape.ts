/**
 * Hand shape from the 21 landmarks: palm length and proportions, finger lengths and the classic
 * element hand. The convention (which landmarks, which thresholds) is docs/api.md's "Hand shape";
 * pinned by test/unit/inference/hand-shape.spec.ts.
 */
import { type Point, inPhoto } from "../landmarks/geometry.js";
import { INDEX_MCP, MIDDLE_MCP, PINKY_MCP, WRIST } from "../landmarks/palm-frame.js";
import type { HandShape } from "./analyzer-types.js";

/** SQUARE_PALM_BELOW: a palm is "square" when palm length / knuckle span is under this, else "long". */
export const SQUARE_PALM_BELOW = 1.5;
/** LONG_FINGERS_FROM: fingers are "long" when the middle finger is at least this many palm lengths. */
export const LONG_FINGERS_FROM = 1.0;

/** Each finger's landmarks from its base knuckle to its tip (the thumb from its MCP joint, 2). */
const FINGERS = {
  thumb: [2, 3, 4],
  index: [5, 6, 7, 8],
  middle: [9, 10, 11, 12],
  ring: [13, 14, 15, 16],
  little: [17, 18, 19, 20],
} as const;

/** The fingertips' landmarks, thumb to little finger. */
const FINGERTIPS = [4, 8, 12, 16, 20] as const;

const dist = (a: Point, b: Point) => Math.hypot(a[0] - b[0], a[1] - b[1]);
const round = (x: number, decimals: number) => Math.round(x * 10 ** decimals) / 10 ** decimals;

/**
 * handShape measures the hand on its landmarks (image pixels, MediaPipe order): palm length
 * |0 - 9|, palm ratio over the knuckle span |5 - 17|, each finger's length along its joints over
 * the palm length, index over ring, and the element hand from the palm (square or long) and the
 * middle finger (short or long). Lengths are as the photo shows them: a finger bent toward the
 * camera reads shorter. `width` x `height` is the photo the landmarks lie in: a fingertip outside
 * it (a close-up) makes the finger values estimates, and `fingersInPhoto` says so.
 */
export function handShape(landmarks: readonly Point[], width: number, height: number): HandShape {
  const palmLength = dist(landmarks[WRIST], landmarks[MIDDLE_MCP]);
  const span = dist(landmarks[INDEX_MCP], landmarks[PINKY_MCP]);
  const along = (ids: readonly number[]) => {
    let len = 0;
    for (let i = 1; i < ids.length; i++) len += dist(landmarks[ids[i - 1]], landmarks[ids[i]]);
    return len;
  };
  const unit = palmLength > 0 ? palmLength : 1;
  const fingers = {
    thumb: round(along(FINGERS.thumb) / unit, 3),
    index: round(along(FINGERS.index) / unit, 3),
    middle: round(along(FINGERS.middle) / unit, 3),
    ring: round(along(FINGERS.ring) / unit, 3),
    little: round(along(FINGERS.little) / unit, 3),
  };
  const palmRatio = span > 0 ? palmLength / span : 0;
  const palm = palmRatio < SQUARE_PALM_BELOW ? "square" : "long";
  const fingerLength = along(FINGERS.middle) / unit >= LONG_FINGERS_FROM ? "long" : "short";
  const ring = along(FINGERS.ring);
  return {
    palmLength: round(palmLength, 1),
    palmRatio: round(palmRatio, 3),
    palm,
    fingers,
    fingerLength,
    indexRingRatio: ring > 0 ? round(along(FINGERS.index) / ring, 3) : 0,
    handType: palm === "square" ? (fingerLength === "short" ? "earth" : "air") : fingerLength === "short" ? "fire" : "water",
    fingersInPhoto: FINGERTIPS.every((i) => inPhoto(landmarks[i], width, height)),
  };
}
