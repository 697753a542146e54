/**
 * How far a line's traits move when its photo is turned: the engine measures in the palm's own
 * upright view, so a turned photo should read the same. The bounds are those of
 * test/unit/inference/real-photos.spec.ts ("turned by 90 degrees"), which imports them.
 */
import sharp from "sharp";
import type { LineTraits } from "../src/inference/analyzer-types.js";

export const TURN_BOUNDS = Object.freeze({ curvature: 0.02, depth: 0.02, end: 0.05 });

/** turned90 is a photo turned by 90 degrees (after its EXIF orientation), as a PNG: what eval:boxes --turned reads. */
export function turned90(bytes: Buffer): Promise<Buffer> {
  return sharp(bytes).rotate().rotate(90).png().toBuffer();
}

/** traitsMoved names the traits of one line that differ between two readings beyond TURN_BOUNDS. */
export function traitsMoved(a: LineTraits, b: LineTraits): string[] {
  const moved: string[] = [];
  if (Math.abs(a.curvature - b.curvature) > TURN_BOUNDS.curvature) moved.push("curvature");
  if (Math.abs(a.depth - b.depth) > TURN_BOUNDS.depth) moved.push("depth");
  for (const end of ["start", "end"] as const) {
    if (Math.abs(a[end].across - b[end].across) > TURN_BOUNDS.end) moved.push(`${end} across`);
    if (Math.abs(a[end].along - b[end].along) > TURN_BOUNDS.end) moved.push(`${end} along`);
  }
  return moved;
}

/** TurnTally counts, over lines drawn on a photo both as taken and turned, those whose traits moved. */
export class TurnTally {
  pairs = 0;
  moved = 0;
  wordFlips = 0;
  /** Lines drawn on one reading and not the other. */
  drawnOnce = 0;
  readonly byTrait = new Map<string, number>();

  add(a: LineTraits | undefined, b: LineTraits | undefined): string[] {
    if (!a || !b) {
      if (a || b) this.drawnOnce++;
      return [];
    }
    this.pairs++;
    const moved = traitsMoved(a, b);
    if (moved.length > 0) this.moved++;
    for (const t of moved) this.byTrait.set(t, (this.byTrait.get(t) ?? 0) + 1);
    if (a.curvatureLabel !== b.curvatureLabel || a.length !== b.length || a.depthLabel !== b.depthLabel) this.wordFlips++;
    return moved;
  }

  summary(): string {
    const traits = [...this.byTrait.entries()].map(([k, n]) => `${k} ${n}`).join(", ");
    return (
      `${this.moved} of ${this.pairs} lines moved beyond the turned-photo bounds (${traits || "none"}); ` +
      `${this.wordFlips} changed a length, curvature or depth word; ${this.drawnOnce} drawn on one reading only`
    );
  }
}
