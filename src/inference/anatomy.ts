/**
 * Anatomy from the hand landmarks (issue 28, item 3), as a veto: a line whose course lies where
 * that line never runs on a palm is reported not detected, reason "implausible". Only rules that
 * refuse no line agreeing with its box on the box set's training part are here; the rules about
 * the thumb refused right lines wherever the landmarks were off and are not
 * (docs/decisions/anatomy-veto.md; scripts/anatomy-rules.ts measures them again).
 */
import type { LineName } from "./analyzer-types.js";
import type { ModelPoint } from "./line-geometry.js";

/**
 * implausibleCourse says whether a line's course contradicts the palm's anatomy. `course` is in
 * reading order (line-geometry.ts: heart from its little-finger end, life from its upper end);
 * `midU` is the frame's u halfway between the index and little-finger knuckles (landmarks 5, 17),
 * which splits the palm into its index half (u > midU: every hand is a right palm in the frame)
 * and its little-finger half.
 * - life: its upper end lies on the little-finger half (the life line starts between the index
 *   knuckle and the thumb);
 * - heart: even its little-finger end lies on the index half (the heart line starts at the
 *   palm's little-finger edge).
 * Pinned by test/unit/inference/pipeline.spec.ts ("reports a line against the palm's anatomy").
 */
export function implausibleCourse(line: LineName, course: readonly ModelPoint[], midU: number): boolean {
  if (course.length === 0) return false;
  const [u] = course[0];
  if (line === "life") return u < midU;
  if (line === "heart") return u > midU;
  return false;
}
